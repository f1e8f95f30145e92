"""From a ratings file to train / test files: merge duplicates, binarise, filter, split per user.

The rules, in the order they are applied (each is counted in ``summary.json``):

1. **Negatives and duplicates** (the row rules of :mod:`mrec_warp.data.rows`, shared with
   ``train`` and :meth:`~mrec_warp.data.interactions.Interactions.from_dataframe`),
   2. **binarise** at ``min_rating``, 3. **filter users** below ``min_user_items``:
   :func:`~mrec_warp.data.rows.binarise`, whose module docstring states these rules.
4. **Split each user** (users with fewer than 2 positives stay wholly in train, so every
   user in test also has training data):

   * ``random``: ``round(test_fraction * n)`` of the user's ``n`` items, at random, go to
     test (halves round up), clipped to ``[1, n - 1]``; ``test_fraction=0`` puts every row
     in train and writes an empty test.tsv (a model on all the data);
   * ``leave-out``: ``leave_out`` items at random go to test, at most ``n - 1``;
   * ``temporal``: the latest items by timestamp go to test, as many as ``test_fraction``
     (or ``leave_out``) says, counted as above; ties at the boundary are broken at random.
   * ``global-time``: not per user but one cut-off for everyone: every row later than
     ``cutoff`` (an ISO date or a unix timestamp) goes to test, every other row to train;
     with ``test_fraction=F`` instead, the cut-off is the timestamp at the (1 - F) quantile
     of the rows' timestamps (numpy's ``lower`` method: a timestamp of the data), so ties
     can make the test share a little below F. A merged pair has its earliest timestamp
     (:mod:`mrec_warp.data.rows`): a pair first met before the cut-off is a training row.
     Users with one row are split like everyone else.
5. **Drop unknown test items.** Test rows whose item has no row in train are dropped (a
   model cannot score an item it never saw); their number is in the summary. With
   ``global-time``, test rows whose *user* has no training row are dropped too (counted as
   ``test_rows_with_unknown_user``; ``test_rows_with_unknown_item`` counts those whose user
   is known but item is not), and the summary's ``cutoff`` gives the cut-off, the latest
   training and the earliest test timestamp -- checked: no training row is later than the cut-off.

Everything is vectorised over numpy arrays (group by user = sort by user), never a
per-user Python loop, so 20M-row files split in seconds. The same input, parameters and
seed give byte-identical files. A ``global-time`` cut-off is read by :func:`parse_cutoff`;
each split is written as one folder (train.tsv, test.tsv, summary.json) by
:func:`write_split`, so that no reader sees a mixed split.
"""
from __future__ import annotations

import contextlib
import functools
import math
import numbers
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from .. import strict_json
from ..errors import InputError
from ..files import DIR_MODE, atomic_path, atomic_write, make_folders, owner_tag, record_finished, remove_stale_temps
from ..progress import plural
from ..seeds import DEFAULT_SEED
from .rows import (
    DEFAULT_DUPLICATES, DEFAULT_EMPTY_IDS, DEFAULT_NEGATIVES, Positives, binarise, check_empty_ids, check_row_options,
    nothing_left,
)
from .tsv import write_interactions

#: Split strategies; each names an entry of ``_TEST_CHOOSERS``. The cold ones hold out whole
#: items (users): a ``test_fraction`` of them, every row of theirs in test.
SPLITS = ("random", "leave-out", "temporal", "global-time", "cold-items", "cold-users")
#: Splits that need a timestamp column.
TIME_SPLITS = ("temporal", "global-time")
COLD_SPLITS = ("cold-items", "cold-users")
DEFAULT_TEST_FRACTION = 0.2
#: Most splits one call writes: each is a full copy of the data on disk (and a summary in
#: memory); cross-validation uses 5 or 10.
MAX_SPLITS = 1000


def check_num_splits(num_splits) -> None:
    """A whole number of splits from 1 to :data:`MAX_SPLITS`, checked before anything is read."""
    if isinstance(num_splits, bool) or not isinstance(num_splits, numbers.Integral) or num_splits < 1:
        raise InputError(f"number of splits must be a positive integer, got {num_splits!r}", hint="e.g. `num_splits=5`")
    if num_splits > MAX_SPLITS:
        # each split is a full copy of the data on disk and one summary in memory
        raise InputError(f"`num_splits={num_splits}` is more than the {MAX_SPLITS:,} splits prepare writes "
                         "(each one a full copy of the data)", hint=f"use `num_splits` <= {MAX_SPLITS:,}")


