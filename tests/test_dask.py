"""The Dask backend on a local cluster of 2 worker processes on 127.0.0.1.

Skipped when dask.distributed is not installed (it is the optional ``dask`` extra).
"""
from __future__ import annotations

import os

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from mrec_warp.data.interactions import Interactions  # noqa: E402
from mrec_warp.distributed import FAULT_ENV, fit_submodels, recommend_in_parts  # noqa: E402
from mrec_warp.models import WARP, load  # noqa: E402
from mrec_warp.parallel import Backend  # noqa: E402
from mrec_warp.recommend import write_recommendations  # noqa: E402


@pytest.fixture(scope="module")
def client():
    import logging

    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                       dashboard_address=None, silence_logs=logging.CRITICAL)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    from tests.conftest import planted_low_rank

    train, _ = planted_low_rank(n_users=400, n_items=150, per_user=20, seed=7)
    data = Interactions(train, [f"u{i}" for i in range(400)], [f"i{j}" for j in range(150)])
    model = WARP(factors=8, epochs=2, random_state=0).fit(data)
    path = tmp_path_factory.mktemp("model") / "model.npz"
    model.save(path)
    return load(path), path, data


def _set_worker_env(client, value):
    # a worker killed by an earlier test may still be restarting: it must get the setting too
    client.wait_for_workers(2, timeout=60)

    def setenv(name, v):
        if v is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = v

    client.run(setenv, FAULT_ENV, value)


def _rows_per_user(path):
    users = [line.split("\t", 1)[0] for line in path.read_text().splitlines()]
    return {u: users.count(u) for u in set(users)}


def test_recommend_on_dask_is_identical_to_local(client, fitted, tmp_path):
    model, path, _ = fitted
    ref, out = tmp_path / "ref.tsv", tmp_path / "out.tsv"
    write_recommendations(model, ref, k=5)
    with Backend("dask", client=client) as be:
        # the model file is read by the workers; the in-memory model is copied to the workdir
        n = write_recommendations(model, out, k=5, backend=be, part_size=50, model_file=path)
        assert n == 400 * 5 and out.read_bytes() == ref.read_bytes()
        write_recommendations(model, out, k=5, backend=be, part_size=50, workdir=tmp_path / "w2")
        assert out.read_bytes() == ref.read_bytes()


def test_worker_killed_mid_job_loses_and_duplicates_no_user(client, fitted, tmp_path):
    model, path, _ = fitted
    ref, out, wd = tmp_path / "ref.tsv", tmp_path / "out.tsv", tmp_path / "work"
    write_recommendations(model, ref, k=5)
    _set_worker_env(client, "kill:2")  # the worker that starts part 2 dies (SIGKILL), once
    try:
        with Backend("dask", client=client) as be:
            info = recommend_in_parts(model, out, k=5, backend=be, part_size=40, workdir=wd, model_file=path,
                                      keep_parts=True)
    finally:
        _set_worker_env(client, None)
    assert (wd / ".fault-kill-2").exists()  # the kill really happened
    assert info["parts"] == 10 and info["parts_run"] == 10
    counts = _rows_per_user(out)
    assert len(counts) == 400 and set(counts.values()) == {5}
    assert out.read_bytes() == ref.read_bytes()
    client.wait_for_workers(2, timeout=60)  # the nanny restarted the killed worker


def test_interrupted_dask_job_resumes(client, fitted, tmp_path):
    model, path, _ = fitted
    ref, out, wd = tmp_path / "ref.tsv", tmp_path / "out.tsv", tmp_path / "work"
    write_recommendations(model, ref, k=3)
    _set_worker_env(client, "raise:6")
    try:
        with Backend("dask", client=client) as be, pytest.raises(RuntimeError, match="injected failure"):
            recommend_in_parts(model, out, k=3, backend=be, part_size=40, workdir=wd, model_file=path)
    finally:
        _set_worker_env(client, None)
    assert not out.exists()
    finished = len(list(wd.glob("part-*.tsv")))
    assert 1 <= finished < 10
    with Backend("dask", client=client) as be:
        info = recommend_in_parts(model, out, k=3, backend=be, part_size=40, workdir=wd, model_file=path)
    assert info["parts_skipped"] == finished and info["parts_run"] == 10 - finished
    assert out.read_bytes() == ref.read_bytes()


def test_distributed_fit_and_tune_match_local(client, fitted):
    from mrec_warp.tune import grid_points, tune

    _, _, data = fitted
    params = {"factors": 8, "epochs": 3}
    with Backend("dask", client=client) as be:
        remote = fit_submodels(data, params, n_models=2, random_state=3, backend=be)
        points = grid_points({"factors": [4, 8], "learning_rate": [0.05]})
        remote_tune = tune(data, points, base={"max_epochs": 4, "patience": 2}, backend=be)
    local = fit_submodels(data, params, n_models=2, random_state=3, backend="threads", n_jobs=2)
    np.testing.assert_array_equal(remote.user_factors_, local.user_factors_)
    np.testing.assert_array_equal(remote.item_factors_, local.item_factors_)
    local_tune = tune(data, points, base={"max_epochs": 4, "patience": 2})
    cols = ["trial", "factors", "learning_rate", "precision@10", "epochs"]
    assert remote_tune.table[cols].equals(local_tune.table[cols])


def test_every_worker_is_asked_whether_it_sees_the_files(client, tmp_path):
    from mrec_warp.distributed import JOB_FILE, check_workdir_visible
    from mrec_warp.errors import InputError

    (tmp_path / JOB_FILE).write_text("{}")
    with Backend("dask", client=client) as be:
        check_workdir_visible(be, tmp_path)  # the local workers share this filesystem
        with pytest.raises(InputError, match="Dask worker .* cannot see this file") as err:
            check_workdir_visible(be, tmp_path, tmp_path / "missing.npz")
    assert "missing.npz" in str(err.value)


def test_slim_on_a_dask_cluster_learns_the_weights_threads_learn(client, tmp_path):
    from tests.conftest import planted_low_rank
    from mrec_warp.models import SLIM

    train, _ = planted_low_rank(n_users=200, n_items=80, per_user=15, seed=4)
    remote = SLIM(l1=0.5, l2=10.0, backend="dask", scheduler=client.scheduler.address).fit(train)
    local = SLIM(l1=0.5, l2=10.0, n_jobs=2).fit(train).weights_
    assert remote.weights_.nnz > 0 and (remote.weights_ != local).nnz == 0
    path = tmp_path / "slim.npz"  # the backend and scheduler are saved parameters like any other
    remote.save(path)
    assert load(path).get_params() == remote.get_params()
