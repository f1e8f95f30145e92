"""The options every parallel command shares -- --n-jobs, --backend, --scheduler and
--workdir -- given to the command as one execution context."""
from __future__ import annotations

from typing import Callable, Optional

import click

from ..context import ExecutionContext
from ..workers import BACKENDS, FORCE_N_JOBS_ENV, cpu_count, n_jobs_forced
from ._common import gathered
from ._output_paths import OutputPath


class NJobs(click.ParamType):
    """``--n-jobs``: a positive number of workers, or joblib's negative counting from the
    cores (``-1`` every core, ``-2`` all but one, down to ``-cores``), resolved here to the
    real number so that logs and workers see it. 0 and values below ``-cores`` are errors.
    More than the usable cores is capped at them, with a note (unless ``--quiet``), unless
    ``MREC_WARP_FORCE_N_JOBS=1``.
    """

    name = "N"

    def convert(self, value, param, ctx) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            n = value
        else:
            try:
                n = int(str(value).strip())
            except ValueError:
                self.fail(f"{value!r} is not a whole number (a positive count, or -1 for every core)", param, ctx)
        cores = cpu_count()
        if n > cores and not n_jobs_forced():
            if ctx is None or not ctx.params.get("quiet"):  # (--quiet is eager: already parsed)
                click.echo(f"note: --n-jobs {n} is more than the {cores} usable cores: using {cores} "
                           f"(set {FORCE_N_JOBS_ENV}=1 to use {n})", err=True)
            return cores
        if n >= 1:
            return n
        if n == 0:
            self.fail("0 workers would do nothing: give a positive count, or -1 for every core", param, ctx)
        if n < -cores:
            self.fail(f"{n} asks for all but {-n - 1} of the {cores} cores: give a positive count, "
                      f"or -1..-{cores} (-1: every core)", param, ctx)
        return cores + 1 + n


N_JOBS = NJobs()


def parallel_options(*, n_jobs_default: int, n_jobs_help: str, workdir_help: Optional[str] = None,
                     keep_parts: Optional[str] = None) -> Callable[[Callable], Callable]:
    """Where a command's work runs: ``--n-jobs`` (its default and help are the command's),
    ``--backend``, ``--scheduler`` and ``--workdir``, given to the command as one
    :class:`~mrec_warp.context.ExecutionContext`, ``context``. ``keep_parts`` names the
    command's own flag that keeps the work folder's parts, when it has one."""
    # the tool owns the folder (mrec_warp.workdir): say so wherever the option is offered
    owned = " New or empty, or one the same command left; a folder of other files is refused."
    options = (
        click.option("--n-jobs", type=N_JOBS, default=n_jobs_default, show_default=True, help=n_jobs_help),
        click.option("--backend", type=click.Choice(BACKENDS), default="threads", show_default=True,
                     help="Where --n-jobs workers run: threads, processes (loky), or a Dask cluster."),
        click.option("--scheduler", metavar="tcp://HOST:PORT",
                     help="Dask scheduler to use with --backend dask [a local cluster of --n-jobs workers]."),
        click.option("--workdir", type=OutputPath(folder=True),
                     help=(workdir_help or "Folder for resumable part files (shared by all workers).") + owned),
    )
    names = ("n_jobs", "backend", "scheduler", "workdir") + ((keep_parts,) if keep_parts else ())

    def context_of(n_jobs: int, backend: str, scheduler: Optional[str], workdir: Optional[str],
                   **keep: bool) -> ExecutionContext:
        return ExecutionContext(backend, n_jobs=n_jobs, scheduler=scheduler, workdir=workdir,
                                keep_parts=any(keep.values()))

    def decorate(func: Callable) -> Callable:
        func = gathered("context", names, context_of)(func)
        for option in reversed(options):
            func = option(func)
        return func

    return decorate
