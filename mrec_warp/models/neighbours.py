"""Neighbours by cosine: similar items and users of a model with factors (the
:class:`Neighbours` part of every :class:`~mrec_warp.models.base.Recommender`)."""
from __future__ import annotations

from typing import Tuple

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..errors import InputError
from ..topk import iter_top_k
from . import single_user
from .families import family_names
from .indices import IdsArg, IndexArg, as_indices, check_k


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
        if kind == "item" and len(rows) <= single_user.MAX_USERS:  # one product per item, same lists
            found = single_user.similar_few(self, vectors, rows, k)
            return (found[0][0], found[1][0]) if scalar else found
        unit = single_user.unit_rows(vectors)
        itself = sp.identity(n, dtype=np.float32, format="csr")
        out_items = np.empty((len(rows), k), dtype=np.int64)
        out_scores = np.empty((len(rows), k), dtype=np.float32)
        pos = 0
        for _, block_items, block_scores in iter_top_k(lambda r: unit[r] @ unit.T, n, rows, k, exclude=itself):
            out_items[pos:pos + len(block_items)] = block_items
            out_scores[pos:pos + len(block_items)] = block_scores
            pos += len(block_items)
        return (out_items[0], out_scores[0]) if scalar else (out_items, out_scores)

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
