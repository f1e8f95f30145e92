"""Per-user ROC AUC of a scoring function: test items against the items a user never met.

Unlike the top-k metrics (:mod:`mrec_warp.evaluation.metrics`), which score a finished
recommendations file, AUC needs the model's scores of every item, so it takes a scoring
function and works in blocks of users.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..data.interactions import Interactions
from .space import InteractionsLike, member, pairs, sorted_unique
from .statistics import summarize

ScoreFn = Callable[[np.ndarray], np.ndarray]


@dataclass
class AUCResult:
    """Per-user ROC AUC and its average.

    Attributes
    ----------
    per_user : pandas.Series
        AUC of each evaluated user, indexed by user id.
    mean, ci95 : float
        Average over users and the half-width of its 95% CI (``1.96 * sd / sqrt(n)``).
    n_users : int
    n_test_pairs_skipped : int
        Test pairs whose user or item the model does not know (cannot be scored).
    """

    per_user: pd.Series
    mean: float
    ci95: float
    n_users: int
    n_test_pairs_skipped: int


def auc(
    score_fn: ScoreFn,
    train: Interactions,
    test: InteractionsLike,
    block_size: int = 1024,
    max_block_cells: int = 1 << 24,
) -> AUCResult:
    """Per-user AUC of test items against items the user has not interacted with.

    For each test user, AUC is the probability that a random test item scores higher than
    a random *negative* item (neither in the user's train nor test set), ties counting
    one half: the Mann-Whitney U statistic divided by ``n_pos * n_neg``. Users with no
    test item or no negative item are skipped. The result is averaged over users.

    Parameters
    ----------
    score_fn : callable
        ``score_fn(user_indices) -> array (len(user_indices), train.n_items)``: scores of
        the given training-row indices against every training item, e.g.
        ``model.score_users``. Higher means more relevant.
    train : Interactions
        The training data, in the model's index space.
    test : Interactions or pandas.DataFrame
        Held-out positives; users or items unknown to ``train`` cannot be scored and are
        skipped (counted in ``n_test_pairs_skipped``), pairs also in train are ignored.
    block_size : int
        Users scored per call; lowered so a block never exceeds ``max_block_cells`` scores.
    """
    if not isinstance(train, Interactions):
        raise TypeError("auc needs the training Interactions (the model's index space)")
    csr = train.matrix
    n_users, n_items = csr.shape
    te_rows, te_cols, te_users, te_items = pairs(test, "test")
    u = pd.Index(train.user_ids, dtype=object).get_indexer(te_users)[te_rows]
    i = pd.Index(train.item_ids, dtype=object).get_indexer(te_items)[te_cols]
    known = (u >= 0) & (i >= 0)
    train_keys = _train_keys(csr)
    test_keys = sorted_unique(u[known].astype(np.int64) * n_items + i[known])
    test_keys = test_keys[~member(train_keys, test_keys)]
    test_csr = _keys_to_csr(test_keys, n_users, n_items)
    n_pos = np.diff(test_csr.indptr)
    n_train = np.diff(csr.indptr)
    n_neg = n_items - n_train - n_pos
    users = np.flatnonzero((n_pos > 0) & (n_neg > 0))

    step = max(1, min(int(block_size), max_block_cells // max(n_items, 1)))
    values = np.empty(len(users))
    for start in range(0, len(users), step):
        block = users[start:start + step]
        values[start:start + step] = _auc_block(score_fn, block, csr, test_csr, n_pos[block], n_neg[block])
    stats = summarize(values)
    return AUCResult(
        per_user=pd.Series(values, index=pd.Index(train.user_ids[users], name="user"), name="auc"),
        mean=stats["mean"], ci95=stats["ci95"], n_users=len(users),
        n_test_pairs_skipped=int((~known).sum()),
    )


def _train_keys(csr) -> np.ndarray:
    """Every stored training pair (one of value 0 too: it is an interaction) as a sorted key."""
    rows = np.repeat(np.arange(csr.shape[0], dtype=np.int64), np.diff(csr.indptr))
    return sorted_unique(rows * csr.shape[1] + csr.indices)


def _keys_to_csr(keys: np.ndarray, n_users: int, n_items: int):
    rows, cols = keys // max(n_items, 1), keys % max(n_items, 1)
    return sp.csr_matrix((np.ones(len(keys), np.float32), (rows, cols)), shape=(n_users, n_items))


def _auc_block(score_fn: ScoreFn, block, csr, test_csr, n_pos, n_neg) -> np.ndarray:
    from scipy.stats import rankdata  # scipy.stats takes a second to import: only when AUC is asked for

    n_items = csr.shape[1]

    scores = np.array(score_fn(block), dtype=np.float64, copy=True)
    if scores.shape != (len(block), n_items):
        raise ValueError(f"score_fn returned shape {scores.shape}, expected {(len(block), n_items)}")
    if np.isnan(scores).any():
        raise ValueError("score_fn returned NaN scores")
    sub = csr[block]
    rows = np.repeat(np.arange(len(block)), np.diff(sub.indptr))
    # train items go to +inf: above every candidate, so the ascending rank of a candidate
    # counts only candidates (test or negative) scoring lower than it
    scores[rows, sub.indices] = np.inf
    ranks = rankdata(scores, axis=1, method="average")
    pos = test_csr[block]
    pos_rows = np.repeat(np.arange(len(block)), np.diff(pos.indptr))
    pos_cols = pos.indices
    rank_sum = np.bincount(pos_rows, weights=ranks[pos_rows, pos_cols], minlength=len(block))
    u_stat = rank_sum - n_pos * (n_pos + 1) / 2.0
    return u_stat / (n_pos * n_neg)
