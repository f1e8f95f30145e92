"""Early stopping of the models trained in epochs (WARP, its hybrid, WRMF): the hold-out,
its scoring, the epoch loop with its patience, and the refit on all the data.

* **The hold-out** (:func:`holdout_split`, :func:`sample_users`, :class:`Holdout`): per user,
  a share of the pairs, and the users scored, both drawn by keys of the ids so that they
  follow the pairs, not the order of a file's rows.
* **Its scoring**: :class:`HoldoutScorer`, which prepares everything once for the many
  evaluations of a fit, or, for a catalogue too wide for its buffers on several threads, the
  general top-k path (:func:`precision_at_k`): the same bits either way.
* **The epoch loop** (:func:`run_epochs`): evaluate every ``eval_every`` passes, stop when the
  patience runs out, put the best pass's snapshot back.
* **The refit** (:func:`fit_or_select`, :func:`refit_all`): on all the data for the best
  number of passes, from scratch or from a training state the fit kept
  (:class:`RefitStates`, WARP's ``refit_reuse``).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..errors import InputError
from ..kernels.topk import topk_masked
from ..memory import available_bytes, check_memory
from ..seeds import spawn_seed
from ..topk import BLOCK_FLOATS, SCORE_ROWS, KernelExclusion, iter_top_k
from ..workers import one_blas_thread, thread_map
from .foldin import as_aligned_csr
from .declared import Param
from .selection import value_of


#: splitmix64's constants: a cheap, well-mixed 64-bit hash of a 64-bit word.
_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, element-wise on uint64 (wrapping arithmetic is the point)."""
    with np.errstate(over="ignore"):
        x = x + _MIX[0]
        x = (x ^ (x >> np.uint64(30))) * _MIX[1]
        x = (x ^ (x >> np.uint64(27))) * _MIX[2]
        return x ^ (x >> np.uint64(31))


def id_keys(ids: Optional[Union[Sequence, np.ndarray]], n: int) -> np.ndarray:
    """A 64-bit key per id that depends on the id's text only (its position: without ``ids``).

    The keys let a random choice over rows and columns follow the ids rather than the
    order in which a file happened to list them (pandas' stable ``hash_array``)."""
    if ids is None or len(ids) != n:
        return _mix64(np.arange(n, dtype=np.uint64))
    # the same hashes as with pandas' default categorize=True, which first finds the unique
    # values: wasted on ids, unique by construction (8 ms of 9 for 20k ids)
    if isinstance(ids, np.ndarray) and ids.dtype.kind == "U":  # already the text: no round trip
        return pd.util.hash_array(ids.astype(object), categorize=False)
    return pd.util.hash_array(np.asarray(ids, dtype=object).astype(str).astype(object), categorize=False)


def pair_keys(csr: sp.csr_matrix, salt: int, user_keys: Optional[np.ndarray] = None,
              item_keys: Optional[np.ndarray] = None) -> np.ndarray:
    """A pseudo-random uint64 per stored entry, a function of ``salt`` and the entry's
    (user key, item key) only: the same pairs get the same keys in any row order."""
    n_users, n_items = csr.shape
    uk = user_keys if user_keys is not None else id_keys(None, n_users)
    ik = item_keys if item_keys is not None else id_keys(None, n_items)
    rows = np.repeat(np.arange(n_users), np.diff(csr.indptr))
    return _mix64(_mix64(uk[rows] ^ np.uint64(salt)) ^ ik[csr.indices])


def held_out_counts(counts: np.ndarray, fraction: float) -> np.ndarray:
    """Pairs :func:`holdout_split` holds out of users with ``counts`` pairs: ``round(fraction * n)``,
    at least 1 and at most n - 1; none of a user with fewer than 2."""
    counts = np.asarray(counts, dtype=np.int64)
    return np.where(counts >= 2, np.clip(np.floor(fraction * counts + 0.5), 1, counts - 1), 0).astype(np.int64)


