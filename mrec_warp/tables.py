"""The one writer of result tables (recommendations, similar items, explanations).

Three formats, chosen by :func:`output_format` from ``--format`` or the file's suffix:

* **TSV**: headerless, ids written exactly as they are (never quoted), so that the files
  read back byte for byte;
* **CSV**: a header, fields quoted per RFC 4180 when they need it, and text cells that a
  spreadsheet would run as a formula neutralised (:func:`neutralise_cells`);
* **Parquet** (needs pyarrow): one file written row group by row group.

A text file whose name ends in ``.gz`` is gzip-compressed as one stream. Every file is
written under a temporary name and renamed when complete (:func:`~mrec_warp.files.atomic_write`),
so a reader never sees half a table. Tables come as an iterable of DataFrames (blocks of
users), so a table of any size streams through a bounded amount of memory.
"""
from __future__ import annotations

import contextlib
import csv
import gzip
import io
import re
import sys
from pathlib import Path
from dataclasses import dataclass
from typing import IO, Callable, Dict, Iterable, Iterator, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from .files import PathLike, atomic_path, atomic_write
from .errors import InputError

RECS_FORMATS = ("tsv", "csv", "parquet")

#: A text cell a spreadsheet would run as a formula starts with one of these (OWASP's rule
#: for CSV injection: = + - @, tab, carriage return), possibly after single quotes.
_FORMULA = re.compile(r"'*[=+\-@\t\r]")
#: A cell :func:`neutralise_cells` wrote: one or more quotes, then a formula's first character.
_NEUTRALISED = re.compile(r"'+[=+\-@\t\r]")


def neutralise_cells(frame: pd.DataFrame) -> Tuple[pd.DataFrame, int]:
    """``frame`` with each text cell a spreadsheet would execute written with a leading
    single quote, and the number of cells changed.

    The rule, for CSV only: a cell of a text column (ids, names; numeric columns such as
    scores and ranks are never touched, so a score ``-0.5`` stays a number) that starts
    with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a ``'`` in front, so a
    spreadsheet shows it as text instead of running it: ``=HYPERLINK(...)`` is written
    ``'=HYPERLINK(...)``, and an id ``-1`` is written ``'-1``. So that every cell can be
    read back as it was (:func:`restore_cells`), a cell that already starts with quotes
    followed by one of those characters gets one more quote. The field is then quoted per
    RFC 4180 when it needs it, as any other.
    """
    changed = 0
    out = frame
    for column in frame.columns:
        values = frame[column]
        if not (values.dtype == object or isinstance(values.dtype, (pd.StringDtype, pd.CategoricalDtype))):
            continue
        text = values.astype(object)
        first = text.str[:1]
        candidates = first.isin(("=", "+", "-", "@", "\t", "\r", "'"))
        if not candidates.any():
            continue
        hit = candidates & text.str.match(_FORMULA).fillna(False).astype(bool)
        n = int(hit.sum())
        if n:
            if out is frame:
                out = frame.copy()
            out[column] = text.where(~hit, "'" + text)
            changed += n
    return out, changed


def restore_cells(values: pd.Series) -> pd.Series:
    """Text cells of a CSV file as they were before :func:`neutralise_cells` (one leading
    quote removed from a cell that starts with quotes then ``=``, ``+``, ``-``, ``@``, a tab
    or a carriage return); a file written by another tool that neutralised its cells the
    same way reads the same."""
    text = values.astype(object)
    hit = text.str.match(_NEUTRALISED).fillna(False).astype(bool)
    return text.where(~hit, text.str[1:]).astype(values.dtype) if hit.any() else values


def neutralised_note(n: int) -> Optional[str]:
    """The note saying how many CSV cells :func:`neutralise_cells` changed, if any."""
    if not n:
        return None
    one = n == 1
    return (f"{n:,} CSV {'cell starts' if one else 'cells start'} with =, +, -, @, a tab or a carriage return, "
            f"which a spreadsheet would run as {'a formula' if one else 'formulas'}: written with a leading ' "
            "(evaluate reads them back as they were; TSV and Parquet keep ids as they are)")
