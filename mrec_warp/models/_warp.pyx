# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""WARP / BPR stochastic gradient kernels for matrix factorisation.

Everything here runs without the GIL on typed memoryviews, so joblib's threading backend can
run several shards of one epoch at once on the same factor arrays (hogwild: updates are
lock-free; a lost update now and then is harmless to SGD). Each call owns its RNG state, so
one thread with a given seed is bit-for-bit reproducible.

The sampling rule is in ``_kernels.pxd`` (``warp_sample``), shared with the hybrid kernel.
With ``n_neg = n_items - |positives(u)|`` negatives and N negatives compared, the rank of
the positive among them is estimated as ``floor(n_neg / N)`` -- the paper's
``floor((Y - 1) / N)`` with ``Y - 1`` the number of negative labels -- and the hinge is
weighted by ``L(rank) = sum_{k <= rank} 1 / k``.
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint64_t

from mrec_warp.models._kernels cimport (
    rng_next, rng_below, prefetch_row, MW_PREFETCH, pick_pair, Candidates, candidates_init, pair_step,
    is_positive, clip_norm, StepSettings, MAX_ITEMS, DenseItems, dense_score,
    dense_prefetch, bias_step,
)

cnp.import_array()

ctypedef fused order_t:
    int32_t
    int64_t

def seed_state(uint64_t seed):
    """A 4-word xoshiro state from one integer (splitmix64, as the xoshiro authors advise)."""
    state = np.empty(4, dtype=np.uint64)
    cdef uint64_t z, x = seed
    cdef int i
    for i in range(4):
        x += <uint64_t>0x9E3779B97F4A7C15
        z = x
        z = (z ^ (z >> 30)) * <uint64_t>0xBF58476D1CE4E5B9
        z = (z ^ (z >> 27)) * <uint64_t>0x94D049BB133111EB
        state[i] = z ^ (z >> 31)
    return state


def row_contains(const int32_t[::1] row, int64_t item):
    """The sampler's membership test on a sorted row (exposed for tests)."""
    if row.shape[0] == 0:
        return False
    return bool(is_positive(&row[0], row.shape[0], item))


def harmonic_table(Py_ssize_t n):
    """``L[r] = sum_{k=1..r} 1/k`` for r = 0..n (``L[0] = 0``), float32."""
    table = np.zeros(n + 1, dtype=np.float64)
    table[1:] = np.cumsum(1.0 / np.arange(1, n + 1, dtype=np.float64))
    return table.astype(np.float32)


def shuffle(order_t[::1] order, uint64_t[::1] state):
    """Fisher-Yates shuffle in place with the kernel's RNG (no Python, no GIL)."""
    cdef Py_ssize_t n = order.shape[0], i, j
    cdef order_t tmp
    cdef uint64_t* s = &state[0]
    with nogil:
        i = n - 1
        while i > 0:
            if i < MAX_ITEMS:
                j = rng_below(s, i + 1)
            else:
                j = <Py_ssize_t>(rng_next(s) % <uint64_t>(i + 1))
            tmp = order[i]
            order[i] = order[j]
            order[j] = tmp
            i -= 1


cdef inline double _unit(uint64_t* s) noexcept nogil:
    """A uniform double in [0, 1) from the top 53 bits of one draw."""
    return <double>(rng_next(s) >> 11) * (1.0 / 9007199254740992.0)


