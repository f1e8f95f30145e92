"""SLIM (Ning & Karypis, 2011): sparse non-negative item-item weights, one elastic net per item.

For every item ``j``, ``w_j = argmin 1/2 ||x_j - X w||^2 + l2/2 ||w||^2 + l1 ||w||_1`` with
``w >= 0`` and ``w_j = 0``; the columns ``w_j`` form ``W`` and a user's scores are their
history times ``W``. The solver is coordinate descent on the Gram matrix ``X'X`` in Cython
(:mod:`mrec_warp.kernels.slim`, no GIL), which touches only the items co-occurring with
``j`` more than ``l1`` times -- no other item can get a weight. Items are split into blocks
that run on the execution backend (threads by default; processes or a Dask cluster get
the Gram matrix shipped once per block). Each item keeps its ``topk`` largest weights.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Optional

import numpy as np
import scipy.sparse as sp

from ..workers import Workers, effective_n_jobs
from ..progress import Progress
from ..kernels import slim as _slim
from ._itemsim import ItemSimilarity
from ..errors import InputError
from .declared import Param, n_jobs_param
from .tuning import COOC_RATE, TrialShape


class SLIM(ItemSimilarity):
    """Sparse linear method: non-negative elastic-net item-item weights.

    Parameters
    ----------
    l1 : float
        L1 penalty (sparsity). Items co-occurring with a target at most ``l1`` times can
        never weigh on it, so larger values are also faster.
    l2 : float
        L2 penalty (shrinks the weights, like EASE's ``lambda``). The defaults, ``l1=1`` and
        ``l2=100``, were at least as good as 2 and 200 on every set of the selection suite
        and up to 3.8% better (``scripts/bench_defaults.py``), at about twice the fit time.
    topk : int
        Largest weights kept per target item.
    max_iter : int
        Most coordinate-descent sweeps per item.
    tol : float
        Stop an item's sweeps when no weight moves by more than ``tol`` times the largest.
    n_jobs : int
        Workers solving blocks of items at once (-1: every core).
    backend : {"threads", "processes", "dask"}
        Where the blocks run; every backend gives the same weights.
    scheduler : str
        Dask scheduler address (with ``backend="dask"``); empty: a local cluster.
    """

    name = "slim"
    order = 30

    #: Seconds per ``sum_k deg_k^2`` (``deg_k``: items co-occurring with ``k``: coordinate
    #: descent on a target visits each neighbour's Gram row; one thread), measured on
    #: ml-100k and a 1.9k x 16k long-tail synthetic set (2 shared cores).
    TUNE_RATE = 2.5e-9

    @classmethod
    def fit_cost(cls, shape: TrialShape, params: Mapping[str, Any], epochs_cap: Optional[int] = None) -> float:
        """Coordinate descent over the Gram rows, the co-occurrences, and validation scoring."""
        l1 = float(params.get("l1", 2.0))  # a larger l1 leaves fewer neighbours active
        return cls.TUNE_RATE * shape.deg2 / max(0.25, math.sqrt(l1 / 2.0)) + COOC_RATE * shape.cooc \
            + shape.scoring()

    PARAMETERS = (
        Param("l1", float, 1.0, "L1 penalty (sparsity; larger is faster too).", low=0, tune=("log", 0.5, 10.0),
              grid=(1.0, 2.0, 5.0)),
        Param("l2", float, 100.0, "L2 penalty.", low=0, tune=("log", 50.0, 800.0), grid=(100.0, 200.0, 500.0)),
        Param("topk", int, 200, "Largest weights kept per item.", low=1, tune=True),
        Param("max_iter", int, 100, "Most coordinate-descent sweeps per item.", low=1, option=False),
        Param("tol", float, 1e-4, "Stop an item's sweeps when no weight moves by more than this times the largest.",
              low=0, option=False),
        n_jobs_param("Workers solving blocks of items at once (-1: every core)."),
        # where the blocks run: checked by the backend itself
        Param("backend", str, "threads", "Where the blocks run.", choices=("threads", "processes", "dask"),
              placement=True, check=False),
        Param("scheduler", str, "", "Dask scheduler address; empty: a local cluster.", placement=True, check=False),
    )

    def __init__(self, l1: float = 1.0, l2: float = 100.0, topk: int = 200, max_iter: int = 100,
                 tol: float = 1e-4, n_jobs: int = 1, backend: str = "threads", scheduler: str = "") -> None:
        self.l1 = l1
        self.l2 = l2
        self.topk = topk
        self.max_iter = max_iter
        self.tol = tol
        self.n_jobs = n_jobs
        self.backend = backend
        self.scheduler = scheduler

    def _check_extra(self) -> None:
        if self.l1 == 0 and self.l2 == 0:
            raise InputError("invalid parameter: `l1` and `l2` must not both be 0", hint="e.g. `l2=200`")

    def _learn_weights(self, csr: sp.csr_matrix, progress: Progress) -> sp.csr_matrix:
        n = csr.shape[1]
        csc = sp.csc_matrix(csr, dtype=np.float32)
        gram = sp.csr_matrix(csc.T @ csc, dtype=np.float32)
        gram.sort_indices()
        g = (gram.indptr.astype(np.int64), gram.indices.astype(np.int32), gram.data,
             np.ascontiguousarray(gram.diagonal(), dtype=np.float32))
        topk = int(min(self.topk, max(n - 1, 1)))
        # small blocks balance the workers (items differ a lot in cost); enough per block
        # that the per-call overhead is nothing
        workers = effective_n_jobs(self.n_jobs)
        size = int(max(16, min(1024, n // max(1, 8 * workers) + 1)))
        blocks = [(a, min(a + size, n)) for a in range(0, n, size)]
        args = [(*g, a, b, float(self.l1), float(self.l2), int(self.max_iter), float(self.tol), topk)
                for a, b in blocks]
        rows, cols, vals = [], [], []
        with Workers(self.backend, n_jobs=self.n_jobs, scheduler=self.scheduler or None) as be:
            progress.log(f"slim: {n:,} items in {len(blocks)} blocks on {be.describe()}, "
                         f"Gram matrix {gram.nnz:,} entries")
            for a, idx, val in progress.iterate(be.map(solve_block, args), total=len(blocks),
                                                desc="slim", unit="block"):
                keep = idx >= 0
                targets = np.broadcast_to(np.arange(a, a + idx.shape[0])[:, None], idx.shape)
                rows.append(idx[keep])  # W[k, j]: source item k, target item j
                cols.append(targets[keep])
                vals.append(val[keep])
        rows_a = np.concatenate(rows) if rows else np.zeros(0, np.int64)
        weights = sp.csr_matrix((np.concatenate(vals) if vals else np.zeros(0, np.float32),
                                 (rows_a, np.concatenate(cols) if cols else np.zeros(0, np.int64))),
                                shape=(n, n), dtype=np.float32)
        progress.log(f"slim: {weights.nnz:,} weights ({weights.nnz / max(n, 1):.1f} per item)")
        return weights


def solve_block(indptr, indices, data, diag, start: int, stop: int, l1: float, l2: float, max_iter: int,
                tol: float, topk: int):
    """One block of target items (a picklable unit of work for any backend)."""
    out_idx = np.empty((stop - start, topk), dtype=np.int32)
    out_val = np.empty((stop - start, topk), dtype=np.float32)
    _slim.slim_block(indptr, indices, data, diag, start, stop, l1, l2, max_iter, tol, out_idx, out_val)
    return start, out_idx, out_val
