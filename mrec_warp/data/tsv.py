"""TSV outputs that read back: the ids a TSV cannot hold, and the interactions writer.

A TSV file holds ids exactly as they are, so an id with a tab or a line break cannot be
written to one: every TSV writer of the package refuses it in one line
(:func:`check_tsv_ids`) rather than write a file that reads back shifted. The package's
readers take a field that starts with a double quote as an RFC 4180 quoted field (with
every one-character delimiter, tab included), so the writers of files those readers read
back (interactions, features) write such an id quoted (:func:`quote_leading_quotes`); no
other id is ever quoted.
"""
from __future__ import annotations

import csv
import os
import re
from typing import Optional, Tuple

import numpy as np
import pandas as pd

from ..errors import InputError
from ..files import PathLike, atomic_path
from .inputs import output_encoding
from .interactions import CANONICAL_COLUMNS

#: A character no TSV field can hold.
TSV_UNSAFE = re.compile(r"[\t\r\n]")


def has_tsv_unsafe(ids) -> Optional[str]:
    """The first id holding a tab or a line break (which no TSV output can hold), or ``None``."""
    if isinstance(ids, np.ndarray) and ids.dtype.kind == "U":  # a model's ids: numpy is fastest
        for ch in ("\t", "\n", "\r"):
            hit = np.char.find(ids, ch) >= 0
            if hit.any():
                return str(ids[int(np.flatnonzero(hit)[0])])
        return None
    text = pd.Series(ids).astype(str)
    hit = text.str.contains(TSV_UNSAFE.pattern, regex=True).to_numpy(dtype=bool)
    return str(text.iloc[int(np.flatnonzero(hit)[0])]) if hit.any() else None


def check_tsv_ids(*id_arrays, path: Optional[PathLike] = None) -> None:
    """Refuse to write TSV when an id holds a tab or line break (it would not read back)."""
    for ids in id_arrays:
        bad = has_tsv_unsafe(ids)
        if bad is not None:
            raise InputError(f"id {bad!r} holds a tab or line break, which a TSV file cannot hold",
                             path=None if path is None else str(path),
                             hint="write CSV or Parquet instead (-o out.csv), or remove tabs and line breaks from ids")


def quote_leading_quotes(column: pd.Series) -> pd.Series:
    r"""``column`` with each id that starts with ``"`` written as an RFC 4180 quoted field
    (``"a" b`` is written as three quotes, ``a``, two quotes, `` b`` and a quote), which the readers give back as the same id; every
    other id is left as it is. Non-text columns are returned unchanged."""
    if len(column) == 0 or pd.api.types.is_numeric_dtype(column.dtype):
        return column
    values = column.to_numpy()
    # one search of the joined text rules out the common case (no id starts with a quote)
    if not any('\x00"' in "\x00" + "\x00".join(map(str, values[i:i + (1 << 20)]))
               for i in range(0, len(values), 1 << 20)):
        return column
    lead = column.astype(str).str.startswith('"').to_numpy()
    out = column.copy()
    out[lead] = '"' + column[lead].astype(str).str.replace('"', '""', regex=False) + '"'
    return out


#: Rows formatted at a time by :func:`write_interactions`: bounds its memory at any size.
WRITE_CHUNK_ROWS = 1 << 19


def write_interactions(df: pd.DataFrame, path: PathLike, encoding: Optional[str] = None) -> None:
    """Write the canonical table as headerless TSV (what every reader's default expects).

    Ids are written exactly as they are; only one starting with a double quote is written as
    an RFC 4180 quoted field, which every reader gives back as the same id
    (:func:`quote_leading_quotes`). ``encoding`` defaults to the one the
    table was read in (``df.attrs["encoding"]``, see :func:`output_encoding`), so a Latin-1
    input gives Latin-1 output with the same bytes; otherwise UTF-8.

    Rows go out in chunks of :data:`WRITE_CHUNK_ROWS`; within a chunk each column's distinct
    values are formatted once (by pandas, so numbers look as ``to_csv`` writes them) and
    the lines are assembled from their bytes with numpy, several times faster than
    formatting every row and with memory bounded by the chunk.
    """
    cols = [c for c in CANONICAL_COLUMNS if c in df.columns]
    frame = df[cols]
    if "value" in frame:
        # integral ratings print as "4", not "4.0", so files stay byte-identical to the input's style
        v = frame["value"].to_numpy()
        if np.all(np.isfinite(v)) and np.all(v == np.round(v)) and np.all(np.abs(v) < 2 ** 62):
            frame = frame.assign(value=v.astype(np.int64))
    codec = output_encoding(encoding or df.attrs.get("encoding"))
    try:
        with atomic_path(path) as tmp:
            if not os.path.isfile(tmp):
                # a stream (a pipe, standard output) cannot take back what it was given: its
                # ids are checked before a byte goes out; a file's, chunk by chunk
                check_tsv_ids(df["user"], df["item"], path=path)
            with open(tmp, "wb") as fh:
                for start in range(0, len(frame), WRITE_CHUNK_ROWS):
                    fh.write(_tsv_lines(frame.iloc[start:start + WRITE_CHUNK_ROWS], codec))
    except (csv.Error, _UnsafeId):
        # an id with a tab or a line break (the reader refuses those; a table built in Python
        # may hold one): named by the check of every id, run only now, as it costs seconds
        check_tsv_ids(df["user"], df["item"], path=path)
        raise


