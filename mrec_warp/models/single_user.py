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
factor of 2; an item further down that the largest bound cannot clear is checked with its
own). A user whose list is a closer call (a tie, near-identical items; ~1-2% of users of a
random 64-factor model on 20k-100k items) is scored the batch way instead
(:func:`recommend_few`), so the answer never depends on the path. A settled list's scores
are its exact scores rounded to float32, so they do not depend on the product that found
the list either (one vector, or several in one matrix product: :func:`top_k_vectors`);
they agree with the batch path's to float32 rounding (the last bit or two).

A close call costs one grid call of 256 users (0.1-0.4 s on 100k items); at the user's own
row of the file's grid (``mrec-warp serve``, ``recommend --ann``) the best items of all
256 users of that call are kept (:func:`_grid_list`), so each block of users pays it once.

What this module needs of a model is public: its :meth:`~.factor_model.FactorScoring.item_side`
(the item factors with their norms, which the model keeps until its item factors change),
``factor_parts()``, ``score_users``, ``n_users`` / ``n_items`` and, for close calls, the
:class:`GridLists` it keeps (:meth:`~.factor_model.FactorScoring.grid_lists`). Exclusion
rows are slices of the model's CSR, never copies.
"""
from __future__ import annotations

import threading
from typing import NamedTuple, Optional, Tuple

import numpy as np
import scipy.sparse as sp

from ..kernels.topk import topk_masked
from ..topk import SCORE_ROWS, KernelExclusion, grid_scores, top_k_block
from ..workers import one_blas_thread

#: Most users :meth:`~mrec_warp.models.base.Recommender.recommend` scores one at a time
#: here; more go to the batch path, where one BLAS call serves 256 of them.
MAX_USERS = 16

#: Items kept per user of a grid call made for a close call (:func:`_grid_list`).
GRID_KEEP = 64
#: Most users whose grid lists are kept, per model (``GRID_KEEP`` x 12 bytes each: 24 MB).
GRID_USERS = 32768

#: Margin on top of the rounding bound (it is already a worst case; this covers a BLAS that
#: rounds the bias addition or the accumulation once more than assumed).
SAFETY = 2.0

#: What one-user scoring keeps on a model (its item side and grid lists, the unit item vectors of
#: its neighbours, what its fold-in of one history reuses): derived data, dropped when a model
#: is pickled or copied (:meth:`Recommender.__getstate__`).
CACHES = ("_item_side_cache", "_fold_cache", "_gram_cache", "_unit_cache", "_anonymous_weight", "_grid_cache")

_UNIT = 2.0 ** -24
_NO_MASK = np.zeros(0, dtype=np.uint8)
_ZERO_INDPTR = np.zeros(2, dtype=np.int64)
_NO_ROWS = np.zeros(1, dtype=np.int64)
_NO_INDICES = np.zeros(0, dtype=np.int32)
_LAST_EXCLUSION: Optional[tuple] = None


class ItemSide(NamedTuple):
    """A factor model's item side as scoring reads it, with what the error bound needs."""

    items: np.ndarray            # (n_items, K) float32, C-contiguous: the model's own array
    bias: Optional[np.ndarray]   # (n_items,) float32 or None
    max_norm: float              # longest item vector
    max_bias: float              # largest |bias|
    key: tuple                   # what the cache was computed for

    @classmethod
    def of(cls, items: np.ndarray, bias: Optional[np.ndarray], key: tuple) -> Optional["ItemSide"]:
        """The side of these item vectors and biases, or ``None`` when ``items`` is not float32
        and C-contiguous (never the case for the shipped models; scored the batch way)."""
        if not (items.flags.c_contiguous and items.dtype == np.float32):
            return None
        norms = np.sqrt(np.einsum("ij,ij->i", items, items, dtype=np.float64))
        return cls(items, bias, float(norms.max(initial=0.0)),
                   0.0 if bias is None else float(np.abs(bias).max(initial=0.0)), key)


def _gamma(n: int) -> float:
    return n * _UNIT / (1.0 - n * _UNIT)


def item_side(model) -> Optional[ItemSide]:
    """The model's :class:`ItemSide` (:meth:`~.factor_model.FactorScoring.item_side`); ``None``
    for a model without factors (item-item and popularity models score another way)."""
    side_of = getattr(model, "item_side", None)
    return None if side_of is None else side_of()


