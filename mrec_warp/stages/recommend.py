"""The recommend stage: top-k lists for many users of a fitted model, written to one file.

:func:`recommend` (and :func:`run_recommend`, its twin with options as objects, which the
command runs) is one straight line: its inputs (the model file, its cold start, the users
asked for, exclusions:
:func:`~mrec_warp.stages.recommend_inputs.recommend_inputs`), then the model's scores as
candidates, their top k (:mod:`mrec_warp.topk`) and the writer (:mod:`mrec_warp.tables`);
:func:`write_recommendations` is that second half, for a model in hand.

With local threads and no work folder the users' blocks are scored on the context's
threads and streamed to the file (:func:`~mrec_warp.topk.iter_top_k`). Otherwise
(processes, Dask, or a work folder) the users are cut into resumable part files by the job
engine (:mod:`mrec_warp.jobs`) and assembled at the end: :func:`recommend_in_parts`. With
``partitions`` a factor model's users are cut into that many blocks on a Dask cluster, each
held and scored by one worker (its factors and exclusions only): :func:`recommend_partitioned`.
The output is the same bytes every way, for any part size, block size and worker count (the
scoring grid of :mod:`mrec_warp.topk`).
"""
from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path
from types import SimpleNamespace
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import scipy.sparse as sp

from ..models.ann import iter_top_k as ann_top_k, open_for as open_ann
from ..context import ExecutionContext, local_context
from ..data.features import FeatureFiles
from ..data.inputs import output_encoding
from ..data.tsv import check_tsv_ids
from ..files import PathLike, check_outputs
from ..models.base import Recommender
from ..models.factor_model import factor_scores
from ..models.fallback import Fallback
from ..errors import InputError
from ..jobs import (INPUTS_FILE, Job, cached, cached_model, damaged, fingerprint, model_fingerprint,
                    job_manifest, read_inputs, unit_of_job, write_inputs)
from ..progress import SILENT, Progress, plural
from ..tables import RECS_COLUMNS, SOURCE_COLUMN, TableOutput, concatenate, neutralised_note, output_format, write_frames
from ..topk import (KernelExclusion, block_to_frame, capped_k, closable, default_block_size, iter_top_k, probe_unrankable,
                    top_k_block)
from ..workers import chunk_ranges
from .recommend_inputs import ColdStartOptions, recommend_inputs

#: Users per part file when not given: small enough that an interrupted job loses little,
#: large enough that a 20M-interaction job has tens of parts, not thousands.
DEFAULT_PART_USERS = 20_000

_PART_SUFFIX = {"tsv": ".tsv", "csv": ".csv", "parquet": ".parquet"}


@dataclass
class RecommendResult:
    """What :func:`recommend` wrote.

    Attributes
    ----------
    rows : int
        Recommendation rows written.
    users : int
        Users they are for.
    notes : list of str
        What the caller should hear about (a ``k`` larger than the catalogue, repeated users,
        unknown users skipped or given the fallback list).
    skipped_users : int
        Users of the ``users`` file left out because the model does not know them
        (``unknown_users="skip"``).
    fallback_users : int
        Users given the fallback list, the model's most popular items (``unknown_users="popular"``).
    """

    rows: int
    users: int
    notes: List[str] = field(default_factory=list)
    skipped_users: int = 0
    fallback_users: int = 0


