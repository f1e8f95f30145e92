# cython: language_level=3
"""SLIM's per-item solver: non-negative elastic net by coordinate descent on the Gram matrix.

For a target item ``j`` SLIM (Ning & Karypis, 2011) solves

    min_w  1/2 ||x_j - X w||^2 + l2/2 ||w||^2 + l1 ||w||_1,   w >= 0,  w_j = 0

where ``X`` is the binary users x items matrix. Everything the solver needs is in the
item-item Gram matrix ``G = X'X``: with ``c = G[:, j] - G w`` (the correlation of each item
with the residual), the exact minimiser along coordinate ``k`` is

    w_k <- max(0, (c_k + G_kk w_k - l1) / (G_kk + l2))

and a change ``d`` of ``w_k`` moves ``c`` by ``-d G[:, k]`` (covariance updates, as in
glmnet). Since ``G >= 0`` and ``w >= 0``, ``c_k <= G_kj`` always, so an item that co-occurs
with ``j`` at most ``l1`` times can never get a weight: only the entries of column ``j`` of
``G`` above ``l1`` are candidates. That bound is what makes SLIM affordable on a sparse
Gram matrix: the work per item is its candidates times the length of the Gram columns of
the items that do get weights, never the catalogue size.

Sweeps alternate as in glmnet: one sweep over every candidate (which also checks the
optimality of the zero weights), then sweeps over the *active* items only (those with a
weight) on a dense copy of their block of ``G``, which costs ``|active|^2`` per sweep instead
of ``|active|`` Gram columns; the residual of every candidate is brought up to date once at
the end. The next full sweep finds any item that should join; the descent ends when a full
sweep moves no weight by more than ``tol`` times the largest.

``G`` is passed as CSR (symmetric, so row ``k`` is column ``k``) with float32 values:
co-occurrence counts are integers, exact in float32 up to 2**24. The residual ``c`` and the
weights are accumulated in float64 per item, so the answer does not drift with long sweeps.
"""
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport malloc, free, qsort
from libc.string cimport memcpy
from libc.math cimport fabs

import numpy as np


cdef int _descending(const void* a, const void* b) noexcept nogil:
    cdef uint64_t x = (<const uint64_t*> a)[0], y = (<const uint64_t*> b)[0]
    return (x < y) - (x > y)


cdef inline uint64_t _sort_key(float value, int32_t item) noexcept nogil:
    """A key that sorts by a non-negative float32 value, then by item: the bits of a
    non-negative float order as the float does."""
    cdef uint32_t bits
    memcpy(&bits, &value, 4)
    return (<uint64_t> bits << 32) | <uint32_t> item


cdef void _insert_topk(int32_t* top_idx, float* top_val, int64_t* n_top, int64_t topk,
                       int32_t idx, float val) noexcept nogil:
    """Insert (idx, val) into a list kept sorted by value, best first, of at most topk."""
    cdef int64_t pos = n_top[0]
    if pos == topk:
        if val <= top_val[topk - 1]:
            return
        pos = topk - 1
    else:
        n_top[0] += 1
    while pos > 0 and top_val[pos - 1] < val:
        top_val[pos] = top_val[pos - 1]
        top_idx[pos] = top_idx[pos - 1]
        pos -= 1
    top_val[pos] = val
    top_idx[pos] = idx


#: Largest active set solved on a dense block (8 * MAX_DENSE^2 bytes per worker); beyond
#: it the item keeps to full sweeps.
cdef enum:
    MAX_DENSE = 2048


cdef inline double _coordinate(double c, double wk, double gkk, double l1, double l2) noexcept nogil:
    """The exact non-negative minimiser along one coordinate (``c`` excludes its own term)."""
    cdef double ck = c + gkk * wk
    return (ck - l1) / (gkk + l2) if ck > l1 else 0.0


