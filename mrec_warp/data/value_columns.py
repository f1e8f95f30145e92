"""The value and timestamp columns of a ratings file as numbers: each cell that is not one
(or too large to stay exact) is refused in one line naming its file line
(:func:`~mrec_warp.data.ratings.read_ratings`)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

import numpy as np
import pandas as pd

from ..errors import InputError
from .delimited import data_line

#: Largest magnitude of a rating / value: beyond it sums and float32 casts lose the number.
MAX_ABS_VALUE = 1e15

#: Largest magnitude of a timestamp: integers above 2**53 are not exact as float64.
MAX_ABS_TIMESTAMP = 2 ** 53


def refuse_row(kind: str, text: str, why: str, row: int, hint: str, path: Path, sep: str, skip: int,
               encoding: str) -> None:
    raise InputError(f"{kind} {text!r} {why}", path=str(path),
                     line=data_line(path, row, sep, skip, encoding)[0], hint=hint)


#: How the value and timestamp parsers refuse a row: (kind, text, why, row, hint) -> raises;
#: a text file names the row's line, a Parquet file its data row.
Refuse = Callable[[str, str, str, int, str], None]


def timestamp_hint(column: Optional[str] = None) -> str:
    """The hint of every refused timestamp, whatever the format: a 4th column taken by
    default (a note, a category) is the usual cause, so it names that column (``column``,
    e.g. ``column 3 'note'``) and the option that chooses the columns."""
    which = column or "that column"
    return (f"use Unix seconds or ISO dates (2024-01-31T12:00:00) in the timestamp column; if {which} is no "
            "timestamp (without `columns` the 4th column is taken as one), choose the columns with `columns`, "
            "e.g. `columns=0,1,2` for user, item and value")


def parse_values(values: pd.Series, refuse: Refuse) -> np.ndarray:
    """The value column as finite float64 numbers of at most :data:`MAX_ABS_VALUE`."""
    hint = "the rating column must be numeric; use `columns` to choose columns"
    if values.dtype == np.float64:  # already parsed and checked finite by _read_fast
        parsed, text = values.to_numpy(), values
    else:
        text = values.str.strip()
        parsed = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        bad = ~np.isfinite(parsed)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            refuse("rating", values.iloc[row], "is not a finite number", row, hint)
    big = np.abs(parsed) > MAX_ABS_VALUE
    if big.any():
        row = int(np.flatnonzero(big)[0])
        refuse("rating", str(text.iloc[row]), f"is too large (the limit is {MAX_ABS_VALUE:g})", row,
               "scale the values down, e.g. hours instead of milliseconds")
    return parsed


def parse_timestamps(stamps: pd.Series, refuse: Refuse, column: Optional[str] = None) -> np.ndarray:
    """Unix seconds, or dates (ISO 8601) converted to Unix seconds (``column``: the column's
    words for a refusal's hint, e.g. ``column 3 'note'``)."""
    if stamps.dtype == np.float64:  # already parsed and checked finite by _read_fast
        numeric = stamps.to_numpy()
        is_number = np.ones(len(numeric), dtype=bool)
    else:
        text = stamps.str.strip()
        numeric = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        is_number = np.isfinite(numeric)
    big = is_number & (np.abs(np.where(is_number, numeric, 0)) >= MAX_ABS_TIMESTAMP)
    if big.any():
        row = int(np.flatnonzero(big)[0])
        refuse("timestamp", str(stamps.iloc[row]), "is too large for a time in seconds", row, timestamp_hint(column))
    if is_number.all():
        return numeric.astype(np.int64)
    try:
        parsed = pd.to_datetime(text, errors="coerce", utc=True, format="ISO8601")
    except (TypeError, ValueError):  # pandas < 2 has no format="ISO8601"
        parsed = pd.to_datetime(text, errors="coerce", utc=True)
    bad = parsed.isna().to_numpy() & ~is_number
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        refuse("timestamp", stamps.iloc[row], "is neither a number nor a date", row, timestamp_hint(column))
    seconds = ((parsed - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(seconds=1)).to_numpy(dtype=np.float64, na_value=0)
    return np.where(is_number, numeric, seconds).astype(np.int64)


__all__ = ["MAX_ABS_TIMESTAMP", "MAX_ABS_VALUE", "Refuse", "parse_timestamps", "parse_values", "refuse_row", "timestamp_hint"]