#: Columns of a recommendations table (also those of an empty Parquet file).
RECS_COLUMNS = ("user", "item", "score", "rank")
#: The fifth column of a recommendations table where some users may get a fallback list
#: (``recommend --unknown-users popular``): where each row's list came from, the model
#: (:data:`PERSONAL`) or the fallback for a user it does not know (:data:`POPULAR`; see
#: :mod:`mrec_warp.models.fallback`).
SOURCE_COLUMN = "source"
PERSONAL = "personal"
POPULAR = "popular"


@dataclass(frozen=True)
class TableOutput:
    """Where a table is written, and in which format: what a command hands its stage.

    Attributes
    ----------
    path : path-like
        The file (a name ending in ``.gz``: gzip-compressed text).
    format : {"tsv", "csv", "parquet"}, optional
        Default: from the suffix of ``path`` (:func:`output_format`).
    """

    path: PathLike
    format: Optional[str] = None


def is_gzip_name(path) -> bool:
    """Whether an output's name asks for gzip compression (``recs.tsv.gz``)."""
    return str(path).lower().endswith(".gz")


def output_format(path, format: Optional[str] = None) -> str:
    """The format of a table output: ``format`` if given, else from the suffix (a final
    ``.gz`` aside); refuses, before any work, what cannot be written."""
    fmt = format or _format_from_suffix(path)
    if fmt not in RECS_FORMATS:
        raise InputError(f"unknown output format {fmt!r}", hint=f"use one of {', '.join(RECS_FORMATS)}")
    if fmt == "parquet" and is_gzip_name(path):
        raise InputError("Parquet output cannot be gzip-compressed as a whole", path=str(path),
                         hint="drop the .gz: Parquet compresses its columns itself")
    if fmt == "parquet":
        require_pyarrow()
    return fmt


