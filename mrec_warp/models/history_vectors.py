"""The list of an anonymous history without changing the model: the user vector fold-in would
give it (WARP's and the hybrid's SGD passes, WRMF's one least-squares solve against a cached
Gram matrix), then the one-user top-k of :mod:`.single_user`
(:meth:`~mrec_warp.models.base.Recommender.recommend_history`, ``POST /recommend``)."""
from __future__ import annotations

import copy
from typing import Optional, Tuple

import numpy as np

from ..errors import InputError
from ..kernels import als as _als
from ..kernels import hybrid as _hybrid
from ..kernels import rng as _rng
from ..kernels.topk import topk_masked
from ..seeds import spawn_seed
from ..topk import SCORE_ROWS
from ..workers import one_blas_thread
from .families import family_names
from .foldin import FOLD_IN_EPOCHS, FOLD_IN_SALT
from .positives import check_divergence
from .single_user import _NO_MASK, _NO_ROWS, item_side, top_k_vector


def history_row(model, items: np.ndarray) -> np.ndarray:
    """Item indices of a history as fold-in and exclusion read them: sorted, each once, int32."""
    return np.unique(np.asarray(items, dtype=np.int64)).astype(np.int32)


def _warp_cache(model) -> dict:
    """What every WARP fold-in of the model shares: the sampler's rank weights for its
    catalogue and the contiguous item side (built once per change of the item factors)."""
    side = item_side(model)
    cached = model.__dict__.get("_fold_cache")
    if cached is None or cached["side"] is not side:
        bias = side.bias if side.bias is not None else np.zeros(0, np.float32)
        cached = {"side": side, "rank_weights": _rng.harmonic_table(model.n_items),
                  "bias": np.ascontiguousarray(bias, dtype=np.float32)}
        model.__dict__["_fold_cache"] = cached
    return cached


def _settings(model, cached: dict, epochs: int) -> list:
    """The model's step settings of epochs 0..epochs-1, kept while its first and last
    epochs' are unchanged (they depend on the parameters and the epoch alone; building 30
    dicts was a third of the cost of a fold-in)."""
    # fold-in steps at learning_rate, without the late_rate (as before the schedule existed)
    first, last = model._step_settings(0, boosted=False), model._step_settings(epochs - 1, boosted=False)
    kept = cached.get("settings")
    if kept is None or len(kept) < epochs or kept[0] != first or kept[epochs - 1] != last:
        kept = cached["settings"] = [first] + [model._step_settings(e, boosted=False) for e in range(1, epochs)]
    return kept[:epochs]


def _fold_seed(model, cached: dict, spawn_seed) -> int:
    """``spawn_seed(model.random_state)``, kept while an integer seed is unchanged (drawing
    it builds a generator: a fifth of a short fold-in). Any other seed is drawn every time:
    ``None`` must stay fresh and a Generator advances."""
    seed = model.random_state
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        return spawn_seed(seed)
    kept = cached.get("seed")
    if kept is None or kept[0] != int(seed):
        kept = cached["seed"] = (int(seed), spawn_seed(seed))
    return kept[1]


def warp_vector(model, items: np.ndarray, epochs: Optional[int] = None, scale: Optional[float] = None) -> np.ndarray:
    """The factor row :func:`~mrec_warp.models.foldin.fold_in` fits for one new user whose
    history is ``items`` (sorted unique indices), bit for bit, leaving the model as it is.

    ``scale``: the weight of the user's own (identity) row in its vector, for a hybrid
    model's featureless user (``p_u = scale * row``); ``None`` for WARP (``p_u = row``).
    """
    cached = _warp_cache(model)
    epochs = FOLD_IN_EPOCHS if epochs is None else int(epochs)
    d = cached["side"].items.shape[1]
    n = len(items)
    rows = np.zeros((1, d), dtype=np.float32)
    accum = np.ones((1, d), dtype=np.float32)
    indptr = np.array([0, n], dtype=np.int64)
    pos_users = np.zeros(n, dtype=np.int32)
    order = np.arange(n, dtype=np.int32)
    state = _rng.seed_state(_fold_seed(model, cached, spawn_seed) ^ FOLD_IN_SALT)
    if scale is None:
        offset, scales = np.zeros((0, d), np.float32), np.zeros(0, np.float32)
    else:  # a featureless user: nothing but its own row, weighted
        offset, scales = np.zeros((1, d), np.float32), np.full(1, scale, np.float32)
    # every epoch in one kernel call: 30 calls of shuffle and fold_in_shard cost more than their steps
    _hybrid.fold_in_epochs(rows, accum, offset, scales, cached["side"].items, cached["bias"], indptr, items,
                           pos_users, order, cached["rank_weights"], state, _settings(model, cached, epochs))
    check_divergence([rows], float(model.init_scale), model._base_learning_rate(), "fold-in diverged")
    return rows[0] if scale is None else (np.float32(scale) * rows[0]).astype(np.float32)


