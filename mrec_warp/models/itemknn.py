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

The similarity matrix is built ``block`` target items at a time: each item's row of
``V[:, block]' V`` is summed into one dense accumulator and a selection kernel keeps its
``neighbours`` largest positive similarities (itself excluded) from there, so the product is
never stored (a cosine with ``shrink`` stores a block's product first, to divide it by the
pairs' norms). Blocks run on the execution backend's threads (the kernel releases the GIL).
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np
import scipy.sparse as sp

from ..progress import Progress
from ._itemsim import (ItemProduct, ItemSimilarity, RankedWeights, WeightRows, cooccurrence_cost, distinct_counts,
                       kind_then_count, top_k_by_blocks)
from .declared import Param, n_jobs_param
from .early_stopping import Holdout, HoldoutScorer
from .selection import AUTO, Candidate, fixed_value, select_param, value_of
from .tuning import TrialShape

SIMILARITIES = ("cosine", "tfidf", "bm25")
#: The neighbour counts ``neighbours="auto"`` chooses among (the fixed 800 among them).
NEIGHBOURS_GRID = (100, 200, 400, 800, 1600)
#: The similarities ``similarity="auto"`` chooses between (cosine is tf-idf without the users'
#: weights, and was never the best of the three on the selection suite's hold-outs).
CHOSEN_SIMILARITIES = ("tfidf", "bm25")


class ItemKNN(ItemSimilarity):
    """Item-based nearest neighbours: score = history x sparse top-k similarity.

    Parameters
    ----------
    neighbours : int or "auto"
        Similar items kept per item (the item itself never counts). ``"auto"`` (the
        default, with ``select``): chosen on the internal hold-out among
        :data:`NEIGHBOURS_GRID`; with ``select=False``, 800 (at least as good as 200 on
        every set of the selection suite and 17% better on a long-tail catalogue,
        ``scripts/bench_defaults.py``).
    similarity : {"cosine", "tfidf", "bm25", "auto"}
        Weighting and similarity (see the module docstring). ``"auto"`` (the default, with
        ``select``): the one of the three the hold-out prefers; with ``select=False``,
        ``tfidf``.
    shrink : float
        Added to the cosine denominator: similarities resting on few co-occurrences shrink
        towards 0 (Koren's shrinkage). 0 is plain cosine. Ignored by ``bm25``.
    bm25_k1, bm25_b : float
        BM25's saturation and length normalisation (implicit's defaults, 1.2 and 0.75).
    memory_mb : float
        Budget for one block of items per worker, their rows of the product counted at the
        largest size they can have; the block size follows.
    select : bool
        Choose the parameters left at ``"auto"`` on the internal hold-out (10% of each
        user's items, up to 5,000 users scored by precision@10), then fit on all the data;
        off: the fixed defaults (today's model). See :meth:`ItemKNN._candidates`.
    n_jobs : int
        Threads computing blocks at once (-1: every core).
    """

    name = "itemknn"
    order = 20

    #: The parameters ``select`` chooses when left at ``"auto"``, and their fixed values.
    SELECTED = ("neighbours", "similarity")
    FIXED = {"neighbours": 800, "similarity": "tfidf"}

    @classmethod
    def fit_cost(cls, shape: TrialShape, params: Mapping[str, Any], epochs_cap: Optional[int] = None) -> float:
        """The similarities from the co-occurrences (:func:`cooccurrence_cost`), and
        validation scoring."""
        return cooccurrence_cost(shape) + shape.scoring()

    PARAMETERS = (
        Param("neighbours", int, AUTO, "Similar items kept per item; auto: chosen on the hold-out among "
              "100-1600 (800 with --no-select).", low=1, tune=("logint", 100, 1600), grid=(200, 800, 1600)),
        Param("similarity", str, AUTO, "Weighting and similarity; auto: chosen on the hold-out (tfidf with "
              "--no-select).", choices=SIMILARITIES + (AUTO,), tune=list(SIMILARITIES), grid=SIMILARITIES),
        Param("shrink", float, 0.0, "Added to the cosine denominator (bm25 ignores it).", low=0,
              tune=("log0", 1.0, 100.0)),
        Param("bm25_k1", float, 1.2, "BM25's saturation.", low=0, tune=True, option=False),
        Param("bm25_b", float, 0.75, "BM25's length normalisation.", low=0, high=1, tune=True, option=False),
        Param("memory_mb", float, 256.0, "Budget in MB for one block of similarities per worker.", low=0,
              open=True, option=False),
        select_param(),
        n_jobs_param("Threads computing blocks at once (-1: every core)."),
    )

    def __init__(self, neighbours: Union[int, str] = AUTO, similarity: str = AUTO, shrink: float = 0.0,
                 bm25_k1: float = 1.2, bm25_b: float = 0.75, memory_mb: float = 256.0, select: bool = True,
                 n_jobs: int = 1) -> None:
        self.neighbours = neighbours
        self.similarity = similarity
        self.shrink = shrink
        self.bm25_k1 = bm25_k1
        self.bm25_b = bm25_b
        self.memory_mb = memory_mb
        self.select = select
        self.n_jobs = n_jobs

    def weighted(self, csr: sp.csr_matrix, similarity: Optional[str] = None) -> sp.csc_matrix:
        """The weighted users x items matrix ``V`` whose column dot products are similarities
        (cosine and tf-idf columns already divided by their norms); ``similarity``: the one in
        force by default."""
        similarity = similarity or value_of(self, "similarity")
        n_users, n_items = csr.shape
        coo = csr.tocoo()
        data = coo.data.astype(np.float64)
        if similarity in ("tfidf", "bm25"):
            n_u = np.bincount(coo.row, minlength=n_users).astype(np.float64)
            idf = np.log(n_items) - np.log1p(n_u)
            if similarity == "tfidf":
                data = np.sqrt(data) * idf[coo.row]
            else:
                n_i = np.bincount(coo.col, minlength=n_items).astype(np.float64)
                length = (1.0 - self.bm25_b) + self.bm25_b * n_i / max(n_i.mean(), 1e-12)
                k1 = float(self.bm25_k1)
                data = data * (k1 + 1.0) / (k1 * length[coo.col] + data) * idf[coo.row]
        return sp.csc_matrix((data, (coo.row, coo.col)), shape=csr.shape)

    def similarity_rows(self, csr: sp.csr_matrix, similarity: str) -> WeightRows:
        """``rows(start, stop)``: the similarities of items ``start:stop`` to every item
        under ``similarity`` on ``csr`` (sparse: the product's stored entries; made as they
        are ranked, :class:`~mrec_warp.models._itemsim.ItemProduct`, unless a shrink divides
        each by its pair's norms)."""
        V = self.weighted(csr, similarity)
        norms = np.sqrt(np.asarray(V.multiply(V).sum(axis=0)).ravel())
        cosine = similarity != "bm25"
        if cosine and self.shrink == 0:
            # plain cosine: unit columns, then dot products are the similarities
            V = V @ sp.diags(1.0 / np.maximum(norms, 1e-300))
            V = sp.csc_matrix(V)
        VT = sp.csr_matrix(V.T)  # rows = items: a block's rows are a cheap slice
        # CSR on the right too: scipy would convert a CSC operand, all of it, for every block
        V = sp.csr_matrix(V)
        shrink = float(self.shrink) if cosine else 0.0

        def rows(start: int, stop: int) -> Union[sp.csr_matrix, ItemProduct]:
            if not (cosine and shrink):
                return ItemProduct(VT[start:stop], V)
            sims = sp.csr_matrix(VT[start:stop] @ V)
            source = np.repeat(np.arange(start, stop), np.diff(sims.indptr))
            sims.data /= norms[source] * norms[sims.indices] + shrink
            return sims

        return rows

    def _learn_weights(self, csr: sp.csr_matrix, progress: Progress) -> sp.csr_matrix:
        similarity = value_of(self, "similarity")
        rows = self.similarity_rows(csr, similarity)
        n_items = csr.shape[1]
        weights = top_k_by_blocks(rows, csr, int(value_of(self, "neighbours")), self.memory_mb, self.n_jobs,
                                  progress, "itemknn")
        progress.log(f"itemknn: {similarity} similarities, {weights.nnz:,} kept for {n_items:,} items")
        return weights

    def _candidates(self, holdout: Holdout, scorer: HoldoutScorer, names: Tuple[str, ...],
                    progress: Progress) -> List[Candidate]:
        """The similarities of :data:`CHOSEN_SIMILARITIES` at the fixed (or given) neighbour
        count, then the neighbour counts of :data:`NEIGHBOURS_GRID` with the best similarity
        (a search one parameter at a time). Each similarity is computed once, at the largest
        count; a smaller count is the top of each row of it (:class:`RankedWeights`), with no
        second pass over the items."""
        fit = holdout.fit
        fixed = {name: fixed_value(self, name) if name in names else getattr(self, name)
                 for name in self.SELECTED}
        sims = [fixed["similarity"]] + ([s for s in CHOSEN_SIMILARITIES if s != fixed["similarity"]]
                                        if "similarity" in names else [])
        counts = distinct_counts(NEIGHBOURS_GRID if "neighbours" in names else (), int(fixed["neighbours"]),
                                 fit.shape[1])
        def build(similarity: str) -> RankedWeights:
            return RankedWeights.build(self.similarity_rows(fit, similarity), fit, counts, self.memory_mb,
                                       progress, "itemknn (hold-out)")

        def values(similarity: str, k: int) -> Dict[str, Any]:
            return {name: v for name, v in (("neighbours", k), ("similarity", similarity)) if name in names}

        return kind_then_count(sims, build, counts, values, fit, scorer)