def _format_from_suffix(path) -> str:
    suffixes = [x.lower() for x in Path(str(path)).suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    suffix = suffixes[-1] if suffixes else ""
    return {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}.get(suffix, "tsv")


def require_pyarrow() -> None:
    """Fail in one line when Parquet is asked for and pyarrow is missing."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise InputError("Parquet output needs pyarrow", hint="pip install 'mrec-warp[parquet]'") from None


@contextlib.contextmanager
def text_output(path, encoding: Optional[str] = "utf-8", binary: bool = False) -> Iterator[IO]:
    """An atomic output file (see :func:`~mrec_warp.files.atomic_write`), gzip-compressed
    when its name ends in ``.gz`` so that readers which go by the name (``evaluate``,
    ``zcat``) can read it. Text mode unless ``binary``."""
    with atomic_write(path, mode="wb") as raw:
        # mtime=0 and no name in the header: the same rows give the same bytes on every run
        sink = gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) if is_gzip_name(path) else raw
        if binary:
            yield sink
        else:
            text = io.TextIOWrapper(sink, encoding=encoding, newline="")
            yield text
            text.flush()
            text.detach()
        if sink is not raw:
            sink.close()  # writes the gzip trailer; the raw file stays open for atomic_write


def text_format(fmt: str) -> dict:
    """``to_csv`` options of a text table: TSV holds ids exactly as they are (never
    quoted); CSV quotes a field that needs it (comma, quote, line break) per RFC 4180."""
    if fmt == "tsv":
        return {"sep": "\t", "quoting": csv.QUOTE_NONE}
    return {"sep": ",", "quoting": csv.QUOTE_MINIMAL, "doublequote": True}


class UnwritableText(ValueError):
    """A text value holds the delimiter or a line break, which an unquoted table cannot hold."""


#: Most bytes of the padded blocks :func:`delimited_bytes` builds at once (rows x the widest
#: value of each column): a table over it is formatted in halves, so one very long id
#: cannot blow up the memory.
DELIMITED_BLOCK_BYTES = 1 << 25


def delimited_bytes(frame: pd.DataFrame, encoding: str, sep: str = "\t", float_format: Optional[str] = None,
                    text_of: Optional[Dict[str, Callable[[pd.Series], pd.Series]]] = None,
                    categories: Optional[Dict[str, Tuple[np.ndarray, np.ndarray]]] = None) -> bytes:
    """The lines ``frame.to_csv(sep=sep, header=False, index=False, lineterminator="\\n",
    quoting=csv.QUOTE_NONE, float_format=float_format)`` writes, encoded, several times faster.

    Each column's distinct values are formatted once (integers by numpy, float columns by
    ``float_format`` or, like every other column, by pandas itself) and the lines are put
    together from their bytes with numpy: each column becomes a block of ``rows x width``
    bytes with a mask of the bytes it uses, and the blocks side by side, with ``sep`` (a
    line break after the last) between them, are read out through their masks in one pass.
    ``text_of`` maps a column name to a function applied to its distinct values first.
    ``categories``: a dict the caller keeps across the chunks of one table; a
    ``Categorical`` column's categories are then formatted once, into it, and each chunk
    only picks its rows' bytes by their codes.

    Raises
    ------
    UnwritableText
        When a value holds ``sep``, a line break or a carriage return (``to_csv`` would
        raise or write a line that does not read back).
    """
    n = len(frame)
    if n == 0:
        return b""
    fields = []
    for c in frame.columns:
        column = frame[c]
        if column.dtype.kind in "iu":
            fields.append(_integer_bytes(column.to_numpy()))
        elif column.dtype.kind == "f" and float_format is not None:
            fields.append(_float_bytes(column.to_numpy(), float_format, encoding, sep))
        elif categories is not None and isinstance(column.dtype, pd.CategoricalDtype) \
                and column.cat.codes.min() >= 0 and _formatted(categories, c, column, encoding, sep, float_format,
                                                               (text_of or {}).get(c)) is not None:
            # a missing value (code -1) has no category: such columns are formatted chunk by chunk
            block, used = categories[c]
            codes = column.cat.codes.to_numpy()
            fields.append((block[codes], used[codes]))
        else:
            fields.append(_text_bytes(column, encoding, sep, float_format, (text_of or {}).get(c)))
    if n > 1 and n * sum(block.shape[1] + 1 for block, _ in fields) > DELIMITED_BLOCK_BYTES:
        half = n // 2
        return (delimited_bytes(frame.iloc[:half], encoding, sep, float_format, text_of, categories) +
                delimited_bytes(frame.iloc[half:], encoding, sep, float_format, text_of, categories))
    between = np.frombuffer(sep.encode(encoding), dtype=np.uint8)
    blocks, masks = [], []
    for k, (block, used) in enumerate(fields):
        end = np.frombuffer(b"\n", dtype=np.uint8) if k == len(fields) - 1 else between
        blocks += [block, np.broadcast_to(end, (n, len(end)))]
        masks += [used, np.ones((n, len(end)), dtype=bool)]
    return np.hstack(blocks)[np.hstack(masks)].tobytes()


def _formatted(categories: Dict[str, Optional[Tuple[np.ndarray, np.ndarray]]], name: str, column: pd.Series,
               encoding: str, sep: str, float_format: Optional[str],
               text_of: Optional[Callable[[pd.Series], pd.Series]]) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """The bytes of every category of ``column``, formatted on first use into ``categories``;
    ``None`` when one of them cannot be written (the rows' own values then are, chunk by
    chunk, and refused only if a row holds one)."""
    if name not in categories:
        try:
            categories[name] = _text_bytes(pd.Series(column.cat.categories), encoding, sep, float_format, text_of)
        except (csv.Error, UnwritableText):  # a tab or a line break in one of them
            categories[name] = None
    return categories[name]


def _integer_bytes(values: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Decimal digits of integers, right-aligned in a block, and the mask of the used bytes."""
    negative = values < 0
    magnitude = np.abs(values.astype(np.int64)).astype(np.uint64)  # -2**63 wraps to 2**63: right as uint64
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


def _float_bytes(values: np.ndarray, float_format: str, encoding: str, sep: str) -> Tuple[np.ndarray, np.ndarray]:
    """Floats as ``to_csv(float_format=...)`` writes them (``float_format % value``, an empty
    field for NaN), one string per row."""
    texts = list(map(float_format.__mod__, values.tolist()))
    missing = np.flatnonzero(np.isnan(values))
    for i in missing.tolist():
        texts[i] = ""
    return _lines_table(("\n".join(texts) + "\n").encode(encoding), len(texts), 0, sep, False)


