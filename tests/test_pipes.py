"""Inputs given as pipes or FIFOs (``--users <(...)``, ``/dev/stdin``): read once, whole."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest
from click.testing import CliRunner

from mrec_warp.cli import main
from mrec_warp.data.idlist import read_id_list
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
