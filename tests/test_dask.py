"""The Dask backend on a local cluster of 2 worker processes on 127.0.0.1.

Skipped when dask.distributed is not installed (it is the optional ``dask`` extra).
"""
from __future__ import annotations

import contextlib
import os
import socket
import threading

import numpy as np
import scipy.sparse as sp
import pytest

distributed = pytest.importorskip("distributed")

from mrec_warp.data.interactions import Interactions  # noqa: E402
from mrec_warp.stages.recommend import recommend_in_parts  # noqa: E402
from mrec_warp.stages.submodels import fit_submodels  # noqa: E402
from mrec_warp.models import WARP, load  # noqa: E402
from mrec_warp.context import ExecutionContext as Backend  # noqa: E402
from mrec_warp.stages.recommend import write_recommendations  # noqa: E402

from .faults import Fault  # noqa: E402


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


def _settled_parts(folder, quiet=1.5, timeout=60):
    """Part files once none has appeared for ``quiet`` seconds: a part already running on a
    worker when the job failed still finishes (Dask cannot stop a running call)."""
    import time

    seen, since, deadline = -1, time.monotonic(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        n = len(list(folder.glob("part-*.tsv")))
        if n != seen:
            seen, since = n, time.monotonic()
        elif time.monotonic() - since >= quiet:
            break
        time.sleep(0.05)
    return seen


def _rows_per_user(path):
    users = [line.split("\t", 1)[0] for line in path.read_text().splitlines()]
    return {u: users.count(u) for u in set(users)}


def test_recommend_on_dask_is_identical_to_local(client, fitted, tmp_path):
    model, path, _ = fitted
    ref, out = tmp_path / "ref.tsv", tmp_path / "out.tsv"
    write_recommendations(model, ref, k=5)
    with Backend("dask", client=client) as be:
        # the model file is read by the workers; the in-memory model is copied to the workdir
        n = write_recommendations(model, out, k=5, context=be, part_size=50, model_file=path)
        assert n == 400 * 5 and out.read_bytes() == ref.read_bytes()
        write_recommendations(model, out, k=5, context=Backend("dask", client=client, workdir=tmp_path / "w2"),
                              part_size=50)
        assert out.read_bytes() == ref.read_bytes()


def test_worker_killed_mid_job_loses_and_duplicates_no_user(client, fitted, tmp_path, monkeypatch):
    model, path, _ = fitted
    ref, out, wd = tmp_path / "ref.tsv", tmp_path / "out.tsv", tmp_path / "work"
    write_recommendations(model, ref, k=5)
    client.wait_for_workers(2, timeout=60)  # a worker killed by an earlier test may still be restarting
    killing = Fault.at("kill:2", tmp_path / "fault")  # the worker that starts part 2 dies (SIGKILL), once
    with monkeypatch.context() as patch:
        killing.install(patch)
        with Backend("dask", client=client, workdir=wd, keep_parts=True) as be:
            info = recommend_in_parts(model, out, k=5, context=be, part_size=40, model_file=path)
    assert killing.fired.exists()  # the kill really happened
    assert info["parts"] == 10 and info["parts_run"] == 10
    counts = _rows_per_user(out)
    assert len(counts) == 400 and set(counts.values()) == {5}
    assert out.read_bytes() == ref.read_bytes()
    client.wait_for_workers(2, timeout=60)  # the nanny restarted the killed worker


def test_interrupted_dask_job_resumes(client, fitted, tmp_path, monkeypatch):
    model, path, _ = fitted
    ref, out, wd = tmp_path / "ref.tsv", tmp_path / "out.tsv", tmp_path / "work"
    write_recommendations(model, ref, k=3)
    with monkeypatch.context() as patch:
        Fault.at("raise:6", tmp_path / "fault").install(patch)
        with Backend("dask", client=client, workdir=wd) as be, pytest.raises(RuntimeError, match="injected failure"):
            recommend_in_parts(model, out, k=3, context=be, part_size=40, model_file=path)
    assert not out.exists()
    finished = _settled_parts(wd)
    assert 1 <= finished < 10
    with Backend("dask", client=client, workdir=wd) as be:
        info = recommend_in_parts(model, out, k=3, context=be, part_size=40, model_file=path)
    assert info["parts_skipped"] == finished and info["parts_run"] == 10 - finished
    assert out.read_bytes() == ref.read_bytes()


def test_distributed_fit_and_tune_match_local(client, fitted):
    from mrec_warp.stages.candidates import grid_points
    from mrec_warp.stages.tune import tune

    _, _, data = fitted
    params = {"factors": 8, "epochs": 3}
    with Backend("dask", client=client) as be:
        remote = fit_submodels(data, params, be, n_models=2, random_state=3)
        points = grid_points({"factors": [4, 8], "learning_rate": [0.05]})
        remote_tune = tune(data, points, base={"max_epochs": 4, "patience": 2}, context=be)
    local = fit_submodels(data, params, Backend("threads", n_jobs=2), n_models=2, random_state=3)
    np.testing.assert_array_equal(remote.user_factors_, local.user_factors_)
    np.testing.assert_array_equal(remote.item_factors_, local.item_factors_)
    local_tune = tune(data, points, base={"max_epochs": 4, "patience": 2})
    cols = ["trial", "factors", "learning_rate", "precision@10", "epochs"]
    assert remote_tune.table[cols].equals(local_tune.table[cols])


def test_every_worker_is_asked_whether_it_sees_the_files(client, tmp_path):
    from mrec_warp.jobs import check_workdir_visible
    from mrec_warp.workdir import JOB_FILE
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


def test_wrmf_on_dask_is_bit_identical_to_threads_and_ships_the_data_once(client, fitted, monkeypatch):
    from mrec_warp.models import WRMF
    from mrec_warp.models.wrmf import Rows

    _, _, data = fitted
    shipped = []
    scatter = client.scatter

    def recording_scatter(value, **kwargs):
        shipped.extend(type(v).__name__ for v in (value.values() if isinstance(value, dict) else [value]))
        assert kwargs.get("broadcast")  # to every worker at once, not with each block
        return scatter(value, **kwargs)

    monkeypatch.setattr(client, "scatter", recording_scatter)
    for params in (dict(epochs=3), dict(max_epochs=4, patience=2)):  # early stopping then the refit
        params = dict(factors=8, alpha=2.0, regularization=5.0, random_state=1, **params)
        threads = WRMF(n_jobs=2, **params).fit(data)
        shipped.clear()
        with distributed.get_task_stream(client) as stream, Backend("dask", client=client) as be:
            remote = WRMF(n_jobs=2, **params).fit(data, workers=be)
        np.testing.assert_array_equal(remote.user_factors_, threads.user_factors_)
        np.testing.assert_array_equal(remote.item_factors_, threads.item_factors_)
        assert remote.best_epoch_ == threads.best_epoch_
        iterations, fits = len(remote.history_), 1 + ("max_epochs" in params)
        assert shipped.count(Rows.__name__) == 2 * fits  # both sides of the confidence matrix, once per fit
        assert shipped.count(np.ndarray.__name__) == 2 * iterations  # the fixed factors, per half-iteration
        assert len(shipped) == 2 * fits + 2 * iterations
        solved = [t for t in stream.data if "-block-" in str(t["key"])]
        workers = set(client.scheduler_info()["workers"])
        assert len(solved) > 2 * iterations  # several blocks per half-iteration
        assert {t["worker"] for t in solved} == workers  # spread over the cluster's workers


def test_cli_wrmf_on_a_cluster_writes_the_threads_model(client, fitted, tmp_path):
    _, _, data = fitted
    coo = data.matrix.tocoo()
    lines = [f"{data.user_ids[r]}\t{data.item_ids[c]}\t{1 + (r * c) % 4}" for r, c in zip(coo.row, coo.col)]
    (tmp_path / "plays.tsv").write_text("\n".join(lines) + "\n")
    common = ["train", tmp_path / "plays.tsv", "--model", "wrmf", "--factors", "8", "--epochs", "3"]
    local = _cli(*common, "-o", tmp_path / "local.npz")
    remote = _cli(*common, "-o", tmp_path / "dask.npz", "--backend", "dask", "--scheduler", client.scheduler.address,
                  "-v")
    for proc in (local, remote):
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
    assert f"blocks of rows solved on dask at {client.scheduler.address}, 2 workers" in err
    assert (tmp_path / "dask.npz").read_bytes() == (tmp_path / "local.npz").read_bytes()


# -- pre-flight: every worker runs this mrec-warp ------------------------------------------------
def _cli(*args, env=None, fault=None):
    """The command in its own process, with ``fault`` injected when given."""
    import subprocess
    import sys

    full_env = {**os.environ, **(env or {})}
    argv = fault.argv(*args) if fault else [sys.executable, "-m", "mrec_warp", *map(str, args)]
    return subprocess.Popen(argv, env=fault.env(full_env) if fault else full_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _one_line_error(stderr, *needles):
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def _break_worker_install():
    """A function for ``client.run``: on a worker, pretend mrec-warp is another version
    ("version") or is not installed ("missing"); ``None`` puts it back. Built inside a
    function so that it is shipped by value (a worker "without" mrec-warp can still run it)."""
    def apply(how):
        import sys

        if how is None:
            real = sys.modules.get("_mrec_warp_saved")
            if real is not None:
                sys.modules["mrec_warp"] = real
                real.__version__ = real._real_version
                del sys.modules["_mrec_warp_saved"]
            return
        import mrec_warp

        mrec_warp._real_version = mrec_warp.__version__
        sys.modules["_mrec_warp_saved"] = mrec_warp
        if how == "version":
            mrec_warp.__version__ = "0.0.0-other"
        else:
            sys.modules["mrec_warp"] = None  # "import mrec_warp" now fails, as if not installed

    return apply


@pytest.mark.parametrize("how, needle", [("version", "has mrec-warp 0.0.0-other"), ("missing", "has no mrec-warp")])
def test_workers_without_this_mrec_warp_fail_the_preflight_in_one_line(client, fitted, tmp_path, how, needle):
    _, path, _ = fitted
    worker = sorted(client.scheduler_info()["workers"])[0]
    client.run(_break_worker_install(), how, workers=[worker])
    try:
        proc = _cli("recommend", path, "-o", tmp_path / "r.tsv", "--backend", "dask",
                    "--scheduler", client.scheduler.address)
        _, err = proc.communicate(timeout=120)
    finally:
        client.run(_break_worker_install(), None, workers=[worker])
    assert proc.returncode == 2
    _one_line_error(err, f"Dask worker {worker} {needle}", "install the same mrec-warp version on every worker")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


# -- losing the scheduler mid-job -----------------------------------------------------------------
def _start_cluster(folder, worker_env=None):
    """A scheduler and one worker as separate processes on 127.0.0.1 (as on a real cluster);
    ``worker_env``: the worker's environment (default: this process's)."""
    import json
    import subprocess
    import sys
    import time

    sf = folder / f"scheduler-{time.monotonic_ns()}.json"
    quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                  "--port", "0", "--no-dashboard", "--scheduler-file", str(sf)], **quiet)
    deadline = time.monotonic() + 60
    while not sf.exists() or not sf.read_text().strip():
        assert time.monotonic() < deadline and scheduler.poll() is None, "scheduler did not start"
        time.sleep(0.1)
    time.sleep(0.2)  # the file is written whole
    address = json.loads(sf.read_text())["address"]
    worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nworkers", "1",
                               "--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1"], env=worker_env, **quiet)
    return scheduler, worker, address


