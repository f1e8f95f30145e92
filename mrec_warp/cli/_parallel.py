"""The options every parallel command shares: --backend, --scheduler, --workdir."""
from __future__ import annotations

from typing import Callable, Optional

import click

from ..parallel import BACKENDS


def parallel_options(func: Optional[Callable] = None, *, workdir_help: Optional[str] = None):
    """Add ``--backend``, ``--scheduler`` and ``--workdir`` (``--n-jobs`` stays per command)."""

    def decorate(f: Callable) -> Callable:
        f = click.option("--workdir", type=click.Path(file_okay=False),
                         help=workdir_help or "Folder for resumable part files (shared by all workers).")(f)
        f = click.option("--scheduler", metavar="tcp://HOST:PORT",
                         help="Dask scheduler to use with --backend dask [a local cluster of --n-jobs workers].")(f)
        f = click.option("--backend", type=click.Choice(BACKENDS), default="threads", show_default=True,
                         help="Where --n-jobs workers run: threads, processes (loky), or a Dask cluster.")(f)
        return f

    return decorate(func) if func is not None else decorate