def recommend(
    model: Union[PathLike, Any],
    output: PathLike,
    k: int = 10,
    *,
    users: Optional[PathLike] = None,
    train: Optional[PathLike] = None,
    exclude_items: Optional[PathLike] = None,
    format: Optional[str] = None,
    block_size: Optional[int] = None,
    part_size: Optional[int] = None,
    item_features: Optional[PathLike] = None,
    user_features: Optional[PathLike] = None,
    feature_sep: Optional[str] = None,
    feature_header: Optional[bool] = None,
    feature_columns: Optional[str] = None,
    include_new_items: bool = False,
    new_items_only: bool = False,
    history: Optional[PathLike] = None,
    fold_in_epochs: Optional[int] = None,
    ann: bool = False,
    unknown_users: str = "refuse",
    partitions: Optional[int] = None,
    context: Optional[ExecutionContext] = None,
    progress: Progress = SILENT,
) -> RecommendResult:
    """Write the top-``k`` items of each user of a model to ``output``, as the command does.

    Parameters
    ----------
    model : path-like or Recommender
        A model file (or a fitted model).
    output : path-like
        ``user, item, score, rank`` rows (see :func:`write_recommendations`).
    k : int
        Items per user (capped at the catalogue, with a note).
    users : path-like, optional
        One user id per line (default: every user of the model, or the cold-start users), in
        output order.
    train : path-like, optional
        Exclude these interactions instead of the ones stored in the model; a file whose
        rows mostly name ids the model does not know is refused.
    exclude_items : path-like, optional
        Item ids never recommended to anyone.
    format, block_size, part_size
        As :func:`write_recommendations` takes them.
    item_features, user_features, feature_sep, feature_header, feature_columns,
    include_new_items, new_items_only, history, fold_in_epochs
        Cold start, as :func:`~mrec_warp.stages.recommend_inputs.cold_start`.
    ann : bool
        Rank with the model's ANN index (``MODEL.ann``, :mod:`mrec_warp.models.ann`) instead of
        exactly; a missing, stale or mismatched index is refused.
    unknown_users : {"refuse", "skip", "popular"}
        What users of ``users`` the model does not know get (:mod:`mrec_warp.models.fallback`):
        an error naming the first and nothing written (except from a popularity model, which
        serves them its ranking), no list (counted in the result and a note), or the model's
        most popular training items -- a fifth column ``source`` then says ``popular`` for
        those rows and ``personal`` for the others. A user with a row in ``history`` is folded
        in, not unknown.
    partitions : int, optional
        Score every user of a factor model in this many user blocks on a Dask cluster, each
        block (its factors and exclusions) held and scored by one worker
        (:func:`recommend_partitioned`); the same output.
    context : ExecutionContext, optional
        Where the scoring runs (default one thread).
    progress : Progress, optional
    """
    cold = ColdStartOptions(FeatureFiles(user=user_features, item=item_features, sep=feature_sep,
                                         header=feature_header, columns=feature_columns),
                            include_new_items=include_new_items, new_items_only=new_items_only, history=history,
                            fold_in_epochs=fold_in_epochs)
    return run_recommend(model, TableOutput(output, format), k, users=users, train=train, exclude_items=exclude_items,
                         cold=cold, ann=ann, unknown_users=unknown_users, block_size=block_size, part_size=part_size,
                         partitions=partitions, context=context, progress=progress)


def run_recommend(
    model: Union[PathLike, Any],
    output: TableOutput,
    k: int = 10,
    *,
    users: Optional[PathLike] = None,
    train: Optional[PathLike] = None,
    exclude_items: Optional[PathLike] = None,
    cold: Optional[ColdStartOptions] = None,
    ann: bool = False,
    unknown_users: str = "refuse",
    block_size: Optional[int] = None,
    part_size: Optional[int] = None,
    partitions: Optional[int] = None,
    context: Optional[ExecutionContext] = None,
    progress: Progress = SILENT,
) -> RecommendResult:
    """:func:`recommend` with its options as objects, as ``mrec-warp recommend`` calls it:
    ``output`` is the file and its format, ``cold`` the newcomers the model is extended with
    (:class:`~mrec_warp.stages.recommend_inputs.ColdStartOptions`). Every other argument is
    :func:`recommend`'s."""
    cold = cold or ColdStartOptions()
    check_outputs({"`output`": output.path}, [None if isinstance(model, Recommender) else model, users, train,
                                             exclude_items, cold.history, cold.features.item, cold.features.user])
    inputs = recommend_inputs(  # 1. inputs: the model extended for newcomers, users, exclusions
        model, users=users, train=train, exclude_items=exclude_items, cold=cold, unknown_users=unknown_users,
        progress=progress)
    model, user_ids, notes = inputs.model, inputs.user_ids, inputs.notes
    # 2-5. the model's candidates (exact, or its ANN index's), their top k, the writer
    index = open_ann(model, inputs.source, context) if ann else None  # checked against the (cold-started) items
    rows = write_recommendations(model, output.path, k=k, user_ids=user_ids, exclude=inputs.exclude,
                                 format=output.format, filter_items=inputs.filtered, block_size=block_size,
                                 part_size=part_size,
                                 model_file=inputs.model_file, context=context, progress=progress, notes=notes,
                                 ann_index=index, fallback=inputs.fallback, partitions=partitions)
    n_users = model.n_users if user_ids is None else len(user_ids)
    if rows == 0 and n_users:  # never a bare "0 recommendations": say why
        notes.append(f"no user got a recommendation: every item of the {model.n_items:,} the model ranks is excluded "
                     "for them (seen in training, in `train`, or listed in `exclude_items`)")
    fallback_users = 0 if inputs.fallback is None else model.n_users - inputs.fallback.first_row
    return RecommendResult(rows, n_users, notes, inputs.skipped, fallback_users)


