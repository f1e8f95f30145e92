# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Random streams and the draws made outside the training loops, for every WARP-family model.

Seeding (:func:`seed_state`), shuffling the visiting order (:func:`shuffle`), weighted
draws of positives (:func:`alias_table`, :func:`draw_positives`) and WARP's rank weights
(:func:`harmonic_table`). The streams are the xoshiro256** of ``rng.pxd``, the same the
kernels draw negatives with, so a fit with one thread and a given seed is bit-for-bit
reproducible.
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint64_t

# splitmix64, rng_index and rng_unit come from rng.pxd (Cython reads a module's own .pxd).

cnp.import_array()


def seed_state(uint64_t seed):
    """A 4-word xoshiro state from one integer (splitmix64, as the xoshiro authors advise)."""
    state = np.empty(4, dtype=np.uint64)
    cdef uint64_t x = seed
    cdef int i
    for i in range(4):
        state[i] = splitmix64(&x)
    return state


def harmonic_table(Py_ssize_t n):
    """``L[r] = sum_{k=1..r} 1/k`` for r = 0..n (``L[0] = 0``), float32: WARP's weight of
    a positive whose estimated rank is ``r``."""
    table = np.zeros(n + 1, dtype=np.float64)
    table[1:] = np.cumsum(1.0 / np.arange(1, n + 1, dtype=np.float64))
    return table.astype(np.float32)


def shuffle(order_t[::1] order, uint64_t[::1] state):
    """Fisher-Yates shuffle in place with the kernel's RNG (no Python, no GIL)."""
    with nogil:
        shuffle_order(order, &state[0])


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
            k = rng_index(s, <uint64_t>m)
            if rng_unit(s) >= prob[k]:
                k = alias[k]
            order[t] = <order_t>(k if to == NULL else to[k])
