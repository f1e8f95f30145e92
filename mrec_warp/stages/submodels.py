"""The sub-model fit: K independent WARP models of d/K factors, fitted at once and concatenated.

A client of the job engine (:mod:`mrec_warp.jobs`): each sub-model is a unit with its own
part file, so an interrupted fit resumes with the sub-models still missing, and the units
run on any backend (each is single-threaded, so J workers fit J sub-models at once).

How many sub-models is a modelling choice, never the cluster's: the default
(:data:`DEFAULT_SUB_MODELS`) is the same on any backend and any number of workers, so one
command gives the same model, and a work folder resumes, on any cluster.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from ..context import ExecutionContext, local_context
from ..data.interactions import Interactions
from ..files import PathLike, atomic_path
from ..data.npz import check_finite, check_ids, write_npz
from ..errors import InputError
from ..jobs import (INPUTS_FILE, Job, cached, damaged, fingerprint, read_inputs, read_work_arrays,
                    job_manifest, unit_of_job, write_inputs)
from ..models import WARP
from ..progress import SILENT, Progress
from ..seeds import DEFAULT_SEED, spawn_seeds
from ..unit_logs import unit_progress

#: Sub-models when none are asked for: one model of all the factors. On ml-100k (64 factors,
#: default settings, 5 seeds) P@10 was 0.2223 for 1 x 64, 0.2154 for 2 x 32 and 0.2052 for
#: 4 x 16 factors, and fewer factors did not fit sooner (scripts/bench_submodels.py; docs/tutorials/dask.rst,
#: "Training on a cluster").
DEFAULT_SUB_MODELS = 1


def split_factors(factors: int, n_models: int) -> List[int]:
    """``factors`` spread over ``n_models`` sub-models as evenly as possible."""
    if n_models < 1 or factors < n_models:
        raise InputError(f"cannot split {factors} factors into {n_models} sub-models",
                         hint="use at most as many sub-models as factors")
    return [factors // n_models + (1 if i < factors % n_models else 0) for i in range(n_models)]


def write_training_inputs(data: Interactions, path: PathLike) -> None:
    """Stage the training interactions (which pairs are positive, and the ids) for the workers."""
    write_inputs(path, {"train": data.matrix}, {"user_ids": data.user_ids, "item_ids": data.item_ids})


def read_training_inputs(path: PathLike) -> Interactions:
    """Interactions staged by :func:`write_training_inputs` (checked), cached per process."""
    def load(p):
        z = read_inputs(p, matrices=["train"], arrays={"user_ids": ("U", (None,)), "item_ids": ("U", (None,))})
        shape = (len(z["user_ids"]), len(z["item_ids"]))
        try:
            if z["train"].shape != shape:
                raise ValueError(f"shape {z['train'].shape} does not match {shape[0]} users and {shape[1]} items")
            check_ids(z["user_ids"], "user ids")
            check_ids(z["item_ids"], "item ids")
        except ValueError as exc:
            raise damaged(p, str(exc)) from None
        return Interactions(z["train"], z["user_ids"], z["item_ids"])

    return cached("interactions", path, load)


def _part_name(index: int) -> str:
    return f"submodel-{index:03d}.npz"


def _fit_submodel(data_src, workdir: str, index: int, params: Dict[str, Any],
                  log: Optional[str] = None) -> Dict[str, Any]:
    """One unit: fit sub-model ``index`` and save its arrays to its part file; its epochs
    are logged to the file ``log`` (relayed to the driver's terminal) when given."""
    path = Path(workdir) / _part_name(index)
    if path.exists():
        return {"index": index, "skipped": True}
    started = job_manifest(workdir)  # before reading the job's inputs: the part is kept only for this job
    data = read_training_inputs(data_src) if isinstance(data_src, (str, os.PathLike)) else data_src
    t0 = time.perf_counter()
    with unit_of_job(workdir, started):
        model = WARP(**params).fit(data, progress=unit_progress(log, prefix=f"sub-model {index}: "))
        with atomic_path(path) as tmp:
            write_npz(tmp, dict(user_factors=model.user_factors_, item_factors=model.item_factors_,
                                item_bias=model.item_bias_, best_epoch=np.int64(model.best_epoch_)))
    return {"index": index, "skipped": False, "seconds": time.perf_counter() - t0, "epochs": int(model.best_epoch_)}


def _read_submodel(path: Path, n_users: int, n_items: int, factors: int) -> Dict[str, np.ndarray]:
    """A sub-model part file, every array checked against the job (shapes, finite values)."""
    z = read_work_arrays(path, {"user_factors": ("f", (n_users, factors)), "item_factors": ("f", (n_items, factors)),
                                "item_bias": ("f", (n_items,)), "best_epoch": ("iu", ())})
    try:
        for key in ("user_factors", "item_factors", "item_bias"):
            check_finite(z[key], key.replace("_", " "))
        if int(z["best_epoch"]) < 0:
            raise ValueError(f"best_epoch is {int(z['best_epoch'])}")
    except ValueError as exc:
        raise damaged(path, str(exc)) from None
    return z


def fit_submodels(
    data: Interactions,
    params: Optional[Dict[str, Any]] = None,
    context: Optional[ExecutionContext] = None,
    n_models: Optional[int] = None,
    random_state: int = DEFAULT_SEED,
    progress: Progress = SILENT,
) -> WARP:
    """Fit ``n_models`` independent WARP sub-models at once and concatenate them (as mrec did).

    Sub-model ``m`` has ``d_m`` of the ``factors`` (``sum d_m = factors``), its own seed,
    and sees all the data; each is fitted single-threaded (so each is bit-for-bit
    reproducible), early-stopped on its own hold-out unless ``epochs`` is given. The
    result is one WARP model whose user and item factors are the sub-models' side by side
    and whose item bias is their sum, so its score is the sum of the sub-models' scores.

    Parameters
    ----------
    data : Interactions
    params : dict
        WARP parameters (``factors`` is the total).
    context : ExecutionContext, optional
        Where the sub-models run, and their work folder: a rerun skips finished
        sub-models. Without a work folder, a temporary one (no resume).
    n_models : int, optional
        Sub-models (default :data:`DEFAULT_SUB_MODELS`, whatever the context: the model
        never depends on the cluster).
    random_state : int
        Seeds of the sub-models are spawned from it; a single sub-model uses it as it is,
        so it is the model a plain single-threaded ``WARP(random_state=...)`` fit gives.
    progress : Progress
        Where to log; every sub-model's epochs are relayed to it as they run, on any backend.

    Returns
    -------
    WARP
        Fitted; ``sub_models_`` holds each sub-model's factor count, epochs and seed.
    """
    params = dict(params or {})
    params.pop("n_jobs", None)
    params.pop("random_state", None)
    params.pop("verbose", None)
    if params.get("confidence") not in (None, "none"):
        # the work folder keeps only which pairs are positive, so sub-models would silently
        # train on binary data: refuse rather than hand back a model that ignored the values
        raise InputError("sub-models do not use confidence weights yet",
                         hint="fit one model (no sub-models) to use confidence, or drop confidence")
    total = int(params.get("factors", WARP().factors))
    context = context if context is not None else local_context()
    with context:
        K = int(n_models or DEFAULT_SUB_MODELS)
        sizes = split_factors(total, K)
        seeds = [int(random_state)] if K == 1 else [int(s) for s in spawn_seeds(random_state, K)]
        description = {"kind": "fit", "data": fingerprint(data.matrix, data.user_ids, data.item_ids),
                       "params": params, "sub_models": sizes, "random_state": random_state}
        job = Job(context, description, [_part_name(i) for i in range(K)], folder=context.workdir, progress=progress)
        progress.log(f"fit: {K} sub-model{'s' if K > 1 else ''} of {', '.join(map(str, sizes))} factors in {job.path}"
                     + (f"; {job.skipped} already done" if job.skipped else ""))
        data_src: Any = data
        if job.off_process:
            data_src = job.stage(INPUTS_FILE, lambda p: write_training_inputs(data, p))
        tasks = [(data_src, str(job.path), i, {**params, "factors": sizes[i], "random_state": seeds[i], "n_jobs": 1},
                  job.unit_log(i)) for i in job.todo]
        if tasks:
            progress.log(f"running {len(tasks)} sub-model{'s' if len(tasks) > 1 else ''} on {context.describe()}"
                         + (f" ({context.workers - K} idle: a sub-model runs on one worker)"
                            if context.workers > K else ""))
        for info in job.run(_fit_submodel, tasks, desc="sub-models", unit="model"):
            if not info.get("skipped"):
                progress.log(f"sub-model {info['index']}: {info['epochs']} epochs, {info['seconds']:.1f}s")
        n_users, n_items = data.matrix.shape
        parts = [_read_submodel(job.part(i), n_users, n_items, d) for i, d in enumerate(sizes)]
        job.finish(staged=[INPUTS_FILE])
    model = WARP(**{**params, "factors": total, "random_state": random_state})
    model.set_training_data(data)
    model.merge_sub_models(parts)
    model.sub_models_ = [{"factors": s, "epochs": int(p["best_epoch"]), "seed": sd}
                         for s, p, sd in zip(sizes, parts, seeds)]
    return model
