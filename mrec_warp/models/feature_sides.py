"""One side (users or items) of a hybrid model: its content features and identity columns.

The vocabulary, raw weights and identity column of every id, and the ids known only by
their features (cold start). The weighting maths is :mod:`mrec_warp.models.feature_weights`.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..data.npz import check_ids, csr_arrays, read_csr
from ..errors import InputError
from .feature_weights import feature_names, raw_rows, weighted_rows


@dataclass
class FeatureSide:
    """The features of one side (users or items) of a fitted model.

    Columns of the embedding table: content features ``0 .. len(names) - 1``, then one
    identity column per id that has one (appended in the order ids were added, so ids
    added after training never renumber anything).
    """

    names: np.ndarray  # content feature names
    raw: sp.csr_matrix  # (n_ids, n_content) raw content weights
    identity: np.ndarray  # (n_ids,) identity column of each id, -1 for none
    n_columns: int  # rows of the embedding table
    new_ids: np.ndarray  # ids known only by their features (not in training)
    new_raw: sp.csr_matrix  # (n_new, n_content) their raw content weights

    @property
    def n_content(self) -> int:
        return len(self.names)

    def weights(self, normalize: bool, identity_slot: bool, identity_weight: float) -> sp.csr_matrix:
        return weighted_rows(self.raw, self.identity, self.n_columns, normalize, identity_slot, identity_weight)

    def take_new(self, ids: np.ndarray, table: Optional[pd.DataFrame]) -> Tuple[np.ndarray, sp.csr_matrix]:
        """Raw rows of ``ids``: from ``table`` when it has them, else from the kept features."""
        raw, _ = raw_rows(ids, table, self.names)
        kept = pd.Index(self.new_ids).get_indexer(ids)
        fill = (np.diff(raw.indptr) == 0) & (kept >= 0)
        if fill.any():
            lil = raw.tolil()
            lil[np.flatnonzero(fill)] = self.new_raw[kept[fill]]
            raw = lil.tocsr()
            raw.sort_indices()
        return ids, raw

    def unknown_ids(self, known: np.ndarray, table: Optional[pd.DataFrame]) -> np.ndarray:
        """The ids of ``table`` not in ``known`` (the trained ids), or without a table the ids
        kept as new at training."""
        if table is None:
            return self.new_ids.copy()
        ids = np.asarray(pd.unique(table["id"].to_numpy()), dtype=str)
        return ids[pd.Index(known).get_indexer(ids) < 0]

    def added(self, ids: np.ndarray, raw: sp.csr_matrix, only: bool = False) -> "FeatureSide":
        """A copy with the rows ``raw`` of ``ids`` (no identities) after its own rows -- or
        instead of them, ``only`` -- and those ids no longer kept as new. Nothing of this
        side changes: a shallow copy of a model may share it."""
        side = copy.copy(self)
        rest = pd.Index(ids).get_indexer(side.new_ids) < 0
        side.new_ids, side.new_raw = side.new_ids[rest], side.new_raw[rest]
        no_identity = np.full(len(ids), -1, dtype=np.int64)
        side.raw = raw if only else sp.vstack([side.raw, raw], format="csr")
        side.identity = no_identity if only else np.concatenate([side.identity, no_identity])
        return side

    def with_identities(self, rows: np.ndarray) -> "FeatureSide":
        """A copy that gives ``rows`` (ids without an identity) new identity columns, after the
        last column (their embeddings are the caller's to append)."""
        side = copy.copy(self)
        side.identity = side.identity.copy()
        side.identity[rows] = side.n_columns + np.arange(len(rows))
        side.n_columns += len(rows)
        return side


def sides_weights(sides: Tuple[FeatureSide, FeatureSide], normalize: bool, identity: bool,
                  identity_weight: float) -> Tuple[sp.csr_matrix, sp.csr_matrix]:
    """The (users, items) weighted feature rows of a model (:meth:`FeatureSide.weights`);
    an :class:`InputError` naming ``identity_weight`` when they overflow float32."""
    w = identity_weight
    overflow = InputError(f"`identity_weight={w:g}` makes feature weights infinite in float32",
                          hint="lower `identity_weight`, e.g. `identity_weight=2`")
    # float32 weights: an identity weight beyond 3.4e38 is infinite, and every score it
    # touches NaN: a model that trains, saves and then ranks nothing
    if not w <= float(np.finfo(np.float32).max):
        raise overflow
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused just below
        weights = tuple(side.weights(normalize, identity, w) for side in sides)
    if not all(np.isfinite(m.data).all() for m in weights):
        raise overflow
    return weights[0], weights[1]


def describe_side(kind: str, n_ids: int, info: Dict[str, int]) -> str:
    """The log line of one side's features, from :func:`build_side`'s ``info``."""
    unknown = info["rows_with_unknown_features"]
    return (f"{kind} features: {info['features']} features on {n_ids - info['ids_without_features']} of "
            f"{n_ids} training {kind}s ({info['ids_without_features']} with identity only); "
            f"{info['new_ids']} new {kind}s kept for cold start"
            + (f"; {unknown} rows of new {kind}s name features no training {kind} has (ignored)" if unknown else ""))


def build_side(ids: np.ndarray, table: Optional[pd.DataFrame], identity: bool) -> Tuple[FeatureSide, Dict[str, int]]:
    """Content vocabulary, raw rows and identity columns of the training ids of one side.

    The vocabulary is the features of training ids only: a feature seen only on new ids
    would never get a gradient, so its embedding would be noise.
    """
    ids = np.asarray(ids, dtype=str)
    info = {"rows": 0, "features": 0, "ids_without_features": len(ids), "new_ids": 0,
            "new_ids_without_known_features": 0, "rows_with_unknown_features": 0}
    names = np.zeros(0, dtype=str)
    new_ids = np.zeros(0, dtype=str)
    if table is not None:
        in_train = pd.Index(ids).get_indexer(table["id"].to_numpy()) >= 0
        names = feature_names(table[in_train])
        info["rows"] = len(table)
    raw, _ = raw_rows(ids, table, names)
    info["features"] = len(names)
    info["ids_without_features"] = int((np.diff(raw.indptr) == 0).sum())
    if table is not None:
        other = table[pd.Index(ids).get_indexer(table["id"].to_numpy()) < 0]
        new_ids = np.asarray(pd.unique(other["id"].to_numpy()), dtype=str)
    new_raw, n_unknown = raw_rows(new_ids, table, names)
    has = np.diff(new_raw.indptr) > 0
    info["new_ids_without_known_features"] = int((~has).sum())
    info["rows_with_unknown_features"] = n_unknown
    new_ids, new_raw = new_ids[has], new_raw[has]
    info["new_ids"] = len(new_ids)
    n = len(ids)
    ident = (len(names) + np.arange(n)) if identity else np.full(n, -1)
    side = FeatureSide(names, raw, ident.astype(np.int64), len(names) + (n if identity else 0), new_ids, new_raw)
    return side, info


# -- the sides in a model file -------------------------------------------------------------------
def sides_arrays(users: FeatureSide, items: FeatureSide) -> Dict[str, np.ndarray]:
    """The arrays a model file holds for the two sides (names, identities, raw weights, new ids)."""
    out = {}
    for kind, side in (("user", users), ("item", items)):
        out[f"{kind}_feature_names"] = side.names.astype(str)
        out[f"{kind}_identity"] = side.identity.astype(np.int64)
        out[f"new_{kind}_ids"] = side.new_ids.astype(str)
        for prefix, m in ((f"{kind}_raw", side.raw), (f"new_{kind}_raw", side.new_raw)):
            out[f"{prefix}_indptr"], out[f"{prefix}_indices"], out[f"{prefix}_data"] = csr_arrays(m)
    return out


def sides_spec(n_users: int, n_items: int) -> Dict[str, Tuple[str, Tuple]]:
    """Kind and shape of each array of :func:`sides_arrays` (``None``: any size)."""
    spec: Dict[str, Tuple[str, Tuple]] = {}
    for kind, n in (("user", n_users), ("item", n_items)):
        spec[f"{kind}_feature_names"] = ("U", (None,))
        spec[f"{kind}_identity"] = ("iu", (n,))
        spec[f"new_{kind}_ids"] = ("U", (None,))
        for prefix, rows in ((f"{kind}_raw", n), (f"new_{kind}_raw", None)):
            spec[f"{prefix}_indptr"] = ("iu", (None if rows is None else rows + 1,))
            spec[f"{prefix}_indices"] = ("iu", (None,))
            spec[f"{prefix}_data"] = ("f", (None,))
    return spec


def read_sides(arrays: Dict[str, np.ndarray], n_ids: Tuple[int, int],
               n_columns: Tuple[int, int]) -> Tuple[FeatureSide, FeatureSide]:
    """The (users, items) sides of a model file's arrays, for ``n_ids`` users and items whose
    embedding tables have ``n_columns`` rows; ``ValueError`` for what does not fit together."""
    sides = []
    for kind, n, columns in (("user", n_ids[0], n_columns[0]), ("item", n_ids[1], n_columns[1])):
        names = np.asarray(arrays[f"{kind}_feature_names"])
        new_ids = np.asarray(arrays[f"new_{kind}_ids"])
        check_ids(names, f"{kind} feature names")
        check_ids(new_ids, f"new {kind} ids")
        identity = np.ascontiguousarray(arrays[f"{kind}_identity"], dtype=np.int64)
        raw = read_csr(arrays, f"{kind}_raw", (n, len(names)))
        new_raw = read_csr(arrays, f"new_{kind}_raw", (len(new_ids), len(names)))
        if identity.shape != (n,) or columns < len(names) or (identity < -1).any() \
                or (identity >= columns).any() or ((identity >= 0) & (identity < len(names))).any():
            raise ValueError(f"{kind} identity columns do not match the embeddings")
        sides.append(FeatureSide(names, raw, identity, columns, new_ids, new_raw))
    return sides[0], sides[1]