class GridLists:
    """The best :data:`GRID_KEEP` items of every user of the grid calls made for close calls
    (:func:`_grid_list`), by the call's first row, for one state of a model's factors
    (``key``); at most :data:`GRID_USERS` users, the oldest call's dropped first."""

    def __init__(self, key: tuple) -> None:
        self.key = key
        self._blocks: dict = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Grid calls kept."""
        return len(self._blocks)

    def get(self, start: int) -> Optional[Tuple[np.ndarray, np.ndarray]]:
        """(items, scores) kept of the call starting at row ``start``, or ``None``."""
        return self._blocks.get(start)

    def keep(self, start: int, lists: Tuple[np.ndarray, np.ndarray]) -> None:
        """Keep the (items, scores) of the call starting at row ``start``."""
        with self._lock:
            while len(self._blocks) * SCORE_ROWS >= GRID_USERS:
                self._blocks.pop(next(iter(self._blocks)))  # the oldest call
            self._blocks[start] = lists


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
    as the batch kernel does. Scores are the exact scores rounded to float32
    (:func:`_exact_scores`), so they do not depend on how the vector was multiplied.
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
    return _finish(side, vector, items[0], best[0], k, (scores, excluded, item_mask))


def top_k_vectors(side: ItemSide, vectors: np.ndarray, k: int, exclude: Optional[sp.csr_matrix] = None,
                  rows: Optional[np.ndarray] = None, item_mask: Optional[np.ndarray] = None,
                  ) -> list:
    """:func:`top_k_vector` for several vectors (n, K) at once: one matrix product (one pass
    over the item matrix for all of them, where one product each reads it n times) and one
    top-k kernel call; each list is the one :func:`top_k_vector` gives (the same items and
    scores: both are settled by the exact scores), ``None`` for a close call.

    ``rows``: each vector's row of ``exclude`` (its excluded items; ``-1`` or a row beyond
    the matrix: none).
    """
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    with one_blas_thread():
        scores = vectors @ side.items.T
    if side.bias is not None:
        scores += side.bias
    finite = np.isfinite(scores).all(axis=1)
    n = min(k + 1, scores.shape[1])
    items = np.empty((len(vectors), n), dtype=np.int64)
    best = np.empty((len(vectors), n), dtype=np.float32)
    if exclude is None or rows is None:
        rows, indptr, indices = np.full(len(vectors), -1, np.int64), _ZERO_INDPTR[:1], _NO_INDICES
    else:
        excl = kernel_exclusion(exclude)
        rows = np.asarray(rows, dtype=np.int64)
        rows = np.where(rows < excl.n_rows, rows, -1)
        indptr, indices = excl.indptr, excl.indices
    topk_masked(scores, rows, indptr, indices, _NO_MASK if item_mask is None else item_mask, items, best)
    return [_finish(side, vectors[r], items[r], best[r], k,
                    (scores[r], _row_of(indptr, indices, rows[r]), item_mask)) if finite[r] else None
            for r in range(len(vectors))]


def _row_of(indptr: np.ndarray, indices: np.ndarray, row: int) -> np.ndarray:
    return indices[indptr[row]:indptr[row + 1]] if row >= 0 else _NO_INDICES


def kernel_exclusion(exclude: sp.csr_matrix) -> KernelExclusion:
    """``exclude`` in the top-k kernel's index types, kept for the last matrix asked (the
    served model's training matrix: converting its index pointers on every request was a
    copy of them per request)."""
    global _LAST_EXCLUSION
    last = _LAST_EXCLUSION
    if last is not None and last[0] is exclude and last[1] == (id(exclude.indptr), id(exclude.indices)):
        return last[2]
    excl = KernelExclusion.of(exclude if exclude.has_sorted_indices else exclude.sorted_indices())
    _LAST_EXCLUSION = (exclude, (id(exclude.indptr), id(exclude.indices)), excl)
    return excl


def _finish(side: ItemSide, vector: np.ndarray, items: np.ndarray, best: np.ndarray, k: int,
            tail: Optional[tuple] = None) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """The list of the top-(k + 1) ``items`` / approximate scores ``best`` (padded with -1),
    cut to ``k`` with exact scores, or ``None`` if a close call (:func:`_settled`; ``tail``
    as there)."""
    valid = int((items >= 0).sum())
    exact = _settled(side, vector, items[:valid], best[:valid], k, tail)
    if exact is None:
        return None
    listed = min(valid, k)
    items = items[:k].copy()
    best = best[:k].copy()
    best[:listed] = exact[:listed]  # float32 of the exact score: the same whichever product found it
    if len(items) < k:  # k is capped at the catalogue by the caller; pad all the same
        items = np.concatenate([items, np.full(k - len(items), -1, np.int64)])
        best = np.concatenate([best, np.full(k - len(best), -np.inf, np.float32)])
    return items, best


def _exact_scores(side: ItemSide, vector: np.ndarray, items: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Exact scores of ``items`` (float64: a float32 product is exact there; each row summed
    on its own, so a score does not depend on which other items are scored with it) and
    the mass ``sum |p_u q_i| + |b_i|`` that bounds a float32 product's rounding."""
    rows = side.items[items].astype(np.float64)
    vec = vector.astype(np.float64)
    exact = (rows * vec).sum(axis=1)
    mass = np.abs(rows) @ np.abs(vec)
    if side.bias is not None:
        exact += side.bias[items]
        mass += np.abs(side.bias[items])
    return exact, mass


