"""Hybrid WARP: users and items represented by the embeddings of their features.

A user is the weighted sum of its features' embeddings, an item likewise (plus a bias per
item feature), and the model is trained, early-stopped, refitted and folded in exactly as
:class:`~mrec_warp.models.warp.WARP` is; the per-interaction work is in
:mod:`mrec_warp.kernels.hybrid`. This module holds what the features add: each side's
vocabulary, weights and identity columns (:class:`FeatureSide`), the weighted rows the model
scores with (:func:`weighted_rows`), the ids known only by their features (cold start:
:meth:`HybridWARP.with_new_items`, :meth:`HybridWARP.with_new_users`, fold-in of new users)
and the sides' arrays in a model file.

**Feature weights.** Feature tables come from :mod:`mrec_warp.data.features` (one row per
id, feature, weight). Each id's row holds its content features and, unless
``identity=False``, an identity feature of its own with weight 2 (``identity_weight``).
Normalisation (on by default) then scales every row to unit Euclidean length: an item with
its identity and two genres of weight 1 has weights ``2/sqrt(6)`` = 0.82 and
``1/sqrt(6)`` = 0.41 each; an id with no feature row has its identity only (weight 1). Ids
without an identity (new users or items, known by their features only) are normalised as
if their identity were there with a zero embedding, so they carry exactly the weights a
trained id with the same features has, and old and new ids can be ranked together.

Why this rule. Euclidean rather than sum-to-1 rows keep the information in *how many*
features an id has -- the total weight of its features grows with their number -- which
matters for new ids (on MovieLens, films with more genres are more popular; sum-to-1 rows
halve the precision on new films). The identity's weight of 2 keeps an id's own embedding
the larger part of its representation for up to four unit-weight features, so trained ids
still learn their own taste at a useful speed (with weight 1, a user with three
demographic features has only a quarter of each step go to their own embedding).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..data.features import FeaturesLike, as_feature_table, check_ids_match
from ..data.npz import check_finite, check_ids, check_shape, csr_arrays, read_csr
from ..errors import InputError
from ..kernels import hybrid as _hybrid
from ..kernels import rng as _rng
from ..progress import SILENT, Progress
from ..seeds import spawn_seed
from .declared import Param, init_signature, with_params
from .foldin import append_empty_rows
from .base import Recommender
from .warp import WARP, Callback


# -- one side's features and their weights -----------------------------------------------------------
def feature_names(table: Optional[pd.DataFrame]) -> np.ndarray:
    """Content feature vocabulary, in order of first appearance."""
    if table is None or len(table) == 0:
        return np.zeros(0, dtype=str)
    return np.asarray(pd.unique(table["feature"].to_numpy()), dtype=str)


def raw_rows(ids: np.ndarray, table: Optional[pd.DataFrame], names: np.ndarray) -> Tuple[sp.csr_matrix, int]:
    """Raw content weights of ``ids`` over ``names``: (len(ids) x len(names)) CSR, float32.

    Table rows of other ids are ignored; rows naming a feature outside ``names`` are
    dropped and counted (the second value returned).
    """
    ids = np.asarray(ids, dtype=str)
    rows = cols = np.zeros(0, np.int64)
    vals = np.zeros(0, np.float32)
    n_unknown = 0
    if table is not None and len(table) and len(ids):
        r = pd.Index(ids).get_indexer(table["id"].to_numpy())
        c = pd.Index(names).get_indexer(table["feature"].to_numpy()) if len(names) else np.full(len(table), -1)
        n_unknown = int(((r >= 0) & (c < 0)).sum())
        ok = (r >= 0) & (c >= 0)
        rows, cols, vals = r[ok], c[ok], table["weight"].to_numpy(dtype=np.float32)[ok]
    matrix = sp.csr_matrix((vals, (rows, cols)), shape=(len(ids), len(names)), dtype=np.float32)
    matrix.sum_duplicates()
    matrix.sort_indices()
    return matrix, n_unknown


def weighted_rows(
    raw: sp.csr_matrix,
    identity: np.ndarray,
    n_columns: int,
    normalize: bool = True,
    identity_slot: bool = True,
    identity_weight: float = 2.0,
) -> sp.csr_matrix:
    """The rows a model scores with: raw content weights plus identities, normalised.

    Parameters
    ----------
    raw : csr_matrix (n, n_content)
        Content feature weights (columns ``0 .. n_content - 1``).
    identity : int array (n,)
        Column of each row's identity feature, -1 for none.
    n_columns : int
        Width of the result (content columns plus every identity column of the model).
    normalize : bool
        Scale each row to unit Euclidean length (identity included).
    identity_slot : bool
        When normalising a row without identity, count an identity of weight 1 anyway: the
        row gets the weights a trained id with the same features has (as if its identity
        embedding were zero), so new and trained ids are on one scale. Set for models whose
        ids have identities; a model without them normalises content alone.
    identity_weight : float
        Weight of the identity feature before normalisation (content features keep theirs).
    """
    identity = np.asarray(identity, dtype=np.int64)
    n = raw.shape[0]
    coo = raw.tocoo()
    have = identity >= 0
    rows = np.concatenate([coo.row.astype(np.int64), np.flatnonzero(have)])
    cols = np.concatenate([coo.col.astype(np.int64), identity[have]])
    vals = np.concatenate([coo.data.astype(np.float32), np.full(int(have.sum()), identity_weight, np.float32)])
    if normalize:
        squares = np.bincount(rows, weights=vals.astype(np.float64) ** 2, minlength=n).astype(np.float64)
        if identity_slot:
            squares = squares + (~have) * float(identity_weight) ** 2  # the missing identity
        scale = np.divide(1.0, np.sqrt(squares), out=np.zeros_like(squares), where=squares > 0)
        vals = (vals * scale[rows]).astype(np.float32)
    matrix = sp.csr_matrix((vals, (rows, cols)), shape=(n, int(n_columns)), dtype=np.float32)
    matrix.sum_duplicates()
    matrix.sort_indices()
    return matrix


@dataclass
class FeatureSide:
    """The features of one side (users or items) of a fitted model.

    Columns of the embedding table: content features ``0 .. len(names) - 1``, then one
    identity column per id that has one (appended in the order ids were added, so ids
    added after training never renumber anything).
    """

    names: np.ndarray  # content feature names
    raw: sp.csr_matrix  # (n_ids, n_content) raw content weights
    identity: np.ndarray  # (n_ids,) identity column of each id, -1 for none
    n_columns: int  # rows of the embedding table
    new_ids: np.ndarray  # ids known only by their features (not in training)
    new_raw: sp.csr_matrix  # (n_new, n_content) their raw content weights

    @property
    def n_content(self) -> int:
        return len(self.names)

    def weights(self, normalize: bool, identity_slot: bool, identity_weight: float) -> sp.csr_matrix:
        return weighted_rows(self.raw, self.identity, self.n_columns, normalize, identity_slot, identity_weight)

    def take_new(self, ids: np.ndarray, table: Optional[pd.DataFrame]) -> Tuple[np.ndarray, sp.csr_matrix]:
        """Raw rows of ``ids``: from ``table`` when it has them, else from the kept features."""
        raw, _ = raw_rows(ids, table, self.names)
        kept = pd.Index(self.new_ids).get_indexer(ids)
        fill = (np.diff(raw.indptr) == 0) & (kept >= 0)
        if fill.any():
            lil = raw.tolil()
            lil[np.flatnonzero(fill)] = self.new_raw[kept[fill]]
            raw = lil.tocsr()
            raw.sort_indices()
        return ids, raw

    def unknown_ids(self, known: np.ndarray, table: Optional[pd.DataFrame]) -> np.ndarray:
        """The ids of ``table`` not in ``known`` (the trained ids), or without a table the ids
        kept as new at training."""
        if table is None:
            return self.new_ids.copy()
        ids = np.asarray(pd.unique(table["id"].to_numpy()), dtype=str)
        return ids[pd.Index(known).get_indexer(ids) < 0]

    def added(self, ids: np.ndarray, raw: sp.csr_matrix, only: bool = False) -> "FeatureSide":
        """A copy with the rows ``raw`` of ``ids`` (no identities) after its own rows -- or
        instead of them, ``only`` -- and those ids no longer kept as new. Nothing of this
        side changes: a shallow copy of a model may share it."""
        side = copy.copy(self)
        rest = pd.Index(ids).get_indexer(side.new_ids) < 0
        side.new_ids, side.new_raw = side.new_ids[rest], side.new_raw[rest]
        no_identity = np.full(len(ids), -1, dtype=np.int64)
        side.raw = raw if only else sp.vstack([side.raw, raw], format="csr")
        side.identity = no_identity if only else np.concatenate([side.identity, no_identity])
        return side

    def with_identities(self, rows: np.ndarray) -> "FeatureSide":
        """A copy that gives ``rows`` (ids without an identity) new identity columns, after the
        last column (their embeddings are the caller's to append)."""
        side = copy.copy(self)
        side.identity = side.identity.copy()
        side.identity[rows] = side.n_columns + np.arange(len(rows))
        side.n_columns += len(rows)
        return side


def sides_weights(sides: Tuple[FeatureSide, FeatureSide], normalize: bool, identity: bool,
                  identity_weight: float) -> Tuple[sp.csr_matrix, sp.csr_matrix]:
    """The (users, items) weighted feature rows of a model (:meth:`FeatureSide.weights`);
    an :class:`InputError` naming ``identity_weight`` when they overflow float32."""
    w = identity_weight
    overflow = InputError(f"`identity_weight={w:g}` makes feature weights infinite in float32",
                          hint="lower `identity_weight`, e.g. `identity_weight=2`")
    # float32 weights: an identity weight beyond 3.4e38 is infinite, and every score it
    # touches NaN: a model that trains, saves and then ranks nothing
    if not w <= float(np.finfo(np.float32).max):
        raise overflow
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused just below
        weights = tuple(side.weights(normalize, identity, w) for side in sides)
    if not all(np.isfinite(m.data).all() for m in weights):
        raise overflow
    return weights[0], weights[1]


def describe_side(kind: str, n_ids: int, info: Dict[str, int]) -> str:
    """The log line of one side's features, from :func:`build_side`'s ``info``."""
    unknown = info["rows_with_unknown_features"]
    return (f"{kind} features: {info['features']} features on {n_ids - info['ids_without_features']} of "
            f"{n_ids} training {kind}s ({info['ids_without_features']} with identity only); "
            f"{info['new_ids']} new {kind}s kept for cold start"
            + (f"; {unknown} rows of new {kind}s name features no training {kind} has (ignored)" if unknown else ""))


def build_side(ids: np.ndarray, table: Optional[pd.DataFrame], identity: bool) -> Tuple[FeatureSide, Dict[str, int]]:
    """Content vocabulary, raw rows and identity columns of the training ids of one side.

    The vocabulary is the features of training ids only: a feature seen only on new ids
    would never get a gradient, so its embedding would be noise.
    """
    ids = np.asarray(ids, dtype=str)
    info = {"rows": 0, "features": 0, "ids_without_features": len(ids), "new_ids": 0,
            "new_ids_without_known_features": 0, "rows_with_unknown_features": 0}
    names = np.zeros(0, dtype=str)
    new_ids = np.zeros(0, dtype=str)
    if table is not None:
        in_train = pd.Index(ids).get_indexer(table["id"].to_numpy()) >= 0
        names = feature_names(table[in_train])
        info["rows"] = len(table)
    raw, _ = raw_rows(ids, table, names)
    info["features"] = len(names)
    info["ids_without_features"] = int((np.diff(raw.indptr) == 0).sum())
    if table is not None:
        other = table[pd.Index(ids).get_indexer(table["id"].to_numpy()) < 0]
        new_ids = np.asarray(pd.unique(other["id"].to_numpy()), dtype=str)
    new_raw, n_unknown = raw_rows(new_ids, table, names)
    has = np.diff(new_raw.indptr) > 0
    info["new_ids_without_known_features"] = int((~has).sum())
    info["rows_with_unknown_features"] = n_unknown
    new_ids, new_raw = new_ids[has], new_raw[has]
    info["new_ids"] = len(new_ids)
    n = len(ids)
    ident = (len(names) + np.arange(n)) if identity else np.full(n, -1)
    side = FeatureSide(names, raw, ident.astype(np.int64), len(names) + (n if identity else 0), new_ids, new_raw)
    return side, info


# -- the sides in a model file -------------------------------------------------------------------
def sides_arrays(users: FeatureSide, items: FeatureSide) -> Dict[str, np.ndarray]:
    """The arrays a model file holds for the two sides (names, identities, raw weights, new ids)."""
    out = {}
    for kind, side in (("user", users), ("item", items)):
        out[f"{kind}_feature_names"] = side.names.astype(str)
        out[f"{kind}_identity"] = side.identity.astype(np.int64)
        out[f"new_{kind}_ids"] = side.new_ids.astype(str)
        for prefix, m in ((f"{kind}_raw", side.raw), (f"new_{kind}_raw", side.new_raw)):
            out[f"{prefix}_indptr"], out[f"{prefix}_indices"], out[f"{prefix}_data"] = csr_arrays(m)
    return out


def sides_spec(n_users: int, n_items: int) -> Dict[str, Tuple[str, Tuple]]:
    """Kind and shape of each array of :func:`sides_arrays` (``None``: any size)."""
    spec: Dict[str, Tuple[str, Tuple]] = {}
    for kind, n in (("user", n_users), ("item", n_items)):
        spec[f"{kind}_feature_names"] = ("U", (None,))
        spec[f"{kind}_identity"] = ("iu", (n,))
        spec[f"new_{kind}_ids"] = ("U", (None,))
        for prefix, rows in ((f"{kind}_raw", n), (f"new_{kind}_raw", None)):
            spec[f"{prefix}_indptr"] = ("iu", (None if rows is None else rows + 1,))
            spec[f"{prefix}_indices"] = ("iu", (None,))
            spec[f"{prefix}_data"] = ("f", (None,))
    return spec


def read_sides(arrays: Dict[str, np.ndarray], n_ids: Tuple[int, int],
               n_columns: Tuple[int, int]) -> Tuple[FeatureSide, FeatureSide]:
    """The (users, items) sides of a model file's arrays, for ``n_ids`` users and items whose
    embedding tables have ``n_columns`` rows; ``ValueError`` for what does not fit together."""
    sides = []
    for kind, n, columns in (("user", n_ids[0], n_columns[0]), ("item", n_ids[1], n_columns[1])):
        names = np.asarray(arrays[f"{kind}_feature_names"])
        new_ids = np.asarray(arrays[f"new_{kind}_ids"])
        check_ids(names, f"{kind} feature names")
        check_ids(new_ids, f"new {kind} ids")
        identity = np.ascontiguousarray(arrays[f"{kind}_identity"], dtype=np.int64)
        raw = read_csr(arrays, f"{kind}_raw", (n, len(names)))
        new_raw = read_csr(arrays, f"new_{kind}_raw", (len(new_ids), len(names)))
        if identity.shape != (n,) or columns < len(names) or (identity < -1).any() \
                or (identity >= columns).any() or ((identity >= 0) & (identity < len(names))).any():
            raise ValueError(f"{kind} identity columns do not match the embeddings")
        sides.append(FeatureSide(names, raw, identity, columns, new_ids, new_raw))
    return sides[0], sides[1]


# -- the model ------------------------------------------------------------------------------------------
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
    with a short history are added without refitting by :meth:`fold_in` (WARP's): each gets
    its identity embedding (a new one, from zero) fitted against the fixed items, its other
    features as trained; new users' features come from ``user_features``, else from ``fit``'s.

    Parameters
    ----------
    learning_rate : float or None
        Step size. ``None`` (default): 0.05 when users or items have content features, else
        WARP's default (0.02, so that without feature files the model is WARP with its
        defaults). Features call for a larger step because an id's own (identity)
        embedding receives only its weight squared (2/3 with two unit-weight features) of
        each step on its representation; the rest goes to feature rows shared with many
        ids, whose adagrad steps shrink quickly.
    late_rate : float or None
        As for :class:`WARP`. ``None`` (default): WARP's default without content features,
        so that the model is still WARP with its defaults; 1 (a constant rate) with them,
        where no schedule was measured.
    identity : bool
        Give every user and item its own identity feature (default). Without it, users
        and items are their features alone.
    identity_weight : float
        Weight of an id's identity feature before normalisation (content features keep the
        weights of the feature files); 2 keeps an id's own embedding the larger part of its
        representation for up to four unit-weight features.
    normalize : bool
        Scale each id's feature weights, identity included, to unit Euclidean length
        (default); see the module's description for the rule and why.
    factors, loss, learning_schedule, decay, late_rate_epoch, user_reg, item_reg, max_sampled, \
