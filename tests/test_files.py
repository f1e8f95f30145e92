"""Atomic writes: outputs get the mode a plain open() would give them."""
from __future__ import annotations

import os

from mrec_warp.files import FILE_MODE, atomic_path, atomic_write


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
