"""The row rules: what the rows of a ratings table become before any model sees them.

One implementation, used by ``prepare`` (:func:`binarise`), by ``train`` / ``tune``
reading a file, and by :meth:`Interactions.from_dataframe
<mrec_warp.data.interactions.Interactions.from_dataframe>`, so the CLI and the Python API
give the same values for the same rows and options. In order:

1. **Negative values** (returns, cancellations, dislikes) are counted, then, by ``negatives``:

   * ``refuse`` (the default): the table is refused, naming the first such row and the
     options that choose what to do; a return silently kept as a purchase is a wrong answer.
     Except with a ``min_value`` >= 0 (and a merge other than ``count``): then a negative
     value is a rating below the minimum (a -10..10 scale), merged like any other, and its
     pair dropped with the others below the minimum unless the merge lifts it;
   * ``drop``: those rows are removed;
   * ``net``: they are summed with the other rows of their (user, item) pair, and pairs that
     held a negative row and whose net is <= 0 are removed (everything bought was returned;
     a net within a billionth of the quantities moved counts as 0, so 0.1 + 0.2 - 0.3 is
     netted out whatever the rounding). Netting is a sum, so it needs ``duplicates="sum"``.

2. **Duplicates.** Rows with the same (user, item) become one, whose value is, by
   ``duplicates``: ``sum`` (the default: 3 invoice lines of 40 units are 120 units, a song
   played twice is a stronger signal), ``max``, ``first`` / ``last`` (in table order, i.e.
   file order), or ``count`` (the number of rows, whatever their values). The merged
   pair's timestamp is the *earliest* of its rows' (when the user first met the item), so a
   temporal split puts in test the items users met last. With ``min_value`` and repeated
   pairs the rule must be chosen: a sum of two ratings of 2 is no rating of 4 (ratings:
   ``last`` or ``max``; counts: ``sum``).
3. **Minimum value.** With ``min_value``, merged pairs valued below it are removed (this is
   ``prepare --min-value``, alias ``--min-rating``). It needs a value column, except with
   ``duplicates="count"`` (the count is the value). Nothing else removes a row: a zero
   value is a positive with the lowest confidence.

Every step is counted in :attr:`MergedRows.counts` (``prepare``'s ``summary.json``).

``prepare`` then binarises (:func:`binarise`): every merged pair left is a positive, its
value (rating, count, hours) kept in the output files so that ``train --confidence`` can
weigh rows by it, and users with fewer than ``min_user_items`` pairs left are dropped (one
pass; items are never filtered here, so no second pass is needed). The result
(:class:`Positives`) holds integer codes sorted by user then item, which is what the split
works on (group by user = sort by user, no per-user Python loop).
"""
from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Optional, Sequence

import numpy as np
import pandas as pd

from ..errors import InputError
from ..progress import plural
from .delimited import data_line
from .id_text import text_rows

#: How repeated (user, item) rows merge; the first is the default everywhere.
DUPLICATES = ("sum", "max", "first", "last", "count")
#: What negative values do; the first is the default everywhere.
NEGATIVES = ("refuse", "drop", "net")
#: What a row with an empty (or missing) user or item id does; the first is the default.
EMPTY_IDS = ("refuse", "drop")
DEFAULT_EMPTY_IDS = EMPTY_IDS[0]
DEFAULT_DUPLICATES = DUPLICATES[0]
DEFAULT_NEGATIVES = NEGATIVES[0]
#: ``net``: a pair whose net is within this share of the quantities its rows moved is netted out.
NET_TOLERANCE = 1e-9

