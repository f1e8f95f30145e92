# cython: language_level=3
"""The kernels' random numbers: xoshiro256** streams seeded by splitmix64.

Every kernel call owns one 4-word state (a uint64 array from :func:`rng.seed_state`), so
one thread with a given seed is bit-for-bit reproducible and threads never share a stream.
Inline functions in a .pxd are compiled into each kernel that cimports them: no call cost.
"""
from libc.stdint cimport int32_t, int64_t, uint64_t

#: Index arrays the kernels shuffle: a training order of positives, int32 or int64.
ctypedef fused order_t:
    int32_t
    int64_t

cdef extern from "mw_rng.h":
    int64_t MAX_ITEMS "MW_MAX_ITEMS"  # rng_below draws below 2**32


cdef inline uint64_t splitmix64(uint64_t* x) noexcept nogil:
    """The next output of the splitmix64 sequence at ``x`` (advanced in place); how the
    xoshiro authors advise to seed a state from one integer."""
    cdef uint64_t z
    x[0] += <uint64_t>0x9E3779B97F4A7C15
    z = x[0]
    z = (z ^ (z >> 30)) * <uint64_t>0xBF58476D1CE4E5B9
    z = (z ^ (z >> 27)) * <uint64_t>0x94D049BB133111EB
    return z ^ (z >> 31)


cdef inline uint64_t _rotl(uint64_t x, int k) noexcept nogil:
    return (x << k) | (x >> (64 - k))


cdef inline uint64_t rng_next(uint64_t* s) noexcept nogil:
    """The next 64 random bits of the xoshiro256** state ``s`` (advanced in place)."""
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


cdef inline int64_t rng_index(uint64_t* s, uint64_t n) noexcept nogil:
    """Uniform integer in [0, n) for any n >= 1: ``rng_below`` for n < 2**32, else a modulo."""
    if n <= <uint64_t>MAX_ITEMS:
        return rng_below(s, n)
    return <int64_t>(rng_next(s) % n)


cdef inline double rng_unit(uint64_t* s) noexcept nogil:
    """A uniform double in [0, 1) from the top 53 bits of one draw."""
    return <double>(rng_next(s) >> 11) * (1.0 / 9007199254740992.0)


cdef inline void shuffle_order(order_t[::1] order, uint64_t* s) noexcept nogil:
    """Fisher-Yates shuffle of ``order`` in place with the stream ``s`` (what
    :func:`rng.shuffle` and the fold-in kernel's epochs draw, the same numbers)."""
    cdef Py_ssize_t i = order.shape[0] - 1, j
    cdef order_t tmp
    while i > 0:
        j = <Py_ssize_t>rng_index(s, <uint64_t>(i + 1))
        tmp = order[i]
        order[i] = order[j]
        order[j] = tmp
        i -= 1
