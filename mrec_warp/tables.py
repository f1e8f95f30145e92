"""The one writer of result tables (recommendations, similar items, explanations).

Three formats, chosen by :func:`output_format` from ``--format`` or the file's suffix:

* **TSV**: headerless, ids written exactly as they are (never quoted), so that the files
  read back byte for byte;
* **CSV**: a header, fields quoted per RFC 4180 when they need it;
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
import sys
from pathlib import Path
from typing import IO, Iterable, Iterator, Optional, Sequence

import pandas as pd

from .files import PathLike, atomic_path, atomic_write
from .errors import InputError

RECS_FORMATS = ("tsv", "csv", "parquet")
#: Columns of a recommendations table (also those of an empty Parquet file).
RECS_COLUMNS = ("user", "item", "score", "rank")


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
                 columns: Sequence[str] = RECS_COLUMNS) -> int:
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
    """
    if fmt == "parquet":
        return _write_parquet(frames, path, columns)
    header = fmt == "csv" if header is None else header
    n_rows = 0
    with text_output(path, encoding=encoding) as fh:
        for frame in frames:
            frame.to_csv(fh, header=header and n_rows == 0, index=False, float_format=float_format,
                         lineterminator="\n", **text_format(fmt))
            n_rows += len(frame)
    return n_rows


def _write_parquet(frames: Iterable, path: PathLike, columns: Sequence[str]) -> int:
    """Row groups from DataFrames or Arrow tables (parts read back), into one Parquet file."""
    require_pyarrow()
    import pyarrow as pa
    import pyarrow.parquet as pq

    n_rows = 0
    with atomic_path(path) as tmp:
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


def concatenate(parts: Sequence[PathLike], output: PathLike, fmt: str, header: Sequence[str] = RECS_COLUMNS) -> int:
    """Join table files written by :func:`write_frames` (text ones without a header), in
    order, into ``output`` atomically; return the rows.

    Text parts are copied byte for byte (a ``.gz`` output gets one gzip stream of the
    whole text), with the CSV header written once at the top.
    """
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return _write_parquet((pq.read_table(p) for p in parts), output, header)
    n_rows = 0
    with text_output(output, binary=True) as out:
        if fmt == "csv":
            out.write((",".join(header) + "\n").encode())
        for p in parts:
            with open(p, "rb") as fh:
                while True:
                    chunk = fh.read(1 << 22)
                    if not chunk:
                        break
                    n_rows += chunk.count(b"\n")
                    out.write(chunk)
    return n_rows


def write_table(frame: pd.DataFrame, output: Optional[PathLike], fmt: str, encoding: Optional[str] = "utf-8",
                float_format: str = "%.4f") -> None:
    """Write one table to ``output`` (atomically, as :func:`write_frames`) or, without
    one, to standard output (text formats only)."""
    if output:
        write_frames([frame], output, fmt, encoding=encoding, float_format=float_format, columns=frame.columns)
        return
    options = dict(header=(fmt == "csv"), index=False, float_format=float_format, lineterminator="\n",
                   **text_format(fmt))
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:  # a text-only stream (tests): it has its own encoding
        frame.to_csv(sys.stdout, **options)
        return
    sys.stdout.flush()
    out = io.TextIOWrapper(buffer, encoding=encoding, newline="", write_through=True)
    frame.to_csv(out, **options)
    out.flush()
    out.detach()