def _settled(side: ItemSide, vector: np.ndarray, items: np.ndarray, best: np.ndarray, k: int,
             tail: Optional[tuple] = None) -> Optional[np.ndarray]:
    """The listed items' exact scores, rounded to float32, if the batch path's rounding is
    certain to give this list; ``None`` if not.

    The listed items' exact scores ``x`` (float64: a float32 product is exact there) are
    each within ``E_i`` of the batch path's; so the order holds where each leads the next by
    more than both bounds, and no item further down (here at most ``best[k]``, so in the
    batch path at most ``best[k] + 2 E_max``) can pass the k-th.

    ``tail``: ``(scores, excluded, item_mask)``, the approximate scores of every item and
    the user's filters. When the k-th does not lead ``best[k] + 2 E_max`` by its bound, the
    items that could pass it are few: any item ``j`` with ``x_j + E_j`` over the k-th's
    ``x - E`` has an approximate score over ``x - E - 2 E_max``. Those (unfiltered) are
    scored exactly, each with its own bound (``E_j``, not ``E_max``): about a third of the
    close calls of a random 64-factor model on 100k items are settled so.
    """
    if len(items) == 0:
        return np.zeros(0, np.float32)
    exact, mass = _exact_scores(side, vector, items)
    if len(items) == 1:  # the only eligible item: nothing to order
        return exact.astype(np.float32)
    scale = SAFETY * _gamma(side.items.shape[1] + 2)  # |batch - exact| <= scale * (sum |p q| + |b|)
    bound = scale * mass
    listed = min(len(items), k)
    if not np.all(exact[:listed - 1] - exact[1:listed] > bound[:listed - 1] + bound[1:listed]):
        return None
    if len(items) <= k:  # every eligible item is listed: only their order could change
        return exact.astype(np.float32)
    vec = vector.astype(np.float64)
    largest = scale * (float(np.sqrt(np.square(vec).sum())) * side.max_norm + side.max_bias)
    floor = exact[k - 1] - bound[k - 1]
    if floor > float(best[k]) + 2.0 * largest:
        return exact.astype(np.float32)
    if tail is None:
        return None
    scores, excluded, item_mask = tail
    near = np.flatnonzero(scores >= floor - 2.0 * largest)
    near = near[_outside_sorted(near, np.sort(items[:k]))]
    near = near[_outside_sorted(near, excluded)]
    if item_mask is not None:
        near = near[item_mask[near] == 0]
    near_exact, near_mass = _exact_scores(side, vector, near)
    if not np.all(floor > near_exact + scale * near_mass):
        return None
    return exact.astype(np.float32)


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
    lists = settled_lists(model, users, k, exclude, item_mask)
    if lists is None:
        return None
    out_items = np.empty((len(users), k), dtype=np.int64)
    out_scores = np.empty((len(users), k), dtype=np.float32)
    for pos, (user, found) in enumerate(zip(np.asarray(users, dtype=np.int64).tolist(), lists)):
        if found is None:
            found = close_call(model, user, k, exclude, item_mask, pos if positions is None else int(positions[pos]))
        out_items[pos], out_scores[pos] = found
    return out_items, out_scores


def settled_lists(model, users: np.ndarray, k: int, exclude: Optional[sp.csr_matrix],
                  item_mask: Optional[np.ndarray]) -> Optional[list]:
    """:func:`recommend_few`'s lists of ``users`` that one product settles, ``None`` in
    place of a close call (:func:`close_call` gives its list); ``None`` when the model has
    no factors."""
    side = item_side(model)
    if side is None:
        return None
    user_vectors = model.factor_parts()[0]
    users = np.asarray(users, dtype=np.int64)
    if len(users) > 1:  # one product for all: the item matrix is read once, not once per user
        return top_k_vectors(side, user_vectors[users], k, exclude, users, item_mask)
    return [top_k_vector(side, user_vectors[int(u)], k, exclusion_row(exclude, int(u)), item_mask) for u in users]


