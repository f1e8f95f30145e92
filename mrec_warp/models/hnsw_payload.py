"""The bytes faiss writes for an ``IndexHNSWFlat`` (L2), checked against the model before faiss
reads them.

faiss' reader trusts its own counts: it allocates the dimension, item count and every vector
length its bytes declare before it finds them short, so one altered count in a crafted file is
gigabytes allocated (or an out-of-memory) before any error; and it checks no neighbour id, so
a graph that points outside the item table is read out of bounds while searching. The payload
is walked here first, every count checked against the model's items and the bytes left, every
graph array against the others.

The layout (faiss ``impl/index_write.cpp``, little-endian; a vector is a ``uint64`` count and
its elements)::

    "IHNf"  d:i32  ntotal:i64  (two unused i64)  is_trained:u8  metric:i32 (1 = L2)
    assign_probas:f64[]  cum_nneighbor_per_level:i32[]  levels:i32[ntotal]
    offsets:u64[ntotal + 1]  neighbors:i32[offsets[-1]]
    entry_point:i32  max_level:i32  efConstruction:i32  efSearch:i32  (unused i32)
    "IxF2"  d:i32  ntotal:i64  (two unused i64)  is_trained:u8  metric:i32
    codes: u64 count of float32s, then d * ntotal float32s
"""
from __future__ import annotations

from typing import Optional

import numpy as np

METRIC_L2 = 1


class _Short(Exception):
    """The bytes end (or a count passes their end) before the layout does."""


class _Cursor:
    def __init__(self, payload: bytes):
        self.payload = payload
        self.at = 0

    def left(self) -> int:
        return len(self.payload) - self.at

    def take(self, dtype: str, count: int) -> np.ndarray:
        size = np.dtype(dtype).itemsize
        if count < 0 or count * size > self.left():
            raise _Short
        values = np.frombuffer(self.payload, dtype=dtype, count=count, offset=self.at)
        self.at += count * size
        return values

    def one(self, dtype: str) -> int:
        return int(self.take(dtype, 1)[0])

    def vector(self, dtype: str) -> np.ndarray:
        """A faiss vector: its count, checked against the bytes left before anything is sized by it."""
        return self.take(dtype, self.one("<u8"))


def _index_header(cur: _Cursor, fourcc: bytes, what: str, n_items: int, dim: int) -> Optional[str]:
    found = cur.take("S4", 1)[0]
    if found != fourcc:
        return f"the {what} is of type {found[:4]!r}, not {fourcc!r}"
    d, ntotal = cur.one("<i4"), cur.one("<i8")
    cur.take("<i8", 2)
    cur.take("u1", 1)
    metric = cur.one("<i4")
    if (d, ntotal) != (dim, n_items):
        return f"the {what} declares {ntotal} x {d} where the model has {n_items} x {dim}"
    if metric != METRIC_L2:
        return f"the {what} declares metric {metric}, not L2"
    return None


def _graph_problem(cur: _Cursor, n_items: int) -> Optional[str]:
    probas = cur.vector("<f8")
    cum = cur.vector("<i4")
    levels = cur.vector("<i4")
    offsets = cur.vector("<u8")
    neighbors = cur.vector("<i4")
    entry_point, max_level = cur.one("<i4"), cur.one("<i4")
    cur.take("<i4", 3)
    if len(probas) == 0 or len(cum) != len(probas) + 1 or cum[0] != 0 or (np.diff(cum) < 0).any():
        return "its graph's links per level are inconsistent"
    if len(levels) != n_items or len(offsets) != n_items + 1:
        return f"its graph has {len(levels)} levels and {len(offsets)} offsets for {n_items} items"
    if levels.min() < 1 or levels.max() >= len(cum):
        return "its graph places a node on a level it has no links for"
    if offsets[0] != 0 or (np.diff(offsets) != cum[levels].astype(np.uint64)).any() or offsets[-1] != len(neighbors):
        return "its graph's offsets do not match the nodes' levels"
    if len(neighbors) and (neighbors.min() < -1 or neighbors.max() >= n_items):
        return "its graph links to nodes outside the items"
    if not 0 <= entry_point < n_items or max_level != levels.max() - 1:
        return "its graph's entry point is not a node of its top level"
    return None


def layout_problem(payload: bytes, n_items: int, dim: int) -> Optional[str]:
    """What keeps ``payload`` from being faiss' ``IndexHNSWFlat`` (L2) of ``n_items`` vectors of
    ``dim`` float32s, or ``None``; no array is sized by a count the bytes cannot hold.

    Parameters
    ----------
    payload : bytes
        The serialized index, as ``faiss.serialize_index`` wrote it.
    n_items, dim : int
        The item vectors the index must hold (the model's, augmented as the index stores them).
    """
    cur = _Cursor(payload)
    try:
        problem = (_index_header(cur, b"IHNf", "index", n_items, dim) or _graph_problem(cur, n_items)
                   or _index_header(cur, b"IxF2", "vector storage", n_items, dim))
        if problem is not None:
            return problem
        if len(cur.vector("<f4")) != n_items * dim:
            return f"its vector storage does not hold {n_items} x {dim} numbers"
    except _Short:
        return "a count in it passes the end of its bytes"
    if cur.left():
        return f"{cur.left()} bytes follow the index"
    return None