def alias_table(const double[::1] weights):
    """Walker's alias table (Vose's construction) for drawing ``p`` with probability ``weights[p] / sum``.

    Returns ``(prob, alias)``: draw a slot ``k`` uniformly, keep it with probability
    ``prob[k]``, else take ``alias[k]``. Built once per fit in O(n); every draw is O(1).
    Weights must be finite, >= 0 and not all 0.
    """
    cdef Py_ssize_t n = weights.shape[0], k, n_small = 0, n_large = 0, small_k, large_k
    cdef double total = 0.0
    for k in range(n):
        total += weights[k]
    if n == 0 or not total > 0:
        raise ValueError("alias_table needs weights with a positive sum")
    prob_arr = np.empty(n, dtype=np.float64)
    alias_arr = np.arange(n, dtype=np.int64)
    work_arr = np.empty(n, dtype=np.int64)
    cdef double[::1] prob = prob_arr
    cdef int64_t[::1] alias = alias_arr
    cdef int64_t[::1] work = work_arr  # small slots from the front, large ones from the back
    with nogil:
        for k in range(n):
            prob[k] = weights[k] * n / total
            if prob[k] < 1.0:
                work[n_small] = k
                n_small += 1
            else:
                work[n - 1 - n_large] = k
                n_large += 1
        while n_small > 0 and n_large > 0:
            n_small -= 1
            small_k = work[n_small]
            large_k = work[n - n_large]
            alias[small_k] = large_k
            prob[large_k] = (prob[large_k] + prob[small_k]) - 1.0
            if prob[large_k] < 1.0:  # the large slot became small: move it to the small stack
                n_large -= 1
                work[n_small] = large_k
                n_small += 1
        # what is left is 1 up to rounding
        for k in range(n_small):
            prob[work[k]] = 1.0
        for k in range(n_large):
            prob[work[n - 1 - k]] = 1.0
    return prob_arr, alias_arr


def draw_positives(order_t[::1] order, const double[::1] prob, const int64_t[::1] alias, uint64_t[::1] state,
                   const int64_t[::1] targets=None):
    """Fill ``order`` with draws with replacement from an :func:`alias_table` (no GIL).

    A draw ``k`` is written as ``k``, or as ``targets[k]`` when ``targets`` is given (the
    table then covers a subset of the positives, e.g. the new pairs of ``partial_fit``).
    """
    cdef Py_ssize_t n = order.shape[0], m = prob.shape[0], t
    cdef int64_t k
    cdef uint64_t* s = &state[0]
    cdef const int64_t* to = NULL
    if m == 0:
        return
    if targets is not None:
        if targets.shape[0] != m:
            raise ValueError("targets must have one entry per weight")
        to = &targets[0]
    with nogil:
        for t in range(n):
            if m < MAX_ITEMS:
                k = rng_below(s, <uint64_t>m)
            else:
                k = <int64_t>(rng_next(s) % <uint64_t>m)
            if _unit(s) >= prob[k]:
                k = alias[k]
            order[t] = <order_t>(k if to == NULL else to[k])


