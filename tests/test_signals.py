"""SIGINT, SIGTERM and SIGHUP stop a command one way: workers stopped, partial files removed,
one line, exit 128 + signal; and a later run removes what killed runs left (issue 20, item 4).

Every case runs the real command in its own session, so that any process it leaves behind
(a loky worker holding the caller's pipes) is found by its session id."""
from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import List

import numpy as np
import pytest

from mrec_warp.files import host_name, remove_stale_temps
from mrec_warp.signals import STOP_SIGNALS, Stopped, stop_on_signals

from .conftest import run_strict as run
from .faults import Fault

#: Generous: the machine running the suite may be loaded.
TIMEOUT = 120



@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A training file big enough that an epoch takes a moment, and a small WARP model."""
    folder = tmp_path_factory.mktemp("signals")
    rng = np.random.default_rng(2)
    lines = [f"u{u}\ti{int(i)}\n" for u in range(1500) for i in rng.choice(600, 20, replace=False)]
    train = folder / "train.tsv"
    train.write_text("".join(lines))
    model = folder / "warp.npz"
    assert run("train", train, "-o", model, "--epochs", 1, "--factors", 8, "-q").exit_code == 0
    return {"train": train, "model": model}


def _default_signals():
    # as a shell starts a foreground command: the test runner may have changed some
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)


class Command:
    """The real command in a new session (with ``fault`` injected when given); its standard
    error read line by line as it comes."""

    def __init__(self, *args, env=None, python_code=None, fault=None, preexec=_default_signals):
        full_env = dict(os.environ)
        full_env.update(env or {})
        if fault is not None:
            argv, full_env = fault.argv(*args), fault.env(full_env)
        else:
            head = ["-c", python_code] if python_code else ["-m", "mrec_warp"]
            argv = [sys.executable, *head, *map(str, args)]
        self.proc = subprocess.Popen(argv, env=full_env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True, preexec_fn=preexec)
        self.lines: "queue.Queue[str | None]" = queue.Queue()
        self.seen: List[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stderr:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)  # every holder of the pipe has closed it

    def wait_for_line(self, needle: str) -> None:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"ended before {needle!r}: {self.seen}")
            self.seen.append(line)
            if needle in line:
                return
        raise AssertionError(f"no {needle!r} within {TIMEOUT} s: {self.seen}")

    def stop(self, signum: int, group: bool = False) -> List[str]:
        """Send ``signum`` (to the whole process group, as a terminal sends Ctrl-C, with
        ``group``); the lines after it, once the pipe is closed and the command ended."""
        if group:
            os.killpg(self.proc.pid, signum)
        else:
            self.proc.send_signal(signum)
        after = []
        deadline = time.monotonic() + TIMEOUT
        try:
            while True:
                # the pipe closes only when no process holds it: a worker left running keeps it open
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
                if line is None:
                    break
                after.append(line)
            self.proc.wait(timeout=TIMEOUT)
        except (queue.Empty, subprocess.TimeoutExpired):
            self.kill_session()
            raise AssertionError(f"still running or its pipe still open {TIMEOUT} s after the signal: {after}")
        return after

    def session(self) -> List[str]:
        """The processes (not zombies) still in the command's session."""
        left = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == self.proc.pid and fields[0] != "Z":
                left.append(pid)
        return left

    def kill_session(self) -> None:
        for pid in self.session():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass

    def assert_no_process_left(self) -> None:
        deadline = time.monotonic() + TIMEOUT
        while self.session():
            if time.monotonic() > deadline:
                left = self.session()
                self.kill_session()
                raise AssertionError(f"processes outlived the command: {left}")
            time.sleep(0.1)


def the_line(after: List[str]) -> str:
    """The command's last words: one error line, the last, and no traceback."""
    errors = [ln for ln in after if ln.startswith("Error:")]
    assert len(errors) == 1 and after and after[-1] == errors[0], after
    noisy = [ln for ln in after if "Traceback" in ln or "Warning" in ln]
    assert not noisy, noisy  # the offending lines themselves (the whole output can be long)
    return errors[0]


def stopped_by(signum: int) -> str:
    return "Error: interrupted" if signum == signal.SIGINT else f"Error: stopped by {signal.Signals(signum).name}"


def listing(folder: Path):
    return sorted(p.name for p in folder.iterdir())


