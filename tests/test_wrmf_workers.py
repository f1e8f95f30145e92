"""WRMF's half-iterations on worker processes: the same factors, bit for bit, as on threads.

The Dask cluster's version of these tests is in ``test_dask.py`` (it shares that file's cluster).
"""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest
import scipy.sparse as sp

from mrec_warp.context import ExecutionContext
from mrec_warp.errors import TrainingDivergedError
from mrec_warp.files import owner_tag
from mrec_warp.models import WRMF, load
from mrec_warp.models import wrmf

from .conftest import planted_low_rank
from .test_wrmf import _run, _values_matrix


@pytest.fixture(scope="module")
def plays():
    return _values_matrix(planted_low_rank(n_users=300, n_items=120, per_user=15, seed=5))


def _same_factors(a: WRMF, b: WRMF) -> None:
    assert np.array_equal(a.user_factors_, b.user_factors_)
    assert np.array_equal(a.item_factors_, b.item_factors_)
    assert a.epochs_done_ == b.epochs_done_ and a.best_epoch_ == b.best_epoch_


@pytest.mark.parametrize("params", [dict(epochs=3), dict(epochs=2, solver="cholesky"),
                                    dict(max_epochs=6, patience=2)])  # early stopping, then the refit
def test_processes_fit_is_bit_identical_to_threads(plays, params):
    params = dict(factors=8, alpha=0.5, regularization=3.0, random_state=4, **params)
    threads = WRMF(**params).fit(plays)
    for n_jobs in (2, 3):  # the blocks are cut per worker: another count, other blocks
        with ExecutionContext("processes", n_jobs=n_jobs) as workers:
            on_processes = WRMF(n_jobs=n_jobs, **params).fit(plays, workers=workers)
        _same_factors(on_processes, threads)
        assert [h["epoch"] for h in on_processes.history_] == [h["epoch"] for h in threads.history_]


def test_the_blocks_are_solved_by_the_workers_not_here(plays, monkeypatch):
    def not_here(*args, **kwargs):
        raise AssertionError("a block was solved in the driver")

    monkeypatch.setattr(wrmf, "solve_rows", not_here)  # the driver's copy only
    model = WRMF(factors=8, epochs=2, random_state=0, n_jobs=2)
    model.fit(plays, workers=ExecutionContext("processes", n_jobs=2))  # entered by fit
    with pytest.raises(AssertionError, match="solved in the driver"):
        WRMF(factors=8, epochs=2, random_state=0, n_jobs=2).fit(plays, workers=ExecutionContext("threads", n_jobs=2))
    leftovers = [n for n in os.listdir(tempfile.gettempdir()) if n.startswith(wrmf.STAGE_PREFIX + owner_tag())]
    assert leftovers == []  # the staged confidence matrix is removed after the fit


def test_singular_systems_on_workers_fail_as_on_threads():
    # 3 items and 8 factors, no regularisation: every user's system is singular
    m = sp.csr_matrix(np.random.default_rng(1).integers(0, 3, size=(20, 3)).astype(np.float32))
    params = dict(factors=8, regularization=0.0, solver="cholesky", epochs=1, random_state=0)
    with pytest.raises(TrainingDivergedError, match="not positive definite"):
        WRMF(**params).fit(m)
    with pytest.raises(TrainingDivergedError, match="not positive definite"):
        WRMF(n_jobs=2, **params).fit(m, workers=ExecutionContext("processes", n_jobs=2))


def test_cli_train_on_processes_writes_the_threads_model(tmp_path, plays):
    coo = plays.tocoo()
    lines = [f"u{r}\ti{c}\t{int(v)}" for r, c, v in zip(coo.row, coo.col, coo.data)]
    (tmp_path / "plays.tsv").write_text("\n".join(lines) + "\n")
    args = ["train", "plays.tsv", "--model", "wrmf", "--factors", "8", "--n-jobs", "2", "--seed", "3"]
    local = _run(*args, "-o", "threads.npz", cwd=tmp_path)
    remote = _run(*args, "-o", "processes.npz", "--backend", "processes", "-v", cwd=tmp_path)
    assert local.returncode == 0 and remote.returncode == 0, remote.stderr
    assert "blocks of rows solved on processes, 2 workers" in remote.stderr
    assert "refit iteration" in remote.stderr  # early stopping, as in-process
    assert (tmp_path / "processes.npz").read_bytes() == (tmp_path / "threads.npz").read_bytes()
    assert 1 <= load(tmp_path / "processes.npz").best_epoch_ < 50  # chosen by early stopping, not the cap


def test_one_process_solves_in_this_process_without_staging(plays, monkeypatch):
    """A single loky process would run the blocks here anyway: the fit must not stage the
    confidence matrix on disk for it (nor copy factors every half-iteration)."""
    def refuse(*args, **kwargs):
        raise AssertionError("staged for remote blocks")

    monkeypatch.setattr(wrmf.RemoteBlocks, "__enter__", refuse)
    params = dict(factors=8, alpha=0.5, regularization=3.0, random_state=4, epochs=2)
    with ExecutionContext("processes", n_jobs=1) as context:
        one = WRMF(**params).fit(plays, workers=context)
    _same_factors(one, WRMF(**params).fit(plays))
