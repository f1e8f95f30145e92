# cython: language_level=3
"""Building blocks shared by every WARP-family kernel (plain and hybrid).

Inline functions in a .pxd are compiled into each kernel that cimports them, so they cost
nothing at run time and there is exactly one copy of the sampling rule to read and test.

The sampling rule, in one place (see ``warp_sample``): candidates are drawn uniformly with
replacement; a candidate that is one of the user's positives is rejected and does not count
toward N; N counts the negatives whose score was compared with the positive's; sampling
stops at the first negative with ``1 + f(u, j) > f(u, i)`` or when ``max_sampled``
negatives were compared (no violator: no update). Rejections are capped at
``8 * max_sampled`` draws in all, so a user who has nearly every item cannot stall.
"""
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.math cimport sqrtf, expf, log1pf

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define MW_PREFETCH(p) __builtin_prefetch((const void*)(p), 0, 3)
    #else
    #define MW_PREFETCH(p) ((void)0)
    #endif
    """
    void MW_PREFETCH(const void* p) noexcept nogil


# -- random numbers: xoshiro256** ----------------------------------------------------------
cdef inline uint64_t _rotl(uint64_t x, int k) noexcept nogil:
    return (x << k) | (x >> (64 - k))


cdef inline uint64_t rng_next(uint64_t* s) noexcept nogil:
    cdef uint64_t result = _rotl(s[1] * 5, 7) * 9
    cdef uint64_t t = s[1] << 17
    s[2] ^= s[0]
    s[3] ^= s[1]
    s[1] ^= s[2]
    s[0] ^= s[3]
    s[2] ^= t
    s[3] = _rotl(s[3], 45)
    return result


cdef inline int64_t rng_below(uint64_t* s, uint64_t n) noexcept nogil:
    """Uniform integer in [0, n) for n < 2**32 (Lemire's multiply-shift; bias < n / 2**32)."""
    return <int64_t>(((rng_next(s) >> 32) * n) >> 32)


# -- dense helpers -------------------------------------------------------------------------
cdef inline float dot(const float* a, const float* b, Py_ssize_t d) noexcept nogil:
    # Four accumulators break the add dependency chain even without -fassociative-math.
    cdef float s0 = 0, s1 = 0, s2 = 0, s3 = 0
    cdef Py_ssize_t c = 0
    while c + 4 <= d:
        s0 += a[c] * b[c]
        s1 += a[c + 1] * b[c + 1]
        s2 += a[c + 2] * b[c + 2]
        s3 += a[c + 3] * b[c + 3]
        c += 4
    while c < d:
        s0 += a[c] * b[c]
        c += 1
    return (s0 + s1) + (s2 + s3)


cdef inline void prefetch_row(const float* row, Py_ssize_t d) noexcept nogil:
    """Ask for a row before it is needed: these kernels wait on memory (rows are visited
    in random order), not on arithmetic."""
    cdef Py_ssize_t c = 0
    while c < d:
        MW_PREFETCH(row + c)
        c += 16  # one 64-byte cache line of float32


cdef inline void clip_norm(float* row, Py_ssize_t d, float max_norm) noexcept nogil:
    """Scale ``row`` back onto the ball ``||row|| <= max_norm`` if a step took it outside
    (the norm constraint of WSABIE, Weston et al. 2010); ``max_norm <= 0`` means no limit."""
    cdef float n2, f
    cdef Py_ssize_t c
    if max_norm <= 0:
        return
    n2 = dot(row, row, d)
    if n2 > max_norm * max_norm:
        f = max_norm / sqrtf(n2)
        for c in range(d):
            row[c] *= f


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


cdef extern from *:
    """
    #include <math.h>
    #include <stddef.h>
    #if defined(_MSC_VER)
    #define MW_RESTRICT __restrict
    #else
    #define MW_RESTRICT __restrict__
    #endif
    /* Adagrad divides every step by a square root. sqrtps + divps are the slowest SSE
       instructions (a few cycles per 4 floats each), so on x86 the steps use rsqrtps plus
       one Newton-Raphson refinement (relative error ~1e-7, plenty for SGD), several times
       faster. Other CPUs, and the tails of rows, use sqrtf. */
    #if defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2)
    #define MW_SSE 1
    #include <emmintrin.h>
    static inline __m128 mw_rsqrt_ps(__m128 x) {
        __m128 y = _mm_rsqrt_ps(x);
        __m128 hx = _mm_mul_ps(_mm_set1_ps(0.5f), x);
        return _mm_mul_ps(y, _mm_sub_ps(_mm_set1_ps(1.5f), _mm_mul_ps(hx, _mm_mul_ps(y, y))));
    }
    /* one adagrad step on 4 parameters: G += g^2; x -= lr * g / sqrt(G) */
    static inline __m128 mw_adagrad_ps(__m128 x, float* acc, __m128 g, __m128 lr) {
        __m128 G = _mm_add_ps(_mm_loadu_ps(acc), _mm_mul_ps(g, g));
        _mm_storeu_ps(acc, G);
        return _mm_sub_ps(x, _mm_mul_ps(_mm_mul_ps(lr, g), mw_rsqrt_ps(G)));
    }
    #endif

    /* param -= lr * grad / sqrt(accum) after accum += grad^2 (adagrad), or plain SGD.
       Written in C for `restrict`: it tells the compiler the rows never overlap, which is
       what lets it vectorise the loop (Cython has no way to say so). */
    static inline void mw_adagrad_axpy(float* MW_RESTRICT param, float* MW_RESTRICT accum,
                                       const float* MW_RESTRICT grad, ptrdiff_t d, float lr,
                                       int adagrad) {
        ptrdiff_t c = 0;
        if (adagrad) {
    #ifdef MW_SSE
            const __m128 LR = _mm_set1_ps(lr);
            for (; c + 4 <= d; c += 4)
                _mm_storeu_ps(param + c, mw_adagrad_ps(_mm_loadu_ps(param + c), accum + c,
                                                       _mm_loadu_ps(grad + c), LR));
    #endif
            for (; c < d; c++) {
                accum[c] += grad[c] * grad[c];
                param[c] -= lr * grad[c] / sqrtf(accum[c]);
            }
        } else {
            for (c = 0; c < d; c++) param[c] -= lr * grad[c];
        }
    }
    /* One step on weight * (f(u,j) - f(u,i)) + L2 for the user row pu and item rows qi, qj,
       gradients taken at the old values; g* are the adagrad accumulators of each row. */
    static inline void mw_pair_step(float* MW_RESTRICT pu, float* MW_RESTRICT qi,
                                    float* MW_RESTRICT qj, float* MW_RESTRICT gpu,
                                    float* MW_RESTRICT gqi, float* MW_RESTRICT gqj,
                                    ptrdiff_t d, float w, float lr, float user_reg,
                                    float item_reg, int adagrad) {
        ptrdiff_t c = 0;
        if (adagrad) {
    #ifdef MW_SSE
            const __m128 W = _mm_set1_ps(w), LR = _mm_set1_ps(lr);
            const __m128 UR = _mm_set1_ps(user_reg), IR = _mm_set1_ps(item_reg);
            for (; c + 4 <= d; c += 4) {
                __m128 p = _mm_loadu_ps(pu + c), a = _mm_loadu_ps(qi + c), b = _mm_loadu_ps(qj + c);
                __m128 wp = _mm_mul_ps(W, p);
                __m128 gu = _mm_add_ps(_mm_mul_ps(W, _mm_sub_ps(b, a)), _mm_mul_ps(UR, p));
                __m128 gi = _mm_sub_ps(_mm_mul_ps(IR, a), wp);
                __m128 gj = _mm_add_ps(wp, _mm_mul_ps(IR, b));
                _mm_storeu_ps(pu + c, mw_adagrad_ps(p, gpu + c, gu, LR));
                _mm_storeu_ps(qi + c, mw_adagrad_ps(a, gqi + c, gi, LR));
                _mm_storeu_ps(qj + c, mw_adagrad_ps(b, gqj + c, gj, LR));
            }
    #endif
            for (; c < d; c++) {
                float p = pu[c], a = qi[c], b = qj[c];
                float gu = w * (b - a) + user_reg * p;
                float gi = -w * p + item_reg * a;
                float gj = w * p + item_reg * b;
                gpu[c] += gu * gu;
                gqi[c] += gi * gi;
                gqj[c] += gj * gj;
                pu[c] = p - lr * gu / sqrtf(gpu[c]);
                qi[c] = a - lr * gi / sqrtf(gqi[c]);
                qj[c] = b - lr * gj / sqrtf(gqj[c]);
            }
        } else {
            for (; c < d; c++) {
                float p = pu[c], a = qi[c], b = qj[c];
                pu[c] = p - lr * (w * (b - a) + user_reg * p);
                qi[c] = a - lr * (-w * p + item_reg * a);
                qj[c] = b - lr * (w * p + item_reg * b);
            }
        }
    }
    """
    void adagrad_axpy "mw_adagrad_axpy" (float* param, float* accum, const float* grad,
                                         Py_ssize_t d, float lr, bint adagrad) noexcept nogil
    void pair_step "mw_pair_step" (float* pu, float* qi, float* qj, float* gpu, float* gqi,
                                   float* gqj, Py_ssize_t d, float weight, float lr,
                                   float user_reg, float item_reg, bint adagrad) noexcept nogil


# -- what every step takes ------------------------------------------------------------------
# The step settings, one struct for every kernel: Python passes a dict with every field
# (Cython converts it), built in one place, ``WARP._step_settings``.
cdef struct StepSettings:
    int loss                # LOSS_WARP, LOSS_BPR or LOSS_WARP_KOS
    int max_sampled
    float learning_rate
    float user_reg
    float item_reg
    bint adagrad            # else plain SGD
    bint use_bias
    float user_max_norm     # 0: no limit
    float item_max_norm
    int kos_n               # WARP-kOS: positives sampled, and which order statistic
    int kos_k


cdef extern from *:
    """
    #define MW_MAX_ITEMS 4294967295LL  /* rng_below draws below 2**32 */
    """
    int64_t MAX_ITEMS "MW_MAX_ITEMS"


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


cdef inline void bias_step(float* b, float* acc, float grad, float lr, bint adagrad) noexcept nogil:
    """One adagrad (or SGD) step on a single bias."""
    if adagrad:
        acc[0] += grad * grad
        b[0] -= lr * grad / sqrtf(acc[0])
    else:
        b[0] -= lr * grad


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


cdef inline void candidates_init(Candidates* c, uint64_t* s, int64_t n_items) noexcept nogil:
    cdef int k
    for k in range(CANDIDATES_AHEAD):
        c.queue[k] = rng_below(s, n_items)
    c.head = 0


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
        if is_positive(row, row_len, j):
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
        if not is_positive(row, row_len, j):
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
