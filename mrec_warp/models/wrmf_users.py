"""What WRMF does one user at a time against fixed item factors: exact fold-in and explanations.

Both rest on the same exact least-squares solve of a user's row (Hu, Koren & Volinsky 2008):
fold-in stores its solution, an explanation splits its scores into one term per history
item. :class:`~mrec_warp.models.wrmf.WRMF` exposes them as methods.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..errors import InputError
from ..progress import SILENT, Progress
from ..kernels import als as _als
from .foldin import _log_fold_in, read_history


def fold_in(model, history, epochs: Optional[int] = None, progress: Optional[Progress] = None,
            user_ids: Optional[Sequence] = None):
    """Add users from a history without refitting (in place; returns ``model``).

    Each user of ``history`` (a ratings path, a ``user, item[, value]`` DataFrame or
    Interactions) gets the exact least-squares solution against the fixed item factors:
    one Cholesky solve, nothing iterated, so ``epochs`` is ignored. New users are
    appended; known users are re-solved from their training items plus the history (an
    item in both keeps the larger confidence). Items the model does not know are
    skipped and counted in ``fold_in_summary_``.
    """
    model.check_fitted()
    progress = progress or SILENT
    if epochs is not None:
        progress.log("note: fold-in epochs do not apply to WRMF, whose fold-in is one exact solve")
    source = str(history) if isinstance(history, (str, os.PathLike)) else None
    table = read_history(history, source, model=model, user_ids=user_ids, values=True)
    items = model.item_indices(table["item"].to_numpy(), strict=False)
    known = items >= 0
    if not known.any():
        raise InputError(f"none of the {len(table)} history rows names an item the model knows", path=source,
                         hint="the history's second column must hold item ids of the training data")
    users_col = table["user"].to_numpy()[known]
    values = table["value"].to_numpy()[known] if "value" in table else None
    if values is not None:
        model.confidences(values)  # refuses bad values before the model changes
    ids = np.asarray(pd.unique(users_col), dtype=str)
    new = ids[model.user_indices(ids, strict=False) < 0]
    if len(new):
        model.append_users(new)
    idx = model.user_indices(ids)
    codes = pd.Index(ids).get_indexer(users_col)
    # repeated rows of a pair add their values, as in training; then values become confidences
    hist = sp.csr_matrix((np.ones(len(codes)) if values is None else values, (codes, items[known])),
                         shape=(len(ids), model.n_items), dtype=np.float64)
    hist.sum_duplicates()  # a value of 0 stays: the pair's confidence is the lowest, as in training
    hist.data = model.confidences(None if values is None else hist.data, hist.nnz)
    hist = hist.maximum(model._confidence_csr()[idx]).tocsr()  # a repeated item keeps its larger confidence
    hist.sort_indices()
    replace_rows(model, idx, hist)
    rows = model.user_factors_[idx].copy()
    failed = _als.solve_exact(rows, model.item_factors_, model._fold_in_gram(),
                              hist.indptr.astype(np.int64), hist.indices, hist.data.astype(np.float32),
                              0, len(idx))
    if failed:
        raise InputError(f"{failed} fold-in systems were not positive definite", hint="refit with regularization > 0")
    model.user_factors_[idx] = rows
    n_unknown = int((~known).sum())
    model.fold_in_summary_: Dict[str, Any] = {"users": len(ids), "new_users": len(new), "rows": int(known.sum()),
                                             "rows_with_unknown_items": n_unknown, "epochs": 0}
    _log_fold_in(progress, model.fold_in_summary_, ", exact solve")
    return model



def replace_rows(model, rows: np.ndarray, values: sp.csr_matrix) -> None:
    """Rows ``rows`` of the training matrix and its confidences become ``values``'s rows."""
    keep = np.ones(model.n_users, dtype=bool)
    keep[rows] = False
    old = model._confidence_csr().tocoo()
    mask = keep[old.row]
    new = values.tocoo()
    merged = sp.csr_matrix((np.concatenate([old.data[mask], new.data]),
                            (np.concatenate([old.row[mask], np.asarray(rows)[new.row]]),
                             np.concatenate([old.col[mask], new.col]))), shape=model.train_.shape)
    merged.sort_indices()
    model.confidence_ = merged.data.astype(np.float32)
    model.train_ = sp.csr_matrix((np.ones(merged.nnz, np.float32), merged.indices, merged.indptr),
                                shape=merged.shape)
    model._interactions_cache = None