#: Pairs merged at a time by :func:`merge_rows`: its rows are gathered into sorted order a
#: block at a time, so no sorted copy of a whole column is made (400 MB per column at 50M rows).
MERGE_BLOCK_PAIRS = 1 << 20

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
        ``rows_below_min_value`` (pairs removed by ``min_value``; of them
        ``negative_pairs_below_min_value`` valued below 0) and ``pairs_kept``.
    """

    user: np.ndarray
    item: np.ndarray
    value: np.ndarray
    timestamp: Optional[np.ndarray]
    counts: Dict[str, int]


def check_row_options(duplicates: Optional[str], negatives: str, min_value: Optional[float] = None) -> None:
    """Refuse an unknown rule, a non-number ``min_value``, or ``net`` with a merge other than sum.

    ``duplicates=None`` is the default rule (sum) not chosen by the user (see :func:`merge_rows`)."""
    if duplicates is not None and duplicates not in DUPLICATES:
        raise InputError(f"unknown duplicates rule {duplicates!r}", hint=f"use one of {', '.join(DUPLICATES)}")
    if negatives not in NEGATIVES:
        raise InputError(f"unknown negatives rule {negatives!r}", hint=f"use one of {', '.join(NEGATIVES)}")
    if negatives == "net" and duplicates not in (None, "sum"):
        raise InputError(f"`negatives=net` sums each pair's rows (a return cancels a purchase), which "
                         f"`duplicates={duplicates}` contradicts",
                         hint="use `duplicates=sum` with `negatives=net`, or `negatives=drop`")
    if min_value is not None and (isinstance(min_value, bool) or not isinstance(min_value, numbers.Real)
                                  or not math.isfinite(min_value)):
        raise InputError(f"minimum value must be a number, got {min_value!r}", hint="e.g. `min_value=1`")


def check_empty_ids(empty_ids: str) -> None:
    if empty_ids not in EMPTY_IDS:
        raise InputError(f"unknown empty_ids rule {empty_ids!r}", hint=f"use one of {', '.join(EMPTY_IDS)}")


def empty_ids_error(n_rows: int, role: str, column: str, where: str, path: Optional[str] = None,
                    line: Optional[int] = None, what: str = "an empty") -> InputError:
    """The one refusal of rows without a user or item id (``empty_ids="refuse"``), in the
    reader and in :meth:`~mrec_warp.data.interactions.Interactions.from_dataframe` alike:
    how many rows, the first one, and the option that leaves them out."""
    return InputError(f"{plural(n_rows, 'row')} {'has' if n_rows == 1 else 'have'} {what} {role} id ({column}), "
                      f"the first {where}", path=path, line=line,
                      hint=f"fill in the {role} ids; or leave those rows out with `empty_ids=drop`, which counts them")


def empty_id_rows(df, columns: Sequence[str], texts: Optional[Dict[str, pd.Series]] = None) -> np.ndarray:
    """Which rows of ``df`` have an empty (only spaces), NA or missing id in one of ``columns``
    (``texts``: a column already as text, not converted again)."""
    empty = np.zeros(len(df), dtype=bool)
    for col in columns:
        column = df[col]
        missing = column.isna().to_numpy(dtype=bool)
        text = (texts or {}).get(col)
        if text is None and isinstance(column.dtype, pd.CategoricalDtype):  # once per distinct id
            empty |= missing | text_rows(column, lambda t: t.astype(str).str.strip() == "")
            continue
        text = column.astype(str) if text is None else text
        empty |= missing | (text.str.strip() == "").to_numpy(dtype=bool)  # checked stripped, kept as they are
    return empty


def drop_empty_ids(df, empty_ids: str, user_col: str = "user", item_col: str = "item"):
    """``df`` without its rows of an empty or NA user or item id when ``empty_ids="drop"``
    (the index labels kept, so refusals still name the file's lines), and how many there
    were; with ``refuse`` ``df`` itself and 0 (the caller refuses, naming the first row).
    The one implementation of ``empty_ids`` (``prepare --empty-ids``, ``from_dataframe``)."""
    check_empty_ids(empty_ids)
    if empty_ids != "drop":
        return df, 0
    empty = empty_id_rows(df, [user_col, item_col])
    if not empty.any():
        return df, 0
    kept = df[~empty]
    kept.attrs = dict(df.attrs)
    return kept, int(empty.sum())


def signed_ratings(duplicates: str, negatives: str, min_value: Optional[float]) -> bool:
    """Whether negative values are ratings below the minimum rather than returns: with the
    default ``negatives`` and a ``min_value`` >= 0 (a -10..10 scale binarised at 5), every
    pair whose merged value is negative is below the minimum and dropped with it, so none
    reaches a model. ``count`` compares row counts, not values: there they stay refused."""
    return negatives == "refuse" and min_value is not None and min_value >= 0 and duplicates != "count"


def merge_rows(
    user: np.ndarray,
    item: np.ndarray,
    value: Optional[np.ndarray],
    timestamp: Optional[np.ndarray],
    n_items: int,
    duplicates: Optional[str] = None,
    negatives: str = DEFAULT_NEGATIVES,
    min_value: Optional[float] = None,
    locate: Optional[Locate] = None,
    source: Optional[str] = None,
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
    duplicates : str, optional
        How repeated pairs merge; ``None`` is the default (sum) *not chosen*: with
        ``min_value`` it refuses pairs that were merged (a sum of two low ratings is no
        high rating), asking which rule the values need.
    negatives, min_value
        The rules; see the module docstring.
    locate : callable, optional
        ``row -> (path, line, words)`` for the refusal of a row; by default the row is
        named by its 0-based position.
    source : str, optional
        The file the rows came from, named in refusals that concern no single row.

    Returns
    -------
    MergedRows
    """
    check_row_options(duplicates, negatives, min_value)
    chosen, duplicates = duplicates is not None, duplicates or DEFAULT_DUPLICATES
    if min_value is not None and value is None and duplicates != "count":
        raise InputError("`min_value` compares each pair's value, and the table has only user and item",
                         path=source, hint="name the value column (`columns` for a file, value_col= for a table), "
                                           "or use `duplicates=count` to keep pairs of at least that many rows")
    if value is None and negatives != DEFAULT_NEGATIVES:  # chosen, and nothing to apply it to: no silent no-op
        raise InputError(f"`negatives={negatives}` acts on negative values, and the table has only user and item",
                         path=source, hint="name the value column (`columns` for a file, value_col= for a table), "
                                           "or leave out `negatives`")
    n = len(user)
    value = np.ones(n, dtype=np.float64) if value is None else np.asarray(value, dtype=np.float64)
    counts = {"rows_read": n}
    negative = value < 0
    n_negative = int(negative.sum())
    counts["negative_rows"] = n_negative
    counts["negative_rows_dropped"] = 0
    counts["pairs_netted_out"] = 0
    if n_negative and negatives == "refuse" and not signed_ratings(duplicates, negatives, min_value):
        raise _negative_error(int(np.argmax(negative)), n_negative, value, locate)
    row = None  # each row's place in the table, for messages, when rows were left out
    if n_negative and negatives == "drop":
        keep = ~negative
        row = np.flatnonzero(keep)
        user, item, value, negative = np.asarray(user)[keep], np.asarray(item)[keep], value[keep], negative[keep]
        timestamp = None if timestamp is None else np.asarray(timestamp)[keep]
        counts["negative_rows_dropped"] = n_negative

    width = np.int64(max(n_items, 1))
    # one int64 array of pairs, made in place: no int64 copy of the codes beside it (memory at 50M rows)
    key = np.asarray(user, dtype=np.int64) * width
    key += np.asarray(item)
    # not a stable sort (4x faster): first / last take the smallest / largest row number of
    # each pair instead, which is file order whatever the sort did with ties. Each array
    # goes as soon as it is used: at 50M rows every 8-byte column is 400 MB.
    order = np.argsort(key)
    key = np.take(key, order)
    n_rows = len(key)
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if n_rows else np.zeros(0, dtype=np.int64)
    key = key[starts]  # one per pair

    def by_pair(ufunc, column: np.ndarray, in_order: bool = False) -> np.ndarray:
        """``ufunc`` over each pair's rows of ``column`` (in table order, or ``in_order``: in
        sorted order), a block of pairs at a time: no sorted copy of a whole column."""
        if not n_rows:
            return column if in_order else column[order]
        out = np.empty(len(starts), dtype=column.dtype)
        for p in range(0, len(starts), MERGE_BLOCK_PAIRS):
            first = starts[p:p + MERGE_BLOCK_PAIRS]
            end = starts[p + MERGE_BLOCK_PAIRS] if p + MERGE_BLOCK_PAIRS < len(starts) else n_rows
            rows = column[first[0]:end] if in_order else column[order[first[0]:end]]
            out[p:p + len(first)] = ufunc.reduceat(rows, first - first[0])
        return out

    if duplicates == "sum":
        merged = by_pair(np.add, value)
    elif duplicates == "max":
        merged = by_pair(np.maximum, value)
    elif duplicates == "first":
        merged = value[by_pair(np.minimum, order, in_order=True)]
    elif duplicates == "last":
        merged = value[by_pair(np.maximum, order, in_order=True)]
    else:  # count
        merged = np.diff(np.r_[starts, n_rows]).astype(np.float64)
    ts = None
    if timestamp is not None:
        ts = by_pair(np.minimum, np.asarray(timestamp, dtype=np.int64))
    counts["duplicates_merged"] = int(n_rows - len(starts))
    if min_value is not None and not chosen and counts["duplicates_merged"] and negatives != "net":
        # the first repeat in file order: the earliest row that is not the first of its pair
        repeat = np.ones(len(order), dtype=bool)
        repeat[np.minimum.reduceat(order, starts)] = False
        first_repeat = int(np.argmax(repeat))
        raise _merge_error(first_repeat if row is None else int(row[first_repeat]), counts["duplicates_merged"], locate)

    keep = np.ones(len(key), dtype=bool)
    if negatives == "net" and n_negative:
        had_negative = by_pair(np.maximum, negative)
        # a pair returned whole nets to 0 up to rounding (0.1 + 0.2 - 0.3 is 2.8e-17, not 0):
        # a net within a billionth of the quantities moved is nothing left
        moved = by_pair(np.add, np.abs(value))
        netted_out = had_negative & (merged <= NET_TOLERANCE * moved)
        counts["pairs_netted_out"] = int(netted_out.sum())
        keep &= ~netted_out
    order = None  # the permutation goes before the pairs are filtered (memory at 50M rows)
    if min_value is not None:
        below = keep & (merged < min_value)
        counts["rows_below_min_value"] = int(below.sum())
        # signed ratings: the negative ones are among the pairs below the minimum, not beside them
        counts["negative_pairs_below_min_value"] = int((below & (merged < 0)).sum())
        keep &= ~below
    else:
        counts["rows_below_min_value"] = counts["negative_pairs_below_min_value"] = 0
    counts["pairs_kept"] = int(keep.sum())
    if not keep.all():
        key, merged, ts = key[keep], merged[keep], None if ts is None else ts[keep]
    user = key // width
    key %= width  # the item codes, in place
    return MergedRows(user=user, item=key, value=merged, timestamp=ts, counts=counts)


def _negative_error(row: int, n_negative: int, value: np.ndarray, locate: Optional[Locate],
                    hint: Optional[str] = None) -> InputError:
    path, line, words = locate(row) if locate is not None else (None, None, f"row {row}")
    return InputError(
        f"{plural(n_negative, 'negative value')} (returns, cancellations, signed ratings?), the first "
        f"{value[row]:g} in {words}",
        path=path, line=line,
        hint=hint or "choose what they mean: `negatives=drop` removes those rows, `negatives=net` subtracts "
                     "them from the same user and item; for ratings on a signed scale, `min_value` drops those "
                     "below it",
    )


def refuse_negatives(df, source: Optional[str] = None) -> None:
    """The default rule (``negatives="refuse"``) for a table read by a command that has no
    row options (``evaluate``'s files, ``recommend``'s ``train`` and ``history``): a return
    scored as a hit, excluded or folded in as an interaction would be a wrong answer."""
    if "value" not in df:
        return
    negative = df["value"].to_numpy(dtype=np.float64) < 0
    if negative.any():
        raise _negative_error(int(np.argmax(negative)), int(negative.sum()), df["value"].to_numpy(dtype=np.float64),
                              table_locator(df, source=source),
                              hint="a return is no interaction: drop or net those rows first, e.g. with prepare "
                                   "and its negatives option")


def _merge_error(row: int, n_merged: int, locate: Optional[Locate]) -> InputError:
    path, line, words = locate(row) if locate is not None else (None, None, f"row {row}")
    return InputError(
        f"{plural(n_merged, 'repeated row')} of the same user and item, the first in {words}: `min_value` "
        "compares their merged value, and the default merge (a sum) would make two low ratings a high one",
        path=path, line=line,
        hint="say how they merge: for ratings `duplicates=last` or `duplicates=max`; for counts `duplicates=sum`",
    )


def describe_counts(counts: Dict[str, int], duplicates: Optional[str], negatives: str,
                    min_value: str = "the minimum value") -> str:
    """The row rules' counts as one sum that adds up, in the order the rules apply, e.g.
    "1,000 rows read - 4 negative rows - 120 duplicates merged (sum) = 876 pairs - 30 below
    the minimum value = 846 pairs kept" (``min_value``: how the minimum is named).

    Rows become pairs when duplicates merge; what a rule removed before that is counted in
    rows, after it in pairs, and no row is counted twice (a negative rating below the
    minimum is one of the pairs below it). A step that removed nothing is not mentioned.
    The one wording for ``prepare``'s summary, ``train``'s log and ``convert``."""
    before = [(counts.get("empty_id_rows_dropped", 0), "row", "with an empty id"),
              (counts.get("rows_outside_given_ids", 0), "row", "outside the given ids"),
              (counts["negative_rows_dropped"], "negative row", ""),
              (counts["duplicates_merged"], "duplicate", f"merged ({duplicates or DEFAULT_DUPLICATES})")]
    text = plural(counts["rows_read"], "row") + " read" + "".join(
        f" - {plural(n, noun)}{' ' * bool(words)}{words}" for n, noun, words in before if n)
    after = []
    if counts["pairs_netted_out"] or (negatives == "net" and counts["negative_rows"]):
        after.append(f"{counts['pairs_netted_out']:,} with net <= 0 "
                     f"({plural(counts['negative_rows'], 'negative row')} netted)")
    if counts["rows_below_min_value"]:
        negative = counts.get("negative_pairs_below_min_value", 0)
        after.append(f"{counts['rows_below_min_value']:,} below {min_value}"
                     + (f" ({negative:,} of them negative)" if negative else ""))
    if after:
        pairs = counts["pairs_kept"] + counts["pairs_netted_out"] + counts["rows_below_min_value"]
        text += f" = {plural(pairs, 'pair')}" + "".join(f" - {step}" for step in after)
    return f"{text} = {plural(counts['pairs_kept'], 'pair')} kept"


def nothing_left(counts: Dict[str, int], source: Optional[str] = None, also: Sequence[str] = (),
                 hint: str = "lower `min_value`, or check `negatives`") -> InputError:
    """The one refusal of rules that removed every row (an empty model is never what was
    meant), saying what removed them; ``also`` adds the caller's own steps."""
    removed = [f"{plural(counts[key], noun)} {verb}" for key, noun, verb in (
        ("empty_id_rows_dropped", "row", "with an empty id dropped"),
        ("negative_rows_dropped", "negative row", "dropped"), ("pairs_netted_out", "pair", "netted out"),
        ("rows_below_min_value", "pair", "below the minimum value")) if counts.get(key)]
    return InputError("no interactions left: " + (", ".join([*removed, *also]) or "no rows"), path=source, hint=hint)


def table_locator(df, user_col: str = "user", item_col: str = "item", source: Optional[str] = None,
                  positions: Optional[np.ndarray] = None, numbered: bool = False,
                  labels: Optional[pd.Index] = None) -> Locate:
    """``locate`` for :func:`merge_rows` over the rows of ``df`` (``positions``: row ``r`` of
    the codes is ``df``'s row ``positions[r]``, when some rows were left out before merging).

    A row is named by its index label, with its user and item. When ``df`` came from
    :func:`~mrec_warp.data.ratings.read_ratings` (its ``attrs["reading"]``) its labels are
    the data rows of ``source``, also after filtering or reordering, and the file's line is
    given; when the index is no longer the reader's (``reset_index`` after a filter, labels
    that are no data rows), the line is left out rather than guessed.

    ``numbered`` says ``df``'s index holds the 0-based positions of the rows in the caller's
    table (:meth:`~mrec_warp.data.interactions.Interactions.from_dataframe`): a row is then
    ``data row N`` from 1, as the CLI names a row of a Parquet file or a pipe, with the
    caller's own index label (``labels``, by position) beside it when given.
    """
    reading = df.attrs.get("reading")
    source = source or (df.attrs.get("source") if reading is not None else None)  # read_ratings' knows its file
    original = reading is not None and source is not None and _reader_index(df.index, reading.get("rows"))

    def locate(row: int):
        at = int(row if positions is None else positions[row])
        label = plain(df.index[at])
        words = f"user {shown_id(df[user_col].iloc[at])}, item {shown_id(df[item_col].iloc[at])}"
        if numbered:
            own = "" if labels is None else f"index {shown(labels[int(label)])}, "
            return source, None, f"data row {int(label) + 1} ({own}{words})"
        if not original:
            return source, None, f"row {shown(label)} ({words})"
        # only a regular file is read again for the line (a pipe was read once, and is gone)
        if Path(source).is_file() and reading.get("format") != "parquet":  # a Parquet file has rows, no lines
            skip = reading["header_line"]["line"] if reading.get("header") else 0
            try:
                line = data_line(Path(source), int(label), reading["sep"], skip, df.attrs.get("encoding"))[0]
            except (OSError, ValueError, KeyError):  # the file moved away: the row still names it
                line = -1
            if line > 0:
                return source, line, words
        # a file read once (a pipe): count its data rows as people do, from 1
        return source, None, f"data row {int(label) + 1} ({words})"

    return locate


def plain(value):
    """A numpy scalar as the Python number it holds (``4``, never ``np.int64(4)``)."""
    return value.item() if isinstance(value, np.generic) else value


def shown_id(value) -> str:
    """An id cell as a message shows it: ``'a b'``, and a missing (null, NA, NaN) id as
    empty, ``''`` (never ``nan`` or ``None``)."""
    try:
        missing = value is None or bool(pd.isna(value))
    except (TypeError, ValueError):  # a cell holding a list or an array
        missing = False
    return "''" if missing else shown(value)


def shown(value) -> str:
    """A cell or row label as a message shows it: ``4``, ``inf``, ``'lots'``, never ``np.int64(4)``."""
    return repr(plain(value))


def _reader_index(index, n_rows: Optional[int]) -> bool:
    """Whether ``index`` still holds read_ratings' labels (data row numbers): whole numbers,
    unique, below the number of rows read; a 0, 1, 2... range only when nothing was removed
    (after a filter and ``reset_index`` its labels are positions, no longer rows; pandas
    keeps a filter that leaves a run of rows as a range, which then starts above 0)."""
    if n_rows is None or not len(index) or index.dtype.kind not in "iu" or not index.is_unique:
        return False
    if isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1 and len(index) != n_rows:
        return False
    return int(index.min()) >= 0 and int(index.max()) < n_rows


# -- prepare's positives ----------------------------------------------------------------------
@dataclass
class Positives:
    """Merged, filtered interactions as integer codes, sorted by user then item.

    Attributes
    ----------
    user, item : numpy.ndarray of int64
        Codes into ``user_ids`` / ``item_ids``.
    value : numpy.ndarray of float64
    timestamp : numpy.ndarray of int64 or None
    user_ids, item_ids : pandas.Index
        Every id of the input, in order of first appearance (dropped ones included).
    counts : dict
        What merging and filtering did, for the summary.
    """

    user: np.ndarray
    item: np.ndarray
    value: np.ndarray
    timestamp: Optional[np.ndarray]
    user_ids: pd.Index
    item_ids: pd.Index
    counts: Dict[str, int]

    def __len__(self) -> int:
        return len(self.user)

    @property
    def n_users(self) -> int:
        return len(self.user_ids)

    @property
    def n_items(self) -> int:
        return len(self.item_ids)

    def take(self, mask: np.ndarray, coded: bool = False) -> pd.DataFrame:
        """The canonical table (user, item, value[, timestamp]) of the rows in ``mask``;
        ``coded``: user and item as ``Categorical`` columns over all ids (a code per row, no
        text per row: what a writer of big tables wants)."""
        if coded:
            frame = {"user": pd.Categorical.from_codes(self.user[mask], dtype=self._user_dtype),
                     "item": pd.Categorical.from_codes(self.item[mask], dtype=self._item_dtype)}
        else:
            # .array keeps Arrow-backed strings compact: no Python object per row at 20M rows
            frame = {"user": self.user_ids.take(self.user[mask]).array,
                     "item": self.item_ids.take(self.item[mask]).array}
        frame["value"] = self.value[mask]
        if self.timestamp is not None:
            frame["timestamp"] = self.timestamp[mask]
        return pd.DataFrame(frame)

    @functools.cached_property
    def _user_dtype(self) -> pd.CategoricalDtype:
        return _categories(self.user_ids)

    @functools.cached_property
    def _item_dtype(self) -> pd.CategoricalDtype:
        return _categories(self.item_ids)


def _categories(ids: pd.Index) -> pd.CategoricalDtype:
    """The dtype of a ``Categorical`` over ``ids`` (themselves plain, when ``ids`` is categorical)."""
    if isinstance(ids.dtype, pd.CategoricalDtype):
        ids = pd.Index(ids.to_numpy())
    return pd.CategoricalDtype(ids)


def _index(ids) -> pd.Index:
    """``ids`` as a ``pandas.Index``: the same object when it is one, so what it knows of itself
    (that its ids are unique: a hash of each, seconds for millions) is not worked out again."""
    return ids if isinstance(ids, pd.Index) else pd.Index(ids)


def factorize_ids(column: pd.Series):
    """``pandas.factorize(column, sort=False)``: codes numbering the distinct ids in order of
    first appearance, and the ids. A ``Categorical`` whose codes already do so, every
    category used (what the fast reader gives, :func:`~mrec_warp.data.ratings.read_ratings`
    with ``coded_ids``), gives its codes and categories without hashing a string per row."""
    if isinstance(column.dtype, pd.CategoricalDtype) and len(column):
        codes = column.array.codes  # a view: .cat.codes copies (160 MB at 40M rows)
        reach = np.maximum.accumulate(codes)  # the largest code so far
        # in order of first appearance: each code at most one above every code before it
        if codes[0] == 0 and reach[-1] == len(column.cat.categories) - 1 and codes.min() >= 0 \
                and (codes[1:] <= reach[:-1] + 1).all():
            return codes, column.cat.categories
    return pd.factorize(column, sort=False)


def binarise(df: pd.DataFrame, min_rating: Optional[float] = None, min_user_items: int = 1,
             duplicates: Optional[str] = None, negatives: str = DEFAULT_NEGATIVES,
             source: Optional[str] = None, empty_ids: str = DEFAULT_EMPTY_IDS) -> Positives:
    """Apply the row rules, then drop users with too few rows.

    Parameters
    ----------
    df : pandas.DataFrame
        The canonical table from :func:`~mrec_warp.data.ratings.read_ratings`.
    min_rating : float, optional
        Merged rows with a value below this are dropped; ``None`` keeps every row.
    min_user_items : int
        Users with fewer rows than this (after the rating filter) are dropped.
    duplicates, negatives : str
        How repeated (user, item) rows merge and what negative values do (module
        docstring).
    source : str, optional
        The file ``df`` was read from, for the line of a refused negative value.
    empty_ids : {"refuse", "drop"}
        ``drop`` leaves out rows whose user or item id is empty (read with
        ``read_ratings(empty_ids="drop")``), counted as ``empty_id_rows_dropped``.

    Returns
    -------
    Positives
        Sorted by user then item, ids in order of first appearance in ``df``.
    """
    n_rows = len(df)
    df, n_empty = drop_empty_ids(df, empty_ids)
    user, user_ids = factorize_ids(df["user"])
    item, item_ids = factorize_ids(df["item"])
    value = df["value"].to_numpy(dtype=np.float64) if "value" in df else None  # None: every row a positive
    timestamp = df["timestamp"].to_numpy(dtype=np.int64) if "timestamp" in df else None
    rows = merge_rows(user, item, value, timestamp, len(item_ids), duplicates=duplicates, negatives=negatives,
                      min_value=min_rating, locate=table_locator(df, source=source), source=source)
    user, item, value, timestamp = rows.user, rows.item, rows.value, rows.timestamp
    counts = {**rows.counts, "rows_read": n_rows, "empty_id_rows_dropped": n_empty}
    del rows  # its arrays are the locals now: each goes when it is filtered below
    counts["rows_below_min_rating"] = counts["rows_below_min_value"]  # prepare's name for it
    per_user = np.bincount(user, minlength=len(user_ids))
    user_ok = per_user >= min_user_items
    small = ~user_ok[user]
    counts["rows_of_users_below_min_user_items"] = int(small.sum())
    counts["users_without_positives"] = int((per_user == 0).sum())
    counts["users_below_min_user_items"] = int(((per_user > 0) & ~user_ok).sum())
    if small.any():  # one column at a time, each replacing its unfiltered self
        keep = ~small
        user, item, value = user[keep], item[keep], value[keep]
        timestamp = None if timestamp is None else timestamp[keep]
    return Positives(user=user, item=item, value=value, timestamp=timestamp,
                     user_ids=_index(user_ids), item_ids=_index(item_ids), counts=counts)
