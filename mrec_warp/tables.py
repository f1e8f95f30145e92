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
from typing import IO, Callable, Iterable, Iterator, Optional, Sequence, Tuple

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
