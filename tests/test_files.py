"""Atomic writes: outputs get the mode a plain open() would give them."""
from __future__ import annotations

import os
import stat
import threading

import pytest

from mrec_warp.errors import InputError
from mrec_warp.files import FILE_MODE, atomic_path, atomic_write, check_outputs, is_stream


def test_atomic_outputs_get_the_usual_permissions(tmp_path):
    mask = os.umask(0o022)
    try:
        with atomic_write(tmp_path / "a.tsv") as fh:
            fh.write("x\n")
        with atomic_path(tmp_path / "b.npz") as tmp:
            open(tmp, "wb").close()
    finally:
        os.umask(mask)
    for name in ("a.tsv", "b.npz"):
        assert (tmp_path / name).stat().st_mode & 0o777 == FILE_MODE
    assert FILE_MODE & 0o044, "group/others can read outputs under a usual umask"


def test_a_symlinked_output_replaces_the_file_it_points_to_and_keeps_the_link(tmp_path):
    (tmp_path / "v1.tsv").write_text("old\n")
    (tmp_path / "latest.tsv").symlink_to("v1.tsv")
    with atomic_write(tmp_path / "latest.tsv") as fh:
        fh.write("new\n")
    assert (tmp_path / "latest.tsv").is_symlink()
    assert (tmp_path / "v1.tsv").read_text() == "new\n"


def test_a_fifo_output_is_written_in_place_not_replaced(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(open(fifo).read()))
    reader.start()
    with atomic_write(fifo) as fh:
        fh.write("a\tb\n")
    reader.join(timeout=10)
    assert received == ["a\tb\n"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # still a FIFO, not a regular file in its place
    assert is_stream(fifo) and not is_stream(tmp_path) and not is_stream(tmp_path / "missing")


def test_an_output_naming_an_input_is_refused_but_a_stream_never_clashes(tmp_path):
    data = tmp_path / "in.tsv"
    data.write_text("u\ti\n")
    with pytest.raises(InputError, match=r"`output` would overwrite an input file"):
        check_outputs({"`output`": str(tmp_path / "." / "in.tsv")}, [str(data)])
    check_outputs({"`output`": "/dev/null"}, ["/dev/null"])  # written in place: nothing to protect


def test_outputs_and_inputs_are_compared_as_files_not_names(tmp_path):
    """Device and inode decide, whatever the spelling: a hard link, a symbolic link, a
    descriptor the shell opened on the input (``3>> in.tsv``), standard input."""
    data = tmp_path / "in.tsv"
    data.write_text("u\ti\n")
    os.link(data, tmp_path / "hard.tsv")
    (tmp_path / "soft.tsv").symlink_to("in.tsv")
    for output in ("hard.tsv", "soft.tsv"):
        with pytest.raises(InputError, match=r"would overwrite an input file"):
            check_outputs({"`output`": str(tmp_path / output)}, [str(data)])
    fd = os.open(data, os.O_WRONLY | os.O_APPEND)
    try:
        for output in (f"/dev/fd/{fd}", f"/proc/self/fd/{fd}"):
            if not os.path.exists(output):
                continue
            with pytest.raises(InputError, match=r"would overwrite an input file \(.*in\.tsv: the shell opened"):
                check_outputs({"`output`": output}, [str(data)])
        # an output file and a descriptor open on it: one would replace what the other wrote
        with pytest.raises(InputError, match=r"--json and --report both write this file"):
            check_outputs({"--report": str(tmp_path / "soft.tsv"), "--json": f"/dev/fd/{fd}"}, [])
    finally:
        os.close(fd)
    saved = os.dup(0)
    try:  # `train - -o in.tsv < in.tsv`
        with open(data, "rb") as fh:
            os.dup2(fh.fileno(), 0)
        with pytest.raises(InputError, match=r"would overwrite an input file \(standard input\)"):
            check_outputs({"`output`": str(data)}, ["-"])
    finally:
        os.dup2(saved, 0)
        os.close(saved)
    # other files, and two spellings of one descriptor (they append in turn) are fine
    check_outputs({"--report": "/dev/stdout", "--json": "/proc/self/fd/1", "--plot": str(tmp_path / "p.png")},
                  [str(data), "-"])


def test_two_outputs_on_standard_output_are_refused(tmp_path):
    """`-` gives an output standard output to itself: a second one there (`-` or /dev/stdout)
    is refused in one line, for every command with several outputs (they all check here);
    /dev/stdout named twice stays the documented way to append."""
    with pytest.raises(InputError, match="--per-user and --json both write standard output"):
        check_outputs({"--json": "-", "--per-user": "-"}, [])
    with pytest.raises(InputError, match="--table and --output both write standard output"):
        check_outputs({"--output": "/dev/stdout", "--table": "-"}, [])
    check_outputs({"--report": "/dev/stdout", "--json": "/dev/stdout"}, [])
    check_outputs({"--json": "-", "--per-user": str(tmp_path / "u.csv")}, [])


def test_evaluate_with_two_outputs_on_standard_output_is_one_line(tmp_path):
    from click.testing import CliRunner

    from mrec_warp.cli import main

    for name, text in (("train.tsv", "u1\ti1\t1\n"), ("test.tsv", "u1\ti2\t1\n"), ("recs.tsv", "u1\ti2\t1\n")):
        (tmp_path / name).write_text(text)
    result = CliRunner().invoke(main, ["evaluate", "--train", str(tmp_path / "train.tsv"), "--test",
                                       str(tmp_path / "test.tsv"), "--recs", str(tmp_path / "recs.tsv"), "--json",
                                       "-", "--per-user", "-"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "--json and --per-user both write standard output" in lines[0], result.output
