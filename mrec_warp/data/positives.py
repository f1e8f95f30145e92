"""From the canonical table to positives: merge duplicates, binarise, filter users.

The first three rules of :func:`~mrec_warp.data.split.prepare`, in the order they are
applied (each is counted in ``summary.json``):

1. **Merge duplicates.** Rows with the same (user, item) become one: its value is the
   largest of their values and its timestamp the earliest of their timestamps (when the
   user first met the item). Files without a rating column get value 1 for every row.
2. **Binarise.** With ``min_rating``, merged rows whose value is below it are dropped; every
   row left is a positive. The value (rating, count, hours) is kept in the output files
   either way, so ``train --confidence`` can weigh rows by it; ``summary.json``'s
   ``value_column`` says which column it was and what became of it.
3. **Filter users.** Users with fewer than ``min_user_items`` rows left are dropped (one
   pass; items are never filtered here, so no second pass is needed).

The result (:class:`Positives`) holds integer codes sorted by user then item, which is
what the splitting works on (group by user = sort by user, no per-user Python loop).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import numpy as np
import pandas as pd


@dataclass
class Positives:
    """Merged, filtered interactions as integer codes, sorted by user then item.

    Attributes
    ----------
    user, item : numpy.ndarray of int64
        Codes into ``user_ids`` / ``item_ids``.
    value : numpy.ndarray of float64
    timestamp : numpy.ndarray of int64 or None
    user_ids, item_ids : pandas.Index
        Every id of the input, in order of first appearance (dropped ones included).
    counts : dict
        What merging and filtering did, for the summary.
    """

    user: np.ndarray
    item: np.ndarray
    value: np.ndarray
    timestamp: Optional[np.ndarray]
    user_ids: pd.Index
    item_ids: pd.Index
    counts: Dict[str, int]

    def __len__(self) -> int:
        return len(self.user)

    @property
    def n_users(self) -> int:
        return len(self.user_ids)

    @property
    def n_items(self) -> int:
        return len(self.item_ids)

    def take(self, mask: np.ndarray) -> pd.DataFrame:
        """The canonical table (user, item, value[, timestamp]) of the rows in ``mask``."""
        # .array keeps Arrow-backed strings compact: no Python object per row at 20M rows
        frame = {
            "user": self.user_ids.take(self.user[mask]).array,
            "item": self.item_ids.take(self.item[mask]).array,
            "value": self.value[mask],
        }
        if self.timestamp is not None:
            frame["timestamp"] = self.timestamp[mask]
        return pd.DataFrame(frame)


def _merge_duplicates(
    user: np.ndarray, item: np.ndarray, value: np.ndarray, timestamp: Optional[np.ndarray], n_items: int
) -> Tuple[np.ndarray, np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """One row per (user, item), sorted by user then item: max value, earliest timestamp."""
    key = user * np.int64(n_items) + item
    order = np.argsort(key, kind="stable")  # stable: same input, same output
    key = key[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    value = np.maximum.reduceat(value[order], starts)
    if timestamp is not None:
        timestamp = np.minimum.reduceat(timestamp[order], starts)
    key = key[starts]
    return key // n_items, key % n_items, value, timestamp


def binarise(df: pd.DataFrame, min_rating: Optional[float] = None, min_user_items: int = 1) -> Positives:
    """Merge duplicate rows, drop rows below ``min_rating``, drop users with too few rows.

    Parameters
    ----------
    df : pandas.DataFrame
        The canonical table from :func:`~mrec_warp.data.ratings.read_ratings`.
    min_rating : float, optional
        Merged rows with a value below this are dropped; ``None`` keeps every row.
    min_user_items : int
        Users with fewer rows than this (after the rating filter) are dropped.

    Returns
    -------
    Positives
        Sorted by user then item, ids in order of first appearance in ``df``.
    """
    user, user_ids = pd.factorize(df["user"], sort=False)
    item, item_ids = pd.factorize(df["item"], sort=False)
    if "value" in df:
        value = df["value"].to_numpy(dtype=np.float64)
    else:  # a file of (user, item) pairs: every row is a positive
        value = np.ones(len(df), dtype=np.float64)
    timestamp = df["timestamp"].to_numpy(dtype=np.int64) if "timestamp" in df else None
    user, item, value, timestamp = _merge_duplicates(
        user.astype(np.int64), item.astype(np.int64), value, timestamp, len(item_ids)
    )
    counts = {"rows_read": len(df), "duplicates_merged": len(df) - len(user)}

    keep = np.ones(len(user), dtype=bool) if min_rating is None else value >= min_rating
    counts["rows_below_min_rating"] = int(len(user) - keep.sum())
    per_user = np.bincount(user[keep], minlength=len(user_ids))
    user_ok = per_user >= min_user_items
    small = ~user_ok[user] & keep
    counts["rows_of_users_below_min_user_items"] = int(small.sum())
    counts["users_without_positives"] = int((per_user == 0).sum())
    counts["users_below_min_user_items"] = int(((per_user > 0) & ~user_ok).sum())
    keep &= ~small
    return Positives(
        user=user[keep], item=item[keep], value=value[keep],
        timestamp=None if timestamp is None else timestamp[keep],
        user_ids=pd.Index(user_ids), item_ids=pd.Index(item_ids), counts=counts,
    )