cdef inline double _move(double* w, int64_t q, double cq, double gkk, double l1, double l2,
                         double* max_d, double* max_w) noexcept nogil:
    """Move weight ``w[q]`` to its coordinate minimum (residual ``cq``, Gram diagonal ``gkk``);
    return the change, and raise ``max_d`` / ``max_w`` to its size and the new weight."""
    cdef double wk = w[q]
    cdef double new = _coordinate(cq, wk, gkk, l1, l2)
    cdef double d = new - wk
    if d != 0.0:
        w[q] = new
        if fabs(d) > max_d[0]:
            max_d[0] = fabs(d)
    if new > max_w[0]:
        max_w[0] = new
    return d


cdef inline void _covariance_update(const int64_t[::1] g_indptr, const int32_t[::1] g_indices,
                                    const float[::1] g_data, const int32_t* pos, double* c, int64_t k,
                                    double d) noexcept nogil:
    """``c -= d * G[:, k]`` on the candidates (``pos[item]`` is an item's candidate slot, -1
    for none): the residual after weight ``k`` moved by ``d``."""
    cdef int64_t p, m
    for p in range(g_indptr[k], g_indptr[k + 1]):
        m = pos[g_indices[p]]
        if m >= 0:
            c[m] -= d * g_data[p]


cdef double _full_sweep(const int64_t[::1] g_indptr, const int32_t[::1] g_indices, const float[::1] g_data,
                        const float[::1] g_diag, const int32_t* cand, const int32_t* pos, double* c, double* w,
                        int64_t n_cand, double l1, double l2, double* max_w) noexcept nogil:
    """One coordinate-descent sweep over every candidate; returns the largest change."""
    cdef int64_t q, k
    cdef double d, max_d = 0.0
    max_w[0] = 0.0
    for q in range(n_cand):
        k = cand[q]
        d = _move(w, q, c[q], g_diag[k], l1, l2, &max_d, max_w)
        if d != 0.0:
            _covariance_update(g_indptr, g_indices, g_data, pos, c, k, d)
    return max_d


cdef void _active_sweeps(const int64_t[::1] g_indptr, const int32_t[::1] g_indices, const float[::1] g_data,
                         const float[::1] g_diag, const int32_t* cand, const int32_t* pos, double* c, double* w,
                         int64_t n_cand, double l1, double l2, int max_iter, double tol,
                         int32_t* act, int32_t* apos, double* ga, double* ca, double* w0) noexcept nogil:
    """Sweeps over the active candidates only, on their dense block of G; then update c."""
    cdef int64_t n_act = 0, q, a, b, k, p, m
    cdef double d, max_d, max_w
    cdef int it
    for q in range(n_cand):
        if w[q] > 0.0:
            if n_act == MAX_DENSE:
                for a in range(n_act):
                    apos[act[a]] = -1
                return
            apos[q] = <int32_t> n_act
            act[n_act] = <int32_t> q
            n_act += 1
    if n_act == 0:
        return
    for a in range(n_act):
        q = act[a]
        w0[a] = w[q]
        ca[a] = c[q]
        for b in range(n_act):
            ga[a * n_act + b] = 0.0
        k = cand[q]
        for p in range(g_indptr[k], g_indptr[k + 1]):
            m = pos[g_indices[p]]
            if m >= 0 and apos[m] >= 0:
                ga[a * n_act + apos[m]] = g_data[p]
    for it in range(max_iter):
        max_d = 0.0
        max_w = 0.0
        for a in range(n_act):
            q = act[a]
            d = _move(w, q, ca[a], g_diag[cand[q]], l1, l2, &max_d, &max_w)
            if d != 0.0:
                for b in range(n_act):
                    ca[b] -= d * ga[a * n_act + b]
        if max_d <= tol * max_w:
            break
    # bring every candidate's residual up to date with the net change of the active weights
    for a in range(n_act):
        q = act[a]
        d = w[q] - w0[a]
        apos[q] = -1
        if d != 0.0:
            _covariance_update(g_indptr, g_indices, g_data, pos, c, cand[q], d)


