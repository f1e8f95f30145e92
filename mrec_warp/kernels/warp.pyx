# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""WARP / BPR stochastic gradient kernels for matrix factorisation: training and fold-in.

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

Fold-in. ``fold_in_shard`` fits user rows ``e_u`` alone against fixed item representations
(``Q``, ``b``): ``p_u = o_u + s_u e_u`` where ``o_u`` is a fixed offset (the user's content
features, for a hybrid model; zero for plain WARP) and ``s_u`` the weight of the row being
fitted (its identity weight; 1 for plain WARP).
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport malloc, free
from libc.string cimport memset

from mrec_warp.kernels.rng cimport MAX_ITEMS, order_t, shuffle_order
from mrec_warp.kernels.sampler cimport (
    Candidates, DenseItems, candidates_init, dense_prefetch, dense_score, is_positive, pick_pair,
)
from mrec_warp.kernels.steps cimport StepSettings, adagrad_axpy, mf_step
from mrec_warp.kernels.vectors cimport MW_PREFETCH, clip_norm, prefetch_row

# Most CSR entries (64 cache lines) of the next positive's row to prefetch. On the 10M
# synthetic set 12% of the positives belong to rows longer than the old 256 and 0.4% to rows
# longer than 1024; raising the cap made 1M-positive slices 3-4% faster, alternated in one
# process with identical factors (a cap of 64 made them 10% slower).
cdef enum:
    CSR_PREFETCH = 1024
    # Most bytes of the next positive's bitmap row to prefetch (64 cache lines: 32k items).
    SEEN_PREFETCH = 4096


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


# -- fold-in: user rows against fixed items ---------------------------------------------------------
cdef struct FoldTotals:
    int64_t n_updates
    double total_weight
    double total_loss
    int64_t n_compared


def fold_in_shard(
    float[:, ::1] rows,
    float[:, ::1] accum,
    const float[:, ::1] offset,
    const float[::1] scale,
    const float[:, ::1] item_factors,
    const float[::1] item_bias,
    const int64_t[::1] indptr,
    const int32_t[::1] indices,
    const int32_t[::1] pos_users,
    const order_t[::1] order,
    Py_ssize_t start,
    Py_ssize_t stop,
    const float[::1] rank_weights,
    uint64_t[::1] state,
    StepSettings cfg,
):
    """WARP (BPR, WARP-kOS) steps on user rows only: ``p_u = offset[u] + scale[u] * rows[u]``,
    each row held within ``user_max_norm`` as in training (0: no limit).

    Items (``item_factors``, ``item_bias``) are read, never written. An empty ``offset``
    (0 rows) means zero and an empty ``scale`` means 1 (plain WARP). ``indptr`` /
    ``indices`` are the folded users' positives (users x items, sorted rows).

    Returns
    -------
    (n_updates, total_weight, total_loss, n_compared)
    """
    cdef FoldTotals totals
    cdef float* buf
    memset(&totals, 0, sizeof(FoldTotals))
    _check_fold_in(rows, accum, offset, scale, item_factors, item_bias, indptr, &cfg)
    if item_factors.shape[0] == 0 or stop <= start:
        return 0, 0.0, 0.0, 0
    buf = <float*>malloc(2 * rows.shape[1] * sizeof(float))
    if buf == NULL:
        raise MemoryError()
    try:
        with nogil:
            _fold_in_steps(rows, accum, offset, scale, item_factors, item_bias, indptr, indices, pos_users, order,
                           start, stop, rank_weights, &state[0], &cfg, buf, &totals)
    finally:
        free(buf)
    return totals.n_updates, totals.total_weight, totals.total_loss, totals.n_compared


def fold_in_epochs(
    float[:, ::1] rows,
    float[:, ::1] accum,
    const float[:, ::1] offset,
    const float[::1] scale,
    const float[:, ::1] item_factors,
    const float[::1] item_bias,
    const int64_t[::1] indptr,
    const int32_t[::1] indices,
    const int32_t[::1] pos_users,
    int32_t[::1] order,
    const float[::1] rank_weights,
    uint64_t[::1] state,
    list settings,
):
    """Every epoch of a fold-in in one call: for each of ``settings`` (one ``StepSettings``
    dict per epoch), ``order`` shuffled as :func:`mrec_warp.kernels.rng.shuffle` does, then
    :func:`fold_in_shard` over all of it. The same steps in the same order as that Python
    loop, so the same bits; without its per-call set-up, which was most of the cost of
    folding in one short history (30 epochs of argument checks, buffer acquisitions and a
    buffer allocation).
    """
    cdef StepSettings cfg
    cdef FoldTotals totals
    cdef Py_ssize_t n = order.shape[0], e
    cdef uint64_t* s = &state[0]
    cdef float* buf
    memset(&totals, 0, sizeof(FoldTotals))
    if item_factors.shape[0] == 0 or n == 0 or len(settings) == 0:
        return
    cfg = settings[0]
    _check_fold_in(rows, accum, offset, scale, item_factors, item_bias, indptr, &cfg)
    buf = <float*>malloc(2 * rows.shape[1] * sizeof(float))
    if buf == NULL:
        raise MemoryError()
    try:
        for e in range(len(settings)):
            cfg = settings[e]
            if cfg.use_bias and item_bias.shape[0] != item_factors.shape[0]:
                raise ValueError("item_bias must have one entry per item")
            with nogil:
                shuffle_order(order, s)  # the numbers rng.shuffle draws
                _fold_in_steps(rows, accum, offset, scale, item_factors, item_bias, indptr, indices, pos_users,
                               order, 0, n, rank_weights, s, &cfg, buf, &totals)
    finally:
        free(buf)


