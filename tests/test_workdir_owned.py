"""A work folder is the tool's only when it says so: ``--workdir`` never adopts the user's
files as finished work, and never deletes what it did not write (issue 20, item 1)."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
from click.testing import CliRunner

from mrec_warp.cli import main
from mrec_warp.errors import InputError
from mrec_warp.files import host_name
from mrec_warp.workdir import CREATED_KEY, JOB_FILE, LOCK_FILE, WorkDir
from .conftest import run_strict as run
from .faults import Fault



def one_line_error(output: str) -> str:
    lines = [ln for ln in output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), output
    assert "Traceback" not in output
    return lines[0]


def snapshot(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("owned")
    rng = np.random.default_rng(1)
    rows = {(f"u{u}", f"i{int(i)}") for u in range(60) for i in rng.choice(30, 5, replace=False)}
    train = folder / "train.tsv"
    train.write_text("".join(f"{u}\t{i}\n" for u, i in sorted(rows)))
    model = folder / "warp.npz"
    assert run("train", train, "-o", model, "--epochs", 2, "--factors", 4, "-q").exit_code == 0
    return {"train": train, "model": model}


# -- the three cases of the issue ---------------------------------------------------------------------
@pytest.mark.parametrize("case", ["recommend", "tune", "sub-models"])
def test_a_folder_of_the_users_files_is_refused_and_left_as_it_was(data, tmp_path, case):
    w = tmp_path / "w"
    w.mkdir()
    user_file = {"recommend": "part-00000.tsv", "tune": "trial-0000.json", "sub-models": "inputs.npz"}[case]
    (w / user_file).write_bytes(b"my\town\tdata\n")
    (w / "notes.txt").write_bytes(b"mine too\n")
    before = snapshot(w)
    out = tmp_path / ("r.tsv" if case != "sub-models" else "m.npz")
    args = {"recommend": ("recommend", data["model"], "-o", out, "-k", 3),
            "tune": ("tune", data["train"], "--random", 1, "--max-epochs", 2, "-o", out),
            "sub-models": ("train", data["train"], "-o", out, "--sub-models", 2, "--epochs", 1)}[case]
    r = run(*args, "--workdir", w, "-q")
    assert r.exit_code == 2, r.output
    line = one_line_error(r.output)
    assert line.startswith(f"Error: {w}: ") and "files mrec-warp did not write" in line
    assert f"({sorted(['notes.txt', user_file])[0]}, {sorted(['notes.txt', user_file])[1]})" in line
    assert "give an empty or new folder as --workdir" in line
    assert snapshot(w) == before  # nothing read as work, nothing deleted, no lock or job.json left
    assert not out.exists()


def test_the_default_parts_folder_of_the_users_files_is_refused_too(data, tmp_path):
    out = tmp_path / "m.npz"
    parts = tmp_path / "m.npz.parts"
    parts.mkdir()
    (parts / "submodel-000.npz").write_bytes(b"not a sub-model")
    r = run("train", data["train"], "-o", out, "--sub-models", 2, "--epochs", 1, "-q")
    assert r.exit_code == 2
    assert "files mrec-warp did not write (submodel-000.npz)" in one_line_error(r.output)
    assert sorted(p.name for p in parts.iterdir()) == ["submodel-000.npz"] and not out.exists()


def test_a_workdir_that_is_a_file_is_refused(tmp_path):
    w = tmp_path / "w"
    w.write_text("a file")  # (the command refuses it as a usage error before any work)
    with pytest.raises(InputError, match="`workdir` is not a folder"):
        WorkDir(w, {"kind": "x"})
    assert w.read_text() == "a file"


# -- what the tool removes at the end -----------------------------------------------------------------
def test_a_folder_the_tool_made_goes_an_empty_one_of_the_user_stays(data, tmp_path):
    made, given = tmp_path / "made", tmp_path / "given"
    given.mkdir()
    for w, name in ((made, "a.tsv"), (given, "b.tsv")):
        r = run("recommend", data["model"], "-o", tmp_path / name, "-k", 3, "--workdir", w, "--part-size", 20, "-q")
        assert r.exit_code == 0, r.output
        assert len((tmp_path / name).read_text().splitlines()) == 60 * 3
    assert not made.exists()
    assert given.is_dir() and list(given.iterdir()) == []


def test_a_resumed_run_knows_the_tool_made_the_folder(data, tmp_path, monkeypatch):
    w, out = tmp_path / "w", tmp_path / "r.tsv"
    args = ("recommend", data["model"], "-o", out, "-k", 3, "--workdir", w, "--part-size", 20, "-q")
    with monkeypatch.context() as patch:
        Fault.at("raise:1", tmp_path / "fault").install(patch)
        r = CliRunner().invoke(main, [str(a) for a in args])
    assert r.exit_code != 0 and "injected failure" in r.output
    assert json.loads((w / JOB_FILE).read_text())[CREATED_KEY] is True
    assert run(*args).exit_code == 0
    assert not w.exists()


def test_a_job_folder_the_user_added_a_file_to_keeps_it(data, tmp_path, monkeypatch):
    w, out = tmp_path / "w", tmp_path / "r.tsv"
    args = ("recommend", data["model"], "-o", out, "-k", 3, "--workdir", w, "--part-size", 20, "-q")
    with monkeypatch.context() as patch:
        Fault.at("raise:1", tmp_path / "fault").install(patch)
        assert CliRunner().invoke(main, [str(a) for a in args]).exit_code != 0
    (w / "README").write_text("what this folder is")
    assert run(*args).exit_code == 0
    assert sorted(p.name for p in w.iterdir()) == ["README"]


# -- the library's WorkDir ----------------------------------------------------------------------------
def test_workdir_accepts_only_its_own_leftovers_without_a_job_file(tmp_path):
    w = tmp_path / "w"
    w.mkdir()
    dead = {"pid": 2 ** 22 + 1, "host": host_name(), "started": 0}  # beyond pid_max: never running
    (w / LOCK_FILE).write_text(json.dumps(dead))  # a run killed before it wrote job.json
    (w / f".job.~{dead['pid']}@{host_name()}~abcd1234.json").write_text("{")
    with WorkDir(w, {"kind": "x"}) as wd:
        assert wd.created is False
        assert json.loads((w / JOB_FILE).read_text()) == {"kind": "x", CREATED_KEY: False}
    assert sorted(p.name for p in w.iterdir()) == [JOB_FILE]

    other = tmp_path / "other"
    other.mkdir()
    (other / ".job.~1@host~abcd1234.json.bak").write_text("not quite our name")
    with pytest.raises(InputError, match=r"did not write \(\.job\..*\.bak\)"):
        WorkDir(other, {"kind": "x"})
    assert [p.name for p in other.iterdir()] == [".job.~1@host~abcd1234.json.bak"]


def test_workdir_cleanup_never_removes_a_folder_it_did_not_make(tmp_path):
    given = tmp_path / "given"
    given.mkdir()
    wd = WorkDir(given, {"kind": "x"})
    (given / "part-0.tsv").write_text("p")
    wd.cleanup(["part-0.tsv"])
    assert given.is_dir() and list(given.iterdir()) == []
    made = tmp_path / "made" / "deeper"
    wd = WorkDir(made, {"kind": "x"})
    (made / "part-0.tsv").write_text("p")
    wd.cleanup(["part-0.tsv"])
    assert not made.exists() and (tmp_path / "made").is_dir()
    assert os.listdir(tmp_path / "made") == []


# -- an output inside the work folder (trial of issue 20, item 1) ----------------------------------------
@pytest.mark.parametrize("name", ["job.json", "part-00000.tsv", "lock", "sub/r.tsv", "inputs.npz"])
def test_an_output_inside_the_work_folder_is_refused_before_any_work(data, tmp_path, name):
    w = tmp_path / "wk"
    out = w / name
    args = (("train", data["train"], "-o", out, "--sub-models", 2, "--epochs", 1) if name == "inputs.npz"
            else ("recommend", data["model"], "-o", out, "-k", 3, "--part-size", 10))
    r = run(*args, "--workdir", w, "-q")
    assert r.exit_code == 2, r.output
    line = one_line_error(r.output)
    assert "inside the work folder" in line and "--workdir" in line
    # nothing was written: no folder made, the existing one left empty
    assert not w.exists() or list(w.iterdir()) == []


def test_an_output_beside_the_work_folder_is_fine(data, tmp_path):
    w = tmp_path / "wk"
    r = run("recommend", data["model"], "-o", tmp_path / "wk.tsv", "-k", 3, "--part-size", 10, "--workdir", w, "-q")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "wk.tsv").stat().st_size > 0 and not w.exists()


def listing_of(folder):
    return sorted(p.name for p in folder.iterdir())


def test_taking_over_a_dead_runs_lock_says_so_without_verbose(data, tmp_path):
    # README: "a lock left by a killed run is taken over, with a note" -- shown as a warning,
    # so it reaches a user who did not ask for progress lines (trial of issue 20, item 6)
    import subprocess
    import sys

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    w = tmp_path / "w"
    w.mkdir()
    (w / LOCK_FILE).write_text(json.dumps({"pid": dead.pid, "host": host_name(), "started": 0}))
    r = run("recommend", data["model"], "-o", tmp_path / "r.tsv", "-k", 3, "--workdir", w)
    assert r.exit_code == 0, r.output
    notes = [ln for ln in r.output.splitlines() if "taking over the lock" in ln]
    assert len(notes) == 1 and f"process {dead.pid}" in notes[0] and "no longer running" in notes[0], r.output
    assert (tmp_path / "r.tsv").exists()
    assert listing_of(w) == []  # the user's folder stays, empty
    (w / LOCK_FILE).write_text(json.dumps({"pid": dead.pid, "host": host_name(), "started": 0}))
    q = run("recommend", data["model"], "-o", tmp_path / "r2.tsv", "-k", 3, "--workdir", w, "-q")
    assert q.exit_code == 0 and q.output == ""
