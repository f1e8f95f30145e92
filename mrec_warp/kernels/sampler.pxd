# cython: language_level=3
"""The sampler every WARP-family kernel shares (plain, hybrid, fold-in).

A kernel supplies how it scores a candidate and warms the cache for one (``score_fn``,
``prefetch_fn`` on its own context); the drawing, rejecting and weighting live here once.

The sampling rule, in one place (see ``warp_sample``): candidates are drawn uniformly with
replacement; a candidate that is one of the user's positives is rejected and does not count
toward N; N counts the negatives whose score was compared with the positive's; sampling
stops at the first negative with ``1 + f(u, j) > f(u, i)`` or when ``max_sampled``
negatives were compared (no violator: no update). Rejections are capped at
``8 * max_sampled`` draws in all, so a user who has nearly every item cannot stall.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.math cimport expf, log1pf

from mrec_warp.kernels.rng cimport rng_below
from mrec_warp.kernels.steps cimport StepSettings
from mrec_warp.kernels.vectors cimport dot, prefetch_row


cdef inline bint is_positive(const int32_t* row, int64_t n, int64_t item) noexcept nogil:
    """Is ``item`` in the sorted CSR row? Branch-free binary search: the comparisons are
    unpredictable, so conditional moves beat branches (this runs for every draw)."""
    cdef const int32_t* base = row
    cdef const int32_t* end = row + n
    cdef int64_t half
    if n == 0:
        return False
    # invariant: the first entry >= item lies in [base, base + n]
    while n > 1:
        half = n >> 1
        base = base + half if base[half] < item else base
        n -= half
    base += base[0] < item
    return base < end and base[0] == item


# -- scoring against dense item factors (matrix factorisation, fold-in) ---------------------
cdef struct DenseItems:
    const float* user       # the current user's factor row
    const float* items      # item factors, row-major
    const float* bias       # item biases, or NULL
    Py_ssize_t d


cdef inline float dense_score(void* ctx, int64_t j) noexcept nogil:
    cdef DenseItems* c = <DenseItems*>ctx
    cdef float f = dot(c.user, c.items + j * c.d, c.d)
    if c.bias != NULL:
        f += c.bias[j]
    return f


cdef inline void dense_prefetch(void* ctx, int64_t j) noexcept nogil:
    cdef DenseItems* c = <DenseItems*>ctx
    prefetch_row(c.items + j * c.d, c.d)


# -- the sampler -----------------------------------------------------------------------------
# How a kernel scores candidate j for the current user (``ctx`` is the kernel's own state)
# and warms the cache for a candidate it will score next.
ctypedef float (*score_fn)(void* ctx, int64_t j) noexcept nogil
ctypedef void (*prefetch_fn)(void* ctx, int64_t j) noexcept nogil


cdef enum:
    LOSS_WARP = 0
    LOSS_BPR = 1
    LOSS_WARP_KOS = 2
    KOS_MAX_N = 64  # most positives a k-OS step compares (they live on the stack)


# Candidates are drawn this many draws before they are scored (draws do not depend on
# scores), and each is prefetched when drawn: scoring one takes a few nanoseconds, fetching
# its row from memory a hundred, so a one-ahead prefetch would hide almost nothing.
cdef enum:
    CANDIDATES_AHEAD = 8


cdef struct Candidates:
    int64_t queue[8]
    int head
    # Optional: a bitmap of every user's positives (bit ``u * n_items + j``, little-endian in
    # each byte) and the bit offset of the current user's row. The same answer as the binary
    # search on the CSR row in one load instead of a chain of log2(row length) dependent
    # ones; a kernel that has one sets both (``candidates_init`` leaves it NULL).
    const uint8_t* seen
    int64_t seen_row


cdef inline void candidates_init(Candidates* c, uint64_t* s, int64_t n_items) noexcept nogil:
    cdef int k
    for k in range(CANDIDATES_AHEAD):
        c.queue[k] = rng_below(s, n_items)
    c.head = 0
    c.seen = NULL
    c.seen_row = 0


cdef inline bint candidate_is_positive(const Candidates* c, const int32_t* row, int64_t row_len,
                                       int64_t j) noexcept nogil:
    """Is candidate ``j`` one of the current user's positives: the bitmap when the kernel has
    one, else the binary search on the sorted CSR row."""
    cdef int64_t bit
    if c.seen != NULL:
        bit = c.seen_row + j
        return (c.seen[bit >> 3] >> (bit & 7)) & 1
    return is_positive(row, row_len, j)


cdef inline int64_t candidates_next(Candidates* c, uint64_t* s, int64_t n_items,
                                    void* ctx, prefetch_fn prefetch) noexcept nogil:
    """The next candidate in draw order; a fresh draw takes its place and is prefetched."""
    cdef int64_t j = c.queue[c.head]
    cdef int64_t fresh = rng_below(s, n_items)
    c.queue[c.head] = fresh
    c.head = (c.head + 1) & (CANDIDATES_AHEAD - 1)
    if prefetch != NULL:
        prefetch(ctx, fresh)
    return j


cdef inline int64_t warp_sample(
    void* ctx, score_fn score, prefetch_fn prefetch, float f_pos,
    const int32_t* row, int64_t row_len, int64_t n_items, int max_sampled,
    uint64_t* s, Candidates* cand, int64_t* n_sampled, float* f_neg,
) noexcept nogil:
    """Draw negatives until one violates the margin; return it, or -1 if none did.

    ``cand`` is the kernel's queue of drawn candidates (see ``Candidates``); ``n_sampled``
    receives N, ``f_neg`` the violator's score.
    """
    cdef int64_t j, n_draws = 0, max_draws = 8 * <int64_t>max_sampled
    cdef float f
    n_sampled[0] = 0
    while n_sampled[0] < max_sampled and n_draws < max_draws:
        n_draws += 1
        j = candidates_next(cand, s, n_items, ctx, prefetch)
        if candidate_is_positive(cand, row, row_len, j):
            continue  # rejected: does not count toward N
        n_sampled[0] += 1
        f = score(ctx, j)
        if 1.0 + f > f_pos:
            f_neg[0] = f
            return j
    return -1


cdef inline int64_t bpr_sample(
    const int32_t* row, int64_t row_len, int64_t n_items, int max_sampled,
    uint64_t* s, Candidates* cand,
) noexcept nogil:
    """One uniformly drawn negative (positives rejected), or -1 after too many rejections."""
    cdef int64_t j, n_draws
    for n_draws in range(8 * <int64_t>max_sampled):
        j = candidates_next(cand, s, n_items, NULL, NULL)
        if not candidate_is_positive(cand, row, row_len, j):
            return j
    return -1


cdef inline int64_t kos_positive(
    void* ctx, score_fn score, const int32_t* row, int64_t row_len, int kos_n, int kos_k,
    uint64_t* s, float* f_pos,
) noexcept nogil:
    """WARP-kOS (Weston, Yee & Weiss 2013): draw ``kos_n`` of the user's positives uniformly
    with replacement, score them, and return the ``kos_k``-th best (1 = the best) with its
    score in ``f_pos``. A small k steps on positives the model already ranks high, which
    sharpens the top of the list; k = n on the worst of the sample."""
    cdef int64_t items[KOS_MAX_N]
    cdef float scores[KOS_MAX_N]
    cdef int n = kos_n if kos_n < KOS_MAX_N else KOS_MAX_N
    cdef int k = kos_k if kos_k < n else n
    cdef int a, b
    cdef int64_t item
    cdef float f
    for a in range(n):  # insertion sort, best first: n is small
        item = row[rng_below(s, row_len)]
        f = score(ctx, item)
        b = a
        while b > 0 and scores[b - 1] < f:
            scores[b] = scores[b - 1]
            items[b] = items[b - 1]
            b -= 1
        scores[b] = f
        items[b] = item
    f_pos[0] = scores[k - 1]
    return items[k - 1]


cdef inline int64_t pick_pair(
    const StepSettings* cfg, void* ctx, score_fn score, prefetch_fn prefetch, int64_t* i,
    const int32_t* row, int64_t row_len, int64_t n_items,
    uint64_t* s, Candidates* cand, const float* rank_weights,
    float* weight, double* total_loss, int64_t* n_compared,
) noexcept nogil:
    """The pair one step is on, for every kernel of the family: the positive ``i[0]`` (the
    visited one; under WARP-kOS replaced by ``kos_positive``'s pick) and the negative,
    returned (-1: no update), with the step's weight.

    WARP and WARP-kOS: the first margin violator, weighted by ``L(floor(n_neg / N))``; the
    loss adds ``L * (1 + f(u,j) - f(u,i))``. BPR: one negative, weighted by
    ``sigmoid(f(u,j) - f(u,i))`` (the gradient of the logistic loss
    ``log(1 + exp(f(u,j) - f(u,i)))``, which the loss adds).
    """
    cdef float f_pos
    if cfg.loss == LOSS_WARP_KOS:
        i[0] = kos_positive(ctx, score, row, row_len, cfg.kos_n, cfg.kos_k, s, &f_pos)
    else:
        f_pos = score(ctx, i[0])
    cdef int64_t j, n_sampled = 0
    cdef float f_neg = 0, x
    if cfg.loss == LOSS_BPR:
        j = bpr_sample(row, row_len, n_items, cfg.max_sampled, s, cand)
        if j < 0:
            return -1
        f_neg = score(ctx, j)
        n_compared[0] += 1
        x = f_pos - f_neg
        if x > 0:  # two forms, so expf never overflows
            weight[0] = expf(-x) / (1.0 + expf(-x))
            total_loss[0] += log1pf(expf(-x))
        else:
            weight[0] = 1.0 / (1.0 + expf(x))
            total_loss[0] += -x + log1pf(expf(x))
        return j
    j = warp_sample(ctx, score, prefetch, f_pos, row, row_len, n_items, cfg.max_sampled, s, cand,
                    &n_sampled, &f_neg)
    n_compared[0] += n_sampled
    if j < 0:
        return -1  # no violator: the positive is ranked well enough
    weight[0] = rank_weights[(n_items - row_len) // n_sampled]
    total_loss[0] += weight[0] * (1.0 + f_neg - f_pos)
    return j
