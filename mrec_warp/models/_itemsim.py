"""What every item-item model shares: scores are a user's history times an item-item matrix.

Item-kNN, SLIM and EASE differ only in how they learn the items x items weights ``W``;
:class:`ItemSimilarity` does the rest once: scoring (``history @ W``), the popularity
fallback for users with no weighted history, ``similar_items`` (a row of ``W``), fold-in of new
users (their history simply joins the stored training rows, nothing is refitted), and
saving ``W`` as sparse CSR arrays or one dense array. A sparse ``W`` is saved compactly:
column indices in the smallest unsigned type (uint16 below 65,536 items), values as float16
when the fit rounded them so (EASE), deflated.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import scipy.sparse as sp

from ..data.npz import check_counts, check_csr, check_finite, check_shape, compact_csr_arrays, index_dtype, round_to_float16
from ..errors import InputError
from ..kernels.itemsim import history_times_dense, history_times_weights, rows_into_dense
from ..kernels.topk import product_top_k_classes, top_k_classes
from ..progress import SILENT, Progress
from ..topk import iter_top_k
from ..workers import Workers, effective_n_jobs
from .base import Recommender
from .early_stopping import Holdout, HoldoutScorer, internal_holdout
from .tuning import TrialShape
from .selection import (PASSED_OVER, Candidate, Stopwatch, best, clearly_above, fixed_value, remember, report,
                        selected_names, walk)
from .indices import IndexArg, as_indices, check_k
from .foldin import log_fold_in, add_history, append_user_ids, refuse_features


class ItemSimilarity(Recommender):
    """Base of the item-item models: ``score(u, i) = sum_{j in history(u)} W[j, i]``.

    Subclasses implement ``_learn_weights(csr, progress)`` returning ``W`` (n_items x
    n_items) as a float32 CSR matrix or a dense float32 array (then they set
    ``_dense_weights = True``); the diagonal must be zero (an item never recommends itself).
    Users whose scores are all zero (no training items, or only items with no learned
    weights) are ranked by popularity instead, the same ranking :class:`Popularity` gives.

    Fitted attributes: ``weights_`` (``W``), ``item_counts_`` (training users per item) and
    ``kept_items_`` (the items ``W`` covers when not all of them, else ``None``).
    """

    #: Whether ``W`` is one dense array (EASE) rather than sparse CSR arrays.
    _dense_weights = False
    #: Whether the fit rounds a sparse ``W`` to float16 precision (stored as float16). EASE's
    #: sparsified weights are; SLIM's, item-kNN's and RP3beta's keep float32 (their P@10
    #: moved by at most 0.03% rounded, but their tests check the weights to float32 precision
    #: and their files are small or set by their neighbourhood size).
    _float16_weights = False

    supports_fold_in = True
    finds_similar_items = True

    def _learn_weights(self, csr: sp.csr_matrix, progress: Progress):  # pragma: no cover - abstract
        raise NotImplementedError

    def _candidates(self, holdout: Holdout, scorer: HoldoutScorer, names: Tuple[str, ...],
                    progress: Progress) -> List[Candidate]:  # pragma: no cover - abstract
        """The settings of ``names`` (the parameters left at ``"auto"``) tried on the hold-out,
        each scored by ``scorer``, the fixed values first (a family with ``SELECTED``)."""
        raise NotImplementedError

    def _choose_settings(self, csr: sp.csr_matrix, progress: Progress) -> None:
        """Choose the parameters left at ``"auto"`` on the internal hold-out and remember
        them (``name_``), so that :meth:`_learn_weights` reads the values in force
        (:func:`~mrec_warp.models.selection.value_of`). The item-item families draw no
        random numbers: the hold-out is salted with :data:`SELECTION_SEED`, so the choice
        depends on the data alone."""
        names = selected_names(self)
        if not names:
            remember(self, {})
            return
        watch = Stopwatch()
        holdout = internal_holdout(self, csr, np.random.default_rng(SELECTION_SEED))
        if len(holdout.users) == 0:
            fixed = {name: fixed_value(self, name) for name in names}
            progress.log(f"{self.name}: no user has a held-out item: the fixed " + ", ".join(
                f"{k}={v}" for k, v in fixed.items()))
            remember(self, fixed)
            return
        scorer = HoldoutScorer(holdout.fit, holdout.held_out, holdout.users, SELECTION_K)
        tried = self._candidates(holdout, scorer, names, progress)
        fixed_values = {name: fixed_value(self, name) for name in names}
        fixed = next((c for c in tried if c.values == fixed_values), None)
        chosen = beyond_noise(tried, fixed)
        report(progress, self.name, tried, chosen, fixed, watch.seconds, SELECTION_K)
        remember(self, dict(chosen.values))

    def fit(self, X, user_ids: Optional[Sequence] = None, item_ids: Optional[Sequence] = None,
            progress: Optional[Progress] = None, **kwargs) -> "ItemSimilarity":
        """Learn the item-item weights from ``X`` (Interactions or users x items sparse; with a
        plain matrix, ``user_ids`` / ``item_ids`` name its rows and columns)."""
        if kwargs.get("validation") is not None:
            raise InputError(f"{type(self).__name__} has no early stopping to validate",
                             hint="drop `validation` (it is for warp)")
        self.check_params()
        csr = self.set_training_data(self._with_ids(X, user_ids, item_ids))
        self.item_counts_ = np.bincount(csr.indices, minlength=csr.shape[1]).astype(np.float32)
        self.kept_items_: Optional[np.ndarray] = None  # a subclass may learn W on fewer items
        self._choose_settings(csr, progress or SILENT)
        weights = self._learn_weights(csr, progress or SILENT)
        n = csr.shape[1] if self.kept_items_ is None else len(self.kept_items_)
        self.weights_ = _as_weights(weights, n)
        if self._float16_weights and sp.issparse(self.weights_):
            # float16 precision, so that the model file stores the values in half the bytes and
            # loads back the very weights scored here (P@10 moved by at most 0.1% on the
            # suite: docs/models/itemsim.rst, 'Model files'); as they are when some are beyond
            # float16's range
            self.weights_.data = round_to_float16(self.weights_.data)
        return self

    # -- scoring -------------------------------------------------------------------------------
    def score_users(self, users: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
        """History rows times ``W``: a dense float32 block (len(users), n_items).

        A CSR block of histories times a CSR ``W`` is a sparse product densified once; a
        dense ``W`` (EASE) takes the sparse-times-dense product directly.
        """
        self.check_fitted()
        users = np.asarray(users, dtype=np.int64)
        if len(users) and (users.min() < 0 or users.max() >= self.train_.shape[0]):
            raise IndexError(f"user indices must be in [0, {self.train_.shape[0]})")
        hist = self.train_[users]
        scores = popular_when_cold(self._history_scores(hist), self.item_counts_)
        if out is not None:
            out[...] = scores
            return out
        return scores

    def score_history(self, items: np.ndarray) -> np.ndarray:
        """Scores (1, n_items) of an anonymous history (sorted unique item indices), as
        :meth:`score_users` scores a user with that training row (popularity if it is cold)."""
        hist = sp.csr_matrix((np.ones(len(items), np.float32), items, np.array([0, len(items)])),
                             shape=(1, self.n_items))
        scores = self._history_scores(hist)
        if not np.any(np.nan_to_num(scores, nan=0.0) != 0):
            scores[0] = self.item_counts_
        return scores

    def _history_scores(self, hist: sp.csr_matrix) -> np.ndarray:
        """``hist @ W`` as a C-contiguous float32 array (hist: CSR rows of histories).

        When ``W`` covers only ``kept_items_`` (EASE on the most popular items), the other
        items score NaN, which the top-k selection never ranks.
        """
        return history_scores(hist, self.weights_, self.kept_items_, self.n_items)

    def _weight_rows(self, items: np.ndarray) -> np.ndarray:
        """Rows ``W[items, :]`` as a dense float32 array over every item (NaN off ``kept_items_``)."""
        kept = self.kept_items_
        if kept is None:
            out = self.weights_[items]
            return out.toarray() if sp.issparse(out) else np.array(out, dtype=np.float32)
        pos = np.full(self.n_items, -1, dtype=np.int64)
        pos[kept] = np.arange(len(kept))
        rows = np.zeros((len(items), len(kept)), dtype=np.float32)
        inside = pos[items] >= 0
        found = self.weights_[pos[items[inside]]]
        rows[inside] = found.toarray() if sp.issparse(found) else found
        return _spread(rows, kept, self.n_items)

    def _neighbours(self, kind: str, rows: IndexArg, k: int) -> Tuple[np.ndarray, np.ndarray]:
        """What ``similar_items`` / ``similar`` list: each item's largest learned weights
        ``W[item, :]``, the items a user who has it is pushed towards (``-1`` / 0 where fewer
        than ``k`` have a positive weight). An item-item model has no user vectors."""
        if kind != "item":
            raise InputError(f"a {type(self).__name__} model has no user vectors to compare",
                             hint="similar users need a warp or hybrid model")
        self.check_fitted()
        k = min(check_k(k), max(1, self.n_items))  # longer lists would be only padding
        items, scalar = as_indices(rows, self.n_items, "item")

        def weights(block):
            out = self._weight_rows(block)
            out[out <= 0] = np.nan  # only positive weights point to similar items
            return out

        itself = sp.identity(self.n_items, dtype=np.float32, format="csr")
        out_items = np.full((len(items), k), -1, dtype=np.int64)
        out_scores = np.zeros((len(items), k), dtype=np.float32)
        pos = 0
        for _, block_items, block_scores in iter_top_k(weights, self.n_items, items, k, exclude=itself):
            out_items[pos:pos + len(block_items)] = block_items
            out_scores[pos:pos + len(block_items)] = np.where(block_items >= 0, block_scores, 0.0)
            pos += len(block_items)
        return (out_items[0], out_scores[0]) if scalar else (out_items, out_scores)

    # -- fold-in: a new user's history times the same weights -------------------------------
    def fold_in(self, history, *, epochs: Optional[int] = None, user_features=None,
                progress: Optional[Progress] = None, user_ids: Optional[Sequence] = None) -> "ItemSimilarity":
        """Add the users of ``history`` (as :meth:`WARP.fold_in` takes it) without refitting
        (in place; returns ``self``).

        An item-item model scores a user from their history alone, so folding in is exact:
        new users are appended with their history as training row, known users get the
        history added to their training items, and they are scored as if they had been in
        the training data. ``W`` does not change. ``epochs`` is accepted for the common
        signature and ignored (nothing is iterated).
        """
        self.check_fitted()
        refuse_features(self, user_features)
        added = add_history(self, history, user_ids=user_ids)
        self.fold_in_summary_: Dict[str, Any] = added["summary"]
        log_fold_in(progress or SILENT, self.fold_in_summary_)
        return self

    def append_users(self, ids, user_features=None) -> None:
        if user_features is not None:
            raise InputError("user features need a hybrid model", hint="train a hybrid model (`model=hybrid`)")
        append_user_ids(self, ids)

    # -- persistence -------------------------------------------------------------------------
    @classmethod
    def _sparse_file(cls, params: Dict[str, Any], n_items: int) -> bool:
        """Whether a file of this class with ``params`` over ``n_items`` items holds ``W`` as
        CSR arrays (else one dense array; EASE's sparsified weights are CSR)."""
        return not cls._dense_weights

    def get_arrays(self) -> Dict[str, np.ndarray]:
        out = {"item_counts": self.item_counts_}
        if self._dense_weights:  # a model that may cover fewer items says which
            kept = self.kept_items_
            out["kept_items"] = (np.arange(self.n_items) if kept is None else kept).astype(index_dtype(self.n_items))
        if sp.issparse(self.weights_):
            # the fewest bytes that lose nothing: uint16 indices below 65,536 items, float16
            # values when the fit rounded them so (EASE's sparsified weights)
            indptr, indices, data = compact_csr_arrays(self.weights_, half=self._float16_weights)
            out.update(weights_indptr=indptr, weights_indices=indices, weights_data=data)
        else:
            out["weights"] = self.weights_
        return out

    @classmethod
    def array_spec(cls, params: Dict[str, Any], n_users: int, n_items: int) -> Dict[str, Tuple[str, Tuple]]:
        """Kind and shape of each saved array (``None``: any size), checked before loading."""
        spec = {"item_counts": ("fiu", (n_items,))}
        if cls._dense_weights:
            spec["kept_items"] = ("iu", (None,))
        if cls._sparse_file(params, n_items):
            # with kept items, W covers only them: its size is checked against them on loading
            spec.update(weights_indptr=("iu", (None,) if cls._dense_weights else (n_items + 1,)),
                        weights_indices=("iu", (None,)), weights_data=("f", (None,)))
        else:
            spec["weights"] = ("f", (None, None))
        return spec

    def set_arrays(self, arrays: Dict[str, np.ndarray]) -> None:
        counts = np.ascontiguousarray(arrays["item_counts"], dtype=np.float32)
        check_shape(counts, (self.n_items,), "item counts")
        check_counts(counts, "item counts")
        n = self.n_items
        if self._dense_weights:
            kept = np.asarray(arrays["kept_items"], dtype=np.int64)
            if kept.ndim != 1 or (len(kept) and (kept.min() < 0 or kept.max() >= self.n_items
                                                  or np.any(np.diff(kept) <= 0))):
                raise ValueError("kept items are not increasing item indices")
            self.kept_items_ = None if len(kept) == self.n_items else kept
            n = len(kept)
        else:
            self.kept_items_ = None
        if "weights" in arrays:
            weights = arrays["weights"]
            check_shape(weights, (n, n), "weights")
        else:
            # widened before the checks (a narrow type's differences wrap around); float16
            # values widen exactly to the float32 the fit scored with
            indptr = arrays["weights_indptr"].astype(np.int64)
            indices = arrays["weights_indices"].astype(np.int64)
            data = arrays["weights_data"].astype(np.float32)
            check_csr(indptr, indices, (n, n), "weights")
            check_shape(data, indices.shape, "weight values")
            weights = sp.csr_matrix((data, indices.astype(np.int32), indptr), shape=(n, n))
        weights = _as_weights(weights, weights.shape[0])
        check_finite(weights.data if sp.issparse(weights) else weights, "weights")
        self.weights_ = weights
        self.item_counts_ = counts


#: The hold-out's salt of the item-item families' choice (they draw no random numbers).
SELECTION_SEED = 0
#: The cut-off of the hold-out's precision the item-item families choose their settings by.
SELECTION_K = 10


def history_scores(hist: sp.csr_matrix, weights, kept: Optional[np.ndarray], n_items: int) -> np.ndarray:
    """``hist @ W`` as a C-contiguous float32 array (hist: CSR rows of histories over every
    item); when ``W`` covers only ``kept`` items, the others score NaN (never ranked)."""
    if kept is not None:
        hist = hist[:, kept]
    if sp.issparse(weights):
        hist = sp.csr_matrix(hist)
        scores = np.empty((hist.shape[0], weights.shape[1]), dtype=np.float32)
        indptr = weights.indptr.astype(np.int64, copy=False)
        history_times_weights(hist.indptr.astype(np.int64, copy=False), hist.indices.astype(np.int32, copy=False),
                              hist.data.astype(np.float32, copy=False), indptr[:-1], indptr[1:],
                              weights.indices.astype(np.int32, copy=False),
                              weights.data.astype(np.float32, copy=False), scores)
    else:
        scores = np.ascontiguousarray(hist @ weights, dtype=np.float32)
    return scores if kept is None else _spread(scores, kept, n_items)


def popular_when_cold(scores: np.ndarray, item_counts: np.ndarray) -> np.ndarray:
    """``scores`` with the rows that are all zero (NaN off the kept items) replaced by
    ``item_counts``, in place.

    No history, or a history whose items carry no learned weight (SLIM rows left empty,
    EASE items outside ``max_items``): all-zero scores would rank items in file order, so
    such users get popularity instead."""
    cold = ~np.any(np.abs(scores) > 0, axis=1)  # NaN compares False: a kept-items-only zero row is cold
    if cold.any():
        scores[cold] = item_counts
    return scores


#: Most entries of a weights matrix the hold-out scores densified (64 MB of float32).
DENSE_SCORING_ENTRIES = 2**24


class HistoryRows:
    """The rows of ``history`` each scoring call of a hold-out asks for, sliced once and kept
    for every candidate (:class:`~mrec_warp.models.early_stopping.HoldoutScorer` asks for the
    same calls of the same users each time), with the popularity a cold row is ranked by."""

    def __init__(self, history: sp.csr_matrix) -> None:
        self.history = history
        self.popularity = np.bincount(history.indices, minlength=history.shape[1]).astype(np.float32)
        self._calls: Dict[bytes, Tuple[sp.csr_matrix, np.ndarray, np.ndarray, np.ndarray]] = {}

    def __call__(self, rows: np.ndarray) -> Tuple[sp.csr_matrix, np.ndarray, np.ndarray, np.ndarray]:
        """The histories of ``rows``: CSR, and its indptr, indices and data as the kernels read them."""
        key = np.asarray(rows, dtype=np.int64).tobytes()
        call = self._calls.get(key)
        if call is None:
            hist = sp.csr_matrix(self.history[rows])
            call = self._calls[key] = (hist, hist.indptr.astype(np.int64), hist.indices.astype(np.int32),
                                       hist.data.astype(np.float32))
        return call


def _scored(scores: np.ndarray, popularity: np.ndarray, out: Optional[np.ndarray]) -> np.ndarray:
    scores = popular_when_cold(scores, popularity)
    if out is None:
        return scores
    out[...] = scores
    return out


def weights_scorer(history, weights, kept: Optional[np.ndarray] = None) -> Callable[..., np.ndarray]:
    """A hold-out candidate's ``score_fn(rows, out=buffer)``: the rows of ``history`` (a CSR
    matrix, or :class:`HistoryRows` shared by the candidates) times ``weights`` as the
    fitted model would score them (popularity of ``history``'s items for a cold row)."""
    rows_of = history if isinstance(history, HistoryRows) else HistoryRows(history)
    n = weights.shape[0]
    if sp.issparse(weights) and weights.nnz > n * n // 5 and n * n <= DENSE_SCORING_ENTRIES:
        # a history times dense rows: faster than the sparse rows' kernel from about a fifth
        # full (ml-100k, syn-counts, mls-4: scripts/bench_defaults.py's sets)
        weights = weights.toarray()

    def score(rows: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
        hist = rows_of(rows)[0]
        return _scored(history_scores(hist, weights, kept, rows_of.history.shape[1]), rows_of.popularity, out)

    return score


def scored_candidate(values: Dict[str, Any], scorer: HoldoutScorer, score_fn: Callable[..., np.ndarray],
                     watch: Stopwatch, note: str = "") -> Candidate:
    """A candidate of ``values`` scored now by ``scorer``; its seconds are ``watch``'s, its
    ``extra["hits"]`` each scored user's hits (:func:`beyond_noise` compares them) and
    ``extra["coverage"]`` its lists' coverage of the items (the summary warns of a collapse)."""
    score = scorer(score_fn)
    return Candidate(dict(values), score, watch.seconds, note, {"hits": scorer.user_hits(),
                                                                 "coverage": scorer.coverage()})


#: Standard errors of the paired difference of the users' hits by which a candidate must beat
#: the fixed values to replace them (a one-sided test at about 4%): a choice within the
#: hold-out's noise is no choice. On a 400-item set RP3beta's beta 0.3 beat 0.5 by 1.2% on the
#: hold-out (1.6 standard errors) and lost 2% on the test; on ml-100k item-kNN's bm25 beat
#: tf-idf by 5.5% (2.0 standard errors) and won 7% on the test.
NOISE_SE = 1.75


def beyond_noise(tried: Sequence[Candidate], fixed: Optional[Candidate]) -> Candidate:
    """The best candidate (:func:`~mrec_warp.models.selection.best`) when it beats ``fixed``
    by more than :data:`NOISE_SE` standard errors of the users' paired hits, else ``fixed``."""
    top = best(tried)
    if fixed is None or top is fixed or "hits" not in top.extra or "hits" not in fixed.extra:
        return top
    if clearly_above(top.extra["hits"], fixed.extra["hits"], NOISE_SE):
        return top
    # on the line of the setting passed over, which the log prints after the fixed values' line
    if not top.extra.get(PASSED_OVER):
        top.note = (top.note + "; " if top.note else "") + "within the hold-out's noise of the fixed values, which are kept"
        top.extra[PASSED_OVER] = True
    return fixed


def _spread(block: np.ndarray, kept: np.ndarray, n_items: int) -> np.ndarray:
    """Columns of ``block`` placed at ``kept`` in an (n, n_items) array of NaN."""
    out = np.full((block.shape[0], n_items), np.nan, dtype=np.float32)
    out[:, kept] = block
    return out


def _as_weights(weights, n_items: int):
    """``W`` in the form scoring wants: float32 CSR with sorted indices, or C-contiguous float32."""
    if sp.issparse(weights):
        weights = sp.csr_matrix(weights, dtype=np.float32)
        weights.sort_indices()
    else:
        weights = np.ascontiguousarray(weights, dtype=np.float32)
    if weights.shape != (n_items, n_items):
        raise ValueError(f"weights are {weights.shape}, expected ({n_items}, {n_items})")
    return weights


class ItemProduct(NamedTuple):
    """Rows of ``left @ right`` (CSR, float64), each column times ``column_scale`` (``None``:
    1), not computed yet: :func:`nested_top_k` ranks each row as the product makes it,
    without storing the product (item-kNN's similarities, RP3beta's walks)."""

    left: sp.csr_matrix
    right: sp.csr_matrix
    column_scale: Optional[np.ndarray] = None


class ScaledRows(NamedTuple):
    """Stored weights (CSR, float64) whose columns are to be multiplied by ``column_scale``
    as they are ranked, without a scaled copy (RP3beta's betas share one walk product)."""

    rows: sp.csr_matrix
    column_scale: np.ndarray


def nested_top_k(block, start: int, counts: Sequence[int]) -> Tuple[sp.csr_matrix, np.ndarray]:
    """Each row's largest positive entries of a sparse block of weights, at every count.

    ``block``: the weights, CSR, :class:`ScaledRows`, or an :class:`ItemProduct` that makes
    them (the same entries and ties as ranking the product scipy would store). Row ``r`` is
    item ``start + r`` and never keeps its own column. For each count ``k`` of ``counts``
    (ascending, distinct), a row keeps its ``k`` largest positive entries (all of them when
    it has fewer; ties at the k-th value go to the entry stored first), and the sets nest.
    Returns the largest count's weights (float32 CSR: each row's entries class by class,
    each class in stored order, so a smaller count's weights are a prefix of every row; with
    one count, a product's dense enough rows come in column order) and each entry's class:
    the index in ``counts`` of the smallest count that keeps it (:func:`keep_classes` cuts
    the weights of any of the counts).
    """
    counts_arr = np.asarray(counts, dtype=np.int64)
    if isinstance(block, ItemProduct):
        left, right = sp.csr_matrix(block.left), sp.csr_matrix(block.right)
        if left.shape[1] != right.shape[0]:
            raise ValueError(f"A's columns must be rows of B: {left.shape} @ {right.shape}")
        n_rows, n_cols = left.shape[0], right.shape[1]
        # a row of the product stores at most its factors' entries, and never more than the columns
        per_row = np.minimum(np.bincount(np.repeat(np.arange(n_rows), np.diff(left.indptr)),
                                         weights=np.diff(right.indptr)[left.indices], minlength=n_rows),
                             n_cols).astype(np.int64)
    else:
        scale = np.zeros(0)
        if isinstance(block, ScaledRows):
            block, scale = block.rows, np.ascontiguousarray(block.column_scale, dtype=np.float64)
        block = sp.csr_matrix(block)
        n_rows, n_cols = block.shape
        per_row = np.diff(block.indptr)
    room = int(np.minimum(per_row, counts_arr[-1]).sum())
    indices = np.empty(room, dtype=np.int32)
    data = np.empty(room, dtype=np.float32)
    classes = np.empty(room, dtype=np.uint8)
    written = np.zeros(n_rows, dtype=np.int64)
    if isinstance(block, ItemProduct):
        scale = np.zeros(0) if block.column_scale is None else np.ascontiguousarray(block.column_scale, np.float64)
        if len(scale) and len(scale) != n_cols:
            raise ValueError(f"column_scale has {len(scale)} values for {n_cols} columns")
        product_top_k_classes(left.indptr.astype(np.int64, copy=False), left.indices.astype(np.int32, copy=False),
                              np.ascontiguousarray(left.data, dtype=np.float64),
                              right.indptr.astype(np.int64, copy=False), right.indices.astype(np.int32, copy=False),
                              np.ascontiguousarray(right.data, dtype=np.float64), scale, n_cols, int(start), counts_arr,
                              indices, data, classes, written)
    else:
        top_k_classes(block.indptr.astype(np.int64, copy=False), block.indices.astype(np.int32, copy=False),
                      np.ascontiguousarray(block.data, dtype=np.float64), scale, int(start), counts_arr, indices,
                      data, classes, written)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(written, out=indptr[1:])
    total = int(indptr[-1])
    if total < 0.9 * room:  # the room was an upper bound far from the kept entries: free the rest
        data, indices, classes = data[:total].copy(), indices[:total].copy(), classes[:total].copy()
    weights = sp.csr_matrix((data[:total], indices[:total], indptr), shape=(n_rows, n_cols))
    return weights, classes[:total]


#: ``rows(start, stop)``: the weights of items ``start:stop`` over every item, stored (CSR,
#: float64; :class:`ScaledRows`) or to be made as they are ranked (:class:`ItemProduct`).
WeightRows = Callable[[int, int], Union[sp.csr_matrix, ScaledRows, ItemProduct]]


def keep_classes(weights: sp.csr_matrix, classes: np.ndarray, last: int) -> sp.csr_matrix:
    """The entries of :func:`nested_top_k`'s ``weights`` whose class is at most ``last``:
    the weights at ``counts[last]`` neighbours, float32 CSR."""
    keep = classes <= last
    rows = np.repeat(np.arange(weights.shape[0], dtype=np.int32), np.diff(weights.indptr))
    indptr = np.zeros(weights.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows[keep], minlength=weights.shape[0]), out=indptr[1:])
    return sp.csr_matrix((weights.data[keep], weights.indices[keep], indptr), shape=weights.shape)


#: Bytes an entry of the items' product costs while a block of it is ranked: its index and
#: float64 value, scipy's working copy of them, and what the selection kernel writes.
ENTRY_BYTES = 24


def item_blocks(history: sp.csr_matrix, memory_mb: float, workers: int = 1) -> List[Tuple[int, int]]:
    """Item ranges ``(start, stop)`` whose rows of the items' product (the co-occurrences of
    ``history``, users x items) fit ``memory_mb`` each, a few per worker so that every one has
    work to the end. An item's row stores at most its users' items in all (the multiply-adds
    that make it) and never more than the items: ranges follow that bound, so a large sparse
    catalogue runs in few blocks (each block costs scipy a pass over every item's column) and
    a dense one in small ones."""
    n = history.shape[1]
    per_user = np.diff(history.indptr)
    reach = np.bincount(history.indices, weights=np.repeat(per_user.astype(np.float64), per_user), minlength=n)
    cost = np.cumsum((np.minimum(reach, n) + 1.0) * ENTRY_BYTES)
    budget = max(float(memory_mb), 0.0) * 2**20
    most = n if workers <= 1 else max(1, -(-n // (4 * workers)))
    blocks: List[Tuple[int, int]] = []
    start, spent = 0, 0.0
    while start < n:
        stop = min(max(int(np.searchsorted(cost, spent + budget, side="right")), start + 1), start + most, n)
        blocks.append((start, stop))
        spent, start = float(cost[stop - 1]), stop
    return blocks


def top_k_by_blocks(rows: WeightRows, history: sp.csr_matrix, k: int, memory_mb: float,
                    n_jobs, progress: Progress, desc: str) -> sp.csr_matrix:
    """``W`` (n_items x n_items CSR): each item's ``k`` largest positive weights (its own
    excluded, :func:`nested_top_k`), built a block of items at a time, on threads.

    ``rows(start, stop)`` returns the sparse float64 weights of items ``start:stop`` over
    every item (:data:`WeightRows`), the product of ``history``'s co-occurrences
    (:func:`item_blocks` sizes the ranges by them). The selection kernels release the GIL.
    """
    def run(start: int, stop: int) -> sp.csr_matrix:
        return nested_top_k(rows(start, stop), start, [max(1, int(k))])[0]

    blocks = item_blocks(history, memory_mb, effective_n_jobs(n_jobs))
    with Workers("threads", n_jobs=n_jobs) as be:
        parts = list(progress.iterate(be.map(run, blocks), total=len(blocks), desc=desc, unit="block"))
    return sp.vstack(parts, format="csr") if parts else sp.csr_matrix((0, 0), dtype=np.float32)


class RankedWeights:
    """Each item's largest weights at several neighbour counts, from one pass over the
    items (:func:`nested_top_k`): the hold-out's candidates of ``neighbours``, each the
    fit's weights at its count (the same entries, ties included). A row's entries are
    stored class by class, so the weights at a count are a prefix of each row: scored, or
    made dense, straight from the ranked arrays (:meth:`scorer`).
    """

    def __init__(self, weights: sp.csr_matrix, classes: np.ndarray, counts: Sequence[int]) -> None:
        self.weights = weights
        self.classes = classes
        self.counts = [int(k) for k in counts]
        self.starts = weights.indptr[:-1].astype(np.int64)
        self.lengths = np.diff(weights.indptr).astype(np.int64)
        self.indices = weights.indices.astype(np.int32, copy=False)
        self.data = weights.data.astype(np.float32, copy=False)

    @classmethod
    def build(cls, rows: WeightRows, history: sp.csr_matrix, counts: Sequence[int],
              memory_mb: float, progress: Progress, desc: str) -> "RankedWeights":
        """The rows' largest positive entries (each item's own excluded) at every count of
        ``counts``, a block of items at a time (the product of ``history``'s co-occurrences)."""
        n_items = history.shape[1]
        ordered = sorted({max(1, int(k)) for k in counts})
        parts = [nested_top_k(rows(start, stop), start, ordered)
                 for start, stop in progress.iterate(item_blocks(history, memory_mb), desc=desc, unit="block",
                                                     lines=False)]
        if not parts:
            return cls(sp.csr_matrix((0, n_items), dtype=np.float32), np.zeros(0, dtype=np.uint8), ordered)
        weights = sp.vstack([w for w, _ in parts], format="csr")
        return cls(weights, np.concatenate([c for _, c in parts]), ordered)

    def ends(self, k: int) -> np.ndarray:
        """Where each row's weights at ``k`` neighbours (one of the counts built) end."""
        return self.starts + np.minimum(self.lengths, self.counts[self.counts.index(max(1, int(k)))])

    def top(self, k: int) -> sp.csr_matrix:
        """The weights the fit keeps with ``k`` neighbours (one of the counts built), float32 CSR."""
        return keep_classes(self.weights, self.classes, self.counts.index(max(1, int(k))))

    def scorer(self, k: int, history: HistoryRows) -> Callable[..., np.ndarray]:
        """:func:`weights_scorer` of the weights at ``k`` neighbours (the same scores), read
        from the ranked arrays, or written dense from them once where :func:`weights_scorer`
        would densify; the scores go straight into the caller's buffer and a cold row is
        found while it is in cache (the kernels' ``nonzero`` flags)."""
        ends = self.ends(k)
        n, n_cols = self.weights.shape
        dense: Optional[np.ndarray] = None
        if int((ends - self.starts).sum()) > n * n // 5 and n * n <= DENSE_SCORING_ENTRIES:
            dense = np.empty((n, n_cols), dtype=np.float32)
            rows_into_dense(self.starts, ends, self.indices, self.data, dense)

        def score(rows: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
            _, indptr, indices, data = history(rows)
            n_rows = len(indptr) - 1
            direct = (out is not None and out.dtype == np.float32 and out.shape == (n_rows, n_cols)
                      and out.flags.c_contiguous)
            scores = out if direct else np.empty((n_rows, n_cols), dtype=np.float32)
            nonzero = np.empty(n_rows, dtype=np.uint8)
            if dense is not None:
                history_times_dense(indptr, indices, data, dense, scores, nonzero)
            else:
                history_times_weights(indptr, indices, data, self.starts, ends, self.indices, self.data, scores,
                                      nonzero)
            cold = nonzero == 0
            if cold.any():
                scores[cold] = history.popularity
            if out is None or direct:
                return scores
            out[...] = scores
            return out

        return score


#: Seconds per co-occurrence (``sum_u n_u^2``: the multiply-adds of the items' sparse
#: product) and per entry the product stores (at most ``items^2``; what the selection kernel
#: ranks), one thread: fitted to item-kNN's and RP3beta's fixed fits on the selection suite's
#: eight sets (0.01-0.44 s; each estimate within 0.5-2x of its fit, 2 shared cores).
PRODUCT_RATE = 3e-9
KEPT_RATE = 1.5e-8


def cooccurrence_cost(shape: TrialShape) -> float:
    """Estimated seconds of building weights from the items' co-occurrences (item-kNN's
    similarities, RP3beta's walks): the sparse product, then each item's largest entries."""
    return PRODUCT_RATE * shape.cooc + KEPT_RATE * min(shape.cooc, float(shape.items) * shape.items)


def kinds_affordable(history: sp.csr_matrix) -> bool:
    """Whether the hold-out can afford every kind of weights (item-kNN's similarities,
    RP3beta's betas), each one pass over the items' co-occurrences, about one fit: on a small
    catalogue (at most :data:`DENSE_SCORING_ENTRIES` item pairs) or where items co-occur
    sparsely (``sum_u n_u^2`` at most an eighth of the items squared) a pass is cheap; on a
    large catalogue that co-occurs densely (MovieLens' 9k films rated by few users) only the
    given kind is tried, and the neighbour count chosen."""
    n = history.shape[1]
    per_user = np.diff(history.indptr).astype(np.float64)
    return n * n <= DENSE_SCORING_ENTRIES or float((per_user ** 2).sum()) <= n * n / 8


def kind_then_count(kinds: Sequence[Any], build: Callable[[Any], RankedWeights], counts: Sequence[int],
                    values: Callable[[Any, int], Dict[str, Any]], history: sp.csr_matrix, scorer: HoldoutScorer,
                    finish: Optional[Callable[[Any], Any]] = None, ordered_kinds: bool = False) -> List[Candidate]:
    """The hold-out's candidates of a family whose weights are each item's largest ones of
    some kind (item-kNN's similarity, RP3beta's beta): the kinds at the first count, then
    the other counts with the best kind beyond the noise (:func:`beyond_noise`): a search one
    parameter at a time, the fixed values first (the first kind alone where the others are
    not affordable, :func:`kinds_affordable`). With ``ordered_kinds`` (RP3beta's betas) the
    kinds are walked from the first one (:func:`~mrec_warp.models.selection.walk`): down
    while the hold-out's precision rises, else up. Each kind is built once at every count
    (``build(kind)``, :class:`RankedWeights`), so a count costs only its scoring;
    ``values(kind, count)``: the candidate's selected values; ``finish``: what the fit does to
    the kept weights (RP3beta's row scaling)."""
    first = kinds[0]
    if not kinds_affordable(history):
        kinds = kinds[:1]
    tried: List[Candidate] = []
    tried_kinds: List[Any] = []
    built: Dict[int, RankedWeights] = {}  # the fixed kind's and the one in force: no more in memory
    chosen = 0

    rows_of = HistoryRows(history)

    def score(kind: Any, ranked: RankedWeights, k: int, watch: Stopwatch) -> float:
        score_fn = ranked.scorer(k, rows_of) if finish is None else weights_scorer(rows_of, finish(ranked.top(k)))
        tried.append(scored_candidate(values(kind, k), scorer, score_fn, watch))
        return tried[-1].score

    def evaluate_kind(kind: Any) -> float:
        nonlocal built, chosen
        watch = Stopwatch()  # the build is the kind's cost
        i = len(tried)
        built[i] = build(kind)
        tried_kinds.append(kind)
        score(kind, built[i], counts[0], watch)
        chosen = tried.index(beyond_noise(tried, tried[0]))
        built = {j: r for j, r in built.items() if j in (0, chosen)}
        return tried[-1].score

    if ordered_kinds and len(kinds) > 1:
        order = sorted(kinds)
        walk(len(order), order.index(first), lambda i: evaluate_kind(order[i]))
    else:
        for kind in kinds:
            evaluate_kind(kind)
    kind, ranked = tried_kinds[chosen], built[chosen]
    for k in counts[1:]:  # every count: cheap once the kind is built, and not unimodal on every set
        score(kind, ranked, k, Stopwatch())
    return tried


def distinct_counts(grid: Sequence[int], fixed: int, n_items: int) -> List[int]:
    """``fixed``, then the counts of ``grid`` that keep a different number of neighbours
    among ``n_items`` items (at most ``n_items - 1`` exist): no setting is scored twice."""
    most = max(n_items - 1, 1)
    seen = {min(fixed, most)}
    out = [fixed]
    for k in grid:
        if min(k, most) not in seen:
            seen.add(min(k, most))
            out.append(k)
    return out


def scale_rows(weights):
    """Each row of ``weights`` (dense or CSR) scaled to sum 1 (an empty row left as it is)."""
    sums = np.asarray(weights.sum(axis=1), dtype=np.float64).ravel()
    factors = 1.0 / np.where(sums > 0, sums, 1.0)
    if sp.issparse(weights):
        return sp.csr_matrix(sp.diags(factors) @ weights, dtype=np.float32)
    return (weights * factors[:, None]).astype(np.float32)
