"""Where parallel work runs: joblib threads, joblib processes (loky) or a Dask cluster.

Every parallel step of mrec-warp (scoring blocks of users, tuning trials, sub-model fits,
evaluation units, a model's fitting blocks) is a list of independent calls handed to
:class:`Workers`. The same code then runs on

* ``"threads"``: joblib's threading backend. Right for the Cython kernels and BLAS, which
  release the GIL; shares memory, so hogwild fitting works (and only works) here.
* ``"processes"``: joblib's loky backend. Workers are separate processes; numpy arrays over
  1 MB in the arguments reach them as read-only memory maps instead of copies.
* ``"dask"``: joblib's Dask backend on a ``dask.distributed`` cluster -- an existing one
  (``scheduler="tcp://host:port"``) or, without an address, a local one of ``n_jobs``
  worker processes on 127.0.0.1. Nothing is scheduled by hand: Dask places the calls,
  and re-runs a call whose worker died on another worker.

BLAS threads are limited so that workers x BLAS threads never exceed the cores: each of J
thread workers gets ``cores // J`` BLAS threads (threadpoolctl), loky does the same for
its processes, and Dask's nanny starts workers with one BLAS thread each.

The fitting threads of the factor models (hogwild epochs, ALS half-steps) are short and
many, so they go through :func:`fitting_threads` (or :func:`thread_map` for one call),
plain threads without joblib's set-up cost, counted and limited as every other worker here.

This module is the ground floor of parallelism: models use it directly; the stages use
:class:`~mrec_warp.context.ExecutionContext`, a :class:`Workers` that also carries the
work folder of resumable jobs.

Example
-------
>>> with Workers("threads", n_jobs=2) as workers:          # doctest: +SKIP
...     squares = list(workers.map(pow, [(2, 2), (3, 2)]))
"""
from __future__ import annotations

import contextlib
import logging
import os
import threading
import uuid
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence, Tuple

from .dask_cluster import ClusterError, check_workers, dask_client, require_dask
from .errors import InputError

BACKENDS = ("threads", "processes", "dask")

#: joblib's name for each of our backends.
_JOBLIB_NAMES = {"threads": "threading", "processes": "loky", "dask": "dask"}

logger = logging.getLogger("mrec_warp.workers")


def cpu_count() -> int:
    """Cores this process may use (respects CPU affinity and cgroup quotas via joblib)."""
    try:
        from joblib import cpu_count as joblib_cpu_count

        return max(1, int(joblib_cpu_count(only_physical_cores=False)))
    except Exception:  # pragma: no cover - joblib is a dependency
        return max(1, os.cpu_count() or 1)


#: Set to 1 to let ``n_jobs`` ask for more workers than this machine's usable cores.
FORCE_N_JOBS_ENV = "MREC_WARP_FORCE_N_JOBS"


class NJobsCappedWarning(UserWarning):
    """``n_jobs`` asked for more local workers than there are usable cores; fewer are used."""


_CAPS_SAID: set = set()