def check_rankable(model: Recommender, model_file: Optional[PathLike] = None) -> None:
    """Refuse, before any output, a model that cannot rank anything: one without items, or
    one whose scores are all NaN or infinite for its first users (numbers that overflowed in
    training). Its recommendations would be an empty file and a success."""
    where = None if model_file is None else str(model_file)
    if model.n_items == 0:
        raise InputError("the model has no items: there is nothing to recommend", path=where,
                         hint="train it on interactions that name items")
    # a model of new users only (history, features) has no first users to probe: it passes
    probed = probe_unrankable(model.score_users, model.n_users)
    if probed is not None:
        raise InputError(f"every score of the model's first {probed:,} users is NaN or infinite: it ranks "
                         "nothing", path=where,
                         hint="train it again with smaller parameters (a weight or confidence overflowed)")


def write_recommendations(
    model,
    path: PathLike,
    k: int = 10,
    user_ids: Optional[Sequence[str]] = None,
    exclude="train",
    format: Optional[str] = None,
    block_size: Optional[int] = None,
    part_size: Optional[int] = None,
    model_file: Optional[PathLike] = None,
    filter_items: Optional[Sequence[str]] = None,
    context: Optional[ExecutionContext] = None,
    progress: Progress = SILENT,
    notes: Optional[List[str]] = None,
    ann_index=None,
    fallback: Optional[Fallback] = None,
    partitions: Optional[int] = None,
) -> int:
    """Stream top-k lists for ``user_ids`` (default: all users) to ``path``.

    Output rows are ``user, item, score, rank`` (rank 1 = best), and ``source`` with a
    ``fallback``; headerless TSV by default,
    CSV with a header for ``.csv`` (ids a spreadsheet would run as formulas get a leading
    ``'``: :func:`~mrec_warp.tables.neutralise_cells`), or Parquet. The file appears only
    when complete. A model that ranks nothing is refused first (:func:`check_rankable`).

    Parameters
    ----------
    model : Recommender
        A fitted model.
    path : path-like
        The output file (``.gz``: gzip-compressed text).
    k : int
        Items per user (capped at the catalogue: :func:`~mrec_warp.topk.capped_k`).
    user_ids : sequence of str, optional
        Users to recommend for, in output order.
    exclude : "train", None or sparse matrix
        Items never to recommend to a user: the model's training items, nothing, or a users
        x items matrix in the model's index space.
    format : {"tsv", "csv", "parquet"}, optional
        Default: from the suffix.
    block_size : int, optional
        Users scored at once (bounds each worker's memory).
    part_size : int, optional
        Users per part file, when the job goes through parts (:func:`recommend_in_parts`).
    model_file : path-like, optional
        The file ``model`` was loaded from: workers in other processes read it instead of a
        copy saved in the work folder.
    filter_items : sequence of str, optional
        Item ids never recommended to anyone, on top of ``exclude``.
    context : ExecutionContext, optional
        Where the blocks run; default one thread. A context that goes through part files
        (:attr:`~mrec_warp.context.ExecutionContext.uses_parts`) writes them under its work
        folder (default ``PATH.parts``).
    notes : list of str, optional
        Gets a note when ``k`` was capped at the catalogue, and when CSV cells were
        neutralised (how many).
    ann_index : mrec_warp.models.ann.AnnIndex, optional
        Rank with this index (on local threads) instead of exactly.
    fallback : Fallback, optional
        The model's users who get the fallback list instead of its own
        (:class:`~mrec_warp.models.fallback.Fallback`); every row then says in a fifth column,
        ``source``, whether its list is ``personal`` or ``popular``.
    partitions : int, optional
        Score every user in this many user blocks on the context's Dask cluster, each where
        its rows live (:func:`recommend_partitioned`).

    Returns
    -------
    int
        Number of rows written.
    """
    if k <= 0:
        raise InputError(f"`k` must be a positive integer, got {k}", hint="e.g. `k=10`")
    check_rankable(model, model_file)
    k, note = capped_k(int(k), model.n_items)  # a longer list holds nothing more, only bigger buffers
    if note and notes is not None:
        notes.append(note)
    fmt = output_format(path, format)
    users = np.arange(model.n_users) if user_ids is None else model.user_indices(user_ids)
    mask = None if filter_items is None else model.item_mask(model.item_indices(filter_items))
    if fmt == "tsv":  # once here, for the streamed and the part-file paths alike
        check_tsv_ids(model.user_ids, model.item_ids, path=path)
    context = context if context is not None else local_context()

    def neutralised(n: int) -> None:
        note = neutralised_note(n)
        if note:  # a caller collecting notes shows them; otherwise the log says it
            notes.append(note) if notes is not None else progress.log(note)

    if partitions is not None:
        if user_ids is not None or fallback is not None or ann_index is not None:
            raise InputError("`partitions` scores every user of the model, exactly, in blocks: it does not combine "
                             "with a list of users (`users`, `history`), `unknown_users` or `ann`",
                             hint="drop `partitions`, or those options")
        info = recommend_partitioned(model, path, k, partitions, model.exclusion_matrix(exclude), mask, fmt, context,
                                     block_size=block_size, progress=progress, on_neutralised=neutralised)
        return info["rows"]
    with context:
        if context.uses_parts:
            if mask is not None:  # part files take one exclusion matrix: add the items to every row
                exclude = _with_items(model.exclusion_matrix(exclude), mask, model.n_users)
            info = recommend_in_parts(model, path, k=k, users=None if user_ids is None else users,
                                      exclude=exclude if isinstance(exclude, str) or exclude is None
                                      else model.exclusion_matrix(exclude),
                                      fmt=fmt, context=context, part_size=part_size, block_size=block_size,
                                      model_file=model_file, progress=progress, on_neutralised=neutralised,
                                      fallback=fallback)
            return info["rows"]
        excluded = model.exclusion_matrix(exclude)
        blocks = (closable(ann_top_k(ann_index, model, users, k, excluded, mask, block_size, progress))
                  if ann_index is not None else
                  iter_top_k(model.score_users, model.n_items, users, k, exclude=excluded,
                             block_size=block_size, progress=progress, workers=context, item_mask=mask))
        # closed here on any exit (Ctrl-C included), so that the workers are stopped now and
        # not by the garbage collector while the interpreter shuts down
        with contextlib.closing(blocks):
            frames = (block_to_frame(model, u, i, s) if fallback is None else
                      fallback.frame(model, u, i, s, excluded, mask) for u, i, s in blocks)
            return write_frames(frames, path, fmt, encoding=output_encoding(getattr(model, "id_encoding_", None)),
                                columns=table_columns(fallback), on_neutralised=neutralised)


