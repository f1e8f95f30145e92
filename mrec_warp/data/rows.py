"""The row rules: what the rows of a ratings table become before any model sees them.

One implementation, used by ``prepare`` (:func:`~mrec_warp.data.positives.binarise`), by
``train`` / ``tune`` reading a file, and by :meth:`Interactions.from_dataframe
<mrec_warp.data.interactions.Interactions.from_dataframe>`, so the CLI and the Python API
give the same values for the same rows and options. In order:

1. **Negative values** (returns, cancellations, dislikes) are counted, then, by ``negatives``:

   * ``refuse`` (the default): the table is refused, naming the first such row and the
     options that choose what to do; a return silently kept as a purchase is a wrong answer;
   * ``drop``: those rows are removed;
   * ``net``: they are summed with the other rows of their (user, item) pair, and pairs that
     held a negative row and whose net is <= 0 are removed (everything bought was returned).
     Netting is a sum, so it needs ``duplicates="sum"``.

2. **Duplicates.** Rows with the same (user, item) become one, whose value is, by
   ``duplicates``: ``sum`` (the default: 3 invoice lines of 40 units are 120 units, a song
   played twice is a stronger signal), ``max``, ``first`` / ``last`` (in table order, i.e.
   file order), or ``count`` (the number of rows, whatever their values). The merged
   pair's timestamp is the *earliest* of its rows' (when the user first met the item), so a
   temporal split puts in test the items users met last.
3. **Minimum value.** With ``min_value``, merged pairs valued below it are removed (this is
   ``prepare --min-rating``). Nothing else removes a row: a zero value is a positive with
   the lowest confidence.

Every step is counted in :attr:`MergedRows.counts` (``prepare``'s ``summary.json``).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Optional

import numpy as np

from ..errors import InputError

#: How repeated (user, item) rows merge; the first is the default everywhere.
DUPLICATES = ("sum", "max", "first", "last", "count")
#: What negative values do; the first is the default everywhere.
NEGATIVES = ("refuse", "drop", "net")
DEFAULT_DUPLICATES = DUPLICATES[0]
DEFAULT_NEGATIVES = NEGATIVES[0]

#: Where a row is, for messages: row index -> (path or None, line or None, words naming the row).
Locate = Callable[[int], "tuple[Optional[str], Optional[int], str]"]


@dataclass
class MergedRows:
    """One row per kept (user, item) pair, sorted by user code then item code.

    Attributes
    ----------
    user, item : numpy.ndarray of int64
    value : numpy.ndarray of float64
    timestamp : numpy.ndarray of int64 or None
    counts : dict
        ``rows_read``, ``negative_rows`` (seen), ``negative_rows_dropped`` (``drop``),
        ``pairs_netted_out`` (``net``: pairs removed because their net was <= 0),
        ``duplicates_merged`` (rows merged into another row of their pair),
        ``rows_below_min_value`` (pairs removed by ``min_value``) and ``pairs_kept``.
    """

    user: np.ndarray
    item: np.ndarray
    value: np.ndarray
    timestamp: Optional[np.ndarray]
    counts: Dict[str, int]


def check_row_options(duplicates: str, negatives: str, min_value: Optional[float] = None) -> None:
    """Refuse an unknown rule, a non-number ``min_value``, or ``net`` with a merge other than sum."""
    if duplicates not in DUPLICATES:
        raise InputError(f"unknown duplicates rule {duplicates!r}", hint=f"use one of {', '.join(DUPLICATES)}")
    if negatives not in NEGATIVES:
        raise InputError(f"unknown negatives rule {negatives!r}", hint=f"use one of {', '.join(NEGATIVES)}")
    if negatives == "net" and duplicates != "sum":
        raise InputError(f"`negatives=net` sums each pair's rows (a return cancels a purchase), which "
                         f"`duplicates={duplicates}` contradicts",
                         hint="use `duplicates=sum` with `negatives=net`, or `negatives=drop`")
    if min_value is not None and (isinstance(min_value, bool) or not isinstance(min_value, numbers.Real)
                                  or not math.isfinite(min_value)):
        raise InputError(f"minimum value must be a number, got {min_value!r}", hint="e.g. `min_value=1`")


def merge_rows(
    user: np.ndarray,
    item: np.ndarray,
    value: Optional[np.ndarray],
    timestamp: Optional[np.ndarray],
    n_items: int,
    duplicates: str = DEFAULT_DUPLICATES,
    negatives: str = DEFAULT_NEGATIVES,
    min_value: Optional[float] = None,
    locate: Optional[Locate] = None,
) -> MergedRows:
    """Apply the row rules (module docstring) to rows given as integer codes.

    Parameters
    ----------
    user, item : numpy.ndarray of int
        Codes of each row's user and item (``0 <= item < n_items``).
    value : numpy.ndarray of float, optional
        Each row's value; ``None`` means 1 for every row (a file of pairs).
    timestamp : numpy.ndarray of int, optional
    n_items : int
        Number of item codes.
    duplicates, negatives, min_value
        The rules; see the module docstring.
    locate : callable, optional
        ``row -> (path, line, words)`` for the refusal of a negative value; by default the
        row is named by its 0-based position.

    Returns
    -------
    MergedRows
    """
    check_row_options(duplicates, negatives, min_value)
    user = np.asarray(user, dtype=np.int64)
    item = np.asarray(item, dtype=np.int64)
    n = len(user)
    value = np.ones(n, dtype=np.float64) if value is None else np.asarray(value, dtype=np.float64)
    counts = {"rows_read": n}
    negative = value < 0
    n_negative = int(negative.sum())
    counts["negative_rows"] = n_negative
    counts["negative_rows_dropped"] = 0
    counts["pairs_netted_out"] = 0
    if n_negative and negatives == "refuse":
        raise _negative_error(int(np.argmax(negative)), n_negative, value, locate)
    if n_negative and negatives == "drop":
        keep = ~negative
        user, item, value, negative = user[keep], item[keep], value[keep], negative[keep]
        timestamp = None if timestamp is None else np.asarray(timestamp)[keep]
        counts["negative_rows_dropped"] = n_negative

    key = user * np.int64(max(n_items, 1)) + item
    # not a stable sort (4x faster): first / last take the smallest / largest row number of
    # each pair instead, which is file order whatever the sort did with ties
    order = np.argsort(key)
    key = key[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, dtype=np.int64)
    ends = np.r_[starts[1:], len(key)].astype(np.int64)
    v = value[order]
    if not len(key):
        merged = v
    elif duplicates == "sum":
        merged = np.add.reduceat(v, starts)
    elif duplicates == "max":
        merged = np.maximum.reduceat(v, starts)
    elif duplicates == "first":
        merged = value[np.minimum.reduceat(order, starts)]
    elif duplicates == "last":
        merged = value[np.maximum.reduceat(order, starts)]
    else:  # count
        merged = (ends - starts).astype(np.float64)
    ts = None
    if timestamp is not None:
        ts = np.minimum.reduceat(np.asarray(timestamp, dtype=np.int64)[order], starts) if len(key) else \
            np.zeros(0, dtype=np.int64)
    counts["duplicates_merged"] = int(len(key) - len(starts))
    key = key[starts]

    keep = np.ones(len(key), dtype=bool)
    if negatives == "net" and n_negative:
        had_negative = np.maximum.reduceat(negative[order], starts) if len(key) else keep
        netted_out = had_negative & (merged <= 0)
        counts["pairs_netted_out"] = int(netted_out.sum())
        keep &= ~netted_out
    if min_value is not None:
        below = keep & (merged < min_value)
        counts["rows_below_min_value"] = int(below.sum())
        keep &= ~below
    else:
        counts["rows_below_min_value"] = 0
    counts["pairs_kept"] = int(keep.sum())
    key = key[keep]
    width = np.int64(max(n_items, 1))
    return MergedRows(user=key // width, item=key % width, value=merged[keep],
                      timestamp=None if ts is None else ts[keep], counts=counts)


def _negative_error(row: int, n_negative: int, value: np.ndarray, locate: Optional[Locate]) -> InputError:
    path, line, words = locate(row) if locate is not None else (None, None, f"row {row}")
    return InputError(
        f"{n_negative:,} negative value(s) (returns, cancellations?), the first {value[row]:g} in {words}",
        path=path, line=line,
        hint="choose what they mean: `negatives=drop` removes those rows, `negatives=net` subtracts them "
             "from the same user and item",
    )


def describe_counts(counts: Dict[str, int], duplicates: str, negatives: str) -> str:
    """The row rules' counts in one phrase, e.g. "1,000 rows read, 120 merged (sum), 4 negative
    rows dropped, 995 pairs kept"."""
    parts = [f"{counts['rows_read']:,} rows read", f"{counts['duplicates_merged']:,} merged ({duplicates})"]
    if counts["negative_rows_dropped"]:
        parts.append(f"{counts['negative_rows_dropped']:,} negative rows dropped")
    if negatives == "net" and counts["negative_rows"]:
        parts.append(f"{counts['negative_rows']:,} negative rows netted, "
                     f"{counts['pairs_netted_out']:,} pairs with net <= 0 dropped")
    if counts["rows_below_min_value"]:
        parts.append(f"{counts['rows_below_min_value']:,} below the minimum value")
    parts.append(f"{counts['pairs_kept']:,} pairs kept")
    return ", ".join(parts)


def table_locator(df, user_col: str = "user", item_col: str = "item", source: Optional[str] = None) -> Locate:
    """``locate`` for :func:`merge_rows` over the rows of ``df``: the file's line when ``df``
    came from :func:`~mrec_warp.data.ratings.read_ratings` (its ``attrs["reading"]``), else
    the row's index label; with the row's user and item either way."""
    reading = df.attrs.get("reading")

    def locate(row: int):
        words = f"user {df[user_col].iloc[row]!r}, item {df[item_col].iloc[row]!r}"
        # only a regular file is read again for the line (a pipe was read once, and is gone)
        if source is not None and reading is not None and Path(source).is_file():
            from .delimited import data_line  # here: delimited -> tsv -> interactions -> rows

            skip = reading["header_line"]["line"] if reading.get("header") else 0
            try:
                line = data_line(Path(source), row, reading["sep"], skip, df.attrs.get("encoding"))[0]
            except (OSError, ValueError, KeyError):  # the file moved away: the row still names it
                line = -1
            if line > 0:
                return source, line, words
        if source is not None:  # a file read once (a pipe): count its data rows as people do, from 1
            return source, None, f"data row {row + 1} ({words})"
        return source, None, f"row {df.index[row]!r} ({words})"

    return locate