class _UnsafeId(Exception):
    """A chunk's id holds a line break that the csv module let through unescaped."""


#: Most bytes of a chunk's padded blocks (rows x the widest value of each column): a
#: chunk over it is written in halves, so one very long id cannot blow up the memory.
WRITE_BLOCK_BYTES = 1 << 25


def _tsv_lines(chunk: pd.DataFrame, encoding: str) -> bytes:
    """The TSV lines of ``chunk``'s rows, encoded.

    Each field becomes a block of ``rows x width`` bytes with a mask of the bytes it uses;
    the blocks side by side, with a tab (a line break after the last) between them, are
    read out through their masks in one pass.
    """
    n = len(chunk)
    if n == 0:
        return b""
    fields = [_integer_bytes(chunk[c].to_numpy()) if chunk[c].dtype.kind in "iu" else
              _text_bytes(chunk[c], encoding, c in ("user", "item")) for c in chunk.columns]
    if n > 1 and n * sum(block.shape[1] + 1 for block, _ in fields) > WRITE_BLOCK_BYTES:
        return _tsv_lines(chunk.iloc[:n // 2], encoding) + _tsv_lines(chunk.iloc[n // 2:], encoding)
    blocks, masks = [], []
    for k, (block, used) in enumerate(fields):
        blocks += [block, np.full((n, 1), ord("\n") if k == len(fields) - 1 else ord("\t"), dtype=np.uint8)]
        masks += [used, np.ones((n, 1), dtype=bool)]
    return np.hstack(blocks)[np.hstack(masks)].tobytes()


def _integer_bytes(values: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Decimal digits of integers, right-aligned in a block, and the mask of the used bytes."""
    negative = values < 0
    magnitude = np.abs(values.astype(np.int64)).astype(np.uint64)  # -2**63 is too large for int64's abs
    digits = np.ones(len(values), dtype=np.int64)
    for power in range(1, 20):
        digits += magnitude >= np.uint64(10 ** power)
    width = int((digits + negative).max())
    block = np.empty((len(values), width), dtype=np.uint8)
    for j in range(width - 1, -1, -1):
        block[:, j] = ord("0") + magnitude % np.uint64(10)
        magnitude //= np.uint64(10)
    lead = width - digits - negative
    rows = np.flatnonzero(negative)
    block[rows, lead[rows]] = ord("-")
    return block, np.arange(width) >= lead[:, None]


def _text_bytes(column: pd.Series, encoding: str, is_id: bool) -> Tuple[np.ndarray, np.ndarray]:
    """Each value's text as TSV writes it (formatted once per distinct value, by pandas; ids
    quoted by :func:`quote_leading_quotes`), left-aligned in a block, and the mask of the
    used bytes."""
    codes, uniques = pd.factorize(column, use_na_sentinel=False)
    values = pd.Series(uniques)
    if is_id:
        values = quote_leading_quotes(values)
    # an empty second column: the csv module refuses a line of one empty field (an empty id,
    # a missing value) without quotes, and each line then ends in a tab and a line break
    text = pd.DataFrame({0: values, 1: ""}).to_csv(sep="\t", header=False, index=False, lineterminator="\n",
                                                    quoting=csv.QUOTE_NONE, escapechar=None)
    blob = np.frombuffer(text.encode(encoding), dtype=np.uint8)
    ends = np.flatnonzero(blob == ord("\n"))
    if len(ends) != len(values) or (is_id and (blob == ord("\r")).any()):
        raise _UnsafeId()
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)
    lengths = ends - 1 - starts
    width = max(1, int(lengths.max()))
    table = np.zeros((len(values), width), dtype=np.uint8)
    used = np.arange(width) < lengths[:, None]
    table[used] = blob[(starts[:, None] + np.arange(width))[used]]
    return table[codes], used[codes]


def file_holds(path: PathLike, needle: bytes) -> bool:
    """Whether the file's bytes contain ``needle`` (one byte; read in chunks, GB/s)."""
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            if needle in chunk:
                return True
    return False
