"""WRMF: implicit-feedback matrix factorisation by weighted alternating least squares.

Hu, Koren & Volinsky (2008), "Collaborative Filtering for Implicit Feedback Datasets".
Every observed pair has preference ``p_ui = 1`` and confidence ``c_ui = 1 + alpha * f(value)``;
every other pair has ``p_ui = 0`` and confidence 1. The model minimises

    sum_{u,i} c_ui (p_ui - x_u . y_i)^2 + regularization * (sum ||x_u||^2 + sum ||y_i||^2)

by solving for all users with the items fixed, then for all items with the users fixed.
The per-row solves are in the Cython kernel :mod:`mrec_warp.kernels.als`.

One half-iteration solves every row of one side (users, then items) against the fixed
factors ``Y`` of the other side and the Gram matrix ``G = Y^T Y + reg I``. Each row's solve
depends only on its own confidences, ``Y``, ``G`` and (for conjugate gradients) its current
value, so the rows are cut into blocks of about equal work and the blocks go to whatever
workers there are:

* in this process (:class:`LocalBlocks`): threads of :func:`~mrec_warp.workers.fitting_threads`
  writing the factor matrix in place;
* on worker processes or a Dask cluster (:class:`RemoteBlocks`): each block's rows travel to a
  worker and come back solved. The confidence matrix (both orientations) is shipped once
  per fit -- scattered to every Dask worker, or written to a temporary folder that loky's
  worker processes memory-map -- and per half-iteration only ``Y`` travels the same way
  (``G`` is small). ``G`` is computed once per half-iteration on the driver.

Either way every row goes through the same kernel call with the same inputs, so the
factors are bit-for-bit the same on any backend and any number of workers (of one CPU
family: the kernel picks its FMA build by CPU at load time).

Fold-in and explanations rest on the same exact least-squares solve of one user's row:
fold-in stores its solution, an explanation splits its scores into one term per history item.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..data.confidence import (AUTO_ALPHA, CONFIDENCES, MAX_CONFIDENCE, all_equal, auto_alpha,
                               binary_alpha, check_confidence, confidence, observed_sizes)
from ..data.interactions import Interactions, as_csr
from ..data.npz import check_finite, check_shape
from ..errors import InputError, TrainingDivergedError
from ..files import owner_tag, remove_stale_temps
from ..progress import SILENT, Progress
from ..kernels import als as _als
from ..workers import ClusterError, Workers, effective_n_jobs, fitting_threads, one_blas_thread
from .factor_model import FactorModel
from .indices import IndexArg
from .foldin import log_fold_in, read_history, refuse_features
from .declared import Param, n_jobs_param, seed_param, verbose_param
from .tuning import SCORE_RATE, TrialShape
from .early_stopping import (Holdout, check_epochs, check_factor_memory, early_stopping_params, internal_holdout, keeps_best,
                             refit_all, run_epochs)
from .selection import AUTO, Stopwatch, remember, report, select_param, selected_names, value_of
from . import wrmf_search
from ..seeds import spawn_seed

SOLVERS = ("cg", "cholesky")
Callback = Callable[["WRMF", Dict[str, Any]], Optional[bool]]


# -- the blocks of a half-iteration, solved on this process's threads or on other workers ------
#: Prefix of the temporary folder that worker processes read a fit's arrays from.
STAGE_PREFIX = "mrec-warp-als-"

#: What to do when the Dask scheduler is lost in the middle of a fit (there are no parts to resume).
LOST_HINT = "restart the scheduler and the workers, then rerun the same command; the fit starts over"


class Rows:
    """One side of the problem: CSR structure and confidences of the rows being solved."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, conf: np.ndarray) -> None:
        self.indptr, self.indices, self.conf = indptr, indices, conf

    @classmethod
    def from_csr(cls, csr: sp.csr_matrix) -> "Rows":
        return cls(csr.indptr.astype(np.int64, copy=False), csr.indices,
                   np.ascontiguousarray(csr.data, dtype=np.float32))

    @property
    def n_rows(self) -> int:
        return len(self.indptr) - 1

    def chunks(self, d: int, n_workers: int) -> List[Tuple[int, int]]:
        """Row ranges of about equal work (a row costs about d + its entries per CG step),
        four per worker so a slow range does not leave the others idle."""
        n = self.n_rows
        if n_workers <= 1 or n == 0:
            return [(0, n)]
        cost = np.cumsum(np.diff(self.indptr) + d)
        cuts = np.searchsorted(cost, np.linspace(0, cost[-1], 4 * n_workers + 1)[1:-1])
        bounds = np.unique(np.concatenate([[0], cuts, [n]]))
        return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


class TrainingData:
    """Both sides of a confidence matrix: users x items and its transpose."""

    def __init__(self, conf_csr: sp.csr_matrix) -> None:
        self.users = Rows.from_csr(conf_csr)
        self.items = Rows.from_csr(conf_csr.T.tocsr())


def solve_rows(X: np.ndarray, Y: np.ndarray, G: np.ndarray, rows: Rows, start: int, stop: int,
               exact: bool, cg_steps: int) -> int:
    """Solve rows ``[start, stop)`` of ``rows`` into ``X[start:stop]`` (in place): the exact
    solve, or ``cg_steps`` conjugate-gradient steps from the current rows. Returns how many
    systems were not positive definite (exact solve only)."""
    if exact:
        return int(_als.solve_exact(X, Y, G, rows.indptr, rows.indices, rows.conf, start, stop))
    _als.solve_cg(X, Y, G, rows.indptr, rows.indices, rows.conf, start, stop, int(cg_steps))
    return 0


def solve_block(rows: Rows, Y: np.ndarray, G: np.ndarray, block: np.ndarray, start: int, stop: int,
                exact: bool, cg_steps: int) -> Tuple[np.ndarray, int]:
    """On a worker: rows ``[start, stop)`` solved, from their current values ``block``.

    The block is solved as a matrix of its own against the slice of ``indptr`` that covers
    it (its offsets still index the whole side's ``indices`` and ``conf``), so each row sees
    exactly what it sees in :func:`solve_rows`. Returns (solved rows, failed systems).
    """
    x = np.array(block, dtype=np.float32, order="C", copy=True)  # arguments may be read-only maps
    failed = solve_rows(x, Y, G, Rows(rows.indptr[start:stop + 1], rows.indices, rows.conf), 0, stop - start,
                        exact, cg_steps)
    return x, failed


class LocalBlocks:
    """Blocks solved by ``run`` (a :func:`~mrec_warp.workers.fitting_threads` pool of
    ``n_workers`` threads) in this process; without ``run``, one block on this thread."""

    def __init__(self, data: TrainingData, run: Optional[Callable] = None, n_workers: int = 1) -> None:
        self.data, self.n_workers = data, n_workers if run is not None else 1
        self.run = run or (lambda func, args: [func(*a) for a in args])
        self._chunks: Dict[str, List[Tuple[int, int]]] = {}  # per side: the same every half-iteration

    def solve(self, side: str, X: np.ndarray, Y: np.ndarray, G: np.ndarray, exact: bool, cg_steps: int) -> int:
        """Solve every row of ``side`` into ``X`` (in place); returns the failed systems."""
        rows: Rows = getattr(self.data, side)
        if side not in self._chunks:
            self._chunks[side] = rows.chunks(X.shape[1], self.n_workers)
        chunks = self._chunks[side]
        return sum(self.run(lambda a, b: solve_rows(X, Y, G, rows, a, b, exact, cg_steps), chunks))