def holdout_split(csr: sp.csr_matrix, fraction: float, rng: np.random.Generator,
                  user_keys: Optional[np.ndarray] = None,
                  item_keys: Optional[np.ndarray] = None) -> Tuple[sp.csr_matrix, sp.csr_matrix]:
    """Per user, move ``round(fraction * n)`` random items (at least 1, at most n - 1) to validation.

    Users with fewer than 2 items keep them all for fitting. Which items go is decided by
    :func:`pair_keys` (one draw of ``rng`` salts them): with ``user_keys`` / ``item_keys``
    from the ids (:func:`id_keys`), the held-out pairs depend on the seed and the pairs
    alone, not on the order of the file's rows (which sets the row and column numbers).
    Vectorised over all entries: the entries with the lowest keys within their row go to
    validation, so there is no per-user Python loop.
    """
    counts = np.diff(csr.indptr)
    n_val = held_out_counts(counts, fraction)
    rows = np.repeat(np.arange(csr.shape[0]), counts)
    keys = pair_keys(csr, int(rng.integers(0, 2**63)), user_keys, item_keys)
    order = _row_then_key_order(rows, keys, csr.shape[0])
    rank_in_row = np.empty(csr.nnz, dtype=np.int64)
    rank_in_row[order] = np.arange(csr.nnz) - np.repeat(csr.indptr[:-1], counts)
    to_val = rank_in_row < n_val[rows]
    if csr.has_canonical_format:
        # each part keeps the rows' entries in their order (sorted, no duplicates): its CSR
        # arrays are the masked ones, with no COO round trip and no sort
        index = np.int32 if max(csr.shape) < 2**31 and csr.nnz < 2**31 else np.int64
        return (_masked_rows(csr, ~to_val, counts - n_val, index),
                _masked_rows(csr, to_val, n_val, index))
    coo = csr.tocoo()
    fit = sp.csr_matrix((coo.data[~to_val], (coo.row[~to_val], coo.col[~to_val])), shape=csr.shape, dtype=np.float32)
    val = sp.csr_matrix((coo.data[to_val], (coo.row[to_val], coo.col[to_val])), shape=csr.shape, dtype=np.float32)
    fit.sort_indices()
    val.sort_indices()
    return fit, val


def _row_then_key_order(rows: np.ndarray, keys: np.ndarray, n_rows: int) -> np.ndarray:
    """``np.lexsort((keys, rows))``: the entries by row, then by key, ties by position.

    One sort of a single uint64 (the row in the high bits, the key's high bits below it) is
    about three times faster than the lexsort; where that key ties within a row (two keys
    alike in their top bits: rare) or the rows need more bits, the lexsort decides."""
    row_bits = max(int(n_rows - 1).bit_length(), 1)
    if row_bits > 32 or len(rows) == 0:
        return np.lexsort((keys, rows))
    combined = (rows.astype(np.uint64) << np.uint64(64 - row_bits)) | (keys >> np.uint64(row_bits))
    order = np.argsort(combined)
    ordered = combined[order]
    if np.any(ordered[1:] == ordered[:-1]):
        return np.lexsort((keys, rows))
    return order


def _masked_rows(csr: sp.csr_matrix, keep: np.ndarray, per_row: np.ndarray, index) -> sp.csr_matrix:
    """The entries of ``csr`` under ``keep`` (``per_row`` of them in each row), as float32 CSR."""
    indptr = np.zeros(csr.shape[0] + 1, dtype=index)
    np.cumsum(per_row, out=indptr[1:])
    out = sp.csr_matrix((csr.data[keep].astype(np.float32, copy=False), csr.indices[keep].astype(index, copy=False), indptr),
                        shape=csr.shape)
    out.has_sorted_indices = True
    return out


def sample_users(val: sp.csr_matrix, most: int, rng: np.random.Generator,
                 user_keys: Optional[np.ndarray] = None) -> np.ndarray:
    """The users early stopping scores: every user with a validation item, or, when there
    are more than ``most``, the ``most`` whose salted key (:func:`id_keys`) is lowest: a
    fixed sample for the whole fit that, like the split, follows the ids, not the row order."""
    users = np.flatnonzero(np.diff(val.indptr) > 0)
    if len(users) <= most:
        return users
    uk = user_keys if user_keys is not None else id_keys(None, val.shape[0])
    keys = _mix64(uk[users] ^ np.uint64(int(rng.integers(0, 2**63))))
    return np.sort(users[np.argsort(keys, kind="stable")[:most]])



@dataclass
class Holdout:
    """The hold-out a fit's passes are scored on (what :func:`run_epochs` takes as ``validation``).

    Attributes
    ----------
    fit : csr_matrix
        The pairs trained on, users x items: never recommended back.
    held_out : csr_matrix
        The held-out pairs, same shape: a recommended one is a hit, whatever its value.
    rng : numpy.random.Generator
        Draws the users scored when ``users`` is not given.
    users : int array, optional
        The users scored at every evaluation; by default up to ``model.validation_users``
        users of ``held_out`` (:func:`sample_users`, one fixed sample for the whole run).
    refit_states : RefitStates, optional
        Shown every pass with the best pass so far: it keeps training states a refit may start from.
    """

    fit: sp.csr_matrix
    held_out: sp.csr_matrix
    rng: np.random.Generator
    users: Optional[np.ndarray] = None
    refit_states: Optional[RefitStates] = None


