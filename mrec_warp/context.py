"""One execution context: where a stage's work runs, and where its resumable parts go.

A stage (recommend, evaluate, tune, the sub-model fit) takes one
:class:`ExecutionContext` instead of ``backend, n_jobs, scheduler, workdir`` travelling
as four arguments. The context is :class:`~mrec_warp.workers.Workers` (threads, processes
or a Dask cluster, with the BLAS limits that go with them) plus the work folder of the
job engine (:mod:`mrec_warp.jobs`) and whether to keep its parts.

Models take ``n_jobs`` and run their fitting threads through
:func:`~mrec_warp.workers.fitting_threads`, which the context's :attr:`~ExecutionContext.fit_jobs`
sizes. Hogwild fitting shares factor arrays, so it always runs on threads of this
process, whatever the backend; WRMF's fit also takes the context (``workers=``) and
solves its blocks of rows on processes or a cluster (:class:`~mrec_warp.models.wrmf.RemoteBlocks`).

Example
-------
>>> with ExecutionContext("threads", n_jobs=2) as context:          # doctest: +SKIP
...     squares = list(context.map(pow, [(2, 2), (3, 2)]))
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, ContextManager, Optional, Union

from .workers import Workers, effective_n_jobs, limit_blas

PathLike = Union[str, Path]


class ExecutionContext(Workers):
    """Workers, their BLAS limits and the work folder every stage of one run shares.

    Parameters
    ----------
    backend : {"threads", "processes", "dask"}
        Where independent calls run (:class:`~mrec_warp.workers.Workers`).
    n_jobs : int
        Workers (joblib convention: -1 = every core). Also the threads a model's fit uses.
    scheduler : str, optional
        Address of a running Dask scheduler (``backend="dask"`` only).
    workdir : path-like, optional
        Folder of a job's resumable part files (:mod:`mrec_warp.jobs`). ``None``: the
        stage's default (e.g. ``OUTPUT.parts``), or a temporary folder where a stage has
        no output to name it after.
    keep_parts : bool
        Keep the work folder's part files after the job is assembled.
    client : distributed.Client, optional
        An existing Dask client (not closed on exit).

    Use as a context manager (re-entrant): a Dask client lives as long as the outermost
    ``with``, so a stage given an open context uses it as it is.
    """

    def __init__(self, backend: str = "threads", n_jobs: Optional[int] = 1, scheduler: Optional[str] = None,
                 workdir: Optional[PathLike] = None, keep_parts: bool = False, client: Any = None) -> None:
        super().__init__(backend, n_jobs=n_jobs, scheduler=scheduler, client=client)
        self.workdir = None if workdir is None else Path(workdir)
        self.keep_parts = bool(keep_parts)

    @property
    def backend(self) -> str:
        """The backend's name."""
        return self.name

    @property
    def fit_jobs(self) -> int:
        """Threads a model's fit may use (hogwild shares memory: always threads of this process)."""
        return effective_n_jobs(self.n_jobs)

    @property
    def uses_parts(self) -> bool:
        """Whether a stage's output goes through resumable part files: always off-process
        (workers must read and write files), and on threads when a work folder was given."""
        return self.workdir is not None or not self.is_local_memory

    def folder(self, default: PathLike) -> Path:
        """The work folder: the one given, else ``default``."""
        return self.workdir if self.workdir is not None else Path(default)

    def blas_limit(self) -> ContextManager:
        """BLAS limited so that the workers together fill, not exceed, the cores."""
        return limit_blas(self.workers)

    def __repr__(self) -> str:
        where = f", scheduler={self.scheduler!r}" if self.scheduler else ""
        folder = f", workdir={str(self.workdir)!r}" if self.workdir is not None else ""
        return f"ExecutionContext({self.name!r}, n_jobs={self.n_jobs!r}{where}{folder})"


def local_context(n_jobs: Optional[int] = 1) -> ExecutionContext:
    """``n_jobs`` threads of this process, no work folder: what a stage uses when given no context."""
    return ExecutionContext("threads", n_jobs=n_jobs)


def context_for(backend: Union[str, Workers] = "threads", n_jobs: Optional[int] = 1,
                scheduler: Optional[str] = None) -> Workers:
    """Workers to run in: ``backend`` itself when it is already :class:`Workers` (entering it
    again is harmless), else a new context of that backend."""
    if isinstance(backend, Workers):
        return backend
    return ExecutionContext(backend, n_jobs=n_jobs, scheduler=scheduler)
