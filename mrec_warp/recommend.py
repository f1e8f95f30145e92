"""Batch top-k recommendation: user blocks -> scores -> mask seen -> heap top-k -> disk.

Memory is bounded by the block size (``block_size x n_items`` float32 scores per worker),
never by users x items. Blocks run on joblib threads: the scoring is BLAS and the top-k
kernel releases the GIL, so threads really run at once. With ``backend="processes"`` or
``"dask"`` (see :mod:`mrec_warp.parallel`) the same blocks run on other processes or
machines, and :func:`write_recommendations` goes through resumable part files
(:mod:`mrec_warp.distributed`).

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

import contextlib
import csv
import gzip
import inspect
import io
from pathlib import Path
from typing import IO, Callable, Iterator, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ._topk import topk_masked
from .data.io import atomic_path, atomic_write, check_tsv_ids, output_encoding
from .errors import InputError
from .context import context_for
from .workers import one_blas_thread
from .progress import SILENT, Progress

#: Scores per block, in floats: 16M floats = 64 MB per worker.
BLOCK_FLOATS = 16 * 1024 * 1024
RECS_FORMATS = ("tsv", "csv", "parquet")
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


class _KernelExclusion(NamedTuple):
    """A CSR's structure in the top-k kernel's index types (scipy would downcast int64
    index pointers to int32 again, so the arrays are kept as they are here)."""

    indptr: np.ndarray
    indices: np.ndarray
    n_rows: int

    @classmethod
    def of(cls, exclude) -> "_KernelExclusion":
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
        exclude = _KernelExclusion.of(exclude)
        # users beyond the exclusion matrix (e.g. folded-in ones) exclude nothing
        rows = np.where(users < exclude.n_rows, users, -1).astype(np.int64)
        indptr, indices = exclude.indptr, exclude.indices
    topk_masked(scores, rows, indptr, indices, _NO_MASK if item_mask is None else item_mask, items_out, scores_out)
    return users, items_out, scores_out


def iter_top_k(
    score_fn: Callable[[np.ndarray], np.ndarray],
    n_items: int,
    users: np.ndarray,
    k: int,
    exclude: Optional[sp.csr_matrix] = None,
    n_jobs: int = 1,
    block_size: Optional[int] = None,
    progress: Progress = SILENT,
    backend="threads",
    scheduler: Optional[str] = None,
    item_mask: Optional[np.ndarray] = None,
) -> Iterator[Tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Yield ``(users, items, scores)`` per block, in the order of ``users``.

    ``score_fn(rows)`` scores a block of rows against all ``n_items`` items.

    ``backend`` is ``"threads"`` (default: blocks on joblib threads sharing memory),
    ``"processes"``, ``"dask"`` or an entered :class:`~mrec_warp.parallel.Backend`. With the
    last three ``score_fn`` is pickled to the workers, so it should be cheap to pickle, e.g.
    :class:`~mrec_warp.distributed.ModelScorer`; each block ships only its own rows of
    ``exclude``. ``item_mask`` (uint8, one entry per item) marks items never to recommend.
    """
    if k <= 0:
        raise ValueError("k must be a positive integer")
    users = np.asarray(users, dtype=np.int64)
    block_size = block_size or default_block_size(n_items)
    starts = range(0, len(users), block_size)
    with context_for(backend, n_jobs, scheduler) as be:
        if be.is_local_memory:  # threads share the exclusion arrays, converted once
            shared = None if exclude is None else _KernelExclusion.of(exclude)
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
    sub = exclude[np.where(inside, users, 0)]
    if not inside.all():
        sub = sp.diags(inside.astype(np.float32)) @ sub
        sub.eliminate_zeros()
    return sp.csr_matrix(sub)


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
    backend="threads",
    scheduler: Optional[str] = None,
    workdir=None,
    part_size: Optional[int] = None,
    model_file=None,
    filter_items: Optional[Sequence[str]] = None,
) -> int:
    """Stream top-k lists for ``user_ids`` (default: all users) to ``path``.

    ``filter_items`` are item ids never recommended to anyone, on top of ``exclude``.

    Output rows are ``user, item, score, rank`` (rank 1 = best), headerless TSV by default,
    CSV with a header for ``.csv``, or Parquet. The file appears only when complete.

    With the default ``backend="threads"`` and no ``workdir``, blocks are scored on
    ``n_jobs`` threads and streamed to the file. Otherwise (``"processes"``, ``"dask"``, or
    a ``workdir``) the users are cut into resumable part files under ``workdir`` (default
    ``PATH.parts``) and assembled at the end: see
    :func:`~mrec_warp.distributed.recommend_in_parts`. The output is the same either way.

    Returns
    -------
    int
        Number of rows written.
    """
    if k <= 0:
        raise InputError(f"-k must be a positive integer, got {k}", hint="e.g. -k 10")
    k = min(int(k), max(1, model.n_items))  # a longer list holds nothing more, only bigger buffers
    fmt = output_format(path, format)
    users = np.arange(model.n_users) if user_ids is None else model.user_indices(user_ids)
    mask = None if filter_items is None else model._item_mask(model.item_indices(filter_items))
    if fmt == "parquet":
        _require_pyarrow()
    if fmt == "tsv":  # once here, for the streamed and the part-file paths alike
        check_tsv_ids(model.user_ids, model.item_ids, path=path)
    if workdir is not None or not (isinstance(backend, str) and backend == "threads"):
        from .distributed import recommend_in_parts

        if mask is not None:  # part files take one exclusion matrix: add the items to every row
            exclude = _with_items(model._exclusion_matrix(exclude), mask, model.n_users)
        info = recommend_in_parts(model, path, k=k, users=None if user_ids is None else users,
                                  exclude=exclude if isinstance(exclude, str) or exclude is None
                                  else model._exclusion_matrix(exclude),
                                  fmt=fmt, backend=backend, n_jobs=n_jobs, scheduler=scheduler, workdir=workdir,
                                  part_size=part_size, block_size=block_size, model_file=model_file, progress=progress)
        return info["rows"]
    blocks = iter_top_k(model.score_users, model.n_items, users, k, exclude=model._exclusion_matrix(exclude),
                        n_jobs=n_jobs, block_size=block_size, progress=progress, item_mask=mask)
    # closed here on any exit (Ctrl-C included), so that the workers are stopped now and
    # not by the garbage collector while the interpreter shuts down
    with contextlib.closing(blocks):
        frames = (block_to_frame(model, u, i, s) for u, i, s in blocks)
        if fmt == "parquet":
            return write_parquet(frames, path)
        n_rows = 0
        with text_output(path, encoding=output_encoding(getattr(model, "id_encoding_", None))) as fh:
            for frame in frames:
                frame.to_csv(fh, header=(fmt == "csv" and n_rows == 0), index=False, float_format="%.6g",
                             lineterminator="\n", **text_format(fmt))
                n_rows += len(frame)
        return n_rows