class RemoteBlocks:
    """Blocks solved on the worker processes of ``workers`` (loky processes or Dask).

    Use as a context manager: the confidence matrix is staged for the workers on entry
    (once), and released on exit.
    """

    def __init__(self, data: TrainingData, workers: Workers) -> None:
        self.data, self.workers = data, workers
        self.folder: Optional[str] = None
        self.sides: dict = {}
        self.rounds = 0
        self._chunks: Dict[str, List[Tuple[int, int]]] = {}  # per side, asked of the scheduler once

    def __enter__(self) -> "RemoteBlocks":
        if self.workers.name == "processes":
            remove_stale_temps(tempfile.gettempdir(), prefix=STAGE_PREFIX)  # of killed runs
            self.folder = tempfile.mkdtemp(prefix=f"{STAGE_PREFIX}{owner_tag()}")
        try:
            with self._cluster_faults():
                self.sides = {side: self._share(side, getattr(self.data, side)) for side in ("users", "items")}
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.sides = {}  # a scattered value is forgotten by the cluster once its futures are
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    @contextlib.contextmanager
    def _cluster_faults(self) -> Iterator[None]:
        """A lost Dask scheduler, while scattering or while the blocks run, is one
        :class:`~mrec_warp.workers.ClusterError` whose hint fits a fit: nothing to resume."""
        try:
            yield
        except ClusterError as exc:
            raise ClusterError(exc.message, hint=LOST_HINT) from None
        except (OSError, TimeoutError) as exc:
            if self.workers.name != "dask":
                raise
            raise ClusterError(self.workers._lost().message, hint=LOST_HINT) from exc

    def _share(self, name: str, value: Any) -> Any:
        """``value`` where every worker can read it without it travelling with each block: scattered
        to every Dask worker, or memory-mapped from a file (joblib passes a map by its file name)."""
        if self.workers.name == "dask":
            key = f"wrmf-{name}-{uuid.uuid4().hex[:8]}"  # a readable name in the dashboard, unique per fit
            return self.workers.client.scatter({key: value}, broadcast=True, hash=False)[key]
        if isinstance(value, Rows):
            return Rows(*(self._share(f"{name}.{k}", a) for k, a in
                          (("indptr", value.indptr), ("indices", value.indices), ("conf", value.conf))))
        assert self.folder is not None  # made in __enter__ when the blocks share through files
        path = os.path.join(self.folder, f"{name}.npy")
        np.save(path, np.ascontiguousarray(value))
        return np.load(path, mmap_mode="r")

    def solve(self, side: str, X: np.ndarray, Y: np.ndarray, G: np.ndarray, exact: bool, cg_steps: int) -> int:
        """Solve every row of ``side`` into ``X`` on the workers; returns the failed systems."""
        rows: Rows = getattr(self.data, side)
        self.rounds += 1
        name = f"fixed-{self.rounds}"  # a new file each time: never rewrite a file a worker may still map
        failed, fixed, tasks = 0, None, []
        try:
            with self._cluster_faults():
                if side not in self._chunks:
                    self._chunks[side] = rows.chunks(X.shape[1], self.workers.workers)  # asks the scheduler
                chunks = self._chunks[side]
                fixed = self._share(name, Y)  # once per half-iteration, not once per block
                tasks = [(self.sides[side], fixed, G, X[a:b], a, b, exact, cg_steps) for a, b in chunks]
                names = [f"wrmf-{side}-{self.rounds:03d}-block-{i:03d}" for i in range(len(tasks))]
                for (a, b), (x, bad) in zip(chunks, self.workers.map(solve_block, tasks, names=names)):
                    X[a:b] = x
                    failed += bad
        finally:
            del fixed, tasks
            if self.folder is not None:
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(self.folder, f"{name}.npy"))
        return failed


def solves_remotely(workers: Optional[Workers]) -> bool:
    """Whether a fit's blocks go to ``workers``: other processes, more than one of them (a
    single loky process runs its calls in this one: staging the data would buy nothing)."""
    if workers is None or workers.is_local_memory:
        return False
    return not (workers.name == "processes" and workers.workers <= 1)


@contextlib.contextmanager
def block_solver(data: TrainingData, workers: Optional[Workers], n_jobs: Optional[int]) -> Iterator[Any]:
    """The solver of a fit's half-iterations, BLAS on one thread throughout: on ``workers``
    when :func:`solves_remotely`, else on a pool of ``n_jobs`` threads kept for the fit."""
    if not solves_remotely(workers):
        with fitting_threads(n_jobs, single_blas=True) as run:
            yield LocalBlocks(data, run, effective_n_jobs(n_jobs))
        return
    assert workers is not None  # solves_remotely says so
    with one_blas_thread(), RemoteBlocks(data, workers) as blocks:
        yield blocks


#: Rows of a side converted to float64 at a time for its Gram matrix (a bounded temporary).
GRAM_ROWS = 32768


def gram_sum(Y: np.ndarray) -> np.ndarray:
    """``Y^T Y`` in float64, accumulated over blocks of :data:`GRAM_ROWS` rows (BLAS).

    Summed in float64, the matrix is the same to float64 round-off however the rows are cut:
    a local fit's, or the sum of a fit on partitions' per-block matrices
    (:mod:`~mrec_warp.models.partitioned_wrmf`); rounded to float32 it is then the same bits
    but for a value within 1e-16 of a rounding boundary, so both fits solve the same systems."""
    d = Y.shape[1]
    G = np.zeros((d, d), dtype=np.float64)
    for start in range(0, Y.shape[0], GRAM_ROWS):
        block = Y[start:start + GRAM_ROWS].astype(np.float64)
        G += block.T @ block
    return G


def regularised_gram(G: np.ndarray, regularization: float) -> np.ndarray:
    """A float64 Gram matrix ``G`` plus ``regularization`` on the diagonal, as the row solves
    take it: float32, C-contiguous."""
    out = np.array(G, dtype=np.float64, order="C", copy=True)
    out[np.diag_indices_from(out)] += float(regularization)
    return out.astype(np.float32)


