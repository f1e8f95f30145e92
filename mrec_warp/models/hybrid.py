"""Hybrid WARP: users and items represented by the embeddings of their features.

The Python side of the model; the per-interaction work is in :mod:`mrec_warp.kernels.hybrid`.
Training, early stopping, refit, callbacks and hogwild threads are WARP's own
(:class:`~mrec_warp.models.warp.WARP`); this class only supplies the state, the kernel call,
the scoring and the handling of features and of ids that appear after training.
One job, the estimator, over ~450 lines: its cold-start methods (``with_new_items``,
``with_new_users``, ``fold_in``) change the same embedding tables and feature sides
(:mod:`.feature_sides`) as training, so they stay with it.
"""
from __future__ import annotations

import copy
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..data.features import FeaturesLike, as_feature_table, check_ids_match
from ..data.npz import check_finite, check_ids, check_shape, csr_arrays, read_csr
from ..errors import InputError
from ..progress import SILENT, Progress
from ..kernels import hybrid as _hybrid
from ..kernels import rng as _rng
from ..seeds import spawn_seed
from .base import factor_scores
from .feature_sides import FeatureSide, build_side
from .foldin import append_empty_rows as _append_empty_rows, fold_in
from .params import check_flag, check_number
from .single_user import anonymous_weight, warp_vector
from .warp import WARP, Callback


