"""Reading a Parquet ratings file into the canonical interactions table.

:func:`~mrec_warp.data.ratings.read_ratings` hands a Parquet file here (``format="parquet"``,
or ``auto`` and the file starts with the magic bytes ``PAR1``), so every command that reads
a ratings file reads Parquet too, with pyarrow (``pip install mrec-warp[parquet]``). The
result is the table a text file of the same rows gives: ids as their text
(:mod:`mrec_warp.data.arrow`), values as float64, timestamps as Unix seconds, and the same
refusals (an empty or null id, a value that is no finite number, an id holding a tab or
line break), naming the data row (1 for the first) instead of a line.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np
import pandas as pd

from ..errors import InputError
from ..memory import available_bytes, format_bytes
from . import inputs
from .arrow import id_texts, number_values, one_array, pyarrow
from .delimited import normalise_columns
from .interactions import CANONICAL_COLUMNS
from .ratings import _resolve_columns
from .value_columns import parse_timestamps as _parse_timestamps, parse_values as _parse_values, timestamp_hint
from .rows import check_empty_ids, empty_ids_error
from .tsv import TSV_UNSAFE

#: The first (and last) four bytes of every Parquet file.
MAGIC = b"PAR1"

#: File name endings taken for Parquet when the format is guessed.
SUFFIXES = (".parquet", ".pq")

#: Unix seconds per unit of an Arrow timestamp.
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}

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
    """Whether :func:`read_ratings` should read ``path`` as Parquet: ``format="parquet"``, or
    ``auto`` and the file starts with ``PAR1`` or is named ``*.parquet`` / ``*.pq`` (which
    :func:`read_parquet_ratings` then refuses if it is not Parquet)."""
    if format == "parquet":
        return True
    if format != "auto":
        if has_magic(path):  # tsv/csv/movielens on a Parquet file: the text reader would find NUL bytes
            raise InputError(f"this is a Parquet file, not {format}", path=str(path),
                             hint="use `format=parquet`, or `format=auto` to tell by the content")
        return False
    return has_magic(path) or Path(path).suffix.lower() in SUFFIXES


def read_parquet_ratings(path: Path, sep: Optional[str] = None, header: Optional[bool] = None,
                         columns: Optional[Sequence] = None, empty_ids: str = "refuse") -> pd.DataFrame:
    """The canonical table of a Parquet file (see :func:`~mrec_warp.data.ratings.read_ratings`).

    ``columns`` chooses user, item[, value[, timestamp]] by name or 0-based position among
    the file's columns (a stored pandas index is not one); by default the first four.
    ``sep`` and ``header`` do not apply (Parquet names its columns) and are refused.
    """
    check_empty_ids(empty_ids)
    path = Path(path)
    if sep is not None or header is not None:
        given = "`sep`" if sep is not None else "`header`"
        raise InputError(f"{given} does not apply to a Parquet file, whose columns are named in the file",
                         path=str(path), hint="leave it out; choose columns with `columns`")
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
        if len(names) < 2:
            raise InputError(f"expected at least 2 columns (user, item), the file has {len(names)}",
                             path=str(path), hint="write the user and item ids as two columns")
        used = _resolve_columns(normalise_columns(columns), names, len(names), path)
        wanted = [positions[i] for i in used]
        check_footer(parquet, path, wanted)  # before a byte of the columns is read
        if len(set(schema.names)) == len(schema.names):
            table = parquet.read(columns=[schema.names[i] for i in wanted])
            cols = [table.column(k) for k in range(len(wanted))]
        else:  # two columns share a name: only positions tell them apart
            table = parquet.read()
            cols = [table.column(i) for i in wanted]
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"cannot read the Parquet file ({' '.join(str(exc).split())})", path=str(path),
                         hint="the file is truncated or corrupt; re-create or re-download it") from None
    if table.num_rows == 0:
        raise InputError("the Parquet file has no rows", path=str(path), hint="expected one interaction per row")

    def refuse(kind: str, text, why: str, row: int, hint: str) -> None:
        raise InputError(f"{kind} {text!r} in data row {row + 1} {why}", path=str(path), hint=hint)

    ids = {}
    for role, col, pos in zip(CANONICAL_COLUMNS[:2], cols, used):
        try:
            ids[role] = id_texts(col)
        except InputError as exc:  # the Arrow rule knows neither the file nor the column
            raise InputError(f"{role} id column {pos} {names[pos]!r}: {exc.message}", path=str(path),
                             hint=exc.hint) from None
    out = pd.DataFrame(ids)
    empty = _check_ids(out, used, names, path, empty_ids)
    if len(used) > 2:
        values = number_values(cols[2])
        bad = ~np.isfinite(values)
        if bad.any():
            row = int(np.argmax(bad))
            refuse("rating", cols[2][row].as_py(), "is not a finite number", row,
                   "the rating column must be numeric; use `columns` to choose columns")
        out["value"] = _parse_values(pd.Series(values), refuse)  # the size limit
        out.attrs["value_column"] = names[used[2]]
    if len(used) > 3:
        column = f"column {used[3]} {names[used[3]]!r}"
        out["timestamp"] = _parse_timestamps(_stamps(cols[3], pa, refuse, column), refuse, column)
    out.attrs["encoding"] = "utf-8"  # Arrow strings are UTF-8
    out.attrs["reading"] = {
        "format": "parquet", "sep": None, "header": True, "header_guessed": False,
        "header_reason": "a Parquet file names its columns", "header_line": None, "fields": len(names),
        "columns": {role: {"position": pos, "name": names[pos]} for role, pos in zip(CANONICAL_COLUMNS, used)},
        "ignored_columns": [], "rows": len(out), "empty_trailing_lines": 0,
        "empty_id_rows": int(empty.sum()),
    }
    out.attrs["source"] = str(path)
    return out


def _check_ids(out: pd.DataFrame, used: List[int], names: List[str], path: Path, empty_ids: str) -> np.ndarray:
    """The rows with an empty or null user or item id (kept for ``empty_ids="drop"``, else
    refused as a text file's empty fields are), after refusing ids a text output cannot
    hold: a tab or line break, or more than :data:`~mrec_warp.data.inputs.MAX_ID_LENGTH`
    characters."""
    empty = np.zeros(len(out), dtype=bool)
    roles, first = [], None
    for role, pos in zip(CANONICAL_COLUMNS[:2], used[:2]):
        ids = out[role]
        missing = ids.isna().to_numpy(dtype=bool)
        text = ids.fillna("")
        blank = missing | (text.str.strip() == "").to_numpy(dtype=bool)
        if blank.any():
            row = int(np.argmax(blank))
            if first is None or row < first[0]:
                first = row, pos, "a missing (null)" if missing[row] else (
                    "an empty" + (" (only spaces)" if text.iloc[row] else ""))
            empty |= blank
            roles.append(role)
        long = (text.str.len() > inputs.MAX_ID_LENGTH).to_numpy(dtype=bool)
        if long.any():
            row = int(np.argmax(long))
            raise InputError(f"{role} id {text.iloc[row][:40]!r}... in data row {row + 1} is "
                             f"{len(text.iloc[row]):,} characters long; the limit is {inputs.MAX_ID_LENGTH:,}",
                             path=str(path), hint="a model cannot hold ids this long; check which columns are the ids")
        unsafe = text.str.contains(TSV_UNSAFE.pattern, regex=True).to_numpy(dtype=bool)
        if unsafe.any():
            row = int(np.argmax(unsafe))
            raise InputError(f"{role} id {text.iloc[row]!r} in data row {row + 1} holds a tab or line break, "
                             "which TSV outputs cannot hold", path=str(path),
                             hint="remove tabs and line breaks from ids")
    if first is not None and empty_ids != "drop":
        row, pos, what = first
        column = f"column {pos} {names[pos]!r}"
        raise empty_ids_error(int(empty.sum()), " or ".join(roles), column, f"in data row {row + 1}",
                              path=str(path), what=what)
    return empty


def _stamps(column, pa, refuse, words: Optional[str] = None) -> pd.Series:
    """A timestamp column as :func:`_parse_timestamps` takes it: float64 seconds for numbers,
    dates and Arrow timestamps, text for text; a null is refused."""
    column = one_array(column)
    if column.null_count:
        row = int(np.argmax(column.is_null().to_numpy(zero_copy_only=False)))
        refuse("timestamp", None, "is empty", row, timestamp_hint(words))
    kind = column.type
    if pa.types.is_date(kind):
        column = pa.compute.cast(column, pa.timestamp("s"))
        kind = column.type
    if pa.types.is_timestamp(kind):
        ticks = pa.compute.cast(column, pa.int64()).to_numpy(zero_copy_only=False)
        return pd.Series(np.floor_divide(ticks, _PER_SECOND[kind.unit]).astype(np.float64))
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        seconds = pa.compute.cast(column, pa.float64(), safe=False).to_numpy(zero_copy_only=False)
        bad = ~np.isfinite(seconds)
        if bad.any():
            row = int(np.argmax(bad))
            refuse("timestamp", float(seconds[row]), "is neither a number nor a date", row, timestamp_hint(words))
        return pd.Series(seconds)
    return pd.Series(id_texts(column), dtype=object)
