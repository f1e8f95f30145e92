"""Beyond accuracy: are the lists all blockbusters, and all alike?

Computed on the same cleaned top-k lists as the accuracy metrics (training items removed,
repeats removed, the list closed up), for the evaluated users, at every k. An item's
*popularity* is its number of training interactions (training users who have it).

Per user (then averaged over users with at least one recommended item, with a 95% interval):

* ``novelty@k``: mean self-information ``log2(n_train_users / popularity)`` of the top-k
  items; an item without training interactions counts as popularity 1 (the most novel).
* ``popularity@k``: mean popularity of the top-k items (average recommended popularity).
* ``long_tail@k``: share of the top-k items outside the head (:func:`head_items`).
* ``diversity@k`` (only with item features): mean cosine distance ``1 - cos`` between the
  feature vectors of every pair of top-k items that have features; users with fewer than
  two such items have none.

Global (one number, like ``coverage@k``):

* ``gini@k``: Gini coefficient of exposure over the training items -- how often each
  training item appears in the evaluated users' top k, items never recommended counting
  0: 0 when every item is shown equally often, ``(n - 1) / n`` when one item takes all.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np
import pandas as pd
import scipy.sparse as sp

from .space import Space

#: Share of training interactions held by the head items (the rest is the long tail).
HEAD_SHARE = 0.2
#: Per-user beyond-accuracy metrics at k, in report order (``diversity`` only with features).
PER_USER_AT_K = ("novelty", "popularity", "long_tail")
GLOBAL_AT_K = ("gini",)


def item_popularity(space: Space) -> Tuple[np.ndarray, int]:
    """Training interactions per item (every item of the space, 0 for test-only items) and
    the number of training users."""
    n_items = max(space.n_items, 1)
    popularity = np.bincount(space.train_keys % n_items, minlength=space.n_items)
    n_train_users = int(np.count_nonzero(np.bincount(space.train_keys // n_items, minlength=space.n_users)))
    return popularity, n_train_users


def head_items(popularity: np.ndarray, share: float = HEAD_SHARE) -> np.ndarray:
    """Mask of the head: the most-interacted items that together hold ``share`` of the
    training interactions, every item tied with the last one included; the rest is the tail.
    """
    total = popularity.sum()
    if total == 0:
        return np.zeros(len(popularity), dtype=bool)
    ranked = np.sort(popularity)[::-1]
    last = int(np.searchsorted(np.cumsum(ranked), share * total))  # first index reaching the share
    return popularity >= ranked[min(last, len(ranked) - 1)]


def gini(exposure: np.ndarray) -> float:
    """Gini coefficient of non-negative counts: ``sum_i (2i - n - 1) x_(i) / (n sum x)``,
    ``x`` sorted ascending, i = 1..n; NaN when they sum to 0."""
    x = np.sort(np.asarray(exposure, dtype=np.float64))
    n, total = len(x), x.sum()
    if n == 0 or total == 0:
        return float("nan")
    i = np.arange(1, n + 1)
    return float(np.sum((2 * i - n - 1) * x) / (n * total))


def feature_matrix(features: pd.DataFrame, item_ids: pd.Index) -> sp.csr_matrix:
    """Items x features, rows L2-normalised, in ``item_ids`` order (items without features:
    an empty row)."""
    rows = item_ids.get_indexer(features["id"].to_numpy())
    known = rows >= 0
    cols, _ = pd.factorize(features["feature"].to_numpy()[known])
    weights = features["weight"].to_numpy(dtype=np.float64)[known]
    matrix = sp.csr_matrix((weights, (rows[known], cols)), shape=(len(item_ids), int(cols.max(initial=-1)) + 1))
    norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel())
    scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    return sp.csr_matrix(sp.diags(scale) @ matrix)


def beyond_accuracy(users: np.ndarray, items: np.ndarray, pos: np.ndarray, evaluated: np.ndarray, space: Space,
                    ks: Tuple[int, ...], features: Optional[sp.csr_matrix] = None,
                    ) -> Tuple[Dict[str, np.ndarray], Dict[str, float]]:
    """Per-user and global beyond-accuracy metrics of cleaned lists (see the module docstring).

    ``users``, ``items``, ``pos``: the cleaned lists as flat arrays (codes, 0-based
    positions); ``evaluated``: mask over users. Returns ``({name: per-user array}, {name: value})``;
    per-user arrays cover every user of the space (NaN without an item in the top k).
    """
    popularity, n_train_users = item_popularity(space)
    information = np.log2(max(n_train_users, 1) / np.maximum(popularity, 1))
    tail = ~head_items(popularity[:space.n_train_items])
    in_tail = np.concatenate([tail, np.ones(space.n_items - space.n_train_items, dtype=bool)])
    per_user: Dict[str, np.ndarray] = {}
    overall: Dict[str, float] = {}
    n = space.n_users
    for k in ks:
        sel = pos < k
        u, i = users[sel], items[sel]
        count = np.bincount(u, minlength=n).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            for name, value in (("novelty", information), ("popularity", popularity), ("long_tail", in_tail)):
                per_user[f"{name}@{k}"] = np.bincount(u, weights=value[i].astype(np.float64), minlength=n) / count
            if features is not None:
                per_user[f"diversity@{k}"] = _diversity(u, i, n, features)
        shown = evaluated[u] & (i < space.n_train_items)
        overall[f"gini@{k}"] = gini(np.bincount(i[shown], minlength=space.n_train_items))
    order = [f"{m}@{k}" for m in PER_USER_AT_K + (("diversity",) if features is not None else ()) for k in ks]
    return {name: per_user[name] for name in order}, overall


def _diversity(users: np.ndarray, items: np.ndarray, n_users: int, features: sp.csr_matrix) -> np.ndarray:
    """Mean pairwise cosine distance of each user's items that have features.

    With unit rows x, the sum of cos over ordered pairs i != j is ``|sum x|^2 - m``, so no
    pair is ever formed: one sparse product per k.
    """
    has = np.diff(features.indptr) > 0
    keep = has[items]
    u, i = users[keep], items[keep]
    lists = sp.csr_matrix((np.ones(len(u)), (u, i)), shape=(n_users, features.shape[0]))
    summed = lists @ features
    square = np.asarray(summed.multiply(summed).sum(axis=1)).ravel()
    m = np.bincount(u, minlength=n_users).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(m >= 2, 1.0 - (square - m) / (m * (m - 1)), np.nan)
