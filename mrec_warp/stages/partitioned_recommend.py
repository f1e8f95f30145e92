"""Recommend by user blocks on a Dask cluster: each block scored where its rows live.

A factor model's users are cut into P blocks of consecutive rows. Each block -- its user
factors, its rows of the exclusions and its user ids -- is scattered to one worker; the item
side (factors, biases, ids, the items filtered for everyone) goes once to every worker.
Each block is one unit of the job engine (:mod:`mrec_warp.jobs`): its worker ranks its
users and writes its part file, and the parts are joined into one output as every
recommend job's are (resumable, assembled in order). A worker so holds ``1/P`` of the
users and of the exclusions, never the whole model.

Every user is scored at its place in the list of all users (:func:`~mrec_warp.topk.grid_scores`),
so the output is byte for byte the one of ``recommend`` on one thread.
"""
from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np
import scipy.sparse as sp

from ..context import ExecutionContext
from ..data.inputs import output_encoding
from ..errors import InputError
from ..jobs import Job, fingerprint, job_manifest, model_fingerprint, unit_of_job
from ..models.factor_model import factor_scores
from ..progress import SILENT, Progress, plural
from ..tables import RECS_COLUMNS, concatenate, write_frames
from ..topk import KernelExclusion, block_to_frame, default_block_size, top_k_block
from ..workers import chunk_ranges

_PART_SUFFIX = {"tsv": ".tsv", "csv": ".csv", "parquet": ".parquet"}


def _part_name(i: int, fmt: str) -> str:
    return f"block-{i:05d}{_PART_SUFFIX[fmt]}"


def _user_block(user_factors: np.ndarray, exclude: Optional[sp.csr_matrix], user_ids: np.ndarray,
                start: int, stop: int) -> Tuple[np.ndarray, Optional[sp.csr_matrix], np.ndarray]:
    """Rows ``[start, stop)``: their factors, exclusions (rows past the matrix exclude nothing:
    users folded in after training) and ids, as copies of their own."""
    rows = None
    if exclude is not None:
        have = sp.csr_matrix(exclude[min(start, exclude.shape[0]):min(stop, exclude.shape[0])], dtype=np.float32)
        if have.shape[0] < stop - start:
            have = sp.vstack([have, sp.csr_matrix((stop - start - have.shape[0], exclude.shape[1]),
                                                  dtype=np.float32)]).tocsr()
        rows = have
    return np.ascontiguousarray(user_factors[start:stop]), rows, np.asarray(user_ids[start:stop])


