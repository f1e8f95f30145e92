"""The options every parallel command shares: --backend, --scheduler, --workdir, and the
type of every command's --n-jobs."""
from __future__ import annotations

from typing import Callable, Optional

import click

from ..workers import BACKENDS, FORCE_N_JOBS_ENV, cpu_count, n_jobs_forced


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


def parallel_options(func: Optional[Callable] = None, *, workdir_help: Optional[str] = None):
    """Add ``--backend``, ``--scheduler`` and ``--workdir`` (``--n-jobs`` stays per command)."""

    def decorate(f: Callable) -> Callable:
        # the tool owns the folder (mrec_warp.workdir): say so wherever the option is offered
        owned = " New or empty, or one the same command left; a folder of other files is refused."
        f = click.option("--workdir", type=click.Path(file_okay=False),
                         help=(workdir_help or "Folder for resumable part files (shared by all workers).") + owned)(f)
        f = click.option("--scheduler", metavar="tcp://HOST:PORT",
                         help="Dask scheduler to use with --backend dask [a local cluster of --n-jobs workers].")(f)
        f = click.option("--backend", type=click.Choice(BACKENDS), default="threads", show_default=True,
                         help="Where --n-jobs workers run: threads, processes (loky), or a Dask cluster.")(f)
        return f

    return decorate(func) if func is not None else decorate
