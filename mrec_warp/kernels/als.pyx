# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Weighted least-squares solves for implicit ALS (WRMF, Hu, Koren & Volinsky 2008).

One half-iteration of ALS solves, for every row ``u`` of a confidence matrix ``C`` (users x
items for the user step, items x users for the item step) and the fixed factors ``Y`` of
the other side,

    (G + Y^T (C_u - I) Y) x_u = Y^T C_u p_u,    G = Y^T Y + reg * I,

where ``p_u`` is 1 on the row's stored entries and ``C_u`` holds their confidences (1
elsewhere). ``G`` is computed once per half-iteration by the caller (BLAS), so each row
costs O(d^2 + n_u * d) per conjugate-gradient step and touches only its stored entries.

Two solvers:

* :func:`solve_cg`: a few conjugate-gradient steps warm-started from the current row
  (Takacs, Pilaszy & Tikk 2011), float32; the training default.
* :func:`solve_exact`: builds the d x d system in float64 and solves it by Cholesky; the
  reference for tests, an option for training, and the fold-in solve.

Rows are independent, so callers split ``[start, stop)`` ranges over threads; every
function here runs without the GIL and each row's result depends only on its own data,
so the output is the same whatever the number of threads.
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport malloc, free
from libc.math cimport sqrt

from mrec_warp.kernels.vectors cimport dot

cnp.import_array()

ctypedef fused index_t:
    int32_t
    int64_t


# The CG loop is C (mw_cg.h) so that GCC can build it for FMA CPUs as well and pick one at
# load time; one body serves both index widths.
cdef extern from "mw_cg.h":
    void cg_rows_i32 "mw_cg_rows_i32" (float* X, const float* Y, const float* G, const int64_t* indptr,
                                       const int32_t* idx, const float* conf, Py_ssize_t start, Py_ssize_t stop,
                                       Py_ssize_t d, int steps, float* buf) noexcept nogil
    void cg_rows_i64 "mw_cg_rows_i64" (float* X, const float* Y, const float* G, const int64_t* indptr,
                                       const int64_t* idx, const float* conf, Py_ssize_t start, Py_ssize_t stop,
                                       Py_ssize_t d, int steps, float* buf) noexcept nogil


def _check(X, Y, G, indptr, conf, indices):
    if X.shape[1] != Y.shape[1] or G.shape[0] != X.shape[1] or G.shape[1] != X.shape[1]:
        raise ValueError("factor widths and the Gram matrix do not agree")
    if indptr.shape[0] != X.shape[0] + 1:
        raise ValueError("indptr needs one entry per row plus one")
    if conf.shape[0] != indices.shape[0]:
        raise ValueError("one confidence per stored entry")


def solve_cg(
    float[:, ::1] X,
    const float[:, ::1] Y,
    const float[:, ::1] G,
    const int64_t[::1] indptr,
    const index_t[::1] indices,
    const float[::1] conf,
    Py_ssize_t start,
    Py_ssize_t stop,
    int steps,
):
    """Refine rows ``X[start:stop]`` in place by ``steps`` conjugate-gradient steps each.

    ``G`` is ``Y^T Y + reg * I``; ``indptr``/``indices``/``conf`` are the CSR structure and
    confidences of the rows. The first residual is taken at the current row, so rows start
    where the previous iteration left them.
    """
    _check(X, Y, G, indptr, conf, indices)
    cdef Py_ssize_t d = X.shape[1]
    cdef float* buf
    if stop <= start:
        return
    if start < 0 or stop > X.shape[0]:
        raise ValueError("row range out of bounds")
    cdef float* x = &X[0, 0]
    cdef const float* y = &Y[0, 0]
    cdef const float* g = &G[0, 0]
    cdef const int64_t* ip = &indptr[0]
    cdef const index_t* idx = &indices[0] if indices.shape[0] else NULL
    cdef const float* c = &conf[0] if conf.shape[0] else NULL
    with nogil:
        buf = <float*>malloc(3 * d * sizeof(float))
        if buf == NULL:
            with gil:
                raise MemoryError()
        if index_t is int32_t:
            cg_rows_i32(x, y, g, ip, idx, c, start, stop, d, steps, buf)
        else:
            cg_rows_i64(x, y, g, ip, idx, c, start, stop, d, steps, buf)
        free(buf)


