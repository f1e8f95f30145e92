# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""WARP / BPR stochastic gradient kernels for matrix factorisation.

Everything here runs without the GIL on typed memoryviews, so joblib's threading backend can
run several shards of one epoch at once on the same factor arrays (hogwild: updates are
lock-free; a lost update now and then is harmless to SGD). Each call owns its RNG state, so
one thread with a given seed is bit-for-bit reproducible.

Sampling rule (what counts toward N): a drawn item that is one of the user's positives is
rejected and drawn again; it does *not* count toward N. N counts the negative items whose
score was compared with the positive's. With ``n_neg = n_items - |positives(u)|`` negatives,
the rank of the positive among them is estimated as ``floor(n_neg / N)`` -- the paper's
``floor((Y - 1) / N)`` with ``Y - 1`` the number of negative labels -- and the hinge is
weighted by ``L(rank) = sum_{k <= rank} 1 / k``. Rejections are capped (``8 * max_sampled``
draws in all) so a user who has nearly every item cannot stall the loop.
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.math cimport sqrtf, expf, logf, log1pf, floorf

cnp.import_array()

ctypedef fused order_t:
    int32_t
    int64_t

cdef enum:
    LOSS_WARP = 0
    LOSS_BPR = 1

cdef int64_t MAX_ITEMS = 4294967295  # rng_below works below 2**32


# -- random numbers: xoshiro256** (small state, fast, good quality) -------------------------
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


# -- small dense helpers -----------------------------------------------------------------------
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


cdef inline bint is_positive(const int32_t* row, int64_t n, int64_t item) noexcept nogil:
    """Binary search of ``item`` in a sorted CSR row."""
    cdef int64_t lo = 0, hi = n, mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if row[mid] < item:
            lo = mid + 1
        else:
            hi = mid
    return lo < n and row[lo] == item


def harmonic_table(Py_ssize_t n):
    """``L[r] = sum_{k=1..r} 1/k`` for r = 0..n (``L[0] = 0``), float32."""
    table = np.zeros(n + 1, dtype=np.float64)
    table[1:] = np.cumsum(1.0 / np.arange(1, n + 1, dtype=np.float64))
    return table.astype(np.float32)


