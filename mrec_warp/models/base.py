"""The Recommender base class: scikit-learn conventions, batch top-k, save/load."""
from __future__ import annotations

import inspect
from typing import Any, Dict, Optional, Sequence, Tuple, Type, Union

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..data.interactions import Interactions, as_csr, binary_csr
from ..errors import InputError
from . import persistence

_REGISTRY: Dict[str, Type["Recommender"]] = {}

ExcludeArg = Union[str, None, sp.spmatrix]


class Recommender:
    """Base class of every model.

    Subclasses declare their hyper-parameters as keyword arguments of ``__init__`` (stored
    under the same names, as in scikit-learn), implement :meth:`fit` and
    :meth:`score_users`, and list their fitted arrays in :meth:`_get_arrays` /
    :meth:`_set_arrays`. Everything else -- parameters, top-k recommendation, id mapping,
    persistence -- is shared.

    Fitted attributes: ``user_ids``, ``item_ids`` (original ids of rows and columns) and
    ``train_`` (the CSR the model was fitted on, used to exclude seen items).
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _REGISTRY[cls.__name__] = cls

    # -- parameters (scikit-learn conventions) ---------------------------------------------
    @classmethod
    def _param_names(cls):
        sig = inspect.signature(cls.__init__)
        return sorted(
            p.name for p in sig.parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        )

    def get_params(self, deep: bool = True) -> Dict[str, Any]:
        """The constructor parameters and their current values."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> "Recommender":
        """Set constructor parameters; unknown names raise ``ValueError``."""
        valid = set(self._param_names())
        for name, value in params.items():
            if name not in valid:
                raise ValueError(f"{type(self).__name__} has no parameter {name!r}; valid: {sorted(valid)}")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    # -- data --------------------------------------------------------------------------------
    def _set_training_data(self, X) -> sp.csr_matrix:
        """Remember ids and the training matrix; return the binary CSR to learn from."""
        if isinstance(X, Interactions):
            self.user_ids, self.item_ids = X.user_ids, X.item_ids
            csr = X.matrix
        else:
            csr = as_csr(X)
            self.user_ids = np.arange(csr.shape[0]).astype(str)
            self.item_ids = np.arange(csr.shape[1]).astype(str)
        csr = binary_csr(csr)
        self.train_ = csr
        self._user_index = None
        self._item_index = None
        return csr

    @property
    def n_users(self) -> int:
        return len(self.user_ids)

    @property
    def n_items(self) -> int:
        return len(self.item_ids)

    def _check_fitted(self) -> None:
        if getattr(self, "train_", None) is None:
            raise RuntimeError(f"this {type(self).__name__} is not fitted yet; call fit() first")

    def user_indices(self, ids: Sequence, strict: bool = True, source: Optional[str] = None) -> np.ndarray:
        """Row indices of user ids (``-1`` for unknown ones when not ``strict``)."""
        return self._interactions().user_indices(ids, strict=strict, source=source)

    def item_indices(self, ids: Sequence, strict: bool = True, source: Optional[str] = None) -> np.ndarray:
        """Column indices of item ids (``-1`` for unknown ones when not ``strict``)."""
        return self._interactions().item_indices(ids, strict=strict, source=source)

    def _interactions(self) -> Interactions:
        self._check_fitted()
        cached = getattr(self, "_interactions_cache", None)
        if cached is None or cached.matrix is not self.train_:
            cached = Interactions(self.train_, self.user_ids, self.item_ids)
            self._interactions_cache = cached
        return cached

    # -- what subclasses provide -----------------------------------------------------------
    def fit(self, X, **kwargs) -> "Recommender":  # pragma: no cover - abstract
        raise NotImplementedError

    def score_users(self, users: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        """Scores of users (row indices) against every item: float32 (len(users), n_items)."""
        raise NotImplementedError

    def _get_arrays(self) -> Dict[str, np.ndarray]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _set_arrays(self, arrays: Dict[str, np.ndarray]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _get_attrs(self) -> Dict[str, Any]:
        """Small fitted scalars worth saving (JSON-serialisable)."""
        return {}

    def _set_attrs(self, attrs: Dict[str, Any]) -> None:
        for k, v in attrs.items():
            setattr(self, k, v)

    # -- scoring and recommending ----------------------------------------------------------
    def score(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Score of each (user, item) pair given as index arrays of equal length."""
        self._check_fitted()
        users = np.asarray(users, dtype=np.int64)
        items = np.asarray(items, dtype=np.int64)
        if users.shape != items.shape:
            raise ValueError("users and items must have the same length")
        out = np.empty(len(users), dtype=np.float32)
        uniq, inverse = np.unique(users, return_inverse=True)
        for start in range(0, len(uniq), 1024):
            block = uniq[start:start + 1024]
            scores = self.score_users(block)
            sel = (inverse >= start) & (inverse < start + len(block))
            out[sel] = scores[inverse[sel] - start, items[sel]]
        return out

    def _exclusion_matrix(self, exclude: ExcludeArg) -> Optional[sp.csr_matrix]:
        if isinstance(exclude, str):
            if exclude != "train":
                raise ValueError("exclude must be 'train', None or a users x items sparse matrix")
            return self.train_
        if exclude is None:
            return None
        csr = as_csr(exclude)
        if csr.shape[1] != self.n_items:
            raise ValueError(f"exclude has {csr.shape[1]} columns, the model has {self.n_items} items")
        return csr

    def recommend(
        self,
        users: Optional[np.ndarray] = None,
        k: int = 10,
        exclude: ExcludeArg = "train",
        n_jobs: int = 1,
        block_size: Optional[int] = None,
    ) -> Tuple[np.ndarray, np.ndarray]:
        """Top-k items for each user, best first.

        Parameters
        ----------
        users : int array, optional
            Row indices (see :meth:`user_indices` to map ids); default all users.
        k : int
            List length.
        exclude : "train", None or sparse matrix
            Items never to recommend to a user: the training items (default), nothing, or a
            users x items matrix whose rows follow the model's user indices.
        n_jobs : int
            Threads scoring blocks of users at once.
        block_size : int, optional
            Users scored at a time; bounds memory (default keeps a block near 64 MB).

        Returns
        -------
        items : int64 array (n_users, k)
            Item indices, ``-1`` where fewer than ``k`` items were left.
        scores : float32 array (n_users, k)
        """
        from ..recommend import iter_top_k

        self._check_fitted()
        users = np.arange(self.n_users) if users is None else np.asarray(users, dtype=np.int64)
        if len(users) and (users.min() < 0 or users.max() >= self.n_users):  # -1 would wrap round
            raise InputError(f"user indices must be in [0, {self.n_users}), got {int(users.min())}..{int(users.max())}",
                             hint="map ids with user_indices(ids)")
        items = np.empty((len(users), k), dtype=np.int64)
        scores = np.empty((len(users), k), dtype=np.float32)
        pos = 0
        for _, block_items, block_scores in iter_top_k(
            self.score_users, self.n_items, users, k, exclude=self._exclusion_matrix(exclude), n_jobs=n_jobs, block_size=block_size
        ):
            n = len(block_items)
            items[pos:pos + n] = block_items
            scores[pos:pos + n] = block_scores
            pos += n
        return items, scores

    def recommend_frame(self, user_ids: Optional[Sequence] = None, k: int = 10, **kwargs) -> pd.DataFrame:
        """Top-k as a table of the original ids: columns user, item, score, rank."""
        users = None if user_ids is None else self.user_indices(user_ids)
        items, scores = self.recommend(users, k=k, **kwargs)
        from ..recommend import block_to_frame

        users = np.arange(self.n_users) if users is None else users
        return block_to_frame(self, users, items, scores)

    # -- persistence ------------------------------------------------------------------------
    def save(self, target) -> None:
        """Save to a ``.npz`` path (written atomically) or a binary file object."""
        self._check_fitted()
        persistence.save_model(
            target, type(self).__name__, self.get_params(), self._get_attrs(),
            self.user_ids, self.item_ids, self.train_, self._get_arrays(),
        )

    @classmethod
    def load(cls, source) -> "Recommender":
        """Load a model saved by :meth:`save` (any model class when called on the base)."""
        return load(source, expected=cls)


def load(source, expected: Type[Recommender] = Recommender) -> Recommender:
    """Load any mrec-warp model file; the class comes from the file's metadata."""
    meta, user_ids, item_ids, train, arrays = persistence.load_model(source)
    name = getattr(source, "name", None) or str(source)
    cls = _REGISTRY.get(meta.get("class"))
    if cls is None:
        raise InputError(f"unknown model class {meta.get('class')!r}", path=name, hint="upgrade mrec-warp")
    if not issubclass(cls, expected):
        raise InputError(f"file holds a {cls.__name__}, expected a {expected.__name__}", path=name)
    params = {k: v for k, v in meta.get("params", {}).items() if k in cls._param_names()}
    model = cls(**params)
    model.user_ids, model.item_ids, model.train_ = user_ids, item_ids, train
    try:
        model._set_arrays(arrays)
    except (KeyError, ValueError) as exc:
        raise InputError(f"model arrays are missing or inconsistent ({exc})", path=name,
                         hint="re-create it with 'mrec-warp train'") from None
    model._set_attrs(meta.get("attrs", {}))
    return model
