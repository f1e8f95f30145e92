"""Inputs given as pipes or FIFOs (``--users <(...)``, ``/dev/stdin``): read once, whole."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest
from click.testing import CliRunner

from mrec_warp.cli import main
from mrec_warp.data.id_lines import read_id_list
from mrec_warp.data.ratings import read_ratings
from mrec_warp.errors import InputError

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")


def fifo_with(tmp_path, name, data: bytes):
    """A FIFO that a daemon thread fills with ``data`` once a reader opens it."""
    path = tmp_path / name
    os.mkfifo(path)

    def feed():
        with open(path, "wb") as fh:
            fh.write(data)

    threading.Thread(target=feed, daemon=True).start()
    return path


@pytest.mark.parametrize("data", [b"u1\r\nj\xf6rg\n\n u 3\n", "\ufeffu1\nj\u00f6rg\n".encode()])
def test_id_list_from_a_fifo_equals_the_same_bytes_in_a_file(tmp_path, data):
    (tmp_path / "ids.txt").write_bytes(data)
    expected = read_id_list(tmp_path / "ids.txt")
    assert read_id_list(fifo_with(tmp_path, "ids.fifo", data)) == expected
    assert len(expected) >= 2


def test_ratings_from_a_fifo_equal_the_same_bytes_in_a_file(tmp_path):
    data = b"user,item,rating\nann,\"Warhammer 40,000\",5\nbob,x,3\n"
    (tmp_path / "r.csv").write_bytes(data)
    expected = read_ratings(tmp_path / "r.csv")
    got = read_ratings(fifo_with(tmp_path, "r.fifo", data))
    assert got.equals(expected) and got.attrs["reading"] == expected.attrs["reading"]
    assert list(got["item"]) == ["Warhammer 40,000", "x"]


def test_errors_in_a_fifo_name_the_fifo_not_a_temporary_copy(tmp_path):
    path = fifo_with(tmp_path, "r.fifo", b"ann\tx\t5\nbob\ty\tfive\n")
    with pytest.raises(InputError) as info:
        read_ratings(path)
    assert str(info.value).startswith(f"{path}:2: ") and "mrec-warp-input" not in str(info.value)
    with pytest.raises(InputError, match=r"r2\.fifo: input file is empty"):
        read_ratings(fifo_with(tmp_path, "r2.fifo", b""))
    with pytest.raises(InputError, match=r"ids\.fifo: user list is empty"):
        read_id_list(fifo_with(tmp_path, "ids.fifo", b""))


def test_cli_reads_users_and_history_from_standard_input(tmp_path):
    train = tmp_path / "train.tsv"
    train.write_text("u1\ta\nu1\tb\nu2\tb\nu2\tc\nu3\ta\nu3\tc\nu3\td\n")
    model = tmp_path / "m.npz"
    assert CliRunner().invoke(main, ["train", str(train), "-o", str(model), "--model", "itemknn"]).exit_code == 0
    env = dict(os.environ)

    def run(*args, stdin):
        return subprocess.run([sys.executable, "-m", "mrec_warp", *map(str, args)], input=stdin,
                              capture_output=True, text=True, env=env, timeout=120)

    out = tmp_path / "r.tsv"
    proc = run("recommend", model, "--users", "/dev/stdin", "-o", out, "-k", "2", stdin="u1\n")
    assert proc.returncode == 0, proc.stderr
    assert [r.split("\t")[0] for r in out.read_text().splitlines()] == ["u1", "u1"]
    proc = run("recommend", model, "--history", "/dev/stdin", "-o", out, "-k", "2", stdin="new\ta\n")
    assert proc.returncode == 0, proc.stderr
    rows = [r.split("\t") for r in out.read_text().splitlines()]
    assert [r[0] for r in rows if r[0] == "new"] == ["new", "new"] and ["new", "a"] not in [r[:2] for r in rows]


def test_recommendations_written_to_dev_stdout_reach_the_pipe(tmp_path):
    """``-o /dev/stdout`` in a pipe writes into the pipe; the atomic writer used to rename a
    temporary file over /dev/stdout (as root, replacing the device with a regular file)."""
    (tmp_path / "t.tsv").write_text("".join(f"u{u}\ti{(u * 7 + j) % 15}\n" for u in range(20) for j in range(4)))
    assert CliRunner().invoke(main, ["train", str(tmp_path / "t.tsv"), "-o", str(tmp_path / "m.npz"),
                                     "--model", "popularity", "-q"]).exit_code == 0
    exe = os.path.join(os.path.dirname(sys.executable), "mrec-warp")
    run = subprocess.run([exe, "recommend", str(tmp_path / "m.npz"), "-o", "/dev/stdout", "-k", "3", "-q"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert run.returncode == 0, run.stderr
    rows = run.stdout.decode().splitlines()
    assert len(rows) == 20 * 3 and rows[0].startswith("u0\ti")


def test_recommend_refuses_to_overwrite_its_exclude_items_file(tmp_path):
    (tmp_path / "t.tsv").write_text("".join(f"u{u}\ti{(u + j) % 9}\n" for u in range(10) for j in range(3)))
    (tmp_path / "drop.txt").write_text("i1\n")
    runner = CliRunner()
    assert runner.invoke(main, ["train", str(tmp_path / "t.tsv"), "-o", str(tmp_path / "m.npz"),
                                "--model", "popularity", "-q"]).exit_code == 0
    result = runner.invoke(main, ["recommend", str(tmp_path / "m.npz"), "-o", str(tmp_path / "." / "drop.txt"),
                                  "--exclude-items", str(tmp_path / "drop.txt")])
    assert result.exit_code != 0 and "--output would overwrite an input file" in result.output
    assert (tmp_path / "drop.txt").read_text() == "i1\n"


def test_dev_stdout_appends_to_the_file_the_shell_opened(tmp_path):
    """``... -o /dev/stdout >> out.txt`` appends to out.txt (same file, nothing before lost);
    following the /dev/stdout link and renaming over its target replaced the user's file."""
    (tmp_path / "t.tsv").write_text("".join(f"u{u}\ti{(u * 7 + j) % 15}\n" for u in range(20) for j in range(4)))
    assert CliRunner().invoke(main, ["train", str(tmp_path / "t.tsv"), "-o", str(tmp_path / "m.npz"),
                                     "--model", "popularity", "-q"]).exit_code == 0
    out = tmp_path / "out.txt"
    out.write_text("EXISTING\n")
    inode = out.stat().st_ino
    exe = os.path.join(os.path.dirname(sys.executable), "mrec-warp")
    with open(out, "a") as sink:
        run = subprocess.run([exe, "recommend", str(tmp_path / "m.npz"), "-o", "/dev/stdout", "-k", "2", "-q"],
                             stdout=sink, stderr=subprocess.PIPE, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = out.read_text().splitlines()
    assert out.stat().st_ino == inode and lines[0] == "EXISTING" and len(lines) == 1 + 20 * 2


def _shell(command: str, cwd) -> subprocess.CompletedProcess:
    """``command`` run by a shell in ``cwd`` with ``mrec-warp`` on the PATH (redirections as a user types them)."""
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    return subprocess.run(["sh", "-c", command], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=120)


@pytest.mark.parametrize("command", [
    "mrec-warp train t.tsv -o /dev/stdout --model popularity >> t.tsv",
    "mrec-warp train t.tsv -o /dev/fd/3 --model popularity 3>> t.tsv",
    "mrec-warp train - -o t.tsv --model popularity < t.tsv",
    "mrec-warp recommend m.npz -o /dev/stdout >> m.npz",
    "mrec-warp recommend m.npz -o /proc/self/fd/1 >> m.npz",
    "mrec-warp recommend m.npz -o r.tsv --users users.txt >> users.txt",
    "mrec-warp similar m.npz >> m.npz",
    "mrec-warp evaluate --train t.tsv --test t.tsv --recs r0.tsv --report /dev/stdout >> r0.tsv",
])
def test_output_into_an_input_through_the_shell_is_refused_and_the_input_kept(tmp_path, command):
    """``-o /dev/stdout >> t.tsv`` writes into t.tsv as surely as ``-o t.tsv``: the guard
    compares files by device and inode, so each is refused in one line (exit 2) and every
    input keeps its bytes (it corrupted the training file, or left the model unloadable)."""
    (tmp_path / "t.tsv").write_text("".join(f"u{u}\ti{(u * 7 + j) % 15}\n" for u in range(20) for j in range(4)))
    (tmp_path / "users.txt").write_text("u1\nu2\n")
    assert _shell("mrec-warp train t.tsv -o m.npz --model popularity -q && "
                  "mrec-warp recommend m.npz -o r0.tsv -q", tmp_path).returncode == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    run = _shell(command, tmp_path)
    err = run.stderr.decode()
    assert run.returncode == 2 and len(err.splitlines()) == 1 and "input file" in err, err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


# -- limits checked as the bytes arrive, and the temporary copy gone on every way out -------------
def endless_fifo(tmp_path, name, head: bytes, filler: bytes, total: int):
    """A FIFO fed ``head`` then ``filler`` up to ``total`` bytes; the feeder stops quietly
    when the reader closes its end early."""
    path = tmp_path / name
    os.mkfifo(path)

    def feed():
        try:
            with open(path, "wb") as fh:
                fh.write(head)
                for _ in range(total // len(filler)):
                    fh.write(filler)
        except BrokenPipeError:
            pass

    threading.Thread(target=feed, daemon=True).start()
    return path


@pytest.fixture
def spool_dir(tmp_path, monkeypatch):
    """The temporary folder piped inputs are copied into, empty, watched by the test."""
    import tempfile

    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_a_pipe_without_line_breaks_stops_at_the_line_limit_and_leaves_no_copy(tmp_path, spool_dir, monkeypatch):
    from mrec_warp.data import inputs

    monkeypatch.setattr(inputs, "MAX_LINE_BYTES", 1000)
    path = endless_fifo(tmp_path, "r.fifo", b"u\ti\t1\n", b"x" * 100, 10 << 20)
    with pytest.raises(InputError, match=r"r\.fifo:2: line is longer than 1,000 bytes"):
        read_ratings(path)
    assert list(spool_dir.iterdir()) == []


def test_a_pipe_of_nul_bytes_is_refused_at_once(tmp_path, spool_dir):
    path = endless_fifo(tmp_path, "z.fifo", b"", b"\x00" * 4096, 64 << 20)
    with pytest.raises(InputError, match=r"z\.fifo:1: line holds a NUL byte"):
        read_ratings(path)
    assert list(spool_dir.iterdir()) == []


def test_the_copy_stops_before_the_temporary_folder_fills(tmp_path, spool_dir, monkeypatch):
    from mrec_warp.data import inputs

    monkeypatch.setattr(inputs, "_CHUNK", 64)
    monkeypatch.setattr(inputs, "_free_bytes", lambda folder: inputs.SPOOL_RESERVE_BYTES)
    path = endless_fifo(tmp_path, "big.fifo", b"", b"u\ti\t1\n", 1 << 20)
    with pytest.raises(InputError, match=r"big\.fifo: the input is larger than the free space of the temporary"):
        read_ratings(path)
    assert list(spool_dir.iterdir()) == []


@pytest.mark.parametrize("fault", [KeyboardInterrupt, InputError, RuntimeError])
def test_the_copy_is_removed_on_every_way_out(tmp_path, spool_dir, fault):
    from mrec_warp.data.inputs import as_regular_file

    path = fifo_with(tmp_path, "r.fifo", b"u\ti\t1\n")
    with pytest.raises(fault):
        with as_regular_file(path) as copy:
            assert copy.parent == spool_dir and copy.read_bytes() == b"u\ti\t1\n"
            raise fault("stop")
    assert list(spool_dir.iterdir()) == []


def test_a_copy_left_by_a_killed_run_is_removed_by_the_next(tmp_path, spool_dir):
    from mrec_warp.data.inputs import SPOOL_PREFIX
    from mrec_warp.files import host_name

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = spool_dir / f"{SPOOL_PREFIX}~{int(dead.stdout)}@{host_name()}~abcd1234.tsv"  # as mkstemp names it
    stale.write_text("old")
    mine = spool_dir / f"{SPOOL_PREFIX}user-file.tsv"  # no owner tag: not ours, kept
    mine.write_text("keep")
    assert read_ratings(fifo_with(tmp_path, "r.fifo", b"u\ti\t1\n"))["user"].tolist() == ["u"]
    assert sorted(p.name for p in spool_dir.iterdir()) == [mine.name]


def test_cli_refuses_devices_and_reads_a_dash_as_standard_input(tmp_path):
    train = tmp_path / "train.tsv"
    train.write_text("u1\ta\nu1\tb\nu2\tb\nu2\tc\n")
    model = tmp_path / "m.npz"

    def run(*args, stdin=b""):
        return subprocess.run([sys.executable, "-m", "mrec_warp", *map(str, args)], input=stdin,
                              capture_output=True, timeout=120)

    proc = run("train", "-", "-o", model, "--model", "popularity", "-q", stdin=train.read_bytes())
    assert proc.returncode == 0, proc.stderr
    if os.path.exists("/dev/zero"):
        for args, fragment in [(("train", "/dev/zero", "-o", tmp_path / "x.npz"), "input file is a character device"),
                               (("recommend", model, "--users", "/dev/zero", "-o", tmp_path / "r.tsv"),
                                "user list is a character device")]:
            proc = run(*args)
            lines = proc.stderr.decode().strip().splitlines()
            assert proc.returncode == 2 and len(lines) == 1 and fragment in lines[0], proc.stderr
        assert not (tmp_path / "x.npz").exists() and not (tmp_path / "r.tsv").exists()
    proc = run("train", "-", "-o", tmp_path / "y.npz", stdin=b"\x00" * (1 << 20))
    assert proc.returncode == 2 and b"line holds a NUL byte" in proc.stderr and not (tmp_path / "y.npz").exists()


def test_a_full_temporary_folder_is_named_and_the_copy_removed(tmp_path, spool_dir, monkeypatch):
    import errno
    import io

    real_fdopen = os.fdopen

    class Full(io.RawIOBase):
        def __init__(self, fd):
            self.fh = real_fdopen(fd, "wb")

        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def close(self):
            self.fh.close()

    monkeypatch.setattr(os, "fdopen", lambda fd, mode="r", *a, **k: Full(fd) if mode == "wb" else real_fdopen(fd, mode))
    with pytest.raises(InputError, match=r"r\.fifo: the temporary folder .* is full \(a pipe is copied there"):
        read_ratings(fifo_with(tmp_path, "r.fifo", b"u\ti\t1\n"))
    assert list(spool_dir.iterdir()) == []
