"""Continue training a fitted WARP model on more pairs: the body of :meth:`WARP.partial_fit`.

The pairs are added to what the model has seen (``train_``, so they are excluded and never
drawn as negatives) and the epochs visit them only; ids the model does not know are skipped
and counted (:func:`~mrec_warp.models.alignment.known_pairs`).
"""
from __future__ import annotations

import warnings
from typing import Dict, Optional

import numpy as np

from ..errors import InputError
from ..progress import SILENT, Progress, plural
from .alignment import known_pairs
from ..kernels import rng as _rng
from ..seeds import spawn_seed
from .positives import merge_seen
from .warp_epoch import training_data


def partial_fit(model, X, epochs: int, progress: Optional[Progress]):
    """``epochs`` more epochs of ``model`` (a WARP) on the pairs of ``X``; see :meth:`WARP.partial_fit`."""
    model.check_params()
    if int(epochs) < 1:
        raise InputError(f"partial_fit needs epochs >= 1, got {epochs}")
    progress = progress or (Progress(verbose=True) if model.verbose else SILENT)
    if getattr(model, "train_", None) is None:
        csr = model._with_confidence(X, model.set_training_data(X))
        model.init_state(*csr.shape, np.random.default_rng(model.random_state))
        data = training_data(model, csr)
        summary = {"pairs": int(csr.nnz), "new_pairs": int(csr.nnz), "skipped_pairs": 0,
                   "unknown_users": 0, "unknown_items": 0}
    else:
        if not hasattr(model, "_rng_state"):  # a loaded model keeps its factors, not the optimiser
            fresh_optimizer_state(model, np.random.default_rng(model.random_state))
        new, summary = known_pairs(X, model, keep_values=model._confidence_kind() != "none")
        values = model._with_confidence(new, new).data if model._confidence_kind() != "none" else None
        new.data[:] = 1.0
        seen = merge_seen(model.train_, new)
        summary["new_pairs"] = int(seen.nnz - model.train_.nnz)
        data = training_data(model, seen, visit=new, values=values)
        model.train_ = seen
        model._interactions_cache = None
    model.partial_fit_summary_: Dict[str, int] = summary
    if summary["skipped_pairs"]:
        message = (f"partial_fit skipped {summary['skipped_pairs']:,} of {plural(summary['pairs'], 'pair')} naming "
                   f"{plural(summary['unknown_users'], 'user')} and {plural(summary['unknown_items'], 'item')} "
                   "the model does not know (add new users with fold_in; new items need a refit)")
        warnings.warn(message, UserWarning, stacklevel=3)
        progress.log(f"warning: {message}")
    if not hasattr(model, "history_"):
        model.history_ = []
    model.train_epochs(data, int(epochs), progress, ())
    return model


def fresh_optimizer_state(model, seed_rng: np.random.Generator) -> None:
    """Adagrad accumulators (at 1) and a sampler seed for the learned arrays as they are,
    e.g. to continue training a model loaded from disk."""
    model._user_accum, model._item_accum, model._bias_accum = (
        np.ones_like(a) for a in model._learned_arrays())
    model._rng_state = _rng.seed_state(spawn_seed(seed_rng))
    model._steps_restarted = True  # fresh accumulators on trained factors: no late rate
