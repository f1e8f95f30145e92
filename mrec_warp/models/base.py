"""The Recommender base class: scikit-learn conventions, batch top-k, save/load.

Longer than the package's usual ~450 lines for one job: it is the contract every model
family implements (parameters, ids, scoring, recommend, similar, save/load), and splitting
a class's methods over modules would hide what a model must provide.
"""
from __future__ import annotations

import inspect
import numbers
import warnings
from typing import Any, Dict, Optional, Sequence, Tuple, Type, Union

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..data.confidence import check_confidence
from ..data.interactions import Interactions, as_csr, binary_csr, lookup_ids
from ..data.npz import source_name
from ..errors import InputError, spell_parameters
from ..topk import block_to_frame, iter_top_k
from . import single_user
from .persistence import HINT as MODEL_FILE_HINT, load_model, save_model

_REGISTRY: Dict[str, Type["Recommender"]] = {}

ExcludeArg = Union[str, None, sp.spmatrix]
#: One id or a sequence of ids (a str is always one id).
IdsArg = Union[str, int, Sequence]
#: One index or a sequence of indices.
IndexArg = Union[int, Sequence[int], np.ndarray]


class GeneratedIdsWarning(UserWarning):
    """Ids were looked up in a model whose ids are its row/column numbers."""


def _numeric_ids(ids) -> bool:
    """Whether ``ids`` holds numbers (not text): one number or a numeric sequence."""
    if isinstance(ids, str):
        return False
    if np.ndim(ids) == 0:
        return isinstance(ids, numbers.Number)
    arr = np.asarray(ids)
    return arr.dtype.kind in "iuf" or (arr.dtype.kind == "O" and any(isinstance(x, numbers.Number) for x in arr.flat))