def n_jobs_forced() -> bool:
    """Whether :data:`FORCE_N_JOBS_ENV` lets ``n_jobs`` exceed the usable cores."""
    return os.environ.get(FORCE_N_JOBS_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


def cap_n_jobs(n: int) -> int:
    """``n`` local workers, at most the usable cores (:func:`cpu_count`) unless forced.

    More threads or processes than cores only compete for them (BLAS threads spin waiting
    for each other; each process costs memory and semaphores). The first cap of each value
    is said once as an :class:`NJobsCappedWarning` (the CLI caps ``--n-jobs`` itself, with a
    note).
    """
    if n <= 1:  # one worker never needs more than a core (nor the count: joblib's import, ~0.2 s)
        return n
    cores = cpu_count()
    if n <= cores or n_jobs_forced():
        return n
    if (n, cores) not in _CAPS_SAID:
        _CAPS_SAID.add((n, cores))
        warnings.warn(f"n_jobs={n} is more than the {cores} usable cores: using {cores} "
                      f"(set {FORCE_N_JOBS_ENV}=1 to use {n})", NJobsCappedWarning, stacklevel=3)
    return cores


def effective_n_jobs(n_jobs: Optional[int], n_tasks: Optional[int] = None) -> int:
    """Workers that ``n_jobs`` asks for, scikit-learn style, capped by the usable cores
    (:func:`cap_n_jobs`) and by the number of tasks.

    ``None``/0/1 mean one; ``-1`` means every core, ``-2`` all but one, and so on.
    """
    if not n_jobs:
        n = 1
    elif n_jobs < 0:
        n = max(1, cpu_count() + 1 + int(n_jobs))
    else:
        n = cap_n_jobs(int(n_jobs))
    if n_tasks is not None:
        n = max(1, min(n, int(n_tasks)))
    return n


def blas_threads_per_worker(n_workers: int) -> int:
    """BLAS threads each of ``n_workers`` may use so that together they fill, not exceed, the cores."""
    return max(1, cpu_count() // max(1, int(n_workers)))


def limit_blas(n_workers: int):
    """Context manager: BLAS limited to :func:`blas_threads_per_worker` threads in this process.

    Does nothing for a single worker (BLAS may then use every core itself).
    """
    if n_workers <= 1:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        return contextlib.nullcontext()
    return threadpool_limits(limits=blas_threads_per_worker(n_workers), user_api="blas")


_ONE_THREAD_LOCK = threading.Lock()
_ONE_THREAD_USERS = 0
_ONE_THREAD_LIMITER: Any = None
_CONTROLLER: Any = None


def blas_controller() -> Any:
    """threadpoolctl's view of the loaded BLAS libraries, found once: looking them up costs
    ~1.4 ms, setting their thread count ~5 us, and one-user scoring sets it on every call."""
    global _CONTROLLER
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Context manager: BLAS runs on one thread in this process while any caller is inside.

    OpenBLAS's result for a product depends on how many threads compute it, so scoring that
    must give the same bits on every backend runs on one BLAS thread everywhere (parallelism
    then comes from the workers). The limit is process-wide, so it is reference-counted:
    concurrent callers (joblib threads, a Dask worker's threads) share it, and the first to
    enter sets it and the last to leave restores what was there before.
    """
    global _ONE_THREAD_USERS, _ONE_THREAD_LIMITER
    with _ONE_THREAD_LOCK:
        if _ONE_THREAD_USERS == 0:
            _ONE_THREAD_LIMITER = blas_controller().limit(limits=1, user_api="blas")
        _ONE_THREAD_USERS += 1
    try:
        yield
    finally:
        with _ONE_THREAD_LOCK:
            _ONE_THREAD_USERS -= 1
            if _ONE_THREAD_USERS == 0:
                _ONE_THREAD_LIMITER.restore_original_limits()
                _ONE_THREAD_LIMITER = None


def check_backend(backend: str, scheduler: Optional[str] = None) -> str:
    """Validate a backend name (and that ``scheduler`` is only given with ``dask``)."""
    if backend not in BACKENDS:
        raise InputError(f"unknown backend {backend!r}", hint=f"use one of {', '.join(BACKENDS)}")
    if scheduler and backend != "dask":
        raise InputError(f"`scheduler` {scheduler} needs `backend=dask`", hint="add `backend=dask`")
    if backend == "dask":
        require_dask()
    return backend


class Workers:
    """Runs lists of independent calls on threads, processes or a Dask cluster.

    Parameters
    ----------
    name : {"threads", "processes", "dask"}
    n_jobs : int
        Workers (joblib convention: -1 = every core). With ``"dask"`` and no ``scheduler``
        it is the number of local worker processes; with a ``scheduler`` every worker of the
        cluster is used.
    scheduler : str, optional
        Address of a running Dask scheduler, e.g. ``tcp://10.0.0.5:8786``.
    client : distributed.Client, optional
        An existing client to use instead (it is not closed on exit).

    Use as a context manager: a Dask client/cluster lives exactly as long as the ``with``.
    """

    def __init__(self, name: str = "threads", n_jobs: Optional[int] = 1, scheduler: Optional[str] = None,
                 client: Any = None) -> None:
        self.name = check_backend(name, scheduler)
        self.n_jobs = n_jobs
        self.scheduler = scheduler
        self.client = client
        self._stack: Optional[contextlib.ExitStack] = None

    # -- lifetime -------------------------------------------------------------------------
    def __enter__(self) -> "Workers":
        self._depth = getattr(self, "_depth", 0) + 1
        if self._depth > 1:  # already open (a stage given an open context): use it as it is
            return self
        self._stack = contextlib.ExitStack()
        if self.name == "dask":
            try:
                if self.client is None:
                    local = effective_n_jobs(self.n_jobs) if self.n_jobs else cpu_count()
                    self.client = self._stack.enter_context(dask_client(self.scheduler, local))
                check_workers(self.client, self.scheduler)
            except BaseException:
                self._depth = 1
                self.__exit__(None, None, None)
                raise
        return self

    def __exit__(self, *exc) -> None:
        if self.name == "processes" and isinstance(exc[1] if len(exc) > 1 else None, KeyboardInterrupt):
            stop_process_workers()  # Ctrl-C or a signal (mrec_warp.signals): their work is not wanted
        self._depth = max(0, getattr(self, "_depth", 1) - 1)
        if self._depth:
            return
        stack, self._stack = self._stack, None
        if stack is not None:
            if self.name == "dask":
                self.client = None
            if len(exc) == 3 and exc[0] is not None:
                stack.__exit__(*exc)  # the exception goes in: a stopped local Dask cluster is hushed first
            else:
                stack.close()

    @property
    def is_local_memory(self) -> bool:
        """Whether workers share this process's memory (only threads do)."""
        return self.name == "threads"

    @property
    def workers(self) -> int:
        """How many calls can run at once."""
        if self.name == "dask":
            if self.client is None:
                return effective_n_jobs(self.n_jobs) if not self.scheduler else 1
            return max(1, sum(self.client.ncores().values()))
        return effective_n_jobs(self.n_jobs)

    # -- running --------------------------------------------------------------------------
    def map(self, func: Callable, args: Iterable[Tuple], ordered: bool = True,
            names: Optional[Sequence[str]] = None) -> Iterator[Any]:
        """Yield ``func(*a)`` for each tuple ``a`` of ``args``, as they finish.

        Results come in the order of ``args`` when ``ordered`` (default), else as soon as
        each call finishes. The first exception raised by a call stops the run and is
        re-raised here. ``names`` (one per call, e.g. ``fit-submodel-003``) name the Dask
        tasks in the dashboard; threads and processes have nowhere to show them.
        """
        from joblib import Parallel, delayed, parallel_config

        args = list(args)
        if not args:
            return
        if self.name == "dask":
            yield from self._map_dask(func, args, ordered, names)
            return
        n = effective_n_jobs(self.n_jobs, len(args))
        if n == 1 and self.name != "dask":
            # one worker: run here, no pool to start (and exact same code path as n_jobs=1)
            for a in args:
                yield func(*a)
            return
        return_as = "generator" if ordered else "generator_unordered"
        config: dict = {"backend": _JOBLIB_NAMES[self.name]}
        with parallel_config(**config), (limit_blas(n) if self.name == "threads" else contextlib.nullcontext()):
            # batch_size=1: our calls are coarse (a block, a part, a trial), and a batch is the
            # unit Dask retries after a worker dies, so small batches lose little work.
            parallel = Parallel(n_jobs=n, return_as=return_as, batch_size=1, pre_dispatch="2*n_jobs")
            yield from parallel(delayed(func)(*a) for a in args)

    def _map_dask(self, func: Callable, args: Sequence[Tuple], ordered: bool,
                  names: Optional[Sequence[str]] = None) -> Iterator[Any]:
        """:meth:`map` on the cluster: one Dask task per call, all submitted at once.

        Straight to the client rather than through joblib, whose Dask backend runs every call
        in this process when the cluster has a single worker thread. Dask re-runs the calls of
        a worker that died on another worker. A call's own exception is re-raised as it is;
        losing the scheduler (or the connection to it) becomes one :class:`ClusterError`.
        """
        from distributed import as_completed

        if self.client is None:
            raise RuntimeError("use dask Workers inside a 'with' block")
        futures = []
        try:
            # a key is the task's name in the dashboard, which groups tasks by the words
            # before the first number ("fit-submodel"); the random tail keeps it unique
            keys = [None] * len(args) if names is None else [f"{n}-{uuid.uuid4().hex}" for n in names]
            futures = [self.client.submit(func, *a, pure=False, key=key) for a, key in zip(args, keys)]
            for future in (futures if ordered else as_completed(futures)):
                try:
                    yield future.result()
                except Exception:
                    if future.status == "error":  # the call itself raised: its own error
                        raise
                    raise self._lost() from None
        except (OSError, TimeoutError) as exc:  # submitting while the connection is gone
            if any(f.status == "error" for f in futures):
                raise
            raise self._lost() from exc
        finally:
            pending = [f for f in futures if not f.done()]
            if pending and self.client.status == "running":
                with contextlib.suppress(Exception):
                    self.client.cancel(pending)

    def _lost(self) -> ClusterError:
        where = f" at {self.scheduler}" if self.scheduler else ""
        return ClusterError(
            f"lost the Dask scheduler{where} in the middle of the job (its workers stop with it)",
            hint="restart the scheduler and the workers, then rerun the same command: the parts already "
                 "written to `workdir` are kept and the job resumes from them")

    def describe(self) -> str:
        """One line for logs: backend and workers."""
        where = f" at {self.scheduler}" if self.scheduler else (" (local cluster)" if self.name == "dask" else "")
        link = getattr(self.client, "dashboard_link", None) if self.name == "dask" else None
        return f"{self.name}{where}, {self.workers} worker{'s' if self.workers != 1 else ''}" \
            + (f", dashboard {link}" if link else "")


def stop_process_workers() -> None:
    """Kill the worker processes of the ``processes`` backend, and wait until they are gone.

    joblib keeps its loky workers for the next call (and for minutes after the last), and
    they hold the caller's standard output and error open: a run that stops on a signal or
    Ctrl-C must not leave them working for nobody, nor a shell's pipe waiting on them. The
    work they were doing is dropped; a unit's part file is written whole or not at all.
    Does nothing when no loky worker was started.
    """
    try:
        from joblib.externals.loky import reusable_executor
    except ImportError:  # pragma: no cover - joblib is a dependency
        return
    executor = getattr(reusable_executor, "_executor", None)
    if executor is None:
        return
    with contextlib.suppress(Exception):  # a pool already broken is as good as stopped
        executor.shutdown(wait=True, kill_workers=True)


#: A warnings filter (``PYTHONWARNINGS`` syntax) for the loky resource tracker's own lines.
TRACKER_WARNINGS = "ignore:resource_tracker:UserWarning"


def quiet_resource_tracker() -> None:
    """Keep loky's resource tracker from printing on the command's standard error.

    The tracker is a process of its own that outlives the command by a moment: when the
    command stops on a signal before joblib released its semaphores and memory-mapped
    folders, the tracker removes them -- and says so in a ``UserWarning`` ("There appear
    to be 8 leaked semlock objects"), after the command's last line. It inherits the
    environment when it starts, so the filter goes into ``PYTHONWARNINGS`` (added to the
    user's own filters) before the first worker process; only the CLI calls this.
    """
    current = os.environ.get("PYTHONWARNINGS", "")
    if TRACKER_WARNINGS not in current.split(","):
        os.environ["PYTHONWARNINGS"] = ",".join(filter(None, [current, TRACKER_WARNINGS]))


def workers_for(workers: "Optional[Workers]" = None, n_jobs: Optional[int] = 1):
    """A context manager giving :class:`Workers`: ``workers`` itself when given (already
    entered, left open), else ``n_jobs`` local threads made (and closed) here."""
    if workers is not None:
        return contextlib.nullcontext(workers)
    return Workers("threads", n_jobs=n_jobs)


@contextlib.contextmanager
def fitting_threads(n_jobs: Optional[int], single_blas: bool = False) -> Iterator[Callable[..., List[Any]]]:
    """A pool of plain threads for a model's fitting steps, kept for as long as the ``with``.

    Yields ``run(func, args)``, which returns ``[func(*a) for a in args]`` computed on up to
    ``n_jobs`` threads, in order. For kernels that release the GIL and are called many times
    per fit (one hogwild shard per thread, ALS blocks), where joblib's set-up (~15 ms a
    call, as much as a whole epoch on MovieLens 100k) would dominate; a model that calls
    it every half-iteration keeps one pool for the whole fit. One worker runs in the
    calling thread, with no pool at all.

    ``single_blas``: BLAS runs on one thread inside the ``with`` (:func:`one_blas_thread`),
    so a product computed between the steps (an ALS Gram matrix) comes out the same
    whatever ``n_jobs`` is, and BLAS threads do not compete with the pool's.
    """
    n = effective_n_jobs(n_jobs)
    with one_blas_thread() if single_blas else contextlib.nullcontext():
        if n <= 1:
            yield lambda func, args: [func(*a) for a in args]
            return
        with ThreadPoolExecutor(max_workers=n) as pool:
            yield lambda func, args: list(pool.map(lambda a: func(*a), args))


def thread_map(func: Callable[..., Any], args: Sequence[Tuple], n_jobs: Optional[int]) -> List[Any]:
    """``[func(*a) for a in args]`` on up to ``n_jobs`` plain threads (a pool of
    :func:`fitting_threads` for this one call), results in order."""
    with fitting_threads(effective_n_jobs(n_jobs, len(args))) as run:
        return run(func, args)


def chunk_ranges(n: int, size: int) -> Sequence[Tuple[int, int]]:
    """``[(0, size), (size, 2 size), ...]`` covering ``range(n)``."""
    size = max(1, int(size))
    return [(s, min(s + size, n)) for s in range(0, n, size)]
