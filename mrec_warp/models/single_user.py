"""Top-k for one user (or a handful) of a factor model: one matrix-vector product, no set-up.

The batch path (:mod:`mrec_warp.topk`) scores every user in a BLAS call of exactly
:data:`~mrec_warp.topk.SCORE_ROWS` rows, so that a user's scores are the same bits in any
block. For one user that is 256 times the arithmetic: 14 ms instead of 0.1 ms on 20k items
x 64 factors. Here a user is scored with one matrix-vector product instead, which rounds
differently in the last bits; the list is still the batch path's, by an error bound:

The batch path's score is a float32 dot product of length ``K`` plus a bias, so it is
within ``E_i = gamma(K + 2) * (sum |p_u q_i| + |b_i|)`` of the exact score ``x_i``
(``gamma(n) = n u / (1 - n u)``, ``u = 2**-24``, whatever the summation order, with or
without FMA). The k + 1 best items of the matrix-vector product are scored exactly (in
float64, where products of float32 numbers are exact); when each of the k best leads the
next by more than both bounds, and the k-th every item further down by more than its
bound and the largest one, no rounding can reorder them or bring another item in, so the
items and their order are exactly the batch path's (:func:`_settled`, with a safety
factor of 2). A user whose list is a closer call (a tie, near-identical items; ~1% of
users of a random 64-factor model) is scored the batch way instead (:func:`recommend_few`),
so the answer never depends on the path. Scores agree with the batch path's to float32
rounding (the last bit or two).

The item side's norms are computed once per change of the item factors and kept on the
model (:func:`item_side`); exclusion rows are slices of the model's CSR, never copies.
"""
from __future__ import annotations

import copy
import threading
from typing import NamedTuple, Optional, Tuple

import numpy as np
import scipy.sparse as sp

from ..kernels.topk import topk_masked
from ..topk import SCORE_ROWS, top_k_block
from ..workers import one_blas_thread

#: Most users :meth:`~mrec_warp.models.base.Recommender.recommend` scores one at a time
#: here; more go to the batch path, where one BLAS call serves 256 of them.
MAX_USERS = 16

#: Margin on top of the rounding bound (it is already a worst case; this covers a BLAS that
#: rounds the bias addition or the accumulation once more than assumed).
SAFETY = 2.0

#: What this module keeps on a model (see :func:`item_side` and friends): derived data,
#: dropped when a model is pickled or copied (:meth:`Recommender.__getstate__`).
CACHES = ("_item_side_cache", "_fold_cache", "_gram_cache", "_unit_cache", "_anonymous_weight")

_UNIT = 2.0 ** -24
_NO_MASK = np.zeros(0, dtype=np.uint8)
_ZERO_INDPTR = np.zeros(2, dtype=np.int64)
_NO_ROWS = np.zeros(1, dtype=np.int64)
_LOCK = threading.Lock()


class ItemSide(NamedTuple):
    """A factor model's item side as scoring reads it, with what the error bound needs."""

    items: np.ndarray            # (n_items, K) float32, C-contiguous: the model's own array
    bias: Optional[np.ndarray]   # (n_items,) float32 or None
    max_norm: float              # longest item vector
    max_bias: float              # largest |bias|
    key: tuple                   # what the cache was computed for


def _gamma(n: int) -> float:
    return n * _UNIT / (1.0 - n * _UNIT)


def item_side(model) -> Optional[ItemSide]:
    """The model's :class:`ItemSide`, cached until its item factors change; ``None`` for a
    model without factors (item-item and popularity models score another way).

    The cache is keyed on the item arrays themselves (held, so never confused with a new
    array at the same address) and ``epochs_done_``, which every in-place training step
    (``fit``, ``partial_fit``) advances.
    """
    parts = getattr(model, "factor_parts", None)
    if parts is None:
        return None
    _, items, bias = parts()
    key = (id(items), id(bias), getattr(model, "epochs_done_", None))
    cached = model.__dict__.get("_item_side_cache")
    if cached is not None and cached.items is items and cached.bias is bias and cached.key == key:
        return cached
    with _LOCK:
        items_c = items if items.flags.c_contiguous and items.dtype == np.float32 else None
        if items_c is None:  # never the case for the shipped models; scored the batch way
            return None
        norms = np.sqrt(np.einsum("ij,ij->i", items, items, dtype=np.float64))
        side = ItemSide(items, bias, float(norms.max(initial=0.0)),
                        0.0 if bias is None else float(np.abs(bias).max(initial=0.0)), key)
        model.__dict__["_item_side_cache"] = side
    return side


def exclusion_row(exclude: Optional[sp.csr_matrix], user: int) -> np.ndarray:
    """The sorted item indices ``exclude`` holds for ``user`` (a view of its CSR where it can)."""
    if exclude is None or user >= exclude.shape[0]:
        return np.zeros(0, dtype=np.int32)
    row = exclude.indices[exclude.indptr[user]:exclude.indptr[user + 1]]
    if row.dtype != np.int32:
        row = row.astype(np.int32)
    if not exclude.has_sorted_indices:
        row = np.sort(row)
    return row


