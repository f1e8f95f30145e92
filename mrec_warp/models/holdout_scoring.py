"""Early stopping's precision@k for a factor model, on one thread, with everything prepared once.

Early stopping scores the same users against the same exclusions every epoch (WARP: every
epoch, patience 10). :func:`~.validation.precision_at_k` goes through the general top-k path
(:func:`mrec_warp.topk.iter_top_k`): a fresh score block of up to 64 MB per call (page
faults every epoch, and a block far larger than the caches, written, biased and read
again), the exclusion CSR converted again, and a sparse fancy-index per block to count the
hits. :class:`HoldoutScorer` keeps one score buffer of :data:`~mrec_warp.topk.SCORE_ROWS`
rows (it stays in cache between the product, the bias and the top-k), the exclusion and the
truth keys built once, and writes the top-k of all users into one array.

The scores are the same bits: every product is still one BLAS call of exactly
``SCORE_ROWS`` users on one BLAS thread, the user at list position ``p`` in row
``p % SCORE_ROWS``, the rows outside the list filled with the first user
(:func:`mrec_warp.topk.grid_scores`), and the top-k is the same kernel; so the score of
every evaluation, the epoch early stopping picks and the fitted factors do not change.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import scipy.sparse as sp

from ..kernels.topk import topk_masked
from ..topk import SCORE_ROWS, KernelExclusion
from ..workers import one_blas_thread
from .factor_model import factor_scores

_NO_MASK = np.zeros(0, dtype=np.uint8)


class HoldoutScorer:
    """Precision@``k`` of a model's factors on fixed ``users``, excluding ``exclude``'s items.

    Parameters
    ----------
    exclude : csr_matrix
        The fitting pairs (never recommended back), users x items.
    truth : csr_matrix
        The held-out pairs; every stored entry is a hit when recommended, whatever its value.
    users : int array
        The users scored (rows of both matrices), each once.
    k : int
    """

    def __init__(self, exclude: sp.csr_matrix, truth: sp.csr_matrix, users: np.ndarray, k: int) -> None:
        self.users = np.asarray(users, dtype=np.int64)
        self.k = int(k)
        self.n_items = int(truth.shape[1])
        self.exclusion = KernelExclusion.of(exclude)
        self.rows = np.where(self.users < self.exclusion.n_rows, self.users, -1).astype(np.int64)
        # a key per held-out pair of the scored users: position * n_items + item, sorted
        sub = sp.csr_matrix(truth[self.users])
        positions = np.repeat(np.arange(len(self.users), dtype=np.int64), np.diff(sub.indptr))
        self.truth_keys = np.sort(positions * self.n_items + sub.indices.astype(np.int64))
        self.call_rows = np.empty(SCORE_ROWS, dtype=np.int64)
        self.items = np.empty((len(self.users), self.k), dtype=np.int64)
        self.top_scores = np.empty((len(self.users), self.k), dtype=np.float32)
        self.scores: Optional[np.ndarray] = None  # SCORE_ROWS x n_items, allocated at first use

    def __call__(self, user_factors: np.ndarray, item_factors: np.ndarray, bias: Optional[np.ndarray]) -> float:
        """Precision@k of ``user_factors @ item_factors.T (+ bias)`` (a model's ``factor_parts()``)."""
        n = len(self.users)
        if n == 0:
            return float("nan")
        if self.scores is None:
            self.scores = np.empty((SCORE_ROWS, self.n_items), dtype=np.float32)
        ex = self.exclusion
        with one_blas_thread():
            for start in range(0, n, SCORE_ROWS):
                stop = min(start + SCORE_ROWS, n)
                rows = self.call_rows
                rows.fill(self.users[0])  # as grid_scores fills a call's rows outside the list
                rows[:stop - start] = self.users[start:stop]
                factor_scores(user_factors[rows], item_factors, bias, out=self.scores)
                topk_masked(self.scores[:stop - start], self.rows[start:stop], ex.indptr, ex.indices, _NO_MASK,
                            self.items[start:stop], self.top_scores[start:stop])
        valid = self.items >= 0
        keys = (np.repeat(np.arange(n, dtype=np.int64), self.k) * self.n_items + self.items.ravel())[valid.ravel()]
        where = np.searchsorted(self.truth_keys, keys)
        found = where < len(self.truth_keys)
        hits = int(np.count_nonzero(self.truth_keys[where[found]] == keys[found]))
        return hits / (self.k * n)
