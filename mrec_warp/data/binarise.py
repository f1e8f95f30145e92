"""From the canonical table to positives: merge duplicates, binarise, filter users.

The first three rules of :func:`~mrec_warp.stages.prepare.prepare`, in the order they are
applied (each is counted in ``summary.json``):

1. **Negatives and duplicates.** The row rules of :mod:`mrec_warp.data.rows`: negative
   values are refused, dropped or netted (``negatives``, default ``refuse``); rows with the
   same (user, item) become one whose value is their sum (``duplicates``: sum, max, first,
   last, count) and whose timestamp is the earliest of theirs (when the user first met
   the item). Files without a rating column get value 1 for every row.
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
from typing import Dict, Optional

import numpy as np
import pandas as pd

from .rows import DEFAULT_EMPTY_IDS, DEFAULT_NEGATIVES, drop_empty_ids, merge_rows, table_locator


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


def binarise(df: pd.DataFrame, min_rating: Optional[float] = None, min_user_items: int = 1,
             duplicates: Optional[str] = None, negatives: str = DEFAULT_NEGATIVES,
             source: Optional[str] = None, empty_ids: str = DEFAULT_EMPTY_IDS) -> Positives:
    """Apply the row rules, then drop users with too few rows.

    Parameters
    ----------
    df : pandas.DataFrame
        The canonical table from :func:`~mrec_warp.data.ratings.read_ratings`.
    min_rating : float, optional
        Merged rows with a value below this are dropped; ``None`` keeps every row.
    min_user_items : int
        Users with fewer rows than this (after the rating filter) are dropped.
    duplicates, negatives : str
        How repeated (user, item) rows merge and what negative values do:
        :mod:`mrec_warp.data.rows`.
    source : str, optional
        The file ``df`` was read from, for the line of a refused negative value.
    empty_ids : {"refuse", "drop"}
        ``drop`` leaves out rows whose user or item id is empty (read with
        ``read_ratings(empty_ids="drop")``), counted as ``empty_id_rows_dropped``.

    Returns
    -------
    Positives
        Sorted by user then item, ids in order of first appearance in ``df``.
    """
    n_rows = len(df)
    df, n_empty = drop_empty_ids(df, empty_ids)
    user, user_ids = pd.factorize(df["user"], sort=False)
    item, item_ids = pd.factorize(df["item"], sort=False)
    value = df["value"].to_numpy(dtype=np.float64) if "value" in df else None  # None: every row a positive
    timestamp = df["timestamp"].to_numpy(dtype=np.int64) if "timestamp" in df else None
    rows = merge_rows(user, item, value, timestamp, len(item_ids), duplicates=duplicates, negatives=negatives,
                      min_value=min_rating, locate=table_locator(df, source=source), source=source)
    user, item, value, timestamp = rows.user, rows.item, rows.value, rows.timestamp
    counts = {**rows.counts, "rows_read": n_rows, "empty_id_rows_dropped": n_empty}
    counts["rows_below_min_rating"] = counts["rows_below_min_value"]  # prepare's name for it
    per_user = np.bincount(user, minlength=len(user_ids))
    user_ok = per_user >= min_user_items
    small = ~user_ok[user]
    counts["rows_of_users_below_min_user_items"] = int(small.sum())
    counts["users_without_positives"] = int((per_user == 0).sum())
    counts["users_below_min_user_items"] = int(((per_user > 0) & ~user_ok).sum())
    keep = ~small
    return Positives(
        user=user[keep], item=item[keep], value=value[keep],
        timestamp=None if timestamp is None else timestamp[keep],
        user_ids=pd.Index(user_ids), item_ids=pd.Index(item_ids), counts=counts,
    )
