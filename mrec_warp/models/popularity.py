"""The popularity baseline: every user gets the most-interacted items they have not seen."""
from __future__ import annotations

from typing import Any, Dict, Tuple

import numpy as np

from .base import Recommender


class Popularity(Recommender):
    """Rank items by how many training users interacted with them.

    The baseline every personalised model must beat. Ties are broken by item index.
    """

    def __init__(self) -> None:
        pass

    def fit(self, X, **kwargs) -> "Popularity":
        csr = self._set_training_data(X)
        self.item_counts_ = np.bincount(csr.indices, minlength=csr.shape[1]).astype(np.float32)
        return self

    def score_users(self, users: np.ndarray) -> np.ndarray:
        return np.broadcast_to(self.item_counts_, (len(users), self.n_items))

    def _get_arrays(self) -> Dict[str, np.ndarray]:
        return {"item_counts": self.item_counts_}

    @classmethod
    def _array_spec(cls, params: Dict[str, Any], n_users: int, n_items: int) -> Dict[str, Tuple[str, Tuple]]:
        """Kind and shape of each saved array, checked before loading."""
        return {"item_counts": ("fiu", (n_items,))}

    def _set_arrays(self, arrays: Dict[str, np.ndarray]) -> None:
        from ..data.npz import check_finite, check_shape

        counts = np.ascontiguousarray(arrays["item_counts"], dtype=np.float32)
        check_shape(counts, (self.n_items,), "item counts")
        check_finite(counts, "item counts", limit=float(2**63))
        if len(counts) and counts.min() < 0:
            raise ValueError("item counts hold negative values")
        self.item_counts_ = counts