#: The share of each user's pairs held out, and the most users scored, by default: early
#: stopping's, and the hold-out of a family that chooses settings without early stopping.
VALIDATION_FRACTION = 0.1
VALIDATION_USERS = 5000


def internal_holdout(model, csr: sp.csr_matrix, rng: np.random.Generator, validation=None) -> Holdout:
    """The hold-out a fit stops and chooses its settings on: ``validation`` (aligned to the
    model) with ``csr`` all fitted on, or ``model.validation_fraction`` of each user's pairs
    drawn with ``rng`` (:func:`holdout_split`); and the users scored (:func:`sample_users`,
    up to ``model.validation_users``). The split and the users are drawn by keys of the
    model's ids, so they follow the pairs, not the order of the file's rows; a family
    without those parameters uses :data:`VALIDATION_FRACTION` and :data:`VALIDATION_USERS`."""
    user_keys = id_keys(getattr(model, "user_ids", None), csr.shape[0])
    if validation is not None:
        val = as_aligned_csr(validation, model, "validation")
        fit_part = csr
    else:
        fraction = float(getattr(model, "validation_fraction", VALIDATION_FRACTION))
        fit_part, val = holdout_split(csr, fraction, rng, user_keys,
                                      id_keys(getattr(model, "item_ids", None), csr.shape[1]))
    users = sample_users(val, int(getattr(model, "validation_users", VALIDATION_USERS)), rng, user_keys)
    return Holdout(fit_part, val, rng, users)


def precision_at_k(
    score_fn: Callable[[np.ndarray], np.ndarray],
    n_items: int,
    exclude: sp.csr_matrix,
    truth: sp.csr_matrix,
    k: int = 10,
    users: Optional[np.ndarray] = None,
    n_jobs: int = 1,
) -> float:
    """Mean precision@k over ``users`` (default: every user with a ``truth`` item).

    Recommendations exclude the ``exclude`` items, as ``recommend`` does.
    """
    if users is None:
        users = np.flatnonzero(np.diff(truth.indptr) > 0)
    if len(users) == 0:
        return float("nan")
    hits = 0
    for block_users, items, _ in iter_top_k(score_fn, n_items, users, k, exclude=exclude, n_jobs=n_jobs):
        sub = truth[block_users]
        # an item is a hit when it appears in the user's truth row: test via a sparse lookup
        row_ids = np.repeat(np.arange(len(block_users)), k)
        flat = items.ravel()
        valid = flat >= 0
        # count hits, not values: a truth matrix may carry confidences (WARP's hold-out does)
        hits += int(np.count_nonzero(np.asarray(sub[row_ids[valid], flat[valid]])))
    return hits / (k * len(users))


_NO_MASK = np.zeros(0, dtype=np.uint8)
#: Largest table of the scored users' held-out items (scored users x items, a byte each: 16 MB)
#: a :class:`HoldoutScorer` counts hits on; beyond it, a binary search among the pairs' keys.
HIT_TABLE_ENTRIES = 2**24
#: Fewest scoring calls (of SCORE_ROWS users) a thread of :class:`HoldoutScorer` is given.
CALLS_PER_THREAD = 4


