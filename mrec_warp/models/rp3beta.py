"""RP3beta (Paudel et al., 2017): three-step random-walk item-item weights with a popularity penalty.

A random walk from item ``i`` to a user who has it, then to another item ``j`` of that user,
has probability ``W[i, j] = sum_u P_iu[i, u] P_ui[u, j]``, where ``P_ui`` is the users x items
matrix ``X`` (binary) with each user's row scaled to sum 1 and ``P_iu`` is ``X'`` with each
item's row scaled to sum 1. As in P3alpha (Cooper et al., 2014) and the reference
implementation of Dacrema et al. (2019), each transition probability is raised to ``alpha``
before the product (the same as the product itself when ``alpha`` is 1, the default). Each
column ``j`` is then divided by ``popularity(j) ** beta`` (its number of users): ``beta`` > 0
lets less popular items through. The diagonal is zeroed (an item never recommends itself),
each item keeps its ``neighbours`` largest weights, optionally scaled to sum 1 per row
(``normalize``), and a user's scores are their history times ``W``
(:class:`~mrec_warp.models._itemsim.ItemSimilarity` does the scoring, fold-in and saving).

``W`` is built a block of source items at a time -- one sparse product per block, densified
within ``memory_mb`` -- on threads, as item-kNN's similarities are
(:func:`~mrec_warp.models._itemsim.top_k_by_blocks`).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..progress import Progress
from ._itemsim import ItemSimilarity, top_k_by_blocks
from .declared import Param, n_jobs_param


class RP3beta(ItemSimilarity):
    """Random walks of three steps, penalised by popularity: score = history x sparse ``W``.

    Parameters
    ----------
    alpha : float
        Exponent of every transition probability (1: plain random-walk probabilities).
        The defaults (alpha 0.8, beta 0.5, 400 neighbours) scored best, summed over ml-100k
        and ml-latest-small, among alpha 0.5/0.8/1, beta 0/0.3/0.5/0.7 and 100/200/400
        neighbours on ``tune``'s validation hold-out of each training file.
    beta : float
        Popularity penalty: column ``j`` of ``W`` is divided by ``popularity(j) ** beta``
        (0: none, P3alpha).
    neighbours : int
        Largest weights kept per item (the item itself never counts).
    normalize : bool
        Scale each item's kept weights to sum 1.
    memory_mb : float
        Budget for one block of dense weights per worker; the block size follows.
    n_jobs : int
        Threads computing blocks at once (-1: every core).
    """

    name = "rp3beta"
    order = 80

    PARAMETERS = (
        Param("alpha", float, 0.8, "Exponent of each transition probability of the walk.", low=0,
              tune=("log", 0.3, 1.5)),
        Param("beta", float, 0.5, "Popularity penalty: item j's weights are divided by its user count to the power beta.",
              low=0, tune=("log0", 0.05, 1.0), grid=(0.3, 0.5, 0.7)),
        Param("neighbours", int, 400, "Largest weights kept per item.", low=1, tune=("logint", 50, 1600),
              grid=(200, 400, 800)),
        Param("normalize", bool, False, "Scale each item's kept weights to sum 1.", tune=True),
        Param("memory_mb", float, 256.0, "Budget in MB for one block of dense weights per worker.", low=0,
              open=True, option=False),
        n_jobs_param("Threads computing blocks at once (-1: every core)."),
    )

    def __init__(self, alpha: float = 0.8, beta: float = 0.5, neighbours: int = 400, normalize: bool = False,
                 memory_mb: float = 256.0, n_jobs: int = 1) -> None:
        self.alpha = alpha
        self.beta = beta
        self.neighbours = neighbours
        self.normalize = normalize
        self.memory_mb = memory_mb
        self.n_jobs = n_jobs

    def transitions(self, csr: sp.csr_matrix):
        """``(P_iu, P_ui, penalty)``: the two transition matrices, each entry raised to
        ``alpha`` (CSR, float64), and each item's column factor ``popularity ** -beta``
        (0 for an item nobody has)."""
        X = sp.csr_matrix((np.ones(csr.nnz), csr.indices, csr.indptr), shape=csr.shape)  # binary
        n_u = np.diff(X.indptr).astype(np.float64)
        XT = sp.csr_matrix(X.T)
        n_i = np.diff(XT.indptr).astype(np.float64)
        alpha = float(self.alpha)
        P_ui = sp.diags(1.0 / np.maximum(n_u, 1.0)) @ X
        P_iu = sp.diags(1.0 / np.maximum(n_i, 1.0)) @ XT
        if alpha != 1.0:
            P_ui, P_iu = P_ui.power(alpha), P_iu.power(alpha)
        penalty = np.zeros_like(n_i)
        seen = n_i > 0
        penalty[seen] = n_i[seen] ** -float(self.beta)
        return sp.csr_matrix(P_iu), sp.csr_matrix(P_ui), penalty

    def _learn_weights(self, csr: sp.csr_matrix, progress: Progress) -> sp.csr_matrix:
        P_iu, P_ui, penalty = self.transitions(csr)
        n_items = csr.shape[1]

        def rows(start: int, stop: int) -> np.ndarray:
            walks = (P_iu[start:stop] @ P_ui).toarray()
            walks *= penalty[None, :]
            return walks

        weights = top_k_by_blocks(rows, n_items, int(self.neighbours), self.memory_mb, self.n_jobs, progress, "rp3beta")
        if self.normalize:
            sums = np.asarray(weights.sum(axis=1), dtype=np.float64).ravel()
            weights = sp.csr_matrix(sp.diags(1.0 / np.where(sums > 0, sums, 1.0)) @ weights, dtype=np.float32)
        progress.log(f"rp3beta: alpha {self.alpha:g}, beta {self.beta:g}: {weights.nnz:,} weights kept "
                     f"for {n_items:,} items")
        return weights
