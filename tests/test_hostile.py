"""Hostile command lines: each ends in one line on standard error, exit 2, and nothing left behind.

Every case is a row of a table: the arguments, the message fragment expected, and the files
that must not exist afterwards. Beyond those, a case may not leave any new file at all (no
partial output, no temporary twin), must not print a traceback (or click's bare
``Aborted!``) and must exit with a status, not a signal. Disk full and read-only folders
are real small tmpfs mounts where the sandbox allows ``mount``, a simulated ``ENOSPC`` /
``EROFS`` otherwise (and always, in process).
"""
from __future__ import annotations

import errno
import gzip
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from mrec_warp.cli import main


def _ratings_text(n_users: int = 300, n_items: int = 200, per_user: int = 20) -> str:
    rng = np.random.default_rng(0)
    lines = [f"u{u}\ti{i}\t{int(rng.integers(1, 6))}\t{1_000_000 + 7 * u + i}"
             for u in range(n_users) for i in rng.choice(n_items, per_user, replace=False)]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A ratings file, its gzip twins (good, truncated, corrupt, fake) and a trained model."""
    d = tmp_path_factory.mktemp("inputs")
    text = _ratings_text()
    (d / "ratings.tsv").write_text(text)
    packed = gzip.compress(text.encode())
    (d / "ratings.tsv.gz").write_bytes(packed)
    (d / "truncated.tsv.gz").write_bytes(packed[: len(packed) // 2])
    (d / "corrupt.tsv.gz").write_bytes(packed[:40] + b"\x00garbage" * 20 + packed[200:])
    (d / "fake.tsv.gz").write_text(text)  # plain text named .gz
    result = CliRunner().invoke(main, ["train", str(d / "ratings.tsv"), "-o", str(d / "model.npz"),
                                       "--epochs", "1", "--factors", "64", "-q"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return d


def _files(folder: Path) -> set:
    return {p.relative_to(folder) for p in folder.rglob("*") if p.is_file()}


def run_cli(*args):
    """The real entry point in a subprocess, without a debug setting inherited from the shell."""
    env = {k: v for k, v in os.environ.items() if k != "MREC_WARP_DEBUG"}
    return subprocess.run([sys.executable, "-m", "mrec_warp", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300)


def assert_one_line_error(status: int, stdout: str, stderr: str, fragment: str, one_line: bool = True) -> None:
    assert status >= 0, f"killed by signal {-status}"
    assert "Traceback" not in stdout + stderr and "Aborted!" not in stderr, stderr
    assert status == 2, (status, stderr)
    assert fragment in stderr, stderr
    if one_line:
        lines = [line for line in stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("Error: "), stderr


# (id, argument template, fragment, outputs that must not exist, whether the error is one line)
# {in} is the inputs folder, {out} a fresh empty folder of the case.
CASES = [
    ("train-truncated-gz", "train {in}/truncated.tsv.gz -o {out}/m.npz --epochs 1",
     "truncated.tsv.gz: truncated or corrupt gzip file", ["m.npz"], True),
    ("train-corrupt-gz", "train {in}/corrupt.tsv.gz -o {out}/m.npz --epochs 1",
     "corrupt.tsv.gz: truncated or corrupt gzip file", ["m.npz"], True),
    ("train-not-gzip", "train {in}/fake.tsv.gz -o {out}/m.npz --epochs 1",
     "fake.tsv.gz: truncated or corrupt gzip file", ["m.npz"], True),
    ("prepare-truncated-gz", "prepare {in}/truncated.tsv.gz -o {out}/split",
     "truncated.tsv.gz: truncated or corrupt gzip file", ["split/train.tsv", "split/summary.json"], True),
    ("evaluate-truncated-gz", "evaluate --train {in}/truncated.tsv.gz --test {in}/ratings.tsv --recs "
     "{in}/ratings.tsv --json {out}/report.json", "truncated or corrupt gzip file", ["report.json"], True),
    ("prepare-empty-sep", "prepare {in}/ratings.tsv -o {out}/split --sep=", "empty delimiter", ["split"], False),
    ("train-learning-rate-1e6", "train {in}/ratings.tsv -o {out}/m.npz --learning-rate 1e6 --epochs 2",
     "lower the learning rate", ["m.npz"], True),
    ("train-learning-rate-1e6-early-stopping", "train {in}/ratings.tsv -o {out}/m.npz --learning-rate 1e6 "
     "--max-epochs 3", "training diverged at epoch 1", ["m.npz"], True),
    ("train-epochs-0", "train {in}/ratings.tsv -o {out}/m.npz --epochs 0", "epochs must be >= 1", ["m.npz"], True),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_hostile_command_line(case, inputs, tmp_path):
    _, template, fragment, must_not_exist, one_line = case
    args = template.replace("{in}", str(inputs)).replace("{out}", str(tmp_path)).split()
    before = _files(inputs)
    proc = run_cli(*args)
    assert_one_line_error(proc.returncode, proc.stdout, proc.stderr, fragment, one_line)
    for name in must_not_exist:
        assert not (tmp_path / name).exists(), name
    assert _files(tmp_path) == set(), "nothing may be left behind"
    assert _files(inputs) == before, "the inputs folder changed"


# -- disk full and read-only folders: real filesystems where mount works ---------------------------------
@pytest.fixture
def small_mount(tmp_path):
    """Mount tmpfs filesystems: ``mount(name, options)`` returns the folder; unmounted after."""
    mounted = []

    def mount(name: str, options: str) -> Path:
        target = tmp_path / name
        target.mkdir()
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip() or proc.returncode})")
        mounted.append(target)
        return target

    yield mount
    for target in mounted:
        subprocess.run(["umount", str(target)], check=False)


OUTPUT_CASES = [
    # (id, argument template: {in} is the inputs folder, {out} the folder to write in)
    ("train", "train {in}/ratings.tsv -o {out}/m.npz --epochs 1 --factors 64"),
    ("recommend", "recommend {in}/model.npz -o {out}/recs.tsv -k 50"),
    ("similar", "similar {in}/model.npz --items i1,i2,i3,i4,i5,i6,i7,i8 -k 190 -o {out}/similar.tsv"),
    ("prepare", "prepare {in}/ratings.tsv -o {out}/split"),
    ("synth", "synth -o {out}/synth"),
]


@pytest.mark.parametrize("case", OUTPUT_CASES, ids=[c[0] for c in OUTPUT_CASES])
def test_disk_full_on_a_small_filesystem(case, inputs, small_mount):
    out = small_mount("full", "size=16k")
    proc = run_cli(*case[1].replace("{in}", str(inputs)).replace("{out}", str(out)).split())
    assert_one_line_error(proc.returncode, proc.stdout, proc.stderr, "No space left on device")
    assert "free some space" in proc.stderr
    assert _files(out) == set(), "no partial output and no temporary file"
    assert list(out.iterdir()) == [], "no output folder the command made and could not fill"
    assert "/." not in proc.stderr, "the output is named, not its temporary twin"


def test_disk_full_in_factors_export_leaves_no_folder(inputs, small_mount):
    out = small_mount("full", "size=16k")
    proc = run_cli("factors", "--export", inputs / "model.npz", out / "exported")
    assert_one_line_error(proc.returncode, proc.stdout, proc.stderr, "No space left on device")
    assert f"cannot write {out / 'exported'}" in proc.stderr
    assert list(out.iterdir()) == []


def test_disk_full_in_worker_processes_leaves_no_partial_part(inputs, tmp_path, small_mount):
    """recommend --backend processes into a work folder on a full disk: one line naming a part,
    the finished parts kept for a rerun, no temporary of a part the stopped workers were writing."""
    out = small_mount("parts", "size=300k")
    workdir = out / "wd"
    for _ in range(3):  # which units are in flight when the disk fills varies: a few tries
        proc = run_cli("recommend", inputs / "model.npz", "-o", tmp_path / "recs.tsv", "-k", "100", "--backend",
                       "processes", "--n-jobs", "2", "--workdir", workdir, "--part-size", "50")
        assert_one_line_error(proc.returncode, proc.stdout, proc.stderr, "No space left on device")
        assert f"cannot write {workdir}/part-0000" in proc.stderr
        left = {p.name for p in workdir.iterdir()} if workdir.exists() else set()
        assert not [name for name in left if name.startswith(".")], left
        subprocess.run(["rm", "-rf", str(workdir)], check=True)
    assert not (tmp_path / "recs.tsv").exists()


@pytest.mark.parametrize("case", OUTPUT_CASES, ids=[c[0] for c in OUTPUT_CASES])
def test_read_only_filesystem(case, inputs, small_mount):
    out = small_mount("ro", "ro,size=16k")
    proc = run_cli(*case[1].replace("{in}", str(inputs)).replace("{out}", str(out)).split())
    assert_one_line_error(proc.returncode, proc.stdout, proc.stderr, "Read-only file system")
    assert f"cannot write {out}" in proc.stderr


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes through chmod")
def test_read_only_folder_by_permissions(inputs, tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        proc = run_cli("train", inputs / "ratings.tsv", "-o", folder / "m.npz", "--epochs", "1")
    finally:
        folder.chmod(0o755)
    assert_one_line_error(proc.returncode, proc.stdout, proc.stderr, "Permission denied")
    assert _files(folder) == set()


# -- simulated faults, in process (work anywhere) ----------------------------------------------------------
def _failing_fsync(code: int):
    def fsync(fd):
        raise OSError(code, os.strerror(code))
    return fsync


@pytest.mark.parametrize("code, fragment", [(errno.ENOSPC, "No space left on device"),
                                            (errno.EROFS, "Read-only file system"),
                                            (errno.EACCES, "Permission denied")])
@pytest.mark.parametrize("case", OUTPUT_CASES, ids=[c[0] for c in OUTPUT_CASES])
def test_simulated_write_faults(case, code, fragment, inputs, tmp_path, monkeypatch):
    # the data reaches the disk at fsync, where a full disk shows up at the latest
    monkeypatch.setattr(os, "fsync", _failing_fsync(code))
    monkeypatch.delenv("MREC_WARP_DEBUG", raising=False)
    args = case[1].replace("{in}", str(inputs)).replace("{out}", str(tmp_path)).split()
    result = CliRunner().invoke(main, args)
    assert_one_line_error(result.exit_code, result.stdout, result.stderr, fragment)
    assert f"cannot write {tmp_path}" in result.stderr
    assert _files(tmp_path) == set(), "no partial output and no temporary file"


# -- unexpected exceptions: one line and a pointer to --debug ---------------------------------------------
def _explode(*args, **kwargs):
    raise RuntimeError("something nobody\nexpected")


@pytest.fixture
def broken_reader(monkeypatch):
    import mrec_warp.stages._inputs as train_inputs  # where train reads its ratings

    monkeypatch.setattr(train_inputs, "read_ratings", _explode)
    monkeypatch.delenv("MREC_WARP_DEBUG", raising=False)


def test_unexpected_exception_is_one_line_with_a_pointer_to_debug(inputs, tmp_path, broken_reader):
    result = CliRunner().invoke(main, ["train", str(inputs / "ratings.tsv"), "-o", str(tmp_path / "m.npz")])
    assert result.exit_code == 3, result.output
    assert result.stderr == ("Error: unexpected RuntimeError: something nobody expected "
                             "(run with --debug for the traceback)\n")
    assert _files(tmp_path) == set()


@pytest.mark.parametrize("how", ["option", "env"])
def test_debug_shows_the_traceback(inputs, tmp_path, broken_reader, monkeypatch, how):
    args = ["train", str(inputs / "ratings.tsv"), "-o", str(tmp_path / "m.npz")]
    if how == "option":
        args = ["--debug"] + args
    else:
        monkeypatch.setenv("MREC_WARP_DEBUG", "1")
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 3
    assert "Traceback" in result.stderr and "_explode" in result.stderr
    assert result.stderr.rstrip().splitlines()[-1].startswith("Error: unexpected RuntimeError")


def test_debug_is_off_by_default_and_with_zero(inputs, monkeypatch):
    monkeypatch.setenv("MREC_WARP_DEBUG", "0")
    result = CliRunner().invoke(main, ["train", str(inputs / "truncated.tsv.gz"), "-o", "unused.npz"])
    assert result.exit_code == 2 and "Traceback" not in result.stderr


def test_undecodable_input_names_the_file(inputs, tmp_path, monkeypatch):
    import mrec_warp.stages._inputs as train_inputs  # where train reads its ratings

    def undecodable(*args, **kwargs):
        raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")

    monkeypatch.setattr(train_inputs, "read_ratings", undecodable)
    result = CliRunner().invoke(main, ["train", str(inputs / "ratings.tsv"), "-o", str(tmp_path / "m.npz")])
    assert_one_line_error(result.exit_code, result.stdout, result.stderr,
                          f"{inputs / 'ratings.tsv'}: bytes that are not valid utf-8 text at byte 0")


def test_a_closed_pipe_stops_quietly(inputs):
    # `mrec-warp similar ... | head -1`: the reader goes away after one line
    proc = subprocess.Popen([sys.executable, "-m", "mrec_warp", "similar", str(inputs / "model.npz"),
                             "--items", ",".join(f"i{i}" for i in range(100)), "-k", "150"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline()
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 141 and stderr == ""


def test_an_os_error_without_a_file_is_not_blamed_on_an_output(inputs, tmp_path, monkeypatch):
    import mrec_warp.stages._inputs as train_inputs  # where train reads its ratings

    def refused(*args, **kwargs):
        raise ConnectionRefusedError(errno.ECONNREFUSED, os.strerror(errno.ECONNREFUSED))

    monkeypatch.setattr(train_inputs, "read_ratings", refused)
    monkeypatch.delenv("MREC_WARP_DEBUG", raising=False)
    result = CliRunner().invoke(main, ["train", str(inputs / "ratings.tsv"), "-o", str(tmp_path / "m.npz")])
    assert_one_line_error(result.exit_code, result.stdout, result.stderr, "ConnectionRefusedError: Connection refused")
    assert "m.npz" not in result.stderr


# -- inputs that are not text files of short lines: one line, before anything is written --------------
NOT_TEXT = {
    "utf16.csv": "user,item,rating\nZoë,a,5\nbob,b,3\n".encode("utf-16"),
    "utf16le.csv": "user,item,rating\nZoë,a,5\nbob,b,3\n".encode("utf-16-le"),
    "cr-in-id.tsv": b"u1\ti1\t5\nu2\tit\rem\t3\n",
    "old-mac.tsv": b"u1\ti1\t5\ru2\ti2\t3\r",
    "nul.tsv": b"u1\ti1\t5\nu2\t\x00\t3\n",
    "long-id.tsv": b"u1\ti1\t5\nu2\t" + b"x" * 65_537 + b"\t3\n",
    "long-line.tsv.gz": gzip.compress(b"u1\ti1\t5\n" + b"x" * (3 << 20)),
}
NOT_TEXT_CASES = [
    ("train-utf16", "train {out}/utf16.csv -o {out}/m.npz", "utf16.csv: file is UTF-16"),
    ("prepare-utf16-no-bom", "prepare {out}/utf16le.csv -o {out}/split", "utf16le.csv: file is UTF-16"),
    ("prepare-cr-in-id", "prepare {out}/cr-in-id.tsv -o {out}/split",
     "cr-in-id.tsv:2: line holds a carriage return (CR, \\r) that is not part of a CRLF line end"),
    ("train-old-mac", "train {out}/old-mac.tsv -o {out}/m.npz", "old-mac.tsv:1: line holds a carriage return"),
    ("train-nul", "train {out}/nul.tsv -o {out}/m.npz", "nul.tsv:2: line holds a NUL byte"),
    ("train-long-id", "train {out}/long-id.tsv -o {out}/m.npz",
     "long-id.tsv:2: item id 'xxxx"),
    ("train-long-line-gz", "train {out}/long-line.tsv.gz -o {out}/m.npz",
     "long-line.tsv.gz:2: line is longer than 1,048,576 bytes (the limit)"),
    ("train-dev-zero", "train /dev/zero -o {out}/m.npz", "/dev/zero: input file is a character device"),
    ("recommend-users-dev-zero", "recommend {in}/model.npz --users /dev/zero -o {out}/r.tsv",
     "/dev/zero: user list is a character device"),
    ("prepare-dev-null", "prepare /dev/null -o {out}/split", "/dev/null: input file is a character device"),
    ("evaluate-test-dev-zero", "evaluate --train {in}/ratings.tsv --test /dev/zero --recs {in}/ratings.tsv",
     "/dev/zero: test file is a character device"),
]


@pytest.mark.parametrize("case", NOT_TEXT_CASES, ids=[c[0] for c in NOT_TEXT_CASES])
def test_inputs_that_are_not_text_files_of_short_lines(case, inputs, tmp_path):
    _, template, fragment = case
    if "/dev/" in template and not os.path.exists("/dev/zero"):
        pytest.skip("needs /dev/zero and /dev/null")
    for name, data in NOT_TEXT.items():
        (tmp_path / name).write_bytes(data)
    args = template.replace("{in}", str(inputs)).replace("{out}", str(tmp_path)).split()
    proc = run_cli(*args)
    assert_one_line_error(proc.returncode, proc.stdout, proc.stderr, fragment)
    assert _files(tmp_path) == {Path(name) for name in NOT_TEXT}, "nothing may be left behind"


# -- a model path that is no regular file: every command's model read checks it first ---------------------
MODEL_READERS = [
    ("recommend", "recommend {model} -o {out}/recs.tsv"),
    ("similar", "similar {model} --items i1 -o {out}/similar.tsv"),
    ("explain", "explain {model} --user u1 -o {out}/explain.tsv"),
    ("index", "index {model}"),
    ("factors-export", "factors --export {model} {out}/exported"),
]


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
@pytest.mark.parametrize("case", MODEL_READERS, ids=[c[0] for c in MODEL_READERS])
def test_a_model_path_that_is_no_regular_file_is_refused_before_it_is_opened(case, kind, tmp_path):
    """A FIFO blocks an open() for as long as nobody writes to it, /dev/zero never ends: each
    is refused in one line naming what it is, before any byte is read (bounded by the
    subprocess timeout, the test cannot hang)."""
    model = tmp_path / "model.npz"
    if kind == "fifo":
        os.mkfifo(model)
    else:
        model.symlink_to("/dev/zero")
    out = tmp_path / "out"
    out.mkdir()
    proc = run_cli(*case[1].replace("{model}", str(model)).replace("{out}", str(out)).split())
    assert_one_line_error(proc.returncode, proc.stdout, proc.stderr,
                          "is a pipe" if kind == "fifo" else "character device")
    assert "model file" in proc.stderr and _files(out) == set()


# -- "-o -": standard output, never a file named "-" ----------------------------------------------------
def _run_in(folder: Path, *args, stdout=subprocess.PIPE):
    env = {k: v for k, v in os.environ.items() if k != "MREC_WARP_DEBUG"}
    return subprocess.run([sys.executable, "-m", "mrec_warp", *map(str, args)], cwd=folder, stdout=stdout,
                          stderr=subprocess.PIPE, env=env, timeout=300)


def test_dash_output_is_standard_output(inputs, tmp_path):
    """Text, Parquet, a model file and JSON all reach a pipe whole; what the command says
    (wrote ..., its table) goes to standard error then, and no file named '-' appears."""
    pq = pytest.importorskip("pyarrow.parquet")
    recs = _run_in(tmp_path, "recommend", inputs / "model.npz", "-o", "-", "-k", "2")
    assert recs.returncode == 0, recs.stderr
    rows = recs.stdout.decode().splitlines()
    assert len(rows) == 600 and all(len(r.split("\t")) == 4 for r in rows)  # 300 users x 2: nothing else
    assert b"wrote" in recs.stderr
    parquet = _run_in(tmp_path, "recommend", inputs / "model.npz", "-o", "-", "-k", "2", "--format", "parquet")
    assert parquet.returncode == 0, parquet.stderr
    import io

    assert pq.read_table(io.BytesIO(parquet.stdout)).num_rows == 600
    model = _run_in(tmp_path, "train", inputs / "ratings.tsv", "-o", "-", "--epochs", "1", "--factors", "4")
    assert model.returncode == 0, model.stderr
    (tmp_path / "piped.npz").write_bytes(model.stdout)
    from mrec_warp.models import load

    assert load(tmp_path / "piped.npz").n_users == 300
    split = tmp_path / "split"
    assert _run_in(tmp_path, "prepare", inputs / "ratings.tsv", "-o", split, "-q").returncode == 0
    (tmp_path / "recs.tsv").write_bytes(recs.stdout)
    report = _run_in(tmp_path, "evaluate", "--train", split / "train.tsv", "--test", split / "test.tsv",
                     "--recs", tmp_path / "recs.tsv", "--json", "-", "-k", "2")
    assert report.returncode == 0, report.stderr
    import json

    assert "runs" in json.loads(report.stdout)  # the table went to standard error
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("args, message", [
    ("prepare {in}/ratings.tsv -o -", "standard output cannot hold a folder"),
    ("synth -o -", "standard output cannot hold a folder"),
    ("factors --export {in}/model.npz -", "standard output cannot hold a folder"),
    ("train {in}/ratings.tsv -o {out}/m.npz --epochs 1 --workdir -", "standard output cannot hold a folder"),
    ("train {in}/ratings.tsv -o - --epochs 1 --ann", "--ann writes the index beside the model file"),
])
def test_dash_is_refused_where_standard_output_makes_no_sense(inputs, tmp_path, args, message):
    if "--ann" in args:
        pytest.importorskip("faiss")
    proc = _run_in(tmp_path, *args.replace("{in}", str(inputs)).replace("{out}", str(tmp_path)).split())
    assert_one_line_error(proc.returncode, proc.stdout.decode(), proc.stderr.decode(), message)
    assert proc.stdout == b"" and not Path("/dev/stdout.ann").exists()
    assert not (tmp_path / "-").exists() and _files(tmp_path) == set()


def test_disk_full_names_the_file_and_the_option_that_wrote_it(inputs, small_mount, tmp_path):
    """index writes MODEL.ann beside the model (it has no -o); tune --workdir fills its work
    folder, not its -o file: each message names the file that failed and only an option the
    command has."""
    beside = small_mount("beside", f"size={(inputs / 'model.npz').stat().st_size // 1024 + 8}k")
    model = beside / "model.npz"
    model.write_bytes((inputs / "model.npz").read_bytes())
    proc = run_cli("index", model)
    if "faiss" in proc.stderr:
        pytest.skip("needs faiss")
    assert_one_line_error(proc.returncode, proc.stdout, proc.stderr, f"cannot write {model}.ann: No space left")
    assert " -o" not in proc.stderr and "--output" not in proc.stderr and "standard output" not in proc.stderr
    work = small_mount("work", "size=16k")
    proc = run_cli("tune", inputs / "ratings.tsv", "--random", "1", "--models", "warp", "--max-epochs", "2",
                   "--workdir", work / "wd", "-o", tmp_path / "best.json", "-q")
    assert_one_line_error(proc.returncode, proc.stdout, proc.stderr, f"cannot write {work / 'wd'}")
    assert "with --workdir" in proc.stderr and "best.json" not in proc.stderr
