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
from typing import Callable, Dict, Optional

import numpy as np
import pandas as pd

from ..errors import InputError
from ..files import PathLike, atomic_path
from ..tables import UnwritableText, delimited_bytes
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

    Rows go out in chunks of :data:`WRITE_CHUNK_ROWS`, each formatted by
    :func:`~mrec_warp.tables.delimited_bytes` (the bytes ``to_csv`` writes, several times
    faster), so memory is bounded by the chunk.
    """
    cols = [c for c in CANONICAL_COLUMNS if c in df.columns]
    frame = df[cols]
    if "value" in frame:
        # integral ratings print as "4", not "4.0", so files stay byte-identical to the input's style
        v = frame["value"].to_numpy()
        if np.all(np.isfinite(v)) and np.all(v == np.round(v)) and np.all(np.abs(v) < 2 ** 62):
            frame = frame.assign(value=v.astype(np.int64))
    codec = output_encoding(encoding or df.attrs.get("encoding"))
    ids: Dict[str, Callable[[pd.Series], pd.Series]] = {"user": quote_leading_quotes, "item": quote_leading_quotes}
    try:
        with atomic_path(path) as tmp:
            if not os.path.isfile(tmp):
                # a stream (a pipe, standard output) cannot take back what it was given: its
                # ids are checked before a byte goes out; a file's, chunk by chunk
                check_tsv_ids(df["user"], df["item"], path=path)
            categories: Dict = {}  # a coded id column's texts, formatted once for every chunk
            with open(tmp, "wb") as fh:
                for start in range(0, len(frame), WRITE_CHUNK_ROWS):
                    fh.write(delimited_bytes(frame.iloc[start:start + WRITE_CHUNK_ROWS], codec, text_of=ids,
                                             categories=categories))
    except (csv.Error, UnwritableText):
        # an id with a tab or a line break (the reader refuses those; a table built in Python
        # may hold one): named by the check of every id, run only now, as it costs seconds
        check_tsv_ids(df["user"], df["item"], path=path)
        raise


def file_holds(path: PathLike, needle: bytes) -> bool:
    """Whether the file's bytes contain ``needle`` (one byte; read in chunks, GB/s)."""
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            if needle in chunk:
                return True
    return False