# -- the global-time cut-off ------------------------------------------------------------------
#: The only date forms a cut-off takes: ISO 8601 ``YYYY-MM-DD[THH:MM[:SS[.f]]][Z|+hh:mm]`` (a space
#: may stand for the ``T``). Anything else (``01/06/2021``: 6 January or 1 June?) is refused
#: rather than read in one locale's order.
_ISO_CUTOFF = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$")
#: What a cut-off that is not one of them is told.
CUTOFF_FORMS = "an ISO 8601 date YYYY-MM-DD[THH:MM[:SS]][Z|+hh:mm] or a unix timestamp"


def parse_cutoff(cutoff: Any) -> int:
    """A cut-off as a unix timestamp in seconds: a number (or its text), or an ISO 8601 date
    or date-time (``2020-01-31``, ``2020-01-31T12:00:00``, ``2020-01-31T12:00+02:00``; UTC
    unless it names a zone). Other date forms (``01/06/2021``, ``31 Jan 2020``) are refused:
    their day and month order is a guess.

    A fractional timestamp is rounded down: timestamps are whole seconds, and a row at
    second ``t`` is later than a cut-off ``t - 0.5`` as it is than ``t - 1``.
    """
    if isinstance(cutoff, bool):
        cutoff = str(cutoff)
    if isinstance(cutoff, numbers.Real):
        value = float(cutoff)
    else:
        text = str(cutoff).strip()
        try:
            value = float(text)
        except ValueError:
            stamp = None
            if _ISO_CUTOFF.match(text):
                try:
                    stamp = pd.Timestamp(text)
                except (ValueError, TypeError):  # 2020-13-45: the form, not a date
                    stamp = None
            if stamp is None or stamp is pd.NaT:
                raise InputError(f"cut-off {cutoff!r} is not {CUTOFF_FORMS}",
                                 hint="e.g. `cutoff=2020-01-31`, `cutoff=2020-01-31T12:00:00` or `cutoff=1580428800`") from None
            stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp
            return int(np.floor(stamp.timestamp()))
    if not math.isfinite(value):
        raise InputError(f"cut-off {cutoff!r} is not a finite number", hint="e.g. `cutoff=2020-01-31`")
    return int(np.floor(value))


def iso_time(seconds: int) -> str:
    """A unix timestamp as an ISO date-time in UTC (and the number, which is what the data holds)."""
    try:
        return f"{pd.Timestamp(seconds, unit='s', tz='UTC').strftime('%Y-%m-%dT%H:%M:%SZ')}, unix {seconds}"
    except (OverflowError, ValueError):  # timestamps that are not seconds since 1970
        return str(seconds)


# -- choosing test rows -----------------------------------------------------------------------

def _test_counts(n: np.ndarray, test_fraction: Optional[float], leave_out: Optional[int]) -> np.ndarray:
    """How many of each user's ``n`` positives go to test (0 for users with fewer than 2)."""
    if leave_out is None and test_fraction == 0:  # everything in train
        return np.zeros(len(n), dtype=np.int64)
    if leave_out is not None:
        k = np.minimum(leave_out, n - 1)
    else:
        # floor(x + 0.5): halves round up, unlike numpy's round-half-to-even
        k = np.clip(np.floor(test_fraction * n + 0.5), 1, np.maximum(n - 1, 1)).astype(np.int64)
    return np.where(n >= 2, k, 0)


