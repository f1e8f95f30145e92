# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Scores of the item-item models: each history's rows of sparse weights, summed densely.

Why a kernel: ``history @ W`` with both sparse is scipy's general sparse product, which
counts the result's entries in a first pass, builds a sparse result in a second and is then
densified; the scores are wanted dense anyway, so each history row's weight rows are added
straight into its row of scores (``k`` scattered adds per history item, into a row that
stays in cache), without the GIL.
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint8_t

cnp.import_array()


cdef inline uint8_t _any_nonzero(const float* row, Py_ssize_t n) noexcept nogil:
    """Whether any of ``row[0:n]`` has ``abs(x) > 0`` (NaN has not: the test
    :func:`~mrec_warp.models._itemsim.popular_when_cold` makes of a row)."""
    cdef Py_ssize_t c
    for c in range(n):
        if row[c] > 0.0 or row[c] < 0.0:
            return 1
    return 0


cdef _check_histories(const int64_t[::1] h_indptr, const int32_t[::1] h_indices, const float[::1] h_data):
    """Refuse a histories' CSR whose indptr does not ascend within its entries."""
    cdef Py_ssize_t r, n_rows = h_indptr.shape[0] - 1
    for r in range(n_rows):
        if h_indptr[r] < 0 or h_indptr[r] > h_indptr[r + 1]:
            raise ValueError("the histories' indptr is not ascending")
    if n_rows > 0 and (h_indices.shape[0] < h_indptr[n_rows] or h_data.shape[0] < h_indptr[n_rows]):
        raise ValueError("the histories' indptr points past their entries")


cdef _raise_bad_index(int bad):
    """The error of a kernel that stopped at an index out of range (``bad``: which kind)."""
    if bad == 1:
        raise ValueError("a history item is not a row of the weights")
    if bad == 2:
        raise ValueError("a weight's column is not a scored item")
    if bad == 3:
        raise ValueError("a weights' row does not start before its end within their entries")


def history_times_weights(
    const int64_t[::1] h_indptr,
    const int32_t[::1] h_indices,
    const float[::1] h_data,
    const int64_t[::1] w_starts,
    const int64_t[::1] w_ends,
    const int32_t[::1] w_indices,
    const float[::1] w_data,
    float[:, ::1] out,
    uint8_t[::1] nonzero=None,
):
    """``out[r] = sum over the stored (j, x) of history row r of x * W[j]``.

    Parameters
    ----------
    h_indptr, h_indices, h_data : CSR arrays of the histories (one row per row of ``out``)
        Item indices must be rows of ``W``.
    w_starts, w_ends, w_indices, w_data : the weights ``W`` (items x scored items)
        Row ``j`` of ``W`` is the entries ``w_starts[j]:w_ends[j]`` of ``w_indices`` (columns
        of ``out``) and ``w_data``: a CSR matrix's ``indptr[:-1]`` and ``indptr[1:]``, or a
        prefix of each row (the largest weights at a smaller neighbour count).
    out : float32 array (rows, scored items), overwritten.
    nonzero : uint8 array (rows,), optional
        Written 1 where a row of ``out`` has a score other than zero, else 0 (a cold row:
        the caller ranks it by popularity), found while the row is in cache.

    Raises ``ValueError`` (nothing written past the arrays) when an index is out of range.
    """
    cdef Py_ssize_t n_rows = h_indptr.shape[0] - 1, n_w = w_starts.shape[0], n_cols = out.shape[1]
    cdef Py_ssize_t r, p, q, j, c
    cdef int64_t w_nnz = w_indices.shape[0]
    cdef float x
    cdef float* row
    cdef int bad = 0
    if n_rows < 0 or n_w < 0 or out.shape[0] != n_rows:
        raise ValueError("the histories need one row of scores each")
    _check_histories(h_indptr, h_indices, h_data)
    if w_data.shape[0] != w_indices.shape[0]:
        raise ValueError("the weights need one value per column index")
    if w_ends.shape[0] != n_w:
        raise ValueError("the weights need one start and one end per row")
    cdef bint flags = nonzero is not None
    if flags and nonzero.shape[0] != n_rows:
        raise ValueError("nonzero needs one flag per row")
    with nogil:
        for r in range(n_rows):
            row = &out[r, 0]
            for c in range(n_cols):
                row[c] = 0.0
            for p in range(h_indptr[r], h_indptr[r + 1]):
                j = h_indices[p]
                if j < 0 or j >= n_w:
                    bad = 1
                    break
                if w_starts[j] < 0 or w_starts[j] > w_ends[j] or w_ends[j] > w_nnz:
                    bad = 3
                    break
                x = h_data[p]
                for q in range(w_starts[j], w_ends[j]):
                    c = w_indices[q]
                    if c < 0 or c >= n_cols:
                        bad = 2
                        break
                    row[c] += x * w_data[q]
                if bad:
                    break
            if bad:
                break
            if flags:
                nonzero[r] = _any_nonzero(row, n_cols)
    _raise_bad_index(bad)


