"""What every subcommand shares: error reporting, progress switches, parsing helpers."""
from __future__ import annotations

import functools
import os
import sys
from typing import Callable, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import click

from ..errors import InputError
from ..progress import Progress


def friendly_errors(func: Callable) -> Callable:
    """Turn :class:`InputError` (and a few obvious OS errors) into one line and exit 2."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except InputError as exc:
            click.echo(f"Error: {exc}", err=True)
            sys.exit(2)
        except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
            click.echo(f"Error: {exc.filename}: {exc.strerror}", err=True)
            sys.exit(2)
        except MemoryError:
            click.echo("Error: out of memory (try a smaller --block-size or fewer --n-jobs)", err=True)
            sys.exit(1)

    return wrapper


def cap_k(k: int, n_items: int, progress: Progress, what: str = "items") -> int:
    """``k`` no larger than the catalogue: a longer list holds nothing more, but its buffers
    (users x k per block) would grow with k, up to an out-of-memory error."""
    if k > n_items:
        progress.log(f"note: -k {k:,} is more than the {n_items:,} {what} there are; using -k {max(1, n_items):,}")
        return max(1, n_items)
    return k


def quiet_option(func: Callable) -> Callable:
    """``--quiet`` / ``--verbose``: default is to talk only on a terminal."""
    func = click.option("--verbose", "-v", is_flag=True, help="Log progress even when not on a terminal.")(func)
    func = click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")(func)
    return func


def make_progress(quiet: bool, verbose: bool) -> Progress:
    if quiet:
        return Progress(verbose=False)
    return Progress(verbose=True if verbose else None)


def parse_int_list(text: str, name: str) -> List[int]:
    """Parse ``"5,10,20"``; every value must be a positive integer."""
    try:
        values = [int(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a comma-separated list of integers, e.g. 5,10,20", param_hint=name)
    if not values or any(v <= 0 for v in values):
        raise click.BadParameter(f"{text!r}: every value must be a positive integer, e.g. 5,10,20", param_hint=name)
    return values


def _same_file(a: str, b: str) -> bool:
    """Whether two paths name one file: same resolved path (symlinks, ``..``, relative
    spellings), or, when both exist, the same inode (hard links, bind mounts)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist yet: it cannot be the other
        return False


def check_outputs(outputs: Mapping[str, Union[None, str, Sequence[str]]],
                  inputs: Iterable[Optional[str]]) -> None:
    """Refuse, in one line and before any work, an output that would replace an input or
    another output.

    Every command that writes files calls this with what it will write and what it reads,
    so that ``train x.tsv -o x.tsv`` or ``recommend model.npz -o ./model.npz`` never
    replaces its own input.

    Parameters
    ----------
    outputs : mapping
        Option name (for the message) -> the path it writes, or the list of files it writes
        (a folder option such as ``prepare -o`` names each file it would create there).
    inputs : iterable of paths
        Files the command reads; ``None`` entries are skipped.
    """
    ins = [str(p) for p in inputs if p]
    written: List[Tuple[str, str]] = []  # (path, option) of the outputs checked so far
    for option, paths in outputs.items():
        if not paths:
            continue
        for path in [paths] if isinstance(paths, (str, os.PathLike)) else paths:
            path = str(path)
            clash = next((i for i in ins if _same_file(path, i)), None)
            if clash is not None:
                raise InputError(f"{option} would overwrite an input file ({clash})", path=path,
                                 hint="write the output somewhere else")
            other = next((o for p, o in written if _same_file(path, p)), None)
            if other is not None:
                raise InputError(f"{option} and {other} both write this file", path=path,
                                 hint="give each output its own path")
            written.append((path, option))
