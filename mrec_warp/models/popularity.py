"""The popularity baseline: every user gets the most-interacted items they have not seen."""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..data.npz import check_counts, check_shape
from ..progress import SILENT, Progress
from .base import Recommender
from .foldin import log_fold_in, add_history, append_user_ids, refuse_features
from .tuning import TrialShape


class Popularity(Recommender):
    """Rank items by how many training users interacted with them.

    The baseline every personalised model must beat. Ties are broken by item index. New
    users are served too: :meth:`fold_in` adds them with their history, whose items are
    then excluded from their lists like training items.
    """

    name = "popularity"
    order = 60
    supports_fold_in = True
    tune_baseline = True  # the reference row of tune's table

    @classmethod
    def fit_cost(cls, shape: TrialShape, params: Mapping[str, Any], epochs_cap: Optional[int] = None) -> float:
        """Counting is free next to validation scoring."""
        return shape.scoring()

    def __init__(self) -> None:
        pass

    def fit(self, X, user_ids: Optional[Sequence] = None, item_ids: Optional[Sequence] = None,
            **kwargs) -> "Popularity":
        """Count each item's users in ``X`` (Interactions or a sparse matrix; with a plain
        matrix, ``user_ids`` / ``item_ids`` name its rows and columns)."""
        csr = self.set_training_data(self._with_ids(X, user_ids, item_ids))
        self.item_counts_ = np.bincount(csr.indices, minlength=csr.shape[1]).astype(np.float32)
        return self

    def score_users(self, users: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
        if out is not None:
            out[:] = self.item_counts_
            return out
        return np.broadcast_to(self.item_counts_, (len(users), self.n_items))

    def score_history(self, items: np.ndarray) -> np.ndarray:
        """Scores (1, n_items) of an anonymous history: the counts, whatever it holds."""
        return self.item_counts_[None, :]

    def fold_in(self, history, *, epochs: Optional[int] = None, user_features=None,
                progress: Optional[Progress] = None, user_ids: Optional[Sequence] = None) -> "Popularity":
        """Add the users of ``history`` (as :meth:`WARP.fold_in` takes it) in place.

        The counts do not change -- the baseline stays the one fitted -- but every history
        item joins its user's row of ``train_``, so new users get the most popular items
        they have not seen. ``epochs`` is accepted for a common signature and ignored.
        """
        self.check_fitted()
        refuse_features(self, user_features)
        added = add_history(self, history, user_ids=user_ids)
        self.fold_in_summary_ = added["summary"]
        log_fold_in(progress or SILENT, self.fold_in_summary_)
        return self

    def append_users(self, ids, user_features=None) -> None:
        append_user_ids(self, ids)

    def unknown_user_ranking(self) -> str:
        """Users it never saw are served too: their list is every user's, the overall ranking."""
        return "the most popular items overall"

    def get_arrays(self) -> Dict[str, np.ndarray]:
        return {"item_counts": self.item_counts_}

    @classmethod
    def array_spec(cls, params: Dict[str, Any], n_users: int, n_items: int) -> Dict[str, Tuple[str, Tuple]]:
        """Kind and shape of each saved array, checked before loading."""
        return {"item_counts": ("fiu", (n_items,))}

    def set_arrays(self, arrays: Dict[str, np.ndarray]) -> None:
        counts = np.ascontiguousarray(arrays["item_counts"], dtype=np.float32)
        check_shape(counts, (self.n_items,), "item counts")
        check_counts(counts, "item counts")
        self.item_counts_ = counts