def rows_into_dense(
    const int64_t[::1] starts,
    const int64_t[::1] ends,
    const int32_t[::1] indices,
    const float[::1] data,
    float[:, ::1] out,
):
    """``out`` overwritten with the weights whose row ``j`` is the entries ``starts[j]:ends[j]``
    of ``indices`` and ``data`` (as :func:`history_times_weights` reads them), zero elsewhere:
    the dense weights of one neighbour count, written without a sparse copy of them.

    Raises ``ValueError`` (nothing written past the arrays) when an index is out of range.
    """
    cdef Py_ssize_t n_w = starts.shape[0], n_cols = out.shape[1], j, q, c
    cdef int64_t nnz = indices.shape[0]
    cdef int bad = 0
    if ends.shape[0] != n_w or out.shape[0] != n_w or data.shape[0] != nnz:
        raise ValueError("one start, one end and one row of out per row of the weights, one value per index")
    with nogil:
        for j in range(n_w):
            if starts[j] < 0 or starts[j] > ends[j] or ends[j] > nnz:
                bad = 3
                break
            for c in range(n_cols):
                out[j, c] = 0.0
            for q in range(starts[j], ends[j]):
                c = indices[q]
                if c < 0 or c >= n_cols:
                    bad = 2
                    break
                out[j, c] = data[q]
            if bad:
                break
    _raise_bad_index(bad)



def history_times_dense(
    const int64_t[::1] h_indptr,
    const int32_t[::1] h_indices,
    const float[::1] h_data,
    const float[:, ::1] weights,
    float[:, ::1] out,
    uint8_t[::1] nonzero,
):
    """``out[r] = sum over the stored (j, x) of history row r of x * weights[j]`` for dense
    ``weights`` (items x scored items), in the order a CSR times dense product adds them,
    and ``nonzero[r]``: whether row ``r`` has a score other than zero
    (:func:`history_times_weights`' flags): a row is written, summed and checked while it is
    in cache, with no array of scores besides ``out``.

    Raises ``ValueError`` (nothing written past the arrays) when an index is out of range.
    """
    cdef Py_ssize_t n_rows = h_indptr.shape[0] - 1, n_w = weights.shape[0], n_cols = weights.shape[1]
    cdef Py_ssize_t r, p, j, c
    cdef float x
    cdef float* row
    cdef const float* w_row
    cdef int bad = 0
    if n_rows < 0 or out.shape[0] != n_rows or out.shape[1] != n_cols or nonzero.shape[0] != n_rows:
        raise ValueError("the histories need one row of scores and one flag each, as wide as the weights")
    _check_histories(h_indptr, h_indices, h_data)
    with nogil:
        for r in range(n_rows):
            row = &out[r, 0]
            for c in range(n_cols):
                row[c] = 0.0
            for p in range(h_indptr[r], h_indptr[r + 1]):
                j = h_indices[p]
                if j < 0 or j >= n_w:
                    bad = 1
                    break
                x = h_data[p]
                w_row = &weights[j, 0]
                for c in range(n_cols):
                    row[c] += x * w_row[c]
            if bad:
                break
            nonzero[r] = _any_nonzero(row, n_cols)
    _raise_bad_index(bad)