class WRMF(FactorModel):
    """Weighted regularised matrix factorisation for implicit feedback (Hu et al., 2008).

    ``f(u, i) = x_u . y_i``, fitted by alternating least squares with confidence weights.

    Parameters
    ----------
    factors : int
        Latent dimensions.
    alpha : float or "auto"
        Confidence slope: an observed pair weighs ``1 + alpha * f(value)``, unobserved pairs 1.
        ``"auto"`` (default) resolves at fit (:func:`auto_alpha`, kept as ``alpha_`` and
        logged). On a binary file (every value the same, or no values) every observed pair
        weighs ``1 + 3`` while the data is small against the fixed regularization and
        ``1 + 1`` once it is large: :func:`~mrec_warp.data.confidence.binary_evidence`
        ``= sqrt(users * pairs) * (pairs / items) ** 0.2`` up to 90,000 gives 3, from 130,000
        gives 1, geometric in between. On values that differ (ratings, counts) alpha 1, the
        previous default (scaling it to the mean value lost 2.5% on one suite set). Chosen on
        the selection suite and 34 binary sets of other shapes (``scripts/bench_defaults.py``,
        docs/models/wrmf.rst, 'alpha "auto"'): alpha 3 was 3-93% above alpha 1 on every small binary set and
        2-20% below it on every large one (20,000 users x 400 items, 200,000 pairs: -4%).
    confidence : {"linear", "log", "none"}
        ``f(value)`` = ``value``, or ``log1p(value / eps)`` for heavy-tailed counts (the
        shared rule of :mod:`mrec_warp.data.confidence`). With ``"none"``, or without values
        (``fit(..., use_values=False)``, a file without a value column), every observed pair
        weighs ``1 + alpha``: WRMF's observed pairs always outweigh the unobserved ones.
    eps : float
        Scale of the ``log`` confidence.
    regularization : float
        L2 penalty on every user and item vector.
    solver : {"cg", "cholesky"}
        ``cg``: ``cg_steps`` conjugate-gradient steps per row and half-iteration, warm-started
        from the previous iterate (Takacs, Pilaszy & Tikk, 2011); ``cholesky``: the exact
        solve of every row (slower by about ``factors / cg_steps``).
    cg_steps : int
        Conjugate-gradient steps per row and half-iteration.
    epochs : int or None
        Run exactly this many ALS iterations (users then items); ``None`` (default) picks
        the count by early stopping on a validation split, up to ``max_epochs``.
    max_epochs, patience, eval_every, eval_k, validation_fraction, validation_users, refit
        Early stopping, as for :class:`~mrec_warp.models.warp.WARP`: evaluate precision@eval_k
        every ``eval_every`` iterations, stop at the first evaluation ``patience`` or more
        iterations after the last improvement (``patience`` 10: with 3, the noisy hold-out of
        ml-latest-small stopped at iteration 3-5 where 15 scored 3% higher; on the selection
        suite, 3 seeds, 10 moved P@10 by -0.0003 on ml-100k and +0.0057 / +0.0021 / +0.0003 /
        +0.0004 / 0 on the others, for up to 2.6x the fit time, still 0.3-2.6 s), and
        (``refit``) refit from scratch on all the data for the best count.
    init_scale : float
        Initial item factors are normal with standard deviation ``init_scale / sqrt(factors)``;
        user factors start at 0 (the first half-iteration solves for them).
    n_jobs : int
        Threads solving blocks of rows at once (``fit(..., workers=...)`` solves them on
        processes or a Dask cluster instead). Each row's solve depends only on its own data
        and BLAS runs single-threaded, so a fixed ``random_state`` gives bit-for-bit the same
        model on one thread and, on this build, on any number of threads or workers.
    random_state : int or None
        Seed of the initial factors and the validation split.
    verbose : bool
        Log one line per iteration to standard error.
    """

    # -- what tune asks (TuneHooks) --------------------------------------------------------------
    #: Iteration caps of a budgeted search's rungs (the last: the full trial).
    tune_rungs = (5, 10, None)
    #: Seconds per ``(users + items) x factors^2`` and iteration (one thread), measured on
    #: ml-100k and a 1.9k x 16k long-tail synthetic set (2 shared cores).
    TUNE_RATE = 2.0e-9
    #: Iterations an early-stopped full trial is assumed to run.
    TUNE_EPOCHS = 15

    @classmethod
    def fit_cost(cls, shape: TrialShape, params: Mapping[str, Any], epochs_cap: Optional[int] = None) -> float:
        """Iterations (the typical count, or the cap) of ALS solves and of validation scoring,
        plus, when settings are left at ``"auto"``, the search's (:mod:`.wrmf_search`): its
        iterations at each setting's factor count and its scoring of the rungs."""
        epochs = min(epochs_cap, cls.TUNE_EPOCHS) if epochs_cap else cls.TUNE_EPOCHS
        model = cls(**params)

        def iteration(d: int) -> float:
            return cls.TUNE_RATE * (shape.users + shape.items) * d * d

        evaluation = SCORE_RATE * shape.sampled_users(epochs_cap) * shape.items
        d = int(cls.FIXED["factors"]) if model.factors == AUTO else int(model.factors)
        cost = epochs * (iteration(d) + evaluation)
        names = selected_names(model)
        if names:
            explicit = {n: getattr(model, n) for n in cls.SELECTED if n not in names}
            settings = wrmf_search.candidates({**cls.FIXED, "alpha": 1.0}, names, explicit)
            promoted = 1 + wrmf_search.promoted_count(len(settings))
            cost += wrmf_search.START * iteration(int(settings[0]["factors"])) \
                + sum(wrmf_search.RUNG * iteration(int(s["factors"])) for s in settings) \
                + promoted * wrmf_search.RUNG2 * iteration(d) \
                + len(settings) * SCORE_RATE * min(shape.val_users, wrmf_search.RUNG_USERS) * shape.items \
                + promoted * evaluation
        return cost + shape.scoring()

    @classmethod
    def trial_params(cls, values: Mapping[str, Any], shared: Mapping[str, Any], k: int,
                     epochs_cap: Optional[int] = None) -> Dict[str, Any]:
        """The seed only of the search's shared parameters (ALS converges in few iterations:
        its own ``max_epochs`` and patience), early stopping scored on every validation user."""
        return super().trial_params(values, {"random_state": shared.get("random_state"), "validation_users": 10**9},
                                    k, epochs_cap)

    name = "wrmf"
    order = 50
    #: The settings a fit chooses on its hold-out when left at "auto" (:mod:`.wrmf_search`), and
    #: their values with ``select=False``: ``alpha``'s is the data rule (:func:`auto_alpha`).
    SELECTED = ("factors", "alpha", "regularization")
    FIXED: Dict[str, Any] = {"factors": 64, "alpha": AUTO, "regularization": 40.0}
    #: A file from before ``select`` was trained with the fixed values.
    PARAMS_BEFORE: Dict[str, Any] = {"select": False}
    supports_confidence = True
    SCALING_PARAMETERS = ("alpha",)
    _STOPPING = early_stopping_params(max_epochs=50, patience=10, eval_every=1, unit="iteration",
                                      refit_help="After early stopping, refit from scratch on all the data for "
                                                 "the best iteration count.")
    PARAMETERS = (
        Param("factors", int, AUTO, "Latent dimensions; auto: chosen on the hold-out (`select`), else 64.", low=1,
              tune=[32, 64, 128], grid=(32, 64, 128)),
        Param("alpha", float, AUTO, "Confidence slope: an observed pair weighs 1 + alpha*f(value); auto: chosen on "
              "the hold-out (`select`), else on a binary file 3 while sqrt(users*pairs)*(pairs/items)^0.2 <= 90,000, "
              "1 from 130,000 (geometric in between), on values that differ 1.", low=0, check=False,
              tune=("log", 0.3, 30.0)),
        Param("confidence", str, "linear", "f(value): value (linear), log1p(value/eps) (log), or none = every "
              "observed pair weighs 1 + alpha.", choices=CONFIDENCES, tune=["linear", "log"]),
        Param("eps", float, 1.0, "Confidence log: the value that counts as one unit.", low=0, open=True,
              check=False),  # alpha and eps: the confidence rule's (_check_extra)
        Param("regularization", float, AUTO, "L2 penalty on every vector; auto: chosen on the hold-out "
              "(`select`), else 40.", low=0, tune=("log", 1.0, 200.0)),
        select_param(),
        Param("solver", str, "cg", "cg: a few conjugate-gradient steps per row; cholesky: the exact solve.",
              choices=SOLVERS, option=False),
        Param("cg_steps", int, 3, "Conjugate-gradient steps per row and half-iteration.", low=1, tune=True,
              option=False),
        _STOPPING["epochs"], _STOPPING["max_epochs"], _STOPPING["patience"], _STOPPING["eval_every"],
        _STOPPING["eval_k"], _STOPPING["validation_fraction"], _STOPPING["validation_users"], _STOPPING["refit"],
        Param("init_scale", float, 1.0, "Initial item factors' standard deviation times sqrt(factors).", low=0,
              option=False),
        n_jobs_param("Threads solving blocks of rows at once (-1: every core)."),
        seed_param(),
        verbose_param(),
    )

    def __init__(
        self,
        factors: Union[int, str] = AUTO,
        alpha: Union[float, str] = AUTO,
        confidence: str = "linear",
        eps: float = 1.0,
        regularization: Union[float, str] = AUTO,
        select: bool = True,
        solver: str = "cg",
        cg_steps: int = 3,
        epochs: Optional[int] = None,
        max_epochs: int = 50,
        patience: int = 10,
        eval_every: int = 1,
        eval_k: int = 10,
        validation_fraction: float = 0.1,
        validation_users: int = 5000,
        refit: bool = True,
        init_scale: float = 1.0,
        n_jobs: int = 1,
        random_state: Optional[int] = None,
        verbose: bool = False,
    ) -> None:
        self.factors = factors
        self.alpha = alpha
        self.confidence = confidence
        self.eps = eps
        self.regularization = regularization
        self.select = select
        self.solver = solver
        self.cg_steps = cg_steps
        self.epochs = epochs
        self.max_epochs = max_epochs
        self.patience = patience
        self.eval_every = eval_every
        self.eval_k = eval_k
        self.validation_fraction = validation_fraction
        self.validation_users = validation_users
        self.refit = refit
        self.init_scale = init_scale
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    # -- checks ------------------------------------------------------------------------------
    #: factors x factors matrices a fit holds: the Gram matrix, and one system per solve.
    GRAM_COPIES = 2

    def _check_extra(self) -> None:
        check_epochs(self)
        if isinstance(self.alpha, str):
            if self.alpha != "auto":
                raise InputError(f"`alpha` must be a number >= 0 or \"auto\", got {self.alpha!r}",
                                 hint="e.g. `alpha=auto` (from the data) or `alpha=5`")
            check_confidence(self.confidence, 1.0, self.eps)  # the shared rule, alpha resolved by fit
        else:
            check_confidence(self.confidence, self.alpha, self.eps)  # the shared rule of every confidence

    def _check_file_params(self) -> None:
        if not isinstance(self.alpha, str):  # ("auto" was resolved by the fit into alpha_)
            # a file has no values to check alpha against: the largest any file holds
            check_confidence(self.confidence, self.alpha, self.eps, bounded=True)

    def confidences(self, values: Optional[np.ndarray], n: Optional[int] = None) -> np.ndarray:
        """The confidence of observed pairs with these values: the shared rule
        (:func:`mrec_warp.data.confidence.confidence`), or ``1 + alpha`` for each of ``n`` pairs
        when there are no values (``None``) or ``confidence`` is ``"none"``."""
        alpha = self.resolved_alpha()
        if values is None or self.confidence == "none":
            count = len(values) if values is not None else n
            if count is None:
                raise ValueError("confidences without values need the number of pairs (n)")
            return np.full(count, 1.0 + alpha, dtype=np.float32)
        return confidence(values, self.confidence, alpha, float(self.eps))

    def resolved_alpha(self) -> float:
        """The ``alpha`` in force: ``alpha_`` as the fit resolved ``"auto"``, else ``alpha``."""
        if isinstance(self.alpha, str):
            resolved = getattr(self, "alpha_", None)
            if resolved is None:
                raise InputError("`alpha=auto` is resolved by fit: fit the model first")
            return float(resolved)
        return float(self.alpha)

    def factors_in_force(self) -> int:
        """``factors``, or what the fit chose for ``"auto"`` (64 with ``select=False``)."""
        return int(value_of(self, "factors"))

    def regularization_in_force(self) -> float:
        """``regularization``, or what the fit chose for ``"auto"`` (40 with ``select=False``)."""
        return float(value_of(self, "regularization"))

    # -- state -------------------------------------------------------------------------------
    def init_state(self, n_users: int, n_items: int, rng: np.random.Generator) -> None:
        d = self.factors_in_force()
        self.user_factors_ = np.zeros((n_users, d), dtype=np.float32)
        self.item_factors_ = rng.standard_normal((n_items, d), dtype=np.float32) * np.float32(
            self.init_scale / np.sqrt(d))
        self.epochs_done_ = 0

    def _gram(self, Y: np.ndarray) -> np.ndarray:
        """``Y^T Y + reg * I``, the part of every row's system that all rows share
        (:func:`gram_sum` then :func:`regularised_gram`)."""
        return regularised_gram(gram_sum(Y), self.regularization_in_force())

    # -- one half-iteration ------------------------------------------------------------------
    def _half_iteration(self, blocks, side: str, exact: bool = False) -> None:
        """Solve every row of ``side`` against the other side's fixed factors (in place), the
        blocks of rows on ``blocks``' workers and the Gram matrix here, once."""
        X, Y = (self.user_factors_, self.item_factors_) if side == "users" else (self.item_factors_,
                                                                                  self.user_factors_)
        failed = blocks.solve(side, X, Y, self._gram(Y), exact or self.solver == "cholesky", int(self.cg_steps))
        if failed:
            raise TrainingDivergedError(f"{failed} least-squares systems were not positive definite",
                                        hint="use regularization > 0")

    def _iteration(self, blocks) -> None:
        self._half_iteration(blocks, "users")
        self._half_iteration(blocks, "items")
        self.epochs_done_ += 1
        # a float64 sum is finite exactly when every entry is (and needs no n x d temporary)
        if not (np.isfinite(self.user_factors_.sum(dtype=np.float64))
                and np.isfinite(self.item_factors_.sum(dtype=np.float64))):
            raise TrainingDivergedError(f"training diverged at iteration {self.epochs_done_}: factors are not finite",
                                        hint=self._divergence_hint())

    def _divergence_hint(self) -> str:
        """Which way to move: a regularization beyond any confidence (at most 1e15) is what
        overflows float32 (``regularization=3e38``); otherwise confidences outgrow it."""
        reg = self.regularization_in_force()
        if reg > MAX_CONFIDENCE:
            return f"lower `regularization` from {reg:g}: the float32 arithmetic overflows, e.g. `regularization=40`"
        return "raise `regularization` or lower `alpha`"

    def loss(self, data: Optional["TrainingData"] = None) -> float:
        """The objective on the training data (or ``data``): weighted squared error plus L2."""
        self.check_fitted()
        rows = (data or TrainingData(self._confidence_csr())).users
        X = self.user_factors_.astype(np.float64)
        Y = self.item_factors_.astype(np.float64)
        everything = float(np.sum((X.T @ X) * (Y.T @ Y)))  # sum over all pairs of s^2
        observed = _als.observed_loss(self.user_factors_, self.item_factors_, rows.indptr, rows.indices, rows.conf)
        return everything + observed + self.regularization_in_force() * float((X * X).sum() + (Y * Y).sum())

    # -- public training API -----------------------------------------------------------------
    def fit(self, X, validation=None, callbacks: Sequence[Callback] = (), progress: Optional[Progress] = None,
            use_values: bool = True, user_ids: Optional[Sequence] = None,
            item_ids: Optional[Sequence] = None, workers: Optional[Workers] = None) -> "WRMF":
        """Fit on a users x items matrix (CSR or :class:`Interactions`) of values.

        Parameters
        ----------
        X : Interactions or sparse matrix
            Every stored entry is an observed pair, also one of value 0; its value (>= 0)
            sets the confidence, 0 the lowest.
        validation : Interactions or sparse matrix, optional
            Held-out positives (same shape) for early stopping; without it, and with
            ``epochs=None``, ``validation_fraction`` of each user's items is held out and,
            if ``refit``, the model is refitted on everything for the best count.
        callbacks : sequence of callables
            ``callback(model, logs)`` after every iteration; returning ``True`` stops.
        progress : Progress, optional
        use_values : bool
            ``False``: ignore the values, every observed pair weighs ``1 + alpha``.
        user_ids, item_ids : sequences, optional
            With a plain matrix: the id of each row and column, as for WARP.
        workers : Workers, optional
            Where the half-iterations' blocks of rows run: worker processes or a Dask
            cluster (e.g. the stage's :class:`~mrec_warp.context.ExecutionContext`; entered
            here if it is not yet). Without it, or with threads, ``n_jobs`` threads of this
            process. The model is bit-for-bit the same either way
            (:class:`LocalBlocks`, :class:`RemoteBlocks`).
        """
        self.check_params()
        progress = progress or (Progress(verbose=True) if self.verbose else SILENT)
        conf_csr, values, nnz = self._prepare(X, progress, use_values, user_ids, item_ids)
        names = selected_names(self)
        with workers if workers is not None else contextlib.nullcontext():
            if workers is not None and solves_remotely(workers):
                progress.log(f"wrmf: blocks of rows solved on {workers.describe()}")
            if names:
                del conf_csr  # each setting of the search has its own confidences
                self._fit_selecting(names, values, nnz, validation, callbacks, progress, workers)
            else:
                self._fit_prepared(conf_csr, validation, callbacks, progress, unit="iteration", workers=workers)
        return self

    def prepare_fit(self, X, progress: Progress, use_values: bool = True, user_ids: Optional[Sequence] = None,
                    item_ids: Optional[Sequence] = None) -> sp.csr_matrix:
        """What every fit starts from (here or partitioned on a cluster,
        :mod:`~mrec_warp.models.partitioned_wrmf`): the ids, the training pairs, ``alpha_`` and
        the fixed values of the settings left at auto set on the model, and the users x items
        matrix of confidences returned."""
        return self._prepare(X, progress, use_values, user_ids, item_ids)[0]

    def _prepare(self, X, progress: Progress, use_values: bool, user_ids: Optional[Sequence],
                 item_ids: Optional[Sequence]) -> Tuple[sp.csr_matrix, Optional[np.ndarray], int]:
        """:meth:`prepare_fit`, also returning the training values (``None`` without) and the
        number of pairs, which a fit that chooses its settings builds each setting's confidences from."""
        X = self._with_ids(X, user_ids, item_ids)
        raw = X.matrix if isinstance(X, Interactions) else as_csr(X)
        nnz = self._set_pairs(X)  # every stored entry, a value of 0 too (the weakest confidence)
        values = raw.data if use_values else None
        names = selected_names(self)
        if isinstance(self.alpha, str):
            sizes = observed_sizes(raw)
            self.alpha_ = auto_alpha(values, self.confidence, float(self.eps), sizes)
            if "alpha" not in names:
                progress.log(f"wrmf: alpha auto = {self.alpha_:.4g} (" + (
                    f"binary, {sizes[0]:,} users x {sizes[1]:,} items, {sizes[2]:,} pairs: every observed pair "
                    f"weighs 1 + {binary_alpha(sizes):.3g})" if all_equal(values)
                    else f"values differ: each unit of f(value) adds {AUTO_ALPHA:g} to a pair's weight)"))
        else:
            self.alpha_ = float(self.alpha)
        rule_alpha = float(self.alpha_)
        remember(self, {"alpha": rule_alpha, **{n: self.FIXED[n] for n in names if n != "alpha"}})
        self.confidence_ = self.confidences(values, nnz)  # (refuses bad values before any work)
        del raw
        return self._confidence_csr(), values, nnz

    def _unit_csr(self, values: Optional[np.ndarray], nnz: int) -> sp.csr_matrix:
        """The training pairs with ``f(value)`` each (1 without values or with confidence
        "none"): the confidences of any ``alpha`` are ``1 + alpha * f``."""
        if values is None or self.confidence == "none":
            f = np.ones(nnz, dtype=np.float32)
        else:
            v = np.asarray(values, dtype=np.float64)
            f = (np.log1p(v / float(self.eps)) if self.confidence == "log" else v).astype(np.float32)
        indptr, indices, shape = self._seen
        return sp.csr_matrix((f, indices, indptr), shape=shape)

    def use_setting(self, values: Mapping[str, Any]) -> None:
        """Put a setting of the selected parameters in force (``factors_``, ``alpha_``,
        ``regularization_``): what the search's candidates train with."""
        for name, value in values.items():
            setattr(self, name + "_", int(value) if name == "factors" else float(value))

    def resize_factors(self, factors: int, rng: np.random.Generator) -> None:
        """Give the factors ``factors`` columns, keeping the first ones: new item columns are
        drawn as :meth:`init_state` draws them, new user columns are 0 (a search's setting
        with more factors starts from one with fewer)."""
        d = self.item_factors_.shape[1]
        if factors < d:
            self.user_factors_ = np.ascontiguousarray(self.user_factors_[:, :factors])
            self.item_factors_ = np.ascontiguousarray(self.item_factors_[:, :factors])
        elif factors > d:
            n_users, n_items = self.user_factors_.shape[0], self.item_factors_.shape[0]
            extra = rng.standard_normal((n_items, factors - d), dtype=np.float32) * np.float32(
                self.init_scale / np.sqrt(factors))
            self.user_factors_ = np.hstack([self.user_factors_, np.zeros((n_users, factors - d), np.float32)])
            self.item_factors_ = np.ascontiguousarray(np.hstack([self.item_factors_, extra]))

    @staticmethod
    def training_data(conf_csr: sp.csr_matrix) -> TrainingData:
        """Both sides of a confidence matrix, as :meth:`iterate` takes them (built once for many calls)."""
        return TrainingData(conf_csr)

    def iterate(self, conf: Union[sp.csr_matrix, TrainingData], iterations: int,
                workers: Optional[Workers] = None) -> None:
        """``iterations`` ALS iterations on the confidences ``conf`` (a matrix, or
        :meth:`training_data`) from the current factors, nothing scored or logged (a
        candidate of the search)."""
        data = conf if isinstance(conf, TrainingData) else TrainingData(conf)
        with block_solver(data, workers, self.n_jobs) as blocks:
            for _ in range(int(iterations)):
                self._iteration(blocks)

    def _fit_selecting(self, names: Tuple[str, ...], values: Optional[np.ndarray], nnz: int, validation,
                       callbacks: Sequence[Callback], progress: Progress, workers: Optional[Workers]) -> None:
        """The fit that chooses ``names`` on the hold-out (:mod:`.wrmf_search`), goes on from the
        winner with early stopping, then refits on all the data: from scratch for the best count
        when the fixed defaults won, else :data:`.wrmf_search.REFIT` iterations from the best
        iteration's factors."""
        self.history_: List[Dict[str, Any]] = []
        self.refit_start_ = 0
        rng = np.random.default_rng(self.random_state)
        unit = self._unit_csr(values, nnz)
        holdout = internal_holdout(self, unit, rng, validation)
        init_seed = spawn_seed(rng)
        explicit = {n: getattr(self, n) for n in WRMF.SELECTED if n not in names}
        fixed = {"factors": self.FIXED["factors"], "regularization": self.FIXED["regularization"],
                 "alpha": float(self.alpha_)}
        grid = wrmf_search.candidates(fixed, names, explicit)
        # a factor count whose states would crowd the memory is left out (the first setting stays)
        n_users, n_items = unit.shape
        settings = grid[:1] + [s for s in grid[1:] if wrmf_search.fits_in_memory(n_users, n_items, int(s["factors"]), 4)]
        self.use_setting(settings[0])
        check_factor_memory(self, n_users, n_items)  # refused before any allocation, as without the search
        clock = Stopwatch()
        users = holdout.users if holdout.users is not None else np.flatnonzero(np.diff(holdout.held_out.indptr) > 0)
        prepared = (self.resolved_alpha(), self.confidence_)  # all the pairs' confidences at the rule's alpha
        fit_confidences = wrmf_search.Confidences(holdout.fit, self.training_data)
        winner, tried = wrmf_search.search(self, holdout.fit, holdout.held_out, users, settings, init_seed, rng,
                                           progress, workers, fit_confidences)
        report(progress, "wrmf", tried, winner, tried[0], clock.seconds, int(self.eval_k))
        chosen = dict(winner.values)
        self.use_setting(chosen)
        remember(self, {n: chosen[n] for n in names})
        check_factor_memory(self, n_users, n_items)
        # the search's alpha may differ from the rule's the pairs' confidences were made with
        self.confidence_ = prepared[1] if self.resolved_alpha() == prepared[0] else self.confidences(values, nnz)
        del prepared
        conf_csr = self._confidence_csr()
        if self.epochs is not None:  # a fixed count: on all the data, with the chosen setting
            del fit_confidences
            progress.log(f"fitting on all training data for {int(self.epochs)} iterations")
            self.init_state(n_users, n_items, np.random.default_rng(init_seed))
            self.train_epochs(conf_csr, int(self.epochs), progress, callbacks, workers=workers)
            self.best_epoch_ = int(self.epochs)
            return
        done = int(winner.extra["iterations"])
        # the fit part's confidences at the winner's alpha (the search's last ones when it is theirs)
        fit_conf = fit_confidences.of(float(self.alpha_))
        trace = winner.extra.get("trace")
        if trace is not None and trace.snapshot is not None:  # the fixed defaults won: their best iteration in the search
            searched, bar, bar_epoch = trace.snapshot, trace.score, trace.epoch
            patience = wrmf_search.PatienceFrom(bar, bar_epoch, int(self.patience), int(self.eval_k))
        else:  # its score at the search's last iteration is the one to beat
            searched, bar, bar_epoch = self.snapshot(), winner.score, done
            patience = wrmf_search.PatienceFrom(bar, bar_epoch, min(int(self.patience), wrmf_search.CHALLENGER_PATIENCE),
                                                int(self.eval_k), wrmf_search.CHALLENGER_MIN_RISE)
        best = bar_epoch
        self.best_score_ = bar
        if int(self.max_epochs) > done and not patience(self, {"epoch": done}):
            # early stopping goes on from the winner
            found = self.train_epochs(fit_conf, int(self.max_epochs) - done, progress, [*callbacks, patience],
                                      validation=Holdout(holdout.fit, holdout.held_out, rng, users),
                                      first=done, workers=workers)
            if self.best_score_ > bar:
                best = found
        if best == bar_epoch:
            self.restore(searched)
            self.best_score_ = bar
            progress.log(f"best iteration {best}, in the search: val P@{int(self.eval_k)} {bar:.4f}")
        del searched, fit_conf, fit_confidences
        if keeps_best(self, best, holdout.fit.nnz, nnz, validation, progress, "iteration"):
            return
        if winner is tried[0]:
            # the fixed defaults (of the settings chosen) won: the refit of a fit without the
            # search, from the same initial factors for the best count (the same model when
            # early stopping picks the same count)
            refit_all(self, conf_csr, best, None, init_seed, progress, callbacks, "iteration", workers=workers)
            return
        # another setting won: ALS forgets its start within an iteration or two, so from the best
        # iteration's factors a few iterations on all the data reach about what a refit from
        # scratch reaches (on the selection suite within 0.1-0.5% of it) for a fraction of its cost
        progress.log(f"refitting on all training data: {wrmf_search.REFIT} iterations from iteration {best}'s factors")
        self.refit_start_ = best
        self.train_epochs(conf_csr, wrmf_search.REFIT, progress, callbacks, phase="refit", first=best, workers=workers)

    #: The training pairs' structure ``(indptr, indices, shape)``, shared with the confidences
    #: (set by ``train_``'s setter; ``None`` before a fit, read through ``__dict__`` where it may be).
    _seen: Tuple[np.ndarray, np.ndarray, Tuple[int, int]]

    def _confidence_csr(self) -> sp.csr_matrix:
        """The training pairs with their confidences (shares ``train_``'s indptr and indices)."""
        indptr, indices, shape = self._seen
        return sp.csr_matrix((self.confidence_, indices, indptr), shape=shape)

    # -- the training matrix: its structure, shared with the confidences; its ones on demand ---
    def _set_pairs(self, X) -> int:
        """:meth:`set_training_data` keeping only the binary matrix's structure (see
        ``train_``): its ones go at once, as the fit needs none. Returns the number of pairs."""
        nnz = self.set_training_data(X).nnz
        self.__dict__["_binary_train"] = None
        return nnz

    @property
    def train_(self) -> Optional[sp.csr_matrix]:
        """The training pairs as a binary matrix (what recommend excludes, what is saved), as
        for every model. WRMF keeps only its structure, shared with the confidence matrix,
        and builds the ones on first use after the fit: a fit then holds no second array of
        values beside the confidences (about 4 bytes a pair of peak memory)."""
        train = self.__dict__.get("_binary_train")
        if train is None and self.__dict__.get("_seen") is not None:
            indptr, indices, shape = self._seen
            train = sp.csr_matrix((np.ones(len(indices), np.float32), indices, indptr), shape=shape)
            self.__dict__["_binary_train"] = train
        return train

    @train_.setter
    def train_(self, value: Optional[sp.csr_matrix]) -> None:
        self.__dict__["_binary_train"] = value
        self.__dict__["_seen"] = None if value is None else (value.indptr, value.indices, value.shape)

    def check_fitted(self) -> None:
        if self.__dict__.get("_seen") is None:  # without building train_'s ones
            super().check_fitted()

    def train_epochs(self, conf_csr, epochs, progress, callbacks, validation=None, phase="fit",
                     workers: Optional[Workers] = None, first: int = 0) -> int:
        """Run up to ``epochs`` iterations; with ``validation``, early-stop and keep the best.

        ``conf_csr``: the confidences, a matrix or both its sides already built (:meth:`training_data`).

        The half-iterations' blocks run on ``workers`` when they are other processes
        (:func:`block_solver`), else on a pool of ``n_jobs``
        threads kept for the whole run. BLAS runs on one thread here
        throughout: the Gram matrices then come out the same whatever ``n_jobs`` or the
        workers are (so do the factors, as every row's solve is independent), they cost
        little next to the solves, and BLAS threads competing with the pool's (or with
        other programs on a busy machine) made a 1414 x 64 Gram matrix take 100 ms instead
        of 0.2 ms.
        """
        data = conf_csr if isinstance(conf_csr, TrainingData) else TrainingData(conf_csr)
        with block_solver(data, workers, self.n_jobs) as blocks:
            def step():
                self._iteration(blocks)
                return {}, ""

            return run_epochs(self, step, epochs, progress, callbacks, validation, phase, unit="iteration",
                              n_jobs=effective_n_jobs(self.n_jobs), first=first)

    # -- fold-in and explanations ------------------------------------------------------------
    def fold_in(self, history, *, epochs: Optional[int] = None, user_features=None,
                progress: Optional[Progress] = None, user_ids: Optional[Sequence] = None) -> "WRMF":
        """Add users from a history by one exact solve each, without refitting (in place;
        returns ``self``).

        Each user of ``history`` (anything :meth:`WARP.fold_in` takes; a sparse matrix's
        values are confidences' values, its rows the users ``user_ids``) gets the exact
        least-squares solution against the fixed item factors: one Cholesky solve, nothing
        iterated, so ``epochs`` is ignored; ``user_features`` are refused. New users are
        appended; known users are re-solved from their training items plus the history (an
        item in both keeps the larger confidence). Items the model does not know are skipped
        and counted in ``fold_in_summary_``.
        """
        refuse_features(self, user_features)
        self.check_fitted()
        progress = progress or SILENT
        if epochs is not None:
            progress.log("note: fold-in epochs do not apply to WRMF, whose fold-in is one exact solve")
        source = str(history) if isinstance(history, (str, os.PathLike)) else None
        table = read_history(history, source, model=self, user_ids=user_ids, values=True)
        items = self.item_indices(table["item"].to_numpy(), strict=False)
        known = items >= 0
        if not known.any():
            raise InputError(f"none of the {len(table)} history rows names an item the model knows", path=source,
                             hint="the history's second column must hold item ids of the training data")
        users_col = table["user"].to_numpy()[known]
        values = table["value"].to_numpy()[known] if "value" in table else None
        if values is not None:
            self.confidences(values)  # refuses bad values before the model changes
        ids = np.asarray(pd.unique(users_col), dtype=str)
        new = ids[self.user_indices(ids, strict=False) < 0]
        if len(new):
            self.append_users(new)
        idx = self.user_indices(ids)
        codes = pd.Index(ids).get_indexer(users_col)
        # repeated rows of a pair add their values, as in training; then values become confidences
        hist = sp.csr_matrix((np.ones(len(codes)) if values is None else values, (codes, items[known])),
                             shape=(len(ids), self.n_items), dtype=np.float64)
        hist.sum_duplicates()  # a value of 0 stays: the pair's confidence is the lowest, as in training
        hist.data = self.confidences(None if values is None else hist.data, hist.nnz)
        hist = hist.maximum(self._confidence_csr()[idx]).tocsr()  # a repeated item keeps its larger confidence
        hist.sort_indices()
        self._replace_rows(idx, hist)
        rows = self.user_factors_[idx].copy()
        failed = _als.solve_exact(rows, self.item_factors_, self._fold_in_gram(),
                                  hist.indptr.astype(np.int64), hist.indices, hist.data.astype(np.float32),
                                  0, len(idx))
        if failed:
            raise InputError(f"{failed} fold-in systems were not positive definite",
                             hint="refit with regularization > 0")
        self.user_factors_[idx] = rows
        n_unknown = int((~known).sum())
        self.fold_in_summary_: Dict[str, Any] = {"users": len(ids), "new_users": len(new), "rows": int(known.sum()),
                                                "rows_with_unknown_items": n_unknown, "epochs": 0}
        log_fold_in(progress, self.fold_in_summary_, ", exact solve")
        return self

    def _replace_rows(self, rows: np.ndarray, values: sp.csr_matrix) -> None:
        """Rows ``rows`` of the training matrix and its confidences become ``values``'s rows."""
        keep = np.ones(self.n_users, dtype=bool)
        keep[rows] = False
        old = self._confidence_csr().tocoo()
        mask = keep[old.row]
        new = values.tocoo()
        merged = sp.csr_matrix((np.concatenate([old.data[mask], new.data]),
                                (np.concatenate([old.row[mask], np.asarray(rows)[new.row]]),
                                 np.concatenate([old.col[mask], new.col]))), shape=old.shape)
        merged.sort_indices()
        self.confidence_ = merged.data.astype(np.float32)
        self.train_ = sp.csr_matrix((np.ones(merged.nnz, np.float32), merged.indices, merged.indptr),
                                    shape=merged.shape)
        self._interactions_cache = None

    def explain(self, user: int, items: IndexArg, k: int = 10) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Which of ``user``'s training items drove the scores of ``items`` (Hu et al. 2008, sec. 5).

        With ``W = (Y^T C_u Y + reg * I)^-1`` the exact solve gives
        ``score(u, i) = sum_j s_ij c_uj`` over the user's items ``j``, ``s_ij = y_i^T W y_j``:
        each term is what history item ``j`` contributes to item ``i``.

        Parameters
        ----------
        user : int
            Row index of the user (see :meth:`user_indices`).
        items : sequence of int
            Item indices to explain.
        k : int
            Contributions returned per item, largest first.

        Returns
        -------
        history_items : int64 array (len(items), k)
            Item indices of the user's history, ``-1`` where the history is shorter than ``k``.
        contributions : float32 array (len(items), k)
        scores : float64 array (len(items),)
            The sum of all contributions: the score of the exact solve (the fitted user
            vector, after a few CG steps, scores within a small margin of it).
        """
        self.check_fitted()
        user = int(user)
        if not 0 <= user < self.n_users:
            raise InputError(f"user index {user} is out of range (the model has {self.n_users} users)")
        asked = np.atleast_1d(np.asarray(items, dtype=np.int64))
        if len(asked) and (asked.min() < 0 or asked.max() >= self.n_items):
            raise InputError(f"item indices must be in [0, {self.n_items})")
        train = self.train_
        assert train is not None  # check_fitted
        lo, hi = train.indptr[user], train.indptr[user + 1]
        hist = train.indices[lo:hi]
        c = self.confidence_[lo:hi].astype(np.float64)
        Y = self.item_factors_.astype(np.float64)
        A = Y.T @ Y + self.regularization_in_force() * np.eye(Y.shape[1]) + (Y[hist].T * (c - 1.0)) @ Y[hist]
        S = Y[asked] @ np.linalg.solve(A, Y[hist].T)  # s_ij for every asked item i and history item j
        contrib = S * c
        n = min(int(k), len(hist))
        out_items = np.full((len(asked), int(k)), -1, dtype=np.int64)
        out_contrib = np.zeros((len(asked), int(k)), dtype=np.float32)
        if n:
            order = np.argsort(-contrib, axis=1, kind="stable")[:, :n]
            out_items[:, :n] = hist[order]
            out_contrib[:, :n] = np.take_along_axis(contrib, order, axis=1)
        return out_items, out_contrib, contrib.sum(axis=1)

    def explain_frame(self, user_id, item_ids: Optional[Sequence] = None, k: int = 5, n: int = 10) -> pd.DataFrame:
        """:meth:`explain` for ids, as a table: columns user, item, score, history_item,
        contribution, rank; without ``item_ids`` the user's top-``n`` recommendations are explained."""
        user = int(self.user_indices([user_id])[0])
        if item_ids is None:
            items, _ = self.recommend(np.array([user]), k=int(n))
            items = items[0][items[0] >= 0]
        else:
            items = self.item_indices(list(item_ids))
        hist, contrib, scores = self.explain(user, items, k=k)
        valid = hist >= 0
        rows = np.repeat(np.arange(len(items)), hist.shape[1]).reshape(hist.shape)[valid]
        return pd.DataFrame({
            "user": np.full(int(valid.sum()), str(self.user_ids[user]), dtype=object),
            "item": self.item_ids[items[rows]],
            "score": scores[rows].astype(np.float32),
            "history_item": self.item_ids[hist[valid]],
            "contribution": contrib[valid],
            "rank": np.tile(np.arange(1, hist.shape[1] + 1), len(items)).reshape(hist.shape)[valid],
        })

    # -- persistence -------------------------------------------------------------------------
    def get_arrays(self) -> Dict[str, np.ndarray]:
        return {"user_factors": self.user_factors_, "item_factors": self.item_factors_,
                "confidence": self.confidence_}

    @classmethod
    def array_spec(cls, params: Dict[str, Any], n_users: int, n_items: int) -> Dict[str, Tuple[str, Tuple]]:
        # factors "auto": the count the fit chose (``factors_``), checked against the arrays in set_attrs
        known = {**params, "factors": None} if params.get("factors") == AUTO else params
        return {**cls._factor_spec(known, n_users, n_items), "confidence": ("f4", (None,))}

    def set_arrays(self, arrays: Dict[str, np.ndarray]) -> None:
        uf, itf = self._checked_factors(arrays)
        conf = np.ascontiguousarray(arrays["confidence"], dtype=np.float32)
        check_shape(conf, (len(self._seen[1]),), "confidences (one per training pair)")
        for arr, what in ((uf, "user factors"), (itf, "item factors"), (conf, "confidences")):
            check_finite(arr, what)
        if len(conf) and conf.min() < 1:
            raise ValueError("confidences below 1")
        self.user_factors_, self.item_factors_, self.confidence_ = uf, itf, conf

    def set_attrs(self, attrs: Dict[str, Any]) -> None:
        super().set_attrs(attrs)
        chosen = getattr(self, "factors_", None)
        d = self.item_factors_.shape[1] if getattr(self, "item_factors_", None) is not None else None
        if d is not None and chosen is not None and int(chosen) != d:
            raise InputError(f"model file is invalid: factors_ {chosen} does not match the {d} columns of its factors",
                             hint="train the model again")

    def get_attrs(self) -> Dict[str, Any]:
        # the alpha the fit used (what "auto" became); None before a fit
        return {**super().get_attrs(),
                "alpha_": None if getattr(self, "alpha_", None) is None else float(self.alpha_)}

    # -- one history's vector, without changing the model ------------------------------------
    def history_vector(self, items: np.ndarray) -> np.ndarray:
        """The user vector :meth:`fold_in` solves for a new user with history ``items`` (sorted
        unique indices, no values), the model unchanged: one exact solve against the Gram
        matrix of :meth:`_fold_in_gram`."""
        side = self.item_side()
        assert side is not None  # trained and loaded factors are float32 and C-contiguous
        rows = np.zeros((1, side.items.shape[1]), dtype=np.float32)
        conf = self.confidences(None, len(items))
        failed = _als.solve_exact(rows, side.items, self._fold_in_gram(), np.array([0, len(items)], dtype=np.int64),
                                  items, conf, 0, 1)
        if failed:
            raise InputError("the fold-in system is not positive definite", hint="refit with regularization > 0")
        return rows[0]

    def _fold_in_gram(self) -> np.ndarray:
        """``Y^T Y + reg I``, computed once per change of the item factors or the
        regularisation (on one BLAS thread, as training computes it: the same bits)."""
        side = self.item_side()
        assert side is not None  # trained and loaded factors are float32 and C-contiguous
        key = (side.key, self.regularization_in_force())
        cached = self.__dict__.get("_gram_cache")
        if cached is None or cached[0] != key or cached[1] is not side:
            with one_blas_thread():
                cached = (key, side, self._gram(side.items))
            self.__dict__["_gram_cache"] = cached
        return cached[2]
