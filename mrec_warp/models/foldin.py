"""Data that reaches a trained model after its fit: users folded in, pairs aligned to its ids.

Fold-in adds (or refines) users without refitting. :meth:`~mrec_warp.models.base.Recommender.fold_in`
has one signature in every family and each family fits the users' rows its own way (WARP's
SGD passes, WRMF's exact solve, an item-item model's history as it is); what they share is
here: reading a history in any of its forms (:func:`read_history`), appending the new
users with empty training rows and adding every history item to its user's row, so it is
excluded from their recommendations (:func:`add_history`), and the log line (:func:`log_fold_in`). The same
alignment to the model's ids serves ``partial_fit``'s new pairs (:func:`known_pairs`) and a
validation matrix (:func:`as_aligned_csr`): pairs the model does not know are skipped and
counted, or refused.
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
from ..progress import Progress, plural
from .base import Recommender
from .families import takes_features


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
    summary = {"users": len(ids), "new_users": len(new), "rows": int(known_item.sum()),
               "rows_with_unknown_items": n_unknown}
    return {"rows": idx, "positives": pos, "summary": summary}


def log_fold_in(progress: Progress, summary: Dict[str, Any], extra: str = "") -> None:
    """Log what a fold-in did, from the ``summary`` of :func:`add_history` (users, new ones,
    rows, rows skipped for unknown items); ``extra`` follows the counts (", 30 epochs")."""
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


# -- new data in the model's index space ----------------------------------------------------------
def known_pairs(X, model: Recommender, keep_values: bool = False) -> Tuple[sp.csr_matrix, Dict[str, int]]:
    """``X`` as a binary matrix in the model's index space, and what was skipped.

    With ``keep_values`` the matrix holds ``X``'s values (summed over duplicates) instead of ones.
    Every stored entry is a pair, one of value 0 too; a negative value is refused.

    Interactions are matched by id; a pair whose user or item the model does not know is
    skipped and counted. A matrix must already have the model's shape.
    """
    if not isinstance(X, Interactions):
        csr = as_aligned_csr(X, model, "X", keep_values=keep_values)
        summary = {"pairs": int(csr.nnz), "skipped_pairs": 0, "unknown_users": 0, "unknown_items": 0}
    else:
        check_values(X.matrix.data, X.matrix.indptr)
        coo = X.matrix.tocoo()  # every stored pair, one of value 0 too
        src_rows, src_cols = coo.row, coo.col
        rows = pd.Index(model.user_ids).get_indexer(X.user_ids)[src_rows]
        cols = pd.Index(model.item_ids).get_indexer(X.item_ids)[src_cols]
        keep = (rows >= 0) & (cols >= 0)
        values = coo.data[keep] if keep_values else np.ones(int(keep.sum()), np.float32)
        csr = sp.csr_matrix((values.astype(np.float32), (rows[keep], cols[keep])),
                            shape=(model.n_users, model.n_items))
        csr.sum_duplicates()
        if not keep_values:
            csr.data[:] = 1.0
        summary = {"pairs": int(len(rows)), "skipped_pairs": int((~keep).sum()),
                   "unknown_users": int(len(np.unique(src_rows[rows < 0]))),
                   "unknown_items": int(len(np.unique(src_cols[cols < 0])))}
    if csr.nnz == 0:
        raise InputError(
            f"X has no pairs to train on: {summary['skipped_pairs']} of {summary['pairs']} name users or items "
            "the model does not know", hint="add new users with fold_in; new items need a refit")
    return csr, summary


def as_aligned_csr(X, model: Recommender, what: str, keep_values: bool = False) -> sp.csr_matrix:
    """``X`` (named ``what`` in errors) as a CSR copy in the model's index space: interactions
    are reindexed by id, a matrix must already have the model's shape. Values become ones
    unless ``keep_values``."""
    if isinstance(X, Interactions):
        X = X.reindex(model.user_ids, model.item_ids).matrix
    csr = as_csr(X)
    if csr.shape != (model.n_users, model.n_items):
        raise InputError(f"{what} has shape {csr.shape}, expected {(model.n_users, model.n_items)}")
    check_values(csr.data, csr.indptr)  # a negative value is no interaction of any strength
    csr = csr.copy()
    if not keep_values:
        csr.data[:] = 1.0
    return csr
