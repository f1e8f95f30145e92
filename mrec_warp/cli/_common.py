"""What every subcommand shares: error reporting, progress switches, parsing helpers."""
from __future__ import annotations

import functools
import sys
from typing import Callable, List

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
