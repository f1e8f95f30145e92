# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""WARP / BPR stochastic gradient kernels for matrix factorisation.

Everything here runs without the GIL on typed memoryviews, so joblib's threading backend can
run several shards of one epoch at once on the same factor arrays (hogwild: updates are
lock-free; a lost update now and then is harmless to SGD). Each call owns its RNG state, so
one thread with a given seed is bit-for-bit reproducible.

The sampling rule is in ``sampler.pxd`` (``warp_sample``), shared with the hybrid kernel;
the seeding, shuffling and rank-weight helpers are in :mod:`mrec_warp.kernels.rng`.
With ``n_neg = n_items - |positives(u)|`` negatives and N negatives compared, the rank of
the positive among them is estimated as ``floor(n_neg / N)`` -- the paper's
``floor((Y - 1) / N)`` with ``Y - 1`` the number of negative labels -- and the hinge is
weighted by ``L(rank) = sum_{k <= rank} 1 / k``.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t

from mrec_warp.kernels.rng cimport MAX_ITEMS
from mrec_warp.kernels.sampler cimport (
    Candidates, DenseItems, candidates_init, dense_prefetch, dense_score, is_positive, pick_pair,
)
from mrec_warp.kernels.steps cimport StepSettings, mf_step
from mrec_warp.kernels.vectors cimport MW_PREFETCH, prefetch_row

# Most CSR entries (64 cache lines) of the next positive's row to prefetch. On the 10M
# synthetic set 12% of the positives belong to rows longer than the old 256 and 0.4% to rows
# longer than 1024; raising the cap made 1M-positive slices 3-4% faster, alternated in one
# process with identical factors (a cap of 64 made them 10% slower).
cdef enum:
    CSR_PREFETCH = 1024
    # Most bytes of the next positive's bitmap row to prefetch (64 cache lines: 32k items).
    SEEN_PREFETCH = 4096


ctypedef fused order_t:
    int32_t
    int64_t


def row_contains(const int32_t[::1] row, int64_t item):
    """The sampler's membership test on a sorted row (exposed for tests)."""
    if row.shape[0] == 0:
        return False
    return bool(is_positive(&row[0], row.shape[0], item))


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
    const uint8_t[::1] seen=None,
):
    """Visit the positives ``order[start:stop]`` (indices into the CSR arrays) once each.

    ``indices[p]`` is the item and ``pos_users[p]`` the user of positive number ``p``.
    Factor, bias and accumulator arrays are updated in place. ``cfg`` is a dict of the
    ``StepSettings`` fields (``steps.pxd``). ``cfg.loss`` is 0 for WARP, 1 for BPR (one
    negative per positive, logistic loss), 2 for WARP-kOS: the step is for the positive's
    user, on the ``kos_k``-th best of ``kos_n`` of their positives drawn at random (so users
    still weigh by their number of positives, as in WARP). After each step, a user row
    longer than ``user_max_norm`` (item rows: ``item_max_norm``) is scaled back to that
    length; 0 means no limit. ``step_weights``, when given, has one factor per positive
    (CSR order) that multiplies its step: confidence weighting. ``seen``, when given, is the
    CSR's positives as a bitmap (bit ``u * n_items + j``, little-endian within each byte,
    ``TrainingData.seen_bits``): the negatives' membership test then reads one bit instead of
    searching the row, with the same answers, so the same seed gives the same factors.

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
    cdef float* bias_acc = &bias_accum[0] if bias_accum.shape[0] > 0 else NULL
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
    cdef const uint8_t* seen_bits = NULL
    cdef int64_t row_bytes = (n_items + 7) // 8 + 1  # bytes a user's bitmap row can touch
    if seen is not None and seen.shape[0] > 0:
        if seen.shape[0] != ((indptr.shape[0] - 1) * n_items + 7) // 8:
            raise ValueError("seen must have one bit per user (CSR row) and item")
        seen_bits = &seen[0]
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
        cand.seen = seen_bits
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
            if t + 1 < stop:  # the CSR row the membership test will search (<= 4 KB of it)
                # Whole rows up to CSR_PREFETCH entries: heavy users own most positives, and
                # a search whose first probes miss waits on memory at every draw.
                p = order[t + 1]
                u = pos_users[p]
                if seen_bits != NULL:  # the user's bitmap row instead (short rows only)
                    if row_bytes <= SEEN_PREFETCH:
                        row_start = (u * n_items) >> 3
                        for k in range(0, row_bytes, 64):
                            MW_PREFETCH(&seen_bits[row_start + k])
                else:
                    row_start = indptr[u]
                    row_len = min(indptr[u + 1] - row_start, CSR_PREFETCH)
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
            cand.seen_row = u * n_items
            j = pick_pair(&cfg, &ctx, dense_score, dense_prefetch, &i, row, row_len, n_items, s, &cand,
                          &rank_weights[0], &weight, &total_loss, &n_compared)
            if j < 0:
                continue
            qi = &item_factors[i, 0]  # i is final now (WARP-kOS may have picked another)
            if step_w != NULL:
                weight *= step_w[p]

            total_weight += weight
            n_updates += 1
            mf_step(&cfg, pu, qi, &item_factors[j, 0], &user_accum[u, 0], &item_accum[i, 0],
                    &item_accum[j, 0], bias_ptr, bias_acc, i, j, d, weight)
    return n_updates, total_weight, total_loss, n_compared