def as_indices(values: IndexArg, n: int, kind: str) -> Tuple[np.ndarray, bool]:
    """Row/column indices as an int64 array, and whether a single index was given.

    Indices must be integers in ``[0, n)``: a negative index would silently count from the
    end (``-1`` = the last user) and one past the end is a raw ``IndexError``, so both are
    an :class:`InputError` naming the first bad value.
    """
    scalar = np.ndim(values) == 0
    arr = np.asarray(values).reshape(-1) if scalar else np.asarray(values)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64), scalar
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise InputError(f"{kind} indices must be integers, got {arr.reshape(-1)[0]!r}",
                             hint=f"map ids to indices with {kind}_indices(ids)")
    arr = arr.astype(np.int64, copy=False)
    if arr.ndim != 1:
        raise InputError(f"{kind} indices must be one index or a 1-D sequence, got shape {arr.shape}")
    bad = (arr < 0) | (arr >= n)
    if bad.any():
        first = int(arr[int(np.argmax(bad))])
        raise InputError(f"{kind} index {first} is out of range: the model has {n} {kind}s (0..{n - 1}); "
                         f"{int(bad.sum())} bad index(es)",
                         hint=f"indices are row numbers, not ids: map ids with {kind}_indices(ids)")
    return arr, scalar


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

    def __getstate__(self) -> Dict[str, Any]:
        """The model's state without the caches of one-user scoring and id look-ups: they are
        rebuilt on demand, and a pickled model (process and Dask workers) or a copy would
        otherwise carry a second item matrix and the id maps."""
        drop = set(single_user.CACHES) | {"_id_maps"}
        return {k: v for k, v in self.__dict__.items() if k not in drop}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    # -- data --------------------------------------------------------------------------------
    def _set_training_data(self, X) -> sp.csr_matrix:
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

    def _check_fitted(self) -> None:
        if getattr(self, "train_", None) is None:
            raise RuntimeError(f"this {type(self).__name__} is not fitted yet; call fit() first")

    def user_indices(self, ids: IdsArg, strict: bool = True, source: Optional[str] = None) -> np.ndarray:
        """Row indices of user ids (``-1`` for unknown ones when not ``strict``).

        ``ids`` is one id (a str or a number: ``"196"`` is the single id 196, never the
        ids 1, 9, 6) or a sequence of ids; numbers are looked up as their text. Returns an
        int64 array, of one element for a single id.
        """
        self._warn_generated_ids(ids, "user")
        return lookup_ids(self._id_map("user"), ids, "user", strict, source)

    def item_indices(self, ids: IdsArg, strict: bool = True, source: Optional[str] = None) -> np.ndarray:
        """Column indices of item ids (``-1`` for unknown ones when not ``strict``); as
        :meth:`user_indices`."""
        self._warn_generated_ids(ids, "item")
        return lookup_ids(self._id_map("item"), ids, "item", strict, source)

    def _id_map(self, kind: str) -> Dict[str, int]:
        """Id -> row (``kind="user"``) or column (``"item"``) index, built once per id array.

        Kept apart from the training matrix: fold-in changes ``train_`` and the users on every
        call, and rebuilding the item map (and checking every id again) with them made the
        id look-ups most of a one-user fold-in.
        """
        self._check_fitted()
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
        if not _numeric_ids(ids):  # text ids: the caller knows they are the numbers as text
            return
        self._warned_generated = True
        warnings.warn(
            f"this model was fitted on a matrix without ids, so its {kind} ids are the row/column "
            f"numbers '0'..'n-1': id 196 means row 196. Pass user_ids= and item_ids= to fit() "
            f"(or fit an Interactions) to look users and items up by your own ids.",
            GeneratedIdsWarning, stacklevel=3,
        )

    def _interactions(self) -> Interactions:
        self._check_fitted()
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

    # -- what subclasses provide -----------------------------------------------------------
    def fit(self, X, **kwargs) -> "Recommender":  # pragma: no cover - abstract
        raise NotImplementedError

    def score_users(self, users: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:  # pragma: no cover
        """Scores of users (row indices) against every item: float32 (len(users), n_items).

        ``out``, when given, is a C-contiguous float32 array of that shape to write into
        (batch scoring passes one to save a copy of every block).
        """
        raise NotImplementedError

    def _get_arrays(self) -> Dict[str, np.ndarray]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _set_arrays(self, arrays: Dict[str, np.ndarray]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _get_attrs(self) -> Dict[str, Any]:
        """Small fitted scalars worth saving (JSON-serialisable). Subclasses extend this dict;
        on load only its keys, with values of the same types, are accepted."""
        # id_encoding_: "latin-1" when the ids came from a Latin-1 file, so that outputs
        # (recommend, similar) write them back as the same bytes
        return {"ids_generated_": bool(getattr(self, "ids_generated_", False)),
                "id_encoding_": str(getattr(self, "id_encoding_", "utf-8"))}

    def _set_attrs(self, attrs: Dict[str, Any]) -> None:
        for k, v in attrs.items():
            setattr(self, k, v)

    # -- scoring and recommending ----------------------------------------------------------
    def score(self, users: IndexArg, items: IndexArg) -> Union[np.ndarray, np.float32]:
        """Scores of (user, item) index pairs; the same as :meth:`predict`."""
        return self.predict(users, items)

    def predict(self, users: IndexArg, items: IndexArg) -> Union[np.ndarray, np.float32]:
        """Scores of (user, item) pairs given by row and column indices.

        ``users`` and ``items`` are single indices or 1-D sequences broadcast against each
        other as numpy does (as LightFM's ``predict``): ``predict(0, [1, 2])`` scores items 1
        and 2 for user 0, ``predict([0, 1], [5, 9])`` the pairs (0, 5) and (1, 9). Map ids
        with :meth:`user_indices` / :meth:`item_indices`.

        Returns
        -------
        float32 array of the broadcast length, or a float32 scalar for two single indices.
        """
        self._check_fitted()
        u, u_scalar = as_indices(users, self.n_users, "user")
        i, i_scalar = as_indices(items, self.n_items, "item")
        try:
            u, i = np.broadcast_arrays(u, i)
        except ValueError:
            raise InputError(f"{len(u)} users and {len(i)} items do not pair up",
                             hint="give equal lengths, or one user (or one item) to pair with all") from None
        out = np.empty(len(u), dtype=np.float32)
        uniq, inverse = np.unique(u, return_inverse=True)
        for start in range(0, len(uniq), 1024):
            block = uniq[start:start + 1024]
            scores = self.score_users(block)
            sel = (inverse >= start) & (inverse < start + len(block))
            out[sel] = scores[inverse[sel] - start, i[sel]]
        return out[0] if u_scalar and i_scalar else out

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

    def _item_mask(self, filter_items: Optional[IndexArg]) -> Optional[np.ndarray]:
        """A uint8 mask of the items never to show (``None`` when there are none)."""
        if filter_items is None:
            return None
        idx, _ = as_indices(filter_items, self.n_items, "item")
        if len(idx) == 0:
            return None
        mask = np.zeros(self.n_items, dtype=np.uint8)
        mask[idx] = 1
        return mask

    def recommend(
        self,
        users: Optional[IndexArg] = None,
        k: int = 10,
        exclude: ExcludeArg = "train",
        filter_items: Optional[IndexArg] = None,
        n_jobs: int = 1,
        block_size: Optional[int] = None,
    ) -> Tuple[np.ndarray, np.ndarray]:
        """Top-k items for each user, best first.

        Parameters
        ----------
        users : int or int array, optional
            Row indices, each in ``[0, n_users)`` (see :meth:`user_indices` to map ids);
            default all users. A single index gives 1-D results.
        k : int
            List length.
        exclude : "train", None or sparse matrix
            Items never to recommend to a user: the training items (default), nothing, or a
            users x items matrix whose rows follow the model's user indices.
        filter_items : int or int array, optional
            Item indices never to recommend to anyone (e.g. discontinued items), on top of
            ``exclude``.
        n_jobs : int
            Threads scoring blocks of users at once.
        block_size : int, optional
            Users scored at a time; bounds memory (default keeps a block near 64 MB).

        Returns
        -------
        items : int64 array (n_users, k), or (k,) for a single user
            Item indices, best first. ``k`` is capped at the number of items; where fewer
            than ``k`` items are left after the exclusions, the row ends in ``-1`` (score
            ``-inf``): drop those before mapping indices to ids (``recommend_frame`` does).
        scores : float32 array of the same shape
        """
        self._check_fitted()
        k = min(_check_k(k), max(1, self.n_items))  # a longer list would be only -1 padding
        if users is None:
            users, scalar = np.arange(self.n_users), False
        else:
            users, scalar = as_indices(users, self.n_users, "user")
        mask = self._item_mask(filter_items)
        if len(users) <= single_user.MAX_USERS:  # one matrix-vector product per user, same lists
            few = single_user.recommend_few(self, users, k, self._exclusion_matrix(exclude), mask)
            if few is not None:
                return (few[0][0], few[1][0]) if scalar else few
        items = np.empty((len(users), k), dtype=np.int64)
        scores = np.empty((len(users), k), dtype=np.float32)
        pos = 0
        for _, block_items, block_scores in iter_top_k(
            self.score_users, self.n_items, users, k, exclude=self._exclusion_matrix(exclude), n_jobs=n_jobs,
            block_size=block_size, item_mask=mask,
        ):
            n = len(block_items)
            items[pos:pos + n] = block_items
            scores[pos:pos + n] = block_scores
            pos += n
        return (items[0], scores[0]) if scalar else (items, scores)

    def recommend_history(self, items: IndexArg, k: int = 10,
                          filter_items: Optional[IndexArg] = None) -> Tuple[np.ndarray, np.ndarray]:
        """Top-k for an anonymous history, without changing the model: the list that
        :meth:`fold_in` of that one history and :meth:`recommend` of the new user would give
        (its items excluded), in one matrix-vector product after the fold-in.

        ``items`` are the history's item indices (repeats count once); WARP, hybrid (as a
        user without features) and WRMF fold it in, item-item models and popularity score it
        directly. Returns item indices and scores, (k,), padded with ``-1`` / ``-inf`` as
        :meth:`recommend`.
        """
        self._check_fitted()
        k = min(_check_k(k), max(1, self.n_items))
        rows, _ = as_indices(items, self.n_items, "item")
        if len(rows) == 0:
            raise InputError("the history names no item", hint="give at least one item the model knows")
        return single_user.recommend_history(self, rows, k, self._item_mask(filter_items))

    def recommend_frame(self, user_ids: Optional[IdsArg] = None, k: int = 10,
                        filter_items: Optional[IdsArg] = None, **kwargs) -> pd.DataFrame:
        """Top-k as a table of the original ids: columns user, item, score, rank.

        ``user_ids`` is one id or a sequence of ids (default every user); ``filter_items``
        item ids never to show. Other arguments as for :meth:`recommend`.
        """
        users = None if user_ids is None else self.user_indices(user_ids)
        filtered = None if filter_items is None else self.item_indices(filter_items)
        items, scores = self.recommend(users, k=k, filter_items=filtered, **kwargs)
        users = np.arange(self.n_users) if users is None else users
        return block_to_frame(self, users, items, scores)

    # -- neighbours in the factor space ------------------------------------------------------
    def _vectors(self, kind: str) -> np.ndarray:
        """The user or item factors neighbours are found in (models without any refuse)."""
        self._check_fitted()
        vectors = getattr(self, f"{kind}_factors", None)
        if vectors is None:
            raise InputError(f"a {type(self).__name__} model has no {kind} factors to compare",
                             hint="use a model with factors (warp, hybrid, wrmf) or item-item weights "
                                  "(itemknn, slim, ease)")
        return vectors

    def _neighbours(self, kind: str, rows: IndexArg, k: int) -> Tuple[np.ndarray, np.ndarray]:
        vectors = self._vectors(kind)
        n = vectors.shape[0]
        k = min(_check_k(k), max(1, n))  # longer lists would be only -1 padding (k=1e12: 7 TiB)
        rows, scalar = as_indices(rows, n, kind)
        if kind == "item" and len(rows) <= single_user.MAX_USERS:  # one product per item, same lists
            found = single_user.similar_few(self, vectors, rows, k)
            return (found[0][0], found[1][0]) if scalar else found
        unit = single_user.unit_rows(vectors)
        itself = sp.identity(n, dtype=np.float32, format="csr")
        out_items = np.empty((len(rows), k), dtype=np.int64)
        out_scores = np.empty((len(rows), k), dtype=np.float32)
        pos = 0
        for _, block_items, block_scores in iter_top_k(lambda r: unit[r] @ unit.T, n, rows, k, exclude=itself):
            out_items[pos:pos + len(block_items)] = block_items
            out_scores[pos:pos + len(block_items)] = block_scores
            pos += len(block_items)
        return (out_items[0], out_scores[0]) if scalar else (out_items, out_scores)

    def similar_items(self, items: IndexArg, k: int = 10) -> Tuple[np.ndarray, np.ndarray]:
        """The ``k`` items whose factors are closest (cosine) to each of ``items``.

        ``items`` is one column index or a sequence of them. Returns item indices and cosine
        similarities, (len(items), k) -- (k,) for one index -- the item itself excluded,
        ``-1`` padding when there are fewer than ``k`` other items; ``k`` is capped at the
        number of items.
        """
        return self._neighbours("item", items, k)

    def similar_users(self, users: IndexArg, k: int = 10) -> Tuple[np.ndarray, np.ndarray]:
        """The ``k`` users whose factors are closest (cosine) to each of ``users``; as
        :meth:`similar_items`."""
        return self._neighbours("user", users, k)

    def similar(self, ids: IdsArg, k: int = 10, kind: str = "item") -> pd.DataFrame:
        """Neighbours by id as a table: columns ``item, similar_item, score, rank`` (or
        ``user, similar_user, score, rank`` with ``kind="user"``), best first."""
        if kind not in ("item", "user"):
            raise ValueError("kind must be 'item' or 'user'")
        lookup = self.item_indices if kind == "item" else self.user_indices
        rows = lookup(ids)
        nbrs, sims = self._neighbours(kind, rows, k)
        all_ids = self.item_ids if kind == "item" else self.user_ids
        valid = nbrs >= 0
        which = np.repeat(np.arange(len(rows)), nbrs.shape[1]).reshape(nbrs.shape)[valid]
        return pd.DataFrame({
            kind: all_ids[rows[which]],
            f"similar_{kind}": all_ids[nbrs[valid]],
            "score": sims[valid],
            "rank": np.tile(np.arange(1, nbrs.shape[1] + 1), len(rows)).reshape(nbrs.shape)[valid],
        })

    # -- persistence ------------------------------------------------------------------------
    def save(self, target) -> None:
        """Save to a ``.npz`` path (written atomically) or a binary file object."""
        self._check_fitted()
        save_model(
            target, type(self).__name__, self.get_params(),
            self._get_attrs(),
            self.user_ids, self.item_ids, self.train_, self._get_arrays(), verify=self._check_loadable,
        )

    #: Users whose scores :meth:`_check_loadable` computes (enough to see a model that ranks nothing).
    _PROBE_USERS = 64

    def _check_loadable(self, source) -> None:
        """What is written is what loads: the archive just written (``source``) goes through
        :func:`load`, the checks of every later run, and the loaded model must give finite
        scores to its first users; otherwise a one-line :class:`InputError`.

        A model whose numbers overflowed (infinite confidences, feature weights, factors)
        would otherwise be saved, and fail at the next load or rank nothing there.
        """
        loaded = load(source, expected=type(self))
        if loaded.n_users == 0 or loaded.n_items == 0:
            return
        users = np.arange(min(loaded.n_users, self._PROBE_USERS), dtype=np.int64)
        with np.errstate(all="ignore"):
            scores = loaded.score_users(users)
        if not np.isfinite(scores).any():
            large = [f"`{p}`" for p in ("alpha", "identity_weight", "learning_rate") if p in self.get_params()]
            raise InputError(f"every score of its first {len(users):,} users is NaN or infinite: it would rank "
                             "nothing", hint="a parameter overflowed the numbers: lower " + (" or ".join(large)
                                                                                           or "the largest one"))

    @classmethod
    def load(cls, source) -> "Recommender":
        """Load a model saved by :meth:`save` (any model class when called on the base)."""
        return load(source, expected=cls)


def factor_scores(user_factors: np.ndarray, item_factors: np.ndarray, item_bias: Optional[np.ndarray],
                  out: Optional[np.ndarray] = None) -> np.ndarray:
    """``user_factors @ item_factors.T (+ item_bias)`` as float32, one sgemm, into ``out`` if given."""
    scores = np.matmul(user_factors, item_factors.T, out=out)
    if item_bias is not None:
        scores += item_bias
    return scores


def check_not_empty(csr: sp.spmatrix) -> None:
    """Refuse a training matrix with nothing to learn: no users, no items or no stored entry."""
    n_users, n_items = csr.shape
    empty = "no users" if n_users == 0 else "no items" if n_items == 0 else "no stored entries" if csr.nnz == 0 else ""
    if empty:
        raise InputError(f"nothing to learn: the training data ({n_users:,} users x {n_items:,} items) has {empty}",
                         hint="give at least one (user, item) interaction")


def _check_k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise InputError(f"k must be a positive integer, got {k!r}")
    return int(k)


def load(source, expected: Type[Recommender] = Recommender) -> Recommender:
    """Load any mrec-warp model file; the class comes from the file's metadata.

    Every array is validated before use (see :mod:`~mrec_warp.models.persistence`); a
    damaged or crafted file is a one-line :class:`~mrec_warp.errors.InputError`.
    """
    cls, params, attrs, user_ids, item_ids, train, arrays = load_model(source, _REGISTRY, expected)
    name = source_name(source)
    model = cls(**params)
    model.user_ids, model.item_ids, model.train_ = user_ids, item_ids, train
    try:
        if hasattr(model, "_check_params"):
            model._check_params()  # the checks training makes, on the file's parameters
        if attrs.get("id_encoding_", "utf-8") not in ("utf-8", "latin-1"):  # the two a model is written with
            raise ValueError(f"id encoding {str(attrs['id_encoding_'])[:40]!r} is not utf-8 or latin-1")
        if {"alpha", "confidence"} <= set(model.get_params()) and not isinstance(model.alpha, str):
            # training checks alpha against its values; a file has none to check it against
            # ("auto" was resolved by the fit into alpha_)
            check_confidence(model.confidence, model.alpha, model.eps, bounded=True)
        model._set_arrays(arrays)
    except (KeyError, ValueError, TypeError) as exc:
        message = exc.message if isinstance(exc, InputError) else str(exc)
        # the file's parameters, not ones the user set: plain names, never shown as flags
        message = spell_parameters(message, lambda name, value: name if value is None else f"{name}={value}")
        raise InputError(f"model file is invalid: {message}", path=name, hint=MODEL_FILE_HINT) from None
    model._set_attrs(attrs)
    return model