def _text_bytes(column: pd.Series, encoding: str, sep: str, float_format: Optional[str],
                text_of: Optional[Callable[[pd.Series], pd.Series]]) -> Tuple[np.ndarray, np.ndarray]:
    """Each value's text as ``to_csv`` writes it, formatted once per distinct value,
    left-aligned in a block, and the mask of the used bytes."""
    codes, uniques = pd.factorize(column, use_na_sentinel=False)
    if isinstance(uniques, pd.Categorical):  # a coded column: its texts, as a text column's uniques
        uniques = uniques.astype(uniques.categories.dtype)
    values = pd.Series(uniques)
    if text_of is not None:
        values = text_of(values)
    # an empty second column: the csv module refuses a line of one empty field (an empty id,
    # a missing value) without quotes, and each line then ends in the delimiter and a line break
    text = pd.DataFrame({0: values, 1: ""}).to_csv(sep=sep, header=False, index=False, lineterminator="\n",
                                                    quoting=csv.QUOTE_NONE, escapechar=None,
                                                    float_format=float_format)
    table, used = _lines_table(text.encode(encoding), len(values), len(sep.encode(encoding)), sep, True)
    return table[codes], used[codes]


def _lines_table(blob_bytes: bytes, n: int, tail: int, sep: str, check: bool) -> Tuple[np.ndarray, np.ndarray]:
    """``n`` lines (each ending in ``tail`` bytes and a line break) as a left-aligned block
    of their bytes and its mask; :class:`UnwritableText` when the lines are not ``n`` or
    (``check``) one holds a carriage return or, within its text, ``sep``."""
    blob = np.frombuffer(blob_bytes, dtype=np.uint8)
    ends = np.flatnonzero(blob == ord("\n"))
    if len(ends) != n or (check and ((blob == ord("\r")).any() or blob_bytes.count(sep.encode()) > n)):
        raise UnwritableText()
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)
    lengths = ends - tail - starts
    width = max(1, int(lengths.max()))
    table = np.zeros((n, width), dtype=np.uint8)
    used = np.arange(width) < lengths[:, None]
    table[used] = blob[(starts[:, None] + np.arange(width))[used]]
    return table, used


def write_frames(frames: Iterable[pd.DataFrame], path: PathLike, fmt: str, encoding: Optional[str] = "utf-8",
                 float_format: str = "%.6g", header: Optional[bool] = None,
                 columns: Sequence[str] = RECS_COLUMNS,
                 on_neutralised: Optional[Callable[[int], None]] = None) -> int:
    """Stream ``frames`` into one table file, atomically; return the rows written.

    Parameters
    ----------
    frames : iterable of DataFrame
        The table's blocks, in order, all with the same columns.
    path : path-like
        The file (``.gz``: gzip-compressed text).
    fmt : {"tsv", "csv", "parquet"}
    encoding : str
        Of a text file (the encoding the ids came in).
    float_format : str
        Of the float columns of a text file.
    header : bool, optional
        Whether a text file starts with the column names (default: CSV only).
    columns : sequence of str
        Of an empty Parquet file (no frames at all), which is still a valid table.
    on_neutralised : callable, optional
        Called with the number of CSV cells :func:`neutralise_cells` changed, once at the end.
    """
    if fmt == "parquet":
        return _write_parquet(frames, path, columns)
    header = fmt == "csv" if header is None else header
    n_rows = neutralised = 0
    if fmt == "tsv" and not header:
        # TSV is never quoted: the bytes to_csv would write, put together by numpy
        with text_output(path, binary=True) as raw:
            for frame in frames:
                try:
                    raw.write(delimited_bytes(frame, encoding or "utf-8", float_format=float_format))
                except UnwritableText:  # to_csv says what is wrong, as it always did
                    text = frame.to_csv(header=False, index=False, float_format=float_format, lineterminator="\n",
                                        **text_format(fmt))
                    raw.write(text.encode(encoding or "utf-8"))
                n_rows += len(frame)
        return n_rows
    with text_output(path, encoding=encoding) as fh:
        for frame in frames:
            if fmt == "csv":
                frame, n = neutralise_cells(frame)
                neutralised += n
            frame.to_csv(fh, header=header and n_rows == 0, index=False, float_format=float_format,
                         lineterminator="\n", **text_format(fmt))
            n_rows += len(frame)
    if on_neutralised is not None:
        on_neutralised(neutralised)
    return n_rows