def top_k_vector(side: ItemSide, vector: np.ndarray, k: int, excluded: np.ndarray,
                 item_mask: Optional[np.ndarray] = None) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """Top ``k`` items for one user vector, best first, or ``None`` when the list is a close
    call that only the batch path's exact bits can settle (see the module docstring).

    ``excluded`` are sorted item indices never to return; ``item_mask`` (uint8 per item)
    marks items never to return to anyone. Short lists are padded with ``-1`` / ``-inf``,
    as the batch kernel does.
    """
    vector = np.asarray(vector, dtype=np.float32)
    with one_blas_thread():  # a threaded gemv on a busy machine is 20x slower, not faster
        scores = side.items @ vector
    if side.bias is not None:
        scores += side.bias
    if not np.isfinite(scores).all():
        return None
    n = min(k + 1, len(scores))
    items = np.empty((1, n), dtype=np.int64)
    best = np.empty((1, n), dtype=np.float32)
    indptr = _ZERO_INDPTR if len(excluded) == 0 else np.array([0, len(excluded)], dtype=np.int64)
    topk_masked(scores[None, :], _NO_ROWS if len(excluded) else np.full(1, -1, np.int64), indptr, excluded,
                _NO_MASK if item_mask is None else item_mask, items, best)
    items, best = items[0], best[0]
    valid = int((items >= 0).sum())
    if valid > 1 and not _settled(side, vector, items[:valid], best[:valid], k):
        return None
    if len(items) > k:
        items, best = items[:k], best[:k]
    elif len(items) < k:  # k is capped at the catalogue by the caller; pad all the same
        items = np.concatenate([items, np.full(k - len(items), -1, np.int64)])
        best = np.concatenate([best, np.full(k - len(best), -np.inf, np.float32)])
    return items, best


def _settled(side: ItemSide, vector: np.ndarray, items: np.ndarray, best: np.ndarray, k: int) -> bool:
    """Whether the batch path's rounding is certain to give this list.

    The listed items' exact scores ``x`` (float64: a float32 product is exact there) are
    each within ``E_i`` of the batch path's; so the order holds where each leads the next by
    more than both bounds, and no item further down (here at most ``best[k]``, so in the
    batch path at most ``best[k] + 2 E_max``) can pass the k-th.
    """
    scale = SAFETY * _gamma(side.items.shape[1] + 2)  # |batch - exact| <= scale * (sum |p q| + |b|)
    rows = side.items[items].astype(np.float64)
    vec = vector.astype(np.float64)
    exact = rows @ vec
    mass = np.abs(rows) @ np.abs(vec)
    if side.bias is not None:
        exact += side.bias[items]
        mass += np.abs(side.bias[items])
    bound = scale * mass
    listed = min(len(items), k)
    if not np.all(exact[:listed - 1] - exact[1:listed] > bound[:listed - 1] + bound[1:listed]):
        return False
    if len(items) <= k:  # every eligible item is listed: only their order could change
        return True
    largest = scale * (float(np.sqrt(np.square(vec).sum())) * side.max_norm + side.max_bias)
    return bool(exact[k - 1] - bound[k - 1] > float(best[k]) + 2.0 * largest)


def recommend_few(model, users: np.ndarray, k: int, exclude: Optional[sp.csr_matrix],
                  item_mask: Optional[np.ndarray], positions: Optional[np.ndarray] = None,
                  ) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """:meth:`~mrec_warp.models.base.Recommender.recommend`'s lists for a few users of a
    factor model, each from :func:`top_k_vector` or, for a close call, the batch path's
    own block of one; ``None`` when the model has no factors.

    ``positions`` are the users' places in the job's list of users, which decide the row of
    the batch path's BLAS call, and so its last bits (:mod:`mrec_warp.topk`): by default
    0, 1, ... as when ``recommend`` is given these users; the user's own index gives the
    list of the file ``mrec-warp recommend`` writes for every user.
    """
    side = item_side(model)
    if side is None:
        return None
    user_vectors = model.factor_parts()[0]
    out_items = np.empty((len(users), k), dtype=np.int64)
    out_scores = np.empty((len(users), k), dtype=np.float32)
    for pos, user in enumerate(users):
        user = int(user)
        found = top_k_vector(side, user_vectors[user], k, exclusion_row(exclude, user), item_mask)
        if found is None:
            where = pos if positions is None else int(positions[pos])
            _, block_items, block_scores = top_k_block(model.score_users, np.array([user], dtype=np.int64), k,
                                                       exclude, position=where, item_mask=item_mask)
            found = block_items[0], block_scores[0]
        out_items[pos], out_scores[pos] = found
    return out_items, out_scores


