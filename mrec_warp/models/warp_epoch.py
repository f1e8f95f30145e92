"""One WARP epoch, and the confidences its positives carry.

:func:`run_epoch` orders the positives (a shuffle, or draws in proportion to their
confidence), runs the model's kernel on them (in chunks, or one hogwild shard per thread)
and checks the learned arrays for divergence; :func:`with_confidence` gives each positive
its confidence; :func:`step_settings` is what each kernel step takes, :func:`training_data`
the kernel's arrays. The model supplies the kernel call (``_fit_shard``) and its learning
rate (``_base_learning_rate``), so the hybrid runs the same epoch.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np
import scipy.sparse as sp

from ..data.confidence import confidence as confidence_of
from ..data.interactions import Interactions, as_csr
from ..kernels import rng as _rng
from ..progress import Progress
from ..seeds import spawn_seeds
from ..workers import effective_n_jobs, thread_map
from .positives import TrainingData, check_divergence

LOSSES = {"warp": 0, "bpr": 1, "warp-kos": 2}

#: Positives per kernel call: small enough for a live progress bar and Ctrl-C, large
#: enough that the Python overhead between calls is negligible.
CHUNK = 262144


def run_epoch(model, data: TrainingData, progress: Progress) -> Dict[str, float]:
    """Shuffle the positives (or draw them by confidence), then visit each (in shards on several threads).

    Returns the epoch's statistics (its ``history_`` entry): ``updates`` and ``loss`` per
    positive, ``mean_weight`` (mean L(rank)), ``compared_per_positive`` and the
    ``learning_rate`` of its steps."""
    if data.alias is not None:
        _rng.draw_positives(data.order, *data.alias, model._rng_state, data.targets)
    else:
        _rng.shuffle(data.order, model._rng_state)
    cfg = model._step_settings(model.epochs_done_)
    nnz = len(data.order)
    n_jobs = effective_n_jobs(model.n_jobs)

    def run(start: int, stop: int, state: np.ndarray):
        return model._fit_shard(data, start, stop, state, cfg)

    totals = np.zeros(4)
    if n_jobs == 1:
        chunks = [(s, min(s + CHUNK, nnz)) for s in range(0, nnz, CHUNK)]
        for s, e in progress.iterate(chunks, total=len(chunks), desc=f"epoch {model.epochs_done_ + 1}", unit="chunk",
                                     lines=False):  # the epoch's line says it is done
            totals += run(s, e, model._rng_state)
    else:
        bounds = np.linspace(0, nnz, n_jobs + 1).astype(np.int64)
        # one independent sampler per thread, seeded from the model's state and the epoch
        seeds = spawn_seeds([int(model._rng_state[0]), model.epochs_done_], n_jobs)
        states = [_rng.seed_state(int(x)) for x in seeds]
        model._rng_state = _rng.seed_state(int(model._rng_state[1]))
        # one hogwild shard per thread, on the fitting threads every model shares
        shards = [(int(bounds[w]), int(bounds[w + 1]), states[w]) for w in range(n_jobs)]
        for r in thread_map(run, shards, n_jobs):
            totals += r
    model.epochs_done_ += 1
    n_updates, total_weight, total_loss, n_compared = totals
    weighted = model._confidence_kind() != "none" and model.confidence_use == "weight"
    scales = model._step_scales()
    if late_factor(model, model.epochs_done_ - 1) > 1:  # this epoch stepped at the late rate: the hint names it
        scales = {**scales, "late_rate": float(model._late_rate())}
    check_divergence(model._learned_arrays(), float(model.init_scale), model._base_learning_rate(),
                     f"training diverged at epoch {model.epochs_done_}", alpha=float(model.alpha) if weighted else None,
                     scales=scales)
    return {
        "updates": n_updates / max(nnz, 1),
        "mean_weight": total_weight / max(n_updates, 1),
        "loss": total_loss / max(nnz, 1),
        "compared_per_positive": n_compared / max(nnz, 1),
        # the rate every step of the epoch took (the late rate, SGD's decay): visible in the log
        "learning_rate": float(cfg["learning_rate"]),
    }


def with_confidence(X, binary: sp.csr_matrix, kind: str, alpha: float, eps: float) -> sp.csr_matrix:
    """``binary`` (the positives) with each positive's confidence (``kind``, ``alpha``, ``eps``)
    as its value.

    The values come from ``X`` (the same stored entries as ``binary``: a value of 0 is a
    positive of the lowest confidence); the visit order and hold-out splits only look at
    the structure, so they do not change with the confidence.
    """
    raw = X.matrix if isinstance(X, Interactions) else as_csr(X)
    if raw.nnz != binary.nnz:  # cannot happen through fit; guards a subclass's set_training_data
        raise ValueError("confidence values do not line up with the positives")
    conf = confidence_of(raw.data, kind, alpha, eps)
    return sp.csr_matrix((conf, binary.indices, binary.indptr), shape=binary.shape)


def rate_factor(late_rate: float, late_epoch: int, epoch: int) -> float:
    """The multiple of the learning rate at ``epoch`` (0-based): 1 for the first
    ``late_epoch`` epochs, ``late_rate`` from then on."""
    return float(late_rate) if epoch >= late_epoch else 1.0


def late_factor(model, epoch: int) -> float:
    """The ``late_rate`` multiple in force at ``epoch`` for ``model``'s training: 1 before
    ``late_rate_epoch``, and 1 after a restart of adagrad's accumulators on trained factors
    (a warm refit, ``partial_fit`` of a loaded model: measured at a constant rate)."""
    if getattr(model, "_steps_restarted", False):
        return 1.0
    return rate_factor(model._late_rate(), int(model.late_rate_epoch), epoch)


def step_settings(model, epoch: int, boosted: bool = True) -> Dict[str, Any]:
    """What every kernel step takes at ``epoch`` (0-based), as the kernels' ``StepSettings``
    struct (``kernels/steps.pxd``) wants it: a dict of every field.

    The rate depends on the epoch number alone (SGD's ``decay``, the ``late_rate``), so a
    refit replays the fit's rates epoch by epoch. ``boosted=False``: without the
    ``late_rate`` (fold-in, which fits a new user's row against the trained items at
    ``learning_rate``, as before the schedule existed)."""
    lr = model._base_learning_rate()
    if model.learning_schedule == "sgd":
        lr = lr / (1.0 + float(model.decay) * epoch)
    if boosted:
        lr = lr * late_factor(model, epoch)
    return dict(
        loss=LOSSES[model.loss], max_sampled=int(model.max_sampled), learning_rate=lr,
        user_reg=float(model.user_reg), item_reg=float(model.item_reg),
        adagrad=model.learning_schedule == "adagrad", use_bias=bool(model.item_bias),
        user_max_norm=_limit(model.user_max_norm), item_max_norm=_limit(model.item_max_norm),
        kos_n=int(model.kos_n), kos_k=int(model.kos_k),
    )


def training_data(model, csr: sp.csr_matrix, visit: Optional[sp.csr_matrix] = None,
                   values: Optional[np.ndarray] = None) -> "TrainingData":
    """The kernel's arrays for ``csr`` (a WARP ``model``'s positives); with a confidence,
    ``values`` (default ``csr.data``) are the confidences of the visited pairs."""
    if model._confidence_kind() == "none":
        return TrainingData(csr, visit)
    return TrainingData(csr, visit, confidence=csr.data if values is None else values,
                         use=model.confidence_use)


def _limit(max_norm: Optional[float]) -> float:
    """A norm limit as the kernels take it: 0 for none (``None`` and 0 both mean no limit)."""
    return 0.0 if max_norm is None else float(max_norm)
