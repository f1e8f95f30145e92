"""EASE (Steck, 2019): a closed-form item-item model, ``B = I - P diag(1 / diag P)``.

``P = (X'X + lambda I)^-1`` is the inverse of the regularised Gram matrix; ``B`` is the
least-squares item-item weight matrix with a zero diagonal. It is dense, so EASE needs
``n_items^2`` floats: before allocating, the fit logs one line with its estimated peak
memory, time and model-file size (:func:`estimate`) and refuses with a one-line error when
the peak exceeds the memory limit (``memory_limit_mb`` raises it). ``max_items``
restricts the model to the most popular items (the rest are never recommended) for
catalogues too large.

The weights are stored sparsified: the ``topk x n_items`` weights of largest magnitude
(``topk`` per item on average; negative ones too: they push items down and matter), rounded
to float16 precision by the fit and saved as float16 values and uint16 column indices
(below 65,536 items), deflated: about 2.5 bytes a weight against 4 for the dense matrix, so
the model file is a small fraction of the dense one (at most 10% on the selection suite's
sets of over 1,000 items: docs/models/itemsim.rst, 'Model files'). ``topk=0`` keeps the dense matrix, and so
does a ``topk`` of at least half the items.

The inverse goes through a Cholesky factorisation done in place by LAPACK (``potrf`` then
``potri``), so the Gram matrix, its factor and ``P`` share one ``n^2`` buffer; the Gram
matrix is filled from sparse products in row blocks, never a sparse ``X'X`` of its own.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from threadpoolctl import threadpool_limits
from scipy.linalg import lapack

from ..data.npz import index_dtype
from ..kernels.gram import gram_rows
from ..errors import InputError
from .. import memory
from ..workers import blas_controller, effective_n_jobs
from ..progress import Progress
from ._itemsim import ItemSimilarity, popular_when_cold, scored_candidate, weights_scorer
from .declared import Param, n_jobs_param
from .early_stopping import VALIDATION_FRACTION, VALIDATION_USERS, Holdout, HoldoutScorer, held_out_counts
from .selection import AUTO, Candidate, Stopwatch, select_param, selected_names, value_of, walk
from .tuning import TrialShape

DTYPES = ("float32", "float64")
#: Default ``topk`` (weights kept per item on average): within 1% of the dense matrix's test
#: P@10 on every set of the selection suite (0.05-0.93% below), in a file of at most 10% of
#: the dense one on all of them but the 400-item set, where 200 keeps the dense matrix; 300
#: would take 14% on ml-100k (ratings >= 4), 100 lost 1.2-1.7% (scripts/ease_topk.py,
#: docs/models/itemsim.rst, 'Model files').
DEFAULT_TOPK = 200
#: ``l2`` with ``select=False`` (and the first value ``l2="auto"`` tries): at least as good
#: as 400 on every set of the selection suite and up to 6% better (scripts/bench_defaults.py).
FIXED_L2 = 200.0
#: The values ``l2="auto"`` walks: the fixed 200 and factors of 2 either side.
L2_GRID = (25.0, 50.0, 100.0, 200.0, 400.0, 800.0, 1600.0, 3200.0)


class EASE(ItemSimilarity):
    """Embarrassingly shallow autoencoder: dense item-item weights in closed form.

    Parameters
    ----------
    l2 : float or "auto"
        ``lambda``, the L2 penalty on the weights (Steck's only hyper-parameter). ``"auto"``
        (the default, with ``select``): chosen on the internal hold-out among
        :data:`L2_GRID` by one eigendecomposition of the hold-out's Gram matrix
        (:meth:`EASE._candidates`); with ``select=False``, 200 (:data:`FIXED_L2`).
    dtype : {"float32", "float64"}
        Precision of the factorisation. The weights are stored as float32 either way. On
        ml-100k and two synthetic sets float32 gave the same top-10 lists' precision as
        float64 to 5 digits (weights within 5e-7), in a third of the memory and faster.
    max_items : int or None
        Learn the weights among only this many most popular items; others are never
        recommended. ``None``: every item.
    memory_limit_mb : float or None
        Most memory the fit may use; default: 3/4 of the memory available at fit time
        (:func:`~mrec_warp.memory.available_bytes`: a container's limit and ``ulimit -v`` count).
    topk : int
        Weights kept per item on average: the ``topk x n_items`` of largest magnitude
        (:func:`sparsify`), rounded to float16 precision (the file stores them in 2 bytes
        and loads back the same scores); 0: keep the dense matrix (float32), as does a
        ``topk`` of at least half the items.
    select : bool
        Choose the parameters left at ``"auto"`` on the internal hold-out (10% of each
        user's items, up to 5,000 users scored by precision@10), then fit on all the data;
        off: the fixed defaults (today's model).
    n_jobs : int
        BLAS threads of the factorisation (-1: every core). On a machine whose cores are
        busy with other work, more BLAS threads than free cores make it many times slower
        (they spin waiting for each other), so the default is one.
    """

    name = "ease"
    order = 40

    _dense_weights = True
    _float16_weights = True

    #: The parameters ``select`` chooses when left at ``"auto"``, and their fixed values.
    SELECTED = ("l2",)
    FIXED = {"l2": FIXED_L2}

    @classmethod
    def fit_cost(cls, shape: TrialShape, params: Mapping[str, Any], epochs_cap: Optional[int] = None) -> float:
        """The path the fit takes, estimated: with ``l2`` left to the choice, its seconds
        (:func:`selection_seconds`: the side and items :func:`selection_plan` will take);
        then the fit's (:func:`fit_seconds`, on the ``max_items`` most popular items); at
        :data:`REFERENCE_RATE` unless ``shape.measured``; plus the validation scoring."""
        model = cls(**params)
        if shape.fit is None:
            return 1e-10 * shape.items ** 3 * (2 if selected_names(model) else 1) + shape.scoring()
        rate = None if shape.measured else REFERENCE_RATE
        return model.estimated_fit_seconds(shape.fit, rate) + shape.scoring()

    def estimated_fit_seconds(self, csr: sp.csr_matrix, rate: Optional[float] = None) -> float:
        """Estimated seconds of :meth:`fit` on ``csr``: the choice of ``l2`` when it is left
        at ``"auto"`` with ``select`` on, then the fit on the ``max_items`` most popular
        items, one thread (at :func:`flops_rate`'s measured speed, or ``rate``)."""
        n_all = csr.shape[1]
        seconds = 0.0
        if selected_names(self):
            seconds += selection_seconds(csr, self.dtype, rate, self.max_items, self._memory_limit())
        if self.max_items is not None and int(self.max_items) < n_all:
            csr = sp.csr_matrix(csr[:, most_popular(np.bincount(csr.indices, minlength=n_all), int(self.max_items))])
        return seconds + fit_seconds(csr, self.dtype, int(self.topk), 1, rate)

    @classmethod
    def memory_refusal(cls, fit: sp.csr_matrix, params: Mapping[str, Any]) -> Optional[str]:
        """Why the fit's peak (:func:`estimate`) exceeds the memory it may use, or ``None``."""
        model = cls(**params)
        csr = fit
        if model.max_items is not None and model.max_items < fit.shape[1]:
            csr = fit[:, : int(model.max_items)]  # (only its size matters here)
        cost = estimate(csr, model.dtype, int(model.topk), 1)
        limit = (model.memory_limit_mb * 2**20 if model.memory_limit_mb is not None
                 else 0.75 * memory.available_bytes())
        if cost.peak_bytes > limit:
            return (f"needs about {memory.format_bytes(cost.peak_bytes)} of memory, more than the "
                    f"{memory.format_bytes(limit)} it may use (raise `memory_limit_mb` or search `max_items`)")
        return None

    PARAMETERS = (
        Param("l2", float, AUTO, "lambda, the L2 penalty on the weights (auto: chosen on the hold-out among "
              "25-3200; 200 with --no-select).", low=0, open=True,
              hint="the Gram matrix may be singular", tune=("log", 100.0, 1600.0),
              grid=(100.0, 200.0, 400.0, 800.0, 1600.0)),
        Param("dtype", str, "float32", "Precision of the inverse.", choices=DTYPES, option="--ease-dtype"),
        Param("max_items", int, None, "Only the N most popular items.", low=1, nullable=True, shown="all"),
        Param("memory_limit_mb", float, None, "Most memory the fit may take.", low=0, open=True, nullable=True,
              shown="3/4 of the available memory"),
        Param("topk", int, DEFAULT_TOPK, "Weights kept per item on average (the largest in magnitude); 0: the "
              "dense matrix.", low=0),
        select_param(),
        n_jobs_param("BLAS threads of the factorisation (-1: every core)."),
    )

    def __init__(self, l2: Union[float, str] = AUTO, dtype: str = "float32", max_items: Optional[int] = None,
                 memory_limit_mb: Optional[float] = None, topk: int = DEFAULT_TOPK, select: bool = True,
                 n_jobs: int = 1) -> None:
        self.l2 = l2
        self.dtype = dtype
        self.max_items = max_items
        self.memory_limit_mb = memory_limit_mb
        self.topk = topk
        self.select = select
        self.n_jobs = n_jobs

    @classmethod
    def _sparse_file(cls, params: Dict, n_items: int) -> bool:
        # a file without `topk` predates sparsified weights: it holds the dense matrix
        max_items = params.get("max_items")
        n = n_items if max_items is None else min(int(max_items), n_items)
        return not keeps_dense(n, int(params.get("topk", 0)))

    def set_arrays(self, arrays) -> None:
        super().set_arrays(arrays)
        if not sp.issparse(self.weights_) and self._sparse_file(self.get_params(), self.n_items):
            self.topk = 0  # a file from before sparsified weights: the dense matrix, nothing dropped

    @staticmethod
    def memory_needed(n_items: int, dtype: str = "float32", nnz: int = 0, topk: int = 0) -> int:
        """Peak bytes a fit over ``n_items`` items and ``nnz`` interactions adds: the ``n^2``
        factorisation buffer, the float32 copy of the weights when factorising in float64,
        the working set of the Gram matrix's construction (two copies of the interactions in
        float64 and a band of sparse products, 32 MB dense) and, when the weights are
        sparsified (``topk``), each row's candidates and a band of their selection."""
        itemsize = np.dtype(dtype).itemsize
        square = n_items * n_items * (itemsize + (4 if itemsize != 4 else 0))
        sparsifying = 0 if keeps_dense(n_items, topk) else 16 * n_items * min(n_items, ROW_CAP * topk) + 96 * 2**20
        return square + 3 * 12 * nnz + 96 * 2**20 + sparsifying

    def _learn_weights(self, csr: sp.csr_matrix, progress: Progress):
        n_all = csr.shape[1]
        if self.max_items is not None and int(self.max_items) < n_all:
            self.kept_items_ = most_popular(self.item_counts_, int(self.max_items))
            csr = sp.csr_matrix(csr[:, self.kept_items_])
        n = csr.shape[1]
        cost = estimate(csr, self.dtype, int(self.topk), effective_n_jobs(self.n_jobs))
        limit = (self.memory_limit_mb * 2**20 if self.memory_limit_mb is not None
                 else 0.75 * memory.available_bytes())
        if cost.peak_bytes > limit:
            raise InputError(
                f"EASE on {n:,} items needs {cost.peak_bytes / 2**30:.1f} GiB ({self.dtype}, n_items^2 and working "
                f"space), more than the {limit / 2**30:.1f} GiB limit",
                hint="restrict it to the most popular items with `max_items`"
                     + (", use `dtype=float32`" if self.dtype != "float32" else "")
                     + ", raise `memory_limit_mb` if the memory is there, or pick `model=slim`, rp3beta or itemknn")
        line = f"ease: {n:,} items, {self.dtype}: {cost.describe()}"
        # a long or large fit is announced even where progress lines are not shown (a pipe)
        (progress.note if cost.seconds > 60 or cost.peak_bytes > 2**30 else progress.log)(line)
        dtype = np.dtype(self.dtype)
        with blas_threads(self.n_jobs):
            gram = gram_matrix(csr, dtype)
            gram[np.diag_indices(n)] += dtype.type(value_of(self, "l2"))
            weights = ease_from_gram(gram)
        return sparsify(weights, int(self.topk))

    def _memory_limit(self) -> float:
        return (self.memory_limit_mb * 2**20 if self.memory_limit_mb is not None
                else 0.75 * memory.available_bytes())

    def _candidates(self, holdout: Holdout, scorer: HoldoutScorer, names: Tuple[str, ...],
                    progress: Progress) -> List[Candidate]:
        """``l2`` along :data:`L2_GRID` from the fixed 200, at about the cost of one fit.

        Every ``lambda`` is scored exactly (the model's scores off each user's own items,
        which are never recommended) by whichever side is cheaper (:func:`selection_plan`):

        * the users' side, when there are fewer users than items: by Woodbury's identity
          ``P = (X'X + lambda I)^-1 = (I - X' M X) / lambda`` with ``M = (XX' + lambda I)^-1``,
          a user's ``x P`` is their row of ``M X`` and ``P_jj = (1 - X_j' M X_j) / lambda``:
          one users x users inverse per ``lambda`` (:func:`users_side_scores`);
        * the items' side: one eigendecomposition ``X'X = V diag(s) V'`` serves every
          ``lambda``, ``P = V diag(1 / (s + lambda)) V'`` (:func:`items_side_scores`).

        A user's scores are then ``-(x P)_j / P_jj``. The walk goes down the grid while the
        hold-out's precision rises, else up, and stops at the first value that does not
        beat the previous one. The sparsified weights (``topk``) are not applied here: they
        move the test precision by under 1% (docs/models/itemsim.rst, 'Model files'). When
        neither side fits the budget, ``l2`` is chosen for the model restricted to the most
        popular items of the hold-out (as ``max_items`` restricts it).
        """
        fit = holdout.fit
        n_all = fit.shape[1]
        limit = n_all if self.max_items is None else min(int(self.max_items), n_all)
        users = holdout.users if holdout.users is not None else np.flatnonzero(np.diff(holdout.held_out.indptr) > 0)
        dtype = np.dtype(self.dtype)
        active = int(np.count_nonzero(np.diff(fit.indptr)))
        side, n = selection_plan(limit, active, len(users), fit.nnz, self._memory_limit(), dtype.itemsize)
        counts = np.bincount(fit.indices, minlength=n_all)
        kept = most_popular(counts, n) if n < n_all else None
        sub = fit if kept is None else sp.csr_matrix(fit[:, kept])
        watch = Stopwatch()
        restricted = "" if kept is None else f"the {n:,} most popular items, "
        tried: List[Candidate] = []

        def evaluate(i: int) -> float:
            step = Stopwatch()
            score_fn = make(L2_GRID[i])
            tried.append(scored_candidate({"l2": L2_GRID[i]}, scorer, score_fn, step))
            return tried[-1].score

        # one limit for the whole choice (the scorer's own one-thread limit nests in it)
        with blas_threads(self.n_jobs):
            make = (users_side_scores if side == "users" else items_side_scores)(
                sub, users, kept, n_all, counts.astype(np.float32), dtype)
            progress.log(f"ease: choosing l2 on the hold-out ({restricted}{len(users):,} users scored, "
                         f"the {side}' side)")
            walk(len(L2_GRID), L2_GRID.index(FIXED_L2), evaluate)
        tried[0].seconds += watch.seconds - sum(c.seconds for c in tried)  # the shared preparation
        return tried


ScoreFactory = Callable[[float], Callable[..., np.ndarray]]


def blas_threads(n_jobs: int):
    """A context in which BLAS runs on ``n_jobs`` threads (:func:`effective_n_jobs`), set
    through the process's one threadpoolctl controller (a new ``threadpool_limits`` looks
    the libraries up again: about 2 ms, on a 400-item choice of l2 a tenth of its time)."""
    return blas_controller().limit(limits=effective_n_jobs(n_jobs), user_api="blas")


def _scores_of(block: np.ndarray, diag: np.ndarray, kept: Optional[np.ndarray], n_all: int,
               item_counts: np.ndarray, out: Optional[np.ndarray]) -> np.ndarray:
    """A block of ``x P`` rows as EASE's scores ``-(x P)_j / P_jj`` over every item (NaN off
    ``kept``; popularity for a user with no kept item), written to ``out`` when given."""
    block = block / -diag[None, :]
    if kept is None:
        scores = np.ascontiguousarray(block, dtype=np.float32)
    else:
        scores = np.full((block.shape[0], n_all), np.nan, dtype=np.float32)
        scores[:, kept] = block
    popular_when_cold(scores, item_counts)
    if out is None:
        return scores
    out[...] = scores
    return out


def items_side_scores(sub: sp.csr_matrix, users: np.ndarray, kept: Optional[np.ndarray], n_all: int,
                      item_counts: np.ndarray, dtype: np.dtype) -> ScoreFactory:
    """``l2 -> score_fn`` from one eigendecomposition of ``sub``'s Gram matrix (``sub``:
    the hold-out's fitting pairs over the items the choice covers)."""
    n = sub.shape[1]
    gram = gram_matrix(sub, dtype)
    values, vectors = scipy.linalg.eigh(gram, overwrite_a=True, check_finite=False)
    del gram
    values = np.maximum(values.astype(np.float64), 0.0)  # rounding may leave tiny negatives
    squares = np.square(vectors)
    basis = None
    histories = None
    if len(users) <= n:  # x V once per scored user; each lambda is then m n^2
        basis = np.asarray(sub[users] @ vectors, dtype=dtype)
        where = np.full(sub.shape[0], -1, dtype=np.int64)
        where[users] = np.arange(len(users))
    elif len(users) * n <= SCORED_BLOCK_ENTRIES:
        histories = ScoredHistories(sub if kept is None else _widen(sub, kept, n_all), users, kept)

    def make(l2: float) -> Callable[..., np.ndarray]:
        inverse = (1.0 / (values + l2)).astype(dtype)
        diag = squares @ inverse  # P's diagonal
        if basis is None:  # more scored users than items: B itself, then each user's history times it
            weights = (vectors * inverse) @ vectors.T
            weights /= -diag[None, :]
            weights[np.diag_indices(n)] = 0.0
            if histories is not None:
                return histories.scorer(weights)
            return weights_scorer(sub if kept is None else _widen(sub, kept, n_all), weights, kept)

        def score(rows: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
            return _scores_of((basis[where[rows]] * inverse) @ vectors.T, diag, kept, n_all, item_counts, out)

        return score

    return make


#: Most entries of the scored users' block of scores :class:`ScoredHistories` computes at once (64 MB).
SCORED_BLOCK_ENTRIES = 2**24


class ScoredHistories:
    """The scored users' histories, taken out once for every ``l2`` (the items' side with
    more scored users than items): a value's scores are their histories times its weights,
    computed for all of them in one product, then handed out call by call as
    :func:`~mrec_warp.models._itemsim.weights_scorer` computes them (rows of a sparse matrix
    times a dense one: each row's products are summed in its own order, the same bits), NaN
    off ``kept``, popularity for a user with no kept item."""

    def __init__(self, history: sp.csr_matrix, users: np.ndarray, kept: Optional[np.ndarray]) -> None:
        self.history, self.kept = history, kept
        self.counts = np.bincount(history.indices, minlength=history.shape[1]).astype(np.float32)
        rows = sp.csr_matrix(history[np.asarray(users, dtype=np.int64)])
        self.rows = rows if kept is None else rows[:, kept]
        self.where = np.full(history.shape[0], -1, dtype=np.int64)
        self.where[users] = np.arange(len(users))

    def scorer(self, weights: np.ndarray) -> Callable[..., np.ndarray]:
        """``score_fn(rows, out=None)`` of the dense ``weights``."""
        block = np.ascontiguousarray(self.rows @ weights, dtype=np.float32)
        fallback = weights_scorer(self.history, weights, self.kept)
        n_all = self.history.shape[1]

        def score(rows: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
            pos = self.where[rows]
            if (pos < 0).any():  # a user not scored on the hold-out: as the model scores them
                return fallback(rows, out)
            if self.kept is None:
                scores = block[pos]
            else:
                scores = np.full((len(rows), n_all), np.nan, dtype=np.float32)
                scores[:, self.kept] = block[pos]
            popular_when_cold(scores, self.counts)
            if out is None:
                return scores
            out[...] = scores
            return out

        return score


def users_side_scores(sub: sp.csr_matrix, users: np.ndarray, kept: Optional[np.ndarray], n_all: int,
                      item_counts: np.ndarray, dtype: np.dtype) -> ScoreFactory:
    """``l2 -> score_fn`` by Woodbury's identity: one (active users)^2 inverse per ``l2``
    (``sub``: the hold-out's fitting pairs over the items the choice covers)."""
    active = np.flatnonzero(np.diff(sub.indptr) > 0)
    rows_x = sp.csr_matrix(sub[active], dtype=dtype)
    items_x = sp.csr_matrix(rows_x.T)  # items x active users
    kernel = gram_matrix(items_x, dtype)  # X X'
    where = np.full(sub.shape[0], -1, dtype=np.int64)
    where[active] = np.arange(len(active))
    coo = rows_x.tocoo()

    def make(l2: float) -> Callable[..., np.ndarray]:
        inverse = kernel.copy()
        inverse[np.diag_indices(len(active))] += dtype.type(l2)
        invert_spd(inverse)
        rows_p = np.ascontiguousarray((items_x @ inverse).T)  # M X: each active user's x P
        del inverse
        # P's diagonal: (1 - X_j' M X_j) / l2, the quadratic form summed over the entries of X
        quad = np.bincount(coo.col, weights=coo.data * rows_p[coo.row, coo.col], minlength=sub.shape[1])
        diag = ((1.0 - quad) / l2).astype(dtype)

        def score(rows: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
            pos = where[rows]
            block = np.zeros((len(rows), sub.shape[1]), dtype=dtype)
            known = pos >= 0
            block[known] = rows_p[pos[known]]
            return _scores_of(block, diag, kept, n_all, item_counts, out)

        return score

    return make


def most_popular(item_counts: np.ndarray, n: int) -> np.ndarray:
    """The indices (sorted) of the ``n`` items of most pairs, ties to the lower index: the
    items ``max_items`` keeps and the choice of ``l2`` covers when restricted."""
    order = np.lexsort((np.arange(len(item_counts)), -np.asarray(item_counts)))
    return np.sort(order[:n]).astype(np.int64)


def _widen(sub: sp.csr_matrix, kept: np.ndarray, n_all: int) -> sp.csr_matrix:
    """``sub``'s columns placed back at ``kept`` among ``n_all`` items."""
    coo = sub.tocoo()
    return sp.csr_matrix((coo.data, (coo.row, kept[coo.col])), shape=(sub.shape[0], n_all))


# -- the cost of choosing l2 ------------------------------------------------------------------------
#: Flops of LAPACK's symmetric eigendecomposition in units of ``n^3`` (the Cholesky inverse's):
#: 3.1-4.3 measured here at 1,000-3,000 items, float32, one thread.
EIGH_FLOPS = 4.0
#: A sparse product's multiply-add in BLAS flops (scipy's sparse-dense products run about
#: that much slower than a dense product, one thread).
SPARSE_FLOPS = 20.0
#: The ``lambda`` values the walk scores, as the selection's budget counts them.
EXPECTED_STEPS = 4
#: The selection's flops as a share of the fit's ``n^3`` (its inverse), so that a default fit
#: stays under twice the fixed one's time (the eigendecomposition and the products of the
#: scoring run at a lower rate than the Cholesky inverse: on a 3,000-item set a share of 1
#: took twice the fit); and the flops it may always take (a small catalogue, where the fit's
#: fixed costs dominate).
SELECTION_SHARE = 0.5
SELECTION_FLOOR = 1e10
#: The square arrays each side holds at once: the items' side the Gram matrix, the vectors,
#: their squares and the workspace; the users' side ``XX'``, its inverse and ``M X`` (users x
#: items), counted as users x items arrays.
ITEMS_SIDE_SQUARES = 4
USERS_SIDE_SQUARES = 3


def items_side_flops(n_items: int, scored: int) -> float:
    """The items' side: the eigendecomposition and :data:`EXPECTED_STEPS` scorings
    (``2 n^2 min(scored, n)`` each)."""
    n = float(n_items)
    return EIGH_FLOPS * n ** 3 + EXPECTED_STEPS * 2.0 * n * n * min(float(scored), n)


def users_side_flops(users: int, scored: int, nnz: int) -> float:
    """The users' side: per step, the users x users inverse and the sparse product ``M X``."""
    u = float(users)
    return EXPECTED_STEPS * (u ** 3 + SPARSE_FLOPS * float(nnz) * u)


def selection_plan(n_items: int, users: int, scored: int, nnz: int, max_bytes: Optional[float] = None,
                   itemsize: int = 4) -> Tuple[str, int]:
    """Which side ``l2="auto"`` is chosen on (``"users"`` or ``"items"``) and over how many
    of the most popular items: every item by the cheaper side when its flops are within
    :data:`SELECTION_SHARE` of the fit's ``n^3`` (or :data:`SELECTION_FLOOR`) and it fits
    ``max_bytes``; else the items' side on the most items that are.

    ``users``: the hold-out's users with fitting pairs; ``scored``: the users it scores. The
    users' side holds ``M X`` (users x items) too, so it is taken only with fewer users
    than items.
    Counted in flops, not seconds, so that the items (and the choice) depend on the data
    alone, never on the machine's load."""
    budget = max(SELECTION_SHARE * float(n_items) ** 3, SELECTION_FLOOR)
    fits_users = users <= n_items and (
        max_bytes is None or USERS_SIDE_SQUARES * itemsize * float(users) * n_items <= max_bytes)
    high = int(n_items)
    if max_bytes is not None:
        high = max(1, min(high, int(np.sqrt(max_bytes / (ITEMS_SIDE_SQUARES * itemsize)))))
    by_users = users_side_flops(users, scored, nnz) if fits_users else math.inf
    by_items = items_side_flops(n_items, scored) if high == n_items else math.inf
    if min(by_users, by_items) <= budget:
        return ("users", int(n_items)) if by_users <= by_items else ("items", int(n_items))
    low = 1
    if items_side_flops(high, scored) <= budget:
        return "items", high
    while high - low > 1:
        mid = (low + high) // 2
        if items_side_flops(mid, scored) <= budget:
            low = mid
        else:
            high = mid
    return "items", low


#: Time of LAPACK's symmetric eigendecomposition (``eigh``) in units of the Cholesky
#: inverse's ``n^3`` at :func:`flops_rate`: 6-10 measured here at 512-3,000 items, float32, one
#: thread, alternating with the inverse. (:func:`selection_plan` counts it as
#: :data:`EIGH_FLOPS`, whose value the choices of the selection suite were made with.)
EIGH_SECONDS = 8.0
#: Seconds per pair of the hold-out's split and of its scorer's preparation (at
#: :data:`REFERENCE_RATE`).
HOLDOUT_PAIR_SECONDS = 2e-7
#: Seconds per scored user and item of one value's scoring besides its flops, counted over
#: every item (the block of scores, NaN off the items covered, the exclusions and the top-k)
#: and twice more over the items covered (the passes over the dense block): measured here,
#: 0.035 s a value on 671 users x 5,687 items (the users' side), 0.2-0.25 s on 5,000 users
#: of 16,347 items with 941 covered (the items' side).
SCORING_SECONDS = 2e-9


def selection_seconds(csr: sp.csr_matrix, dtype: str = "float32", rate: Optional[float] = None,
                      max_items: Optional[int] = None, max_bytes: Optional[float] = None) -> float:
    """Estimated seconds of choosing ``l2`` on ``csr``, one thread, along the path
    :meth:`EASE._candidates` takes: the hold-out's sizes (each user's share held out as
    :func:`~mrec_warp.models.early_stopping.holdout_split` holds it, up to
    :data:`~mrec_warp.models.early_stopping.VALIDATION_USERS` users scored), the side and
    the items :func:`selection_plan` takes (``max_items`` and ``max_bytes`` as the fit
    passes them), that side's preparation and :data:`EXPECTED_STEPS` values of ``l2``, each
    scored (:data:`SCORING_SECONDS`). Dense work at :func:`flops_rate`'s measured speed (or
    ``rate``, :func:`factor_rate`).

    * The users' side: ``X X'`` from sparse products, then per value a users x users
      inverse and the sparse product ``M X`` (:data:`SPARSE_FLOPS` a multiply-add, at
      :data:`REFERENCE_RATE`: its speed does not grow with the dense side).
    * The items' side: the Gram matrix, its eigendecomposition (:data:`EIGH_SECONDS`) and
      each scored user's ``x V``; then per value ``2 m n^2`` flops for ``m`` scored users
      (at most ``n``; more users: the ``n x n`` weights, ``2 n^3``, and their histories
      times them).
    """
    n_all = csr.shape[1]
    limit = n_all if max_items is None else min(int(max_items), n_all)
    counts = np.diff(csr.indptr).astype(np.int64)
    held = held_out_counts(counts, VALIDATION_FRACTION)
    fitting = counts - held
    users = int(np.count_nonzero(fitting))
    scored = min(int(np.count_nonzero(held)), VALIDATION_USERS)
    item_counts = np.bincount(csr.indices, minlength=n_all)
    side, n = selection_plan(limit, users, scored, int(fitting.sum()), max_bytes, np.dtype(dtype).itemsize)
    # each user's fitting pairs among the items covered; each item's (its share of them kept)
    share = np.divide(fitting, counts, out=np.zeros(len(counts)), where=counts > 0)
    if n < n_all:
        covered = np.zeros(n_all, dtype=bool)
        covered[most_popular(item_counts, n)] = True
        rows = np.repeat(np.arange(len(counts)), counts)
        per_user = np.bincount(rows[covered[csr.indices]], minlength=len(counts)) * share
        item_counts = item_counts[covered]
    else:
        per_user = fitting.astype(np.float64)
    per_item = item_counts * (fitting.sum() / max(counts.sum(), 1))
    pairs = float(per_user.sum())
    scored_pairs = pairs * scored / max(users, 1)  # the scored users' pairs, at the mean length
    speed, slow = factor_rate(n, dtype, 1, rate)
    sparse = SPARSE_FLOPS / REFERENCE_RATE * slow  # seconds of a sparse-dense multiply-add
    seconds = (HOLDOUT_PAIR_SECONDS * csr.nnz + EXPECTED_STEPS * SCORING_SECONDS * scored * (n_all + 2 * n)) * slow
    if side == "users":
        users_speed, _ = factor_rate(users, dtype, 1, rate)
        seconds += (float((per_item ** 2).sum()) / SPARSE_RATE + DENSE_ENTRY_SECONDS * users * users) * slow
        seconds += EXPECTED_STEPS * (float(users) ** 3 / users_speed + sparse * pairs * users)
        return seconds
    seconds += (float((per_user ** 2).sum()) / SPARSE_RATE + DENSE_ENTRY_SECONDS * n * n) * slow
    seconds += EIGH_SECONDS * float(n) ** 3 / speed
    if scored <= n:
        seconds += sparse * scored_pairs * n + EXPECTED_STEPS * 2.0 * scored * n * n / speed
    else:
        seconds += EXPECTED_STEPS * (2.0 * float(n) ** 3 / speed + sparse * scored_pairs * n)
    return seconds


def keeps_dense(n_items: int, topk: int) -> bool:
    """Whether ``topk`` keeps the dense matrix: 0, or at least half the items (CSR arrays of
    int32 indices and float32 values, 8 bytes an entry, would have been larger than dense).
    Fixed: a file's parameters say by this rule whether it holds CSR arrays or one dense array."""
    return topk <= 0 or 2 * topk >= n_items


#: Most weights one item may keep, in multiples of ``topk`` (the average).
ROW_CAP = 4


def sparsify(weights: np.ndarray, topk: int, rows_per_block: Optional[int] = None):
    """The ``topk x n`` weights of largest magnitude (``topk`` per item on average, at most
    :data:`ROW_CAP` times that in one item's row) as float32 CSR, or ``weights`` itself when
    :func:`keeps_dense`. Kept entries are the dense values, bit for bit (the fit then rounds
    them to float16 precision: :meth:`ItemSimilarity.fit`); zeros are never kept.

    A global threshold rather than ``topk`` in every row: popular items, whose rows weigh
    on many users, keep more. On ml-100k it lost 0.4% of P@10 at 200 per item where a
    per-row top 200 lost 2.1% (scripts/ease_topk.py). Works a band of rows at a time: the
    extra memory is a band and each row's candidates, never ``n^2``.
    """
    n = weights.shape[0]
    if keeps_dense(n, topk):
        return weights
    cap = min(n, ROW_CAP * topk)
    step = rows_per_block or max(1, (32 * 2**20) // (8 * max(n, 1)))
    cols_parts, vals_parts = [], []
    for a in range(0, n, step):  # each row's `cap` largest magnitudes: the candidates
        block = weights[a:a + step]
        cols = np.argpartition(-np.abs(block), cap - 1, axis=1)[:, :cap] if cap < n \
            else np.broadcast_to(np.arange(n), block.shape)
        cols_parts.append(np.asarray(cols, dtype=np.int32))
        vals_parts.append(np.take_along_axis(block, cols, axis=1))
    cols = np.concatenate(cols_parts)
    vals = np.concatenate(vals_parts)
    budget = topk * n
    mags = np.abs(vals).ravel()
    keep = mags > 0
    if np.count_nonzero(keep) > budget:  # the global threshold among the candidates
        threshold = np.partition(mags, mags.size - budget)[mags.size - budget]
        keep &= mags >= threshold
        over = np.count_nonzero(keep) - budget  # ties at the threshold: the first ones stay
        if over > 0:
            tied = np.flatnonzero(keep & (mags == threshold))
            keep[tied[len(tied) - over:]] = False
    keep = keep.reshape(vals.shape)
    rows = np.broadcast_to(np.arange(n)[:, None], vals.shape)
    out = sp.csr_matrix((vals[keep], (rows[keep], cols[keep])), shape=(n, n), dtype=np.float32)
    out.sort_indices()
    return out


# -- what a fit will cost, before it starts -------------------------------------------------------
#: Sparse multiply-adds per second of the Gram matrix's construction (scipy's sparse
#: product, one thread), measured here on a 140-item set (where the product's output is
#: small; its dense output is counted in :data:`ENTRY_SECONDS`).
SPARSE_RATE = 2.5e8
#: Seconds per entry of the ``n^2`` matrix at :data:`REFERENCE_RATE` of the work besides the
#: inverse: the Gram matrix's dense blocks, the mirroring and scaling, and the sparsification's
#: partitions (:data:`DENSE_ENTRY_SECONDS` when the dense matrix is kept); and per candidate
#: of the sparsification (each row's ``ROW_CAP x topk`` largest: ``n x min(n, ROW_CAP topk)``).
#: Measured here (one thread, load 1-1.5): 1.6-2.5e-8 s an entry at 5,687-16,347 items, about
#: 4e-8 at 1,414-2,995 items where the candidates are most of the row. Scaled by how much
#: slower than that rate the probe ran (the machine's load slows both alike).
ENTRY_SECONDS = 2.5e-8
CANDIDATE_SECONDS = 2e-8
DENSE_ENTRY_SECONDS = 3e-8
#: Seconds per entry of the mirroring's diagonal blocks (fancy-indexed: ``n x band / 2``,
#: :func:`mirror_band`), at :data:`REFERENCE_RATE`: 1.2-3e-8 measured here (0.02 s at
#: 1,414 items, 0.06-0.15 s from 3,000 on), work the probe's inverse does not have.
MIRROR_SECONDS = 1.5e-8
#: A fixed flop rate (at :data:`CALIBRATION_SIZE` rows; other sizes by :func:`size_speed`)
#: for estimates that must not depend on the machine's load (the order of models in a
#: search's statistical tie); what :func:`flops_rate` measured here, float32.
REFERENCE_RATE = 5e10
#: Largest side of the matrix the flop rate is measured on (about 0.2 s a run, once per process).
CALIBRATION_SIZE = 2048
#: How the factorisation's flop rate grows with the matrix's side (LAPACK blocks better on
#: larger matrices), relative to :data:`CALIBRATION_SIZE` rows: ``(n / 2,048)`` to the power
#: :data:`SMALL_SIZE_EXPONENT` below it, :data:`LARGE_SIZE_EXPONENT` above (at most
#: :data:`LARGE_SIZE_GAIN`). Measured here
#: (float32, one thread): 0.44, 0.73 and 0.87 at 512, 1,024 and 1,536 rows; 1.11, 1.24 and
#: 1.25 at 4,096, 8,192 and 16,347 (a probe at 2,048 alone made a 16k-item fit's estimate
#: 1.6 times the fit).
SMALL_SIZE_EXPONENT = 0.6
LARGE_SIZE_EXPONENT = 0.15
LARGE_SIZE_GAIN = 1.25
_RATES: Dict[Tuple[str, int, int], float] = {}
#: Deflated size of a model file's members, as a share of their bytes (upper side of what the
#: suite's sets gave, scripts/ease_topk.py): the training rows' column indices 0.51-0.70,
#: the weights' 0.41-0.49, float16 weights 0.72-0.86; ids, bytes per id (UTF-32 text of
#: short ids deflates 5-10x).
DEFLATED_INDEX = 0.7
DEFLATED_WEIGHT_INDEX = 0.5
DEFLATED_VALUE = 0.86
DEFLATED_ID = 4


#: Timed runs of the flop-rate probe; the median counts (one run slowed by a moment of another
#: process's work would make every estimate of the process too long, the fastest too short
#: on a machine that stays busy).
CALIBRATION_RUNS = 3


def calibration_size(n_items: int) -> int:
    """The side of the matrix :func:`flops_rate` measures for ``n_items`` rows: ``n_items``
    to a multiple of 256, at least 256 and at most :data:`CALIBRATION_SIZE`."""
    return int(min(CALIBRATION_SIZE, max(256, 256 * round(n_items / 256))))


def size_speed(n: int) -> float:
    """The factorisation's flop rate on ``n`` rows relative to :data:`CALIBRATION_SIZE` rows."""
    ratio = max(float(n), 1.0) / CALIBRATION_SIZE
    if ratio <= 1.0:
        return ratio ** SMALL_SIZE_EXPONENT
    return min(LARGE_SIZE_GAIN, ratio ** LARGE_SIZE_EXPONENT)


def factor_rate(n: int, dtype: str = "float32", threads: int = 1, rate: Optional[float] = None) -> Tuple[float, float]:
    """Flop/s of a dense factorisation of ``n`` rows, and how many times slower than
    :data:`REFERENCE_RATE` the machine runs now (at least 1: what the estimates' other work
    is scaled by).

    ``rate``: a fixed rate at :data:`CALIBRATION_SIZE` rows (:data:`REFERENCE_RATE`, so that
    an estimate does not depend on the load), scaled to ``n`` rows by :func:`size_speed`;
    else :func:`flops_rate` measured here on :func:`calibration_size` rows, scaled from that
    size to ``n``."""
    if rate is not None:
        return rate * size_speed(n), max(1.0, REFERENCE_RATE / rate)
    probed = calibration_size(n)
    measured = flops_rate(dtype, threads, n)
    return measured * size_speed(n) / size_speed(probed), max(1.0, REFERENCE_RATE * size_speed(probed) / measured)


def flops_rate(dtype: str = "float32", threads: int = 1, n_items: int = CALIBRATION_SIZE) -> float:
    """Flop/s of LAPACK's ``potrf`` + ``potri`` on ``n_items`` rows here: measured once per
    process (dtype, threads, size) on a square positive definite matrix of ``n_items`` rows,
    at most :data:`CALIBRATION_SIZE` (at least 256), the median of :data:`CALIBRATION_RUNS`
    runs. Larger matrices block better (ml-latest-small's 6,170 items ran at up to 1.5 times
    the rate measured at 2,048), so an estimate from it errs on the long side."""
    n = calibration_size(n_items)
    key = (str(dtype), int(threads), n)
    if key not in _RATES:
        rng = np.random.default_rng(0)
        a = rng.random((n, 64)).astype(dtype)
        base = a @ a.T
        base[np.diag_indices(n)] += n
        runs = []
        with threadpool_limits(threads, user_api="blas"):
            potrf, potri = lapack.get_lapack_funcs(("potrf", "potri"), (base,))
            for _ in range(CALIBRATION_RUNS):
                gram = base.copy()
                t0 = time.perf_counter()
                c, _ = potrf(gram.T, lower=0, overwrite_a=1, clean=0)
                potri(c, lower=0, overwrite_c=1)
                runs.append(time.perf_counter() - t0)
        _RATES[key] = n ** 3 / max(float(np.median(runs)), 1e-4)  # potrf n^3/3 + potri 2n^3/3
    return _RATES[key]


@dataclass
class Cost:
    """What an EASE fit is estimated to take."""

    n_items: int
    peak_bytes: int
    seconds: float
    file_bytes: int
    dense_file_bytes: int

    def describe(self) -> str:
        kept = ("dense" if self.file_bytes >= self.dense_file_bytes
                else f"{self.file_bytes / max(self.dense_file_bytes, 1):.0%} of dense")
        return (f"estimated peak memory {memory.format_bytes(self.peak_bytes)}, "
                f"time {self.seconds:,.1f} s, model file {memory.format_bytes(self.file_bytes)} ({kept})")


def fit_seconds(csr: sp.csr_matrix, dtype: str = "float32", topk: int = DEFAULT_TOPK, threads: int = 1,
                rate: Optional[float] = None) -> float:
    """Estimated seconds of the weights' fit on ``csr`` (every item of it; the choice of
    ``l2`` is :func:`selection_seconds`): the inverse's ``n^3`` flops at :func:`factor_rate`
    (measured here, or ``rate``), plus the Gram matrix's sparse products (``sum_u n_u^2`` at
    :data:`SPARSE_RATE`) and the work on the ``n^2`` entries, the inverse's mirroring and
    the sparsification's candidates (:data:`ENTRY_SECONDS`, :data:`MIRROR_SECONDS`,
    :data:`CANDIDATE_SECONDS`), all slowed as the probe was."""
    n = csr.shape[1]
    per_user = np.diff(csr.indptr).astype(np.float64)
    speed, slow = factor_rate(n, dtype, threads, rate)
    entries = MIRROR_SECONDS * n * min(n, mirror_band(n, np.dtype(dtype).itemsize)) / 2
    if keeps_dense(n, topk):
        entries += DENSE_ENTRY_SECONDS * n * n
    else:
        entries += ENTRY_SECONDS * n * n + CANDIDATE_SECONDS * n * min(n, ROW_CAP * topk)
    return float(n) ** 3 / speed + (float((per_user ** 2).sum()) / SPARSE_RATE + entries) * slow


def estimate(csr: sp.csr_matrix, dtype: str = "float32", topk: int = DEFAULT_TOPK, threads: int = 1,
             rate: Optional[float] = None) -> Cost:
    """Peak memory, time and model-file size of an EASE fit on ``csr`` (users x items).

    Memory is :meth:`EASE.memory_needed`; time is :func:`fit_seconds` (``threads`` BLAS
    threads; at ``rate`` when given); the file holds the weights
    (``n^2`` float32, or ``topk`` pairs of a float16 value and a column index per item,
    uint16 below 65,536 items) besides the training matrix.
    """
    n_users, n = csr.shape
    peak = EASE.memory_needed(n, dtype, csr.nnz, topk)
    seconds = fit_seconds(csr, dtype, topk, threads, rate)
    # as the file stores them: column indices and kept items in the smallest unsigned type,
    # deflated like the ids (persistence.save_model)
    index = DEFLATED_INDEX * index_dtype(n).itemsize
    rest = (index * (csr.nnz + n) + DEFLATED_INDEX * index_dtype(csr.nnz + 1).itemsize * (n_users + 1)
            + 4 * n + DEFLATED_ID * (n_users + n))  # training rows, kept items, counts, ids
    dense = 4 * n * n + rest
    kept = n * min(topk, n)  # float16 values and their column indices
    weights = 4 * n * n if keeps_dense(n, topk) else \
        (DEFLATED_VALUE * 2 + DEFLATED_WEIGHT_INDEX * index_dtype(n).itemsize) * kept \
        + DEFLATED_INDEX * index_dtype(kept + 1).itemsize * (n + 1)
    return Cost(n, int(peak), float(seconds), int(weights + rest), int(dense))


def gram_matrix(csr: sp.csr_matrix, dtype=np.float64, rows_per_block: Optional[int] = None) -> np.ndarray:
    """Dense ``X'X`` filled a block of rows at a time, each in float64 then rounded to ``dtype``.

    The rows are summed by :func:`~mrec_warp.kernels.gram.gram_rows` straight into a dense
    block, over ``X'`` and ``X`` in the layouts scipy's product ``X' @ X`` reads (so each
    entry gets its products added in the same order: the same float64 sums); scipy's sparse
    product built a sparse result (a counting pass, then the product) to densify it."""
    n = csr.shape[1]
    csc = sp.csc_matrix(csr, dtype=np.float64)
    xt = sp.csr_matrix(csc.T)
    x = csc.tocsr()
    t_arrays = (xt.indptr.astype(np.int64, copy=False), xt.indices.astype(np.int32, copy=False), xt.data)
    x_arrays = (x.indptr.astype(np.int64, copy=False), x.indices.astype(np.int32, copy=False), x.data)
    gram = np.empty((n, n), dtype=dtype)
    step = rows_per_block or max(1, (32 * 2**20) // (8 * max(n, 1)))
    block = np.empty((min(step, n), n), dtype=np.float64)
    for a in range(0, n, step):
        b = min(a + step, n)
        gram_rows(*t_arrays, *x_arrays, a, block[:b - a])
        gram[a:b] = block[:b - a]
    return gram


def invert_spd(gram: np.ndarray) -> np.ndarray:
    """The inverse of ``gram`` (C-contiguous, symmetric positive definite), computed in its
    buffer by LAPACK's Cholesky factorisation (``potrf`` then ``potri``) and mirrored."""
    n = gram.shape[0]
    # gram is symmetric, so its transpose (Fortran order, no copy) is the same matrix
    # LAPACK wants; "lower=0" on the transpose is the lower triangle of the C array.
    potrf, potri = lapack.get_lapack_funcs(("potrf", "potri"), (gram,))
    _, info = potrf(gram.T, lower=0, overwrite_a=1, clean=0)
    if info != 0:
        raise InputError("EASE's Gram matrix is not positive definite (numerically)",
                         hint="raise `l2`")
    _, info = potri(gram.T, lower=0, overwrite_c=1)
    if info != 0:
        raise InputError("EASE's Gram matrix could not be inverted", hint="raise `l2`")
    # the lower triangle (C order) is valid: mirror it to the upper one, a band at a time
    step = mirror_band(n, gram.itemsize)
    for a in range(0, n, step):
        b = min(a + step, n)
        gram[a:b, b:] = gram[b:, a:b].T
        block = gram[a:b, a:b]
        block[np.triu_indices(b - a, 1)] = block.T[np.triu_indices(b - a, 1)]
    return gram


def mirror_band(n: int, itemsize: int) -> int:
    """Rows of a band of :func:`invert_spd`'s mirroring (32 MB of them)."""
    return max(1, (32 * 2**20) // (itemsize * max(n, 1)))


def ease_from_gram(gram: np.ndarray) -> np.ndarray:
    """``B = I - P diag(1 / diag P)`` with ``P = gram^-1``, computed in ``gram``'s buffer.

    ``gram`` (C-contiguous, symmetric positive definite, regulariser already on the diagonal)
    is overwritten. Returns the float32 weights (the same buffer when ``gram`` is float32).
    """
    n = gram.shape[0]
    invert_spd(gram)
    diag = gram.diagonal().copy()
    if not (np.isfinite(diag).all() and (diag > 0).all()):
        raise InputError("EASE's inverse is not finite", hint="raise `l2` or use `dtype=float64`")
    gram /= -diag[None, :]
    gram[np.diag_indices(n)] = 0.0
    return gram if gram.dtype == np.float32 else gram.astype(np.float32)