def slim_block(
    const int64_t[::1] g_indptr,
    const int32_t[::1] g_indices,
    const float[::1] g_data,
    const float[::1] g_diag,
    int64_t start,
    int64_t stop,
    double l1,
    double l2,
    int max_iter,
    double tol,
    int32_t[:, ::1] out_idx,
    float[:, ::1] out_val,
):
    """Solve SLIM for target items ``start..stop-1``; write each one's top-k weights.

    Parameters
    ----------
    g_indptr, g_indices, g_data : CSR of the Gram matrix ``X'X``.
    g_diag : float32 array (n_items,)
        Its diagonal (how many users have each item).
    start, stop : int
        Target items of this block.
    l1, l2 : float
        Penalties (see the module docstring), ``>= 0``.
    max_iter : int
        Most full sweeps per item (and most active-set sweeps between two full ones).
    tol : float
        A sweep whose largest weight change is below ``tol`` times the largest weight has
        converged.
    out_idx, out_val : (stop - start, topk) arrays, written in place
        Row r holds item ``start + r``'s largest weights, best first: the source items
        ``k`` (with ``W[k, start + r] = value``) and their weights; unused slots are -1 / 0.
    """
    cdef int64_t n_items = g_diag.shape[0]
    cdef int64_t topk = out_idx.shape[1]
    if topk < 1 or stop - start != out_idx.shape[0] or out_val.shape[0] != out_idx.shape[0] \
            or out_val.shape[1] != topk:
        raise ValueError("output arrays must be (stop - start, topk) with topk >= 1")
    if start < 0 or stop > n_items or start > stop:
        raise ValueError("item range out of bounds")
    # one setting's path: the same candidates (co-occurring more than l1 times) and sweeps
    slim_path_block(g_indptr, g_indices, g_data, g_diag, np.arange(start, stop, dtype=np.int32),
                    np.array([l1], dtype=np.float64), np.array([l2], dtype=np.float64), max_iter, tol,
                    np.asarray(out_idx)[None], np.asarray(out_val)[None])


