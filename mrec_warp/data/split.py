"""From a ratings file to train / test files: merge duplicates, binarise, filter, split per user.

The rules, in the order they are applied (each is counted in ``summary.json``):

1. **Merge duplicates**, 2. **binarise** at ``min_rating``, 3. **filter users** below
   ``min_user_items``: :func:`~mrec_warp.data.positives.binarise`, whose module docstring
   states these three rules in full.
4. **Split each user** (users with fewer than 2 positives stay wholly in train, so every
   user in test also has training data):

   * ``random``: ``round(test_fraction * n)`` of the user's ``n`` items, at random, go to
     test (halves round up), clipped to ``[1, n - 1]``;
   * ``leave-out``: ``leave_out`` items at random go to test, at most ``n - 1``;
   * ``temporal``: the latest items by timestamp go to test, as many as ``test_fraction``
     (or ``leave_out``) says, counted as above; ties at the boundary are broken at random.
5. **Drop unknown test items.** Test rows whose item has no row in train are dropped (a
   model cannot score an item it never saw); their number is in the summary.

Everything is vectorised over numpy arrays (group by user = sort by user), never a
per-user Python loop, so 20M-row files split in seconds. The same input, parameters and
seed give byte-identical files.
"""
from __future__ import annotations

import functools
import math
import numbers
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from ..errors import InputError
from ..files import PathLike
from ..progress import SILENT, Progress, plural
from ..seeds import DEFAULT_SEED
from .features import write_features
from .positives import Positives, binarise
from .ratings import describe_reading, read_ratings
from .side_features import side_features
from .split_folder import write_split

#: Split strategies; each names an entry of ``_TEST_CHOOSERS``. The cold ones hold out whole
#: items (users): a ``test_fraction`` of them, every row of theirs in test.
SPLITS = ("random", "leave-out", "temporal", "cold-items", "cold-users")
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


_TEST_CHOOSERS = {"random": _random_test, "leave-out": _random_test, "temporal": _temporal_test,
                  "cold-items": _cold_items_test, "cold-users": _cold_users_test}


# -- validation -------------------------------------------------------------------------------
def _check_options(
    test_fraction: Optional[float], leave_out: Optional[int], split: str, num_splits: int,
    min_user_items: int, min_rating: Optional[float], seed: int,
) -> Tuple[Optional[float], Optional[int], str]:
    """Validate the split options; return the effective (test_fraction, leave_out, split)."""
    if split not in SPLITS:
        raise InputError(f"unknown split {split!r}", hint=f"use one of {', '.join(SPLITS)}")
    if test_fraction is not None and leave_out is not None:
        raise InputError(
            "both a test fraction and a leave-out count were given",
            hint="use either `test_fraction=F` or `leave_out=K`, not both",
        )
    if leave_out is not None:
        if isinstance(leave_out, bool) or not isinstance(leave_out, numbers.Integral) or leave_out < 1:
            raise InputError(f"leave-out count must be a positive integer, got {leave_out!r}", hint="e.g. `leave_out=1`")
        leave_out = int(leave_out)
        if split in COLD_SPLITS:
            raise InputError(f"`split={split}` holds out a fraction of whole {split[5:]}, not K per user",
                             hint="use `test_fraction=F` instead of `leave_out`")
        if split == "random":
            split = "leave-out"  # --leave-out K alone means a random leave-K-out split
    elif split == "leave-out":
        raise InputError("`split=leave-out` needs a count", hint="add `leave_out=K`, e.g. `leave_out=1`")
    else:
        if test_fraction is None:
            test_fraction = DEFAULT_TEST_FRACTION
        if not isinstance(test_fraction, numbers.Real) or not 0.0 < float(test_fraction) < 1.0:
            raise InputError(
                f"test fraction must be between 0 and 1 (exclusive), got {test_fraction!r}",
                hint="e.g. `test_fraction=0.2` puts 20% of each user's items in test",
            )
        test_fraction = float(test_fraction)
    check_num_splits(num_splits)
    if split == "temporal" and num_splits > 1:
        raise InputError(
            "a temporal split is the same every time, so several splits would be copies",
            hint="use `num_splits=1` with `split=temporal`, or a random split",
        )
    if isinstance(min_user_items, bool) or not isinstance(min_user_items, numbers.Integral) or min_user_items < 1:
        raise InputError(f"minimum items per user must be a positive integer, got {min_user_items!r}", hint="e.g. `min_user_items=5`")
    if min_rating is not None and (not isinstance(min_rating, numbers.Real) or not math.isfinite(min_rating)):
        raise InputError(f"minimum rating must be a number, got {min_rating!r}", hint="e.g. `min_rating=4`")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}", hint="e.g. `seed=42`")
    return test_fraction, leave_out, split


