"""Interactions: a users x items CSR matrix plus the maps to the user's own ids."""
from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Dict, Iterable, Optional, Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..errors import InputError

#: Column names of the canonical interactions table (what ratings files are read into).
CANONICAL_COLUMNS = ("user", "item", "value", "timestamp")


def as_csr(matrix) -> sp.csr_matrix:
    """Return ``matrix`` as users x items CSR with sorted indices, float32 data, no duplicates.

    Index arrays are int32 while they fit and int64 beyond, so 20M+ interaction sets work.
    """
    if isinstance(matrix, Interactions):
        return matrix.matrix
    csr = sp.csr_matrix(matrix, dtype=np.float32)
    csr.sum_duplicates()  # also sorts indices
    return csr


def binary_csr(csr: sp.csr_matrix) -> sp.csr_matrix:
    """The positives of a CSR as ones: implicit feedback, presence is the signal.

    Explicit zeros are not interactions and are dropped. Only the index arrays are copied
    (the caller's matrix may change later); the caller's values are never duplicated, which
    keeps the peak memory of large fits down.
    """
    bad = ~(csr.data >= 0)  # negative or NaN: no reading of "implicit feedback" makes these a positive
    if bad.any():
        row = int(np.searchsorted(csr.indptr, int(np.argmax(bad)), side="right") - 1)
        raise InputError(f"{int(bad.sum()):,} stored values are negative or not a number (the first in row {row}); "
                         "implicit feedback is the presence of a pair, so a value must be > 0 (or 0: no pair)",
                         hint="keep only the likes (e.g. prepare `min_rating=4`), or drop those entries")
    if csr.nnz and not csr.data.all():
        csr = csr.copy()
        csr.eliminate_zeros()
    return sp.csr_matrix((np.ones(csr.nnz, dtype=np.float32), csr.indices.copy(), csr.indptr.copy()),
                         shape=csr.shape)


def _id_array(values: Iterable) -> np.ndarray:
    """Ids are kept as unicode strings so they save to .npz without pickle and round-trip."""
    arr = np.asarray(list(values) if not isinstance(values, (np.ndarray, pd.Index)) else values)
    return arr.astype(str)


def _check_columns(df: pd.DataFrame, **named: Optional[str]) -> None:
    """Each column ``named`` (parameter -> column, None: not used) is one of ``df``'s."""
    if not isinstance(df, pd.DataFrame):
        raise InputError(f"expected a pandas DataFrame, got {type(df).__name__}")
    for param, column in named.items():
        if column is not None and column not in df.columns:
            have = ", ".join(repr(c) for c in list(df.columns)[:10]) or "none"
            raise InputError(f"the table has no column {column!r} (its columns: {have})",
                             hint=f"name the column to use with `{param}`")


