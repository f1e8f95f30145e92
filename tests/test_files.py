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
