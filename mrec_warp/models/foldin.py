"""Fold-in: fit vectors for new (or updated) users against a trained model's fixed items.

The answer to "how do I add users without refitting?". For each user of a history, a few
WARP passes over their items update *only* that user's row -- the user factors of
:class:`~mrec_warp.models.warp.WARP`, the identity embedding of
:class:`~mrec_warp.models.hybrid.HybridWARP` (whose other features stay as trained) --
against item representations that do not move, so the rest of the model, and every other
user's recommendations, stay exactly as they were. The kernel is
:func:`mrec_warp.kernels.hybrid.fold_in_shard`, which samples with the same ``warp_sample``
as training.

:meth:`~mrec_warp.models.base.Recommender.fold_in` has one signature in every family. A
model folding in with WARP passes provides ``append_users(ids, user_features)`` (the
contract's: adds users with a zero row) and two hooks: ``_fold_in_problem(users)`` returns ``(rows, offset, scale, item_factors, item_bias)``
with ``p_u = offset[u] + scale[u] * rows[u]`` (empty offset / scale mean 0 / 1), and
``_fold_in_store(users, rows)`` writes the fitted rows back.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..data.interactions import Interactions, as_csr, check_values
from ..data.ratings import read_ratings
from ..errors import InputError
from ..progress import SILENT, Progress, plural
from ..kernels import hybrid as _hybrid
from ..kernels import rng as _rng
from ..seeds import spawn_seed
from .families import takes_features
from .positives import TrainingData, check_divergence

#: Default passes over a folded-in user's history. The item side is fixed, so each pass is
#: cheap; starting from a zero vector, about this many passes bring a folded-in user's
#: precision close to that of a user trained in (see tests/test_foldin.py).
FOLD_IN_EPOCHS = 30

#: Mixed into the model's seed so that fold-in samples its own stream.
FOLD_IN_SALT = 0x5F0D1D


def read_history(history, source: Optional[str] = None, model=None,
                 user_ids: Optional[Sequence] = None, values: bool = False) -> pd.DataFrame:
    """A history as a table with ``user`` and ``item`` columns (str), plus ``value``
    (float64) when ``values`` is asked for and the history has one.

    Accepts a ratings file path (read with :func:`~mrec_warp.data.ratings.read_ratings`), a
    DataFrame with ``user`` and ``item`` columns, an
    :class:`~mrec_warp.data.interactions.Interactions`, a sequence of ``(user, item)`` id
    pairs (or an (n, 2) array of them), or a users x items sparse matrix whose columns are
    ``model``'s items and whose rows are the users ``user_ids``.
    """

    if isinstance(history, (str, os.PathLike)):
        df = read_ratings(history, reader_options=())  # fold_in takes no reader options
    elif isinstance(history, Interactions):
        df = history.to_dataframe()
    elif isinstance(history, pd.DataFrame):
        if not {"user", "item"} <= set(history.columns):
            raise InputError("history table needs columns 'user' and 'item'", path=source)
        df = history
    elif sp.issparse(history):
        df = _matrix_history(as_csr(history), model, user_ids)
    elif isinstance(history, (list, tuple, np.ndarray)):
        pairs = np.asarray(history, dtype=object)
        if pairs.ndim != 2 or pairs.shape[1] != 2:
            raise InputError(f"a history of pairs needs (user, item) pairs, got shape {pairs.shape}",
                             hint="e.g. [('u1', 'i5'), ('u1', 'i9')]")
        df = pd.DataFrame({"user": pairs[:, 0], "item": pairs[:, 1]})
    else:
        raise TypeError("history must be a path, a DataFrame, Interactions, (user, item) pairs or a sparse "
                        f"matrix, got {type(history).__name__}")
    if user_ids is not None and not sp.issparse(history):
        raise InputError("user_ids names the rows of a sparse-matrix history; this history names its users")
    out = pd.DataFrame({"user": df["user"].astype(str).to_numpy(), "item": df["item"].astype(str).to_numpy()})
    if values and "value" in df:
        out["value"] = df["value"].to_numpy(dtype=np.float64)
    return out


def _matrix_history(csr: sp.csr_matrix, model, user_ids: Optional[Sequence]) -> pd.DataFrame:
    """(user, item) rows of a sparse history whose columns are the model's items."""
    if model is None or csr.shape[1] != model.n_items:
        n = "?" if model is None else model.n_items
        raise InputError(f"a sparse history needs one column per item of the model ({n}), got {csr.shape[1]}")
    if user_ids is None or len(user_ids) != csr.shape[0]:
        raise InputError(f"a sparse history needs user_ids: one id per row ({csr.shape[0]})",
                         hint="fold_in(X, user_ids=[...]); known ids are refined, new ones added")
    check_values(csr.data, csr.indptr)
    coo = csr.tocoo()  # every stored entry is a row of the history, one of value 0 too
    users = np.asarray(user_ids).astype(str)
    return pd.DataFrame({"user": users[coo.row], "item": model.item_ids[coo.col],
                         "value": coo.data.astype(np.float64)})