# -- neighbours of a few items ---------------------------------------------------------------------
def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` scaled to length 1 (cosine similarity is then a dot product)."""
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def similar_few(model, vectors: np.ndarray, rows: np.ndarray, k: int) -> Tuple[np.ndarray, np.ndarray]:
    """:meth:`~mrec_warp.models.base.Recommender.similar_items` for a few items: each from
    one product with the unit item vectors (kept until the item factors change), a close
    call the batch way, as :func:`recommend_few`."""
    key = (id(vectors), getattr(model, "epochs_done_", None))
    cached = model.__dict__.get("_unit_cache")
    if cached is None or cached[0] is not vectors or cached[1] != key:
        unit = np.ascontiguousarray(unit_rows(vectors), dtype=np.float32)
        norms = np.sqrt(np.einsum("ij,ij->i", unit, unit, dtype=np.float64))
        cached = (vectors, key, ItemSide(unit, None, float(norms.max(initial=0.0)), 0.0, key))
        model.__dict__["_unit_cache"] = cached
    side = cached[2]
    unit = side.items
    n = len(unit)
    out_items = np.empty((len(rows), k), dtype=np.int64)
    out_scores = np.empty((len(rows), k), dtype=np.float32)
    itself = None
    for pos, row in enumerate(rows):
        row = int(row)
        found = top_k_vector(side, unit[row], k, np.array([row], dtype=np.int32))
        if found is None:
            if itself is None:
                itself = sp.identity(n, dtype=np.float32, format="csr")
            _, block_items, block_scores = top_k_block(lambda r: unit[r] @ unit.T, np.array([row], dtype=np.int64),
                                                       k, itself, position=pos)
            found = block_items[0], block_scores[0]
        out_items[pos], out_scores[pos] = found
    return out_items, out_scores


# -- one anonymous history: the vector fold-in would give it, without changing the model -------
def history_row(model, items: np.ndarray) -> np.ndarray:
    """Item indices of a history as fold-in and exclusion read them: sorted, each once, int32."""
    return np.unique(np.asarray(items, dtype=np.int64)).astype(np.int32)


def _warp_cache(model) -> dict:
    """What every WARP fold-in of the model shares: the sampler's rank weights for its
    catalogue and the contiguous item side (built once per change of the item factors)."""
    from ..kernels import rng as _rng

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
    first, last = model._step_settings(0), model._step_settings(epochs - 1)  # (the last sees any decay)
    kept = cached.get("settings")
    if kept is None or len(kept) < epochs or kept[0] != first or kept[epochs - 1] != last:
        kept = cached["settings"] = [first] + [model._step_settings(e) for e in range(1, epochs)]
    return kept[:epochs]


def warp_vector(model, items: np.ndarray, epochs: Optional[int] = None, scale: Optional[float] = None) -> np.ndarray:
    """The factor row :func:`~mrec_warp.models.foldin.fold_in` fits for one new user whose
    history is ``items`` (sorted unique indices), bit for bit, leaving the model as it is.

    ``scale``: the weight of the user's own (identity) row in its vector, for a hybrid
    model's featureless user (``p_u = scale * row``); ``None`` for WARP (``p_u = row``).
    """
    from ..kernels import hybrid as _hybrid
    from ..kernels import rng as _rng
    from ..seeds import spawn_seed
    from .foldin import FOLD_IN_EPOCHS, FOLD_IN_SALT
    from .positives import check_divergence

    cached = _warp_cache(model)
    epochs = FOLD_IN_EPOCHS if epochs is None else int(epochs)
    d = cached["side"].items.shape[1]
    n = len(items)
    rows = np.zeros((1, d), dtype=np.float32)
    accum = np.ones((1, d), dtype=np.float32)
    indptr = np.array([0, n], dtype=np.int64)
    pos_users = np.zeros(n, dtype=np.int32)
    order = np.arange(n, dtype=np.int32)
    state = _rng.seed_state(spawn_seed(model.random_state) ^ FOLD_IN_SALT)
    if scale is None:
        offset, scales = np.zeros((0, d), np.float32), np.zeros(0, np.float32)
    else:  # a featureless user: nothing but its own row, weighted
        offset, scales = np.zeros((1, d), np.float32), np.full(1, scale, np.float32)
    for epoch, settings in enumerate(_settings(model, cached, epochs)):
        _rng.shuffle(order, state)
        _hybrid.fold_in_shard(rows, accum, offset, scales, cached["side"].items, cached["bias"],
                              indptr, items, pos_users, order, 0, n, cached["rank_weights"], state, settings)
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
    from ..errors import InputError
    from ..kernels import als as _als

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
    from ..errors import InputError

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
    scorer = getattr(model, "_history_scores_row", None)
    if scorer is None:
        raise InputError(f"a {type(model).__name__} model cannot score an anonymous history",
                         hint="use a warp, hybrid, wrmf, popularity or item-item model (itemknn, slim, ease)")
    return _top_k_scores(np.ascontiguousarray(scorer(row), dtype=np.float32), k, row, item_mask)


def _top_k_scores(scores: np.ndarray, k: int, excluded: np.ndarray,
                  item_mask: Optional[np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
    """The batch kernel's top ``k`` of one row of scores (1, n_items)."""
    items = np.empty((1, k), dtype=np.int64)
    best = np.empty((1, k), dtype=np.float32)
    indptr = np.array([0, len(excluded)], dtype=np.int64)
    topk_masked(scores, _NO_ROWS, indptr, excluded, _NO_MASK if item_mask is None else item_mask, items, best)
    return items[0], best[0]