def fit_shard(
    float[:, ::1] user_factors,
    float[:, ::1] item_factors,
    float[::1] item_bias,
    float[:, ::1] user_accum,
    float[:, ::1] item_accum,
    float[::1] bias_accum,
    const int64_t[::1] indptr,
    const int32_t[::1] indices,
    const int32_t[::1] pos_users,
    const order_t[::1] order,
    Py_ssize_t start,
    Py_ssize_t stop,
    const float[::1] rank_weights,
    uint64_t[::1] state,
    StepSettings cfg,
    const float[::1] step_weights=None,
):
    """Visit the positives ``order[start:stop]`` (indices into the CSR arrays) once each.

    ``indices[p]`` is the item and ``pos_users[p]`` the user of positive number ``p``.
    Factor, bias and accumulator arrays are updated in place. ``cfg`` is a dict of the
    ``StepSettings`` fields (``_kernels.pxd``). ``cfg.loss`` is 0 for WARP, 1 for BPR (one
    negative per positive, logistic loss), 2 for WARP-kOS: the step is for the positive's
    user, on the ``kos_k``-th best of ``kos_n`` of their positives drawn at random (so users
    still weigh by their number of positives, as in WARP). After each step, a user row
    longer than ``user_max_norm`` (item rows: ``item_max_norm``) is scaled back to that
    length; 0 means no limit. ``step_weights``, when given, has one factor per positive
    (CSR order) that multiplies its step: confidence weighting.

    Returns
    -------
    (n_updates, total_weight, total_loss, n_compared)
        How many positives gave an update, the sum of their weights, the sum of weighted
        hinge (WARP) or logistic (BPR) losses, and the negatives scored in all.
    """
    cdef Py_ssize_t d = user_factors.shape[1]
    cdef int64_t n_items = item_factors.shape[0]
    cdef Py_ssize_t t, p, k
    cdef Candidates cand
    cdef int64_t u, i, j, row_start, row_len, n_neg
    cdef float weight = 0
    cdef float* pu
    cdef float* qi
    cdef float* bias_ptr = &item_bias[0] if item_bias.shape[0] > 0 else NULL
    cdef const int32_t* row
    cdef uint64_t* s = &state[0]
    cdef int64_t n_updates = 0, n_compared = 0
    cdef double total_weight = 0.0, total_loss = 0.0
    cdef DenseItems ctx
    cdef const float* step_w = NULL
    if step_weights is not None:
        if step_weights.shape[0] != indices.shape[0]:
            raise ValueError("step_weights must have one entry per positive")
        if step_weights.shape[0] > 0:
            step_w = &step_weights[0]
    if d != item_factors.shape[1]:
        raise ValueError("user and item factors must have the same width")
    if n_items >= MAX_ITEMS:
        raise ValueError("too many items for the sampler")
    if cfg.use_bias and item_bias.shape[0] != n_items:
        raise ValueError("item_bias must have one entry per item")
    ctx.items = &item_factors[0, 0]
    ctx.bias = bias_ptr if cfg.use_bias else NULL
    ctx.d = d

    with nogil:
        candidates_init(&cand, s, n_items)
        for t in range(start, stop):
            # Software pipeline over the shuffled positives, which sit at random places in
            # memory: fetch the (user, item) of positive t+8, then the rows of positive t+2
            # (its ids are in cache by now), then the CSR row of positive t+1.
            if t + 8 < stop:
                p = order[t + 8]
                MW_PREFETCH(&pos_users[p])
                MW_PREFETCH(&indices[p])
            if t + 2 < stop:
                p = order[t + 2]
                u = pos_users[p]
                i = indices[p]
                prefetch_row(&user_factors[u, 0], d)
                prefetch_row(&user_accum[u, 0], d)
                prefetch_row(&item_factors[i, 0], d)
                prefetch_row(&item_accum[i, 0], d)
                MW_PREFETCH(&indptr[u])
            if t + 1 < stop:  # the CSR row the membership test will search (<= 1 KB of it)
                p = order[t + 1]
                u = pos_users[p]
                row_start = indptr[u]
                row_len = min(indptr[u + 1] - row_start, 256)
                for k in range(0, row_len, 16):
                    MW_PREFETCH(&indices[row_start + k])
            p = order[t]
            u = pos_users[p]
            i = indices[p]
            row_start = indptr[u]
            row_len = indptr[u + 1] - row_start
            row = &indices[row_start]
            n_neg = n_items - row_len
            if n_neg <= 0:
                continue
            pu = &user_factors[u, 0]
            ctx.user = pu
            j = pick_pair(&cfg, &ctx, dense_score, dense_prefetch, &i, row, row_len, n_items, s, &cand,
                          &rank_weights[0], &weight, &total_loss, &n_compared)
            if j < 0:
                continue
            qi = &item_factors[i, 0]  # i is final now (WARP-kOS may have picked another)
            if step_w != NULL:
                weight *= step_w[p]

            total_weight += weight
            n_updates += 1
            pair_step(pu, qi, &item_factors[j, 0], &user_accum[u, 0], &item_accum[i, 0],
                      &item_accum[j, 0], d, weight, cfg.learning_rate, cfg.user_reg, cfg.item_reg, cfg.adagrad)
            clip_norm(pu, d, cfg.user_max_norm)
            if cfg.item_max_norm > 0:
                clip_norm(qi, d, cfg.item_max_norm)
                clip_norm(&item_factors[j, 0], d, cfg.item_max_norm)
            if cfg.use_bias:
                bias_step(&bias_ptr[i], &bias_accum[i], -weight, cfg.learning_rate, cfg.adagrad)
                bias_step(&bias_ptr[j], &bias_accum[j], weight, cfg.learning_rate, cfg.adagrad)
    return n_updates, total_weight, total_loss, n_compared
