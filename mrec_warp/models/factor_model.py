"""The base of the factor models (WARP, its hybrid, WRMF): ``f(u, i) = p_u . q_i (+ b_i)``.

What they share: factors and their scoring (:meth:`FactorModel.score_users` through
:func:`factor_scores`), users added with zero rows (:meth:`FactorModel.append_users`), the
epoch-trained fit with early stopping of :mod:`.early_stopping` and the hooks it calls, and the
epoch counts a model file keeps. Each family implements the hooks declared abstract here.
"""
from __future__ import annotations

import abc
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import scipy.sparse as sp

from ..data.npz import check_shape
from ..errors import InputError
from ..progress import Progress
from . import single_user
from .base import Recommender
from .foldin import append_user_ids
from .early_stopping import fit_or_select
from .single_user import GridLists, ItemSide

#: Held while a model's one-user scoring caches are checked and renewed (served models are
#: scored from several threads).
_CACHE_LOCK = threading.Lock()


def factor_scores(user_factors: np.ndarray, item_factors: np.ndarray, item_bias: Optional[np.ndarray],
                  out: Optional[np.ndarray] = None) -> np.ndarray:
    """``user_factors @ item_factors.T (+ item_bias)`` as float32, one sgemm, into ``out`` if given."""
    scores = np.matmul(user_factors, item_factors.T, out=out)
    if item_bias is not None:
        scores += item_bias
    return scores