def fold_in(model, history, epochs: Optional[int] = None, user_features=None,
            progress: Optional[Progress] = None, user_ids: Optional[Sequence] = None):
    """Fit the users of ``history`` against ``model``'s fixed items (in place; returns ``model``).

    Parameters
    ----------
    model : WARP or HybridWARP
        A fitted model; it gains the new users of ``history`` (appended to ``user_ids``).
    history : path, DataFrame, Interactions, (user, item) pairs or sparse matrix
        ``user, item`` rows (see :func:`read_history`). New users are added; known users
        are refined from their training items plus these. Items the model does not know
        are skipped (counted in ``model.fold_in_summary_``).
    epochs : int, optional
        Passes over the history (default :data:`FOLD_IN_EPOCHS`).
    user_features : path or DataFrame, optional
        For a hybrid model: features of new users.
    progress : Progress, optional
    user_ids : sequence, optional
        With a sparse-matrix history: the id of each of its rows.

    Notes
    -----
    The learning rate, loss, ``max_sampled``, schedule and ``user_reg`` are the model's.
    Each folded user's history items join their training row (``model.train_``), so they
    are excluded from recommendations like training items are. One call with a fixed
    ``random_state`` is reproducible.
    """
    model.check_fitted()
    refuse_features(model, user_features)
    progress = progress or SILENT
    epochs = FOLD_IN_EPOCHS if epochs is None else int(epochs)
    if epochs < 1:
        raise InputError(f"fold-in epochs must be >= 1, got {epochs}")
    added = add_history(model, history, user_features, user_ids)
    idx, pos = added["rows"], added["positives"]

    rows, offset, scale, item_factors, item_bias = model._fold_in_problem(idx)
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    accum = np.ones_like(rows)
    data = TrainingData(pos)
    # the model's first seed, salted: a stream of its own (kept as it was: the fold-in
    # quality test's margin was measured on this stream)
    state = _rng.seed_state(spawn_seed(model.random_state) ^ FOLD_IN_SALT)
    bias = np.ascontiguousarray(item_bias, dtype=np.float32) if model.item_bias else np.zeros(0, np.float32)
    offset, scale, item_factors = (np.ascontiguousarray(a, dtype=np.float32) for a in (offset, scale, item_factors))
    for epoch in range(epochs):
        _rng.shuffle(data.order, state)
        _hybrid.fold_in_shard(
            rows, accum, offset, scale, item_factors, bias,
            data.indptr, data.indices, data.pos_users, data.order, 0, len(data.order), data.rank_weights, state,
            model._step_settings(epoch, boosted=False),  # at learning_rate (no late_rate)
        )
    check_divergence([rows], float(model.init_scale), model._base_learning_rate(), "fold-in diverged")
    model._fold_in_store(idx, rows)
    model.fold_in_summary_ = dict(added["summary"], epochs=epochs)
    _log_fold_in(progress, model.fold_in_summary_, f", {epochs} epochs")
    return model


def refuse_features(model, user_features) -> None:
    """Refuse ``user_features`` for a model that does not use features (they would be ignored)."""
    if user_features is not None and not takes_features(model):
        raise InputError("user features need a hybrid model", hint="train a hybrid model (`model=hybrid`)")


