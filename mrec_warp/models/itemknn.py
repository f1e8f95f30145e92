"""Item-kNN: item-item similarities from co-occurrence, the ``neighbours`` best kept per item.

Three weightings of the users x items matrix ``X`` (binary here), the ones implicit
offers, each written from its definition (``n_u``: the user's item count, ``n_i``: the
item's user count, ``N``: the number of items):

``cosine``
    ``s(i, j) = X_i . X_j / (|X_i| |X_j| + shrink)`` on the item columns.
``tfidf``
    Each entry weighted by the user's inverse frequency ``idf_u = log N - log(1 + n_u)``
    (users with many items say less about each), then cosine as above.
``bm25``
    ``V_ui = x_ui (k1 + 1) / (k1 (1 - b + b n_i / mean(n)) + x_ui) idf_u``, and
    ``s(i, j) = V_i . V_j`` with no normalisation: BM25's length term already damps
    popular items.

The similarity matrix is built ``block`` target items at a time: one sparse product
``V[:, block]' V`` per block, densified within a memory budget, from which each item's
``neighbours`` largest positive similarities (itself excluded) are kept. A full dense items
x items matrix is never held unless it fits the budget. Blocks run on the execution
backend's threads (sparse products and the top-k selection release the GIL).
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

import numpy as np
import scipy.sparse as sp

from ..progress import Progress
from ._itemsim import ItemSimilarity, top_k_by_blocks
from .declared import Param, n_jobs_param
from .tuning import COOC_RATE, TrialShape

SIMILARITIES = ("cosine", "tfidf", "bm25")


class ItemKNN(ItemSimilarity):
    """Item-based nearest neighbours: score = history x sparse top-k similarity.

    Parameters
    ----------
    neighbours : int
        Similar items kept per item (the item itself never counts). The default, 800, was
        at least as good as 200 on every set of the selection suite and 17% better on a
        long-tail catalogue (``scripts/bench_defaults.py``); the weights are up to 4 times
        the size of 200's.
    similarity : {"cosine", "tfidf", "bm25"}
        Weighting and similarity (see the module docstring).
    shrink : float
        Added to the cosine denominator: similarities resting on few co-occurrences shrink
        towards 0 (Koren's shrinkage). 0 is plain cosine. Ignored by ``bm25``.
    bm25_k1, bm25_b : float
        BM25's saturation and length normalisation (implicit's defaults, 1.2 and 0.75).
    memory_mb : float
        Budget for one block of dense similarities per worker; the block size follows.
    n_jobs : int
        Threads computing blocks at once (-1: every core).
    """

    name = "itemknn"
    order = 20

    #: Seconds per ``items^2`` (its dense blocks; one thread), measured on ml-100k and a
    #: 1.9k x 16k long-tail synthetic set (2 shared cores).
    TUNE_RATE = 2.6e-8

    @classmethod
    def fit_cost(cls, shape: TrialShape, params: Mapping[str, Any], epochs_cap: Optional[int] = None) -> float:
        """Dense blocks of the similarities, the co-occurrences, and validation scoring."""
        return cls.TUNE_RATE * shape.items * shape.items + COOC_RATE * shape.cooc + shape.scoring()

    PARAMETERS = (
        Param("neighbours", int, 800, "Similar items kept per item.", low=1, tune=("logint", 100, 1600),
              grid=(200, 800, 1600)),
        Param("similarity", str, "tfidf", "Weighting and similarity.", choices=SIMILARITIES,
              tune=list(SIMILARITIES), grid=SIMILARITIES),
        Param("shrink", float, 0.0, "Added to the cosine denominator (bm25 ignores it).", low=0,
              tune=("log0", 1.0, 100.0)),
        Param("bm25_k1", float, 1.2, "BM25's saturation.", low=0, tune=True, option=False),
        Param("bm25_b", float, 0.75, "BM25's length normalisation.", low=0, high=1, tune=True, option=False),
        Param("memory_mb", float, 256.0, "Budget in MB for one block of dense similarities per worker.", low=0,
              open=True, option=False),
        n_jobs_param("Threads computing blocks at once (-1: every core)."),
    )

    def __init__(self, neighbours: int = 800, similarity: str = "tfidf", shrink: float = 0.0,
                 bm25_k1: float = 1.2, bm25_b: float = 0.75, memory_mb: float = 256.0, n_jobs: int = 1) -> None:
        self.neighbours = neighbours
        self.similarity = similarity
        self.shrink = shrink
        self.bm25_k1 = bm25_k1
        self.bm25_b = bm25_b
        self.memory_mb = memory_mb
        self.n_jobs = n_jobs

    def weighted(self, csr: sp.csr_matrix) -> sp.csc_matrix:
        """The weighted users x items matrix ``V`` whose column dot products are similarities
        (cosine and tf-idf columns already divided by their norms)."""
        n_users, n_items = csr.shape
        coo = csr.tocoo()
        data = coo.data.astype(np.float64)
        if self.similarity in ("tfidf", "bm25"):
            n_u = np.bincount(coo.row, minlength=n_users).astype(np.float64)
            idf = np.log(n_items) - np.log1p(n_u)
            if self.similarity == "tfidf":
                data = np.sqrt(data) * idf[coo.row]
            else:
                n_i = np.bincount(coo.col, minlength=n_items).astype(np.float64)
                length = (1.0 - self.bm25_b) + self.bm25_b * n_i / max(n_i.mean(), 1e-12)
                k1 = float(self.bm25_k1)
                data = data * (k1 + 1.0) / (k1 * length[coo.col] + data) * idf[coo.row]
        return sp.csc_matrix((data, (coo.row, coo.col)), shape=csr.shape)

    def _learn_weights(self, csr: sp.csr_matrix, progress: Progress) -> sp.csr_matrix:
        V = self.weighted(csr)
        n_items = V.shape[1]
        norms = np.sqrt(np.asarray(V.multiply(V).sum(axis=0)).ravel())
        cosine = self.similarity != "bm25"
        if cosine and self.shrink == 0:
            # plain cosine: unit columns, then dot products are the similarities
            V = V @ sp.diags(1.0 / np.maximum(norms, 1e-300))
            V = sp.csc_matrix(V)
        VT = sp.csr_matrix(V.T)  # rows = items: a block's rows are a cheap slice
        shrink = float(self.shrink) if cosine else 0.0

        def rows(start: int, stop: int) -> np.ndarray:
            sims = (VT[start:stop] @ V).toarray()
            if cosine and shrink:
                sims /= norms[start:stop, None] * norms[None, :] + shrink
            return sims

        weights = top_k_by_blocks(rows, n_items, int(self.neighbours), self.memory_mb, self.n_jobs, progress, "itemknn")
        progress.log(f"itemknn: {self.similarity} similarities, {weights.nnz:,} kept for {n_items:,} items")
        return weights