def test_lost_scheduler_is_one_line_and_a_rerun_resumes(fitted, tmp_path):
    import time

    model, path, _ = fitted
    wd, out, ref = tmp_path / "work", tmp_path / "recs.tsv", tmp_path / "ref.tsv"
    procs = []
    try:
        held = Fault.at("wait:3", tmp_path / "fault")  # the worker holds part 3 (it imports the fault)
        scheduler, worker, address = _start_cluster(tmp_path, held.env())
        procs += [scheduler, worker]
        job = ["recommend", path, "-o", out, "-k", 3, "--backend", "dask", "--scheduler", address,
               "--workdir", wd, "--part-size", 40]
        first = _cli(*job, fault=held)
        procs.append(first)
        deadline = time.monotonic() + 120
        while not held.fired.exists():  # the worker is inside part 3
            assert time.monotonic() < deadline and first.poll() is None, first.communicate()
            time.sleep(0.05)
        scheduler.kill()
        _, err = first.communicate(timeout=120)
        held.release()
        assert first.returncode == 2
        _one_line_error(err, f"lost the Dask scheduler at {address}", "workers stop with it",
                        "rerun the same command", "resumes")
        assert not out.exists() and not (wd / "lock").exists()
        done = len(list(wd.glob("part-*.tsv")))
        assert 3 <= done < 10
        worker.wait(timeout=120)  # the worker went with its scheduler
        scheduler2, worker2, address2 = _start_cluster(tmp_path)
        procs += [scheduler2, worker2]
        job[job.index(address)] = address2  # the same job on the restarted cluster
        second = _cli(*job, "-v")
        procs.append(second)
        _, err = second.communicate(timeout=180)
        assert second.returncode == 0, err
        assert "already done" in err
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    write_recommendations(model, ref, k=3)
    assert _rows_per_user(out) == _rows_per_user(ref) and not wd.exists()


