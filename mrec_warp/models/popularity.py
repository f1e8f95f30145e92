"""The popularity baseline: every user gets the most-interacted items they have not seen."""
from __future__ import annotations

from typing import Dict, Optional

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

    def score_users(self, users: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
        if out is not None:
            out[:] = self.item_counts_
            return out
        return np.broadcast_to(self.item_counts_, (len(users), self.n_items))

    def _get_arrays(self) -> Dict[str, np.ndarray]:
        return {"item_counts": self.item_counts_}

    def _set_arrays(self, arrays: Dict[str, np.ndarray]) -> None:
        counts = arrays["item_counts"].astype(np.float32)
        if counts.shape != (self.n_items,):
            raise ValueError("item_counts has the wrong length")
        self.item_counts_ = counts
