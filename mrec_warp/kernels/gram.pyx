# cython: language_level=3
"""Rows of the item-item Gram matrix ``X'X`` of a sparse users x items matrix, dense, in float64.

Row ``i`` is the sum, over the users ``u`` of item ``i`` in ascending order, of ``x_ui``
times user ``u``'s row of ``X``: each entry gets its products added in the order of the
users, one multiply and one add each, as scipy's sparse product adds them (so the float64
sums are the same bits), written straight into the dense row instead of a sparse result
that is then counted, built and densified.
"""
from libc.stdint cimport int32_t, int64_t


def gram_rows(
    const int64_t[::1] t_indptr,
    const int32_t[::1] t_indices,
    const double[::1] t_data,
    const int64_t[::1] indptr,
    const int32_t[::1] indices,
    const double[::1] data,
    int64_t start,
    double[:, ::1] out,
):
    """``out[r]`` = row ``start + r`` of ``X'X``.

    Parameters
    ----------
    t_indptr, t_indices, t_data : CSR of ``X'`` (items x users, users ascending in each row)
    indptr, indices, data : CSR of ``X`` (users x items)
    start : int
        The first item of the rows computed.
    out : float64 array (rows, n_items), overwritten.

    Raises ``ValueError`` (nothing read out of bounds) when the arrays do not agree.
    """
    cdef Py_ssize_t n_rows = out.shape[0], n = out.shape[1]
    cdef Py_ssize_t n_users = indptr.shape[0] - 1, n_items = t_indptr.shape[0] - 1
    cdef Py_ssize_t r, k
    cdef int64_t p, q, i, u
    cdef double v
    cdef double* row
    if start < 0 or start + n_rows > n_items or n != n_items or n_users < 0:
        raise ValueError("the rows must be items of X'")
    if t_indptr[0] != 0 or t_indptr[n_items] > t_indices.shape[0] or t_indices.shape[0] != t_data.shape[0]:
        raise ValueError("X' arrays do not agree")
    if indptr[0] != 0 or indptr[n_users] > indices.shape[0] or indices.shape[0] != data.shape[0]:
        raise ValueError("X arrays do not agree")
    for u in range(n_users):
        if indptr[u] > indptr[u + 1]:
            raise ValueError("X's indptr is not ascending")
    for p in range(indptr[n_users]):
        if indices[p] < 0 or indices[p] >= n:
            raise ValueError("an item index of X is out of range")
    for i in range(start, start + n_rows):
        if t_indptr[i] > t_indptr[i + 1]:
            raise ValueError("X''s indptr is not ascending")
        for p in range(t_indptr[i], t_indptr[i + 1]):
            if t_indices[p] < 0 or t_indices[p] >= n_users:
                raise ValueError("a user index of X' is out of range")
    with nogil:
        for r in range(n_rows):
            row = &out[r, 0]
            for k in range(n):
                row[k] = 0.0
            i = start + r
            for p in range(t_indptr[i], t_indptr[i + 1]):
                u = t_indices[p]
                v = t_data[p]
                for q in range(indptr[u], indptr[u + 1]):
                    row[indices[q]] += v * data[q]
