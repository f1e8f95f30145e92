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

from mrec_warp.models._kernels cimport dot

cnp.import_array()

ctypedef fused index_t:
    int32_t
    int64_t


cdef inline void symv(const float* G, const float* x, float* out, Py_ssize_t d) noexcept nogil:
    """out = G x for a dense row-major d x d G."""
    cdef Py_ssize_t a
    for a in range(d):
        out[a] = dot(&G[a * d], x, d)


cdef inline void axpy(float alpha, const float* x, float* y, Py_ssize_t d) noexcept nogil:
    cdef Py_ssize_t c
    for c in range(d):
        y[c] += alpha * x[c]


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
    cdef Py_ssize_t d = X.shape[1], u, k, it
    cdef int64_t p0, p1
    cdef float c, s, alpha, rs_old, rs_new, pap
    cdef float* x
    cdef const float* y
    cdef float* r
    cdef float* p
    cdef float* ap
    cdef float* buf
    if stop <= start:
        return
    with nogil:
        buf = <float*>malloc(3 * d * sizeof(float))
        if buf == NULL:
            with gil:
                raise MemoryError()
        r = buf
        p = buf + d
        ap = buf + 2 * d
        for u in range(start, stop):
            x = &X[u, 0]
            p0 = indptr[u]
            p1 = indptr[u + 1]
            # r = b - A x = -G x + sum_i (c_i - (c_i - 1) y_i.x) y_i
            symv(&G[0, 0], x, r, d)
            for k in range(d):
                r[k] = -r[k]
            for k in range(p0, p1):
                c = conf[k]
                y = &Y[indices[k], 0]
                s = dot(y, x, d)
                axpy(c - (c - 1.0) * s, y, r, d)
            for k in range(d):
                p[k] = r[k]
            rs_old = dot(r, r, d)
            for it in range(steps):
                if rs_old < 1e-20:
                    break
                # A p = G p + sum_i (c_i - 1) (y_i.p) y_i
                symv(&G[0, 0], p, ap, d)
                for k in range(p0, p1):
                    y = &Y[indices[k], 0]
                    axpy((conf[k] - 1.0) * dot(y, p, d), y, ap, d)
                pap = dot(p, ap, d)
                if pap <= 0:
                    break  # only for a singular system (reg = 0); keep the last iterate
                alpha = rs_old / pap
                axpy(alpha, p, x, d)
                axpy(-alpha, ap, r, d)
                rs_new = dot(r, r, d)
                for k in range(d):
                    p[k] = r[k] + (rs_new / rs_old) * p[k]
                rs_old = rs_new
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
