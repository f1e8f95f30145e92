"""Batch top-k recommendation: user blocks -> scores -> mask seen -> heap top-k -> disk.

Memory is bounded by the block size (``block_size x n_items`` float32 scores per worker),
never by users x items. Blocks run on joblib threads: the scoring is BLAS and the top-k
kernel releases the GIL, so threads really run at once. BLAS is limited to one thread per
worker while several workers run, so workers x BLAS threads never oversubscribe the cores.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence, Tuple

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ._topk import topk_masked
from .data.io import atomic_path, atomic_write
from .errors import InputError
from .progress import SILENT, Progress

#: Scores per block, in floats: 16M floats = 64 MB per worker.
BLOCK_FLOATS = 16 * 1024 * 1024
RECS_FORMATS = ("tsv", "csv", "parquet")


def default_block_size(n_items: int) -> int:
    return int(max(16, min(65536, BLOCK_FLOATS // max(1, n_items))))


def _blas_limit(n_jobs: int):
    """One BLAS thread per worker when several workers run (no oversubscription)."""
    if n_jobs == 1:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def top_k_block(
    score_fn: Callable[[np.ndarray], np.ndarray],
    users: np.ndarray,
    k: int,
    exclude: Optional[sp.csr_matrix],
    item_mask: Optional[np.ndarray] = None,
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Top-k of one block of rows: (rows, items, scores).

    ``score_fn(rows)`` returns the (len(rows), n_items) scores, e.g. ``model.score_users``.
    """
    scores = np.ascontiguousarray(score_fn(users), dtype=np.float32)
    items_out = np.empty((len(users), k), dtype=np.int64)
    scores_out = np.empty((len(users), k), dtype=np.float32)
    if exclude is None:
        rows = np.full(len(users), -1, dtype=np.int64)
        indptr = np.zeros(1, dtype=np.int64)
        indices = np.zeros(0, dtype=np.int32)
    else:
        # users beyond the exclusion matrix (e.g. folded-in ones) exclude nothing
        rows = np.where(users < exclude.shape[0], users, -1).astype(np.int64)
        indptr = exclude.indptr.astype(np.int64, copy=False)
        indices = exclude.indices.astype(np.int32, copy=False)
    mask = np.zeros(0, dtype=np.uint8) if item_mask is None else np.ascontiguousarray(item_mask, dtype=np.uint8)
    topk_masked(scores, rows, indptr, indices, mask, items_out, scores_out)
    return users, items_out, scores_out


def iter_top_k(
    score_fn: Callable[[np.ndarray], np.ndarray],
    n_items: int,
    users: np.ndarray,
    k: int,
    exclude: Optional[sp.csr_matrix] = None,
    item_mask: Optional[np.ndarray] = None,
    n_jobs: int = 1,
    block_size: Optional[int] = None,
    progress: Progress = SILENT,
) -> Iterator[Tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Yield ``(users, items, scores)`` per block, in the order of ``users``.

    ``score_fn(rows)`` scores a block of rows against all ``n_items`` items.
    """
    if k <= 0:
        raise ValueError("k must be a positive integer")
    users = np.asarray(users, dtype=np.int64)
    if exclude is not None and exclude.indptr.dtype != np.int64:
        exclude = sp.csr_matrix((exclude.data, exclude.indices, exclude.indptr.astype(np.int64)), shape=exclude.shape)
    block_size = block_size or default_block_size(n_items)
    blocks = [users[s:s + block_size] for s in range(0, len(users), block_size)]
    n_jobs = _effective_jobs(n_jobs, len(blocks))
    with _blas_limit(n_jobs):
        if n_jobs == 1:
            results = (top_k_block(score_fn, b, k, exclude, item_mask) for b in blocks)
        else:
            from joblib import Parallel, delayed

            results = Parallel(n_jobs=n_jobs, backend="threading", return_as="generator")(
                delayed(top_k_block)(score_fn, b, k, exclude, item_mask) for b in blocks
            )
        yield from progress.iterate(results, total=len(blocks), desc="recommend", unit="block")


def _effective_jobs(n_jobs: int, n_tasks: int) -> int:
    if n_jobs is None or n_jobs == 0:
        n_jobs = 1
    if n_jobs < 0:
        n_jobs = max(1, (os.cpu_count() or 1) + 1 + n_jobs)
    return max(1, min(n_jobs, n_tasks))


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


def write_recommendations(
    model,
    path,
    k: int = 10,
    user_ids: Optional[Sequence[str]] = None,
    exclude="train",
    format: Optional[str] = None,
    n_jobs: int = 1,
    block_size: Optional[int] = None,
    progress: Progress = SILENT,
) -> int:
    """Stream top-k lists for ``user_ids`` (default: all users) to ``path``.

    Output rows are ``user, item, score, rank`` (rank 1 = best), headerless TSV by default,
    CSV with a header for ``.csv``, or Parquet. The file appears only when complete.

    Returns
    -------
    int
        Number of rows written.
    """
    if k <= 0:
        raise InputError(f"-k must be a positive integer, got {k}", hint="e.g. -k 10")
    fmt = format or _format_from_suffix(path)
    if fmt not in RECS_FORMATS:
        raise InputError(f"unknown recommendations format {fmt!r}", hint=f"use one of {', '.join(RECS_FORMATS)}")
    users = np.arange(model.n_users) if user_ids is None else model.user_indices(user_ids)
    blocks = iter_top_k(model.score_users, model.n_items, users, k, exclude=model._exclusion_matrix(exclude),
                        n_jobs=n_jobs, block_size=block_size, progress=progress)
    frames = (block_to_frame(model, u, i, s) for u, i, s in blocks)
    if fmt == "parquet":
        return _write_parquet(frames, path)
    n_rows = 0
    with atomic_write(path) as fh:
        for frame in frames:
            frame.to_csv(fh, sep="\t" if fmt == "tsv" else ",", header=(fmt == "csv" and n_rows == 0),
                         index=False, float_format="%.6g", lineterminator="\n")
            n_rows += len(frame)
    return n_rows


def _format_from_suffix(path) -> str:
    suffix = Path(str(path)).suffix.lower()
    return {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}.get(suffix, "tsv")


def _write_parquet(frames, path) -> int:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError("Parquet output needs pyarrow", hint="pip install 'mrec-warp[parquet]'") from None
    n_rows = 0
    with atomic_path(path) as tmp:
        writer = None
        try:
            for frame in frames:
                table = pa.Table.from_pandas(frame, preserve_index=False)
                if writer is None:
                    writer = pq.ParquetWriter(tmp, table.schema)
                writer.write_table(table)
                n_rows += len(frame)
            if writer is None:  # no users: still a valid, empty file
                pq.write_table(pa.table({"user": [], "item": [], "score": [], "rank": []}), tmp)
        finally:
            if writer is not None:
                writer.close()
    return n_rows