# -- the command stops, says so once, and leaves what was there -------------------------------------
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_a_signal_stops_training_with_one_line_and_the_old_model_kept(data, tmp_path, signum):
    out = tmp_path / "model.npz"
    out.write_bytes(data["model"].read_bytes())
    cmd = Command("train", data["train"], "-o", out, "--epochs", 100000, "-v")
    cmd.wait_for_line("fit epoch")
    after = cmd.stop(signum)
    assert cmd.proc.returncode == 128 + signum
    assert the_line(after) == stopped_by(signum)
    assert out.read_bytes() == data["model"].read_bytes()
    assert listing(tmp_path) == ["model.npz"]
    cmd.assert_no_process_left()


#: The real command, with a function held at its Nth call (argv 1-2: ``module:name``, N), so
#: that the signal comes while an output is half written.
HOLD = """
import importlib, sys, time
target, nth, args = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
module, _, name = target.partition(":")
owner = importlib.import_module(module)
*path, name = name.split(".")
for p in path:
    owner = getattr(owner, p)
original = getattr(owner, name)
calls = []
def hold(*a, **k):
    result = original(*a, **k)
    calls.append(1)
    if len(calls) == nth:
        sys.stderr.write("holding\\n"); sys.stderr.flush()
        for _ in range(2400):
            time.sleep(0.05)
    return result
setattr(owner, name, hold)
from mrec_warp.cli import main
main(args, prog_name="mrec-warp")
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_mid_write_removes_the_partial_file_and_keeps_the_old_output(data, tmp_path, signum):
    out = tmp_path / "recs.tsv"
    out.write_bytes(b"u1\ti1\t1.0\n")  # yesterday's recommendations
    # held at the second block: the first one is in the temporary file
    cmd = Command("mrec_warp.stages.recommend:block_to_frame", 2, "recommend", data["model"], "-o", out,
                  "--block-size", 100, "-q", python_code=HOLD)
    cmd.wait_for_line("holding")
    assert any(name.startswith(".recs.") for name in listing(tmp_path))  # the partial file is there
    after = cmd.stop(signum)
    assert cmd.proc.returncode == 128 + signum
    assert the_line(after) == f"{stopped_by(signum)}; removed the partial {out}"
    assert listing(tmp_path) == ["recs.tsv"] and out.read_bytes() == b"u1\ti1\t1.0\n"
    cmd.assert_no_process_left()


def test_sigterm_mid_prepare_into_an_existing_split_keeps_it_whole(data, tmp_path):
    split = tmp_path / "split"
    assert run("prepare", data["train"], "-o", split, "--seed", 1, "-q").exit_code == 0
    (split / "notes.txt").write_text("mine")
    before = {p.name: p.read_bytes() for p in split.iterdir()}
    # held at the first file's sync: train.tsv written, not yet in place
    cmd = Command("os:fsync", 1, "prepare", data["train"], "-o", split, "--seed", 2, "-q",
                  python_code=HOLD)
    cmd.wait_for_line("holding")
    assert any(name.startswith(".train.") for name in listing(split))  # train.tsv half replaced
    after = cmd.stop(signal.SIGTERM)
    assert cmd.proc.returncode == 143
    assert the_line(after) == f"Error: stopped by SIGTERM; removed the partial {split / 'train.tsv'}"
    assert {p.name: p.read_bytes() for p in split.iterdir()} == before


def test_a_signal_mid_prepare_says_which_splits_were_kept_and_which_removed(data, tmp_path):
    out = tmp_path / "new" / "splits"  # both folders made by the command
    # held at split-1's train.tsv (files synced: split-0's train, test, summary, then split-1's train)
    cmd = Command("os:fsync", 4, "prepare", data["train"], "-o", out, "--num-splits", 3, "-q",
                  python_code=HOLD)
    cmd.wait_for_line("holding")
    after = cmd.stop(signal.SIGTERM)
    assert cmd.proc.returncode == 143  # (trial of issue 20, item 9)
    assert the_line(after) == (f"Error: stopped by SIGTERM; removed the partial {out / 'split-1'}; "
                               f"kept the finished {out / 'split-0'}")
    assert listing(out) == ["split-0"] and listing(out / "split-0") == ["summary.json", "test.tsv", "train.tsv"]


def test_a_signal_removes_the_empty_folders_made_for_the_output(data, tmp_path):
    out = tmp_path / "outdir" / "deeper" / "recs.tsv"
    cmd = Command("mrec_warp.stages.recommend:block_to_frame", 2, "recommend", data["model"], "-o", out,
                  "--block-size", 100, "-q", python_code=HOLD)
    cmd.wait_for_line("holding")
    after = cmd.stop(signal.SIGINT)
    assert cmd.proc.returncode == 130
    assert the_line(after) == f"Error: interrupted; removed the partial {out}"
    assert listing(tmp_path) == []  # outdir/deeper, made for recs.tsv, went with it


@pytest.mark.parametrize("signum, group", [(signal.SIGTERM, False), (signal.SIGINT, True)],
                         ids=["SIGTERM", "Ctrl-C on a terminal"])  # Ctrl-C reaches the workers too
def test_a_signal_stops_process_workers_and_removes_a_work_folder_of_no_finished_unit(data, tmp_path, signum,
                                                                                      group):
    out = tmp_path / "m.npz"
    cmd = Command("train", data["train"], "-o", out, "--sub-models", 2, "--backend", "processes", "--n-jobs", 2,
                  "--epochs", 100000, "--factors", 4, "-v")
    cmd.wait_for_line("fit epoch")  # a sub-model's epoch, from a worker process
    after = cmd.stop(signum, group)  # returns only once no process holds the pipe
    assert cmd.proc.returncode == 128 + signum
    # no sub-model finished: nothing to resume, so no promise of it, and the folder the
    # command made (its staged inputs.npz, job.json) is gone (trial of issue 20, item 5)
    assert the_line(after) == stopped_by(signum)
    cmd.assert_no_process_left()
    assert listing(tmp_path) == []


def test_a_signal_with_a_finished_sub_model_keeps_the_work_folder(data, tmp_path):
    out = tmp_path / "m.npz"
    held = Fault.at("wait:1", tmp_path / "fault")
    cmd = Command("train", data["train"], "-o", out, "--sub-models", 2, "--epochs", 1, "--factors", 4, "-v",
                  fault=held)
    parts = tmp_path / "m.npz.parts"
    deadline = time.monotonic() + TIMEOUT
    while not (held.fired.exists() and (parts / "submodel-000.npz").exists()):
        assert time.monotonic() < deadline and cmd.proc.poll() is None, cmd.seen
        time.sleep(0.05)
    after = cmd.stop(signal.SIGTERM)
    assert the_line(after) == "Error: stopped by SIGTERM (rerun the same command to resume from its work folder)"
    left = listing(parts)
    assert "job.json" in left and "submodel-000.npz" in left and "lock" not in left, left
    assert not [n for n in left if n.startswith(".")], left


def test_a_signal_removes_the_partial_parts_of_thread_workers(data, tmp_path):
    # each part is written through a temporary file by a thread of the command; the signal
    # comes while one is half written (trial of issue 20, item 3)
    out, work = tmp_path / "recs.tsv", tmp_path / "W"
    cmd = Command("mrec_warp.stages.recommend:block_to_frame", 3, "recommend", data["model"], "-o", out,
                  "--workdir", work, "--part-size", 400, "--block-size", 100, "--n-jobs", 2, "-q",
                  python_code=HOLD)
    cmd.wait_for_line("holding")
    assert [n for n in listing(work) if n.startswith(".part-")], listing(work)  # a part half written
    after = cmd.stop(signal.SIGTERM)
    assert cmd.proc.returncode == 143
    assert the_line(after).startswith("Error: stopped by SIGTERM")
    left = listing(work) if work.exists() else []
    assert not [n for n in left if n.startswith(".")], left
    assert not out.exists()


def test_loky_s_resource_tracker_is_started_silenced(data, tmp_path):
    # the tracker reports what a command stopped by a signal left registered (semaphores,
    # memory-mapped folders) as a UserWarning on the inherited standard error, after the
    # command's one line (trial of issue 20, item 4: `timeout 5 ... --backend processes`,
    # 3 runs of 12); it inherits the command's environment, and the filter with it
    held = Fault.at("wait:0", tmp_path / "fault")
    cmd = Command("recommend", data["model"], "-o", tmp_path / "recs.tsv", "--backend", "processes",
                  "--n-jobs", 2, "--part-size", 500, "-v", fault=held)
    cmd.wait_for_line("running 3 parts")
    deadline = time.monotonic() + TIMEOUT
    while not held.fired.exists():  # the pool is up, part 0 held in a worker
        assert time.monotonic() < deadline and cmd.proc.poll() is None, cmd.seen
        time.sleep(0.05)
    trackers = []
    for pid in cmd.session():
        with contextlib.suppress(OSError):
            if b"resource_tracker" in Path(f"/proc/{pid}/cmdline").read_bytes():
                trackers.append(Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"))
    line = the_line(cmd.stop(signal.SIGTERM))
    cmd.assert_no_process_left()
    assert line.startswith("Error: stopped by SIGTERM")
    assert trackers, "no resource tracker found"
    for environ in trackers:
        filters = [v for v in environ if v.startswith(b"PYTHONWARNINGS=")]
        assert filters and b"ignore:resource_tracker:UserWarning" in filters[0], filters


def test_sigterm_shuts_a_local_dask_cluster_down(data, tmp_path):
    pytest.importorskip("distributed")
    cmd = Command("train", data["train"], "-o", tmp_path / "m.npz", "--sub-models", 2, "--backend", "dask",
                  "--n-jobs", 2, "--epochs", 100000, "--factors", 4, "-v")
    cmd.wait_for_line("fit epoch")  # a sub-model's epoch, from a Dask worker
    after = cmd.stop(signal.SIGTERM)
    assert cmd.proc.returncode == 143
    # no sub-model finished: nothing to resume, and the folder the command made is gone
    assert the_line(after) == "Error: stopped by SIGTERM"
    cmd.assert_no_process_left()  # the scheduler, nannies and workers went with it
    assert not (tmp_path / "m.npz.parts").exists()


def test_resume_is_promised_only_when_a_part_was_kept(data, tmp_path):
    out = tmp_path / "recs.tsv"
    parts = tmp_path / "recs.tsv.parts"
    held = Fault.at("wait:0", tmp_path / "fault")
    cmd = Command("recommend", data["model"], "-o", out, "--backend", "processes", "--n-jobs", 2,
                  "--part-size", 500, "-v", fault=held)
    cmd.wait_for_line("running 3 parts")
    deadline = time.monotonic() + TIMEOUT
    while not held.fired.exists():  # part 0 is held in a worker
        assert time.monotonic() < deadline and cmd.proc.poll() is None, cmd.seen
        time.sleep(0.05)
    line = the_line(cmd.stop(signal.SIGTERM))
    cmd.assert_no_process_left()
    assert not out.exists()
    # the other worker may or may not have finished a part by then: the line says which
    kept = parts.exists() and any(p.name.startswith("part-") for p in parts.iterdir())
    if kept:
        assert line == "Error: stopped by SIGTERM (rerun the same command to resume from its work folder)"
        assert not [p.name for p in parts.iterdir() if p.name.startswith(".")]
    else:  # and the folder it made for nothing is gone
        assert line == "Error: stopped by SIGTERM" and not parts.exists()


def test_sigterm_mid_tune_removes_its_temporary_work_folder(data, tmp_path):
    out, tmp = tmp_path / "out", tmp_path / "tmp"
    out.mkdir()
    tmp.mkdir()
    cmd = Command("tune", data["train"], "-o", out / "trials.tsv", "--random", 2, "--max-epochs", 100000, "-v",
                  env={"TMPDIR": str(tmp)})
    cmd.wait_for_line("tune: 3 trials")  # its work folder is in TMPDIR now
    after = cmd.stop(signal.SIGTERM)
    assert the_line(after) == "Error: stopped by SIGTERM" and cmd.proc.returncode == 143
    assert listing(tmp) == [] and listing(out) == []
    cmd.assert_no_process_left()


def test_sighup_ignored_by_nohup_stays_ignored(data, tmp_path):
    def nohup():
        _default_signals()
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    cmd = Command("train", data["train"], "-o", tmp_path / "m.npz", "--epochs", 100000, "-v", preexec=nohup)
    cmd.wait_for_line("fit epoch")
    with open(f"/proc/{cmd.proc.pid}/status") as fh:
        masks = dict(line.split(":\t") for line in fh.read().splitlines() if line.startswith("Sig"))
    assert int(masks["SigIgn"], 16) >> (signal.SIGHUP - 1) & 1  # still ignored ...
    assert int(masks["SigCgt"], 16) >> (signal.SIGTERM - 1) & 1  # ... while SIGTERM is caught
    # the hang-up first: a SIGHUP that stopped the run would be the one the line names
    cmd.proc.send_signal(signal.SIGHUP)
    after = cmd.stop(signal.SIGTERM)
    assert the_line(after) == "Error: stopped by SIGTERM" and cmd.proc.returncode == 143
    assert listing(tmp_path) == []


#: The command's first second: the package imported (as the console script imports it), the
#: rest of its imports and its own handlers not yet there.
STARTING = """
import sys, time
sys.argv[0] = "mrec-warp"
import mrec_warp
sys.stderr.write("imported\\n"); sys.stderr.flush()
time.sleep(120)
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_signal_while_the_command_starts_gets_its_line(signum):
    cmd = Command(python_code=STARTING)
    cmd.wait_for_line("imported")
    after = cmd.stop(signum)
    assert cmd.proc.returncode == 128 + signum  # (trial of issue 20, item 8)
    assert after == [stopped_by(signum)]


