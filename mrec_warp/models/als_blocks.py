"""The blocks of an ALS half-iteration, solved on this process's threads or on other workers.

One half-iteration of WRMF solves every row of one side (users, then items) against the
fixed factors ``Y`` of the other side and the Gram matrix ``G = Y^T Y + reg I``. Each row's
solve depends only on its own confidences, ``Y``, ``G`` and (for conjugate gradients) its
current value, so the rows are cut into blocks of about equal work and the blocks go to
whatever workers there are:

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
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np
import scipy.sparse as sp

from ..files import owner_tag, remove_stale_temps
from ..kernels import als as _als
from ..workers import ClusterError, Workers, effective_n_jobs, fitting_threads, one_blas_thread

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
    with one_blas_thread(), RemoteBlocks(data, workers) as blocks:
        yield blocks