def add_history(model, history, user_features=None, user_ids: Optional[Sequence] = None) -> Dict[str, Any]:
    """The bookkeeping every model's fold-in shares: read ``history``, append its new users
    (``model.append_users``), and add every history item to its user's training row so it
    is excluded from their recommendations.

    Returns a dict: ``rows`` (the users' row indices), ``positives`` (their CSR rows:
    training items plus history) and ``summary`` (counts for ``fold_in_summary_``).
    """
    source = str(history) if isinstance(history, (str, os.PathLike)) else None
    table = read_history(history, source, model=model, user_ids=user_ids)
    items = model.item_indices(table["item"].to_numpy(), strict=False)
    known_item = items >= 0
    n_unknown = int((~known_item).sum())
    if not known_item.any():
        raise InputError(
            f"none of the {len(table)} history rows names an item the model knows", path=source,
            hint="the history's second column must hold item ids of the training data",
        )
    users_col = table["user"].to_numpy()[known_item]
    items = items[known_item]
    ids = np.asarray(pd.unique(users_col), dtype=str)
    idx = model.user_indices(ids, strict=False)
    new = ids[idx < 0]
    if len(new):
        model.append_users(new, user_features)
    idx = model.user_indices(ids)

    # the folded users' positives: their history plus what they had in training
    codes = pd.Index(ids).get_indexer(users_col)
    hist = sp.csr_matrix((np.ones(len(codes), np.float32), (codes, items)), shape=(len(ids), model.n_items))
    pos = hist + model.train_[idx]
    pos.data[:] = 1.0
    pos = sp.csr_matrix(pos, dtype=np.float32)
    pos.sort_indices()
    model.train_ = replace_rows(model.train_, idx, pos)
    model._interactions_cache = None
    summary = {"users": len(ids), "new_users": len(new), "rows": int(known_item.sum()),
               "rows_with_unknown_items": n_unknown}
    return {"rows": idx, "positives": pos, "summary": summary}


def _log_fold_in(progress: Progress, summary: Dict[str, Any], extra: str = "") -> None:
    n_unknown = summary["rows_with_unknown_items"]
    progress.log(f"folded in {plural(summary['users'], 'user')} ({summary['new_users']:,} new) from "
                 f"{plural(summary['rows'], 'row')}{extra}"
                 + (f"; {plural(n_unknown, 'row')} with items the model does not know "
                    f"{'was' if n_unknown == 1 else 'were'} skipped" if n_unknown else ""))


# -- matrix helpers shared by the models' hooks --------------------------------------------------
def append_empty_rows(csr: sp.csr_matrix, n: int) -> sp.csr_matrix:
    """``csr`` with ``n`` empty rows appended (same columns)."""
    indptr = np.concatenate([csr.indptr, np.full(n, csr.indptr[-1], dtype=csr.indptr.dtype)])
    return sp.csr_matrix((csr.data, csr.indices, indptr), shape=(csr.shape[0] + n, csr.shape[1]))


def replace_rows(csr: sp.csr_matrix, rows: np.ndarray, values: sp.csr_matrix) -> sp.csr_matrix:
    """``csr`` with rows ``rows`` replaced by the rows of ``values`` (in O(nnz))."""
    keep = np.ones(csr.shape[0], dtype=bool)
    keep[rows] = False
    coo = csr.tocoo()
    mask = keep[coo.row]
    new = values.tocoo()
    r = np.concatenate([coo.row[mask], np.asarray(rows)[new.row]])
    c = np.concatenate([coo.col[mask], new.col])
    out = sp.csr_matrix((np.ones(len(r), np.float32), (r, c)), shape=csr.shape)
    out.sort_indices()
    return out


def append_user_ids(model, ids: np.ndarray) -> None:
    """New users' ids and empty training rows (what every model's ``append_users`` does)."""
    model.user_ids = np.concatenate([model.user_ids, np.asarray(ids, dtype=str)])
    model.train_ = append_empty_rows(model.train_, len(ids))
    model._interactions_cache = None


def warp_problem(model, users: np.ndarray) -> Tuple[np.ndarray, ...]:
    """WARP's ``_fold_in_problem``: the user factors themselves, no offset, scale 1."""
    rows = model.user_factors_[users].copy()
    return rows, np.zeros((0, rows.shape[1]), np.float32), np.zeros(0, np.float32), model.item_factors_, model.item_bias_
