"""The Parquet file format: telling a Parquet file, and reading the columns chosen from it.

:func:`~mrec_warp.data.ratings.read_ratings` reads a file as Parquet when
:func:`is_parquet` says so (``format="parquet"``, or ``auto`` and the file starts with the
magic bytes ``PAR1`` or is named ``*.parquet`` / ``*.pq``), so every command that reads a
ratings file reads Parquet too, with pyarrow (``pip install mrec-warp[parquet]``).
:func:`read_columns` is the one place a Parquet file is opened and read: the footer (its
schema) first, then only the chosen columns. What becomes of those columns (ids as text,
values, timestamps, the refusals naming a data row) is the ratings reader's.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, List, Sequence

from ..errors import InputError
from ..memory import available_bytes, format_bytes
from .arrow import pyarrow

#: The first (and last) four bytes of every Parquet file.
MAGIC = b"PAR1"

#: File name endings taken for Parquet when the format is guessed.
SUFFIXES = (".parquet", ".pq")

#: Most rows per byte of file a footer may declare. Interactions are distinct (user, item)
#: pairs, so even dictionary and run-length encoding need a few bits a row; a file claiming
#: more (300M rows in 1.7 MB: 176 a byte) is a decompression bomb or a lying footer.
MAX_ROWS_PER_BYTE = 64
#: Bytes a row of a chosen column takes at least once read: an Arrow string offset and the
#: object pointer of its text (ids), or a 4-byte value and its float64 copy (numbers).
MIN_ROW_BYTES = 12


def check_footer(parquet, path: Path, wanted: Sequence[int]) -> None:
    """Refuse, before any column is read, a file whose footer declares more rows than it can
    hold (:data:`MAX_ROWS_PER_BYTE`), row groups that do not add up to its row count, or
    columns whose reading needs more memory than is available (a lower bound: the Arrow
    columns and their conversion). Every refusal names the file."""
    meta = parquet.metadata
    rows = int(meta.num_rows)
    size = max(1, Path(path).stat().st_size)
    groups = [int(meta.row_group(g).num_rows) for g in range(meta.num_row_groups)]
    if rows < 0 or any(n < 0 for n in groups) or sum(groups) != rows:
        raise InputError(f"the Parquet footer is inconsistent: {rows:,} rows, its row groups hold {sum(groups):,}",
                         path=str(path), hint="the file is corrupt or crafted; re-create it")
    if rows > MAX_ROWS_PER_BYTE * size:
        raise InputError(f"the Parquet footer declares {rows:,} rows in a file of {size:,} bytes, more than "
                         f"{MAX_ROWS_PER_BYTE} rows a byte, which distinct interactions cannot be",
                         path=str(path), hint="the file is corrupt or crafted (a decompression bomb); re-create it")
    need = float(rows) * len(wanted) * MIN_ROW_BYTES
    limit = available_bytes()
    if need > limit:
        raise InputError(f"reading the {len(wanted)} chosen columns of {rows:,} rows needs at least "
                         f"{format_bytes(need)} of memory, more than the {format_bytes(limit)} available",
                         path=str(path), hint="split the file, or read it on a machine with more memory")


def has_magic(path: Path) -> bool:
    """Whether the file starts with Parquet's magic bytes (a regular file, read 4 bytes)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == MAGIC
    except OSError:
        return False


def is_parquet(path: Path, format: str) -> bool:
    """Whether :func:`~mrec_warp.data.ratings.read_ratings` should read ``path`` as Parquet:
    ``format="parquet"``, or ``auto`` and the file starts with ``PAR1`` or is named
    ``*.parquet`` / ``*.pq`` (which :func:`read_columns` then refuses if it is not Parquet)."""
    if format == "parquet":
        return True
    if format != "auto":
        if has_magic(path):  # tsv/csv/movielens on a Parquet file: the text reader would find NUL bytes
            raise InputError(f"this is a Parquet file, not {format}", path=str(path),
                             hint="use `format=parquet`, or `format=auto` to tell by the content")
        return False
    return has_magic(path) or Path(path).suffix.lower() in SUFFIXES


@dataclass
class ParquetColumns:
    """The columns :func:`read_columns` read.

    Attributes
    ----------
    names : list of str
        The file's column names, in order; a stored pandas index is not a column.
    chosen : list of int
        The 0-based positions (among ``names``) of the columns read, in the order chosen.
    columns : list of pyarrow.ChunkedArray
        Those columns, in the same order.
    num_rows : int
        The file's number of rows.
    """

    names: List[str]
    chosen: List[int]
    columns: List[Any]
    num_rows: int


def read_columns(path: Path, choose: Callable[[List[str]], List[int]]) -> ParquetColumns:
    """Read the columns ``choose`` picks from the Parquet file at ``path``.

    ``choose`` is given the file's column names (a stored pandas index left out) and
    returns the positions among them to read; it may refuse them with an
    :class:`~mrec_warp.errors.InputError`, which passes through. A file that does not
    start with ``PAR1`` is refused, and so is one pyarrow cannot read (truncated, corrupt),
    in one line.
    """
    if not has_magic(path):
        raise InputError("not a Parquet file (it does not start with PAR1)", path=str(path),
                         hint="give a Parquet file, or `format=auto` for a text file named so")
    pa = pyarrow("reading a Parquet file", str(path))
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
        schema = parquet.schema_arrow
        stored_index = {c for c in (schema.pandas_metadata or {}).get("index_columns", []) if isinstance(c, str)}
        positions = [i for i, name in enumerate(schema.names) if name not in stored_index]
        names = [schema.names[i] for i in positions]
        chosen = choose(names)
        wanted = [positions[i] for i in chosen]
        check_footer(parquet, path, wanted)  # before a byte of the columns is read
        if len(set(schema.names)) == len(schema.names):
            table = parquet.read(columns=[schema.names[i] for i in wanted])
            columns = [table.column(k) for k in range(len(wanted))]
        else:  # two columns share a name: only positions tell them apart
            table = parquet.read()
            columns = [table.column(i) for i in wanted]
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"cannot read the Parquet file ({' '.join(str(exc).split())})", path=str(path),
                         hint="the file is truncated or corrupt; re-create or re-download it") from None
    return ParquetColumns(names=names, chosen=chosen, columns=columns, num_rows=table.num_rows)


__all__ = ["MAGIC", "SUFFIXES", "ParquetColumns", "has_magic", "is_parquet", "read_columns"]
