"""The feature vectors a hybrid model scores with: content weights plus identities, normalised.

Feature tables come from :mod:`mrec_warp.data.features` (one row per id, feature, weight).
How a model uses them (:func:`weighted_rows`): each id's row holds its content features and,
unless ``identity=False``, an identity feature of its own with weight 2 (``identity_weight``).
**Normalisation** (on by default) then scales every row to unit Euclidean length: an item
with its identity and two genres of weight 1 has weights ``2/sqrt(6)`` = 0.82 and
``1/sqrt(6)`` = 0.41 each; an id with no feature row has its identity only (weight 1). Ids
without an identity (new users or items, known by their features only) are normalised as
if their identity were there with a zero embedding, so they carry exactly the weights a
trained id with the same features has, and old and new ids can be ranked together.

Why this rule. Euclidean rather than sum-to-1 rows keep the information in *how many*
features an id has -- the total weight of its features grows with their number -- which
matters for new ids (on MovieLens, films with more genres are more popular; sum-to-1 rows
halve the precision on new films). The identity's weight of 2 keeps an id's own embedding
the larger part of its representation for up to four unit-weight features, so trained ids
still learn their own taste at a useful speed (with weight 1, a user with three
demographic features has only a quarter of each step go to their own embedding).
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np
import pandas as pd
import scipy.sparse as sp


def feature_names(table: Optional[pd.DataFrame]) -> np.ndarray:
    """Content feature vocabulary, in order of first appearance."""
    if table is None or len(table) == 0:
        return np.zeros(0, dtype=str)
    return np.asarray(pd.unique(table["feature"].to_numpy()), dtype=str)


def raw_rows(ids: np.ndarray, table: Optional[pd.DataFrame], names: np.ndarray) -> Tuple[sp.csr_matrix, int]:
    """Raw content weights of ``ids`` over ``names``: (len(ids) x len(names)) CSR, float32.

    Table rows of other ids are ignored; rows naming a feature outside ``names`` are
    dropped and counted (the second value returned).
    """
    ids = np.asarray(ids, dtype=str)
    rows = cols = np.zeros(0, np.int64)
    vals = np.zeros(0, np.float32)
    n_unknown = 0
    if table is not None and len(table) and len(ids):
        r = pd.Index(ids).get_indexer(table["id"].to_numpy())
        c = pd.Index(names).get_indexer(table["feature"].to_numpy()) if len(names) else np.full(len(table), -1)
        n_unknown = int(((r >= 0) & (c < 0)).sum())
        ok = (r >= 0) & (c >= 0)
        rows, cols, vals = r[ok], c[ok], table["weight"].to_numpy(dtype=np.float32)[ok]
    matrix = sp.csr_matrix((vals, (rows, cols)), shape=(len(ids), len(names)), dtype=np.float32)
    matrix.sum_duplicates()
    matrix.sort_indices()
    return matrix, n_unknown


def weighted_rows(
    raw: sp.csr_matrix,
    identity: np.ndarray,
    n_columns: int,
    normalize: bool = True,
    identity_slot: bool = True,
    identity_weight: float = 2.0,
) -> sp.csr_matrix:
    """The rows a model scores with: raw content weights plus identities, normalised.

    Parameters
    ----------
    raw : csr_matrix (n, n_content)
        Content feature weights (columns ``0 .. n_content - 1``).
    identity : int array (n,)
        Column of each row's identity feature, -1 for none.
    n_columns : int
        Width of the result (content columns plus every identity column of the model).
    normalize : bool
        Scale each row to unit Euclidean length (identity included).
    identity_slot : bool
        When normalising a row without identity, count an identity of weight 1 anyway: the
        row gets the weights a trained id with the same features has (as if its identity
        embedding were zero), so new and trained ids are on one scale. Set for models whose
        ids have identities; a model without them normalises content alone.
    identity_weight : float
        Weight of the identity feature before normalisation (content features keep theirs).
    """
    identity = np.asarray(identity, dtype=np.int64)
    n = raw.shape[0]
    coo = raw.tocoo()
    have = identity >= 0
    rows = np.concatenate([coo.row.astype(np.int64), np.flatnonzero(have)])
    cols = np.concatenate([coo.col.astype(np.int64), identity[have]])
    vals = np.concatenate([coo.data.astype(np.float32), np.full(int(have.sum()), identity_weight, np.float32)])
    if normalize:
        squares = np.bincount(rows, weights=vals.astype(np.float64) ** 2, minlength=n).astype(np.float64)
        if identity_slot:
            squares = squares + (~have) * float(identity_weight) ** 2  # the missing identity
        scale = np.divide(1.0, np.sqrt(squares), out=np.zeros_like(squares), where=squares > 0)
        vals = (vals * scale[rows]).astype(np.float32)
    matrix = sp.csr_matrix((vals, (rows, cols)), shape=(n, int(n_columns)), dtype=np.float32)
    matrix.sum_duplicates()
    matrix.sort_indices()
    return matrix