def table_columns(fallback: Optional[Fallback]) -> tuple:
    """The columns of a recommendations table: ``source`` too when some users may get the fallback list."""
    return RECS_COLUMNS if fallback is None else (*RECS_COLUMNS, SOURCE_COLUMN)


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
    ones = sp.csr_matrix(exclude[:n_users], dtype=np.float32, copy=True)
    ones.data[:] = 1.0  # a stored entry excludes its item whatever its value (a sum drops stored zeros)
    out = sp.csr_matrix(ones + everyone, dtype=np.float32)
    out.data[:] = 1.0
    out.sort_indices()
    return out


# ---------------------------------------------------------------------------------------------
# user ranges -> part files -> one output file
# ---------------------------------------------------------------------------------------------
def _part_name(i: int, fmt: str) -> str:
    return f"part-{i:05d}{_PART_SUFFIX[fmt]}"


def cached_inputs(path: PathLike, n_users: int, n_items: int, users: bool, exclude: bool) -> Dict[str, Any]:
    """A recommend job's staged inputs (the ``users`` and/or ``exclude`` it needed), checked
    against the model and built once per process (not once per part)."""
    def load(p):
        z = read_inputs(p, matrices=["exclude"] if exclude else [],
                        arrays={"users": ("iu", (None,))} if users else None)
        if users:
            rows = z["users"]
            if len(rows) and (rows.min() < 0 or rows.max() >= n_users):
                raise damaged(p, f"user row {rows.max() if rows.max() >= n_users else rows.min()}"
                                 f" is outside 0..{n_users - 1}")
            z["users"] = rows.astype(np.int64, copy=False)
        if exclude:
            if z["exclude"].shape[1] != n_items:
                raise damaged(p, f"{z['exclude'].shape[1]} columns for a model of {n_items} items")
            z["exclude"] = KernelExclusion.of(z["exclude"])
        return z

    return cached(f"recommend-inputs-{users:d}{exclude:d}", path, load)