def slim_path_block(
    const int64_t[::1] g_indptr,
    const int32_t[::1] g_indices,
    const float[::1] g_data,
    const float[::1] g_diag,
    const int32_t[::1] targets,
    const double[::1] l1s,
    const double[::1] l2s,
    int max_iter,
    double tol,
    int32_t[:, :, ::1] out_idx,
    float[:, :, ::1] out_val,
):
    """Solve SLIM for each of ``targets`` along a path of penalties, each setting's descent
    starting from the previous one's weights (a warm start: the residual and the weights are
    kept), and write each setting's top-k weights.

    Parameters
    ----------
    g_indptr, g_indices, g_data, g_diag : as :func:`slim_block`.
    targets : int32 array
        The target items solved (each a column of ``W``).
    l1s, l2s : float64 arrays, one entry per setting
        The penalties of the path, in the order solved. The candidates of a target are the
        items co-occurring with it more than the path's smallest ``l1`` times (a larger ``l1``
        leaves the others at zero: the coordinate update keeps them there).
    max_iter, tol : as :func:`slim_block`, per setting.
    out_idx, out_val : (settings, len(targets), topk) arrays, written in place
        ``[s, r]`` holds target ``targets[r]``'s largest weights at setting ``s``, best first
        (-1 / 0 in unused slots).
    """
    cdef int64_t n_items = g_diag.shape[0]
    cdef int64_t n_set = l1s.shape[0]
    cdef int64_t n_t = targets.shape[0]
    cdef int64_t topk = out_idx.shape[2]
    cdef int64_t j, p, q, k, n_cand, n_top, r, s
    cdef int it
    cdef double max_d, max_w, l1, l2, low = 0.0
    cdef int32_t* pos
    cdef int32_t* cand
    cdef int32_t* act
    cdef int32_t* apos
    cdef double* c
    cdef double* w
    cdef double* ga
    cdef double* ca
    cdef double* w0
    cdef uint64_t* keys
    if topk < 1 or out_idx.shape[0] != n_set or out_idx.shape[1] != n_t or out_val.shape[0] != n_set \
            or out_val.shape[1] != n_t or out_val.shape[2] != topk or l2s.shape[0] != n_set or n_set < 1:
        raise ValueError("output arrays must be (settings, targets, topk) with topk >= 1, one l2 per l1")
    if g_indptr.shape[0] != n_items + 1:
        raise ValueError("Gram matrix and diagonal disagree on the number of items")
    for r in range(n_t):
        if targets[r] < 0 or targets[r] >= n_items:
            raise ValueError("target item out of bounds")
    low = l1s[0]
    for s in range(n_set):
        if l1s[s] < 0 or l2s[s] < 0:
            raise ValueError("penalties must be >= 0")
        if l1s[s] < low:
            low = l1s[s]
    with nogil:
        pos = <int32_t*> malloc(n_items * sizeof(int32_t))
        cand = <int32_t*> malloc(n_items * sizeof(int32_t))
        act = <int32_t*> malloc(n_items * sizeof(int32_t))
        apos = <int32_t*> malloc(n_items * sizeof(int32_t))
        c = <double*> malloc(n_items * sizeof(double))
        w = <double*> malloc(n_items * sizeof(double))
        ca = <double*> malloc(n_items * sizeof(double))
        w0 = <double*> malloc(n_items * sizeof(double))
        ga = <double*> malloc(MAX_DENSE * MAX_DENSE * sizeof(double))
        keys = <uint64_t*> malloc(n_items * sizeof(uint64_t))
        if keys == NULL or pos == NULL or cand == NULL or act == NULL or apos == NULL or c == NULL or w == NULL \
                or ca == NULL or w0 == NULL or ga == NULL:
            free(pos); free(cand); free(act); free(apos); free(c); free(w); free(ca); free(w0); free(ga); free(keys)
            with gil:
                raise MemoryError()
        for k in range(n_items):
            pos[k] = -1
            apos[k] = -1
        for r in range(n_t):
            j = targets[r]
            n_cand = 0
            for p in range(g_indptr[j], g_indptr[j + 1]):
                k = g_indices[p]
                if k != j and g_data[p] > low:
                    keys[n_cand] = _sort_key(g_data[p], <int32_t> k)
                    n_cand += 1
            qsort(keys, n_cand, sizeof(uint64_t), _descending)
            for q in range(n_cand):
                k = <int32_t> (<uint32_t> keys[q])
                pos[k] = <int32_t> q
                cand[q] = <int32_t> k
                w[q] = 0.0
            for p in range(g_indptr[j], g_indptr[j + 1]):  # c = G[:, j] - G w with w = 0
                q = pos[g_indices[p]]
                if q >= 0:
                    c[q] = g_data[p]
            for s in range(n_set):
                l1 = l1s[s]
                l2 = l2s[s]
                for it in range(max_iter):
                    max_d = _full_sweep(g_indptr, g_indices, g_data, g_diag, cand, pos, c, w, n_cand, l1, l2, &max_w)
                    if max_d <= tol * max_w:
                        break
                    _active_sweeps(g_indptr, g_indices, g_data, g_diag, cand, pos, c, w, n_cand, l1, l2,
                                   max_iter, tol, act, apos, ga, ca, w0)
                n_top = 0
                for q in range(n_cand):
                    if w[q] > 0.0:
                        _insert_topk(&out_idx[s, r, 0], &out_val[s, r, 0], &n_top, topk, cand[q], <float> w[q])
                for q in range(n_top, topk):
                    out_idx[s, r, q] = -1
                    out_val[s, r, q] = 0.0
            for q in range(n_cand):
                pos[cand[q]] = -1
        free(pos); free(cand); free(act); free(apos); free(c); free(w); free(ca); free(w0); free(ga); free(keys)