cdef int _check_fold_in(float[:, ::1] rows, float[:, ::1] accum, const float[:, ::1] offset,
                        const float[::1] scale, const float[:, ::1] item_factors, const float[::1] item_bias,
                        const int64_t[::1] indptr, const StepSettings* cfg) except -1:
    cdef Py_ssize_t d = rows.shape[1]
    cdef int64_t n_rows = rows.shape[0]
    if d != item_factors.shape[1] or d < 1:
        raise ValueError("user rows and item factors must have the same width")
    if item_factors.shape[0] >= MAX_ITEMS:
        raise ValueError("too many items for the sampler")
    if indptr.shape[0] != n_rows + 1 or accum.shape[0] != n_rows:
        raise ValueError("rows, accumulators and positives disagree on the number of users")
    if (offset.shape[0] > 0 and (offset.shape[0] != n_rows or offset.shape[1] != d)) or \
            (scale.shape[0] > 0 and scale.shape[0] != n_rows):
        raise ValueError("offset and scale must have one row per user")
    if cfg.use_bias and item_bias.shape[0] != item_factors.shape[0]:
        raise ValueError("item_bias must have one entry per item")
    return 0


cdef void _fold_in_steps(
    float[:, ::1] rows,
    float[:, ::1] accum,
    const float[:, ::1] offset,
    const float[::1] scale,
    const float[:, ::1] item_factors,
    const float[::1] item_bias,
    const int64_t[::1] indptr,
    const int32_t[::1] indices,
    const int32_t[::1] pos_users,
    const order_t[::1] order,
    Py_ssize_t start,
    Py_ssize_t stop,
    const float[::1] rank_weights,
    uint64_t* s,
    const StepSettings* cfg,
    float* buf,
    FoldTotals* totals,
) noexcept nogil:
    """The steps of :func:`fold_in_shard` on checked arguments; ``buf`` holds 2 * d floats."""
    cdef Py_ssize_t d = rows.shape[1]
    cdef int64_t n_items = item_factors.shape[0]
    cdef Py_ssize_t t, p, c
    cdef Candidates cand
    cdef int64_t u, i, j, row_start, row_len, n_neg
    cdef float weight, su
    cdef bint has_offset = offset.shape[0] > 0
    cdef bint has_scale = scale.shape[0] > 0
    cdef const float* pu
    cdef const float* qi
    cdef const float* qj
    cdef float* eu
    cdef const int32_t* row
    cdef DenseItems ctx
    cdef float* grad = buf + d
    ctx.items = &item_factors[0, 0]
    ctx.bias = &item_bias[0] if cfg.use_bias else NULL
    ctx.d = d
    candidates_init(&cand, s, n_items)
    for t in range(start, stop):
        p = order[t]
        u = pos_users[p]
        i = indices[p]
        row_start = indptr[u]
        row_len = indptr[u + 1] - row_start
        row = &indices[row_start]
        n_neg = n_items - row_len
        if n_neg <= 0:
            continue
        eu = &rows[u, 0]
        su = scale[u] if has_scale else 1.0
        if has_offset or has_scale:
            for c in range(d):
                buf[c] = su * eu[c] + (offset[u, c] if has_offset else 0.0)
            pu = buf
        else:
            pu = eu
        ctx.user = pu
        j = pick_pair(cfg, &ctx, dense_score, dense_prefetch, &i, row, row_len, n_items, s, &cand,
                      &rank_weights[0], &weight, &totals.total_loss, &totals.n_compared)
        if j < 0:
            continue
        totals.total_weight += weight
        totals.n_updates += 1
        qi = &item_factors[i, 0]
        qj = &item_factors[j, 0]
        for c in range(d):
            grad[c] = su * weight * (qj[c] - qi[c]) + cfg.user_reg * eu[c]
        adagrad_axpy(eu, &accum[u, 0], grad, d, cfg.learning_rate, cfg.adagrad)
        clip_norm(eu, d, cfg.user_max_norm)