def _recommend_block(block: Tuple[np.ndarray, Optional[sp.csr_matrix], np.ndarray],
                     items: Tuple[np.ndarray, Optional[np.ndarray], np.ndarray, Optional[np.ndarray]],
                     workdir: str, part: int, position: int, k: int, fmt: str, block_size: int,
                     encoding: Optional[str]) -> int:
    """On the worker holding ``block``: its users' top-k, written to its part file. Returns
    the rows written (0 when an earlier run wrote the part)."""
    path = Path(workdir) / _part_name(part, fmt)
    if path.exists():
        return 0
    started = job_manifest(workdir)
    user_factors, exclude, user_ids = block
    item_factors, bias, item_ids, mask = items
    exclusion = None if exclude is None else KernelExclusion.of(exclude)
    names = SimpleNamespace(user_ids=user_ids, item_ids=item_ids)  # what block_to_frame reads

    def score(rows: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
        return factor_scores(user_factors[rows], item_factors, bias, out)

    users = np.arange(len(user_factors), dtype=np.int64)
    frames = (block_to_frame(names, *top_k_block(score, users[s:e], k, exclusion, position + s, item_mask=mask))
              for s, e in chunk_ranges(len(users), block_size))
    with unit_of_job(workdir, started):
        return write_frames(frames, path, fmt, encoding=encoding, header=False)


def recommend_partitioned(model: Any, output: Any, k: int, partitions: int, exclude: Optional[sp.csr_matrix],
                          item_mask: Optional[np.ndarray], fmt: str, context: ExecutionContext,
                          block_size: Optional[int] = None, progress: Progress = SILENT,
                          on_neutralised: Optional[Callable[[int], None]] = None) -> Dict[str, int]:
    """Top-``k`` lists of every user of a factor model, by ``partitions`` user blocks scored
    where they live on a Dask cluster, joined into ``output`` (module docstring).

    Parameters
    ----------
    model : FactorScoring
        A fitted factor model (its ``factor_parts``: user factors, item factors, biases).
    output : path-like
    k : int
    partitions : int
        User blocks, ``1 <= partitions <= users``.
    exclude : csr_matrix, optional
        Users x items never recommended (in the model's index space).
    item_mask : uint8 array, optional
        Items never recommended to anyone.
    fmt : {"tsv", "csv", "parquet"}
    context : ExecutionContext
        A Dask context; its work folder (default ``OUTPUT.parts``) holds the blocks' parts.
    block_size : int, optional
        Users scored at once inside a block.

    Returns
    -------
    dict
        ``rows`` written, ``parts`` (blocks), ``parts_skipped`` (done by an earlier run), ``parts_run``.
    """
    if context.backend != "dask":
        raise InputError("`partitions` scores user blocks on a Dask cluster: it needs `backend=dask`",
                         hint="add `backend=dask`, or drop `partitions`")
    if not hasattr(model, "factor_parts"):
        raise InputError("`partitions` scores the user blocks of a factor model (warp, hybrid, wrmf)",
                         hint="drop `partitions` for this model")
    n_users = model.n_users
    if not isinstance(partitions, int) or isinstance(partitions, bool) or not 1 <= partitions <= max(n_users, 1):
        raise InputError(f"`partitions` must be a whole number from 1 to the model's {n_users:,} users, "
                         f"got {partitions!r}", hint=f"e.g. `partitions={min(4, max(n_users, 1))}`")
    user_factors, item_factors, bias = model.factor_parts()
    bounds = np.linspace(0, n_users, partitions + 1).round().astype(np.int64)
    bs = int(block_size or default_block_size(model.n_items))
    description = {"kind": "recommend-blocks", "model": model_fingerprint(model), "k": int(k), "format": fmt,
                   "partitions": int(partitions), "block_size": bs,
                   "exclude": "none" if exclude is None else fingerprint(exclude),
                   "mask": "none" if item_mask is None else fingerprint(item_mask)}
    encoding = output_encoding(getattr(model, "id_encoding_", None))
    with context:
        client = context.client
        job = Job(context, description, [_part_name(i, fmt) for i in range(partitions)],
                  folder=context.folder(f"{output}.parts"), progress=progress)
        progress.log(f"recommend: {plural(partitions, 'user block')} on {context.describe()}"
                     + (f"; {job.skipped} already done" if job.skipped else ""))
        if job.todo:
            addresses = sorted(client.scheduler_info()["workers"])
            tag = uuid.uuid4().hex[:8]
            items = client.scatter({f"recommend-items-{tag}": (np.ascontiguousarray(item_factors), bias,
                                                              np.asarray(model.item_ids), item_mask)},
                                   broadcast=True, hash=False)[f"recommend-items-{tag}"]
            tasks = []
            for i in job.todo:
                a, b = int(bounds[i]), int(bounds[i + 1])
                key = f"recommend-users-{i:05d}-{tag}"
                block = client.scatter({key: _user_block(user_factors, exclude, model.user_ids, a, b)},
                                       workers=[addresses[i % len(addresses)]], hash=False)[key]
                tasks.append((block, items, str(job.path), i, a, int(k), fmt, bs, encoding))
            for _ in job.run(_recommend_block, tasks):
                pass
            del tasks, items
        job.check_complete()
        n_rows = concatenate([job.part(i) for i in range(partitions)], output, fmt, header=RECS_COLUMNS,
                             on_neutralised=on_neutralised)
        job.finish()
    return {"rows": n_rows, "parts": partitions, "parts_skipped": job.skipped, "parts_run": len(job.todo)}