def is_gzip_name(path) -> bool:
    """Whether an output's name asks for gzip compression (``recs.tsv.gz``)."""
    return str(path).lower().endswith(".gz")


def output_format(path, format: Optional[str] = None) -> str:
    """The format of a table output: ``format`` if given, else from the suffix (a final
    ``.gz`` aside); refuses, before any work, what cannot be written."""
    fmt = format or _format_from_suffix(path)
    if fmt not in RECS_FORMATS:
        raise InputError(f"unknown output format {fmt!r}", hint=f"use one of {', '.join(RECS_FORMATS)}")
    if fmt == "parquet" and is_gzip_name(path):
        raise InputError("Parquet output cannot be gzip-compressed as a whole", path=str(path),
                         hint="drop the .gz: Parquet compresses its columns itself")
    return fmt


@contextlib.contextmanager
def text_output(path, encoding: Optional[str] = "utf-8", binary: bool = False) -> Iterator[IO]:
    """An atomic output file (see :func:`~mrec_warp.data.io.atomic_write`), gzip-compressed
    when its name ends in ``.gz`` so that readers which go by the name (``evaluate``,
    ``zcat``) can read it. Text mode unless ``binary``."""
    with atomic_write(path, mode="wb") as raw:
        # mtime=0 and no name in the header: the same rows give the same bytes on every run
        sink = gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) if is_gzip_name(path) else raw
        if binary:
            yield sink
        else:
            text = io.TextIOWrapper(sink, encoding=encoding, newline="")
            yield text
            text.flush()
            text.detach()
        if sink is not raw:
            sink.close()  # writes the gzip trailer; the raw file stays open for atomic_write


def text_format(fmt: str) -> dict:
    """``to_csv`` options of a text recommendations file: TSV holds ids exactly as they are
    (never quoted); CSV quotes a field that needs it (comma, quote, line break) per RFC 4180."""
    if fmt == "tsv":
        return {"sep": "\t", "quoting": csv.QUOTE_NONE}
    return {"sep": ",", "quoting": csv.QUOTE_MINIMAL, "doublequote": True}


def _with_items(exclude: Optional[sp.csr_matrix], mask: np.ndarray, n_users: int) -> sp.csr_matrix:
    """``exclude`` with the items of ``mask`` added to every user's row."""
    cols = np.flatnonzero(mask)
    everyone = sp.csr_matrix((np.ones(n_users * len(cols), np.float32),
                              (np.repeat(np.arange(n_users), len(cols)), np.tile(cols, n_users))),
                             shape=(n_users, len(mask)))
    if exclude is None:
        return everyone
    if exclude.shape[0] < n_users:  # folded-in users beyond the matrix exclude nothing else
        exclude = sp.vstack([exclude, sp.csr_matrix((n_users - exclude.shape[0], len(mask)), dtype=np.float32)])
    out = sp.csr_matrix(exclude[:n_users] + everyone, dtype=np.float32)
    out.data[:] = 1.0
    out.sort_indices()
    return out


def _format_from_suffix(path) -> str:
    suffixes = [x.lower() for x in Path(str(path)).suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    suffix = suffixes[-1] if suffixes else ""
    return {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}.get(suffix, "tsv")


def _require_pyarrow() -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise InputError("Parquet output needs pyarrow", hint="pip install 'mrec-warp[parquet]'") from None


def write_parquet(frames, path) -> int:
    """Write the tables of ``frames`` as one Parquet file, atomically; return the rows."""
    _require_pyarrow()
    import pyarrow as pa
    import pyarrow.parquet as pq

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