def _rank_within_user(user: np.ndarray, order: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Rank (0-based) of each row among its user's rows, when the rows are taken in ``order``.

    ``order`` must keep users grouped in ascending code order (it sorts by user first).
    """
    starts = np.cumsum(n) - n
    rank = np.empty(len(user), dtype=np.int64)
    rank[order] = np.arange(len(user), dtype=np.int64) - starts[user[order]]
    return rank


def _random_test(pos: Positives, k: np.ndarray, n: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random ``k[u]`` of each user's rows."""
    # One sort on (user, random 32 bits) shuffles every user's rows at once.
    key = pos.user << 32
    key |= rng.integers(0, 2**32, size=len(pos), dtype=np.uint64).view(np.int64)  # below 2**32: the same bits
    order = np.argsort(key, kind="stable")
    del key
    return _rank_within_user(pos.user, order, n) < k[pos.user]


def _temporal_test(pos: Positives, k: np.ndarray, n: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The latest ``k[u]`` of each user's rows; equal timestamps in random order."""
    noise = rng.random(len(pos))
    order = np.lexsort((noise, pos.timestamp, pos.user))
    rank = _rank_within_user(pos.user, order, n)
    return rank >= (n - k)[pos.user]


def _cold_test(codes: np.ndarray, n_codes: int, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Rows of a random ``round(fraction * m)`` of the ``m`` codes that have rows (at least 1, at most m - 1)."""
    present = np.flatnonzero(np.bincount(codes, minlength=n_codes) > 0)
    n_out = int(np.clip(np.floor(fraction * len(present) + 0.5), 1, max(len(present) - 1, 1)))
    held = np.zeros(n_codes, dtype=bool)
    held[rng.choice(present, n_out, replace=False)] = True
    return held[codes]


def _cold_items_test(pos: Positives, k: np.ndarray, n: np.ndarray, rng: np.random.Generator, fraction: float) -> np.ndarray:
    """Every row of a random ``fraction`` of the items: new items for cold-start evaluation."""
    return _cold_test(pos.item, pos.n_items, fraction, rng)


def _cold_users_test(pos: Positives, k: np.ndarray, n: np.ndarray, rng: np.random.Generator, fraction: float) -> np.ndarray:
    """Every row of a random ``fraction`` of the users: new users for cold-start evaluation."""
    return _cold_test(pos.user, pos.n_users, fraction, rng)


def _global_time_test(pos: Positives, k: np.ndarray, n: np.ndarray, rng: np.random.Generator, cutoff: int) -> np.ndarray:
    """Every row later than ``cutoff``, whoever its user."""
    return pos.timestamp > cutoff


def _global_cutoff(pos: Positives, cutoff: Any, test_fraction: Optional[float], source: Optional[str]) -> int:
    """The cut-off in seconds: given, or the (1 - test_fraction) quantile of the timestamps;
    refused when it would leave train or test empty."""
    ts = pos.timestamp
    if cutoff is not None:
        at = parse_cutoff(cutoff)
    elif test_fraction == 0:  # everything in train, on purpose
        return int(ts.max())
    else:
        at = int(np.quantile(ts, 1.0 - test_fraction, method="lower"))
    first, last = int(ts.min()), int(ts.max())
    if at < first:
        raise InputError(f"the cut-off {iso_time(at)} is before the earliest interaction ({iso_time(first)}): nothing "
                         "would be left to train on", path=source, hint="give a later `cutoff`")
    if at >= last:
        raise InputError(f"the cut-off {iso_time(at)} is not before the latest interaction ({iso_time(last)}): nothing "
                         "would be left to test on", path=source,
                         hint="give an earlier `cutoff`" if cutoff is not None else
                         "many rows share the latest timestamp: give a larger `test_fraction` or a `cutoff`")
    return at


_TEST_CHOOSERS = {"random": _random_test, "leave-out": _random_test, "temporal": _temporal_test,
                  "global-time": _global_time_test,
                  "cold-items": _cold_items_test, "cold-users": _cold_users_test}


# -- validation -------------------------------------------------------------------------------
def check_split_options(
    test_fraction: Optional[float], leave_out: Optional[int], split: str, num_splits: int,
    min_user_items: int, min_rating: Optional[float], seed: int,
    duplicates: Optional[str] = None, negatives: str = DEFAULT_NEGATIVES, cutoff: Any = None,
) -> Tuple[Optional[float], Optional[int], str]:
    """Validate the split options; return the effective (test_fraction, leave_out, split)."""
    check_row_options(duplicates, negatives, min_rating)
    if split not in SPLITS:
        raise InputError(f"unknown split {split!r}", hint=f"use one of {', '.join(SPLITS)}")
    if cutoff is not None and split != "global-time":
        raise InputError(f"a cut-off is for `split=global-time`, not `split={split}`",
                         hint="add `split=global-time`, or drop `cutoff`")
    if split == "global-time":
        if leave_out is not None:
            raise InputError("`split=global-time` cuts every user at one time, not K rows per user",
                             hint="use `cutoff` or `test_fraction`")
        if cutoff is not None and test_fraction is not None:
            raise InputError("both a cut-off and a test fraction were given",
                             hint="use either `cutoff` or `test_fraction`, not both")
        if cutoff is not None:
            parse_cutoff(cutoff)  # a bad date fails before the file is read
    if test_fraction is not None and leave_out is not None:
        raise InputError(
            "both a test fraction and a leave-out count were given",
            hint="use either `test_fraction=F` or `leave_out=K`, not both",
        )
    if leave_out is not None and not isinstance(leave_out, bool) and isinstance(leave_out, numbers.Integral) \
            and leave_out == 0:
        # 0 per user in test is every row in train, as test_fraction=0 (one way to say it, not two)
        test_fraction, leave_out = 0.0, None
        split = "random" if split == "leave-out" else split
    if leave_out is not None:
        if isinstance(leave_out, bool) or not isinstance(leave_out, numbers.Integral) or leave_out < 1:
            raise InputError(f"leave-out count must be a whole number >= 0, got {leave_out!r}",
                             hint="e.g. `leave_out=1`; 0 puts every row in train")
        leave_out = int(leave_out)
        if split in COLD_SPLITS:
            raise InputError(f"`split={split}` holds out a fraction of whole {split[5:]}, not K per user",
                             hint="use `test_fraction=F` instead of `leave_out`")
        if split == "random":
            split = "leave-out"  # --leave-out K alone means a random leave-K-out split
    elif split == "leave-out":
        raise InputError("`split=leave-out` needs a count", hint="add `leave_out=K`, e.g. `leave_out=1`")
    elif not (split == "global-time" and cutoff is not None):
        if test_fraction is None:
            test_fraction = DEFAULT_TEST_FRACTION
        if (isinstance(test_fraction, bool) or not isinstance(test_fraction, numbers.Real)
                or not 0.0 <= float(test_fraction) < 1.0):
            raise InputError(
                f"test fraction must be at least 0 and below 1, got {test_fraction!r}",
                hint="e.g. `test_fraction=0.2` puts 20% of each user's items in test; 0 puts all in train",
            )
        test_fraction = float(test_fraction)
        if test_fraction == 0 and split in COLD_SPLITS:
            raise InputError(f"`split={split}` holds out some {split[5:]}, and `test_fraction=0` none",
                             hint="give a fraction above 0, or drop `split` to put every row in train")
        if test_fraction == 0 and num_splits != 1:
            raise InputError("with `test_fraction=0` every split is the same (all rows in train)",
                             hint="use `num_splits=1`")
    check_num_splits(num_splits)
    if split in TIME_SPLITS and num_splits > 1:
        raise InputError(
            f"a {split} split is the same every time, so several splits would be copies",
            hint=f"use `num_splits=1` with `split={split}`, or a random split",
        )
    if isinstance(min_user_items, bool) or not isinstance(min_user_items, numbers.Integral) or min_user_items < 1:
        raise InputError(f"minimum items per user must be a positive integer, got {min_user_items!r}", hint="e.g. `min_user_items=5`")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}", hint="e.g. `seed=42`")
    return test_fraction, leave_out, split


def _check_data(pos: Positives, df: pd.DataFrame, split: str, min_rating: Optional[float], source: Optional[str],
                all_train: bool = False) -> None:
    if split in TIME_SPLITS and pos.timestamp is None:
        raise InputError(
            f"a {split} split needs timestamps, and the file has no timestamp column", path=source,
            hint="name it with `columns=user,item,rating,timestamp`, or use a random split",
        )
    if len(pos) == 0:
        c = pos.counts
        raise nothing_left(c, source, [f"{plural(c['rows_of_users_below_min_user_items'], 'row')} of users "
                                       "with too few items"] if c["rows_of_users_below_min_user_items"] else [],
                           hint="check `columns`: every row has an empty user or item id"
                           if c.get("empty_id_rows_dropped") == c["rows_read"] else
                           "lower `min_value` or `min_user_items`")
    n = np.bincount(pos.user, minlength=pos.n_users)
    if not all_train and split != "global-time" and not (n >= 2).any():
        raise InputError(
            "no user has 2 or more positives, so nothing can go to test", path=source,
            hint="lower `min_value`, or check that the user and item columns are right",
        )


def min_value_of(min_value: Optional[float], min_rating: Optional[float]) -> Optional[float]:
    """The minimum value from ``min_value`` or its older name ``min_rating`` (not both)."""
    if min_value is not None and min_rating is not None and min_value != min_rating:
        raise InputError(f"`min_value={min_value}` and `min_rating={min_rating}` are one option under two names",
                         hint="give `min_value` only")
    return min_value if min_value is not None else min_rating


# -- splitting --------------------------------------------------------------------------------
def iter_splits(
    df: pd.DataFrame,
    min_rating: Optional[float] = None,
    min_user_items: int = 1,
    test_fraction: Optional[float] = None,
    leave_out: Optional[int] = None,
    split: str = "random",
    num_splits: int = 1,
    seed: int = DEFAULT_SEED,
    source: Optional[str] = None,
    duplicates: Optional[str] = None,
    negatives: str = DEFAULT_NEGATIVES,
    min_value: Optional[float] = None,
    cutoff: Any = None,
    empty_ids: str = DEFAULT_EMPTY_IDS,
    coded: bool = False,
) -> Iterator[Tuple[pd.DataFrame, pd.DataFrame, Dict[str, Any]]]:
    """Split an in-memory ratings table; yield ``(train, test, summary)`` per split.

    The same rules as :func:`prepare` (see the module docstring), without files. Split
    ``i`` draws from ``numpy.random.SeedSequence(seed).spawn(num_splits)[i]``, so split 0
    is the same whatever ``num_splits`` is. ``coded``: train and test hold their user and
    item ids as ``Categorical`` columns (a code per row, not a string), as ``prepare``
    writes them.
    """
    min_rating = min_value_of(min_value, min_rating)
    test_fraction, leave_out, split = check_split_options(
        test_fraction, leave_out, split, num_splits, min_user_items, min_rating, seed, duplicates, negatives, cutoff
    )
    check_empty_ids(empty_ids)
    pos = binarise(df, min_rating=min_rating, min_user_items=min_user_items, duplicates=duplicates,
                   negatives=negatives, source=source, empty_ids=empty_ids)
    _check_data(pos, df, split, min_rating, source, all_train=test_fraction == 0 and leave_out is None)
    del df  # the codes are all the splits need: a caller that drops the table too frees its memory
    if split == "global-time":
        yield _global_time_split(pos, cutoff, test_fraction, source, coded, {
            "duplicates": duplicates, "negatives": negatives, "empty_ids": empty_ids, "min_rating": min_rating,
            "min_user_items": int(min_user_items), "split": split, "cutoff": None if cutoff is None else str(cutoff),
            "test_fraction": test_fraction, "num_splits": 1})
        return
    n = np.bincount(pos.user, minlength=pos.n_users)
    k = _test_counts(n, test_fraction, leave_out)
    choose = _TEST_CHOOSERS[split]
    if split in COLD_SPLITS:
        choose = functools.partial(choose, fraction=test_fraction)
    params = {
        # the rule used (sum when none was chosen); min_rating: the older name, kept for readers of it
        "duplicates": duplicates or DEFAULT_DUPLICATES, "negatives": negatives, "empty_ids": empty_ids,
        "min_value": min_rating,
        "min_rating": min_rating,
        "min_user_items": int(min_user_items), "split": split,
        "test_fraction": test_fraction, "leave_out": leave_out, "num_splits": int(num_splits), "seed": int(seed),
    }
    # A test row needs its user and its item in training, except on the side a cold split
    # holds out on purpose: with cold-items the item is new by design, only the user must be known.
    needs = "user" if split == "cold-items" else "item"
    for i in range(int(num_splits)):
        # child i of SeedSequence(seed).spawn(num_splits), made when it is needed (not all up front)
        child = np.random.SeedSequence(int(seed), spawn_key=(i,))
        test = choose(pos, k, n, np.random.default_rng(child))
        codes, n_codes = (pos.user, pos.n_users) if needs == "user" else (pos.item, pos.n_items)
        unknown = test & ~(np.bincount(codes[~test], minlength=n_codes) > 0)[codes]
        test &= ~unknown
        summary = _summary(pos, n, test, unknown, params, i, needs, cold=split if split in COLD_SPLITS else None)
        yield pos.take(~test & ~unknown, coded), pos.take(test, coded), summary


def _global_time_split(pos: Positives, cutoff: Any, test_fraction: Optional[float], source: Optional[str],
                       coded: bool, params: Dict[str, Any]) -> Tuple[pd.DataFrame, pd.DataFrame, Dict[str, Any]]:
    """``(train, test, summary)`` of the one global-time split (see the module docstring)."""
    at = _global_cutoff(pos, cutoff, test_fraction, source)
    later = _global_time_test(pos, np.empty(0), np.empty(0), None, at)
    train = ~later
    user_known = (np.bincount(pos.user[train], minlength=pos.n_users) > 0)[pos.user]
    item_known = (np.bincount(pos.item[train], minlength=pos.n_items) > 0)[pos.item]
    unknown_user = later & ~user_known
    unknown_item = later & user_known & ~item_known
    test = later & user_known & item_known
    latest_train = int(pos.timestamp[train].max()) if train.any() else None
    if latest_train is not None and latest_train > at:  # the promise of a time split, checked on what is written
        raise AssertionError(f"a training row at {latest_train} is later than the cut-off {at}")
    n = np.bincount(pos.user, minlength=pos.n_users)
    summary = _summary(pos, n, test, unknown_user | unknown_item, params, 0, "item")
    summary["test_rows_with_unknown_item"] = int(unknown_item.sum())
    summary["test_rows_with_unknown_user"] = int(unknown_user.sum())
    summary["users"]["train_only"] = int(np.count_nonzero(np.bincount(pos.user[train], minlength=pos.n_users)
                                                          * ~(np.bincount(pos.user[test], minlength=pos.n_users) > 0)))
    summary["cutoff"] = {
        "timestamp": at, "date": iso_time(at).split(",")[0],
        "latest_train_timestamp": latest_train,
        "earliest_test_timestamp": int(pos.timestamp[test].min()) if test.any() else None,
    }
    return pos.take(train, coded), pos.take(test, coded), summary


def _summary(
    pos: Positives, n: np.ndarray, test: np.ndarray, unknown: np.ndarray, params: Dict[str, Any],
    index: int, needs: str, cold: Optional[str] = None,
) -> Dict[str, Any]:
    """What a split kept and dropped. ``unknown`` are the test rows dropped because their
    ``needs`` side (user or item) has no training row; ``cold`` names a cold split, whose
    held-out items (users) are counted as in test on purpose, not as dropped."""
    c = pos.counts
    train = ~test & ~unknown
    in_train = np.bincount(pos.item[train], minlength=pos.n_items) > 0
    items_with_rows = np.bincount(pos.item, minlength=pos.n_items) > 0
    # ids whose every row was a dropped test row: in neither file (a cold split's held-out
    # ids are in test, counted as cold_in_test)
    user_in_neither = (n > 0) & ~_present(pos.user[train | test], pos.n_users)
    item_in_neither = items_with_rows & ~_present(pos.item[train | test], pos.n_items)
    summary = {
        "split": index,
        "parameters": dict(params),
        "rows_read": c["rows_read"],
        "malformed_rows": 0,  # a malformed line is an error, never skipped
        "empty_id_rows_dropped": c.get("empty_id_rows_dropped", 0),  # only by `empty_ids=drop`
        "duplicates_merged": c["duplicates_merged"],
        "negative_rows": c["negative_rows"],
        "negative_rows_dropped": c["negative_rows_dropped"],
        "pairs_netted_out": c["pairs_netted_out"],
        "rows_below_min_value": c["rows_below_min_value"],
        "negative_pairs_below_min_value": c["negative_pairs_below_min_value"],  # signed ratings: among them
        "rows_below_min_rating": c["rows_below_min_value"],  # the older name, kept for readers of it
        "pairs_kept": c["pairs_kept"],
        "rows_of_users_below_min_user_items": c["rows_of_users_below_min_user_items"],
        f"test_rows_with_unknown_{needs}": int(unknown.sum()),
        "users": {
            "read": pos.n_users,
            "kept": int((n > 0).sum()),
            "dropped_without_positives": c["users_without_positives"],
            "dropped_below_min_user_items": c["users_below_min_user_items"],
            "dropped_only_in_test": int(user_in_neither.sum()),
            "train_only": int(((n > 0) & (n < 2)).sum()),
        },
        "items": {
            "read": pos.n_items,
            "kept": int(in_train.sum()),
            "dropped_without_positives": int((~items_with_rows).sum()),
            "dropped_only_in_test": int(item_in_neither.sum()),
        },
        "train": _sizes(pos, train),
        "test": _sizes(pos, test),
    }
    if cold == "cold-items":
        summary["test_rows_with_unknown_item"] = 0
        summary["items"]["cold_in_test"] = summary["test"]["items"]
    elif cold is not None:
        summary["users"]["cold_in_test"] = summary["test"]["users"]
    return summary


def _present(codes: np.ndarray, n_codes: int) -> np.ndarray:
    """Which of ``n_codes`` codes occur in ``codes``."""
    return np.bincount(codes, minlength=n_codes) > 0


def _sizes(pos: Positives, mask: np.ndarray) -> Dict[str, int]:
    return {
        "rows": int(mask.sum()),
        "users": int(np.count_nonzero(np.bincount(pos.user[mask], minlength=pos.n_users))),
        "items": int(np.count_nonzero(np.bincount(pos.item[mask], minlength=pos.n_items))),
    }


# -- a split's folder -------------------------------------------------------------------------
#: What :func:`~mrec_warp.stages.prepare.prepare` writes into each split's folder; summary.json,
#: written last, says the folder is complete.
SPLIT_FILES = ("train.tsv", "test.tsv", "summary.json")


def write_split(folder: Path, train: pd.DataFrame, test: pd.DataFrame, summary: Dict[str, Any],
                encoding: str = "utf-8") -> None:
    """Write train.tsv, test.tsv and summary.json so that a reader never sees a mixed split.

    A new (or empty) folder is written whole as a hidden temporary folder beside it and
    renamed into place: it appears complete or not at all. An existing folder may hold other
    files (the input, the user's notes), so it is not replaced: each file goes to a
    temporary name, summary.json -- the "complete" marker -- is removed first, and the files
    are renamed train, test, then summary last. A run killed in between leaves no
    summary.json, so the folder never claims to hold a split it does not. Train and test
    are written in the input's encoding (see :func:`~mrec_warp.data.inputs.output_encoding`).
    """
    make_folders(folder.parent)
    if not folder.exists() or not any(folder.iterdir()):
        remove_stale_temps(folder.parent)  # what killed runs left beside it, for any output
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.{owner_tag()}", dir=str(folder.parent)))
        try:
            _write_split_files(tmp, train, test, summary, encoding)
            os.chmod(tmp, DIR_MODE)  # mkdtemp makes it private
            os.rename(tmp, folder)  # replaces an empty folder; fails if a full one appeared meanwhile
            record_finished(folder)
            return
        except OSError:
            if not (folder.is_dir() and any(folder.iterdir())):
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)  # gone already after the rename
        # another run filled the folder meanwhile: write into it like into any existing one
    with contextlib.ExitStack() as stack:
        # entered in reverse: the stack renames the last entered first
        summary_tmp = stack.enter_context(atomic_path(folder / "summary.json"))
        test_tmp = stack.enter_context(atomic_path(folder / "test.tsv"))
        train_tmp = stack.enter_context(atomic_path(folder / "train.tsv"))
        _write_split_files(None, train, test, summary, encoding, (train_tmp, test_tmp, summary_tmp))
        # the old marker goes before any file changes, so no moment pairs it with new files
        with contextlib.suppress(FileNotFoundError):
            os.unlink(folder / "summary.json")
    record_finished(folder)


def _write_split_files(folder: Optional[Path], train: pd.DataFrame, test: pd.DataFrame, summary: Dict[str, Any],
                       encoding: str, paths: Optional[Sequence[str]] = None) -> None:
    """The three files, into ``folder`` or to the given ``paths`` (train, test, summary)."""
    paths = paths or [str(folder / name) for name in SPLIT_FILES]
    for table, path in ((train, paths[0]), (test, paths[1])):
        table.attrs["encoding"] = encoding  # write_interactions writes in the input's encoding
        write_interactions(table, path)  # synced to disk, with the umask's mode
    if folder is None:
        with open(paths[2], "w", encoding="utf-8", newline="\n") as fh:
            fh.write(strict_json.dumps(summary, indent=2) + "\n")
    else:
        with atomic_write(paths[2]) as fh:
            fh.write(strict_json.dumps(summary, indent=2) + "\n")
