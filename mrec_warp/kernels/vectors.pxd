# cython: language_level=3
"""Small dense-vector helpers every kernel shares: dot product, prefetch, norm clipping.

Inline functions in a .pxd are compiled into each kernel that cimports them, so they cost
nothing at run time and there is one copy to read.
"""
from libc.math cimport sqrtf

cdef extern from "mw_cpu.h":
    void MW_PREFETCH(const void* p) noexcept nogil


cdef extern from "mw_dot.h":
    # Four independent SSE accumulators (C, for the intrinsics): a single one waits on every add.
    float dot "mw_dot" (const float* a, const float* b, Py_ssize_t d) noexcept nogil


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