def _recommend_part(model_src, workdir: str, part: int, start: int, stop: int, inputs: Optional[str],
                    users_src, exclude_src, k: int, fmt: str, block_size: Optional[int],
                    fallback: Optional[Fallback] = None) -> int:
    """One unit: top-k for the users at positions ``[start, stop)`` of the job, written to its part file.

    ``model_src`` is a fitted model (threads) or a model file path (other backends).
    ``users_src`` is ``None`` (all users, in order), the job's user array (threads) or
    ``"staged"``; ``exclude_src`` is ``"train"``, ``None``, a CSR matrix or ``"staged"``,
    with rows by user index; ``inputs`` is the staged inputs file; ``fallback``, the users
    who get the fallback list (:func:`write_recommendations`). Users are scored at their
    positions in the job (:func:`~mrec_warp.topk.grid_scores`), so parts give the same bits
    as one stream. Returns the number of rows written (0 if the part existed already).
    """
    path = Path(workdir) / _part_name(part, fmt)
    if path.exists():
        return 0
    started = job_manifest(workdir)  # before reading the job's inputs: the part is kept only for this job
    model = cached_model(model_src) if isinstance(model_src, (str, os.PathLike)) else model_src
    staged = {} if inputs is None else cached_inputs(inputs, model.n_users, model.n_items,
                                                       users=users_src == "staged", exclude=exclude_src == "staged")
    if users_src is None:
        users = np.arange(start, stop, dtype=np.int64)
    else:
        users = (staged["users"] if isinstance(users_src, str) else users_src)[start:stop]
    if isinstance(exclude_src, str):
        exclude = model.train_ if exclude_src == "train" else staged["exclude"]
    else:
        exclude = exclude_src
    if exclude is not None:
        exclude = KernelExclusion.of(exclude)  # once per part, not once per block (no-op if cached)
    bs = block_size or default_block_size(model.n_items)
    blocks = (top_k_block(model.score_users, users[s:e], k, exclude, start + s) for s, e in chunk_ranges(len(users), bs))
    frames = (block_to_frame(model, *block) if fallback is None else fallback.frame(model, *block, exclude)
              for block in blocks)
    with unit_of_job(workdir, started):
        return write_frames(frames, path, fmt, encoding=output_encoding(getattr(model, "id_encoding_", None)),
                            header=False)


