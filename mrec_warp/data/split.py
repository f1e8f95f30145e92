"""From a ratings file to train / test files: merge duplicates, binarise, filter, split per user.

The rules, in the order they are applied (each is counted in ``summary.json``):

1. **Negatives and duplicates** (the row rules of :mod:`mrec_warp.data.rows`, shared with
   ``train`` and :meth:`~mrec_warp.data.interactions.Interactions.from_dataframe`),
   2. **binarise** at ``min_rating``, 3. **filter users** below ``min_user_items``:
   :func:`~mrec_warp.data.binarise.binarise`, whose module docstring states these rules.
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
seed give byte-identical files.
"""
from __future__ import annotations

import functools
import numbers
from typing import Any, Dict, Iterator, Optional, Tuple

import numpy as np
import pandas as pd

from ..errors import InputError
from ..progress import plural
from ..seeds import DEFAULT_SEED
from .binarise import Positives, binarise
from .cutoff import iso_time, parse_cutoff
from .rows import DEFAULT_DUPLICATES, DEFAULT_EMPTY_IDS, DEFAULT_NEGATIVES, check_empty_ids, check_row_options, nothing_left

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
    noise = rng.integers(0, 2**32, size=len(pos), dtype=np.uint64).astype(np.int64)
    order = np.argsort((pos.user << 32) | noise, kind="stable")
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
) -> Iterator[Tuple[pd.DataFrame, pd.DataFrame, Dict[str, Any]]]:
    """Split an in-memory ratings table; yield ``(train, test, summary)`` per split.

    The same rules as :func:`prepare` (see the module docstring), without files. Split
    ``i`` draws from ``numpy.random.SeedSequence(seed).spawn(num_splits)[i]``, so split 0
    is the same whatever ``num_splits`` is.
    """
    min_rating = min_value_of(min_value, min_rating)
    test_fraction, leave_out, split = check_split_options(
        test_fraction, leave_out, split, num_splits, min_user_items, min_rating, seed, duplicates, negatives, cutoff
    )
    check_empty_ids(empty_ids)
    pos = binarise(df, min_rating=min_rating, min_user_items=min_user_items, duplicates=duplicates,
                   negatives=negatives, source=source, empty_ids=empty_ids)
    _check_data(pos, df, split, min_rating, source, all_train=test_fraction == 0 and leave_out is None)
    if split == "global-time":
        yield _global_time_split(pos, cutoff, test_fraction, source, {
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
        yield pos.take(~test & ~unknown), pos.take(test), summary


def _global_time_split(pos: Positives, cutoff: Any, test_fraction: Optional[float], source: Optional[str],
                       params: Dict[str, Any]) -> Tuple[pd.DataFrame, pd.DataFrame, Dict[str, Any]]:
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
    summary["users"]["dropped_only_in_test"] = int(((n > 0) & ~(np.bincount(pos.user[train], minlength=pos.n_users) > 0)).sum())
    summary["cutoff"] = {
        "timestamp": at, "date": iso_time(at).split(",")[0],
        "latest_train_timestamp": latest_train,
        "earliest_test_timestamp": int(pos.timestamp[test].min()) if test.any() else None,
    }
    return pos.take(train), pos.take(test), summary


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
        "rows_below_min_rating": c["rows_below_min_value"],  # the older name, kept for readers of it
        "pairs_kept": c["pairs_kept"],
        "rows_of_users_below_min_user_items": c["rows_of_users_below_min_user_items"],
        f"test_rows_with_unknown_{needs}": int(unknown.sum()),
        "users": {
            "read": pos.n_users,
            "kept": int((n > 0).sum()),
            "dropped_without_positives": c["users_without_positives"],
            "dropped_below_min_user_items": c["users_below_min_user_items"],
            "train_only": int(((n > 0) & (n < 2)).sum()),
        },
        "items": {
            "read": pos.n_items,
            "kept": int(in_train.sum()),
            "dropped_without_positives": int((~items_with_rows).sum()),
            "dropped_only_in_test": 0 if cold == "cold-items" else int((items_with_rows & ~in_train).sum()),
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


def _sizes(pos: Positives, mask: np.ndarray) -> Dict[str, int]:
    return {
        "rows": int(mask.sum()),
        "users": int(np.count_nonzero(np.bincount(pos.user[mask], minlength=pos.n_users))),
        "items": int(np.count_nonzero(np.bincount(pos.item[mask], minlength=pos.n_items))),
    }
