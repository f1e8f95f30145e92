"""Hold-out validation used for early stopping: split, and a fast precision@k."""
from __future__ import annotations

from typing import Callable, Optional, Tuple

import numpy as np
import scipy.sparse as sp

from ..recommend import iter_top_k


def holdout_split(csr: sp.csr_matrix, fraction: float, rng: np.random.Generator) -> Tuple[sp.csr_matrix, sp.csr_matrix]:
    """Per user, move ``round(fraction * n)`` random items (at least 1, at most n - 1) to validation.

    Users with fewer than 2 items keep them all for fitting. Vectorised over all entries:
    each entry gets a random key, and the entries ranked lowest within their row go to
    validation, so there is no per-user Python loop.
    """
    counts = np.diff(csr.indptr)
    n_val = np.where(counts >= 2, np.clip(np.floor(fraction * counts + 0.5), 1, counts - 1), 0).astype(np.int64)
    rows = np.repeat(np.arange(csr.shape[0]), counts)
    keys = rng.random(csr.nnz)
    order = np.lexsort((keys, rows))  # by row, then random
    rank_in_row = np.empty(csr.nnz, dtype=np.int64)
    rank_in_row[order] = np.arange(csr.nnz) - np.repeat(csr.indptr[:-1], counts)
    to_val = rank_in_row < n_val[rows]
    coo = csr.tocoo()
    fit = sp.csr_matrix((coo.data[~to_val], (coo.row[~to_val], coo.col[~to_val])), shape=csr.shape, dtype=np.float32)
    val = sp.csr_matrix((coo.data[to_val], (coo.row[to_val], coo.col[to_val])), shape=csr.shape, dtype=np.float32)
    fit.sort_indices()
    val.sort_indices()
    return fit, val


def precision_at_k(
    score_fn: Callable[[np.ndarray], np.ndarray],
    n_items: int,
    exclude: sp.csr_matrix,
    truth: sp.csr_matrix,
    k: int = 10,
    users: Optional[np.ndarray] = None,
    n_jobs: int = 1,
) -> float:
    """Mean precision@k over ``users`` (default: every user with a ``truth`` item).

    Recommendations exclude the ``exclude`` items, as ``recommend`` does.
    """
    if users is None:
        users = np.flatnonzero(np.diff(truth.indptr) > 0)
    if len(users) == 0:
        return float("nan")
    hits = 0
    for block_users, items, _ in iter_top_k(score_fn, n_items, users, k, exclude=exclude, n_jobs=n_jobs):
        sub = truth[block_users]
        # an item is a hit when it appears in the user's truth row: test via a sparse lookup
        row_ids = np.repeat(np.arange(len(block_users)), k)
        flat = items.ravel()
        valid = flat >= 0
        hits += int(np.asarray(sub[row_ids[valid], flat[valid]]).sum())
    return hits / (k * len(users))