cdef inline void sgd_step(
    float* pu, float* qi, float* qj, float* bi, float* bj,
    float* gpu, float* gqi, float* gqj, float* gbi, float* gbj,
    Py_ssize_t d, float weight, float lr, float user_reg, float item_reg,
    bint adagrad, bint use_bias,
) noexcept nogil:
    """One step on ``weight * (f(u,j) - f(u,i))`` plus L2 terms, for u, i and j.

    With adagrad each parameter's step is ``lr / sqrt(sum of its squared gradients)``
    (accumulators start at 1 so the first steps are plain SGD steps).
    """
    cdef Py_ssize_t c
    cdef float gu, gi, gj, p, a, b
    for c in range(d):
        p = pu[c]
        a = qi[c]
        b = qj[c]
        gu = weight * (b - a) + user_reg * p
        gi = -weight * p + item_reg * a
        gj = weight * p + item_reg * b
        if adagrad:
            gpu[c] += gu * gu
            gqi[c] += gi * gi
            gqj[c] += gj * gj
            pu[c] = p - lr * gu / sqrtf(gpu[c])
            qi[c] = a - lr * gi / sqrtf(gqi[c])
            qj[c] = b - lr * gj / sqrtf(gqj[c])
        else:
            pu[c] = p - lr * gu
            qi[c] = a - lr * gi
            qj[c] = b - lr * gj
    if use_bias:
        if adagrad:
            gbi[0] += weight * weight
            gbj[0] += weight * weight
            bi[0] += lr * weight / sqrtf(gbi[0])
            bj[0] -= lr * weight / sqrtf(gbj[0])
        else:
            bi[0] += lr * weight
            bj[0] -= lr * weight


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
    int loss=0,
    int max_sampled=10,
    float learning_rate=0.05,
    float user_reg=0.0,
    float item_reg=0.0,
    bint adagrad=True,
    bint use_bias=True,
):
    """Visit the positives ``order[start:stop]`` (indices into the CSR arrays) once each.

    ``indices[p]`` is the item and ``pos_users[p]`` the user of positive number ``p``.
    Factor, bias and accumulator arrays are updated in place.

    Returns
    -------
    (n_updates, total_weight, total_loss, n_compared)
        How many positives gave an update, the sum of their weights ``L(rank)``, the sum of
        weighted hinge (WARP) or logistic (BPR) losses, and the negatives scored in all.
    """
    cdef Py_ssize_t d = user_factors.shape[1]
    cdef int64_t n_items = item_factors.shape[0]
    cdef Py_ssize_t t, p
    cdef int64_t u, i, j, row_start, row_len, n_neg, n_sampled, n_draws, max_draws, rank
    cdef float f_pos, f_neg, weight, margin, x
    cdef float* pu
    cdef float* qi
    cdef float* bias_ptr = &item_bias[0]
    cdef float* bacc_ptr = &bias_accum[0]
    cdef const int32_t* row
    cdef uint64_t* s = &state[0]
    cdef int64_t n_updates = 0, n_compared = 0
    cdef double total_weight = 0.0, total_loss = 0.0
    cdef float zero_bias = 0.0
    if d != item_factors.shape[1]:
        raise ValueError("user and item factors must have the same width")
    if n_items >= MAX_ITEMS:
        raise ValueError("too many items for the sampler")
    max_draws = 8 * max_sampled

    with nogil:
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
            pu = &user_factors[u, 0]
            qi = &item_factors[i, 0]
            f_pos = dot(pu, qi, d)
            if use_bias:
                f_pos = f_pos + bias_ptr[i]

            if loss == LOSS_BPR:
                j = -1
                for n_draws in range(max_draws):
                    j = rng_below(s, n_items)
                    if not is_positive(row, row_len, j):
                        break
                    j = -1
                if j < 0:
                    continue
                f_neg = dot(pu, &item_factors[j, 0], d)
                if use_bias:
                    f_neg = f_neg + bias_ptr[j]
                n_compared += 1
                x = f_pos - f_neg
                # gradient of log(1 + exp(-x)) w.r.t. x is -sigmoid(-x)
                if x > 0:
                    weight = expf(-x) / (1.0 + expf(-x))
                    total_loss += log1pf(expf(-x))
                else:
                    weight = 1.0 / (1.0 + expf(x))
                    total_loss += -x + log1pf(expf(x))
            else:
                n_sampled = 0
                n_draws = 0
                j = -1
                while n_sampled < max_sampled and n_draws < max_draws:
                    n_draws += 1
                    j = rng_below(s, n_items)
                    if is_positive(row, row_len, j):
                        j = -1
                        continue  # rejected: does not count toward N
                    n_sampled += 1
                    f_neg = dot(pu, &item_factors[j, 0], d)
                    if use_bias:
                        f_neg = f_neg + bias_ptr[j]
                    if 1.0 + f_neg > f_pos:
                        break
                    j = -1
                n_compared += n_sampled
                if j < 0:
                    continue  # no violator: the positive is ranked well enough, no update
                rank = n_neg // n_sampled
                weight = rank_weights[rank]
                total_loss += weight * (1.0 + f_neg - f_pos)

            total_weight += weight
            n_updates += 1
            if use_bias:
                sgd_step(pu, qi, &item_factors[j, 0], &bias_ptr[i], &bias_ptr[j],
                         &user_accum[u, 0], &item_accum[i, 0], &item_accum[j, 0],
                         &bacc_ptr[i], &bacc_ptr[j],
                         d, weight, learning_rate, user_reg, item_reg, adagrad, True)
            else:
                sgd_step(pu, qi, &item_factors[j, 0], &zero_bias, &zero_bias,
                         &user_accum[u, 0], &item_accum[i, 0], &item_accum[j, 0],
                         &zero_bias, &zero_bias,
                         d, weight, learning_rate, user_reg, item_reg, adagrad, False)
    return n_updates, total_weight, total_loss, n_compared