class HybridWARP(WARP):
    """WARP with user and item features (a LightFM-style hybrid model).

    A user is represented by ``p_u = sum_f w_uf E_f``, the weighted sum of the embeddings
    of its features, an item by ``q_i = sum_g w_ig F_g`` and ``b_i = sum_g w_ig c_g``;
    ``f(u, i) = p_u . q_i + b_i``, trained with WARP exactly as :class:`WARP` is. Every id
    has an identity feature of its own unless ``identity=False``, so without feature
    files the model *is* plain WARP (same initialisation, same updates).

    Features come from files ``id<TAB>feature[<TAB>weight]``
    (:func:`~mrec_warp.data.features.read_features`) given to :meth:`fit`. Each id's identity has weight
    ``identity_weight`` (2) and its weights are then scaled to unit Euclidean length when
    ``normalize`` is on (the default).

    Cold start: features of ids absent from the training data are kept; new items are
    ranked with :meth:`with_new_items`, new users with :meth:`with_new_users`, and users
    with a short history are added without refitting by :meth:`fold_in`.

    Parameters
    ----------
    learning_rate : float or None
        Step size. ``None`` (default): 0.05 when users or items have content features, else
        WARP's default (0.02, so that without feature files the model is WARP with its
        defaults). Features call for a larger step because an id's own (identity)
        embedding receives only its weight squared (2/3 with two unit-weight features) of
        each step on its representation; the rest goes to feature rows shared with many
        ids, whose adagrad steps shrink quickly.
    identity : bool
        Give every user and item its own identity feature (default). Without it, users
        and items are their features alone.
    identity_weight : float
        Weight of an id's identity feature before normalisation (content features keep the
        weights of the feature files); 2 keeps an id's own embedding the larger part of its
        representation for up to four unit-weight features.
    normalize : bool
        Scale each id's feature weights, identity included, to unit Euclidean length
        (default); see :mod:`mrec_warp.models.feature_weights` for the rule and why.
    factors, loss, learning_schedule, decay, user_reg, item_reg, max_sampled, \
user_max_norm, item_max_norm, kos_k, kos_n, item_bias, epochs, max_epochs, patience, eval_every, eval_k, min_improvement, \
validation_fraction, validation_users, refit, warm_epochs, init_scale, n_jobs, random_state, verbose
        As for :class:`WARP`; ``user_reg`` / ``item_reg`` and the norm limits apply to
        every feature embedding a step touches and ``item_bias`` learns one bias per item feature.
    """

    def __init__(
        self,
        factors: int = 64,
        loss: str = "warp",
        learning_rate: Optional[float] = None,
        learning_schedule: str = "adagrad",
        decay: float = 0.0,
        user_reg: float = 0.0,
        item_reg: float = 0.0,
        max_sampled: int = 50,
        user_max_norm: Optional[float] = 1.25,
        item_max_norm: Optional[float] = None,
        kos_k: int = 5,
        kos_n: int = 10,
        item_bias: bool = True,
        epochs: Optional[int] = None,
        max_epochs: int = 200,
        patience: int = 10,
        eval_every: int = 1,
        eval_k: int = 10,
        min_improvement: float = 0.0,
        validation_fraction: float = 0.1,
        validation_users: int = 5000,
        refit: bool = True,
        warm_epochs: int = 0,
        init_scale: float = 0.1,
        n_jobs: int = 1,
        random_state: Optional[int] = None,
        verbose: bool = False,
        identity: bool = True,
        identity_weight: float = 2.0,
        normalize: bool = True,
    ) -> None:
        super().__init__(
            factors=factors, loss=loss, learning_rate=learning_rate, learning_schedule=learning_schedule,
            decay=decay, user_reg=user_reg, item_reg=item_reg, max_sampled=max_sampled,
            user_max_norm=user_max_norm, item_max_norm=item_max_norm, kos_k=kos_k, kos_n=kos_n, item_bias=item_bias,
            epochs=epochs, max_epochs=max_epochs, patience=patience, eval_every=eval_every, eval_k=eval_k,
            min_improvement=min_improvement, validation_fraction=validation_fraction,
            validation_users=validation_users, refit=refit, warm_epochs=warm_epochs,
            init_scale=init_scale, n_jobs=n_jobs, random_state=random_state, verbose=verbose,
        )
        self.identity = identity
        self.identity_weight = identity_weight
        self.normalize = normalize

    #: The default step with content features (see ``learning_rate``).
    FEATURE_LEARNING_RATE = 0.05

    # -- training ------------------------------------------------------------------------------
    def _base_learning_rate(self) -> float:
        if self.learning_rate is not None:
            return float(self.learning_rate)
        sides = (getattr(self, "_users", None), getattr(self, "_items", None))
        if any(side is not None and side.n_content > 0 for side in sides):
            return self.FEATURE_LEARNING_RATE
        return float(WARP().learning_rate)

    def _check_params(self) -> None:
        check_number(self.identity_weight, "identity_weight", above=0)
        check_flag(self.identity, "identity")
        check_flag(self.normalize, "normalize")
        if self.learning_rate is None:
            saved, self.learning_rate = self.learning_rate, 1.0  # checked when resolved
            try:
                super()._check_params()
            finally:
                self.learning_rate = saved
        else:
            super()._check_params()

    def fit(
        self,
        X,
        user_features: FeaturesLike = None,
        item_features: FeaturesLike = None,
        validation=None,
        callbacks: Sequence[Callback] = (),
        progress: Optional[Progress] = None,
        user_ids: Optional[Sequence] = None,
        item_ids: Optional[Sequence] = None,
    ) -> "HybridWARP":
        """Fit on a users x items matrix with optional user and item features.

        Parameters
        ----------
        X : Interactions or sparse matrix
            Every stored entry is a positive.
        user_features, item_features : path or DataFrame, optional
            Feature files (``id<TAB>feature[<TAB>weight]``) or tables with columns ``id``,
            ``feature`` and optionally ``weight``. Ids absent from ``X`` are kept for cold
            start; ids of ``X`` without a row have their identity feature only.
        validation, callbacks, progress, user_ids, item_ids
            As for :meth:`WARP.fit`.
        """
        self._pending_tables = (as_feature_table(user_features, "user"), as_feature_table(item_features, "item"))
        self._pending_sources = tuple(str(f) if isinstance(f, (str, bytes)) or hasattr(f, "__fspath__") else None
                                      for f in (user_features, item_features))
        self._progress_for_features = progress or (Progress(verbose=True) if self.verbose else SILENT)
        try:
            return super().fit(X, validation=validation, callbacks=callbacks, progress=progress,
                               user_ids=user_ids, item_ids=item_ids)
        finally:
            for name in ("_pending_tables", "_pending_sources", "_progress_for_features"):
                self.__dict__.pop(name, None)

    def _set_training_data(self, X) -> sp.csr_matrix:
        csr = super()._set_training_data(X)
        user_table, item_table = getattr(self, "_pending_tables", (None, None))
        sources = getattr(self, "_pending_sources", (None, None))
        progress = getattr(self, "_progress_for_features", SILENT)
        sides = []
        for kind, ids, table, source in (("user", self.user_ids, user_table, sources[0]),
                                         ("item", self.item_ids, item_table, sources[1])):
            if table is not None:
                check_ids_match(table, ids, kind, source)
            side, info = build_side(ids, table, bool(self.identity))
            if table is not None:
                progress.log(
                    f"{kind} features: {info['features']} features on {len(ids) - info['ids_without_features']} of "
                    f"{len(ids)} training {kind}s ({info['ids_without_features']} with identity only); "
                    f"{info['new_ids']} new {kind}s kept for cold start"
                    + (f"; {info['rows_with_unknown_features']} rows of new {kind}s name features no training "
                       f"{kind} has (ignored)" if info["rows_with_unknown_features"] else "")
                )
            if not self.identity:
                bare = int((np.diff(side.raw.indptr) == 0).sum())
                if bare:
                    progress.log(f"warning: {bare} {kind}s have no features and no identity: they score as zero")
            sides.append(side)
        self._users, self._items = sides
        self._refresh_weights()
        return csr

    def _step_scales(self) -> Dict[str, float]:
        """Without normalisation an identity weight above 1 multiplies each step of its id."""
        w = float(self.identity_weight)
        return {"identity_weight": w} if not self.normalize and w > 1 else {}

    def _refresh_weights(self) -> None:
        """Normalised feature rows and their fast-path columns, from the sides."""
        slot = bool(self.identity)
        w = float(self.identity_weight)
        overflow = InputError(f"`identity_weight={w:g}` makes feature weights infinite in float32",
                              hint="lower `identity_weight`, e.g. `identity_weight=2`")
        # float32 weights: an identity weight beyond 3.4e38 is infinite, and every score it
        # touches NaN: a model that trains, saves and then ranks nothing
        if not w <= float(np.finfo(np.float32).max):
            raise overflow
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused just below
            self._uw = self._users.weights(bool(self.normalize), slot, w)
            self._iw = self._items.weights(bool(self.normalize), slot, w)
        if not (np.isfinite(self._uw.data).all() and np.isfinite(self._iw.data).all()):
            raise overflow
        self._ib = self._iw  # item biases weighted like the embeddings
        self._ib_data = np.zeros(0, np.float32)  # (empty: the kernel uses the embedding weights)
        self._u_single = _hybrid.single_columns(self._uw.indptr, self._uw.indices, self._uw.data)
        self._i_single = _hybrid.single_columns(self._iw.indptr, self._iw.indices, self._iw.data, self._ib_data)
        self._uw_arrays = csr_arrays(self._uw)
        self._iw_arrays = csr_arrays(self._iw)
        self._cache = None

    def _factor_rows(self, n_users: int, n_items: int) -> int:
        """Embedding rows: one per user and item feature column (identities included)."""
        return int(self._users.n_columns) + int(self._items.n_columns)

    def _init_state(self, n_users: int, n_items: int, seed_rng: np.random.Generator) -> None:
        d = int(self.factors)
        scale = np.float32(self.init_scale / np.sqrt(d))
        us, its = self._users, self._items
        n_uid, n_iid = us.n_columns - us.n_content, its.n_columns - its.n_content
        # Identity rows are drawn first, in WARP's order (users, items, then the sampler's
        # seed), so that without feature files the model starts exactly where WARP does.
        user_id = seed_rng.standard_normal((n_uid, d), dtype=np.float32) * scale
        item_id = seed_rng.standard_normal((n_iid, d), dtype=np.float32) * scale
        self._rng_state = _rng.seed_state(spawn_seed(seed_rng))
        user_content = seed_rng.standard_normal((us.n_content, d), dtype=np.float32) * scale
        item_content = seed_rng.standard_normal((its.n_content, d), dtype=np.float32) * scale
        self.user_embeddings_ = np.ascontiguousarray(np.vstack([user_content, user_id]))
        self.item_embeddings_ = np.ascontiguousarray(np.vstack([item_content, item_id]))
        self.item_feature_bias_ = np.zeros(its.n_columns, dtype=np.float32)
        self._user_accum = np.ones_like(self.user_embeddings_)
        self._item_accum = np.ones_like(self.item_embeddings_)
        self._bias_accum = np.ones_like(self.item_feature_bias_)
        self.epochs_done_ = 0
        self._cache = None

    def _snapshot(self) -> Tuple[np.ndarray, ...]:
        return (self.user_embeddings_.copy(), self.item_embeddings_.copy(), self.item_feature_bias_.copy())

    def _restore(self, snap: Tuple[np.ndarray, ...]) -> None:
        self.user_embeddings_, self.item_embeddings_, self.item_feature_bias_ = snap
        self._cache = None

    def _fit_shard(self, data, start, stop, state, cfg):
        self._cache = None  # representations change under the kernel
        return _hybrid.fit_shard(
            self.user_embeddings_, self.item_embeddings_, self.item_feature_bias_,
            self._user_accum, self._item_accum, self._bias_accum,
            *self._uw_arrays, self._u_single, *self._iw_arrays, self._ib_data, self._i_single,
            data.indptr, data.indices, data.pos_users, data.order,
            start, stop, data.rank_weights, state, cfg, n_item_content=self._items.n_content,
        )

    def _learned_arrays(self) -> Tuple[np.ndarray, ...]:
        return (self.user_embeddings_, self.item_embeddings_, self.item_feature_bias_)

    # -- representations and scoring -----------------------------------------------------------
    def _representations(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(user factors, item factors, item biases), computed once per change of the model."""
        cache = self._cache
        if cache is None:
            self._check_fitted()
            users = np.ascontiguousarray(self._uw @ self.user_embeddings_, dtype=np.float32)
            items = np.ascontiguousarray(self._iw @ self.item_embeddings_, dtype=np.float32)
            bias = np.asarray(self._ib @ self.item_feature_bias_, dtype=np.float32).ravel()
            cache = self._cache = (users, items, bias)
        return cache

    @property
    def user_factors_(self) -> np.ndarray:
        """Each user's representation ``p_u`` (n_users, factors)."""
        if getattr(self, "user_embeddings_", None) is None:
            raise AttributeError("user_factors_")
        return self._representations()[0]

    @property
    def item_factors_(self) -> np.ndarray:
        """Each item's representation ``q_i`` (n_items, factors)."""
        if getattr(self, "item_embeddings_", None) is None:
            raise AttributeError("item_factors_")
        return self._representations()[1]

    @property
    def item_bias_(self) -> np.ndarray:
        """Each item's bias ``b_i`` (n_items,)."""
        if getattr(self, "item_feature_bias_", None) is None:
            raise AttributeError("item_bias_")
        return self._representations()[2]

    def score_users(self, users: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
        users_f, items_f, bias = self._representations()
        return factor_scores(users_f[np.asarray(users)], items_f, bias if self.item_bias else None, out)

    @property
    def user_feature_names(self) -> np.ndarray:
        """Content features of users (columns of the user embedding table, before identities)."""
        return self._users.names

    @property
    def item_feature_names(self) -> np.ndarray:
        """Content features of items (columns of the item embedding table, before identities)."""
        return self._items.names

    @property
    def new_user_ids(self) -> np.ndarray:
        """Users known by their features only, kept for :meth:`with_new_users` / :meth:`fold_in`."""
        return self._users.new_ids

    def featureless_users(self) -> np.ndarray:
        """Boolean mask over users: those with no feature the model knows (and no identity).

        They have no representation of their own, so they get the model's non-personal
        ranking (item biases); e.g. users added by :meth:`with_new_users` whose features
        all came after training.
        """
        return self._uw.getnnz(axis=1) == 0

    @property
    def new_item_ids(self) -> np.ndarray:
        """Items known by their features only, kept for :meth:`with_new_items`."""
        return self._items.new_ids

    def feature_embeddings(self, kind: str = "item") -> pd.DataFrame:
        """Content feature embeddings (and item feature biases) as a table indexed by name."""
        side, emb = (self._items, self.item_embeddings_) if kind == "item" else (self._users, self.user_embeddings_)
        frame = pd.DataFrame(emb[:side.n_content], index=pd.Index(side.names, name="feature"))
        if kind == "item":
            frame.insert(0, "bias", self.item_feature_bias_[:side.n_content])
        return frame

    # -- new ids ------------------------------------------------------------------------------
    def with_new_items(self, item_features: FeaturesLike = None, only: bool = False) -> "HybridWARP":
        """A copy whose catalogue also holds items known only by their features.

        Parameters
        ----------
        item_features : path or DataFrame, optional
            Features of new items (ids of trained items in it are ignored: a trained item
            keeps its trained representation). Without it, the new items whose features
            were given to :meth:`fit` are used.
        only : bool
            Keep only the new items in the copy's catalogue (to rank new items among
            themselves, as a cold-start evaluation does).

        Returns
        -------
        HybridWARP
            Shares the trained arrays; recommends, scores and saves like any model. New
            items sit after the trained ones (or alone) in ``item_ids`` and are never in a
            user's training row. Feature names the model never saw are ignored.
        """
        self._check_fitted()
        table = as_feature_table(item_features, "item")
        ids = self._new_ids(self._items, self.item_ids, table)
        ids, raw = self._items.take_new(ids, table)
        keep = np.diff(raw.indptr) > 0  # an item with no known feature cannot be scored
        ids, raw = ids[keep], raw[keep]
        model = copy.copy(self)
        side = copy.copy(self._items)
        rest = pd.Index(ids).get_indexer(side.new_ids) < 0
        side.new_ids, side.new_raw = side.new_ids[rest], side.new_raw[rest]
        no_identity = np.full(len(ids), -1, dtype=np.int64)
        if only:
            side.raw, side.identity = raw, no_identity
            model.item_ids = ids
            model.train_ = sp.csr_matrix(self.train_.shape[:1] + (len(ids),), dtype=np.float32)
        else:
            side.raw = sp.vstack([side.raw, raw], format="csr")
            side.identity = np.concatenate([side.identity, no_identity])
            model.item_ids = np.concatenate([self.item_ids, ids])
            model.train_ = sp.csr_matrix((self.train_.data, self.train_.indices, self.train_.indptr),
                                         shape=(self.n_users, len(model.item_ids)))
        model._items = side
        model._interactions_cache = None
        model._refresh_weights()
        return model

    def with_new_users(self, user_features: FeaturesLike = None) -> "HybridWARP":
        """A copy that also knows users by their features only (no history).

        Parameters
        ----------
        user_features : path or DataFrame, optional
            Features of new users (ids of trained users in it are ignored). Without it, the
            new users whose features were given to :meth:`fit` are used.

        Returns
        -------
        HybridWARP
            New users are appended to ``user_ids`` with empty training rows; their
            representation is the weighted sum of their features' embeddings.
        """
        self._check_fitted()
        table = as_feature_table(user_features, "user")
        ids = self._new_ids(self._users, self.user_ids, table)
        model = copy.copy(self)
        model._append_users(ids, table)  # replaces, never mutates, what the copy shares
        return model

    @staticmethod
    def _new_ids(side: FeatureSide, known: np.ndarray, table: Optional[pd.DataFrame]) -> np.ndarray:
        if table is None:
            return side.new_ids.copy()
        ids = np.asarray(pd.unique(table["id"].to_numpy()), dtype=str)
        return ids[pd.Index(known).get_indexer(ids) < 0]

    # -- fold-in hooks (see mrec_warp.models.foldin) ------------------------------------------------
    def fold_in(self, history, user_features: FeaturesLike = None, epochs: Optional[int] = None,
                progress: Optional[Progress] = None, user_ids: Optional[Sequence] = None) -> "HybridWARP":
        """Add users from a short history without refitting (in place; returns ``self``).

        Each user of ``history`` gets an identity embedding (a new one, starting at zero,
        for new users) fitted with ``epochs`` WARP passes over their history (default
        :data:`~mrec_warp.models.foldin.FOLD_IN_EPOCHS`) against the fixed item
        representations; their other features stay as trained. New users take their features from ``user_features``, else from the
        features kept at :meth:`fit`, else they have their identity only. Known users are
        refined from their training items plus the history. Every history item joins the
        user's training row, so it is excluded from their recommendations.
        """
        return fold_in(self, history, epochs=epochs, user_features=user_features, progress=progress,
                       user_ids=user_ids)

    def _append_users(self, ids: np.ndarray, user_features: FeaturesLike = None) -> None:
        """Append users (empty training rows) with their features; attributes are replaced,
        not changed in place, so a shallow copy of the model can call this safely."""
        table = as_feature_table(user_features, "user")
        ids, raw = self._users.take_new(np.asarray(ids, dtype=str), table)
        side = copy.copy(self._users)
        rest = pd.Index(ids).get_indexer(side.new_ids) < 0
        side.new_ids, side.new_raw = side.new_ids[rest], side.new_raw[rest]
        side.raw = sp.vstack([side.raw, raw], format="csr")
        side.identity = np.concatenate([side.identity, np.full(len(ids), -1, dtype=np.int64)])
        self._users = side
        self.user_ids = np.concatenate([self.user_ids, ids])
        self.train_ = _append_empty_rows(self.train_, len(ids))
        self._interactions_cache = None
        self._refresh_weights()

    def _give_identities(self, users: np.ndarray) -> None:
        """Identity columns (zero embeddings) for those of ``users`` that have none."""
        side = self._users
        lacking = users[side.identity[users] < 0]
        if len(lacking) == 0:
            return
        side = copy.copy(side)
        side.identity = side.identity.copy()
        side.identity[lacking] = side.n_columns + np.arange(len(lacking))
        side.n_columns += len(lacking)
        d = self.user_embeddings_.shape[1]
        self.user_embeddings_ = np.vstack([self.user_embeddings_, np.zeros((len(lacking), d), np.float32)])
        if getattr(self, "_user_accum", None) is not None:
            self._user_accum = np.vstack([self._user_accum, np.ones((len(lacking), d), np.float32)])
        self._users = side
        self._refresh_weights()

    def _history_vector(self, items: np.ndarray) -> np.ndarray:
        """The vector :meth:`fold_in` fits for a new user without features whose history is
        ``items`` (sorted unique indices), the model unchanged (:func:`.single_user.recommend_history`)."""
        if not self.identity:
            raise InputError("a hybrid model without identities cannot fold in a history",
                             hint="train it with identities (the default) to fold in new users")
        return warp_vector(self, items, scale=anonymous_weight(self))

    def _fold_in_problem(self, users: np.ndarray):
        self._give_identities(users)
        users_f, items_f, bias = self._representations()
        cols = self._users.identity[users]
        scale = np.asarray(self._uw[users, cols]).ravel().astype(np.float32)
        rows = self.user_embeddings_[cols].copy()
        offset = np.ascontiguousarray(users_f[users] - scale[:, None] * rows, dtype=np.float32)
        return rows, offset, scale, items_f, bias

    def _fold_in_store(self, users: np.ndarray, rows: np.ndarray) -> None:
        self.user_embeddings_[self._users.identity[users]] = rows
        self._cache = None

    # -- persistence ---------------------------------------------------------------------------
    def _get_arrays(self) -> Dict[str, np.ndarray]:
        out = {"user_embeddings": self.user_embeddings_, "item_embeddings": self.item_embeddings_,
               "item_feature_bias": self.item_feature_bias_}
        for kind, side in (("user", self._users), ("item", self._items)):
            out[f"{kind}_feature_names"] = side.names.astype(str)
            out[f"{kind}_identity"] = side.identity.astype(np.int64)
            out[f"new_{kind}_ids"] = side.new_ids.astype(str)
            for prefix, m in ((f"{kind}_raw", side.raw), (f"new_{kind}_raw", side.new_raw)):
                out[f"{prefix}_indptr"], out[f"{prefix}_indices"], out[f"{prefix}_data"] = csr_arrays(m)
        return out

    @classmethod
    def _array_spec(cls, params: Dict[str, Any], n_users: int, n_items: int) -> Dict[str, Tuple[str, Tuple]]:
        """Kind and shape of each saved array (``None``: any size), checked before loading."""
        d = params.get("factors")
        spec = {"user_embeddings": ("f4", (None, d)), "item_embeddings": ("f4", (None, d)),
                "item_feature_bias": ("f4", (None,))}
        for kind, n in (("user", n_users), ("item", n_items)):
            spec[f"{kind}_feature_names"] = ("U", (None,))
            spec[f"{kind}_identity"] = ("iu", (n,))
            spec[f"new_{kind}_ids"] = ("U", (None,))
            for prefix, rows in ((f"{kind}_raw", n), (f"new_{kind}_raw", None)):
                spec[f"{prefix}_indptr"] = ("iu", (None if rows is None else rows + 1,))
                spec[f"{prefix}_indices"] = ("iu", (None,))
                spec[f"{prefix}_data"] = ("f", (None,))
        return spec

    def _set_arrays(self, arrays: Dict[str, np.ndarray]) -> None:
        ue = np.ascontiguousarray(arrays["user_embeddings"], dtype=np.float32)
        ie = np.ascontiguousarray(arrays["item_embeddings"], dtype=np.float32)
        ib = np.ascontiguousarray(arrays["item_feature_bias"], dtype=np.float32)
        if ue.ndim != 2 or ie.ndim != 2 or ue.shape[1] != ie.shape[1]:
            raise ValueError("embedding shapes are inconsistent")
        check_shape(ib, (ie.shape[0],), "item feature biases")
        for arr, what in ((ue, "user embeddings"), (ie, "item embeddings"), (ib, "item feature biases")):
            check_finite(arr, what)
        sides = []
        for kind, n, emb in (("user", self.n_users, ue), ("item", self.n_items, ie)):
            names = np.asarray(arrays[f"{kind}_feature_names"])
            new_ids = np.asarray(arrays[f"new_{kind}_ids"])
            check_ids(names, f"{kind} feature names")
            check_ids(new_ids, f"new {kind} ids")
            identity = np.ascontiguousarray(arrays[f"{kind}_identity"], dtype=np.int64)
            raw = read_csr(arrays, f"{kind}_raw", (n, len(names)))
            new_raw = read_csr(arrays, f"new_{kind}_raw", (len(new_ids), len(names)))
            if identity.shape != (n,) or emb.shape[0] < len(names) or (identity < -1).any() \
                    or (identity >= emb.shape[0]).any() or ((identity >= 0) & (identity < len(names))).any():
                raise ValueError(f"{kind} identity columns do not match the embeddings")
            sides.append(FeatureSide(names, raw, identity, emb.shape[0], new_ids, new_raw))
        self._users, self._items = sides
        self.user_embeddings_, self.item_embeddings_, self.item_feature_bias_ = ue, ie, ib
        self._refresh_weights()