def recommend_in_parts(
    model,
    output: PathLike,
    k: int = 10,
    users: Optional[np.ndarray] = None,
    exclude: Union[str, None, sp.csr_matrix] = "train",
    fmt: str = "tsv",
    context: Optional[ExecutionContext] = None,
    part_size: Optional[int] = None,
    block_size: Optional[int] = None,
    model_file: Optional[PathLike] = None,
    progress: Progress = SILENT,
    on_neutralised: Optional[Callable[[int], None]] = None,
    fallback: Optional[Fallback] = None,
) -> Dict[str, int]:
    """Top-k lists for many users as resumable part files, assembled into ``output``.

    Parameters
    ----------
    model : Recommender
        A fitted model.
    output : path-like
        Final file; appears only when every part is done.
    k : int
    users : int array, optional
        Row indices to recommend for (default: all users), in output order.
    exclude : "train", None or CSR matrix
        As :func:`write_recommendations`.
    fmt : {"tsv", "csv", "parquet"}
    context : ExecutionContext, optional
        Where the parts run, and their work folder (default ``OUTPUT.parts``): rerunning the
        same job with the same folder skips the finished parts. ``keep_parts`` keeps the
        folder after assembling.
    part_size : int, optional
        Users per part (default :data:`DEFAULT_PART_USERS`, or one block if larger).
    block_size : int, optional
        Users scored at once inside a part (bounds each worker's memory).
    model_file : path-like, optional
        The file ``model`` was loaded from: workers of process/Dask backends load it rather
        than a copy saved in the work folder.
    on_neutralised : callable, optional
        Gets the number of CSV cells neutralised (:func:`~mrec_warp.tables.concatenate`).
    fallback : Fallback, optional
        As :func:`write_recommendations`.

    Returns
    -------
    dict
        ``rows`` written, ``parts`` in the job, ``parts_skipped`` (already done by an
        earlier run), ``parts_run``.
    """
    context = context if context is not None else local_context()
    users = np.arange(model.n_users, dtype=np.int64) if users is None else np.asarray(users, dtype=np.int64)
    n = len(users)
    bs = block_size or default_block_size(model.n_items)
    size = int(part_size) if part_size else max(bs, DEFAULT_PART_USERS)
    if size < 1:
        raise InputError(f"part_size must be a positive number of users, got {part_size}")
    ranges = chunk_ranges(n, size)
    all_users = n == model.n_users and np.array_equal(users, np.arange(n))
    if isinstance(exclude, str):
        if exclude != "train":
            raise ValueError("exclude must be 'train', None or a sparse matrix")
        exclude_kind = "train"
    else:
        exclude_kind = "none" if exclude is None else "matrix"
    description = {
        "kind": "recommend", "model": model_fingerprint(model), "k": int(k),
        "format": fmt, "users": "all" if all_users else fingerprint(users), "n_users": n, "part_size": size,
        "exclude": exclude_kind if exclude_kind != "matrix" else fingerprint(exclude),
    }
    if fallback is not None:  # only then: the work folders of other jobs stay valid
        description["fallback"] = {"first_row": fallback.first_row, "counts": fingerprint(fallback.counts)}
    with context:
        job = Job(context, description, [_part_name(i, fmt) for i in range(len(ranges))],
                  folder=context.folder(f"{output}.parts"), progress=progress)
        progress.log(f"recommend: {plural(len(ranges), 'part')} of up to {size:,} users in {job.path}"
                     + (f"; {job.skipped} already done" if job.skipped else ""))
        if job.todo:
            model_src: Any = model
            inputs: Optional[str] = None
            users_src: Any = None if all_users else users
            exclude_src: Any = "train" if exclude_kind == "train" else exclude
            if job.off_process:
                # workers read inputs from files: the model file, or copies made once here
                if model_file is None:
                    model_file = job.stage("model.npz", model.save)
                model_src = job.read_by_workers(model_file)
                matrices = {"exclude": exclude} if exclude_kind == "matrix" else {}
                arrays = {} if all_users else {"users": users}
                if matrices or arrays:
                    inputs = job.stage(INPUTS_FILE, lambda p: write_inputs(p, matrices, arrays))
                    users_src = "staged" if arrays else None
                    exclude_src = "staged" if matrices else exclude_src
            progress.log(f"running {len(job.todo)} parts on {context.describe()}")
            tasks = [(model_src, str(job.path), i, *ranges[i], inputs, users_src, exclude_src, k, fmt, block_size,
                      fallback) for i in job.todo]
            for _ in job.run(_recommend_part, tasks):
                pass
        job.check_complete()
        n_rows = concatenate([job.part(i) for i in range(len(ranges))], output, fmt, header=table_columns(fallback),
                             on_neutralised=on_neutralised)
        job.finish(staged=["model.npz", INPUTS_FILE])
    return {"rows": n_rows, "parts": len(ranges), "parts_skipped": job.skipped, "parts_run": len(job.todo)}


# ---------------------------------------------------------------------------------------------
# user blocks on a Dask cluster, each scored where its rows live
# ---------------------------------------------------------------------------------------------
# Recommend by user blocks on a Dask cluster: each block scored where its rows live.
#
# A factor model's users are cut into P blocks of consecutive rows. Each block -- its user
# factors, its rows of the exclusions and its user ids -- is scattered to one worker; the item
# side (factors, biases, ids, the items filtered for everyone) goes once to every worker.
# Each block is one unit of the job engine (:mod:`mrec_warp.jobs`): its worker ranks its
# users and writes its part file, and the parts are joined into one output as every
# recommend job's are (resumable, assembled in order). A worker so holds ``1/P`` of the
# users and of the exclusions, never the whole model.
#
# Every user is scored at its place in the list of all users (:func:`~mrec_warp.topk.grid_scores`),
# so the output is byte for byte the one of ``recommend`` on one thread.


def _block_part_name(i: int, fmt: str) -> str:
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
    path = Path(workdir) / _block_part_name(part, fmt)
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
        job = Job(context, description, [_block_part_name(i, fmt) for i in range(partitions)],
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
