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
from .positives import merge_seen


def partial_fit(model, X, epochs: int, progress: Optional[Progress]):
    """``epochs`` more epochs of ``model`` (a WARP) on the pairs of ``X``; see :meth:`WARP.partial_fit`."""
    model._check_params()
    if int(epochs) < 1:
        raise InputError(f"partial_fit needs epochs >= 1, got {epochs}")
    progress = progress or (Progress(verbose=True) if model.verbose else SILENT)
    if getattr(model, "train_", None) is None:
        csr = model._with_confidence(X, model.set_training_data(X))
        model.init_state(*csr.shape, np.random.default_rng(model.random_state))
        data = model._training_data(csr)
        summary = {"pairs": int(csr.nnz), "new_pairs": int(csr.nnz), "skipped_pairs": 0,
                   "unknown_users": 0, "unknown_items": 0}
    else:
        if not hasattr(model, "_rng_state"):  # a loaded model keeps its factors, not the optimiser
            model._fresh_optimizer_state(np.random.default_rng(model.random_state))
        new, summary = known_pairs(X, model, keep_values=model._confidence_kind() != "none")
        values = model._with_confidence(new, new).data if model._confidence_kind() != "none" else None
        new.data[:] = 1.0
        seen = merge_seen(model.train_, new)
        summary["new_pairs"] = int(seen.nnz - model.train_.nnz)
        data = model._training_data(seen, visit=new, values=values)
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

