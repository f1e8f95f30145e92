"""Neighbours by cosine: similar items and users of a model with factors (the
:class:`Neighbours` part of every :class:`~mrec_warp.models.base.Recommender`)."""
from __future__ import annotations

from typing import Tuple

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..errors import InputError
from ..topk import iter_top_k, top_k_block
from .families import family_names
from .indices import IdsArg, IndexArg, as_indices, check_k
from .single_user import MAX_USERS, ItemSide, top_k_vector


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` scaled to length 1 (cosine similarity is then a dot product)."""
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


class Neighbours:
    """``similar_items``, ``similar_users`` and ``similar`` over a model's ``user_factors`` /
    ``item_factors`` (models without them refuse; item-item models override)."""

    def _vectors(self, kind: str) -> np.ndarray:
        """The user or item factors neighbours are found in (models without any refuse)."""
        self.check_fitted()
        vectors = getattr(self, f"{kind}_factors", None)
        if vectors is None:
            raise InputError(f"a {type(self).__name__} model has no {kind} factors to compare",
                             hint=f"use a model with factors or item-item weights: {family_names('finds_similar_items')}")
        return vectors

    def _neighbours(self, kind: str, rows: IndexArg, k: int) -> Tuple[np.ndarray, np.ndarray]:
        vectors = self._vectors(kind)
        n = vectors.shape[0]
        k = min(check_k(k), max(1, n))  # longer lists would be only -1 padding (k=1e12: 7 TiB)
        rows, scalar = as_indices(rows, n, kind)
        if kind == "item" and len(rows) <= MAX_USERS:  # one product per item, same lists
            found = self._similar_few(vectors, rows, k)
            return (found[0][0], found[1][0]) if scalar else found
        unit = unit_rows(vectors)
        itself = sp.identity(n, dtype=np.float32, format="csr")
        out_items = np.empty((len(rows), k), dtype=np.int64)
        out_scores = np.empty((len(rows), k), dtype=np.float32)
        pos = 0
        for _, block_items, block_scores in iter_top_k(lambda r: unit[r] @ unit.T, n, rows, k, exclude=itself):
            out_items[pos:pos + len(block_items)] = block_items
            out_scores[pos:pos + len(block_items)] = block_scores
            pos += len(block_items)
        return (out_items[0], out_scores[0]) if scalar else (out_items, out_scores)

    def _unit_side(self, vectors: np.ndarray) -> ItemSide:
        """The unit item vectors as one-vector top-k reads them, kept until the item factors change."""
        key = (id(vectors), getattr(self, "epochs_done_", None))
        cached = self.__dict__.get("_unit_cache")
        if cached is None or cached[0] is not vectors or cached[1] != key:
            unit = np.ascontiguousarray(unit_rows(vectors), dtype=np.float32)
            cached = self._unit_cache = (vectors, key, ItemSide.of(unit, None, key))
        return cached[2]

    def _similar_few(self, vectors: np.ndarray, rows: np.ndarray, k: int) -> Tuple[np.ndarray, np.ndarray]:
        """:meth:`similar_items` for a few items: each from one product with the unit item
        vectors (:func:`~.single_user.top_k_vector`), a close call the batch way, as
        :meth:`~.base.Recommender.recommend` does for a few users."""
        side = self._unit_side(vectors)
        unit = side.items
        n = len(unit)
        out_items = np.empty((len(rows), k), dtype=np.int64)
        out_scores = np.empty((len(rows), k), dtype=np.float32)
        itself = None
        for pos, row in enumerate(rows):
            row = int(row)
            found = top_k_vector(side, unit[row], k, np.array([row], dtype=np.int32))
            if found is None:
                if itself is None:
                    itself = sp.identity(n, dtype=np.float32, format="csr")
                _, block_items, block_scores = top_k_block(lambda r: unit[r] @ unit.T,
                                                           np.array([row], dtype=np.int64), k, itself, position=pos)
                found = block_items[0], block_scores[0]
            out_items[pos], out_scores[pos] = found
        return out_items, out_scores

    def similar_items(self, items: IndexArg, k: int = 10) -> Tuple[np.ndarray, np.ndarray]:
        """The ``k`` items whose factors are closest (cosine) to each of ``items``.

        ``items`` is one column index or a sequence of them. Returns item indices and cosine
        similarities, (len(items), k) -- (k,) for one index -- the item itself excluded,
        ``-1`` padding when there are fewer than ``k`` other items; ``k`` is capped at the
        number of items.
        """
        return self._neighbours("item", items, k)

    def similar_users(self, users: IndexArg, k: int = 10) -> Tuple[np.ndarray, np.ndarray]:
        """The ``k`` users whose factors are closest (cosine) to each of ``users``; as
        :meth:`similar_items`."""
        return self._neighbours("user", users, k)

    def similar(self, ids: IdsArg, k: int = 10, kind: str = "item") -> pd.DataFrame:
        """Neighbours by id as a table: columns ``item, similar_item, score, rank`` (or
        ``user, similar_user, score, rank`` with ``kind="user"``), best first."""
        if kind not in ("item", "user"):
            raise ValueError("kind must be 'item' or 'user'")
        lookup = self.item_indices if kind == "item" else self.user_indices
        rows = lookup(ids)
        nbrs, sims = self._neighbours(kind, rows, k)
        all_ids = self.item_ids if kind == "item" else self.user_ids
        valid = nbrs >= 0
        which = np.repeat(np.arange(len(rows)), nbrs.shape[1]).reshape(nbrs.shape)[valid]
        return pd.DataFrame({
            kind: all_ids[rows[which]],
            f"similar_{kind}": all_ids[nbrs[valid]],
            "score": sims[valid],
            "rank": np.tile(np.arange(1, nbrs.shape[1] + 1), len(rows)).reshape(nbrs.shape)[valid],
        })
