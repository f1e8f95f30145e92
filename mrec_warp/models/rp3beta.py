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

``W`` is built a block of source items at a time -- each row of the walk product summed
into one accumulator, from which a selection kernel keeps its largest entries, so the
product is never stored -- on threads, as item-kNN's similarities are
(:func:`~mrec_warp.models._itemsim.top_k_by_blocks`).
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np
import scipy.sparse as sp

from ..progress import Progress
from ._itemsim import (ItemProduct, ItemSimilarity, RankedWeights, ScaledRows, WeightRows, cooccurrence_cost,
                       distinct_counts, kind_then_count, scale_rows, top_k_by_blocks)
from .declared import Param, n_jobs_param
from .early_stopping import Holdout, HoldoutScorer
from .selection import AUTO, Candidate, fixed_value, select_param, value_of
from .tuning import TrialShape

#: The betas ``beta="auto"`` chooses among (the fixed 0.5 among them).
BETA_GRID = (0.1, 0.3, 0.5, 0.7, 0.9)
#: The neighbour counts ``neighbours="auto"`` chooses among (the fixed 400 among them).
NEIGHBOURS_GRID = (100, 200, 400, 800)


class RP3beta(ItemSimilarity):
    """Random walks of three steps, penalised by popularity: score = history x sparse ``W``.

    Parameters
    ----------
    alpha : float
        Exponent of every transition probability (1: plain random-walk probabilities).
        The defaults (alpha 0.8, beta 0.5, 400 neighbours) scored best, summed over ml-100k
        and ml-latest-small, among alpha 0.5/0.8/1, beta 0/0.3/0.5/0.7 and 100/200/400
        neighbours on ``tune``'s validation hold-out of each training file.
    beta : float or "auto"
        Popularity penalty: column ``j`` of ``W`` is divided by ``popularity(j) ** beta``
        (0: none, P3alpha), in [0, 2]. Paudel et al. take it in [0, 1], where it moves the
        walk's ranking from popularity towards the long tail; above 1 an item's weight falls
        faster than its popularity grows, so rare items rank ahead of what the walk alone
        gives, which Dacrema et al.'s search of [0, 2] still covers. Larger values are
        refused: they only push popular items further down, and soon past float32 (on
        ml-100k, beta 12 leaves weights near 1e-35 and beta 20 rounds thousands to 0: ties
        in place of a ranking). ``"auto"`` (the default, with ``select``): chosen on the
        internal hold-out among :data:`BETA_GRID`; with ``select=False``, 0.5.
    neighbours : int or "auto"
        Largest weights kept per item (the item itself never counts). ``"auto"`` (the
        default, with ``select``): chosen on the hold-out among :data:`NEIGHBOURS_GRID`;
        with ``select=False``, 400.
    normalize : bool
        Scale each item's kept weights to sum 1.
    memory_mb : float
        Budget for one block of items per worker, their rows of the walk product counted
        at the largest size they can have; the block size follows.
    select : bool
        Choose the parameters left at ``"auto"`` on the internal hold-out (10% of each
        user's items, up to 5,000 users scored by precision@10), then fit on all the data;
        off: the fixed defaults (today's model). See :meth:`RP3beta._candidates`.
    n_jobs : int
        Threads computing blocks at once (-1: every core).
    """

    name = "rp3beta"
    order = 80

    #: The parameters ``select`` chooses when left at ``"auto"``, and their fixed values.
    SELECTED = ("beta", "neighbours")
    FIXED = {"beta": 0.5, "neighbours": 400}

    @classmethod
    def fit_cost(cls, shape: TrialShape, params: Mapping[str, Any], epochs_cap: Optional[int] = None) -> float:
        """The walks from the co-occurrences (:func:`cooccurrence_cost`), and validation
        scoring."""
        return cooccurrence_cost(shape) + shape.scoring()

    PARAMETERS = (
        Param("alpha", float, 0.8, "Exponent of each transition probability of the walk.", low=0,
              tune=("log", 0.3, 1.5)),
        Param("beta", float, AUTO, "Popularity penalty: item j's weights are divided by its user count to the power "
              "beta (0: none; above 1: rare items ahead of what the walk alone ranks); auto: chosen on the hold-out "
              "among 0.1-0.9 (0.5 with --no-select).",
              low=0, high=2, tune=("log0", 0.05, 1.0), grid=(0.3, 0.5, 0.7)),
        Param("neighbours", int, AUTO, "Largest weights kept per item; auto: chosen on the hold-out among 100-800 "
              "(400 with --no-select).", low=1, tune=("logint", 50, 1600), grid=(200, 400, 800)),
        Param("normalize", bool, False, "Scale each item's kept weights to sum 1.", tune=True),
        Param("memory_mb", float, 256.0, "Budget in MB for one block of items' walks per worker.", low=0,
              open=True, option=False),
        select_param(),
        n_jobs_param("Threads computing blocks at once (-1: every core)."),
    )

    def __init__(self, alpha: float = 0.8, beta: Union[float, str] = AUTO, neighbours: Union[int, str] = AUTO,
                 normalize: bool = False, memory_mb: float = 256.0, select: bool = True, n_jobs: int = 1) -> None:
        self.alpha = alpha
        self.beta = beta
        self.neighbours = neighbours
        self.normalize = normalize
        self.memory_mb = memory_mb
        self.select = select
        self.n_jobs = n_jobs

    def transitions(self, csr: sp.csr_matrix) -> Tuple[sp.csr_matrix, sp.csr_matrix, np.ndarray]:
        """``(P_iu, P_ui, popularity)``: the two transition matrices, each entry raised to
        ``alpha`` (CSR, float64), and each item's number of users."""
        X = sp.csr_matrix((np.ones(csr.nnz), csr.indices, csr.indptr), shape=csr.shape)  # binary
        n_u = np.diff(X.indptr).astype(np.float64)
        XT = sp.csr_matrix(X.T)
        n_i = np.diff(XT.indptr).astype(np.float64)
        alpha = float(self.alpha)
        P_ui = sp.diags(1.0 / np.maximum(n_u, 1.0)) @ X
        P_iu = sp.diags(1.0 / np.maximum(n_i, 1.0)) @ XT
        if alpha != 1.0:
            P_ui, P_iu = P_ui.power(alpha), P_iu.power(alpha)
        return sp.csr_matrix(P_iu), sp.csr_matrix(P_ui), n_i

    def walk_rows(self, csr: sp.csr_matrix, beta: Optional[float] = None,
                  walks: Optional["WalkProducts"] = None) -> WeightRows:
        """``rows(start, stop)``: the walk probabilities of items ``start:stop`` (sparse: the
        product's entries, made as they are ranked), each column times
        ``popularity ** -beta`` (0 for an item nobody has); ``beta``: the one in force by
        default; ``walks``: the transitions of ``csr`` and the products kept for every beta
        when the caller keeps them (the hold-out's)."""
        walks = walks or WalkProducts(*self.transitions(csr), memory_mb=0.0)
        popularity = walks.popularity
        penalty = np.zeros_like(popularity)
        seen = popularity > 0
        penalty[seen] = popularity[seen] ** -float(value_of(self, "beta") if beta is None else beta)
        return walks.rows(penalty)

    def _learn_weights(self, csr: sp.csr_matrix, progress: Progress) -> sp.csr_matrix:
        rows = self.walk_rows(csr)
        n_items = csr.shape[1]
        weights = top_k_by_blocks(rows, csr, int(value_of(self, "neighbours")), self.memory_mb, self.n_jobs,
                                  progress, "rp3beta")
        if self.normalize:
            weights = scale_rows(weights)
        progress.log(f"rp3beta: alpha {self.alpha:g}, beta {value_of(self, 'beta'):g}: {weights.nnz:,} weights kept "
                     f"for {n_items:,} items")
        return weights

    def _candidates(self, holdout: Holdout, scorer: HoldoutScorer, names: Tuple[str, ...],
                    progress: Progress) -> List[Candidate]:
        """The betas of :data:`BETA_GRID` walked from the fixed 0.5 at the fixed (or given)
        neighbour count (down while the hold-out's precision rises, else up), then the counts
        of :data:`NEIGHBOURS_GRID` with the best beta (one parameter at a time): the
        transitions and the walk product once (:class:`WalkProducts`: a beta only scales its
        columns), the largest entries of each beta's walks once at every count
        (:class:`RankedWeights`)."""
        fit = holdout.fit
        fixed = {name: fixed_value(self, name) if name in names else getattr(self, name)
                 for name in self.SELECTED}
        betas = [fixed["beta"]] + ([b for b in BETA_GRID if b != fixed["beta"]] if "beta" in names else [])
        counts = distinct_counts(NEIGHBOURS_GRID if "neighbours" in names else (), int(fixed["neighbours"]),
                                 fit.shape[1])

        walks = WalkProducts(*self.transitions(fit), memory_mb=self.memory_mb)

        def build(beta: float) -> RankedWeights:
            return RankedWeights.build(self.walk_rows(fit, beta, walks), fit, counts, self.memory_mb,
                                       progress, "rp3beta (hold-out)")

        def values(beta: float, k: int) -> Dict[str, Any]:
            return {name: v for name, v in (("beta", beta), ("neighbours", k)) if name in names}

        return kind_then_count(betas, build, counts, values, fit, scorer, scale_rows if self.normalize else None,
                               ordered_kinds=True)


