"""A model's ids and training matrix: the :class:`ModelIds` part of every
:class:`~mrec_warp.models.base.Recommender` (fitted ids, id look-ups, ``train_``)."""
from __future__ import annotations

import warnings
from typing import Dict, Optional, Sequence

import numpy as np
import scipy.sparse as sp

from ..data.interactions import Interactions, as_csr, binary_csr, lookup_ids
from ..errors import InputError
from .indices import IdsArg, numeric_ids


class GeneratedIdsWarning(UserWarning):
    """Ids were looked up in a model whose ids are its row/column numbers."""


class ModelIds:
    """Ids of rows and columns, the training matrix, and look-ups by id."""

    #: How the ids are written back (``"latin-1"`` when they came from a Latin-1 file, so
    #: that outputs hold the input's bytes); unset: UTF-8.
    id_encoding_: str
    _interactions_cache: Optional[Interactions]

    def set_training_data(self, X) -> sp.csr_matrix:
        """Remember ids and the training matrix; return the binary CSR to learn from.

        Every stored entry is a positive, one of value 0 too (its structure, never its values,
        says what the model has seen and excludes); a negative value, or a matrix without a
        user, an item or a stored entry (nothing to learn), is an :class:`InputError`.
        A plain matrix without ids gets the row and column numbers as ids ("0".."n-1");
        ``ids_generated_`` remembers it, so id look-ups can say so.
        """
        if isinstance(X, Interactions):
            self.user_ids, self.item_ids = X.user_ids, X.item_ids
            csr = X.matrix
            self.ids_generated_ = False
        else:
            csr = as_csr(X)
            self.user_ids = np.arange(csr.shape[0]).astype(str)
            self.item_ids = np.arange(csr.shape[1]).astype(str)
            self.ids_generated_ = True
        check_not_empty(csr)
        csr = binary_csr(csr)
        self.train_ = csr
        self._user_index = None
        self._item_index = None
        return csr

    @staticmethod
    def _with_ids(X, user_ids: Optional[Sequence], item_ids: Optional[Sequence]):
        """``X`` with the ids ``fit(X, user_ids=..., item_ids=...)`` was given, as Interactions."""
        if user_ids is None and item_ids is None:
            return X
        if isinstance(X, Interactions):
            raise InputError("X is an Interactions, which has its own ids: do not pass user_ids/item_ids too")
        csr = as_csr(X)
        if user_ids is None or item_ids is None:
            raise InputError("give both user_ids and item_ids (one id per row and per column of X)")
        try:
            return Interactions(csr, user_ids, item_ids)
        except ValueError as exc:
            raise InputError(str(exc), hint="one user id per row and one item id per column of X") from None

    @property
    def n_users(self) -> int:
        return len(self.user_ids)

    @property
    def n_items(self) -> int:
        return len(self.item_ids)

    def check_fitted(self) -> None:
        if getattr(self, "train_", None) is None:
            raise RuntimeError(f"this {type(self).__name__} is not fitted yet; call fit() first")

    def user_indices(self, ids: IdsArg, strict: bool = True, source: Optional[str] = None) -> np.ndarray:
        """Row indices of user ids (``-1`` for unknown ones when not ``strict``).

        ``ids`` is one id (a str or a number: ``"196"`` is the single id 196, never the
        ids 1, 9, 6) or a sequence of ids; numbers are looked up as their text. Returns an
        int64 array, of one element for a single id.
        """
        self._warn_generated_ids(ids, "user")
        return lookup_ids(self.id_map("user"), ids, "user", strict, source)

    def item_indices(self, ids: IdsArg, strict: bool = True, source: Optional[str] = None) -> np.ndarray:
        """Column indices of item ids (``-1`` for unknown ones when not ``strict``); as
        :meth:`user_indices`."""
        self._warn_generated_ids(ids, "item")
        return lookup_ids(self.id_map("item"), ids, "item", strict, source)

    def id_map(self, kind: str) -> Dict[str, int]:
        """Id -> row (``kind="user"``) or column (``"item"``) index, built once per id array.

        Kept apart from the training matrix: fold-in changes ``train_`` and the users on every
        call, and rebuilding the item map (and checking every id again) with them made the
        id look-ups most of a one-user fold-in.
        """
        self.check_fitted()
        ids = self.user_ids if kind == "user" else self.item_ids
        maps = self.__dict__.setdefault("_id_maps", {})
        cached = maps.get(kind)
        if cached is None or cached[0] is not ids:
            cached = maps[kind] = (ids, {x: i for i, x in enumerate(ids.tolist())})
        return cached[1]

    def _warn_generated_ids(self, ids, kind: str) -> None:
        """Say once that a model fitted on a plain matrix knows its rows only by number."""
        if not getattr(self, "ids_generated_", False) or getattr(self, "_warned_generated", False):
            return
        if not numeric_ids(ids):  # text ids: the caller knows they are the numbers as text
            return
        self._warned_generated = True
        warnings.warn(
            f"this model was fitted on a matrix without ids, so its {kind} ids are the row/column "
            f"numbers '0'..'n-1': id 196 means row 196. Pass user_ids= and item_ids= to fit() "
            f"(or fit an Interactions) to look users and items up by your own ids.",
            GeneratedIdsWarning, stacklevel=3,
        )

    def interactions(self) -> Interactions:
        self.check_fitted()
        cached = getattr(self, "_interactions_cache", None)
        # keyed on what it was built from: Interactions wraps the matrix in a new object, so
        # comparing with cached.matrix never matched and every id look-up rebuilt the id maps
        source = getattr(self, "_interactions_of", ())
        if cached is None or len(source) != 3 or any(a is not b for a, b in zip(
                source, (self.train_, self.user_ids, self.item_ids))):
            cached = Interactions(self.train_, self.user_ids, self.item_ids)
            self._interactions_cache = cached
            self._interactions_of = (self.train_, self.user_ids, self.item_ids)
        return cached


def check_not_empty(csr: sp.spmatrix) -> None:
    """Refuse a training matrix with nothing to learn: no users, no items or no stored entry."""
    n_users, n_items = csr.shape
    empty = "no users" if n_users == 0 else "no items" if n_items == 0 else "no stored entries" if csr.nnz == 0 else ""
    if empty:
        raise InputError(f"nothing to learn: the training data ({n_users:,} users x {n_items:,} items) has {empty}",
                         hint="give at least one (user, item) interaction")
