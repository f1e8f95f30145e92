"""Top-k of many users: the scoring grid, one block of users, and blocks in parallel.

User blocks -> scores -> mask seen -> heap top-k. Memory is bounded by the block size
(``block_size x n_items`` float32 scores per worker), never by users x items. Blocks run on
:class:`~mrec_warp.workers.Workers`: on threads the scoring is BLAS and the top-k kernel
releases the GIL, so threads really run at once; processes and Dask workers get the same
blocks. Models use this for ``recommend``, ``similar_items`` and validation; the recommend
stage (:mod:`mrec_warp.stages.recommend`) for whole output files.

Scores do not depend on how users are cut. OpenBLAS computes a row of a product with
different rounding depending on the call's shape, the row's place in it and the number of
BLAS threads, so a user scored in a block of 30 could differ in the last bit from the same
user in a block of 200, and a tie could then flip the order of two items. Every product is
therefore one BLAS call of exactly :data:`SCORE_ROWS` users on one BLAS thread, and a user
sits in row ``position % SCORE_ROWS`` of its call, where ``position`` is its place in the
job's list of users: one global grid that blocks and parts only select from
(:func:`grid_scores`). Parallelism comes from the workers, each scoring its own blocks.
"""
from __future__ import annotations

import inspect
from typing import Callable, Generator, Iterator, NamedTuple, Optional, Tuple

import numpy as np
import pandas as pd
import scipy.sparse as sp

from .kernels.topk import topk_masked
from .progress import SILENT, Progress
from .workers import Workers, one_blas_thread, workers_for

#: Scores per block, in floats: 16M floats = 64 MB per worker.
BLOCK_FLOATS = 16 * 1024 * 1024
_NO_MASK = np.zeros(0, dtype=np.uint8)  # the kernel's item mask, unused here: exclusions are per user


#: Users in every BLAS call that scores (see the module docstring). OpenBLAS packs the whole
#: item matrix once per call, so fewer rows cost more per user: on 20k items x 64 factors,
#: 256 rows took 0.43 s of CPU for 8k users against 0.48 s for one call per 768-user block.
SCORE_ROWS = 256