class FactorScoring:
    """Scoring by factors, ``f(u, i) = p_u . q_i (+ b_i)``, for any model holding
    ``user_factors_``, ``item_factors_`` and (with ``item_bias``) ``item_bias_``: the trained
    factor models and imported factors (:class:`~.imported.Factors`) score the same way."""

    def factor_parts(self) -> Tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
        """(user vectors, item vectors, item biases or None): what :meth:`score_users`
        multiplies, for one-user scoring (:mod:`.single_user`)."""
        bias = self.item_bias_ if getattr(self, "item_bias", False) else None
        return self.user_factors_, self.item_factors_, bias

    def item_side(self) -> Optional[ItemSide]:
        """The item side as one-user scoring reads it (:class:`~.single_user.ItemSide`: the
        item vectors and biases with their largest norms), kept until the item factors change;
        ``None`` when they are not float32 and C-contiguous (scored the batch way).

        It is kept while the item arrays are the same objects (held, so never confused with
        a new array at the same address) and ``epochs_done_`` is unchanged, which every
        in-place training step (``fit``, ``partial_fit``) advances.
        """
        _, items, bias = self.factor_parts()
        key = (id(items), id(bias), getattr(self, "epochs_done_", None))
        cached = self.__dict__.get("_item_side_cache")
        if cached is not None and cached.items is items and cached.bias is bias and cached.key == key:
            return cached
        with _CACHE_LOCK:
            side = ItemSide.of(items, bias, key)
            if side is not None:
                self._item_side_cache = side
        return side

    def grid_lists(self) -> GridLists:
        """The lists one-user scoring keeps of the grid calls it made for close calls
        (:func:`~.single_user.close_call`), for the current factors: empty again once the
        item factors, the user factors or the number of users change."""
        key = (self.item_side().key, id(self.factor_parts()[0]), self.n_users)
        with _CACHE_LOCK:
            lists = self.__dict__.get("_grid_cache")
            if lists is None or lists.key != key:
                lists = self._grid_cache = GridLists(key)
        return lists

    def score_users(self, users: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
        self.check_fitted()
        user_factors, item_factors, bias = self.factor_parts()
        return factor_scores(user_factors[np.asarray(users)], item_factors, bias, out)

    @property
    def user_factors(self) -> np.ndarray:
        return self.user_factors_

    @property
    def item_factors(self) -> np.ndarray:
        return self.item_factors_


class FactorModel(FactorScoring, Recommender):
    """A model of user and item factors trained in epochs with early stopping.

    A family sets :attr:`LEARNED` (the attributes training writes, which early stopping
    snapshots) and implements :meth:`init_state`, :meth:`train_epochs`,
    :meth:`history_vector` and :meth:`fold_in`; it keeps its factors in ``user_factors_``
    and ``item_factors_`` (and ``item_bias_`` when :meth:`factor_parts` says so).
    """

    has_factors = True
    early_stopping = True
    draws_random_numbers = True
    supports_fold_in = True
    finds_similar_items = True

    #: Names of the arrays training writes: what :meth:`snapshot` copies and :meth:`restore` puts back.
    LEARNED: Tuple[str, ...] = ("user_factors_", "item_factors_")
    #: Arrays of the factors' size a fit keeps (WARP: the factors and their adagrad accumulators),
    #: and factors x factors matrices it holds (WRMF: the Gram matrix and one system per solve):
    #: what the memory check before a fit counts (:func:`.early_stopping.check_factor_memory`).
    STATE_COPIES: int = 1
    GRAM_COPIES: int = 0

    def factor_rows(self, n_users: int, n_items: int) -> int:
        """Rows of factors a fit allocates (the hybrid: one per feature column)."""
        return n_users + n_items

    # -- early-stopping hooks (called by early_stopping.fit_or_select / run_epochs) ------------
    @abc.abstractmethod
    def init_state(self, n_users: int, n_items: int, seed_rng: np.random.Generator) -> None:
        """Fresh factors (and optimiser state) for ``n_users`` x ``n_items``, drawn from ``seed_rng``."""

    @abc.abstractmethod
    def train_epochs(self, csr, epochs, progress, callbacks, validation=None, phase="fit") -> int:
        """Run up to ``epochs`` epochs on ``csr`` (through :func:`.early_stopping.run_epochs`);
        with ``validation`` (a :class:`~.early_stopping.Holdout`), early-stop and keep the best.
        Returns the best epoch (with validation) or ``epochs``. A family may take more keywords
        (WRMF: ``workers``), which ``fit_or_select`` passes on every call."""

    def snapshot(self) -> Tuple[np.ndarray, ...]:
        """Copies of the :attr:`LEARNED` arrays (the best epoch's, kept by early stopping)."""
        return tuple(getattr(self, name).copy() for name in self.LEARNED)

    def restore(self, snap: Tuple[np.ndarray, ...]) -> None:
        """Put a :meth:`snapshot` back."""
        for name, arr in zip(self.LEARNED, snap):
            setattr(self, name, arr)

    #: The optimiser's and the sampler's state besides :attr:`LEARNED` (WARP: adagrad's
    #: accumulators and the sampler), what :meth:`train_state` copies with them.
    OPTIMISER_STATE: Tuple[str, ...] = ()

    def train_state(self) -> Dict[str, Any]:
        """A copy of everything the next epochs depend on: the :attr:`LEARNED` arrays, the
        :attr:`OPTIMISER_STATE` and the epoch count (what a refit may start from,
        :class:`~.early_stopping.RefitStates`)."""
        return {"learned": self.snapshot(), "epochs_done_": int(self.epochs_done_),
                **{name: np.copy(getattr(self, name)) for name in self.OPTIMISER_STATE}}

    def set_train_state(self, state: Dict[str, Any], copy: bool = True) -> None:
        """Put a :meth:`train_state` back: copies (the state stays as it was), or with
        ``copy=False`` its own arrays (the caller lets go of the state)."""
        take = np.copy if copy else (lambda arr: arr)
        self.restore(tuple(take(arr) for arr in state["learned"]))
        for name in self.OPTIMISER_STATE:
            setattr(self, name, take(state[name]))
        self.epochs_done_ = int(state["epochs_done_"])

    def restart_steps(self) -> None:
        """Restart the optimiser's step sizes (the warm refit after early stopping); a family
        with ``warm_epochs`` implements it."""
        raise NotImplementedError(f"{type(self).__name__} has no warm refit")

    def _fit_prepared(self, csr: sp.csr_matrix, validation, callbacks: Sequence, progress: Progress,
                      **options: Any) -> None:
        """The fit once the training data is set: fixed epochs, or early stopping then a refit."""
        self.history_: List[Dict[str, Any]] = []
        fit_or_select(self, csr, validation, np.random.default_rng(self.random_state), progress, callbacks, **options)

    # -- factors and scoring: FactorScoring ----------------------------------------------------------

    @abc.abstractmethod
    def history_vector(self, items: np.ndarray) -> np.ndarray:
        """The user vector :meth:`fold_in` fits for a new user with history ``items`` (sorted
        unique indices), the model unchanged (what :meth:`history_top_k` ranks)."""

    def history_top_k(self, row: np.ndarray, k: int,
                      item_mask: Optional[np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
        """The list of the new user :meth:`fold_in` would make of the history ``row``: its
        :meth:`history_vector` ranked as :meth:`recommend` ranks a user."""
        side = self.item_side()
        return single_user.top_k_of_vector(side, self.history_vector(row), k, row, item_mask)

    # -- new users ------------------------------------------------------------------------------------
    def append_users(self, ids, user_features=None) -> None:
        """New users with zero factor rows."""
        if user_features is not None:
            raise InputError("user features need a hybrid model", hint="train a hybrid model (`model=hybrid`)")
        d = self.user_factors_.shape[1]
        self.user_factors_ = np.vstack([self.user_factors_, np.zeros((len(ids), d), np.float32)])
        append_user_ids(self, ids)

    # -- persistence --------------------------------------------------------------------------------
    def _checked_factors(self, arrays: Dict[str, np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
        """A file's ``user_factors`` and ``item_factors``, float32, of the model's shape, finite."""
        uf = np.ascontiguousarray(arrays["user_factors"], dtype=np.float32)
        itf = np.ascontiguousarray(arrays["item_factors"], dtype=np.float32)
        d = uf.shape[1] if uf.ndim == 2 else -1
        check_shape(uf, (self.n_users, d), "user factors")
        check_shape(itf, (self.n_items, d), "item factors")
        return uf, itf

    @staticmethod
    def _factor_spec(params: Dict[str, Any], n_users: int, n_items: int) -> Dict[str, Tuple[str, Tuple]]:
        d = params.get("factors")
        return {"user_factors": ("f4", (n_users, d)), "item_factors": ("f4", (n_items, d))}

    def get_attrs(self) -> Dict[str, Any]:
        return {**super().get_attrs(), "epochs_done_": int(getattr(self, "epochs_done_", 0)),
                "best_epoch_": int(getattr(self, "best_epoch_", 0) or 0)}