user_max_norm, item_max_norm, kos_k, kos_n, item_bias, epochs, max_epochs, patience, eval_every, eval_k, min_improvement, \
validation_fraction, validation_users, refit, warm_epochs, refit_reuse, init_scale, n_jobs, random_state, verbose
        As for :class:`WARP`; ``user_reg`` / ``item_reg`` and the norm limits apply to
        every feature embedding a step touches and ``item_bias`` learns one bias per item feature.
    """

    PARAMETERS = with_params(
        WARP.PARAMETERS, drop=("confidence", "alpha", "eps", "confidence_use"),
        replace=[Param("learning_rate", float, None, "Base step size.",
                       low=0, open=True, nullable=True, tune=("log", 0.007, 0.06),
                       shown="0.05 with features, else 0.02"),
                 Param("late_rate", float, None, "The rate after the first late_rate_epoch epochs, as a multiple "
                       "of learning_rate (1: a constant rate).", low=0, open=True,
                       nullable=True, shown="1 with features, else WARP's")],
        add=[Param("identity", bool, True, "Give every user and item its own identity feature."),
             Param("identity_weight", float, 2.0, "Weight of each id's identity feature before normalisation.",
                   low=0, open=True),
             Param("normalize", bool, True, "Scale each id's feature weights, identity included, to unit Euclidean "
                   "length.")])

    name = "hybrid"
    order = 70
    supports_confidence = False
    SCALING_PARAMETERS = ("identity_weight", "learning_rate")
    # feature weights fitted apart do not add up: the base's refusal, not WARP's merge
    merge_sub_models = Recommender.merge_sub_models
    LEARNED = ("user_embeddings_", "item_embeddings_", "item_feature_bias_")
    # the hybrid's own parameters, as attributes (set by __init__ from the declaration)
    identity: bool
    identity_weight: float
    normalize: bool

    def __init__(self, *args: Any, **params: Any) -> None:
        # The parameters are declared (PARAMETERS: WARP's, without a confidence, with
        # learning_rate=None, plus the hybrid's own), never re-listed: the signature is made
        # from the declaration below the class, and get_params, clone and model files read it.
        bound = _SIGNATURE.bind(self, *args, **params)  # the TypeError an explicit list would raise
        bound.apply_defaults()
        for name, value in list(bound.arguments.items())[1:]:
            setattr(self, name, value)

    #: The default step with content features (see ``learning_rate``).
    FEATURE_LEARNING_RATE = 0.05

    # -- training ------------------------------------------------------------------------------
    def _rates(self) -> Tuple[float, float]:
        """(learning rate, late rate): the parameters, or when ``None`` their defaults for the
        data. With content features ``FEATURE_LEARNING_RATE`` and a constant rate (WARP's
        schedule was chosen without features); without them WARP's defaults."""
        sides = (getattr(self, "_users", None), getattr(self, "_items", None))
        content = any(side is not None and side.n_content > 0 for side in sides)
        learning_rate, late_rate = self.learning_rate, self.late_rate
        if learning_rate is None:
            learning_rate = self.FEATURE_LEARNING_RATE if content else WARP().learning_rate
        if late_rate is None:
            late_rate = 1.0 if content else WARP().late_rate
        return float(learning_rate), float(late_rate)

    def fit(
        self,
        X,
        validation=None,
        callbacks: Sequence[Callback] = (),
        progress: Optional[Progress] = None,
        user_ids: Optional[Sequence] = None,
        item_ids: Optional[Sequence] = None,
        *,  # by name: WARP's parameters keep their places (a hybrid is fitted wherever WARP is)
        user_features: FeaturesLike = None,
        item_features: FeaturesLike = None,
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
        tables = (as_feature_table(user_features, "user"), as_feature_table(item_features, "item"))
        user_source, item_source = (str(f) if isinstance(f, (str, bytes)) or hasattr(f, "__fspath__") else None
                                    for f in (user_features, item_features))
        self.check_params()
        progress = progress or (Progress(verbose=True) if self.verbose else SILENT)
        X = self._with_ids(X, user_ids, item_ids)
        csr = self.set_training_data(X, tables, (user_source, item_source), progress)
        self._fit_prepared(csr, validation, callbacks, progress, warm_epochs=int(self.warm_epochs))
        return self

    def set_training_data(self, X, tables: Tuple[Optional[pd.DataFrame], Optional[pd.DataFrame]] = (None, None),
                          sources: Tuple[Optional[str], Optional[str]] = (None, None),
                          progress: Progress = SILENT) -> sp.csr_matrix:
        """The contract's :meth:`~mrec_warp.models.base.Recommender.set_training_data`, plus the
        feature sides built from the user and item feature ``tables`` (read from ``sources``)."""
        csr = super().set_training_data(X)
        user_table, item_table = tables
        sides = []
        for kind, ids, table, source in (("user", self.user_ids, user_table, sources[0]),
                                         ("item", self.item_ids, item_table, sources[1])):
            if table is not None:
                check_ids_match(table, ids, kind, source)
            side, info = build_side(ids, table, bool(self.identity))
            if table is not None:
                progress.log(describe_side(kind, len(ids), info))
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
        self._uw, self._iw = sides_weights((self._users, self._items), bool(self.normalize), bool(self.identity),
                                           float(self.identity_weight))
        self._ib = self._iw  # item biases weighted like the embeddings
        self._ib_data = np.zeros(0, np.float32)  # (empty: the kernel uses the embedding weights)
        self._u_single = _hybrid.single_columns(self._uw.indptr, self._uw.indices, self._uw.data)
        self._i_single = _hybrid.single_columns(self._iw.indptr, self._iw.indices, self._iw.data, self._ib_data)
        self._uw_arrays = csr_arrays(self._uw)
        self._iw_arrays = csr_arrays(self._iw)
        self._cache = None

    def factor_rows(self, n_users: int, n_items: int) -> int:
        """Embedding rows: one per user and item feature column (identities included)."""
        return int(self._users.n_columns) + int(self._items.n_columns)

    def init_state(self, n_users: int, n_items: int, seed_rng: np.random.Generator) -> None:
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

    def restore(self, snap: Tuple[np.ndarray, ...]) -> None:
        super().restore(snap)
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

    # -- representations and scoring -----------------------------------------------------------
    #: (user factors, item factors, item biases) of the current embeddings; ``None``: to compute.
    _cache: Optional[Tuple[np.ndarray, np.ndarray, np.ndarray]]

    def _representations(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(user factors, item factors, item biases), computed once per change of the model."""
        cache = self._cache
        if cache is None:
            self.check_fitted()
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

    @user_factors_.setter
    def user_factors_(self, value: np.ndarray) -> None:
        raise AttributeError("a hybrid's user factors are its features' embeddings: set user_embeddings_")

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

    @item_bias_.setter
    def item_bias_(self, value: np.ndarray) -> None:
        raise AttributeError("a hybrid's item biases are its features' biases: set item_feature_bias_")

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
        self.check_fitted()
        table = as_feature_table(item_features, "item")
        ids, raw = self._items.take_new(self._items.unknown_ids(self.item_ids, table), table)
        keep = np.diff(raw.indptr) > 0  # an item with no known feature cannot be scored
        ids, raw = ids[keep], raw[keep]
        model = copy.copy(self)
        model._items = self._items.added(ids, raw, only=only)
        model.item_ids = ids if only else np.concatenate([self.item_ids, ids])
        train = self.train_
        model.train_ = (sp.csr_matrix(train.shape[:1] + (len(ids),), dtype=np.float32) if only else
                        sp.csr_matrix((train.data, train.indices, train.indptr), shape=(self.n_users, model.n_items)))
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
        self.check_fitted()
        table = as_feature_table(user_features, "user")
        ids = self._users.unknown_ids(self.user_ids, table)
        model = copy.copy(self)
        model.append_users(ids, table)  # replaces, never mutates, what the copy shares
        return model

    # -- fold-in ---------------------------------------------------------------------------------
    def append_users(self, ids: np.ndarray, user_features: FeaturesLike = None) -> None:
        """Append users (empty training rows) with their features; attributes are replaced,
        not changed in place, so a shallow copy of the model can call this safely."""
        table = as_feature_table(user_features, "user")
        ids, raw = self._users.take_new(np.asarray(ids, dtype=str), table)
        self._users = self._users.added(ids, raw)
        self.user_ids = np.concatenate([self.user_ids, ids])
        self.train_ = append_empty_rows(self.train_, len(ids))
        self._refresh_weights()

    def _give_identities(self, users: np.ndarray) -> None:
        """Identity columns (zero embeddings) for those of ``users`` that have none."""
        lacking = users[self._users.identity[users] < 0]
        if len(lacking) == 0:
            return
        side = self._users.with_identities(lacking)
        d = self.user_embeddings_.shape[1]
        self.user_embeddings_ = np.vstack([self.user_embeddings_, np.zeros((len(lacking), d), np.float32)])
        if getattr(self, "_user_accum", None) is not None:
            self._user_accum = np.vstack([self._user_accum, np.ones((len(lacking), d), np.float32)])
        self._users = side
        self._refresh_weights()

    def history_vector(self, items: np.ndarray) -> np.ndarray:
        """The vector :meth:`fold_in` fits for a new user without features whose history is
        ``items`` (sorted unique indices), the model unchanged."""
        if not self.identity:
            raise InputError("a hybrid model without identities cannot fold in a history",
                             hint="train it with identities (the default) to fold in new users")
        return self._fold_in_vector(items, scale=self._anonymous_identity_weight())

    def _anonymous_identity_weight(self) -> float:
        """The weight the model gives the identity of a new user without features (what its
        fold-in scales that user's row by), found once on a shallow copy of the model."""
        key = (id(self._users), float(self.identity_weight), bool(self.normalize), bool(self.identity))
        cached = self.__dict__.get("_anonymous_weight")
        if cached is not None and cached[0] == key:
            return cached[1]
        probe = copy.copy(self)  # the hooks replace attributes, never change them in place
        name = "\x00anonymous"
        while name in self.id_map("user"):
            name += "_"
        probe.append_users(np.array([name]), None)
        user = np.array([probe.n_users - 1])
        probe._give_identities(user)
        if np.diff(probe._uw.indptr)[user[0]] != 1:  # features kept for this id: not anonymous after all
            raise RuntimeError("an anonymous user unexpectedly has features")
        weight = float(probe._uw[user[0], probe._users.identity[user[0]]])
        self.__dict__["_anonymous_weight"] = (key, weight)
        return weight

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

    # -- persistence ---------------------------------------------------------------------------------
    def get_arrays(self) -> Dict[str, np.ndarray]:
        return {"user_embeddings": self.user_embeddings_, "item_embeddings": self.item_embeddings_,
                "item_feature_bias": self.item_feature_bias_, **sides_arrays(self._users, self._items)}

    @classmethod
    def array_spec(cls, params: Dict[str, Any], n_users: int, n_items: int) -> Dict[str, Tuple[str, Tuple]]:
        d = params.get("factors")
        return {"user_embeddings": ("f4", (None, d)), "item_embeddings": ("f4", (None, d)),
                "item_feature_bias": ("f4", (None,)), **sides_spec(n_users, n_items)}

    def set_arrays(self, arrays: Dict[str, np.ndarray]) -> None:
        ue = np.ascontiguousarray(arrays["user_embeddings"], dtype=np.float32)
        ie = np.ascontiguousarray(arrays["item_embeddings"], dtype=np.float32)
        ib = np.ascontiguousarray(arrays["item_feature_bias"], dtype=np.float32)
        if ue.ndim != 2 or ie.ndim != 2 or ue.shape[1] != ie.shape[1]:
            raise ValueError("embedding shapes are inconsistent")
        check_shape(ib, (ie.shape[0],), "item feature biases")
        for arr, what in ((ue, "user embeddings"), (ie, "item embeddings"), (ib, "item feature biases")):
            check_finite(arr, what)
        self._users, self._items = read_sides(arrays, (self.n_users, self.n_items), (ue.shape[0], ie.shape[0]))
        self.user_embeddings_, self.item_embeddings_, self.item_feature_bias_ = ue, ie, ib
        self._refresh_weights()


_SIGNATURE = init_signature(HybridWARP.PARAMETERS)
HybridWARP.__init__.__signature__ = _SIGNATURE  # type: ignore[attr-defined]