def default_block_size(n_items: int) -> int:
    """Users per block: about :data:`BLOCK_FLOATS` scores, a whole number of BLAS calls."""
    calls = max(1, min(65536, BLOCK_FLOATS // max(1, n_items)) // SCORE_ROWS)
    return int(calls * SCORE_ROWS)


def grid_scores(score_fn: Callable[..., np.ndarray], users: np.ndarray, position: int) -> np.ndarray:
    """Scores of ``users``, which stand at ``position, position + 1, ...`` in the job's list.

    Each BLAS call scores exactly :data:`SCORE_ROWS` rows on one BLAS thread, the user at
    list position ``p`` in row ``p % SCORE_ROWS``; rows of the call outside ``users`` are
    filled with ``users[0]`` and dropped. A user's scores are then the same bits whichever
    block, part, worker or backend scores it.

    A ``score_fn`` that takes ``out=`` (the models' ``score_users`` do) writes each call
    after the first that falls wholly inside the block straight into the result, saving a
    copy of it.
    """
    n = len(users)
    writes_into = _takes_out(score_fn)
    out: Optional[np.ndarray] = None
    call_rows = np.empty(SCORE_ROWS, dtype=np.int64)
    first_call = position - position % SCORE_ROWS
    with one_blas_thread():
        for call_start in range(first_call, position + n, SCORE_ROWS):
            lo, hi = max(call_start, position), min(call_start + SCORE_ROWS, position + n)
            if writes_into and out is not None and hi - lo == SCORE_ROWS:
                score_fn(users[lo - position:hi - position], out=out[lo - position:hi - position])
                continue
            call_rows.fill(users[0])
            call_rows[lo - call_start:hi - call_start] = users[lo - position:hi - position]
            scores = score_fn(call_rows)
            if out is None:
                out = np.empty((n, scores.shape[1]), dtype=np.float32)
            out[lo - position:hi - position] = scores[lo - call_start:hi - call_start]
    return out


def _takes_out(score_fn: Callable) -> bool:
    try:
        return "out" in inspect.signature(score_fn).parameters
    except (TypeError, ValueError):  # builtins and some callables have no signature
        return False


class KernelExclusion(NamedTuple):
    """A CSR's structure in the top-k kernel's index types (scipy would downcast int64
    index pointers to int32 again, so the arrays are kept as they are here)."""

    indptr: np.ndarray
    indices: np.ndarray
    n_rows: int

    @classmethod
    def of(cls, exclude) -> "KernelExclusion":
        if isinstance(exclude, cls):
            return exclude
        return cls(exclude.indptr.astype(np.int64, copy=False),
                   exclude.indices.astype(np.int32, copy=False), exclude.shape[0])


def top_k_block(
    score_fn: Callable[[np.ndarray], np.ndarray],
    users: np.ndarray,
    k: int,
    exclude: Optional[sp.csr_matrix],
    position: int = 0,
    item_mask: Optional[np.ndarray] = None,
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Top-k of one block of rows: (rows, items, scores).

    ``score_fn(rows)`` returns the (len(rows), n_items) scores, e.g. ``model.score_users``;
    ``position`` is the place of ``users[0]`` in the job's list of users (see
    :func:`grid_scores`).
    ``item_mask`` (uint8, one per item) marks items never to recommend to anyone.
    """
    if len(users) == 0:
        return users, np.empty((0, k), dtype=np.int64), np.empty((0, k), dtype=np.float32)
    scores = grid_scores(score_fn, users, position)
    items_out = np.empty((len(users), k), dtype=np.int64)
    scores_out = np.empty((len(users), k), dtype=np.float32)
    if exclude is None:
        rows = np.full(len(users), -1, dtype=np.int64)
        indptr = np.zeros(1, dtype=np.int64)
        indices = np.zeros(0, dtype=np.int32)
    else:
        exclude = KernelExclusion.of(exclude)
        # users beyond the exclusion matrix (e.g. folded-in ones) exclude nothing
        rows = np.where(users < exclude.n_rows, users, -1).astype(np.int64)
        indptr, indices = exclude.indptr, exclude.indices
    topk_masked(scores, rows, indptr, indices, _NO_MASK if item_mask is None else item_mask, items_out, scores_out)
    return users, items_out, scores_out


def closable(blocks: Iterator[Tuple[np.ndarray, np.ndarray, np.ndarray]]
             ) -> Generator[Tuple[np.ndarray, np.ndarray, np.ndarray], None, None]:
    """``blocks`` as a generator whose ``close`` closes them too (``yield from``), for a
    source of blocks typed as a plain iterator."""
    yield from blocks


def iter_top_k(
    score_fn: Callable[[np.ndarray], np.ndarray],
    n_items: int,
    users: np.ndarray,
    k: int,
    exclude: Optional[sp.csr_matrix] = None,
    n_jobs: int = 1,
    block_size: Optional[int] = None,
    progress: Progress = SILENT,
    workers: Optional[Workers] = None,
    item_mask: Optional[np.ndarray] = None,
) -> Generator[Tuple[np.ndarray, np.ndarray, np.ndarray], None, None]:
    """Yield ``(users, items, scores)`` per block, in the order of ``users``.

    ``score_fn(rows)`` scores a block of rows against all ``n_items`` items.

    Blocks run on ``workers`` (an execution context, for instance) or, without them, on
    ``n_jobs`` threads sharing memory. On processes or Dask ``score_fn`` is pickled to the
    workers, so it should be cheap to pickle, e.g. :class:`~mrec_warp.worker_cache.ModelScorer`;
    each block ships only its own rows of ``exclude``. ``item_mask`` (uint8, one entry per
    item) marks items never to recommend.
    """
    if k <= 0:
        raise ValueError("k must be a positive integer")
    users = np.asarray(users, dtype=np.int64)
    block_size = block_size or default_block_size(n_items)
    starts = range(0, len(users), block_size)
    with workers_for(workers, n_jobs) as be:
        if be.is_local_memory:  # threads share the exclusion arrays, converted once
            shared = None if exclude is None else KernelExclusion.of(exclude)
            run, tasks = top_k_block, ((score_fn, users[s:s + block_size], k, shared, s, item_mask) for s in starts)
        else:  # each remote block ships only its own rows of a CSR
            csr = None if exclude is None else sp.csr_matrix(exclude)
            run, tasks = _top_k_rows, ((score_fn, users[s:s + block_size], k, _exclusion_rows(csr, users[s:s + block_size]),
                                        s, item_mask) for s in starts)
        yield from progress.iterate(be.map(run, tasks), total=len(starts), desc="recommend", unit="block")


def _top_k_rows(score_fn, users: np.ndarray, k: int, sub_exclude, position: int,
                item_mask: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A block on a worker: ``sub_exclude`` holds exactly the block's rows, in order."""
    by_row = users.copy()  # the kernel's exclusion rows are 0..n-1; the scores are the users'
    _, items, scores = top_k_block(lambda rows: score_fn(by_row[rows]), np.arange(len(users)), k, sub_exclude,
                                   position, item_mask)
    return users, items, scores


def _exclusion_rows(exclude: Optional[sp.csr_matrix], users: np.ndarray) -> Optional[sp.csr_matrix]:
    """Rows ``users`` of ``exclude``; users beyond it (folded in) get empty rows."""
    if exclude is None:
        return None
    inside = users < exclude.shape[0]
    sub = sp.csr_matrix(exclude[np.where(inside, users, 0)])
    if not inside.all():
        # empty those rows by the structure: a stored entry excludes its item whatever its value
        lengths = np.where(inside, np.diff(sub.indptr), 0)
        keep = np.repeat(inside, np.diff(sub.indptr))
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(sub.indptr.dtype)
        sub = sp.csr_matrix((sub.data[keep], sub.indices[keep], indptr), shape=sub.shape)
    return sub


def block_to_frame(model, users: np.ndarray, items: np.ndarray, scores: np.ndarray) -> pd.DataFrame:
    """Long table of one block with the original ids; padding (-1) rows are dropped."""
    k = items.shape[1]
    valid = items >= 0
    rows = np.repeat(np.arange(len(users)), k).reshape(items.shape)[valid]
    return pd.DataFrame(
        {
            "user": model.user_ids[users[rows]],
            "item": model.item_ids[items[valid]],
            "score": scores[valid],
            "rank": np.tile(np.arange(1, k + 1), len(users)).reshape(items.shape)[valid],
        }
    )


def capped_k(k: int, n: int, what: str = "items") -> Tuple[int, Optional[str]]:
    """``k`` no larger than the ``n`` candidates there are, and a note when it was larger.

    A longer list holds nothing more, but its buffers (rows x k) would grow with k, up to
    an out-of-memory error.
    """
    if n <= 0:  # "using k=1" would promise a list that cannot hold anything
        return 1, f"there are no {what} to rank: every list is empty"
    if k > n:
        return n, f"`k={k:,}` is more than the {n:,} {what} there are; using `k={n:,}`"
    return k, None


#: Users whose scores :func:`probe_unrankable` looks at: enough to catch a model whose numbers
#: overflowed, few enough to cost nothing beside a save or a recommend run.
PROBE_USERS = 64


def probe_unrankable(score_fn: Callable[..., np.ndarray], n_users: int) -> Optional[int]:
    """Score the first :data:`PROBE_USERS` users: how many were scored when not one of
    their scores is finite (NaN or infinite numbers: the model ranks nothing), else ``None``
    (also when there is no user to probe)."""
    users = np.arange(min(int(n_users), PROBE_USERS), dtype=np.int64)
    if len(users) == 0:
        return None
    with np.errstate(all="ignore"):
        scores = score_fn(users)
    return None if np.isfinite(scores).any() else len(users)
