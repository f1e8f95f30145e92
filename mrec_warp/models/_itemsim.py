"""What every item-item model shares: scores are a user's history times an item-item matrix.

Item-kNN, SLIM and EASE differ only in how they learn the items x items weights ``W``;
:class:`ItemSimilarity` does the rest once: scoring (``history @ W``), the popularity
fallback for users with no history, ``similar_items`` (a row of ``W``), fold-in of new
users (their history simply joins the stored training rows, nothing is refitted), and
saving ``W`` as sparse CSR arrays or one dense array.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..errors import InputError
from ..progress import SILENT, Progress
from .base import Recommender
from .foldin import append_empty_rows, read_history, replace_rows


class ItemSimilarity(Recommender):
    """Base of the item-item models: ``score(u, i) = sum_{j in history(u)} W[j, i]``.

    Subclasses implement ``_learn_weights(csr, progress)`` returning ``W`` (n_items x
    n_items) as a float32 CSR matrix or a dense float32 array; the diagonal must be zero
    (an item never recommends itself). Users with an empty history (no training items)
    are ranked by popularity instead, the same ranking :class:`Popularity` gives.

    Fitted attributes: ``weights_`` (``W``) and ``item_counts_`` (training users per item).
    """

    def _learn_weights(self, csr: sp.csr_matrix, progress: Progress):  # pragma: no cover - abstract
        raise NotImplementedError

    def _check_params(self) -> None:
        """Raise ``ValueError`` for impossible parameters (subclasses extend)."""

    def fit(self, X, progress: Optional[Progress] = None, **kwargs) -> "ItemSimilarity":
        """Learn the item-item weights from ``X`` (Interactions or users x items sparse)."""
        if kwargs.get("validation") is not None:
            raise InputError(f"{type(self).__name__} has no early stopping to validate",
                             hint="drop --validation (it is for warp)")
        self._check_params()
        csr = self._set_training_data(X)
        self.item_counts_ = np.bincount(csr.indices, minlength=csr.shape[1]).astype(np.float32)
        self.kept_items_: Optional[np.ndarray] = None  # a subclass may learn W on fewer items
        weights = self._learn_weights(csr, progress or SILENT)
        n = csr.shape[1] if self.kept_items_ is None else len(self.kept_items_)
        self.weights_ = _as_weights(weights, n)
        return self

    # -- scoring -------------------------------------------------------------------------------
    def score_users(self, users: np.ndarray) -> np.ndarray:
        """History rows times ``W``: a dense float32 block (len(users), n_items).

        A CSR block of histories times a CSR ``W`` is a sparse product whose result is
        densified once; a dense ``W`` (EASE) takes the sparse-times-dense product directly.
        """
        self._check_fitted()
        users = np.asarray(users, dtype=np.int64)
        if len(users) and (users.min() < 0 or users.max() >= self.train_.shape[0]):
            raise IndexError(f"user indices must be in [0, {self.train_.shape[0]})")
        hist = self.train_[users]
        scores = self._history_scores(hist)
        cold = np.diff(hist.indptr) == 0
        if cold.any():
            scores[cold] = self.item_counts_
        return scores

    def _history_scores(self, hist: sp.csr_matrix) -> np.ndarray:
        """``hist @ W`` as a C-contiguous float32 array (hist: CSR rows of histories).

        When ``W`` covers only ``kept_items_`` (EASE on the most popular items), the other
        items score NaN, which the top-k selection never ranks.
        """
        kept = getattr(self, "kept_items_", None)
        if kept is not None:
            hist = hist[:, kept]
        prod = hist @ self.weights_
        scores = prod.toarray() if sp.issparse(prod) else np.asarray(prod)
        scores = np.ascontiguousarray(scores, dtype=np.float32)
        return scores if kept is None else _spread(scores, kept, self.n_items)

    def _weight_rows(self, items: np.ndarray) -> np.ndarray:
        """Rows ``W[items, :]`` as a dense float32 array over every item (NaN off ``kept_items_``)."""
        kept = getattr(self, "kept_items_", None)
        if kept is None:
            out = self.weights_[items]
            return out.toarray() if sp.issparse(out) else np.array(out, dtype=np.float32)
        pos = np.full(self.n_items, -1, dtype=np.int64)
        pos[kept] = np.arange(len(kept))
        rows = np.zeros((len(items), len(kept)), dtype=np.float32)
        inside = pos[items] >= 0
        rows[inside] = self.weights_[pos[items[inside]]]
        return _spread(rows, kept, self.n_items)

    def similar_items(self, items: Sequence[int], k: int = 10) -> Tuple[np.ndarray, np.ndarray]:
        """The ``k`` items with the largest learned weights ``W[item, :]`` for each item.

        These are the items a user who has ``item`` is pushed towards. Returns item indices
        (``-1`` where fewer than ``k`` have a positive weight) and weights, (len(items), k).
        """
        from ..recommend import iter_top_k

        self._check_fitted()
        items = np.asarray(items, dtype=np.int64)
        if len(items) and (items.min() < 0 or items.max() >= self.n_items):
            raise IndexError(f"item indices must be in [0, {self.n_items})")
        def rows(block):
            out = self._weight_rows(block)
            out[out <= 0] = np.nan  # only positive weights point to similar items
            return out

        itself = sp.identity(self.n_items, dtype=np.float32, format="csr")
        found = list(iter_top_k(rows, self.n_items, items, k, exclude=itself))
        if not found:
            return np.empty((0, k), dtype=np.int64), np.empty((0, k), dtype=np.float32)
        out_items = np.vstack([f[1] for f in found])
        out_scores = np.vstack([f[2] for f in found])
        out_scores[out_items < 0] = 0.0
        return out_items, out_scores

    def _neighbours(self, kind: str, rows, k: int) -> Tuple[np.ndarray, np.ndarray]:
        """Neighbours for the shared ``similar`` API: items by their learned weights; an
        item-item model has no user vectors to compare."""
        if kind != "item":
            raise InputError(f"a {type(self).__name__} model has no user vectors to compare",
                             hint="similar users need a warp or hybrid model")
        return self.similar_items(rows, k)

    # -- fold-in: a new user's history times the same weights -------------------------------
    def fold_in(self, history, epochs: Optional[int] = None, progress: Optional[Progress] = None) -> "ItemSimilarity":
        """Add the users of ``history`` without refitting (in place; returns ``self``).

        An item-item model scores a user from their history alone, so folding in is exact:
        new users are appended with their history as training row; known users get the
        history added to their training items. ``W`` does not change. ``epochs`` is
        accepted for the common interface and ignored (nothing is iterated).
        """
        self._check_fitted()
        progress = progress or SILENT
        source = str(history) if isinstance(history, (str, os.PathLike)) else None
        table = read_history(history, source)
        items = self.item_indices(table["item"].to_numpy(), strict=False)
        known = items >= 0
        if not known.any():
            raise InputError(f"none of the {len(table)} history rows names an item the model knows",
                             path=source, hint="the history's second column must hold item ids of the training data")
        users_col = table["user"].to_numpy()[known]
        ids = np.asarray(pd.unique(users_col), dtype=str)
        new = ids[self.user_indices(ids, strict=False) < 0]
        if len(new):
            self.user_ids = np.concatenate([self.user_ids, new])
            self.train_ = append_empty_rows(self.train_, len(new))
            self._interactions_cache = None
        idx = self.user_indices(ids)
        codes = pd.Index(ids).get_indexer(users_col)
        hist = sp.csr_matrix((np.ones(len(codes), np.float32), (codes, items[known])), shape=(len(ids), self.n_items))
        rows = hist + self.train_[idx]
        rows.data[:] = 1.0
        self.train_ = replace_rows(self.train_, idx, rows)
        self._interactions_cache = None
        n_unknown = int((~known).sum())
        self.fold_in_summary_: Dict[str, Any] = {"users": len(ids), "new_users": len(new), "rows": int(known.sum()),
                                                 "rows_with_unknown_items": n_unknown}
        progress.log(f"folded in {len(ids)} users ({len(new)} new) from {int(known.sum())} rows"
                     + (f"; {n_unknown} rows with items the model does not know were skipped" if n_unknown else ""))
        return self

    # -- persistence -------------------------------------------------------------------------
    def _get_arrays(self) -> Dict[str, np.ndarray]:
        out = {"item_counts": self.item_counts_}
        if getattr(self, "kept_items_", None) is not None:
            out["kept_items"] = self.kept_items_
        if sp.issparse(self.weights_):
            out.update(weights_indptr=self.weights_.indptr.astype(np.int64), weights_indices=self.weights_.indices,
                       weights_data=self.weights_.data)
        else:
            out["weights"] = self.weights_
        return out

    def _set_arrays(self, arrays: Dict[str, np.ndarray]) -> None:
        counts = np.asarray(arrays["item_counts"], dtype=np.float32)
        if counts.shape != (self.n_items,):
            raise ValueError("item_counts has the wrong length")
        kept = arrays.get("kept_items")
        if kept is not None:
            kept = np.asarray(kept, dtype=np.int64)
            if kept.ndim != 1 or (len(kept) and (kept.min() < 0 or kept.max() >= self.n_items
                                                  or np.any(np.diff(kept) <= 0))):
                raise ValueError("kept_items are not increasing item indices")
        self.kept_items_ = kept
        n = self.n_items if kept is None else len(kept)
        if "weights" in arrays:
            weights = arrays["weights"]
            if weights.shape != (n, n):
                raise ValueError(f"weights are {weights.shape}, expected ({n}, {n})")
        else:
            indptr, indices, data = arrays["weights_indptr"], arrays["weights_indices"], arrays["weights_data"]
            if indptr.shape != (n + 1,) or indptr[0] != 0 or np.any(np.diff(indptr) < 0) \
                    or indptr[-1] != len(indices) or len(indices) != len(data) \
                    or (len(indices) and (indices.min() < 0 or indices.max() >= n)):
                raise ValueError("the sparse weights do not match the item ids")
            weights = sp.csr_matrix((data, indices, indptr), shape=(n, n))
        self.weights_ = _as_weights(weights, n)
        if not np.isfinite(self.weights_.data if sp.issparse(self.weights_) else self.weights_).all():
            raise ValueError("weights hold NaN or infinity")
        self.item_counts_ = counts


def _spread(block: np.ndarray, kept: np.ndarray, n_items: int) -> np.ndarray:
    """Columns of ``block`` placed at ``kept`` in an (n, n_items) array of NaN."""
    out = np.full((block.shape[0], n_items), np.nan, dtype=np.float32)
    out[:, kept] = block
    return out


def _as_weights(weights, n_items: int):
    """``W`` in the form scoring wants: float32 CSR with sorted indices, or C-contiguous float32."""
    if sp.issparse(weights):
        weights = sp.csr_matrix(weights, dtype=np.float32)
        weights.sort_indices()
    else:
        weights = np.ascontiguousarray(weights, dtype=np.float32)
    if weights.shape != (n_items, n_items):
        raise ValueError(f"weights are {weights.shape}, expected ({n_items}, {n_items})")
    return weights


def top_k_per_row(block: np.ndarray, k: int) -> sp.csr_matrix:
    """The ``k`` largest positive entries of each row of a dense block, as CSR.

    Zeros and negatives are never kept, so a row with fewer than ``k`` positive entries
    keeps fewer. Ties at the k-th value are broken arbitrarily (``argpartition``).
    """
    n_rows, n_cols = block.shape
    k = min(int(k), n_cols)
    if k <= 0 or n_rows == 0:
        return sp.csr_matrix((n_rows, n_cols), dtype=np.float32)
    if k < n_cols:
        cols = np.argpartition(-block, k - 1, axis=1)[:, :k]
    else:
        cols = np.broadcast_to(np.arange(n_cols), (n_rows, n_cols))
    vals = np.take_along_axis(block, cols, axis=1)
    keep = vals > 0
    rows = np.broadcast_to(np.arange(n_rows)[:, None], cols.shape)
    out = sp.csr_matrix((vals[keep].astype(np.float32), (rows[keep], cols[keep])), shape=(n_rows, n_cols))
    out.sort_indices()
    return out
