"""Backends, BLAS limits, resumable part files and sub-model fits on one machine."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from mrec_warp.context import ExecutionContext
from mrec_warp.data.interactions import Interactions
from mrec_warp.stages.evaluate import evaluate as evaluate_parallel
from mrec_warp.stages.recommend import recommend_in_parts
from mrec_warp.stages.submodels import fit_submodels, split_factors
from mrec_warp.workdir import WorkDir

from .faults import Fault
from mrec_warp.errors import InputError
from mrec_warp.models import WARP, load
from mrec_warp import workers as parallel
from mrec_warp.workers import Workers as Backend, blas_threads_per_worker, check_backend, cpu_count, effective_n_jobs
from mrec_warp.stages.recommend import write_recommendations
from mrec_warp.topk import iter_top_k

from .conftest import error_line

ROOT = Path(__file__).resolve().parents[1]


def _square(x):
    return x * x


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    from tests.conftest import planted_low_rank

    train, _ = planted_low_rank(n_users=300, n_items=120, per_user=20, seed=3)
    data = Interactions(train, [f"u{i}" for i in range(300)], [f"i{j}" for j in range(120)])
    model = WARP(factors=8, epochs=2, random_state=0).fit(data)
    path = tmp_path_factory.mktemp("model") / "model.npz"
    model.save(path)
    return load(path), path


# -- the knobs ----------------------------------------------------------------------------------
def test_effective_n_jobs_follows_joblib_conventions(monkeypatch):
    assert effective_n_jobs(None) == effective_n_jobs(0) == effective_n_jobs(1) == 1
    assert effective_n_jobs(-1) == cpu_count()
    monkeypatch.setenv("MREC_WARP_FORCE_N_JOBS", "1")  # (else capped at the cores: test_param_limits)
    assert effective_n_jobs(8, n_tasks=3) == 3
    assert effective_n_jobs(-100) == 1


@pytest.mark.parametrize("cores", [None, 8])
def test_blas_threads_never_oversubscribe(monkeypatch, cores):
    if cores is not None:  # this machine has 2 cores: also check a bigger one
        monkeypatch.setattr(parallel, "cpu_count", lambda: cores)
    for workers in (1, 2, 3, 5, 64):
        assert blas_threads_per_worker(workers) * min(workers, parallel.cpu_count()) <= parallel.cpu_count()
        assert blas_threads_per_worker(workers) >= 1
    assert blas_threads_per_worker(1) == parallel.cpu_count()  # one worker gets every core


def test_bad_backend_options_are_one_line_errors():
    with pytest.raises(InputError, match="unknown backend"):
        check_backend("mpi")
    with pytest.raises(InputError, match="needs `backend=dask`") as info:
        check_backend("threads", "tcp://127.0.0.1:8786")
    assert error_line(info.value) == ("--scheduler tcp://127.0.0.1:8786 needs --backend dask "
                                      "(add --backend dask)")


@pytest.mark.parametrize("name", ["threads", "processes"])
def test_backend_map_keeps_order_and_unordered_has_everything(name):
    with Backend(name, n_jobs=2) as be:
        assert list(be.map(_square, [(i,) for i in range(7)])) == [i * i for i in range(7)]
        assert sorted(be.map(_square, [(i,) for i in range(7)], ordered=False)) == [i * i for i in range(7)]


def test_split_factors():
    assert split_factors(64, 3) == [22, 21, 21]
    with pytest.raises(InputError):
        split_factors(2, 3)


# -- top-k on processes ---------------------------------------------------------------------------
def test_iter_top_k_on_processes_matches_threads(fitted):
    from mrec_warp.worker_cache import ModelScorer

    model, path = fitted
    users = np.array([5, 3, 299, 0, 17, 200])
    exclude = model.train_
    ref = np.vstack([b[1] for b in iter_top_k(model.score_users, model.n_items, users, 5, exclude=exclude)])
    with ExecutionContext("processes", n_jobs=2) as context:
        got = np.vstack([b[1] for b in iter_top_k(ModelScorer(path), model.n_items, users, 5, exclude=exclude,
                                                  block_size=2, workers=context)])
    np.testing.assert_array_equal(ref, got)


# -- part files ------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["threads", "processes"])
@pytest.mark.parametrize("fmt", ["tsv", "csv"])
def test_parts_output_is_identical_to_streaming(fitted, tmp_path, backend, fmt):
    model, path = fitted
    ref = tmp_path / f"ref.{fmt}"
    write_recommendations(model, ref, k=6)
    out = tmp_path / f"out.{fmt}"
    n = write_recommendations(model, out, k=6, context=ExecutionContext(backend, n_jobs=2), part_size=70,
                              model_file=path if backend == "processes" else None)
    assert n == 300 * 6
    assert out.read_bytes() == ref.read_bytes()
    assert not (tmp_path / f"out.{fmt}.parts").exists()  # cleaned up after assembly


def test_parts_with_user_subset_and_own_exclusion(fitted, tmp_path):
    model, _ = fitted
    ids = [f"u{i}" for i in range(299, 0, -7)]
    seen = sp.random(300, 120, density=0.2, format="csr", random_state=0)
    ref, out = tmp_path / "ref.tsv", tmp_path / "out.tsv"
    write_recommendations(model, ref, k=4, user_ids=ids, exclude=seen)
    for backend in ("threads", "processes"):
        write_recommendations(model, out, k=4, user_ids=ids, exclude=seen, context=ExecutionContext(backend, n_jobs=2),
                              part_size=9)
        assert out.read_bytes() == ref.read_bytes()


def test_interrupted_job_resumes_and_skips_finished_parts(fitted, tmp_path, monkeypatch):
    model, _ = fitted
    ref, out, wd = tmp_path / "ref.tsv", tmp_path / "out.tsv", tmp_path / "work"
    write_recommendations(model, ref, k=5)
    with monkeypatch.context() as patch:
        Fault.at("raise:3", tmp_path / "fault").install(patch)
        with pytest.raises(RuntimeError, match="injected failure in part 3"):
            recommend_in_parts(model, out, k=5, context=ExecutionContext(workdir=wd), part_size=40)  # 8 parts, serial
    assert not out.exists()  # nothing half-written
    assert (wd / "part-00000.tsv").exists() and not (wd / "part-00003.tsv").exists()
    info = recommend_in_parts(model, out, k=5, context=ExecutionContext(workdir=wd), part_size=40)
    assert info["parts"] == 8 and info["parts_skipped"] == 3 and info["parts_run"] == 5
    assert out.read_bytes() == ref.read_bytes()
    assert not wd.exists()


def test_workdir_of_another_job_is_refused(fitted, tmp_path):
    model, _ = fitted
    first = WorkDir(tmp_path / "w", {"kind": "recommend", "k": 5})  # noqa: F841 - kept: a dropped, empty one goes
    with pytest.raises(InputError, match="different job"):
        recommend_in_parts(model, tmp_path / "o.tsv", k=7, context=ExecutionContext(workdir=tmp_path / "w"))


# -- sub-model fits ------------------------------------------------------------------------------
def test_sub_models_are_reproducible_and_concatenated(planted, tmp_path):
    train, test = planted
    data = Interactions(train, np.arange(train.shape[0]).astype(str), np.arange(train.shape[1]).astype(str))
    params = {"factors": 16, "epochs": 8, "learning_rate": 0.05}
    a = fit_submodels(data, params, ExecutionContext("threads", n_jobs=2), n_models=2, random_state=1)
    b = fit_submodels(data, params, ExecutionContext("threads", n_jobs=1, workdir=tmp_path / "w"), n_models=2,
                      random_state=1)
    assert a.user_factors_.shape == (train.shape[0], 16) and a.factors == 16
    np.testing.assert_array_equal(a.user_factors_, b.user_factors_)  # single-threaded sub-models: bitwise
    np.testing.assert_array_equal(a.item_bias_, b.item_bias_)
    # the concatenated model's score is the sum of the sub-models' scores
    single = WARP(factors=8, epochs=8, learning_rate=0.05, random_state=a.sub_models_[0]["seed"]).fit(data)
    np.testing.assert_array_equal(single.user_factors_, a.user_factors_[:, :8])
    from mrec_warp.models.early_stopping import precision_at_k

    assert precision_at_k(a.score_users, a.n_items, train, test, 10) > 0.08  # near the planted ceiling (~0.1)


# -- evaluate ------------------------------------------------------------------------------------
def test_evaluate_parallel_matches_serial(fitted, tmp_path):
    from mrec_warp.stages.evaluate import evaluate_here as evaluate

    model, _ = fitted
    df = model.interactions().to_dataframe()
    rng = np.random.default_rng(0)
    held = np.zeros(len(df), bool)
    held[rng.choice(len(df), 300, replace=False)] = True
    test, df = df[held][["user", "item"]], df[~held]
    recs = []
    for k in (5, 10):
        write_recommendations(model, tmp_path / f"r{k}.tsv", k=k, exclude=None)
        recs.append(str(tmp_path / f"r{k}.tsv"))
    serial = evaluate(df, test, recs, ks=(5,))
    par = evaluate_parallel(df, test, recs, ks=(5,), context=ExecutionContext("processes", n_jobs=2))
    assert par.to_dict() == serial.to_dict()
    with pytest.raises(ValueError, match="1 names for 2"):
        evaluate_parallel(df, test, recs, names=["only-one"], ks=(5,), context=ExecutionContext("processes", n_jobs=2))


# -- CLI -----------------------------------------------------------------------------------------
def _cli(*args, check=True):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "mrec_warp", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(proc.stderr)
    return proc


def test_cli_backends_end_to_end(tmp_path):
    from tests.conftest import planted_low_rank

    train, _ = planted_low_rank(n_users=200, n_items=80, per_user=15, seed=5)
    coo = train.tocoo()
    tsv = tmp_path / "train.tsv"
    tsv.write_text("".join(f"u{u}\ti{i}\n" for u, i in zip(coo.row, coo.col)))
    # processes cannot run hogwild: a note, and a model on threads
    proc = _cli("train", tsv, "-o", tmp_path / "m.npz", "--epochs", "2", "--backend", "processes", "--n-jobs", "2", "-v")
    assert "hogwild fitting runs on threads" in proc.stderr
    proc = _cli("train", tsv, "-o", tmp_path / "s.npz", "--epochs", "2", "--factors", "8", "--sub-models", "2")
    assert "2 sub-models of 4+4 factors" in proc.stdout
    assert load(tmp_path / "s.npz").user_factors_.shape == (200, 8)
    _cli("recommend", tmp_path / "m.npz", "-o", tmp_path / "a.tsv")
    _cli("recommend", tmp_path / "m.npz", "-o", tmp_path / "b.tsv", "--backend", "processes", "--n-jobs", "2",
         "--part-size", "30")
    assert (tmp_path / "a.tsv").read_bytes() == (tmp_path / "b.tsv").read_bytes()
    bad = _cli("recommend", tmp_path / "m.npz", "-o", tmp_path / "c.tsv", "--scheduler", "tcp://127.0.0.1:1",
               check=False)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "needs --backend dask" in bad.stderr
