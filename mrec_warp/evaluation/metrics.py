"""Top-k ranking metrics, computed for every user at once.

The recommendation lists are held as flat arrays sorted by (user, position) rather than
a Python list per user, so 100k+ users cost a few sorts and ``bincount`` calls:

* every (user, item) pair becomes one int64 key ``user * n_items + item``
  (:mod:`mrec_warp.evaluation.space`);
* "is this recommended item in the user's test set / training set?" is a
  ``searchsorted`` of the recommendation keys into the sorted test / train keys;
* per-user sums (hits, DCG, average precision) are weighted ``bincount`` over the users.

Protocol (what :func:`evaluate_recommendations` measures)
--------------------------------------------------------
* Users and items are the union of those in train and test (recommendations naming any
  other id are an input error).
* A test (user, item) pair that is also in train is ignored: it can never be recommended
  by a recommender that excludes seen items, so it would only add noise.
* Items from the user's training set are removed from that user's recommendations before
  scoring and the list closes up (the next item moves up a rank), so a recommender that
  forgot to exclude seen items is scored on what it would show. Repeated items keep only
  their best rank.
* Evaluated users are the test users with at least one test item left; an evaluated user
  without recommendations scores 0 on every metric. Averages are over evaluated users.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from ..errors import InputError
from ..progress import plural
from ..data.features import as_feature_table
from .beyond import beyond_accuracy, feature_matrix
from .result import Evaluation, metric_names
from .space import InteractionsLike, Space, build_space, encode, first_occurrence, member
from .statistics import SUMMARY_COLUMNS, global_number, summarize


def evaluate_recommendations(
    train: InteractionsLike,
    test: InteractionsLike,
    recs: pd.DataFrame,
    ks: Sequence[int] = (5, 10, 20),
    source: Optional[str] = None,
    catalog: Optional[Sequence[str]] = None,
    beyond: bool = False,
    item_features: Optional[pd.DataFrame] = None,
) -> Evaluation:
    """Score top-k recommendations against held-out positives.

    Parameters
    ----------
    train, test : Interactions or pandas.DataFrame
        Positives (every stored pair / every row); DataFrames need ``user`` and ``item``.
    recs : pandas.DataFrame
        Columns ``user``, ``item`` and ``rank`` (1 = best; when absent, descending
        ``score``, else the row order per user, is the ranking; ties keep row order). An
        optional ``line`` column is used in error messages (as produced by
        :func:`~mrec_warp.evaluation.recs_file.read_recs`).
    ks : sequence of int
        Cut-offs, each >= 1.
    source : str, optional
        Name of the recommendations file, for error messages.
    catalog : sequence of str, optional
        Item ids that may be recommended although they are in neither ``train`` nor
        ``test`` (with a cold-items split: the new items nobody liked); they count as misses.
    beyond : bool
        Add the beyond-accuracy metrics (novelty, popularity, long tail, Gini of exposure:
        :mod:`~mrec_warp.evaluation.beyond`).
    item_features : pandas.DataFrame, optional
        A feature table (``id``, ``feature``, ``weight``, as from
        :func:`~mrec_warp.data.features.read_features`): adds ``diversity@k`` (and implies
        ``beyond``).

    Returns
    -------
    Evaluation

    Raises
    ------
    InputError
        When a recommended user or item is in neither train nor test (the recommendations
        were probably made from another split), naming ``source`` and the line.

    Notes
    -----
    With ``hits@k`` the number of the user's test items among the first k recommendations
    (after train items are removed), ``T`` the user's test items and ``rank`` 1-based:

    * ``precision@k = hits@k / k`` (k even when the list is shorter)
    * ``recall@k = hits@k / |T|``
    * ``ndcg@k = sum_{hits at rank r <= k} 1/log2(r+1)  /  sum_{r=1}^{min(k,|T|)} 1/log2(r+1)``
    * ``map@k = sum_{hits at rank r <= k} (hits@r / r)  /  min(k, |T|)``
    * ``hit_rate@k = 1 if hits@k > 0 else 0``
    * ``mrr = 1 / rank of the first test item in the whole list, 0 if none``
    * ``coverage@k`` (global) = distinct train items in the evaluated users' top k /
      number of train items (for an Interactions, all of its item ids).

    The ``info`` counts: ``n_users_evaluated``, ``n_users_without_recs`` (evaluated users
    absent from ``recs``), ``n_users_short_list`` (evaluated users with fewer than max(ks)
    items after cleaning), ``n_rec_rows``, ``n_rec_rows_in_train`` and
    ``n_rec_rows_repeated`` (removed), ``n_test_pairs`` (scored), ``n_test_pairs_in_train``
    (ignored), ``n_test_users_all_in_train``, ``n_train_items``, ``n_items``.
    """
    space = build_space(train, test, catalog)
    features = None if item_features is None else feature_matrix(as_feature_table(item_features), space.item_ids)
    return score_against(space, recs, ks, source, beyond=beyond, features=features)


def score_against(space: Space, recs: pd.DataFrame, ks: Sequence[int] = (5, 10, 20),
                  source: Optional[str] = None, beyond: bool = False, features=None) -> Evaluation:
    """:func:`evaluate_recommendations` against a split already coded by
    :func:`~mrec_warp.evaluation.space.build_space`, so several recommendation files share
    that work.

    With ``beyond``, the beyond-accuracy metrics of :mod:`~mrec_warp.evaluation.beyond`
    follow coverage (``features``: an items x features matrix from
    :func:`~mrec_warp.evaluation.beyond.feature_matrix` in the space's item order adds
    ``diversity@k``)."""
    ks = _check_ks(ks)
    users, items, info = _recs_codes(recs, space, source)
    users, items, pos, cleaning = _ranked_lists(users, items, recs, space)
    info.update(cleaning)

    evaluated = space.n_test > 0
    per_user = _per_user_metrics(users, items, pos, space, ks)
    frame = pd.DataFrame(per_user, index=pd.Index(space.user_ids, name="user"))
    n_recs = np.bincount(users, minlength=space.n_users)
    frame.insert(0, "n_recs", n_recs)
    frame.insert(0, "n_test", space.n_test)
    extra: Dict[str, Any] = {}
    extra_global: Dict[str, Any] = {}
    if beyond or features is not None:
        extra, extra_global = beyond_accuracy(users, items, pos, evaluated, space, ks, features)
        for name, values in extra.items():
            frame[name] = values
    frame = frame.loc[evaluated]

    coverage = _coverage(users, items, pos, evaluated, space, ks)
    info.update(
        n_users_evaluated=int(evaluated.sum()),
        n_users_without_recs=int((evaluated & (info.pop("_users_in_recs") == 0)).sum()),
        n_users_short_list=int((evaluated & (n_recs < max(ks))).sum()),
        n_test_pairs=int(len(space.test_keys)),
        n_test_pairs_in_train=space.n_test_in_train,
        n_test_users_all_in_train=space.n_test_users_all_in_train,
        n_train_items=int(space.n_train_items),
        n_items=int(space.n_items),
    )
    summary = _summary_table(frame[metric_names(ks)], coverage, frame[list(extra)], extra_global)
    return Evaluation(per_user=frame, summary=summary, ks=ks, info=info)


def _check_ks(ks: Sequence[int]) -> Tuple[int, ...]:
    ks = tuple(int(k) for k in ks)
    if not ks or any(k < 1 for k in ks):
        raise ValueError(f"every k must be a positive integer, got {ks}")
    return tuple(sorted(set(ks)))


def _recs_codes(recs: pd.DataFrame, space: Space, source: Optional[str]):
    """Map recommended ids to codes; unknown ids are an input error naming the line."""
    for name in ("user", "item"):
        if name not in recs.columns:
            raise ValueError(f"recommendations need columns 'user' and 'item'; missing {name!r}")
    users = encode(recs["user"], space.user_ids)
    items = encode(recs["item"], space.item_ids)
    for kind, codes, column in (("user", users, "user"), ("item", items, "item")):
        unknown = codes < 0
        if unknown.any():
            row = int(np.flatnonzero(unknown)[0])
            line = int(recs["line"].iloc[row]) if "line" in recs.columns else row + 1
            more = int(unknown.sum()) - 1
            also = f" ({plural(more, 'more such row')})" if more else ""
            raise InputError(
                f"{kind} {recs[column].iloc[row]!r} is in neither the training nor the test data{also}",
                path=source or "recommendations", line=line,
                hint="were these recommendations made from this train/test split?",
            )
    users_in_recs = np.bincount(users, minlength=space.n_users)
    return users.astype(np.int64), items.astype(np.int64), {"_users_in_recs": users_in_recs, "n_rec_rows": len(recs)}


def _ranked_lists(users: np.ndarray, items: np.ndarray, recs: pd.DataFrame, space: Space):
    """Sort by (user, rank), drop train items and repeats, return 0-based positions."""
    if "rank" in recs.columns:
        rank = recs["rank"].to_numpy(dtype=np.float64)
        if np.isnan(rank).any():
            raise ValueError("recommendations have missing ranks")
    elif "score" in recs.columns:
        rank = -recs["score"].to_numpy(dtype=np.float64)  # higher score = better rank
    else:
        rank = np.zeros(len(users))
    # file order breaks rank ties so the result never depends on the sort algorithm
    order = np.lexsort((np.arange(len(users)), rank, users))
    users, items = users[order], items[order]
    keys = space.keys(users, items)

    in_train = member(space.train_keys, keys)
    first = first_occurrence(keys)  # lists are sorted by rank: the first occurrence is the best
    keep = first & ~in_train
    users, items = users[keep], items[keep]
    # position within the user's list: index minus the index where the user's run starts
    pos = np.arange(len(users)) - np.searchsorted(users, users, side="left")
    cleaning = {"n_rec_rows_in_train": int(in_train.sum()), "n_rec_rows_repeated": int((~first & ~in_train).sum())}
    return users, items, pos, cleaning


def _discount_cumsum(n: int) -> np.ndarray:
    """``out[j] = sum_{p=0}^{j-1} 1/log2(p+2)``: the ideal DCG with j relevant items."""
    return np.concatenate([[0.0], np.cumsum(1.0 / np.log2(np.arange(n) + 2.0))])


def _per_user_metrics(users, items, pos, space: Space, ks: Tuple[int, ...]) -> Dict[str, np.ndarray]:
    n_users = space.n_users
    n_test = space.n_test.astype(np.float64)
    safe_n_test = np.maximum(n_test, 1.0)  # non-evaluated users are dropped afterwards
    hit = member(space.test_keys, space.keys(users, items))
    # running number of hits within each user's list, counting the current position
    c = np.concatenate([[0], np.cumsum(hit)])
    hits_so_far = c[1:] - c[np.searchsorted(users, users, side="left")]
    # the ideal DCG is read at min(k, n_test): never longer than the longest test list, so
    # that memory does not grow with k (k=1e12 on lists of 10)
    ideal = _discount_cumsum(int(min(max(ks), space.n_test.max(initial=0))))

    # only the hits matter from here on: take them, their discounts and AP terms once
    hit_users, hit_pos = users[hit], pos[hit]
    discount = 1.0 / np.log2(hit_pos + 2.0)
    ap_term = hits_so_far[hit] / (hit_pos + 1.0)
    out: Dict[str, np.ndarray] = {}
    for k in ks:
        sel = hit_pos < k
        u = hit_users[sel]
        hits = np.bincount(u, minlength=n_users).astype(np.float64)
        n_ideal = np.minimum(k, space.n_test)
        out[f"precision@{k}"] = hits / k
        out[f"recall@{k}"] = hits / safe_n_test
        out[f"ndcg@{k}"] = (np.bincount(u, weights=discount[sel], minlength=n_users)
                            / np.where(n_ideal > 0, ideal[n_ideal], 1.0))
        out[f"map@{k}"] = np.bincount(u, weights=ap_term[sel], minlength=n_users) / np.maximum(n_ideal, 1)
        out[f"hit_rate@{k}"] = (hits > 0).astype(np.float64)
    out = {name: out[name] for name in metric_names(ks) if name in out}  # metric-major order
    out["mrr"] = _reciprocal_rank(hit_users, hit_pos, n_users)
    return out


def _reciprocal_rank(hit_users: np.ndarray, hit_pos: np.ndarray, n_users: int) -> np.ndarray:
    rr = np.zeros(n_users)
    # hit arrays are sorted by (user, position): a user's first entry is the first hit
    first = np.ones(len(hit_users), dtype=bool)
    first[1:] = hit_users[1:] != hit_users[:-1]
    rr[hit_users[first]] = 1.0 / (hit_pos[first] + 1.0)
    return rr


def _coverage(users, items, pos, evaluated, space: Space, ks) -> Dict[int, float]:
    out = {}
    counted = evaluated[users] & (items < space.n_train_items)  # the same for every k
    for k in ks:
        sel = counted & (pos < k)
        distinct = int(np.count_nonzero(np.bincount(items[sel], minlength=space.n_items)))
        out[k] = distinct / space.n_train_items if space.n_train_items else float("nan")
    return out


def _summary_table(per_user: pd.DataFrame, coverage: Dict[int, float], extra: Optional[pd.DataFrame] = None,
                   extra_global: Optional[Dict[str, float]] = None) -> pd.DataFrame:
    """Per-user metrics, coverage, then the beyond-accuracy ones (per user, then global)."""
    rows = {m: summarize(per_user[m].to_numpy()) for m in per_user.columns}
    for k, value in coverage.items():
        rows[f"coverage@{k}"] = global_number(value)
    if extra is not None:
        rows.update({m: summarize(extra[m].to_numpy()) for m in extra.columns})
    rows.update({m: global_number(v) for m, v in (extra_global or {}).items()})
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(SUMMARY_COLUMNS))
