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
from typing import Any, Callable, List, Mapping, Optional, Tuple, Union

import numpy as np
import scipy.sparse as sp

from ..workers import Workers, effective_n_jobs
from ..progress import Progress
from ..kernels import slim as _slim
from ._itemsim import ItemSimilarity, history_scores, popular_when_cold, scored_candidate
from ..errors import InputError
from .declared import Param, n_jobs_param
from .early_stopping import Holdout, HoldoutScorer, id_keys
from .selection import AUTO, Candidate, Stopwatch, fixed_value, select_param, selected_names, value_of
from .tuning import COOC_RATE, TrialShape

#: The ``l1`` and ``l2`` values ``"auto"`` chooses among (the fixed 1 and 100 among them), one
#: at a time with the other fixed (:meth:`SLIM._candidates`).
L1_GRID = (4.0, 2.0, 1.0)
L2_GRID = (300.0, 100.0, 30.0)
#: Share of the items whose columns the hold-out's path solves (those whose ids' keys are
#: lowest: a fixed sample), at least :data:`MIN_TARGETS`: the path then costs about this share
#: of a fit per setting it does not get for free from the previous one's weights.
TARGET_SHARE = 0.12
MIN_TARGETS = 50


class SLIM(ItemSimilarity):
    """Sparse linear method: non-negative elastic-net item-item weights.

    Parameters
    ----------
    l1 : float or "auto"
        L1 penalty (sparsity). Items co-occurring with a target at most ``l1`` times can
        never weigh on it, so larger values are also faster. ``"auto"`` (the default, with
        ``select``): chosen on the internal hold-out among :data:`L1_GRID`; with
        ``select=False``, 1.
    l2 : float or "auto"
        L2 penalty (shrinks the weights, like EASE's ``lambda``). ``"auto"`` (the default):
        chosen among :data:`L2_GRID`; with ``select=False``, 100 (``l1=1`` and ``l2=100``
        were at least as good as 2 and 200 on every set of the selection suite and up to 3.8%
        better, ``scripts/bench_defaults.py``, at about twice the fit time).
    topk : int
        Largest weights kept per target item.
    max_iter : int
        Most coordinate-descent sweeps per item.
    tol : float
        Stop an item's sweeps when no weight moves by more than ``tol`` times the largest.
    select : bool
        Choose the parameters left at ``"auto"`` on the internal hold-out (10% of each
        user's items, up to 5,000 users scored by precision@10), then fit on all the data;
        off: the fixed defaults (today's model). See :meth:`SLIM._candidates`.
    n_jobs : int
        Workers solving blocks of items at once (-1: every core).
    backend : {"threads", "processes", "dask"}
        Where the blocks run; every backend gives the same weights.
    scheduler : str
        Dask scheduler address (with ``backend="dask"``); empty: a local cluster.
    """

    name = "slim"
    order = 30

    #: The parameters ``select`` chooses when left at ``"auto"``, and their fixed values.
    SELECTED = ("l1", "l2")
    FIXED = {"l1": 1.0, "l2": 100.0}

    #: Seconds per ``sum_k deg_k^2`` (``deg_k``: items co-occurring with ``k``: coordinate
    #: descent on a target visits each neighbour's Gram row; one thread), measured on
    #: ml-100k and a 1.9k x 16k long-tail synthetic set (2 shared cores).
    TUNE_RATE = 2.5e-9

    @classmethod
    def fit_cost(cls, shape: TrialShape, params: Mapping[str, Any], epochs_cap: Optional[int] = None) -> float:
        """Coordinate descent over the Gram rows, the co-occurrences, and validation scoring."""
        model = cls(**params)
        choosing = bool(selected_names(model))
        l1 = float(value_of(model, "l1")) if not choosing or model.l1 != AUTO else cls.FIXED["l1"]
        # a larger l1 leaves fewer neighbours active; the choice's path about a fit more
        return (cls.TUNE_RATE * shape.deg2 / max(0.25, math.sqrt(l1 / 2.0)) * (2 if choosing else 1)
                + COOC_RATE * shape.cooc + shape.scoring())

    PARAMETERS = (
        Param("l1", float, AUTO, "L1 penalty (sparsity; larger is faster too) (auto: chosen on the hold-out "
              "among 1, 2, 4; 1 with --no-select).", low=0, tune=("log", 0.5, 10.0), grid=(1.0, 2.0, 5.0)),
        Param("l2", float, AUTO, "L2 penalty (auto: chosen on the hold-out among 30, 100, 300; 100 with "
              "--no-select).", low=0, tune=("log", 50.0, 800.0), grid=(100.0, 200.0, 500.0)),
        Param("topk", int, 200, "Largest weights kept per item.", low=1, tune=True),
        Param("max_iter", int, 100, "Most coordinate-descent sweeps per item.", low=1, option=False),
        Param("tol", float, 1e-4, "Stop an item's sweeps when no weight moves by more than this times the largest.",
              low=0, option=False),
        select_param(),
        n_jobs_param("Workers solving blocks of items at once (-1: every core)."),
        # where the blocks run: checked by the backend itself
        Param("backend", str, "threads", "Where the blocks run.", choices=("threads", "processes", "dask"),
              placement=True, check=False),
        Param("scheduler", str, "", "Dask scheduler address; empty: a local cluster.", placement=True, check=False),
    )

    def __init__(self, l1: Union[float, str] = AUTO, l2: Union[float, str] = AUTO, topk: int = 200,
                 max_iter: int = 100, tol: float = 1e-4, select: bool = True, n_jobs: int = 1,
                 backend: str = "threads", scheduler: str = "") -> None:
        self.l1 = l1
        self.l2 = l2
        self.topk = topk
        self.max_iter = max_iter
        self.tol = tol
        self.select = select
        self.n_jobs = n_jobs
        self.backend = backend
        self.scheduler = scheduler

    def _check_extra(self) -> None:
        if self.l1 == 0 and self.l2 == 0:  # ("auto" is never 0: the choices are positive)
            raise InputError("invalid parameter: `l1` and `l2` must not both be 0", hint="e.g. `l2=200`")

    def _learn_weights(self, csr: sp.csr_matrix, progress: Progress) -> sp.csr_matrix:
        n = csr.shape[1]
        gram, g = gram_arrays(csr)
        topk = int(min(self.topk, max(n - 1, 1)))
        # small blocks balance the workers (items differ a lot in cost); enough per block
        # that the per-call overhead is nothing
        workers = effective_n_jobs(self.n_jobs)
        size = int(max(16, min(1024, n // max(1, 8 * workers) + 1)))
        blocks = [(a, min(a + size, n)) for a in range(0, n, size)]
        args = [(*g, a, b, float(value_of(self, "l1")), float(value_of(self, "l2")), int(self.max_iter),
                 float(self.tol), topk) for a, b in blocks]
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


    def _candidates(self, holdout: Holdout, scorer: HoldoutScorer, names: Tuple[str, ...],
                    progress: Progress) -> List[Candidate]:
        """A cross of settings through the fixed ``(l1, l2)`` (the larger ``l1`` of
        :data:`L1_GRID` at the fixed ``l2``, the other ``l2`` of :data:`L2_GRID` at the fixed
        ``l1``; an explicit value kept) solved as one warm-started path per target item
        (:func:`mrec_warp.kernels.slim.slim_path_block`: each setting's coordinate descent
        starts from the previous one's weights, the strongest ``l1`` first), on the columns of
        a fixed sample of :data:`TARGET_SHARE` of the items, and scored on those items (the
        others are not ranked on the hold-out). The fixed values are listed first."""
        fit = holdout.fit
        n = fit.shape[1]
        fixed = (fixed_value(self, "l1") if "l1" in names else float(self.l1),
                 fixed_value(self, "l2") if "l2" in names else float(self.l2))
        # a cross through the fixed pair, one penalty at a time: l1 down at the fixed l2, then l2
        # either side at the fixed l1 (each solve warm from the one before)
        path = [(a, fixed[1]) for a in (L1_GRID if "l1" in names else ()) if a > fixed[0]] + [fixed]
        path += [(fixed[0], b) for b in (L2_GRID if "l2" in names else ()) if b != fixed[1]]
        keys = id_keys(getattr(self, "item_ids", None), n)
        share = max(min(n, MIN_TARGETS), int(math.ceil(TARGET_SHARE * n)))
        targets = np.sort(np.argsort(keys, kind="stable")[:share]).astype(np.int32)
        watch = Stopwatch()
        _, g = gram_arrays(fit)
        topk = int(min(self.topk, max(n - 1, 1)))
        workers = effective_n_jobs(self.n_jobs)
        size = int(max(16, min(1024, len(targets) // max(1, 8 * workers) + 1)))
        chunks = [targets[a:a + size] for a in range(0, len(targets), size)]
        l1_path = np.array([a for a, _ in path], dtype=np.float64)
        l2_path = np.array([b for _, b in path], dtype=np.float64)
        args = [(*g, chunk, l1_path, l2_path, int(self.max_iter), float(self.tol), topk) for chunk in chunks]
        parts = []
        with Workers(self.backend, n_jobs=self.n_jobs, scheduler=self.scheduler or None) as be:
            progress.log(f"slim: choosing {', '.join(names)} on the hold-out: {len(path)} settings along a "
                         f"warm-started path on {len(targets):,} of {n:,} items' columns")
            for part in progress.iterate(be.map(solve_path_block, args), total=len(chunks), desc="slim (hold-out)",
                                         unit="block", lines=False):
                parts.append(part)
        idx = np.concatenate([p[0] for p in parts], axis=1)  # settings x targets x topk
        val = np.concatenate([p[1] for p in parts], axis=1)
        counts = np.bincount(fit.indices, minlength=n).astype(np.float32)
        each = watch.seconds / len(path)
        scored = TargetScores(fit, scorer.users, targets, counts)
        tried = []
        for s, (a, b) in enumerate(path):
            step = Stopwatch()
            keep = idx[s] >= 0
            # W's columns of the targets only (column r: targets[r]): the others are never ranked
            cols = np.broadcast_to(np.arange(len(targets))[:, None], keep.shape)[keep]
            weights = sp.csr_matrix((val[s][keep], (idx[s][keep], cols)), shape=(n, len(targets)), dtype=np.float32)
            score = scored.of(weights)
            values = {name: v for name, v in (("l1", a), ("l2", b)) if name in names}
            candidate = scored_candidate(values, scorer, score, step,
                                         note=f"ranked among {len(targets):,} of the {n:,} items: lower than a "
                                              "full model's")
            candidate.seconds += each
            tried.append(candidate)
        first = path.index(fixed)
        return [tried[first]] + tried[:first] + tried[first + 1:]


#: Most entries of the scored users' block of target scores computed at once per setting (64 MB).
SCORED_BLOCK_ENTRIES = 2**24


class TargetScores:
    """The hold-out scores of a setting whose weights cover only the ``targets``' columns:
    every other item NaN (never ranked), popularity for a user with no weight, as the model
    scores a user over every item.

    Only the targets' columns are computed (a history times each target's weights, summed
    in the history's order: the same bits as over every column), for all the scored users
    at once when their block is at most :data:`SCORED_BLOCK_ENTRIES`, so that the histories
    are taken out once for every setting instead of once per scoring call."""

    def __init__(self, fit: sp.csr_matrix, users: np.ndarray, targets: np.ndarray, counts: np.ndarray) -> None:
        self.fit, self.targets, self.counts = fit, targets, counts
        self.n_items = fit.shape[1]
        users = np.asarray(users, dtype=np.int64)
        self.history = None
        if len(users) * len(targets) <= SCORED_BLOCK_ENTRIES:
            self.history = sp.csr_matrix(fit[users])
            self.where = np.full(fit.shape[0], -1, dtype=np.int64)
            self.where[users] = np.arange(len(users))

    def of(self, weights: sp.csr_matrix) -> Callable[..., np.ndarray]:
        """``score_fn(rows, out=None)`` of the weights (items x targets)."""
        block = None if self.history is None else history_scores(self.history, weights, None, self.n_items)

        def score(rows: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
            pos = None if block is None else self.where[rows]
            if block is None or pos is None or (pos < 0).any():
                part = history_scores(self.fit[rows], weights, None, self.n_items)
            else:
                part = block[pos]
            scores = out if out is not None else np.empty((len(rows), self.n_items), dtype=np.float32)
            scores.fill(np.nan)
            scores[:, self.targets] = part
            return popular_when_cold(scores, self.counts)

        return score


def gram_arrays(csr: sp.csr_matrix):
    """The Gram matrix ``X'X`` (float32 CSR, sorted) and the arrays the kernels read of it."""
    csc = sp.csc_matrix(csr, dtype=np.float32)
    gram = sp.csr_matrix(csc.T @ csc, dtype=np.float32)
    gram.sort_indices()
    return gram, (gram.indptr.astype(np.int64), gram.indices.astype(np.int32), gram.data,
                  np.ascontiguousarray(gram.diagonal(), dtype=np.float32))


def solve_path_block(indptr, indices, data, diag, targets, l1s, l2s, max_iter: int, tol: float, topk: int):
    """One block of target items along the path of ``(l1s, l2s)`` (a picklable unit of work)."""
    out_idx = np.empty((len(l1s), len(targets), topk), dtype=np.int32)
    out_val = np.empty((len(l1s), len(targets), topk), dtype=np.float32)
    _slim.slim_path_block(indptr, indices, data, diag, np.ascontiguousarray(targets, dtype=np.int32), l1s, l2s,
                          max_iter, tol, out_idx, out_val)
    return out_idx, out_val


def solve_block(indptr, indices, data, diag, start: int, stop: int, l1: float, l2: float, max_iter: int,
                tol: float, topk: int):
    """One block of target items (a picklable unit of work for any backend)."""
    out_idx = np.empty((stop - start, topk), dtype=np.int32)
    out_val = np.empty((stop - start, topk), dtype=np.float32)
    _slim.slim_block(indptr, indices, data, diag, start, stop, l1, l2, max_iter, tol, out_idx, out_val)
    return start, out_idx, out_val