def anonymous_weight(model) -> float:
    """The weight a hybrid model gives the identity of a new user without features (what
    its fold-in scales that user's row by), found once on a shallow copy of the model."""
    key = (id(model._users), float(model.identity_weight), bool(model.normalize), bool(model.identity))
    cached = model.__dict__.get("_anonymous_weight")
    if cached is not None and cached[0] == key:
        return cached[1]
    probe = copy.copy(model)  # the hooks replace attributes, never change them in place
    name = "\x00anonymous"
    while name in model.id_map("user"):
        name += "_"
    probe.append_users(np.array([name]), None)
    user = np.array([probe.n_users - 1])
    probe._give_identities(user)
    if np.diff(probe._uw.indptr)[user[0]] != 1:  # features kept for this id: not anonymous after all
        raise RuntimeError("an anonymous user unexpectedly has features")
    weight = float(probe._uw[user[0], probe._users.identity[user[0]]])
    model.__dict__["_anonymous_weight"] = (key, weight)
    return weight


def gram(model) -> np.ndarray:
    """WRMF's ``Y^T Y + reg I``, computed once per change of the item factors or the
    regularisation (on one BLAS thread, as training computes it: the same bits)."""
    side = item_side(model)
    key = (side.key, float(model.regularization))
    cached = model.__dict__.get("_gram_cache")
    if cached is None or cached[0] != key or cached[1] is not side:
        with one_blas_thread():
            cached = (key, side, model._gram(side.items))
        model.__dict__["_gram_cache"] = cached
    return cached[2]


def wrmf_vector(model, items: np.ndarray) -> np.ndarray:
    """The factor row WRMF's exact fold-in solves for one new user whose history is
    ``items`` (sorted unique indices, no values), leaving the model as it is; the Gram
    matrix ``Y^T Y + reg I`` is computed once per change of the item factors."""
    side = item_side(model)
    rows = np.zeros((1, side.items.shape[1]), dtype=np.float32)
    conf = model.confidences(None, len(items))
    failed = _als.solve_exact(rows, side.items, gram(model), np.array([0, len(items)], dtype=np.int64), items,
                              conf, 0, 1)
    if failed:
        raise InputError("the fold-in system is not positive definite", hint="refit with regularization > 0")
    return rows[0]


def recommend_history(model, items: np.ndarray, k: int,
                      item_mask: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
    """Top ``k`` for an anonymous history (item indices), excluding its items: the list
    ``fold_in`` of that one history and ``recommend`` would give, the model unchanged.

    Factor models fold the history in (:func:`warp_vector`, :func:`wrmf_vector`; a hybrid
    model as a user without features); item-item models and popularity score the history
    row directly.
    """
    row = history_row(model, items)
    vector_of = getattr(model, "history_vector", None)
    if vector_of is not None:
        side = item_side(model)
        vector = vector_of(row)
        found = top_k_vector(side, vector, k, row, item_mask)
        if found is not None:
            return found
        # a close call: the batch path's grid (topk.py), for this one vector
        grid = np.repeat(vector[None, :], SCORE_ROWS, axis=0)
        with one_blas_thread():
            scores = np.matmul(grid, side.items.T)[:1]
        if side.bias is not None:
            scores += side.bias
        return _top_k_scores(scores, k, row, item_mask)
    scorer = getattr(model, "score_history", None)
    if scorer is None:
        raise InputError(f"a {type(model).__name__} model cannot score an anonymous history",
                         hint=f"use a {family_names('supports_fold_in')} model")
    return _top_k_scores(np.ascontiguousarray(scorer(row), dtype=np.float32), k, row, item_mask)


def _top_k_scores(scores: np.ndarray, k: int, excluded: np.ndarray,
                  item_mask: Optional[np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
    """The batch kernel's top ``k`` of one row of scores (1, n_items)."""
    items = np.empty((1, k), dtype=np.int64)
    best = np.empty((1, k), dtype=np.float32)
    indptr = np.array([0, len(excluded)], dtype=np.int64)
    topk_masked(scores, _NO_ROWS, indptr, excluded, _NO_MASK if item_mask is None else item_mask, items, best)
    return items[0], best[0]
