"""Parameters checked by value and by what they imply, memory estimated before allocating,
``n_jobs`` capped at the usable cores, and damaged ``.npy`` headers in model files (issue 20).

Huge sizes are never allocated here: the memory checks run against a small limit set by
monkeypatching :func:`mrec_warp.memory.available_bytes`.
"""
from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest
import scipy.sparse as sp

from mrec_warp.errors import InputError
from mrec_warp.models import WARP, load


@pytest.fixture(scope="module")
def small_matrix():
    rng = np.random.default_rng(0)
    dense = (rng.random((20, 15)) < 0.3).astype(np.float32)
    dense[np.arange(20), np.arange(20) % 15] = 1.0  # every user has an item
    return sp.csr_matrix(dense)


# -- damaged .npy headers -------------------------------------------------------------------
def _rezipped(members: dict, name: str, data: bytes) -> io.BytesIO:
    """The archive with member ``name`` replaced by ``data``, CRCs recomputed (as a tool that
    rewrites the archive, or a crafted file, would leave it: the CRC alone does not catch it)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for key, value in members.items():
            z.writestr(key, data if key == name else value)
    buf.seek(0)
    return buf


def test_every_flipped_byte_of_an_npy_header_loads_or_is_an_input_error(small_matrix, tmp_path):
    """Each byte of each member's ``.npy`` header (magic, length, the dict literal) flipped in
    two ways (one of them makes brackets unbalanced): the load gives the same arrays or one InputError, never TokenError/SyntaxError."""
    path = tmp_path / "m.npz"
    reference = WARP(factors=2, epochs=1, random_state=0).fit(small_matrix)
    reference.save(path)
    expected = reference._get_arrays()
    with zipfile.ZipFile(path) as z:
        members = {info.filename: z.read(info) for info in z.infolist()}
    outcomes = {"same": 0, "refused": 0}
    for name, data in members.items():
        header_end = 10 + int.from_bytes(data[8:10], "little")
        for pos in range(header_end):
            for bit in (0x01, 0x80):  # ")" -> "(", "}" -> "|"; 0x80: not ASCII
                damaged = bytearray(data)
                damaged[pos] ^= bit
                try:
                    got = load(_rezipped(members, name, bytes(damaged)))
                except InputError as exc:
                    assert "\n" not in str(exc)
                    outcomes["refused"] += 1
                    continue
                for key, arr in got._get_arrays().items():
                    np.testing.assert_array_equal(arr, expected[key])
                assert list(got.user_ids) == list(reference.user_ids)
                outcomes["same"] += 1
    assert outcomes["refused"] > 0


def test_unbalanced_bracket_in_an_npy_header_names_the_array(small_matrix, tmp_path):
    path = tmp_path / "m.npz"
    WARP(factors=2, epochs=1, random_state=0).fit(small_matrix).save(path)
    with zipfile.ZipFile(path) as z:
        members = {info.filename: z.read(info) for info in z.infolist()}
    data = members["arr_item_factors.npy"]
    damaged = data.replace(b"),", b"((", 1)  # numpy's tokenizer: "EOF in multi-line statement"
    with pytest.raises(InputError, match="'arr_item_factors' is unreadable.*train the model again"):
        load(_rezipped(members, "arr_item_factors.npy", damaged))