class HoldoutScorer:
    """Precision@``k`` of a model's scores on fixed ``users``, excluding ``exclude``'s items,
    with everything prepared once, on one thread or ``n_jobs``.

    Early stopping scores the same users against the same exclusions every pass (WARP: every
    epoch, patience 10). :func:`precision_at_k` goes through the general top-k path
    (:func:`mrec_warp.topk.iter_top_k`): a fresh score block of up to 64 MB per call (page
    faults every epoch, and a block far larger than the caches, written, biased and read
    again), the exclusion CSR converted again, and a sparse fancy-index per block to count the
    hits. This scorer keeps one score buffer of :data:`~mrec_warp.topk.SCORE_ROWS` rows per
    thread (it stays in cache between the product, the bias and the top-k), the exclusion and
    the truth keys built once, and writes the top-k of all users into one array.

    The scores are the same bits: every call of the model's scoring still scores exactly
    ``SCORE_ROWS`` users on one BLAS thread, the user at list position ``p`` in row
    ``p % SCORE_ROWS``, the rows outside the list filled with the first user
    (:func:`mrec_warp.topk.grid_scores`), and the top-k is the same kernel; so the score of
    every evaluation, the pass early stopping picks and the fitted factors do not change,
    whatever the number of threads. With ``n_jobs`` > 1 the calls are dealt out to up to that
    many threads, each with its own buffer and at least :data:`CALLS_PER_THREAD` calls
    (BLAS and the top-k kernel release the GIL).

    Parameters
    ----------
    exclude : csr_matrix
        The fitting pairs (never recommended back), users x items.
    truth : csr_matrix
        The held-out pairs; every stored entry is a hit when recommended, whatever its value.
    users : int array
        The users scored (rows of both matrices), each once.
    k : int
    n_jobs : int
        Most threads scoring calls at once (``self.n_jobs``: the threads used).
    """

    def __init__(self, exclude: sp.csr_matrix, truth: sp.csr_matrix, users: np.ndarray, k: int,
                 n_jobs: int = 1) -> None:
        self.users = np.asarray(users, dtype=np.int64)
        self.k = int(k)
        self.n_items = int(truth.shape[1])
        self.exclusion = KernelExclusion.of(exclude)
        self.rows = np.where(self.users < self.exclusion.n_rows, self.users, -1).astype(np.int64)
        # a key per held-out pair of the scored users: position * n_items + item, sorted
        sub = sp.csr_matrix(truth[self.users])
        positions = np.repeat(np.arange(len(self.users), dtype=np.int64), np.diff(sub.indptr))
        self.truth_keys = np.sort(positions * self.n_items + sub.indices.astype(np.int64))
        # the same pairs as a table of the scored users x items when it is small: a hit is then
        # one lookup, not a binary search among the keys (the hits are counted every call)
        self.truth_table: Optional[np.ndarray] = None
        if len(self.users) * self.n_items <= HIT_TABLE_ENTRIES:
            self.truth_table = np.zeros((len(self.users), self.n_items), dtype=bool)
            self.truth_table[positions, sub.indices] = True
        self.items = np.empty((len(self.users), self.k), dtype=np.int64)
        self.top_scores = np.empty((len(self.users), self.k), dtype=np.float32)
        self._hits: Optional[np.ndarray] = None  # the last call's, counted once (its score and the paired test)
        self.starts = range(0, len(self.users), SCORE_ROWS)
        # a thread only for a share of at least CALLS_PER_THREAD calls: on fewer (1-3 calls on
        # ml-100k or ml-latest-small) handing them out cost more than it saved on a busy machine
        self.n_jobs = max(1, min(int(n_jobs), len(self.starts) // CALLS_PER_THREAD))
        # per thread: the rows of a call and its SCORE_ROWS x n_items scores (allocated at first use)
        self.buffers = [[np.empty(SCORE_ROWS, dtype=np.int64), None] for _ in range(self.n_jobs)]

    def _calls(self, score_fn: Callable[..., np.ndarray], thread: int) -> None:
        """Score every ``n_jobs``-th call, from call ``thread``, into the top-k arrays."""
        call_rows, scores_buffer = self.buffers[thread]
        if scores_buffer is None:
            scores_buffer = self.buffers[thread][1] = np.empty((SCORE_ROWS, self.n_items), dtype=np.float32)
        ex, n = self.exclusion, len(self.users)
        for start in self.starts[thread::self.n_jobs]:
            stop = min(start + SCORE_ROWS, n)
            call_rows.fill(self.users[0])  # as grid_scores fills a call's rows outside the list
            call_rows[:stop - start] = self.users[start:stop]
            scores = score_fn(call_rows, out=scores_buffer)
            topk_masked(scores[:stop - start], self.rows[start:stop], ex.indptr, ex.indices, _NO_MASK,
                        self.items[start:stop], self.top_scores[start:stop])

    def __call__(self, score_fn: Callable[..., np.ndarray]) -> float:
        """Precision@k of the scores ``score_fn(rows, out=buffer)`` writes (a model's ``score_users``)."""
        n = len(self.users)
        if n == 0:
            return float("nan")
        with one_blas_thread():
            if self.n_jobs == 1:
                self._calls(score_fn, 0)
            else:
                thread_map(lambda t: self._calls(score_fn, t), [(t,) for t in range(self.n_jobs)], self.n_jobs)
        self._hits = self._count_hits()
        return int(self._hits.sum()) / (self.k * n)

    def coverage(self) -> float:
        """The share of the items in at least one scored user's top k of the last call (a
        setting whose lists all look alike, popularity's, covers few)."""
        shown = self.items[self.items >= 0]
        # the distinct items counted on a tally of the catalogue: no sort or hash of the lists
        return float(np.count_nonzero(np.bincount(shown, minlength=self.n_items))) / self.n_items \
            if self.n_items else 0.0

    def user_hits(self) -> np.ndarray:
        """Each scored user's hits in the top k of the last call (what a choice between two
        settings compares user by user: :func:`~mrec_warp.models.selection.clearly_above`)."""
        if self._hits is None:
            self._hits = self._count_hits()
        return self._hits

    def _count_hits(self) -> np.ndarray:
        n = len(self.users)
        if self.truth_table is not None:
            hit = np.zeros(self.items.shape, dtype=bool)
            valid = self.items >= 0
            hit[valid] = self.truth_table[np.nonzero(valid)[0], self.items[valid]]
            return np.count_nonzero(hit, axis=1)
        valid = (self.items >= 0).ravel()
        position = np.repeat(np.arange(n, dtype=np.int64), self.k)[valid]
        keys = position * self.n_items + self.items.ravel()[valid]
        where = np.searchsorted(self.truth_keys, keys)
        found = where < len(self.truth_keys)
        match = np.zeros(len(keys), dtype=bool)
        match[found] = self.truth_keys[where[found]] == keys[found]
        return np.bincount(position[match], minlength=n)


def holdout_scorer(fit_part: sp.csr_matrix, val: sp.csr_matrix, users: np.ndarray, k: int,
                   n_jobs: int) -> Optional[HoldoutScorer]:
    """The prepared :class:`HoldoutScorer` (on ``n_jobs`` threads) when its buffers, one call of
    :data:`~mrec_warp.topk.SCORE_ROWS` users' scores per thread, are no larger than the blocks
    of the general path (:data:`~mrec_warp.topk.BLOCK_FLOATS` each) or there is one thread (as
    ever); else ``None``: the general :func:`precision_at_k`, whose blocks are bounded."""
    if n_jobs != 1 and SCORE_ROWS * int(val.shape[1]) > BLOCK_FLOATS:
        return None
    return HoldoutScorer(fit_part, val, users, k, n_jobs=n_jobs)


def run_epochs(
    model,
    step: Callable[[], Tuple[Dict[str, Any], str]],
    epochs: int,
    progress,
    callbacks: Sequence[Callable],
    validation: Optional[Holdout] = None,
    phase: str = "fit",
    unit: str = "epoch",
    n_jobs: int = 1,
    min_improvement: float = 0.0,
    first: int = 0,
) -> int:
    """Run up to ``epochs`` passes of ``step``; with ``validation``, early-stop and keep the best.

    ``step()`` runs one pass and returns ``(stats, text)``: numbers for the pass's log entry
    and what its progress line shows. With a :class:`Holdout`, every ``model.eval_every``
    passes, precision@``model.eval_k`` of ``model.score_users`` (the blocked BLAS top-k of
    :mod:`mrec_warp.topk`) on its users, excluding its ``fit`` pairs. The patience is counted in
    passes: training stops at the first evaluation ``model.patience`` or more passes after
    the last rise of the score (with ``eval_every`` 1, after ``patience`` evaluations
    without one), and the best-scoring snapshot (``model.snapshot`` / ``model.restore``)
    is put back. A rise counts for the patience when it beats the score of the previous
    counted rise by more than ``min_improvement`` of it (relative; 0: any rise), so that a
    plateau creeping up by noise-sized steps does not keep training alive. The hold-out's
    :class:`RefitStates`, if any, is shown every pass with the best pass so far. Log entries go to
    ``model.history_``, numbered from ``first + 1`` (a refit that goes on from pass
    ``first``); ``callbacks(model, logs)`` returning ``True`` stop training.

    Returns the best pass (with validation) or ``epochs``.
    """
    best_score, best_epoch, best_snap = -np.inf, 0, None
    scorer = None
    rise_score, rise_epoch = 0.0, 0  # the last rise that counted for the patience
    eval_users = None
    keeper = None
    if validation is not None:
        fit_part, val = validation.fit, validation.held_out
        eval_users = validation.users  # fit_or_select draws them by id; else drawn here
        if eval_users is None:
            eval_users = sample_users(val, int(model.validation_users), validation.rng)
        scorer = holdout_scorer(fit_part, val, eval_users, int(model.eval_k), n_jobs)
        keeper = validation.refit_states
    # a bar over the passes on a terminal (each pass logs its own line: no line per unit)
    for epoch in progress.iterate(range(first + 1, first + epochs + 1), total=epochs, desc=phase, unit=unit,
                                  lines=False):
        t0 = time.perf_counter()
        stats, text = step()
        logs: Dict[str, Any] = {"phase": phase, "epoch": epoch, "seconds": time.perf_counter() - t0, **stats}
        line = f"{phase} {unit} {epoch:3d}  {logs['seconds']:6.2f}s" + (f"  {text}" if text else "")
        evaluated = validation is not None and epoch % int(model.eval_every) == 0
        if evaluated:
            t1 = time.perf_counter()
            if scorer is not None:
                score = scorer(model.score_users)
            else:
                score = precision_at_k(model.score_users, model.n_items, fit_part, val, int(model.eval_k),
                                       users=eval_users, n_jobs=n_jobs)
            logs[f"val_precision@{model.eval_k}"] = score
            logs["eval_seconds"] = time.perf_counter() - t1  # what early stopping costs per evaluation
            improved = score > best_score
            line += f"  val P@{model.eval_k} {score:.4f}" + ("  *" if improved else "")
            if improved:
                best_score, best_epoch, best_snap = score, epoch, model.snapshot()
            if rise_epoch == 0 or score > rise_score * (1.0 + min_improvement):
                rise_score, rise_epoch = score, epoch
        if keeper is not None:
            keeper.after_epoch(model, epoch, best_epoch)
        progress.log(line)
        model.history_.append(logs)
        stop = any(bool(cb(model, logs)) for cb in callbacks)
        if stop or (evaluated and epoch - rise_epoch >= int(model.patience)):
            break
    if validation is not None and best_snap is not None:
        model.restore(best_snap)
        model.best_score_ = best_score
        progress.log(f"best {unit} {best_epoch}: val P@{model.eval_k} {best_score:.4f}")
        return best_epoch
    return epochs


def need(condition: bool, what: str) -> None:
    """A model parameter check: ``InputError("invalid parameter: <what>")`` unless ``condition``."""
    if not condition:
        raise InputError(f"invalid parameter: {what}")


def check_epochs(model) -> None:
    """The rule of every model trained in epochs (WARP, the hybrid, WRMF) that a declared
    range cannot say: ``epochs`` unset (early stopping) or at least 1."""
    need(model.epochs is None or int(model.epochs) >= 1,
         "epochs must be >= 1 (0 epochs would leave the random initial factors; leave it unset to "
         "choose the count by early stopping)")


# -- the refit -------------------------------------------------------------------------------
#: Successive grid epochs differ by at most this factor (and by at least 1).
GRID_RATIO = 1.25
#: Most training states kept at once (each: the factors and their accumulators).
MOST_STATES = 5


def grid_epochs(most: int):
    """The grid epochs up to ``most``: 1, 2, ..., then each ``floor(previous * GRID_RATIO)``."""
    e = 1
    while e <= most:
        yield e
        e = max(e + 1, int(math.floor(e * GRID_RATIO)))


class RefitStates:
    """Training states of a fit, kept where a refit reusing ``fraction`` of it may start
    (WARP's ``refit_reuse``).

    After early stopping on an internal hold-out has chosen ``best`` epochs, the refit trains
    on all the data. From scratch, its first epochs repeat what the fit's first epochs did on
    90% of the pairs. This keeps copies of the whole training state (factors, biases, the
    optimiser's accumulators, the sampler's state and the epoch count: the model's
    :meth:`~mrec_warp.models.factor_model.FactorModel.train_state`) at some of the fit's
    epochs, so that the refit can start at epoch ``k <= round(fraction * best)`` and train
    only the ``best - k`` epochs after it on all the data.

    ``best`` is known only when the fit stops, so states are kept on a geometric grid of
    epochs (each at most :data:`GRID_RATIO` times the one before: 1, 2, ..., 8, 10, 12, 15,
    18, 22, ...), and only those that can still be the start: the latest at or before the
    current best epoch's target and the ones after it, at most :data:`MOST_STATES` (when
    there are more, the one whose neighbours are closest by ratio goes, never the oldest or
    the newest). The start is then the latest kept epoch at or before
    ``round(fraction * best)``: never after the target, so the refit reuses at most the
    share the parameter says, and usually within a grid step of it (on the selection suite
    at 0.25, the start was at 19-24% of ``best``).

    Parameters
    ----------
    fraction : float
        The refit starts at the latest kept epoch at or before ``round(fraction * best)``.
    every_epoch : bool
        Keep a state after every epoch that can still be the start (the exact target,
        whatever the memory): for measuring, not for fits.
    """

    def __init__(self, fraction: float, every_epoch: bool = False, most: int = MOST_STATES) -> None:
        self.fraction = float(fraction)
        self.every_epoch = every_epoch
        self.most = int(most)
        self.states: Dict[int, Any] = {}
        self._grid = set()
        self._grid_top = 0

    def target(self, best: int) -> int:
        """The epoch a refit after ``best`` epochs would ideally start from (before ``best``)."""
        return min(int(round(self.fraction * best)), best - 1)

    def _on_grid(self, epoch: int) -> bool:
        if self.every_epoch:
            return True
        if epoch > self._grid_top:  # extend the grid (epochs only grow)
            self._grid_top = 2 * epoch
            self._grid = set(grid_epochs(self._grid_top))
        return epoch in self._grid

    def after_epoch(self, model, epoch: int, best: int) -> None:
        """Called after each fit epoch ``epoch`` (1-based) with the best epoch so far."""
        if self._on_grid(epoch):
            self.states[epoch] = model.train_state()
        floor = self._start_epoch(max(best, 1))
        for e in [e for e in self.states if floor is not None and e < floor]:
            del self.states[e]  # the final best is no earlier than this one: never a start again
        if not self.every_epoch and len(self.states) > self.most:
            # thin where the kept epochs are densest (by ratio), never the start or the newest
            kept = sorted(self.states)
            i = min(range(1, len(kept) - 1), key=lambda j: kept[j + 1] / kept[j - 1])
            del self.states[kept[i]]

    def _start_epoch(self, best: int) -> Optional[int]:
        target = self.target(best)
        below = [e for e in self.states if e <= target]
        return max(below) if below else None

    def start(self, best: int) -> Optional[Tuple[int, Any]]:
        """``(k, state)``: the kept state a refit of ``best`` epochs starts from, or ``None``
        (none kept at or before the target: the refit starts from scratch)."""
        k = self._start_epoch(best)
        return None if k is None else (k, self.states[k])


def _reuse(model) -> float:
    """The share of the fit a refit reuses (WARP's ``refit_reuse``; 0 for a model without it)."""
    return float(getattr(model, "refit_reuse", 0.0) or 0.0)


def _factor_bytes(model, n_users: int, n_items: int, copies: float) -> float:
    """Bytes of ``copies`` float32 copies of the factor rows (``model.factor_rows``)."""
    return 4.0 * float(value_of(model, "factors")) * model.factor_rows(n_users, n_items) * copies


def check_factor_memory(model, n_users: int, n_items: int) -> None:
    """Refuse, before allocating, factors that cannot fit in memory (``factors=1e9``).

    The estimate counts float32 factor rows (``model.factor_rows``) times ``model.factors``,
    times the copies the fit keeps (``model.STATE_COPIES``: WARP's adagrad accumulators
    double it), plus the best snapshot early stopping keeps, plus ``model.GRAM_COPIES``
    factors x factors matrices (WRMF's Gram matrix and solves): see
    :class:`~mrec_warp.models.factor_model.FactorModel`. The training states a reusing
    refit would keep are not counted: they are dropped when memory is short
    (:func:`refit_states_fit`), never a reason to refuse a fit.
    """
    rows = model.factor_rows(n_users, n_items)
    copies = model.STATE_COPIES + (1 if model.epochs is None else 0)
    d = float(value_of(model, "factors"))
    need = _factor_bytes(model, n_users, n_items, copies) + 4.0 * d * d * model.GRAM_COPIES
    check_memory(need, f"{int(d):,} factors for {rows:,} rows ({n_users:,} users and {n_items:,} items)",
                 "factors")


def refit_states_fit(model, n_users: int, n_items: int) -> bool:
    """Whether the training states a reusing refit keeps (up to
    :data:`MOST_STATES` + 1 of ``model.STATE_COPIES`` factor copies each) take
    at most half the memory still available: a saving in time, so never at the risk of
    running out (the refit then starts from scratch, as with ``refit_reuse=0``)."""
    need = _factor_bytes(model, n_users, n_items, (MOST_STATES + 1) * model.STATE_COPIES)
    return need <= 0.5 * available_bytes()


def fit_or_select(model, csr: sp.csr_matrix, validation, rng: np.random.Generator, progress,
                  callbacks: Sequence[Callable], unit: str = "epoch", warm_epochs: int = 0, **train_options) -> None:
    """Train ``model`` on ``csr``: ``model.epochs`` passes, or early stopping then a refit.

    With ``model.epochs`` set, exactly that many passes. Otherwise passes run on a hold-out
    split (``validation``, aligned to the model, or ``model.validation_fraction`` of each
    user's pairs drawn with ``rng``) until :func:`run_epochs` stops them, and, for an
    internal hold-out with ``model.refit``, the model trains on all of ``csr``: up to the best
    number of passes, from the fit's kept state after about ``refit_reuse`` of them or from
    scratch (:func:`refit_all`), or with ``warm_epochs`` > 0 that many more passes from
    the best snapshot with the optimiser's step sizes restarted (``model.restart_steps``).
    The model provides ``init_state``, ``train_epochs`` (given ``train_options`` on every call, e.g.
    WRMF's workers) and, for the warm refit, ``restart_steps``.
    """
    check_factor_memory(model, *csr.shape)
    model.refit_start_ = 0  # (a refit that reuses the fit's state sets it)
    if model.epochs is not None:
        model.init_state(*csr.shape, rng)
        model.train_epochs(csr, int(model.epochs), progress, callbacks, **train_options)
        model.best_epoch_ = int(model.epochs)
        return
    holdout = internal_holdout(model, csr, rng, validation)
    fit_part, val, users = holdout.fit, holdout.held_out, holdout.users
    init_seed = spawn_seed(rng)
    model.init_state(*csr.shape, np.random.default_rng(init_seed))
    reuse = _reuse(model)
    keeper = None
    if reuse > 0 and validation is None and model.refit and warm_epochs == 0:
        if refit_states_fit(model, *csr.shape):
            keeper = RefitStates(reuse)
        else:
            progress.log("the refit will start from scratch: the training states `refit_reuse` keeps would "
                         "take more than half the available memory")
    best = model.train_epochs(fit_part, int(model.max_epochs), progress, callbacks,
                              validation=Holdout(fit_part, val, rng, users, keeper), **train_options)
    if keeps_best(model, best, fit_part.nnz, csr.nnz, validation, progress, unit):
        return
    if warm_epochs > 0:
        # the factors are the best pass's; the sampler goes on from where it stopped
        progress.log(f"refitting on all training data: {warm_epochs} more {unit}s from {unit} {best}, "
                     "adagrad restarted")
        model.epochs_done_ = best
        model.restart_steps()
        model.train_epochs(csr, warm_epochs, progress, callbacks, phase="refit", **train_options)
    else:
        refit_all(model, csr, best, keeper, init_seed, progress, callbacks, unit, **train_options)


def keeps_best(model, best: int, fit_pairs: int, all_pairs: int, validation, progress, unit: str = "epoch") -> bool:
    """Record ``best`` as the model's best pass (``best_epoch_``) and say whether the fit
    ends there, with no refit: on a validation set of the user's (the fit is the model) or
    with ``refit`` off (the log says what the model was fitted on)."""
    model.best_epoch_ = best
    if validation is not None:
        return True
    if not model.refit:
        held_out = 1.0 - fit_pairs / max(all_pairs, 1)
        progress.log(f"no refit: keeping the best {unit}'s model ({unit} {best}), fitted on {fit_pairs:,} of the "
                     f"{all_pairs:,} pairs (the other {held_out:.0%} held out for validation)")
        return True
    return False


def refit_all(model, csr: sp.csr_matrix, best: int, keeper: Optional[RefitStates], init_seed: int, progress,
              callbacks: Sequence[Callable], unit: str = "epoch", **train_options) -> None:
    """The refit on all of ``csr`` for ``best`` passes in all: from the fit's training state
    at pass ``k`` (``keeper.start(best)``, :class:`RefitStates`) for the ``best - k`` passes
    after it, numbered ``k + 1 .. best``, or, with no state kept, from the fit's initial
    state (drawn again from ``init_seed``) for ``best`` passes. ``model.refit_start_`` is ``k``
    (0 from scratch)."""
    start = keeper.start(best) if keeper is not None else None
    if start is None or keeper is None:
        if keeper is not None:
            keeper.states.clear()  # none is a start: not held through the refit
        progress.log(f"refitting on all training data for {best} {unit}{'' if best == 1 else 's'}")
        model.init_state(*csr.shape, np.random.default_rng(init_seed))
        model.refit_start_ = 0
        model.train_epochs(csr, best, progress, callbacks, phase="refit", **train_options)
        return
    k, state = start
    del start
    keeper.states.clear()  # ``state`` is the only reference left: it goes once it is in the model
    progress.log(f"refitting on all training data: {unit}s {k + 1}-{best}, from the fit's state after {unit} {k}")
    model.set_train_state(state, copy=False)
    del state
    model.refit_start_ = k
    model.train_epochs(csr, best - k, progress, callbacks, phase="refit", first=k, **train_options)


def early_stopping_params(*, max_epochs: int, patience: int, eval_every: int, refit_help: str,
                          unit: str = "epoch", validation_users: int = 5000) -> Dict[str, Param]:
    """The declared parameters of early stopping (WARP, WRMF), by name, with a family's
    defaults; each class puts them in its ``__init__`` order."""
    units = unit + "s"
    return {p.name: p for p in (
        Param("epochs", int, None, f"Train exactly this many {units}, no early stopping (>= 1).", nullable=True,
              shown="early stopping"),
        Param("max_epochs", int, max_epochs, f"Most {units} early stopping runs.", low=1),
        Param("patience", int, patience, f"Stop at the first evaluation this many {units} after the last rise "
              "of the validation score.", low=1),
        Param("eval_every", int, eval_every, f"{units.capitalize()} between validation evaluations.", low=1),
        Param("eval_k", int, 10, "The k of the validation precision@k.", low=1, option=False),
        Param("validation_fraction", float, VALIDATION_FRACTION, "Share of each user's items held out for early stopping.",
              low=0, high=1, open=True),
        Param("validation_users", int, validation_users, "Most users (drawn at random) scored per validation "
              "evaluation.",
              low=1, option=False),
        Param("refit", bool, True, refit_help),
    )}

