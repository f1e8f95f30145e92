"""Shared fixtures: MovieLens 100k from ../shared (never copied here), small planted data, and
the in-process CLI runner the command tests share."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import numpy as np
import pytest
import scipy.sparse as sp
from click import Command
from click.testing import CliRunner, Result

from mrec_warp.cli import main
from mrec_warp.cli._flags import error_line as _error_line, flags_of
from mrec_warp.errors import InputError

ML100K = Path(__file__).resolve().parents[2] / "shared" / "data" / "ml-100k"


@pytest.fixture(scope="session")
def ml100k_dir() -> Path:
    if not (ML100K / "u.data").exists():
        pytest.skip("MovieLens 100k not found beside the project (../shared/data/ml-100k)")
    return ML100K


def planted_low_rank(n_users=600, n_items=300, rank=4, per_user=30, seed=0):
    """Users and items in ``rank`` clusters; users pick mostly from their cluster.

    Popularity is flat inside clusters, so only a model that learns the clusters does well.
    Returns (train, test) CSR matrices.
    """
    rng = np.random.default_rng(seed)
    user_group = rng.integers(0, rank, n_users)
    item_group = rng.integers(0, rank, n_items)
    rows, cols = [], []
    for u in range(n_users):
        own = np.flatnonzero(item_group == user_group[u])
        other = np.flatnonzero(item_group != user_group[u])
        n_own = int(per_user * 0.9)
        items = np.concatenate([rng.choice(own, n_own, replace=False),
                                rng.choice(other, per_user - n_own, replace=False)])
        rows.extend([u] * len(items))
        cols.extend(items.tolist())
    rows, cols = np.array(rows), np.array(cols)
    test_mask = rng.random(len(rows)) < 0.2
    shape = (n_users, n_items)
    train = sp.csr_matrix((np.ones((~test_mask).sum(), dtype=np.float32), (rows[~test_mask], cols[~test_mask])), shape=shape)
    test = sp.csr_matrix((np.ones(test_mask.sum(), dtype=np.float32), (rows[test_mask], cols[test_mask])), shape=shape)
    return train, test


@pytest.fixture(scope="session")
def planted():
    return planted_low_rank()


def step_settings(**changes):
    """The kernels' ``StepSettings`` dict: plain WARP, lr 0.05, max_sampled 10, no L2, no norm
    limit, adagrad with biases; ``changes`` override fields."""
    cfg = dict(loss=0, max_sampled=10, learning_rate=0.05, user_reg=0.0, item_reg=0.0, adagrad=True,
               use_bias=True, user_max_norm=0.0, item_max_norm=0.0, kos_n=10, kos_k=5)
    cfg.update(changes)
    return cfg


# -- the command line, in process ------------------------------------------------------------
def run(*args: Any, command: Optional[Command] = None, catch_exceptions: bool = True) -> Result:
    """Invoke ``mrec-warp`` (or ``command``, a click command of its own) with ``args``, each
    turned to text (paths welcome). Standard output and error come back apart
    (``result.stdout``, ``result.stderr``); the exit code is ``result.exit_code``."""
    return CliRunner().invoke(command or main, [str(a) for a in args], catch_exceptions=catch_exceptions)


def run_strict(*args: Any, command: Optional[Command] = None) -> Result:
    """:func:`run`, except that an exception the command lets through fails the test with its
    traceback instead of being kept in ``result.exception`` (a command must never raise)."""
    return run(*args, command=command, catch_exceptions=False)


def run_ok(*args: Any, command: Optional[Command] = None) -> Result:
    """:func:`run_strict` of a command that must succeed (exit code 0, else the output is shown)."""
    result = run_strict(*args, command=command)
    assert result.exit_code == 0, result.output
    return result


def error_line(exc: InputError, command: Optional[str] = None) -> str:
    """The line ``mrec-warp`` prints for ``exc`` (without ``Error:``), as ``command`` (a
    subcommand's name) spells parameters, or by default as the flags of all of them do."""
    flags = {**flags_of(main), **(flags_of(main.commands[command]) if command else {})}
    return _error_line(exc, flags)
