"""New data against a fitted model's ids: the pairs it knows, in its index space.

For ``partial_fit``, ``fold_in`` and validation matrices, of every model family.
"""
from __future__ import annotations

from typing import Dict, Tuple

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..data.interactions import Interactions, as_csr, check_values
from ..errors import InputError
from .base import Recommender


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