cdef int cholesky_solve(double* A, double* b, Py_ssize_t d) noexcept nogil:
    """Solve A z = b in place (z in b) for symmetric positive definite A (lower factor in A).

    Returns 0, or 1 when A is not positive definite.
    """
    cdef Py_ssize_t i, j, k
    cdef double s
    for j in range(d):
        s = A[j * d + j]
        for k in range(j):
            s -= A[j * d + k] * A[j * d + k]
        if s <= 0:
            return 1
        s = sqrt(s)
        A[j * d + j] = s
        for i in range(j + 1, d):
            for k in range(j):
                A[i * d + j] -= A[i * d + k] * A[j * d + k]
            A[i * d + j] /= s
    for i in range(d):  # L w = b
        s = b[i]
        for k in range(i):
            s -= A[i * d + k] * b[k]
        b[i] = s / A[i * d + i]
    i = d - 1
    while i >= 0:  # L^T z = w
        s = b[i]
        for k in range(i + 1, d):
            s -= A[k * d + i] * b[k]
        b[i] = s / A[i * d + i]
        i -= 1
    return 0


def solve_exact(
    float[:, ::1] X,
    const float[:, ::1] Y,
    const float[:, ::1] G,
    const int64_t[::1] indptr,
    const index_t[::1] indices,
    const float[::1] conf,
    Py_ssize_t start,
    Py_ssize_t stop,
):
    """Set rows ``X[start:stop]`` to the exact least-squares solutions (float64 Cholesky).

    Returns the number of rows whose system was not positive definite (left unchanged);
    that only happens with ``reg = 0`` and degenerate factors.
    """
    _check(X, Y, G, indptr, conf, indices)
    cdef Py_ssize_t d = X.shape[1], u, k, a, b
    cdef int64_t p0, p1
    cdef double c
    cdef const float* y
    cdef const float* g = &G[0, 0]
    cdef double* A
    cdef double* rhs
    cdef Py_ssize_t failed = 0
    if stop <= start:
        return 0
    with nogil:
        A = <double*>malloc((d * d + d) * sizeof(double))
        if A == NULL:
            with gil:
                raise MemoryError()
        rhs = A + d * d
        for u in range(start, stop):
            p0 = indptr[u]
            p1 = indptr[u + 1]
            for a in range(d * d):
                A[a] = g[a]
            for a in range(d):
                rhs[a] = 0
            for k in range(p0, p1):
                c = conf[k]
                y = &Y[indices[k], 0]
                for a in range(d):
                    rhs[a] += c * y[a]
                    for b in range(a + 1):  # lower triangle is all the factorisation reads
                        A[a * d + b] += (c - 1.0) * y[a] * y[b]
            if cholesky_solve(A, rhs, d):
                failed += 1
                continue
            for a in range(d):
                X[u, a] = <float>rhs[a]
        free(A)
    return failed


def observed_loss(
    const float[:, ::1] X,
    const float[:, ::1] Y,
    const int64_t[::1] indptr,
    const index_t[::1] indices,
    const float[::1] conf,
):
    """``sum over stored (u, i) of c (1 - s)^2 - s^2`` with ``s = x_u . y_i``, in float64.

    Added to ``sum over all (u, i) of s^2`` (cheap from the two Gram matrices) it gives the
    weighted squared error of WRMF without visiting the unobserved pairs.
    """
    cdef Py_ssize_t d = X.shape[1], u
    cdef int64_t k
    cdef double s, c, total = 0
    with nogil:
        for u in range(X.shape[0]):
            for k in range(indptr[u], indptr[u + 1]):
                c = conf[k]
                s = dot(&X[u, 0], &Y[indices[k], 0], d)
                total += c * (1.0 - s) * (1.0 - s) - s * s
    return total
