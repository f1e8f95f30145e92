"""Jobs, outputs and downloads under faults: concurrent runs, killed runs, outputs that would
replace inputs, huge -k, endless downloads. Every case ends in a complete output or a
one-line error, and leaves no file behind but the ones it should."""
from __future__ import annotations

import dataclasses
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from mrec_warp.data import datasets
from mrec_warp.files import atomic_write, host_name
from mrec_warp.workdir import LOCK_FILE, WorkDir
from mrec_warp.errors import InputError

from .conftest import run_strict as run
from .faults import Fault

N_USERS, N_ITEMS = 200, 40


def cli(*args, fault=None, **kwargs):
    """The real command in its own process (as two users would start it), with ``fault``
    injected when given."""
    argv = fault.argv(*args) if fault else [sys.executable, "-m", "mrec_warp", *map(str, args)]
    return subprocess.Popen(argv, env=fault.env() if fault else None, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def one_line_error(stderr: str, *needles: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def wait_for(predicate, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def dead_pid() -> int:
    """The id of a process of this machine that has ended."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("model")
    rng = np.random.default_rng(0)
    rows = {(f"u{u}", f"i{int(i)}") for u in range(N_USERS) for i in rng.choice(N_ITEMS, 5, replace=False)}
    train = folder / "train.tsv"
    train.write_text("".join(f"{u}\t{i}\n" for u, i in sorted(rows)))
    path = folder / "model.npz"
    assert run("train", train, "-o", path, "--model", "popularity", "-q").exit_code == 0
    return path


def list_lengths(path: Path):
    counts = {}
    for line in path.read_text().splitlines():
        user = line.split("\t")[0]
        counts[user] = counts.get(user, 0) + 1
    return counts


# -- two runs, one work folder ----------------------------------------------------------------------
@pytest.mark.parametrize("k_second", [5, 3])  # the same job again; another job
def test_second_run_on_a_busy_work_folder_is_refused_and_the_first_finishes(model_file, tmp_path, k_second):
    wd, out_a, out_b = tmp_path / "work", tmp_path / "a.tsv", tmp_path / "b.tsv"
    held = Fault.at("wait:3", tmp_path / "fault")
    first = cli("recommend", model_file, "-o", out_a, "-k", 5, "--workdir", wd, "--part-size", 20, fault=held)
    try:
        wait_for(lambda: held.fired.exists() or first.poll() is not None, "the first run's part 3")
        assert first.poll() is None, first.communicate()
        second = cli("recommend", model_file, "-o", out_b if k_second != 5 else out_a, "-k", k_second,
                     "--workdir", wd, "--part-size", 20)
        _, err = second.communicate(timeout=120)
        assert second.returncode == 2
        line = one_line_error(err, str(wd), "in use by another run", f"process {first.pid} on {host_name()}")
        assert "Traceback" not in line
    finally:
        held.release()
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert set(list_lengths(out_a).values()) == {5} and len(list_lengths(out_a)) == N_USERS
    assert not out_b.exists() and not wd.exists()


def test_lock_of_a_killed_run_is_taken_over_and_the_job_resumes(model_file, tmp_path):
    wd, out = tmp_path / "work", tmp_path / "recs.tsv"
    # one worker, so parts run in order and the counts below are exact
    failed = cli("recommend", model_file, "-o", out, "-k", 4, "--workdir", wd, "--part-size", 20, "--n-jobs", 1,
                 fault=Fault.at("raise:2", tmp_path / "fault-raise"))
    _, err = failed.communicate(timeout=120)
    assert failed.returncode != 0 and "injected failure" in err
    assert not (wd / LOCK_FILE).exists() and (wd / "job.json").exists()  # a failed run lets go
    killed = cli("recommend", model_file, "-o", out, "-k", 4, "--workdir", wd, "--part-size", 20, "--n-jobs", 1,
                 fault=Fault.at("kill:4", tmp_path / "fault-kill"))
    killed.communicate(timeout=120)
    assert killed.returncode == -signal.SIGKILL
    holder = json.loads((wd / LOCK_FILE).read_text())
    assert holder["pid"] == killed.pid and holder["host"] == host_name()
    assert len(list(wd.glob("part-*.tsv"))) == 4
    again = cli("recommend", model_file, "-o", out, "-k", 4, "--workdir", wd, "--part-size", 20, "-v")
    _, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert f"taking over the lock of {wd} from process {killed.pid}" in err
    assert "4 already done" in err  # parts 0-1 of the failed run, 2-3 of the killed one
    assert set(list_lengths(out).values()) == {4} and len(list_lengths(out)) == N_USERS
    assert not wd.exists()


def test_lock_works_on_a_filesystem_without_hard_links(tmp_path, monkeypatch):
    def no_links(src, dst):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    wd = tmp_path / "w"
    (wd / LOCK_FILE).parent.mkdir()
    (wd / LOCK_FILE).write_text(json.dumps({"pid": os.getpid() + 1, "host": "elsewhere", "started": 0}))
    with pytest.raises(InputError, match="in use by another run"):
        WorkDir(wd, {"kind": "x"})
    (wd / LOCK_FILE).unlink()
    with WorkDir(wd, {"kind": "x"}):
        assert json.loads((wd / LOCK_FILE).read_text())["pid"] == os.getpid()
    assert sorted(p.name for p in wd.iterdir()) == ["job.json"]  # the folder was there before


def test_lock_of_a_live_run_elsewhere_is_never_broken(tmp_path):
    wd = tmp_path / "w"
    wd.mkdir()
    other = {"pid": os.getpid() + 1, "host": "another-machine", "started": "garbled"}
    (wd / LOCK_FILE).write_text(json.dumps(other))
    with pytest.raises(InputError, match="in use by another run: process .* on another-machine"):
        WorkDir(wd, {"kind": "x"})
    assert json.loads((wd / LOCK_FILE).read_text()) == other
    (wd / LOCK_FILE).write_text(json.dumps({**other, "host": host_name(), "pid": dead_pid()}))
    with WorkDir(wd, {"kind": "x"}) as taken:
        assert json.loads((wd / LOCK_FILE).read_text())["pid"] == os.getpid()
        assert taken.done("job.json")
    assert not (wd / LOCK_FILE).exists()


# -- leftovers of killed runs -----------------------------------------------------------------------
_KILL_WHILE_WRITING = """
import os, signal, sys
from mrec_warp.files import atomic_write
with atomic_write(sys.argv[1]) as fh:
    fh.write("half a file")
    fh.flush()
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_temporary_files_of_killed_runs_are_removed_and_live_ones_kept(model_file, tmp_path):
    out = tmp_path / "recs.tsv"
    proc = subprocess.run([sys.executable, "-c", _KILL_WHILE_WRITING, str(out)])
    assert proc.returncode == -signal.SIGKILL
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith(".recs."), left
    with atomic_write(tmp_path / "other.tsv") as fh:  # a temporary of a live run (this one) ...
        fh.write("x")
        live = [p for p in tmp_path.iterdir() if p.name.startswith(".other.")]
        r = run("recommend", model_file, "-o", tmp_path / "other.tsv", "-q")
        assert r.exit_code == 0
        assert all(p.exists() for p in live)  # ... survives another run writing the same name
    r = run("recommend", model_file, "-o", out, "-q")
    assert r.exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.tsv", "recs.tsv"]


def test_killed_worker_part_temporary_is_removed_by_the_rerun(model_file, tmp_path):
    wd, out = tmp_path / "work", tmp_path / "recs.tsv"
    args = ("recommend", model_file, "-o", out, "--workdir", wd, "--part-size", 50, "--n-jobs", 1, "-q")
    failed = cli(*args, fault=Fault.at("raise:2", tmp_path / "fault"))
    _, err = failed.communicate(timeout=120)
    assert failed.returncode != 0 and "injected failure" in err
    stale = wd / f".part-00002.~{dead_pid()}@{host_name()}~abcd1234.tsv"
    stale.write_text("partial")
    near_miss = wd / f".part-00002.~{dead_pid()}@{host_name()}~abcd1234.tsv.bak"  # not our name: kept
    near_miss.write_text("user file")
    mine = wd / "notes.txt"  # not ours: stays, and keeps the folder
    mine.write_text("user file")
    r = run(*args)
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in wd.iterdir()) == sorted([near_miss.name, "notes.txt"])


def test_unreachable_scheduler_is_one_line_and_leaves_no_work_folder(model_file, tmp_path):
    pytest.importorskip("distributed")
    out = tmp_path / "r.tsv"
    r = cli("recommend", model_file, "-o", out, "--backend", "dask", "--scheduler", "notaurl")
    _, err = r.communicate(timeout=120)
    assert r.returncode == 2
    one_line_error(err, "notaurl", "Dask scheduler")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


# -- an output never replaces an input ------------------------------------------------------------
@pytest.fixture
def same(tmp_path, model_file):
    folder = tmp_path / "same"
    folder.mkdir()
    (folder / "train.tsv").write_bytes((model_file.parent / "train.tsv").read_bytes())
    (folder / "model.npz").write_bytes(model_file.read_bytes())
    (folder / "link.npz").symlink_to("model.npz")
    (folder / "sub").mkdir()
    return folder


@pytest.mark.parametrize("args", [
    ["train", "{d}/train.tsv", "-o", "{d}/train.tsv", "--model", "popularity"],
    ["train", "{d}/train.tsv", "-o", "{d}/sub/../train.tsv", "--model", "popularity"],
    ["recommend", "{d}/model.npz", "-o", "{d}/model.npz"],
    ["recommend", "{d}/link.npz", "-o", "{d}/model.npz"],
    ["recommend", "{d}/model.npz", "-o", "{d}/r.tsv", "--users", "{d}/r.tsv"],
    ["recommend", "{d}/model.npz", "-o", "{d}/train.tsv", "--train", "{d}/./train.tsv"],
    ["prepare", "{d}/train.tsv", "-o", "{d}"],
    ["prepare", "{d}/train.tsv", "-o", "{d}/sub/..", "--num-splits", "1"],
    ["similar", "{d}/model.npz", "--items", "i1", "-o", "{d}/link.npz"],
    ["tune", "{d}/train.tsv", "--random", "1", "-o", "{d}/train.tsv"],
    ["evaluate", "--train", "{d}/train.tsv", "--test", "{d}/train.tsv", "--recs", "{d}/train.tsv",
     "--json", "{d}/sub/../train.tsv"],
])
def test_an_output_that_is_an_input_is_refused_before_any_work(same, args):
    (same / "r.tsv").write_text("u1\n")
    before = {p.name: p.read_bytes() for p in same.iterdir() if p.is_file()}
    r = run(*[a.replace("{d}", str(same)) for a in args])
    assert r.exit_code == 2, r.output
    one_line_error(r.output, "would overwrite an input file")
    assert {p.name: p.read_bytes() for p in same.iterdir() if p.is_file()} == before
    assert sorted(p.name for p in (same / "sub").iterdir()) == []


def test_prepare_into_the_input_folder_is_refused_only_when_it_would_replace_the_input(same):
    r = run("prepare", same / "train.tsv", "-o", same)
    assert r.exit_code == 2
    one_line_error(r.output, "would overwrite an input file", "train.tsv")
    ratings = same / "ratings.tsv"
    ratings.write_bytes((same / "train.tsv").read_bytes())
    (same / "train.tsv").unlink()
    r = run("prepare", ratings, "-o", same, "-q")
    assert r.exit_code == 0, r.output
    assert {"ratings.tsv", "train.tsv", "test.tsv", "summary.json", "model.npz"} <= {p.name for p in same.iterdir()}


# -- prepare: never a mixed split -------------------------------------------------------------------
_KILL_AT_SECOND_RENAME = """
import os, signal, sys
from mrec_warp.stages.prepare import prepare
real, calls = os.replace, []
def replace(src, dst):
    if os.path.basename(str(dst)) in ("train.tsv", "test.tsv", "summary.json"):
        calls.append(dst)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGKILL)
    return real(src, dst)
os.replace = replace
real_rename = os.rename
def rename(src, dst):
    if os.path.basename(str(dst)) == os.path.basename(sys.argv[2]):
        os.kill(os.getpid(), signal.SIGKILL)
    return real_rename(src, dst)
os.rename = rename
prepare(sys.argv[1], sys.argv[2], seed=int(sys.argv[3]))
"""


def _ratings(tmp_path: Path) -> Path:
    rng = np.random.default_rng(3)
    path = tmp_path / "ratings.tsv"
    path.write_text("".join(f"u{u}\ti{i}\t{r}\n" for u in range(60) for i, r in
                            zip(rng.choice(80, 8, replace=False), rng.integers(1, 6, 8))))
    return path


@pytest.mark.parametrize("existing", [False, True])
def test_prepare_killed_mid_write_never_leaves_a_split_marked_complete(tmp_path, existing):
    ratings, out = _ratings(tmp_path), tmp_path / "split"
    if existing:  # a folder of an earlier split (seed 1) and a file of the user's
        assert run("prepare", ratings, "-o", out, "--seed", 1, "-q").exit_code == 0
        (out / "notes.txt").write_text("mine")
        old = {n: (out / n).read_bytes() for n in ("train.tsv", "test.tsv")}
    proc = subprocess.run([sys.executable, "-c", _KILL_AT_SECOND_RENAME, str(ratings), str(out), "2"])
    assert proc.returncode == -signal.SIGKILL
    if not existing:
        assert not out.exists()
    else:
        assert (out / "notes.txt").read_text() == "mine"
        assert not (out / "summary.json").exists(), "a half-replaced split must not claim to be complete"
        assert (out / "train.tsv").read_bytes() != old["train.tsv"]  # the kill came after the first rename
    r = run("prepare", ratings, "-o", out, "--seed", 2, "-q")  # a rerun completes it and tidies up
    assert r.exit_code == 0, r.output
    assert json.loads((out / "summary.json").read_text())["parameters"]["seed"] == 2
    expected = {"train.tsv", "test.tsv", "summary.json"} | ({"notes.txt"} if existing else set())
    assert {p.name for p in out.iterdir()} == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ratings.tsv", "split"]


# -- -k beyond the catalogue ------------------------------------------------------------------------
@pytest.mark.parametrize("k", ["200000", "99999999999999999999"])
def test_k_beyond_the_catalogue_is_capped_with_a_note(model_file, tmp_path, k):
    ref, out = tmp_path / "ref.tsv", tmp_path / "out.tsv"
    assert run("recommend", model_file, "-o", ref, "-k", N_ITEMS, "-q").exit_code == 0
    r = cli("recommend", model_file, "-o", out, "-k", k, "-v")
    _, err = r.communicate(timeout=120)
    assert r.returncode == 0, err
    assert err.count(f"using -k {N_ITEMS}") == 1 and "Traceback" not in err
    assert out.read_bytes() == ref.read_bytes()


# -- fetch: bounded, and nothing left behind ---------------------------------------------------------
class _Endless(http.server.BaseHTTPRequestHandler):
    """Serves an endless body (bounded in time so that the server always stops by itself)."""

    pause = 0.0

    def do_GET(self):  # noqa: N802 - http.server's naming
        self.send_response(200)
        self.send_header("Content-Type", "application/zip")
        self.end_headers()
        deadline = time.monotonic() + 30
        try:
            while time.monotonic() < deadline:
                self.wfile.write(b"\0" * 65536)
                if self.pause:
                    time.sleep(self.pause)
        except OSError:  # the client went away
            pass

    def log_message(self, *args):
        pass


@pytest.fixture
def endless():
    def serve(pause):
        handler = type("H", (_Endless,), {"pause": pause})
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}/"

    servers = []
    yield serve
    for s in servers:
        s.shutdown()
        s.server_close()


def test_fetch_stops_an_endless_download_and_deletes_it(endless, tmp_path, monkeypatch):
    small = dataclasses.replace(datasets.DATASETS["movielens-100k"], size=100_000)
    monkeypatch.setitem(datasets.DATASETS, "movielens-100k", small)
    with pytest.raises(datasets.DownloadError, match="more than 400,000 bytes"):
        datasets.fetch("movielens-100k", dest=tmp_path / "cache", base_url=endless(0.0))
    assert list((tmp_path / "cache").iterdir()) == []


def test_known_sizes_bound_the_real_downloads():
    for ds in datasets.DATASETS.values():
        assert 1_000_000 < ds.size < ds.max_bytes <= 10 * ds.size


def test_fetch_terminated_mid_download_leaves_nothing(endless, tmp_path):
    cache = tmp_path / "cache"
    proc = cli("fetch", "movielens-100k", "--dest", cache, "--base-url", endless(0.05))
    wait_for(lambda: any(p.stat().st_size > 0 for p in cache.glob(".ml-100k.*/*")) or proc.poll() is not None,
             "the download to start")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "Traceback" not in err
    assert list(cache.iterdir()) == []


def test_fetch_removes_what_a_killed_fetch_left(endless, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    stale = cache / f".ml-100k.~{dead_pid()}@{host_name()}~abcd1234"
    stale.mkdir()
    (stale / "ml-100k.zip").write_bytes(b"\0" * 1000)
    with pytest.raises(datasets.DownloadError):
        datasets.fetch("movielens-100k", dest=cache, base_url="http://127.0.0.1:9/")
    assert list(cache.iterdir()) == []


def test_sub_model_fit_removes_the_temporary_folders_of_killed_fits(tmp_path, monkeypatch):
    import tempfile

    from mrec_warp.data.interactions import Interactions
    from mrec_warp.stages.submodels import fit_submodels
    from tests.conftest import planted_low_rank

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    stale = tmp_path / f"mrec-warp-fit-~{dead_pid()}@{host_name()}~abcd1234"
    stale.mkdir()
    (stale / "submodel-000.npz").write_bytes(b"half")
    other = tmp_path / "mrec-warp-fit-untagged"  # not named by a run that can be checked: kept
    other.mkdir()
    train, _ = planted_low_rank(n_users=40, n_items=30, per_user=6, seed=1)
    data = Interactions(train, [f"u{i}" for i in range(40)], [f"i{j}" for j in range(30)])
    fit_submodels(data, {"factors": 4, "epochs": 1}, n_models=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mrec-warp-fit-untagged"]


def test_python_write_recommendations_caps_k_at_the_catalogue(tmp_path):
    import numpy as np
    import scipy.sparse as sp

    from mrec_warp.models import Popularity
    from mrec_warp.stages.recommend import write_recommendations

    model = Popularity().fit(sp.csr_matrix(np.eye(4, 6, dtype=np.float32)))
    n = write_recommendations(model, tmp_path / "r.tsv", k=10**9)  # would allocate users x 1e9 before
    assert n == 4 * 5  # each user has 5 unseen items: every one listed once


# -- a unit that outlives its job ------------------------------------------------------------------
def test_a_unit_keeps_its_part_only_if_the_folder_still_holds_its_job(tmp_path):
    """A task still running after Ctrl-C (a remote Dask worker cannot be stopped) must not
    drop its part into a folder that has since been deleted or given to another job."""
    from mrec_warp.jobs import StaleUnitError, unit_of_job

    (tmp_path / "job.json").write_text('{"kind": "recommend", "k": 10}')
    with unit_of_job(tmp_path):
        with atomic_write(tmp_path / "part-00000.tsv") as fh:
            fh.write("u\ti\t1\t1\n")
    assert (tmp_path / "part-00000.tsv").exists()
    with unit_of_job(tmp_path):
        (tmp_path / "job.json").write_text('{"kind": "recommend", "k": 20}')  # another job took the folder
        with pytest.raises(StaleUnitError), atomic_write(tmp_path / "part-00001.tsv") as fh:
            fh.write("u\ti\t1\t1\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.json", "part-00000.tsv"]  # no part, no temp


def test_a_sub_model_finishing_after_its_folder_was_reused_drops_its_part(tmp_path, monkeypatch):
    import scipy.sparse as sp

    from mrec_warp.data.interactions import Interactions
    from mrec_warp.jobs import StaleUnitError
    from mrec_warp.models import WARP
    from mrec_warp.stages import submodels

    data = Interactions(sp.random(20, 10, density=0.4, format="csr", random_state=0).astype(np.float32),
                        [f"u{i}" for i in range(20)], [f"i{j}" for j in range(10)])
    (tmp_path / "job.json").write_text('{"kind": "submodels", "sub_models": 2}')
    fit = WARP.fit

    def slow_fit(self, *args, **kwargs):  # the user starts another job in the folder meanwhile
        (tmp_path / "job.json").write_text('{"kind": "submodels", "sub_models": 3}')
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(WARP, "fit", slow_fit)
    with pytest.raises(StaleUnitError):
        submodels._fit_submodel(data, str(tmp_path), 0, {"factors": 4, "epochs": 1})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.json"]