@contextlib.contextmanager
def _not_a_scheduler(answer: bytes):
    """A TCP service on 127.0.0.1 that is not Dask's: each connection gets ``answer`` (nothing:
    it waits for a request, as a web server does) and is kept open. Yields its address."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held = []

    def serve():
        with contextlib.suppress(OSError):  # the listening socket closed: the test is over
            while True:
                conn, _ = server.accept()
                held.append(conn)
                if answer:
                    conn.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()
        for conn in held:
            conn.close()


@pytest.mark.parametrize("answer, why", [
    (b"SSH-2.0-OpenSSH_9.6\r\n" * 4, "answered with bytes that are not Dask's"),  # its size: exabytes
    ((10 ** 9).to_bytes(8, "little") + b"x" * 64, "no answer as one in 2 s"),  # a gigabyte promised, 64 sent
    (b"", "no answer as one in 2 s"),  # a web server waiting for its request
], ids=["other bytes", "a gigabyte promised", "silent"])
def test_a_scheduler_address_that_is_not_a_dask_scheduler_is_one_line(fitted, tmp_path, monkeypatch, answer, why):
    """distributed's connect reads the peer's first bytes with no deadline and sizes its buffer
    by them: bounded here, one line naming the address, exit 2, nothing written."""
    import time

    from mrec_warp import dask_cluster

    from .conftest import run
    from .test_guards import one_line_error

    monkeypatch.setattr(dask_cluster, "CONNECT_TIMEOUT", 1.0)
    _, path, _ = fitted
    with _not_a_scheduler(answer) as address:
        start = time.monotonic()
        result = run("recommend", path, "-o", tmp_path / "r.tsv", "--backend", "dask", "--scheduler", address)
        seconds = time.monotonic() - start
    one_line_error(result, f"{address} is not a reachable Dask scheduler", why)
    assert seconds < 30  # bounded: the deadline is 2 s (a hang is what this guards against)
    assert not (tmp_path / "r.tsv").exists()


def test_lost_scheduler_in_a_wrmf_fit_is_one_line_and_writes_nothing(tmp_path):
    rng = np.random.default_rng(0)
    users, items = np.repeat(np.arange(20000), 15), rng.integers(0, 2000, 20000 * 15)
    (tmp_path / "big.tsv").write_text("".join(f"u{u}\ti{i}\n" for u, i in zip(users, items)))
    procs = []
    try:
        scheduler, worker, address = _start_cluster(tmp_path)
        procs += [scheduler, worker]
        fit = _cli("train", tmp_path / "big.tsv", "-o", tmp_path / "m.npz", "--model", "wrmf", "--epochs", 500,
                   "--backend", "dask", "--scheduler", address, "-v")
        procs.append(fit)
        seen = []
        for line in fit.stderr:  # iterations are under way on the cluster
            seen.append(line)
            if "fit iteration   2" in line:
                break
        scheduler.kill()
        _, err = fit.communicate(timeout=120)
        assert fit.returncode == 2, "".join(seen) + err
        _one_line_error(err, f"lost the Dask scheduler at {address}", "the fit starts over")
        assert "workdir" not in err and not (tmp_path / "m.npz").exists()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


# -- the model does not depend on the cluster ---------------------------------------------------
def test_default_fit_on_dask_is_the_plain_fit_and_resumes_on_fewer_workers(client, fitted, tmp_path, monkeypatch):
    import io

    from mrec_warp.progress import Progress

    _, _, data = fitted
    params = {"factors": 6, "epochs": 3}
    plain = WARP(**params, random_state=5, n_jobs=1).fit(data)
    with Backend("dask", client=client) as be:  # 2 workers: it used to fit 2 sub-models of 3 factors
        remote = fit_submodels(data, params, be, random_state=5)
    np.testing.assert_array_equal(remote.user_factors_, plain.user_factors_)
    np.testing.assert_array_equal(remote.item_factors_, plain.item_factors_)
    # a job interrupted on the 2-worker cluster resumes on 1 worker (here: 1 process)
    wd = tmp_path / "work"
    with monkeypatch.context() as patch:
        Fault.at("raise:0", tmp_path / "fault").install(patch)
        with Backend("dask", client=client, workdir=wd) as be, pytest.raises(RuntimeError, match="injected failure"):
            fit_submodels(data, params, be, random_state=5)
    log = io.StringIO()
    again = fit_submodels(data, params, Backend("processes", n_jobs=1, workdir=wd), random_state=5,
                          progress=Progress(verbose=True, stream=log))
    np.testing.assert_array_equal(again.user_factors_, plain.user_factors_)
    assert "fit: 1 sub-model of 6 factors" in log.getvalue() and not wd.exists()


def test_dask_relays_every_epoch_and_names_its_tasks(client, fitted, tmp_path):
    import io

    from dask.utils import key_split

    from mrec_warp.progress import Progress

    model, path, data = fitted
    log = io.StringIO()
    with Backend("dask", client=client) as be, distributed.get_task_stream(client) as stream:
        fit_submodels(data, {"factors": 4, "epochs": 2}, be, n_models=2, progress=Progress(verbose=True, stream=log))
        recommend_in_parts(model, tmp_path / "recs.tsv", k=3, context=be, part_size=200, model_file=path)
    keys = sorted(str(t["key"]) for t in stream.data)
    assert [k.rsplit("-", 1)[0] for k in keys] == ["fit-submodel-000", "fit-submodel-001",
                                                   "recommend-part-00000", "recommend-part-00001"]
    assert {key_split(k) for k in keys} == {"fit-submodel", "recommend-part"}  # a group each in the dashboard
    lines = log.getvalue().splitlines()
    for i in (0, 1):
        epochs = [n for n, line in enumerate(lines) if f"sub-model {i}: fit epoch " in line]
        done = [n for n, line in enumerate(lines) if f"sub-model {i}: 2 epochs" in line]
        assert len(epochs) == 2 and len(done) == 1 and max(epochs) < done[0], log.getvalue()


def test_cli_train_on_dask_says_what_the_cluster_does_and_is_quiet_with_q(client, fitted, tmp_path):
    _, _, data = fitted
    tsv = tmp_path / "train.tsv"
    coo = data.matrix.tocoo()
    tsv.write_text("".join(f"{data.user_ids[u]}\t{data.item_ids[i]}\n" for u, i in zip(coo.row, coo.col)))
    job = ["train", tsv, "--factors", 4, "--epochs", 2, "--backend", "dask", "--scheduler", client.scheduler.address]
    out, err = _cli(*job, "-o", tmp_path / "v.npz", "-v").communicate(timeout=180)
    assert "wrote" in out and "1 sub-model of 4 factors" in out, err
    assert "note: --backend dask fits one model of all the factors, on one worker" in err
    assert "--sub-models K fits K smaller models on K workers at once" in err
    assert "sub-model 0: fit epoch   2" in err
    out, err = _cli(*job, "-o", tmp_path / "q.npz", "-q").communicate(timeout=180)
    assert out == "" and err == "" and (tmp_path / "q.npz").exists()


def test_the_dask_extra_brings_the_bokeh_the_dashboard_needs():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    from pathlib import Path

    from distributed.versions import BOKEH_REQUIREMENT
    from packaging.requirements import Requirement

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    bokeh = [Requirement(r) for r in project["optional-dependencies"]["dask"] if Requirement(r).name == "bokeh"]
    assert len(bokeh) == 1
    floors = [s.version for s in bokeh[0].specifier if s.operator == ">="]
    assert floors and all(BOKEH_REQUIREMENT.specifier.contains(v) for v in floors)  # the oldest it allows works


def test_a_local_cluster_serves_its_dashboard_and_the_log_links_it():
    from urllib.request import urlopen

    with Backend("dask", n_jobs=1) as be:
        line = be.describe()
        link = be.client.dashboard_link
        page = urlopen(link, timeout=30).read().decode("utf-8", "replace")
    assert line.startswith("dask (local cluster), 1 worker, dashboard http://127.0.0.1:") and link in line
    assert "Dask needs bokeh" not in page and "bokeh" in page.lower()


def test_wrmf_tasks_and_shared_data_have_readable_names(client, monkeypatch):
    """The dashboard shows what runs: WRMF's blocks as wrmf-<side>-<round>-block-<n>, its
    scattered data as wrmf-<what>-<token>, not as solve_block / Rows / ndarray."""
    from mrec_warp.models import WRMF

    X = sp.random(60, 40, density=0.2, format="csr", random_state=1)
    scatter, scattered = client.scatter, []

    def recording_scatter(value, **kwargs):
        scattered.extend(value if isinstance(value, dict) else ["<unnamed>"])
        return scatter(value, **kwargs)

    monkeypatch.setattr(client, "scatter", recording_scatter)
    with Backend("dask", client=client) as workers, distributed.get_task_stream(client) as stream:
        WRMF(factors=4, epochs=1, random_state=0).fit(X, workers=workers)
    assert scattered and all(k.startswith(("wrmf-users-", "wrmf-items-", "wrmf-fixed-")) for k in scattered), scattered
    keys = [str(t["key"]) for t in stream.data]
    assert keys and all(k.startswith("wrmf-users-") or k.startswith("wrmf-items-") for k in keys), keys
    assert any("-block-000" in k for k in keys)
