"""WRMF fitted on a Dask cluster from partitioned interactions: no worker holds the whole log.

The users x items confidence matrix is cut by users into P row blocks and by items into P
column blocks (row blocks of its transpose), each of about equal work. Every block is
scattered to one worker and stays there for the whole fit. One ALS half-iteration, for the
users (then the same for the items, the roles swapped):

1. the Gram matrix ``G = Y^T Y + reg I`` of the fixed side: one ``Y_j^T Y_j`` computed where
   each block ``Y_j`` lives, the P of them summed pairwise (a tree of depth ``log2 P``), the
   regularisation added once;
2. the fixed factors ``Y``, assembled once from their blocks on one worker, reach every
   worker that holds a block to solve (Dask copies them once per worker, not per block);
3. each block solves its own rows with WRMF's row solve (:func:`~.wrmf.solve_rows`), from
   its current rows, which stay on its worker.

Only factors and ``factors x factors`` matrices travel, never interactions. Early stopping
is WRMF's: the hold-out split and the users scored are drawn exactly as for a local fit
(:func:`~.early_stopping.holdout_split`, :func:`~.early_stopping.sample_users`), cut into
the same user blocks and kept on the workers; each block scores its own users there
(:class:`~.early_stopping.HoldoutScorer`: top-k, hits counted) and only the hit counts come
back, summed into one precision. The best iteration's factor blocks stay on the workers
until the fit ends; then the factors (only they) are gathered into the model.

**The same model as one machine.** Every row is solved by the same kernel call from the
same inputs as in a local fit; only the Gram matrix is summed in another order (exactly the
local one for P = 1). Both are summed in float64 (:func:`~.wrmf.gram_sum`), so once rounded
to float32 they are the same bits but for a value within float64 round-off of a rounding
boundary: the factors agree with the local fit's bit for bit in practice, and to float32
round-off at worst, for any P and any number of workers. ``exact_gram`` computes each Gram
matrix as the local fit does, in one pass over the whole side (on one worker).

**What it costs.** Per worker (its share of the blocks, block ``i`` of each side on worker
``i mod W``): its pairs of both sides, 8 bytes each plus 8 a row; one assembled copy of the
fixed side's factors, ``max(users, items) x factors x 4`` bytes; its own blocks' factors
three times (current, new, the best kept by early stopping). Per iteration each worker
receives ``(users + items) x factors x 4`` bytes (the fixed side, once per half), plus the
Gram tree's ``P`` small matrices. The formulas and measurements: docs/tutorials/dask.rst,
"Beyond one machine".
"""
from __future__ import annotations

import contextlib
import time
import uuid
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import scipy.sparse as sp

from ..errors import InputError, TrainingDivergedError
from ..progress import SILENT, Progress
from ..seeds import spawn_seed
from ..workers import ClusterError, Workers, one_blas_thread
from .early_stopping import HoldoutScorer, check_factor_memory, internal_holdout, keeps_best
from .factor_model import factor_scores
from .selection import describe, selected_names, value_of
from .wrmf import LOST_HINT, WRMF, Rows, gram_sum, regularised_gram, solve_rows

#: What a fit says when a worker holding blocks of the interactions is lost.
LOST_BLOCKS_HINT = ("rerun the same command (the fit starts over; a fit keeps no parts to resume); if the worker "
                    "was killed for memory, give the workers more memory or use more partitions")


# -- the cut ------------------------------------------------------------------------------------------
def block_bounds(indptr: np.ndarray, partitions: int, factors: int) -> np.ndarray:
    """Row boundaries ``[0, b_1, ..., n]`` of ``partitions`` blocks of about equal work (a row
    costs about ``factors`` + its pairs) and so about equal memory; never an empty block."""
    n = len(indptr) - 1
    cost = np.cumsum(np.diff(indptr).astype(np.int64) + int(factors))
    cuts = np.searchsorted(cost, np.linspace(0, cost[-1], partitions + 1)[1:-1], side="right")
    return np.unique(np.concatenate([[0], np.clip(cuts, 1, max(n - 1, 1)), [n]]))


def row_block(csr: sp.csr_matrix, conf: np.ndarray, start: int, stop: int) -> Rows:
    """Rows ``[start, stop)`` of ``csr`` (with confidences ``conf``) as a :class:`~.wrmf.Rows`
    of their own: offsets from 0, copies (so that only the block's bytes travel)."""
    lo, hi = int(csr.indptr[start]), int(csr.indptr[stop])
    return Rows(np.array(csr.indptr[start:stop + 1], dtype=np.int64) - lo, np.array(csr.indices[lo:hi]),
                np.array(conf[lo:hi], dtype=np.float32))