def close_call(model, user: int, k: int, exclude: Optional[sp.csr_matrix], item_mask: Optional[np.ndarray],
               position: int) -> Tuple[np.ndarray, np.ndarray]:
    """The list of a close call: the batch path's, at ``position`` of its grid (one call of
    :data:`~mrec_warp.topk.SCORE_ROWS` users; at the user's own row, from the lists kept
    of that call, see :func:`_grid_list`)."""
    found = _grid_list(model, user, k, exclude, item_mask) if position == user else None
    if found is None:
        _, block_items, block_scores = top_k_block(model.score_users, np.array([user], dtype=np.int64), k,
                                                   None if exclude is None else kernel_exclusion(exclude),
                                                   position=position, item_mask=item_mask)
        found = block_items[0], block_scores[0]
    return found


def _grid_list(model, user: int, k: int, exclude: Optional[sp.csr_matrix],
               item_mask: Optional[np.ndarray]) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """A close call's list at the user's own row of the file's scoring grid, from the
    grid call's best :data:`GRID_KEEP` items per user, kept (:data:`GRID_USERS` users).

    The grid call that settles a close call (256 users x all items: 0.1-0.4 s on 100k
    items) scores the user's 255 neighbours in the file too, at their own rows and so with
    the file's bits; their best items are kept, so a later close call in the same block
    reads its list instead of scoring the block again. The kernel ranks by score, then
    lower index, a total order: the top ``k`` of a user's filtered items is the first ``k``
    of the kept list that pass the filters, whenever ``k`` of them do (else ``None``: the
    caller scores the block again).
    """
    n_users = model.n_users
    if user >= n_users:
        return None
    lists = model.grid_lists()
    start = user - user % SCORE_ROWS
    kept = lists.get(start)
    if kept is None:
        block_users = np.arange(start, min(start + SCORE_ROWS, n_users), dtype=np.int64)
        scores = grid_scores(model.score_users, block_users, start)
        keep = min(GRID_KEEP, scores.shape[1])
        kept = (np.empty((len(block_users), keep), np.int64), np.empty((len(block_users), keep), np.float32))
        topk_masked(scores, np.full(len(block_users), -1, np.int64), _ZERO_INDPTR[:1], _NO_INDICES, _NO_MASK,
                    kept[0], kept[1])
        lists.keep(start, kept)
    items, scores = kept[0][user - start], kept[1][user - start]
    valid = items >= 0
    complete = not valid.all() or len(items) == model.n_items  # every rankable item is in the list
    items, scores = items[valid], scores[valid]
    ok = _outside_sorted(items, exclusion_row(exclude, user))
    if item_mask is not None:
        ok &= item_mask[items] == 0
    items, scores = items[ok], scores[ok]
    if len(items) < k and not complete:
        return None
    out_items = np.full(k, -1, np.int64)
    out_scores = np.full(k, -np.inf, np.float32)
    out_items[:min(k, len(items))] = items[:k]
    out_scores[:min(k, len(items))] = scores[:k]
    return out_items, out_scores


def _outside_sorted(items: np.ndarray, sorted_row: np.ndarray) -> np.ndarray:
    """Which of ``items`` are not in ``sorted_row``."""
    if len(sorted_row) == 0:
        return np.ones(len(items), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_row, items), len(sorted_row) - 1)
    return sorted_row[at] != items


# -- an anonymous history's list ---------------------------------------------------------------------
def top_k_of_vector(side: ItemSide, vector: np.ndarray, k: int, excluded: np.ndarray,
                    item_mask: Optional[np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
    """Top ``k`` for one vector that is no user of the model (a history folded in): the
    list of :func:`top_k_vector`, a close call scored at the first row of a grid call as the
    batch path scores a block (:mod:`mrec_warp.topk`)."""
    found = top_k_vector(side, vector, k, excluded, item_mask)
    if found is not None:
        return found
    grid = np.repeat(vector[None, :], SCORE_ROWS, axis=0)
    with one_blas_thread():
        scores = np.matmul(grid, side.items.T)[:1]
    if side.bias is not None:
        scores += side.bias
    return top_k_scores(scores, k, excluded, item_mask)


def top_k_scores(scores: np.ndarray, k: int, excluded: np.ndarray,
                 item_mask: Optional[np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
    """The batch kernel's top ``k`` of one row of scores (1, n_items), ``excluded`` (sorted
    item indices) and the items ``item_mask`` marks left out."""
    items = np.empty((1, k), dtype=np.int64)
    best = np.empty((1, k), dtype=np.float32)
    indptr = np.array([0, len(excluded)], dtype=np.int64)
    topk_masked(scores, _NO_ROWS, indptr, excluded, _NO_MASK if item_mask is None else item_mask, items, best)
    return items[0], best[0]