class WalkProducts:
    """The transitions of one training matrix and its unpenalised walk products
    ``P_iu[block] @ P_ui``, a block of items at a time, kept while they fit ``memory_mb``
    so that each beta ranks them scaled by its penalty
    (:class:`~mrec_warp.models._itemsim.ScaledRows`) instead of making them again; a block
    past the budget (every block with ``memory_mb=0``: the fit's one beta) is made as it is
    ranked (:class:`~mrec_warp.models._itemsim.ItemProduct`)."""

    def __init__(self, P_iu: sp.csr_matrix, P_ui: sp.csr_matrix, popularity: np.ndarray, memory_mb: float) -> None:
        self.P_iu, self.P_ui, self.popularity = P_iu, P_ui, popularity
        self.budget = float(memory_mb) * 2**20
        self.kept: Dict[Tuple[int, int], sp.csr_matrix] = {}
        self.bytes = 0.0

    def rows(self, penalty: np.ndarray) -> WeightRows:
        """``rows(start, stop)`` of the walks with each column times ``penalty``."""
        def rows(start: int, stop: int) -> Union[ScaledRows, ItemProduct]:
            block = self.kept.get((start, stop))
            if block is None:
                product = ItemProduct(self.P_iu[start:stop], self.P_ui, penalty)
                if self.bytes >= self.budget:
                    return product
                block = sp.csr_matrix(product.left @ product.right)
                size = block.data.nbytes + block.indices.nbytes + block.indptr.nbytes
                if self.bytes + size > self.budget:
                    return ScaledRows(block, penalty)  # made already: ranked, not kept
                self.kept[(start, stop)] = block
                self.bytes += size
            return ScaledRows(block, penalty)

        return rows