def check_partitions(partitions: Any, n_users: int, n_items: int) -> int:
    """``partitions`` as an int in ``[1, min(users, items)]``, or one :class:`InputError`."""
    try:
        p = int(partitions)
        whole = p == partitions
    except (TypeError, ValueError):
        p, whole = 0, False
    if not whole or p < 1:
        raise InputError(f"`partitions` must be a whole number >= 1, got {partitions!r}",
                         hint="e.g. `partitions=4` (about one per worker, or more when a worker's memory is short)")
    if p > min(n_users, n_items):
        raise InputError(f"`partitions={p}` is more than the {min(n_users, n_items):,} "
                         f"{'users' if n_users <= n_items else 'items'} to cut into blocks",
                         hint=f"give at most `partitions={min(n_users, n_items)}`")
    return p


# -- what runs on the workers ------------------------------------------------------------------------
def _gram_part(Y: np.ndarray) -> np.ndarray:
    """``Y_j^T Y_j`` of one block, in float64 (:func:`~.wrmf.gram_sum`, one BLAS thread)."""
    with one_blas_thread():
        return gram_sum(Y)


def _gram_sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Two partial Gram matrices added (float64: the tree's partial sums)."""
    return a + b


def _regularised(G: np.ndarray, regularization: float) -> np.ndarray:
    """The summed Gram matrix as the kernel takes it (:func:`~.wrmf.regularised_gram`)."""
    return regularised_gram(G, regularization)


def _whole_gram(Y: np.ndarray, regularization: float) -> np.ndarray:
    """``Y^T Y + reg I`` of a whole side in one product: :meth:`~.wrmf.WRMF._gram`'s bits."""
    return _regularised(_gram_part(Y), regularization)


def _assemble(*blocks: np.ndarray) -> np.ndarray:
    """The factor blocks of one side, in order, as one C-contiguous float32 matrix."""
    return np.ascontiguousarray(np.concatenate(blocks), dtype=np.float32)


def _zeros(n: int, d: int) -> np.ndarray:
    return np.zeros((n, d), dtype=np.float32)


def _solve(rows: Rows, X: np.ndarray, Y: np.ndarray, G: np.ndarray, exact: bool,
           cg_steps: int) -> Tuple[np.ndarray, int, bool]:
    """One block's rows solved from their current values ``X``: (rows, systems that were not
    positive definite, whether every value is finite)."""
    x = np.array(X, dtype=np.float32, order="C", copy=True)  # an argument may be a read-only buffer
    with one_blas_thread():
        failed = solve_rows(x, Y, G, rows, 0, rows.n_rows, exact, cg_steps)
    return x, failed, bool(np.isfinite(x.sum(dtype=np.float64)))


def _solved_rows(solved: Tuple[np.ndarray, int, bool]) -> np.ndarray:
    return solved[0]


def _solved_checks(solved: Tuple[np.ndarray, int, bool]) -> Tuple[int, bool]:
    return solved[1], solved[2]


def _scorer(rows: Rows, n_items: int, held_out: sp.csr_matrix, users: np.ndarray, k: int) -> HoldoutScorer:
    """One user block's hold-out scorer: its fitting pairs excluded, its held-out pairs the hits."""
    exclude = sp.csr_matrix((np.ones(len(rows.indices), np.float32), rows.indices, rows.indptr),
                            shape=(rows.n_rows, n_items))
    return HoldoutScorer(exclude, held_out, users, k)


def _hits(scorer: HoldoutScorer, X: np.ndarray, Y: np.ndarray) -> int:
    """Hits in the top-k of one block's scored users (a precision back to a count)."""
    n = len(scorer.users)
    if n == 0:
        return 0
    precision = scorer(lambda rows, out=None: factor_scores(X[rows], Y, None, out))
    return int(round(precision * scorer.k * n))


# -- the blocks on the cluster -------------------------------------------------------------------------
class ClusterBlocks:
    """One training matrix cut into blocks on a Dask cluster, and the factor blocks of a fit on it.

    Use as a context manager: the blocks are scattered on entry and forgotten by the cluster
    on exit (a scattered value goes once no future refers to it).

    Parameters
    ----------
    client : distributed.Client
    conf_csr : csr_matrix
        Users x items confidences (float32).
    partitions : int
        Blocks per side.
    factors : int
    held_out : csr_matrix, optional
        Users x items held-out pairs for early stopping, with ``scored`` the users scored and
        ``k`` the cut-off: cut into the same user blocks, kept beside them.
    exact_gram : bool
        Compute each Gram matrix in one product from the assembled side (the local fit's
        bits, on one worker) instead of by the tree of per-block products.
    """

    def __init__(self, client: Any, conf_csr: sp.csr_matrix, partitions: int, factors: int,
                 held_out: Optional[sp.csr_matrix] = None, scored: Optional[np.ndarray] = None, k: int = 10,
                 exact_gram: bool = False) -> None:
        self.client, self.csr, self.d = client, conf_csr, int(factors)
        self.exact_gram = bool(exact_gram)
        self.partitions = int(partitions)
        self.held_out, self.scored, self.k = held_out, scored, int(k)
        self.tag = uuid.uuid4().hex[:8]  # unique per fit, readable in the dashboard
        self.bounds: Dict[str, np.ndarray] = {}
        self.rows: Dict[str, List[Any]] = {}
        self.home: Dict[str, List[str]] = {}
        self.scorers: List[Any] = []
        self.n_scored = 0

    def _key(self, what: str) -> str:
        return f"wrmf-part-{what}-{self.tag}-{uuid.uuid4().hex[:6]}"

    def __enter__(self) -> "ClusterBlocks":
        addresses = sorted(self.client.scheduler_info()["workers"])
        if not addresses:
            raise ClusterError("the Dask cluster has no worker", hint="start workers with 'dask worker ADDRESS'")
        conf = np.ascontiguousarray(self.csr.data, dtype=np.float32)
        items = self.csr.T.tocsr()  # the column blocks are row blocks of the transpose
        item_conf = np.ascontiguousarray(items.data, dtype=np.float32)
        for side, matrix, values in (("users", self.csr, conf), ("items", items, item_conf)):
            bounds = block_bounds(matrix.indptr, self.partitions, self.d)
            self.bounds[side] = bounds
            # side by side round the workers: user block i and item block i share a worker
            self.home[side] = [addresses[i % len(addresses)] for i in range(len(bounds) - 1)]
            self.rows[side] = [self._scatter(f"{side}-rows-{i:03d}", row_block(matrix, values, a, b), home)
                               for i, (a, b, home) in enumerate(zip(bounds[:-1], bounds[1:], self.home[side]))]
        del items, item_conf
        if self.held_out is not None and self.scored is not None:
            self._stage_holdout()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.rows, self.scorers = {}, []

    def _scatter(self, what: str, value: Any, home: str) -> Any:
        key = self._key(what)
        return self.client.scatter({key: value}, workers=[home], hash=False)[key]

    def _submit(self, what: str, func, *args, home: Optional[str] = None) -> Any:
        where = {} if home is None else {"workers": [home], "allow_other_workers": True}
        return self.client.submit(func, *args, key=self._key(what), pure=False, **where)

    def _stage_holdout(self) -> None:
        """Each user block's held-out pairs and scored users, kept (and scored) beside its rows."""
        assert self.held_out is not None and self.scored is not None
        bounds = self.bounds["users"]
        n_items = self.csr.shape[1]
        self.n_scored = len(self.scored)
        for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
            mine = self.scored[(self.scored >= a) & (self.scored < b)] - a
            held = sp.csr_matrix(self.held_out[a:b], dtype=np.float32)
            home = self.home["users"][i]
            staged = self._scatter(f"holdout-{i:03d}", (held, mine.astype(np.int64)), home)
            self.scorers.append(self._submit(f"scorer-{i:03d}", _scorer_of, self.rows["users"][i], n_items, staged,
                                             self.k, home=home))
        self.held_out = None  # the client's copy is not needed any more

    # -- a fit's factors ---------------------------------------------------------------------------
    def initial(self, item_factors: np.ndarray) -> Dict[str, List[Any]]:
        """The factor blocks a fit starts from: zero user rows made on the workers, the item
        rows of ``item_factors`` (drawn by the client, as a local fit draws them) scattered."""
        ub, ib = self.bounds["users"], self.bounds["items"]
        users = [self._submit(f"users-init-{i:03d}", _zeros, int(b - a), self.d, home=home)
                 for i, (a, b, home) in enumerate(zip(ub[:-1], ub[1:], self.home["users"]))]
        items = [self._scatter(f"items-init-{i:03d}", np.ascontiguousarray(item_factors[a:b]), home)
                 for i, (a, b, home) in enumerate(zip(ib[:-1], ib[1:], self.home["items"]))]
        return {"users": users, "items": items}

    def gram(self, blocks: Sequence[Any], side: str, regularization: float, assembled: Any) -> Any:
        """``sum_j Y_j^T Y_j + reg I`` by a tree of pairwise sums, each part where its block
        lives; with ``exact_gram``, one product of the ``assembled`` side."""
        if self.exact_gram:
            return self._submit(f"gram-{side}", _whole_gram, assembled, float(regularization))
        parts = [self._submit(f"gram-{side}-{i:03d}", _gram_part, block, home=home)
                 for i, (block, home) in enumerate(zip(blocks, self.home[side]))]
        while len(parts) > 1:
            parts = [self._submit(f"gram-sum-{side}", _gram_sum, parts[i], parts[i + 1]) if i + 1 < len(parts)
                     else parts[i] for i in range(0, len(parts), 2)]
        return self._submit(f"gram-{side}", _regularised, parts[0], float(regularization))

    def assemble(self, blocks: Sequence[Any], side: str) -> Any:
        """One side's factors as one matrix on one worker (copied from there to the others)."""
        return self._submit(f"{side}-factors", _assemble, *blocks)

    def solve(self, side: str, current: Sequence[Any], fixed: Any, gram: Any, exact: bool,
              cg_steps: int) -> Tuple[List[Any], int, bool]:
        """Every block of ``side`` solved where it lives: (new factor blocks, failed systems,
        whether all are finite)."""
        solved = [self._submit(f"{side}-solve-{i:03d}", _solve, rows, x, fixed, gram, exact, int(cg_steps), home=home)
                  for i, (rows, x, home) in enumerate(zip(self.rows[side], current, self.home[side]))]
        blocks = [self._submit(f"{side}-factors-{i:03d}", _solved_rows, s, home=home)
                  for i, (s, home) in enumerate(zip(solved, self.home[side]))]
        checks = self.client.gather([self._submit(f"{side}-checks-{i:03d}", _solved_checks, s, home=home)
                                     for i, (s, home) in enumerate(zip(solved, self.home[side]))])
        return blocks, sum(int(f) for f, _ in checks), all(ok for _, ok in checks)

    def precision(self, users: Sequence[Any], items: Any) -> float:
        """Precision@k of the hold-out: hits counted in each user block, summed here."""
        if not self.n_scored:
            return float("nan")
        hits = self.client.gather([self._submit(f"holdout-hits-{i:03d}", _hits, scorer, x, items, home=home)
                                   for i, (scorer, x, home) in enumerate(zip(self.scorers, users, self.home["users"]))])
        return sum(hits) / (self.k * self.n_scored)

    def gather(self, blocks: Sequence[Any]) -> np.ndarray:
        """One side's factors, here (the only arrays a fit brings back)."""
        return np.ascontiguousarray(np.concatenate(self.client.gather(list(blocks))), dtype=np.float32)


def _scorer_of(rows: Rows, n_items: int, staged: Tuple[sp.csr_matrix, np.ndarray], k: int) -> HoldoutScorer:
    held, users = staged
    return _scorer(rows, n_items, held, users, k)


@contextlib.contextmanager
def cluster_faults(scheduler: Optional[str]) -> Iterator[None]:
    """A fit's cluster failures as one :class:`~mrec_warp.workers.ClusterError` each: a lost
    worker takes the blocks it held (scattered data, which Dask cannot recompute), a lost
    scheduler takes everything."""
    from distributed import KilledWorker
    from distributed.client import FutureCancelledError

    try:
        yield
    except ClusterError:
        raise
    except KilledWorker as exc:
        raise ClusterError(f"Dask workers died running one step of the fit ({exc.task}): the fit stopped",
                           hint=LOST_BLOCKS_HINT) from None
    except FutureCancelledError:
        raise ClusterError("lost a Dask worker in the middle of the fit, and with it the blocks of interactions it "
                           "held", hint=LOST_BLOCKS_HINT) from None
    except (OSError, TimeoutError) as exc:
        where = f" at {scheduler}" if scheduler else ""
        raise ClusterError(f"lost the Dask scheduler{where} in the middle of the fit ({exc})", hint=LOST_HINT) from None


# -- the fit ---------------------------------------------------------------------------------------------
def fit_partitioned(model: WRMF, X, workers: Workers, partitions: int, *, validation=None,
                    progress: Optional[Progress] = None, use_values: bool = True, user_ids: Optional[Sequence] = None,
                    item_ids: Optional[Sequence] = None, exact_gram: bool = False) -> WRMF:
    """Fit ``model`` (a :class:`~.wrmf.WRMF`, in place; returned) on ``workers``' Dask cluster,
    the interactions cut into ``partitions`` blocks of users and of items (module docstring).

    The same model as ``model.fit(X, ...)`` with the same parameters, to float32 round-off:
    early stopping, its hold-out, the refit and the logs are WRMF's. ``alpha="auto"`` is
    resolved by WRMF's rule from the data's sizes, and the other settings left at ``"auto"``
    take WRMF's fixed defaults (with a note): choosing them on a hold-out across a cluster is
    not done, and the model's ``select`` is set to False (what its file records, so that
    ``info`` and a local fit with its parameters say how it was fitted).

    Parameters
    ----------
    model : WRMF
    X : Interactions or sparse matrix
        As :meth:`WRMF.fit` takes it.
    workers : Workers
        A ``"dask"`` :class:`~mrec_warp.workers.Workers` (e.g. the stage's
        :class:`~mrec_warp.context.ExecutionContext`); entered here if it is not yet.
    partitions : int
        Blocks per side (``1 <= partitions <= min(users, items)``); the model does not
        depend on it, a worker's memory does (about ``1 / partitions`` of the interactions
        per block it holds).
    validation, progress, use_values, user_ids, item_ids
        As :meth:`WRMF.fit` takes them.
    exact_gram : bool
        Compute each half-iteration's Gram matrix in one product of the assembled fixed side,
        on one worker, instead of by the tree of per-block products: bit for bit the local
        fit's factors, for a serial ``max(users, items) x factors^2`` product per half-iteration.

    Raises
    ------
    InputError
        A bad ``partitions``, a backend other than Dask.
    ClusterError
        The cluster is unreachable, or a worker or the scheduler was lost mid-fit.
    """
    if getattr(workers, "name", None) != "dask":
        raise InputError("a fit on partitions runs on a Dask cluster", hint="add `backend=dask`")
    model.check_params()
    progress = progress or (Progress(verbose=True) if model.verbose else SILENT)
    conf_csr = model.prepare_fit(X, progress, use_values, user_ids, item_ids)
    left = selected_names(model)
    if left:
        progress.note(f"wrmf on partitions: {', '.join(left)} left at auto take the fixed defaults "
                      f"({describe({n: value_of(model, n) for n in left})}), not a choice on the hold-out; "
                      "give them values (e.g. what a local fit of a sample or tune chose) to silence this")
        # the parameters a model file records say how it was fitted: `select` on would claim a
        # choice that was not made (and a local fit with them would make it: another model)
        model.select = False
    n_users, n_items = conf_csr.shape
    p = check_partitions(partitions, n_users, n_items)
    check_factor_memory(model, n_users, n_items)
    with workers, cluster_faults(workers.scheduler):
        progress.log(f"wrmf: {p} partition{'s' if p != 1 else ''} of users and of items on {workers.describe()}")
        _fit_or_select(model, conf_csr, validation, workers.client, p, progress, exact_gram)
    return model


def _fit_or_select(model: WRMF, csr: sp.csr_matrix, validation, client: Any, partitions: int,
                   progress: Progress, exact_gram: bool) -> None:
    """:func:`~.early_stopping.fit_or_select` of WRMF, with the random draws in the same order."""
    rng = np.random.default_rng(model.random_state)
    model.history_ = []
    model.refit_start_ = 0
    n_users, n_items = csr.shape
    if model.epochs is not None:
        model.init_state(n_users, n_items, rng)
        with ClusterBlocks(client, csr, partitions, value_of(model, "factors"), exact_gram=exact_gram) as blocks:
            _train(model, blocks, int(model.epochs), progress, "fit")
        model.best_epoch_ = int(model.epochs)
        return
    holdout = internal_holdout(model, csr, rng, validation)  # the local fit's split and scored users
    fit_part, held_out, scored = holdout.fit, holdout.held_out, holdout.users
    del holdout
    init_seed = spawn_seed(rng)
    model.init_state(n_users, n_items, np.random.default_rng(init_seed))
    with ClusterBlocks(client, fit_part, partitions, value_of(model, "factors"), held_out, scored, int(model.eval_k),
                       exact_gram) as blocks:
        del held_out
        best = _train(model, blocks, int(model.max_epochs), progress, "fit", early_stopping=True)
    if keeps_best(model, best, fit_part.nnz, csr.nnz, validation, progress, "iteration"):
        return
    del fit_part
    progress.log(f"refitting on all training data for {best} iterations")
    model.init_state(n_users, n_items, np.random.default_rng(init_seed))
    with ClusterBlocks(client, csr, partitions, value_of(model, "factors"), exact_gram=exact_gram) as blocks:
        _train(model, blocks, best, progress, "refit")


def _train(model: WRMF, blocks: ClusterBlocks, epochs: int, progress: Progress, phase: str,
           early_stopping: bool = False) -> int:
    """Up to ``epochs`` iterations from the model's factors; with ``early_stopping``, the
    patience rule of :func:`~.early_stopping.run_epochs` and the best iteration's factors
    kept (on the workers). The model's factors are the result's. Returns the best iteration
    (or ``epochs``)."""
    factors = blocks.initial(model.item_factors_)
    exact = model.solver == "cholesky"
    reg, cg_steps = float(value_of(model, "regularization")), int(model.cg_steps)
    best_score, best_epoch, best_factors = -np.inf, 0, dict(factors)
    rise_score, rise_epoch = 0.0, 0
    fixed_items = blocks.assemble(factors["items"], "items")
    for epoch in progress.iterate(range(1, epochs + 1), total=epochs, desc=phase, unit="iteration", lines=False):
        t0 = time.perf_counter()
        for side, other in (("users", "items"), ("items", "users")):
            fixed = fixed_items if side == "users" else blocks.assemble(factors["users"], "users")
            gram = blocks.gram(factors[other], other, reg, fixed)
            factors[side], failed, finite = blocks.solve(side, factors[side], fixed, gram, exact, cg_steps)
            if failed:
                raise TrainingDivergedError(f"{failed} least-squares systems were not positive definite",
                                            hint="use regularization > 0")
            if not finite:
                raise TrainingDivergedError(f"training diverged at iteration {epoch}: factors are not finite",
                                            hint="raise `regularization` or lower `alpha`")
        fixed_items = blocks.assemble(factors["items"], "items")
        model.epochs_done_ = epoch
        logs: Dict[str, Any] = {"phase": phase, "epoch": epoch, "seconds": time.perf_counter() - t0}
        line = f"{phase} iteration {epoch:3d}  {logs['seconds']:6.2f}s"
        evaluated = early_stopping and epoch % int(model.eval_every) == 0
        if evaluated:
            t1 = time.perf_counter()
            score = blocks.precision(factors["users"], fixed_items)
            logs[f"val_precision@{model.eval_k}"] = score
            logs["eval_seconds"] = time.perf_counter() - t1
            improved = score > best_score
            line += f"  val P@{model.eval_k} {score:.4f}" + ("  *" if improved else "")
            if improved:
                best_score, best_epoch, best_factors = score, epoch, dict(factors)
            if rise_epoch == 0 or score > rise_score:
                rise_score, rise_epoch = score, epoch
        progress.log(line)
        model.history_.append(logs)
        if evaluated and epoch - rise_epoch >= int(model.patience):
            break
    kept = best_factors if best_epoch else factors  # no evaluation yet: the last iteration's
    model.user_factors_ = blocks.gather(kept["users"])
    model.item_factors_ = blocks.gather(kept["items"])
    if early_stopping and best_epoch:
        model.best_score_ = best_score
        progress.log(f"best iteration {best_epoch}: val P@{model.eval_k} {best_score:.4f}")
        return best_epoch
    return epochs


def fits_on_partitions(family: Any) -> bool:
    """Whether a family (model or class) can be fitted on partitions: WRMF's ALS (a family whose
    fit is not a sequence of independent row solves, WARP's hogwild SGD, cannot)."""
    return isinstance(family, WRMF) or (isinstance(family, type) and issubclass(family, WRMF))