def explain(model, user: int, items: Sequence[int], k: int = 10) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which of ``user``'s training items drove the scores of ``items`` (Hu et al. 2008, sec. 5).

    With ``W = (Y^T C_u Y + reg * I)^-1`` the exact solve gives
    ``score(u, i) = sum_j s_ij c_uj`` over the user's items ``j``, ``s_ij = y_i^T W y_j``:
    each term is what history item ``j`` contributes to item ``i``.

    Parameters
    ----------
    user : int
        Row index of the user (see :meth:`user_indices`).
    items : sequence of int
        Item indices to explain.
    k : int
        Contributions returned per item, largest first.

    Returns
    -------
    history_items : int64 array (len(items), k)
        Item indices of the user's history, ``-1`` where the history is shorter than ``k``.
    contributions : float32 array (len(items), k)
    scores : float64 array (len(items),)
        The sum of all contributions: the score of the exact solve (the fitted user
        vector, after a few CG steps, scores within a small margin of it).
    """
    model.check_fitted()
    user = int(user)
    if not 0 <= user < model.n_users:
        raise InputError(f"user index {user} is out of range (the model has {model.n_users} users)")
    items = np.atleast_1d(np.asarray(items, dtype=np.int64))
    if len(items) and (items.min() < 0 or items.max() >= model.n_items):
        raise InputError(f"item indices must be in [0, {model.n_items})")
    lo, hi = model.train_.indptr[user], model.train_.indptr[user + 1]
    hist = model.train_.indices[lo:hi]
    c = model.confidence_[lo:hi].astype(np.float64)
    Y = model.item_factors_.astype(np.float64)
    A = Y.T @ Y + float(model.regularization) * np.eye(Y.shape[1]) + (Y[hist].T * (c - 1.0)) @ Y[hist]
    S = Y[items] @ np.linalg.solve(A, Y[hist].T)  # s_ij for every asked item i and history item j
    contrib = S * c
    n = min(int(k), len(hist))
    out_items = np.full((len(items), int(k)), -1, dtype=np.int64)
    out_contrib = np.zeros((len(items), int(k)), dtype=np.float32)
    if n:
        order = np.argsort(-contrib, axis=1, kind="stable")[:, :n]
        out_items[:, :n] = hist[order]
        out_contrib[:, :n] = np.take_along_axis(contrib, order, axis=1)
    return out_items, out_contrib, contrib.sum(axis=1)



def explain_frame(model, user_id, item_ids: Optional[Sequence] = None, k: int = 5, n: int = 10) -> pd.DataFrame:
    """:meth:`explain` for ids: columns user, item, score, history_item, contribution, rank.

    Without ``item_ids`` the user's top-``n`` recommendations are explained.
    """
    user = int(model.user_indices([user_id])[0])
    if item_ids is None:
        items, _ = model.recommend(np.array([user]), k=int(n))
        items = items[0][items[0] >= 0]
    else:
        items = model.item_indices(list(item_ids))
    hist, contrib, scores = explain(model, user, items, k=k)
    valid = hist >= 0
    rows = np.repeat(np.arange(len(items)), hist.shape[1]).reshape(hist.shape)[valid]
    return pd.DataFrame({
        "user": np.full(int(valid.sum()), str(model.user_ids[user]), dtype=object),
        "item": model.item_ids[items[rows]],
        "score": scores[rows].astype(np.float32),
        "history_item": model.item_ids[hist[valid]],
        "contribution": contrib[valid],
        "rank": np.tile(np.arange(1, hist.shape[1] + 1), len(items)).reshape(hist.shape)[valid],
    })