@dataclass
class Interactions:
    """Implicit feedback as a users x items sparse matrix with id maps.

    Attributes
    ----------
    matrix : scipy.sparse.csr_matrix
        users x items, float32 values, sorted indices, no explicit duplicates. The values
        are the raw ones (counts, hours, ratings: ``from_dataframe(value_col="value")``) or
        1; models that learn from presence only take :func:`binary_csr` of it, models that
        use a confidence compute it from these values with
        :func:`mrec_warp.data.confidence.confidence`.
    user_ids, item_ids : numpy.ndarray of str
        The original id of each row and column.
    """

    matrix: sp.csr_matrix
    user_ids: np.ndarray
    item_ids: np.ndarray
    _user_index: Optional[Dict[str, int]] = field(default=None, repr=False, compare=False)
    _item_index: Optional[Dict[str, int]] = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.matrix = as_csr(self.matrix)
        self.user_ids = _id_array(self.user_ids)
        self.item_ids = _id_array(self.item_ids)
        if self.matrix.shape != (len(self.user_ids), len(self.item_ids)):
            raise ValueError(
                f"matrix shape {self.matrix.shape} does not match "
                f"{len(self.user_ids)} user ids x {len(self.item_ids)} item ids"
            )
        for kind, ids in (("user", self.user_ids), ("item", self.item_ids)):
            index = pd.Index(ids)
            if not index.is_unique:  # two rows under one id: look-ups would silently pick one
                raise ValueError(f"{kind} id {index[index.duplicated()][0]!r} names more than one "
                                 f"{'row' if kind == 'user' else 'column'}; ids must be unique")

    # -- sizes ---------------------------------------------------------------------------
    @property
    def n_users(self) -> int:
        return self.matrix.shape[0]

    @property
    def n_items(self) -> int:
        return self.matrix.shape[1]

    @property
    def nnz(self) -> int:
        return int(self.matrix.nnz)

    # -- id maps -------------------------------------------------------------------------
    @property
    def user_index(self) -> Dict[str, int]:
        if self._user_index is None:
            self._user_index = {u: i for i, u in enumerate(self.user_ids.tolist())}
        return self._user_index

    @property
    def item_index(self) -> Dict[str, int]:
        if self._item_index is None:
            self._item_index = {u: i for i, u in enumerate(self.item_ids.tolist())}
        return self._item_index

    def user_indices(self, ids: Sequence, strict: bool = True, source: Optional[str] = None) -> np.ndarray:
        """Map user ids to row indices; unknown ids raise (``strict``) or map to -1.

        ``ids`` is one id (a str is always a single id) or a sequence; numbers are looked
        up as their text.
        """
        return _lookup(self.user_index, ids, "user", strict, source)

    def item_indices(self, ids: Sequence, strict: bool = True, source: Optional[str] = None) -> np.ndarray:
        """Map item ids to column indices; unknown ids raise (``strict``) or map to -1."""
        return _lookup(self.item_index, ids, "item", strict, source)

    # -- conversions ---------------------------------------------------------------------
    @classmethod
    def from_dataframe(
        cls,
        df: pd.DataFrame,
        user_col: str = "user",
        item_col: str = "item",
        value_col: Optional[str] = None,
        user_ids: Optional[Sequence] = None,
        item_ids: Optional[Sequence] = None,
    ) -> "Interactions":
        """Build from a table of (user, item[, value]) rows.

        Duplicate (user, item) rows are merged by summing their values (a user who played
        a song twice has a stronger signal, never two entries). Ids are taken in order of
        first appearance unless ``user_ids`` / ``item_ids`` fix the index space (rows with
        ids outside it are dropped). A column named that the table lacks is an
        :class:`~mrec_warp.errors.InputError` listing the columns it has.
        """
        _check_columns(df, user_col=user_col, item_col=item_col, value_col=value_col)
        users = df[user_col].astype(str).to_numpy()
        items = df[item_col].astype(str).to_numpy()
        if value_col is not None and value_col in df:
            values = df[value_col].to_numpy(dtype=np.float32)
        else:
            values = np.ones(len(df), dtype=np.float32)
        if user_ids is None:
            u_codes, u_uniques = pd.factorize(users, sort=False)
        else:
            u_uniques = _id_array(user_ids)
            u_codes = pd.Index(u_uniques).get_indexer(users)
        if item_ids is None:
            i_codes, i_uniques = pd.factorize(items, sort=False)
        else:
            i_uniques = _id_array(item_ids)
            i_codes = pd.Index(i_uniques).get_indexer(items)
        keep = (u_codes >= 0) & (i_codes >= 0)
        if not keep.all():
            u_codes, i_codes, values = u_codes[keep], i_codes[keep], values[keep]
        matrix = sp.csr_matrix(
            (values, (u_codes, i_codes)), shape=(len(u_uniques), len(i_uniques)), dtype=np.float32
        )
        return cls(matrix, np.asarray(u_uniques), np.asarray(i_uniques))

    def to_dataframe(self) -> pd.DataFrame:
        """Rows of (user, item, value) in user-then-item index order."""
        coo = self.matrix.tocoo()
        return pd.DataFrame(
            {
                "user": self.user_ids[coo.row],
                "item": self.item_ids[coo.col],
                "value": coo.data,
            }
        )

    def reindex(self, user_ids: Optional[Sequence] = None, item_ids: Optional[Sequence] = None) -> "Interactions":
        """Express the same interactions in another id space (unknown ids dropped, new ones empty).

        Only the id lists are looked up, once each; the stored pairs move by their codes.
        """
        new_users = self.user_ids if user_ids is None else _id_array(user_ids)
        new_items = self.item_ids if item_ids is None else _id_array(item_ids)
        coo = self.matrix.tocoo()
        rows = pd.Index(new_users).get_indexer(self.user_ids)[coo.row]
        cols = pd.Index(new_items).get_indexer(self.item_ids)[coo.col]
        keep = (rows >= 0) & (cols >= 0)
        matrix = sp.csr_matrix((coo.data[keep], (rows[keep], cols[keep])),
                               shape=(len(new_users), len(new_items)), dtype=np.float32)
        return Interactions(matrix, np.asarray(new_users), np.asarray(new_items))


def _id_list(ids) -> list:
    """Ids as a list of str: one id (a str, or a number given as such) is one id, never the
    characters of a string (``"196"`` is the id 196, not the ids 1, 9 and 6)."""
    if isinstance(ids, (str, bytes, numbers.Number, np.generic)) or (isinstance(ids, np.ndarray) and ids.ndim == 0):
        ids = [ids.item() if isinstance(ids, np.ndarray) else ids]
    return [x.decode("utf-8") if isinstance(x, bytes) else str(x) for x in ids]


def _lookup(index: Dict[str, int], ids: Sequence, kind: str, strict: bool, source: Optional[str]) -> np.ndarray:
    ids = _id_list(ids)
    out = np.fromiter((index.get(x, -1) for x in ids), dtype=np.int64, count=len(ids))
    if strict and (out < 0).any():
        bad = ids[int(np.flatnonzero(out < 0)[0])]
        n_bad = int((out < 0).sum())
        raise InputError(
            f"{n_bad} {kind} id(s) not known to the model, e.g. {bad!r}",
            path=source,
            hint=f"pass only {kind}s present in the training data",
        )
    return out