def _check_data(pos: Positives, df: pd.DataFrame, split: str, min_rating: Optional[float], source: Optional[str]) -> None:
    if split == "temporal" and pos.timestamp is None:
        raise InputError(
            "a temporal split needs timestamps, and the file has no timestamp column", path=source,
            hint="name it with `columns=user,item,rating,timestamp`, or use a random split",
        )
    if min_rating is not None and "value" not in df:
        raise InputError(
            "`min_rating` needs a rating column, and the file has only user and item", path=source,
            hint="drop `min_rating`, or name the rating column with `columns`",
        )
    if len(pos) == 0:
        c = pos.counts
        raise InputError(
            f"no interactions left: {c['rows_below_min_rating']} rows below the minimum rating, "
            f"{c['rows_of_users_below_min_user_items']} rows of users with too few items", path=source,
            hint="lower `min_rating` or `min_user_items`",
        )
    n = np.bincount(pos.user, minlength=pos.n_users)
    if not (n >= 2).any():
        raise InputError(
            "no user has 2 or more positives, so nothing can go to test", path=source,
            hint="lower `min_rating`, or check that the user and item columns are right",
        )


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
) -> Iterator[Tuple[pd.DataFrame, pd.DataFrame, Dict[str, Any]]]:
    """Split an in-memory ratings table; yield ``(train, test, summary)`` per split.

    The same rules as :func:`prepare` (see the module docstring), without files. Split
    ``i`` draws from ``numpy.random.SeedSequence(seed).spawn(num_splits)[i]``, so split 0
    is the same whatever ``num_splits`` is.
    """
    test_fraction, leave_out, split = _check_options(
        test_fraction, leave_out, split, num_splits, min_user_items, min_rating, seed
    )
    pos = binarise(df, min_rating=min_rating, min_user_items=min_user_items)
    _check_data(pos, df, split, min_rating, source)
    n = np.bincount(pos.user, minlength=pos.n_users)
    k = _test_counts(n, test_fraction, leave_out)
    choose = _TEST_CHOOSERS[split]
    if split in COLD_SPLITS:
        choose = functools.partial(choose, fraction=test_fraction)
    params = {
        "min_rating": min_rating, "min_user_items": int(min_user_items), "split": split,
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
        "duplicates_merged": c["duplicates_merged"],
        "rows_below_min_rating": c["rows_below_min_rating"],
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


# -- the file-to-files pipeline step ----------------------------------------------------------
def prepare(
    input: PathLike,
    outdir: PathLike,
    format: str = "auto",
    sep: Optional[str] = None,
    header: Optional[bool] = None,
    columns: Optional[Sequence] = None,
    min_rating: Optional[float] = None,
    min_user_items: int = 1,
    test_fraction: Optional[float] = None,
    leave_out: Optional[int] = None,
    split: str = "random",
    num_splits: int = 1,
    seed: int = DEFAULT_SEED,
    progress: Optional[Progress] = None,
    features: bool = False,
) -> Dict[str, Any]:
    """Read a ratings file, merge / binarise / filter it and write train and test files.

    The rules are in this module's docstring. Writes ``train.tsv``, ``test.tsv``
    (headerless ``user item value [timestamp]``) and ``summary.json`` into ``outdir``, or
    into ``outdir/split-0`` ... ``split-{N-1}`` when ``num_splits`` is N > 1. Each file is
    written to a temporary name and renamed when complete; all options are checked before
    anything is written.

    Parameters
    ----------
    input : path-like
        Ratings file; see :func:`~mrec_warp.data.ratings.read_ratings` for ``format``, ``sep``,
        ``header`` and ``columns``.
    outdir : path-like
        Output folder, created if needed.
    min_rating : float, optional
        Keep (merged) rows with a value of at least this; ``None`` keeps all.
    min_user_items : int
        Drop users with fewer positives than this (default 1: keep everyone).
    test_fraction : float, optional
        Share of each user's positives for test, in (0, 1); default 0.2 unless
        ``leave_out`` is given. Giving both is an error.
    leave_out : int, optional
        Put this many of each user's positives in test instead (at most n - 1).
    split : {"random", "leave-out", "temporal"}
        How test rows are chosen: at random, or the latest by timestamp. ``leave_out``
        with ``split="random"`` means ``"leave-out"``.
    num_splits : int
        Number of independent random splits (not with ``temporal``).
    seed : int
        Seeds the random choices; the same seed gives byte-identical files.
    progress : Progress, optional
        Where to log what is happening; silent by default.
    features : bool
        Also write ``item_features.tsv`` / ``user_features.tsv`` into ``outdir`` from the
        side files found beside ``input`` (MovieLens 100k ``u.item`` / ``u.user``, or a
        ``mrec-warp synth`` folder's ``item_tags.tsv``); see
        :func:`~mrec_warp.data.side_features.side_features`. Features cover every id, also
        those only in test, so cold-start splits can use them.

    Returns
    -------
    dict
        The summary written to ``summary.json`` (one split), or
        ``{"num_splits": N, "splits": [summary, ...]}``.

    Raises
    ------
    InputError
        Bad options, an unreadable or malformed file, or nothing left to split.
    """
    progress = progress or SILENT
    _check_options(test_fraction, leave_out, split, num_splits, min_user_items, min_rating, seed)
    side: Dict[str, pd.DataFrame] = {}
    if features:
        side = side_features(input)
        if not side:
            raise InputError("no feature source beside the input (looked for u.item / u.user and item_tags.tsv)",
                             path=str(input), hint="drop `features`, or keep MovieLens' u.item/u.user beside u.data")
    df = read_ratings(input, format=format, sep=sep, header=header, columns=columns)
    encoding = df.attrs.get("encoding", "utf-8")
    progress.log(f"read {plural(len(df), 'row')} from {input} ({_ENCODING_NOTE.get(encoding, encoding)})")
    found = df.attrs.get("reading")
    if found is not None:  # what became of line 1 and which column is what, as read
        found = {**found, "description": describe_reading(found)}
        for line in found["description"].split("\n"):
            progress.log(line)
    outdir = Path(outdir)
    reading = {"format": format, "sep": sep, "header": header,
               "columns": None if columns is None else [str(c) for c in _as_list(columns)]}
    summaries: List[Dict[str, Any]] = []
    splits = iter_splits(
        df, min_rating=min_rating, min_user_items=min_user_items, test_fraction=test_fraction,
        leave_out=leave_out, split=split, num_splits=num_splits, seed=seed, source=str(input),
    )
    value_column = describe_value_column(df, columns, min_rating, header)
    for train, test, summary in splits:
        folder = outdir if num_splits == 1 else outdir / f"split-{summary['split']}"
        summary = {"input": str(input), "encoding": encoding, **({"reading": found} if found else {}), **summary}
        summary["parameters"] = {**reading, **summary["parameters"]}
        summary["value_column"] = {**value_column, "rows_below_min_rating": summary["rows_below_min_rating"]}
        summary["value_column"]["description"] = _value_words(summary["value_column"])
        if summary["split"] == 0:
            progress.log(summary["value_column"]["description"])
        if side:
            summary["feature_files"] = sorted(str(outdir / name) for name in side)
        write_split(folder, train, test, summary, encoding)
        progress.log(
            f"{folder}: train {plural(summary['train']['rows'], 'row')}, test {plural(summary['test']['rows'], 'row')} "
            f"({plural(summary['users']['kept'], 'user')}, {plural(summary['items']['kept'], 'item')})"
        )
        summaries.append(summary)
    for name, table in side.items():
        write_features(table, outdir / name)
        progress.log(f"{outdir / name}: {plural(len(table), 'row')}, {plural(table['feature'].nunique(), 'feature')}")
    return summaries[0] if num_splits == 1 else {"num_splits": num_splits, "splits": summaries}


def describe_value_column(df: pd.DataFrame, columns: Optional[Sequence], min_rating: Optional[float],
                          header: Optional[bool]) -> Dict[str, Any]:
    """Which input column is the value and what prepare made of it, for ``summary.json``.

    ``column`` is the value's header name, or ``"#3"`` for the third field (1-based). ``use`` is ``"none"`` (no value column: every row a positive), ``"binarised"`` (rows
    below ``min_rating`` dropped) or ``"kept"`` (every row a positive; the value stays in
    the third column of train.tsv / test.tsv for ``train --confidence``).
    """
    if "value" not in df:
        return {"column": None, "use": "none", "min_rating": None}
    name = df.attrs.get("value_column")  # set by read_ratings: header name or "#N"
    if name is None:  # a table built by hand: --columns' third entry, else the third field
        given = None if columns is None else _as_list(columns)
        name = str(given[2]).strip() if given is not None and len(given) > 2 else "2"
        if name.isdigit():  # a 0-based position, as --columns takes it; stored 1-based, as people count
            name = f"#{int(name) + 1}"
    return {"column": name, "use": "kept" if min_rating is None else "binarised", "min_rating": min_rating}


def _value_words(v: Dict[str, Any]) -> str:
    """The ``value_column`` entry in one sentence, e.g. "binarised at >= 4: 12,345 rows dropped"."""
    if v["use"] == "none":
        return "no value column: every row is a positive"
    column = f"value column {v['column']}" if v["column"].startswith("#") else f"value column {v['column']!r}"
    if v["use"] == "binarised":
        return (f"{column}: binarised at >= {v['min_rating']:g}: {plural(v['rows_below_min_rating'], 'row')} dropped "
                "(the values left stay in column 3 of train.tsv / test.tsv)")
    return (f"{column}: kept in column 3 of train.tsv / test.tsv (largest value of merged duplicates); "
            "every row is a positive; training with `confidence=log` weighs rows by it")


def _as_list(columns: Union[str, Sequence]) -> List:
    return columns.split(",") if isinstance(columns, str) else list(columns)


#: How the log names the encoding a ratings file was read in.
_ENCODING_NOTE = {
    "utf-8": "UTF-8", "utf-8-sig": "UTF-8 with a byte-order mark",
    "latin-1": "not valid UTF-8: read as Latin-1, outputs written in Latin-1 too",
}