def _write_parquet(frames: Iterable, path: PathLike, columns: Sequence[str]) -> int:
    """Row groups from DataFrames or Arrow tables (parts read back), into one Parquet file."""
    require_pyarrow()
    import pyarrow as pa
    import pyarrow.parquet as pq

    n_rows = 0
    with atomic_path(path, whole=True) as tmp:  # Parquet seeks: a file, also for a pipe
        writer = None
        try:
            for frame in frames:
                table = frame if isinstance(frame, pa.Table) else pa.Table.from_pandas(frame, preserve_index=False)
                writer = writer or pq.ParquetWriter(tmp, table.schema)
                writer.write_table(table)
                n_rows += table.num_rows
            if writer is None:  # no rows: still a valid, empty file
                pq.write_table(pa.table({c: [] for c in columns}), tmp)
        finally:
            if writer is not None:
                writer.close()
    return n_rows


def concatenate(parts: Sequence[PathLike], output: PathLike, fmt: str, header: Sequence[str] = RECS_COLUMNS,
                on_neutralised: Optional[Callable[[int], None]] = None) -> int:
    """Join table files written by :func:`write_frames` (text ones without a header), in
    order, into ``output`` atomically; return the rows.

    Text parts are copied byte for byte (a ``.gz`` output gets one gzip stream of the
    whole text), with the CSV header written once at the top. ``on_neutralised`` gets the
    number of cells the CSV parts hold neutralised (:func:`neutralise_cells`), counted in
    the parts themselves so that parts of an earlier, resumed run count too.
    """
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return _write_parquet((pq.read_table(p) for p in parts), output, header)
    n_rows = neutralised = 0
    with text_output(output, binary=True) as out:
        if fmt == "csv":
            out.write((",".join(header) + "\n").encode())
        for p in parts:
            quoted = False
            with open(p, "rb") as fh:
                while True:
                    chunk = fh.read(1 << 22)
                    if not chunk:
                        break
                    n_rows += chunk.count(b"\n")
                    quoted = quoted or b"'" in chunk
                    out.write(chunk)
            if fmt == "csv" and quoted:  # a neutralised cell holds a quote: parse only such parts
                neutralised += _neutralised_in(p)
    if on_neutralised is not None:
        on_neutralised(neutralised)
    return n_rows


def _neutralised_in(part: PathLike) -> int:
    """The cells of a headerless CSV part that :func:`neutralise_cells` wrote."""
    with open(part, encoding="utf-8", errors="surrogateescape", newline="") as fh:
        return sum(1 for row in csv.reader(fh) for cell in row if _NEUTRALISED.match(cell))


def write_table(frame: pd.DataFrame, output: Optional[PathLike], fmt: str, encoding: Optional[str] = "utf-8",
                float_format: str = "%.4f") -> int:
    """Write one table to ``output`` (atomically, as :func:`write_frames`) or, without
    one, to standard output (text formats only); return the number of CSV cells
    neutralised (:func:`neutralise_cells`)."""
    if output:
        counts: list = []
        write_frames([frame], output, fmt, encoding=encoding, float_format=float_format, columns=frame.columns,
                     on_neutralised=counts.append)
        return sum(counts)
    frame, neutralised = neutralise_cells(frame) if fmt == "csv" else (frame, 0)
    options = dict(header=(fmt == "csv"), index=False, float_format=float_format, lineterminator="\n",
                   **text_format(fmt))
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:  # a text-only stream (tests): it has its own encoding
        frame.to_csv(sys.stdout, **options)
        return neutralised
    sys.stdout.flush()
    out = io.TextIOWrapper(buffer, encoding=encoding, newline="", write_through=True)
    frame.to_csv(out, **options)
    out.flush()
    out.detach()
    return neutralised
