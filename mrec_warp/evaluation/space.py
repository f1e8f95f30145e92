"""The index space of an evaluation: user and item ids as integer codes, pairs as sorted keys.

Users and items are the union of those in train and test (train's first, so train codes
need no translation). Every (user, item) pair becomes one int64 key
``user * n_items + item``; "is this pair in the test (train) set?" is then a binary search
(:func:`member`) of sorted keys, with no Python loop, so 100k+ users cost a few sorts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from ..data.interactions import Interactions
from ..data.rows import factorize_ids

InteractionsLike = Union[Interactions, pd.DataFrame]


@dataclass
class Space:
    """Users and items of train + test as codes, and the train/test pairs as sorted keys."""

    user_ids: pd.Index
    item_ids: pd.Index
    n_train_items: int  # train items are codes 0 .. n_train_items - 1
    train_keys: np.ndarray
    test_keys: np.ndarray  # train overlap removed
    n_test: np.ndarray  # test items per user, overlap removed
    n_test_in_train: int
    n_test_users_all_in_train: int  # had test rows, all of them also in train

    @property
    def n_items(self) -> int:
        return len(self.item_ids)

    @property
    def n_users(self) -> int:
        return len(self.user_ids)

    def keys(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        return users.astype(np.int64) * np.int64(self.n_items) + items.astype(np.int64)


def pairs(data: InteractionsLike, what: str) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(row codes, col codes, user ids, item ids) of the stored positives of ``data``."""
    if isinstance(data, Interactions):
        csr = data.matrix
        rows = np.repeat(np.arange(csr.shape[0]), np.diff(csr.indptr))  # every stored pair, a 0 too
        return rows, csr.indices.astype(np.int64), data.user_ids.astype(str), data.item_ids.astype(str)
    if isinstance(data, pd.DataFrame):
        missing = [c for c in ("user", "item") if c not in data.columns]
        if missing:
            raise ValueError(f"{what} table needs columns 'user' and 'item'; missing {missing}")
        u_codes, u_ids = _factorize(data["user"])
        i_codes, i_ids = _factorize(data["item"])
        return u_codes.astype(np.int64), i_codes.astype(np.int64), np.asarray(u_ids, str), np.asarray(i_ids, str)
    raise TypeError(f"{what} must be an Interactions or a DataFrame with user/item columns, got {type(data).__name__}")


def _factorize(column: pd.Series):
    """Codes numbering ``column``'s ids in order of first appearance, and the ids. A
    ``Categorical`` without missing ids (the reader's ids as codes,
    :func:`~mrec_warp.data.ratings.read_ratings` with ``coded_ids``) is taken by its codes:
    no string per row. Any other column is factorised itself: converting millions of
    strings to numpy first is slow."""
    if isinstance(column.dtype, pd.CategoricalDtype) and (column.array.codes >= 0).all():
        return factorize_ids(column)
    return pd.factorize(as_str(column), sort=False)


def as_str(column: pd.Series) -> pd.Series:
    """``column`` as strings; a string column is kept as it is (converting millions of ids
    to numpy objects is slow)."""
    return column if pd.api.types.is_string_dtype(column.dtype) else column.astype(str)


def encode(column: pd.Series, index: pd.Index) -> np.ndarray:
    """Codes of ``column``'s ids in ``index`` (-1 if unknown), looking up each distinct id once."""
    codes, uniques = pd.factorize(as_str(column), sort=False)
    return index.get_indexer(np.asarray(uniques, dtype=object))[codes].astype(np.int64)


def _extend(index: pd.Index, ids: np.ndarray) -> pd.Index:
    """``index`` followed by the ids it does not know yet, in order of first appearance."""
    known = index.get_indexer(ids) >= 0
    new = pd.unique(ids[~known])
    return index.append(pd.Index(new, dtype=object)) if len(new) else index


def build_space(train: InteractionsLike, test: InteractionsLike, catalog: Optional[Sequence[str]] = None) -> Space:
    """The codes and keys of a train/test split (``catalog``: item ids recommendations may
    name though in neither); test pairs also in train are set aside and counted."""
    tr_rows, tr_cols, tr_users, tr_items = pairs(train, "train")
    te_rows, te_cols, te_users, te_items = pairs(test, "test")
    user_ids = _extend(pd.Index(tr_users, dtype=object), te_users)
    item_ids = _extend(pd.Index(tr_items, dtype=object), te_items)
    if catalog is not None:  # items that may be recommended though in neither file (cold start)
        item_ids = _extend(item_ids, np.asarray(catalog, dtype=str).astype(object))
    n_items = len(item_ids)
    # train codes are already right (train ids come first); test codes need translating
    te_u = user_ids.get_indexer(te_users)[te_rows]
    te_i = item_ids.get_indexer(te_items)[te_cols]
    train_keys = sorted_unique(tr_rows.astype(np.int64) * n_items + tr_cols)
    test_keys = sorted_unique(te_u.astype(np.int64) * n_items + te_i)
    overlap = member(train_keys, test_keys)
    n_raw = _count_per_user(test_keys, n_items, len(user_ids))
    test_keys = test_keys[~overlap]
    n_test = _count_per_user(test_keys, n_items, len(user_ids))
    all_in_train = int(((n_raw > 0) & (n_test == 0)).sum())
    return Space(user_ids, item_ids, len(tr_items), train_keys, test_keys, n_test, int(overlap.sum()), all_in_train)


def _count_per_user(keys: np.ndarray, n_items: int, n_users: int) -> np.ndarray:
    return np.bincount(keys // max(n_items, 1), minlength=n_users)


def sorted_unique(keys: np.ndarray) -> np.ndarray:
    """Sorted distinct values (a plain sort + neighbour compare beats np.unique's hashing here)."""
    keys = np.sort(keys)
    keep = np.ones(len(keys), dtype=bool)
    keep[1:] = keys[1:] != keys[:-1]
    return keys[keep]


def first_occurrence(values: np.ndarray) -> np.ndarray:
    """Mask of the first occurrence of every value, in array order."""
    order = np.argsort(values, kind="stable")  # stable: among equals, the earliest comes first
    ordered = values[order]
    first = np.ones(len(values), dtype=bool)
    first[order[1:][ordered[1:] == ordered[:-1]]] = False
    return first


def member(sorted_keys: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``query[j] in sorted_keys`` for every j, by binary search (O(m log n), no Python loop)."""
    if len(sorted_keys) == 0:
        return np.zeros(len(query), dtype=bool)
    pos = np.searchsorted(sorted_keys, query)
    pos[pos == len(sorted_keys)] = 0
    return sorted_keys[pos] == query