def test_importing_the_library_changes_no_signal_handler():
    code = ("import signal, mrec_warp; "
            "print([signal.getsignal(s) in (signal.SIG_DFL, signal.default_int_handler) "
            "for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT)
    assert out.stdout.strip() == "[True, True, True]", out.stderr


# -- what killed runs left: removed by the next run, and only that ------------------------------------
def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_the_next_run_removes_what_dead_runs_left_in_its_output_folder_and_nothing_else(data, tmp_path):
    dead, me, host = dead_pid(), os.getpid(), host_name()
    stale = [f".recs.~{dead}@{host}~abcd1234.tsv", f".other.tsv.~{dead}@{host}~x1_y2z3w.gz",
             f".model.~{dead}@{host}~0000aaaa.npz"]
    stale_folder = tmp_path / f".split.~{dead}@{host}~abcd1234"  # prepare's folder being written
    kept = [f".recs.~{me}@{host}~abcd1234.tsv",  # a run still going (this one)
            f".recs.~{dead}@another-host~abcd1234.tsv",  # a run that cannot be checked from here
            f".recs.~{dead}@{host}~abcd1234.tsv.orig",  # near misses: not our names
            f"recs.~{dead}@{host}~abcd1234.tsv", f".recs.~{dead}@{host}~abcd12345.tsv",
            f".recs.~{dead}@{host}~ABCD1234.tsv", "notes.txt"]
    for name in stale + kept:
        (tmp_path / name).write_text("x")
    stale_folder.mkdir()
    (stale_folder / "train.tsv").write_text("half")
    r = run("recommend", data["model"], "-o", tmp_path / "new.tsv", "-k", 2, "-q")
    assert r.exit_code == 0, r.output
    assert listing(tmp_path) == sorted(kept + ["new.tsv"])


def test_remove_stale_temps_with_a_prefix_matches_whole_names_only(tmp_path):
    dead, host = dead_pid(), host_name()
    for name in (f"mrec-warp-fit-~{dead}@{host}~abcd1234", f"mrec-warp-fit-~{dead}@{host}~abcd1234-mine",
                 f"mrec-warp-fit-x~{dead}@{host}~abcd1234"):
        (tmp_path / name).mkdir()
    assert remove_stale_temps(tmp_path, prefix="mrec-warp-fit-") == [f"mrec-warp-fit-~{dead}@{host}~abcd1234"]
    assert len(listing(tmp_path)) == 2


# -- the mechanism ------------------------------------------------------------------------------------
def test_stop_on_signals_raises_stopped_and_restores_the_handlers():
    before = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    with pytest.raises(Stopped) as caught, stop_on_signals():
        assert all(signal.getsignal(s) not in (signal.SIG_DFL, signal.default_int_handler) for s in STOP_SIGNALS)
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(200):  # the handler runs at the next bytecode boundary
            time.sleep(0.01)
    assert isinstance(caught.value, KeyboardInterrupt)  # every Ctrl-C clean-up applies
    assert caught.value.signum == signal.SIGTERM and caught.value.exit_status == 143
    assert caught.value.name == "SIGTERM"
    assert {s: signal.getsignal(s) for s in STOP_SIGNALS} == before


def test_stop_on_signals_leaves_an_ignored_signal_ignored_and_other_threads_alone():
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with stop_on_signals():
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)
    seen = []

    def in_thread():
        with stop_on_signals():
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join()
    assert seen == [signal.getsignal(signal.SIGTERM)]
