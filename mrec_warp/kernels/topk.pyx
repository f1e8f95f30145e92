# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Top-k selection per row: of a score block (each user's seen items skipped), and of a
sparse block of item-item weights (each item's largest ones, at several counts at once).

Why a kernel: ``argpartition`` + ``argsort`` on a users x items block walks the block
several times and allocates index arrays as big as the block; a size-k heap per row reads
each score once, skips seen items by merging with the sorted CSR row, and releases the GIL
so joblib threads can score blocks at the same time. The item-item weights are a sparse
product's stored entries: a selection in place over each row's positive values finds the
k-th largest (for every count asked, nested), and one pass keeps the entries above it,
without densifying the row or sorting it.
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.math cimport INFINITY

cnp.import_array()


cdef inline bint _worse(float va, int64_t ia, float vb, int64_t ib) noexcept nogil:
    """Is (va, ia) ranked below (vb, ib)? Lower score is worse; ties go to the lower index."""
    return va < vb or (va == vb and ia > ib)


cdef inline void _sift_down(float* hv, int64_t* hi, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    """Restore the min-heap (root = worst kept item) below ``pos``."""
    cdef Py_ssize_t child
    cdef float v = hv[pos]
    cdef int64_t idx = hi[pos]
    while True:
        child = 2 * pos + 1
        if child >= n:
            break
        if child + 1 < n and _worse(hv[child + 1], hi[child + 1], hv[child], hi[child]):
            child += 1
        if _worse(hv[child], hi[child], v, idx):
            hv[pos] = hv[child]
            hi[pos] = hi[child]
            pos = child
        else:
            break
    hv[pos] = v
    hi[pos] = idx


cdef inline void _sift_up(float* hv, int64_t* hi, Py_ssize_t pos) noexcept nogil:
    cdef Py_ssize_t parent
    cdef float v = hv[pos]
    cdef int64_t idx = hi[pos]
    while pos > 0:
        parent = (pos - 1) // 2
        if _worse(v, idx, hv[parent], hi[parent]):
            hv[pos] = hv[parent]
            hi[pos] = hi[parent]
            pos = parent
        else:
            break
    hv[pos] = v
    hi[pos] = idx


cdef inline bint _any_above8(const float* x, float thr) noexcept nogil:
    """Whether any of x[0..7] is > thr: eight compares OR-ed without branches (vectorisable);
    a NaN compares false, which is right since NaN never ranks."""
    return ((x[0] > thr) | (x[1] > thr) | (x[2] > thr) | (x[3] > thr)
            | (x[4] > thr) | (x[5] > thr) | (x[6] > thr) | (x[7] > thr))


def topk_masked(
    const float[:, ::1] scores,
    const int64_t[::1] rows,
    const int64_t[::1] indptr,
    const int32_t[::1] indices,
    const uint8_t[::1] item_mask,
    int64_t[:, ::1] out_items,
    float[:, ::1] out_scores,
):
    """Best ``k = out_items.shape[1]`` items of each score row, best first.

    Parameters
    ----------
    scores : float32 array (n_rows, n_items)
        Scores of a block of users against all items.
    rows : int64 array (n_rows,)
        For each score row, its row in the exclusion CSR (``-1``: exclude nothing).
    indptr, indices : int64 and int32 arrays
        CSR of the items to exclude per user (sorted indices), e.g. the training items.
    item_mask : uint8 array (n_items,) or empty
        Items never to recommend (1); empty means none.
    out_items, out_scores : (n_rows, k) arrays, written in place
        Item indices and scores; rows with fewer than k candidates are padded with -1 / -inf.
    """
    cdef Py_ssize_t n_rows = scores.shape[0], n_items = scores.shape[1]
    cdef Py_ssize_t k = out_items.shape[1]
    cdef Py_ssize_t r, j, n, p, end, pos
    cdef bint use_mask = item_mask.shape[0] > 0
    cdef float v, thr
    cdef const float* row
    cdef float* hv
    cdef int64_t* hi
    if k == 0 or n_rows == 0:
        return
    if use_mask and item_mask.shape[0] != n_items:
        raise ValueError("item_mask must have one entry per item")
    with nogil:
        for r in range(n_rows):
            hv = &out_scores[r, 0]
            hi = &out_items[r, 0]
            n = 0
            if rows[r] >= 0:
                p = indptr[rows[r]]
                end = indptr[rows[r] + 1]
            else:
                p = 0
                end = 0
            # Phase 1: fill the heap with the first k eligible items.
            j = 0
            while j < n_items and n < k:
                # the exclusion row is sorted, so one pointer walks along with j
                while p < end and indices[p] < j:
                    p += 1
                if not ((p < end and indices[p] == j) or (use_mask and item_mask[j])):
                    v = scores[r, j]
                    if v == v:  # NaN never ranks
                        hv[n] = v
                        hi[n] = j
                        _sift_up(hv, hi, n)
                        n += 1
                j += 1
            # Phase 2: the heap is full. Almost every score loses to the current k-th best,
            # so the hot loop is one load and one compare; exclusion and mask are checked
            # only for the rare winners. j only grows, so a later equal score never beats
            # the kept one (ties go to the lower index) and NaN fails the compare.
            if n == k:
                thr = hv[0]
                row = &scores[r, 0]
                while j < n_items:
                    # a chunk of 8 with no score above the threshold is skipped whole
                    if j + 8 <= n_items and not _any_above8(row + j, thr):
                        j += 8
                        continue
                    v = row[j]
                    if v > thr:
                        while p < end and indices[p] < j:
                            p += 1
                        if not ((p < end and indices[p] == j) or (use_mask and item_mask[j])):
                            hv[0] = v
                            hi[0] = j
                            _sift_down(hv, hi, k, 0)
                            thr = hv[0]
                    j += 1
            # pop the heap from the worst: each popped item goes to the end of the kept part
            pos = n
            while pos > 1:
                pos -= 1
                v = hv[0]
                j = hi[0]
                hv[0] = hv[pos]
                hi[0] = hi[pos]
                _sift_down(hv, hi, pos, 0)
                hv[pos] = v
                hi[pos] = j
            for p in range(n, k):
                hv[p] = -INFINITY
                hi[p] = -1


cdef void _select_largest(double* a, Py_ssize_t n, Py_ssize_t k) noexcept nogil:
    """Reorder ``a[0:n]`` so that ``a[0:k]`` holds its ``k`` largest values and ``a[k-1]``
    is the k-th largest (``0 < k <= n``): Wirth's selection, descending, with a median of
    three as pivot (expected linear time; runs of equal values stop both pointers, so they
    cannot make it quadratic)."""
    cdef Py_ssize_t lo = 0, hi = n - 1, i, j, target = k - 1
    cdef double x, t, a_lo, a_mid, a_hi
    while lo < hi:
        a_lo = a[lo]
        a_mid = a[lo + (hi - lo) // 2]
        a_hi = a[hi]
        if (a_lo <= a_mid <= a_hi) or (a_hi <= a_mid <= a_lo):
            x = a_mid
        elif (a_mid <= a_lo <= a_hi) or (a_hi <= a_lo <= a_mid):
            x = a_lo
        else:
            x = a_hi
        i = lo
        j = hi
        while i <= j:
            while a[i] > x:
                i += 1
            while x > a[j]:
                j -= 1
            if i <= j:
                t = a[i]
                a[i] = a[j]
                a[j] = t
                i += 1
                j -= 1
        if j < target:
            lo = i
        if target < i:
            hi = j


cdef enum:
    MAX_COUNTS_C = 32

#: Most neighbour counts :func:`top_k_classes` ranks at once.
MAX_COUNTS = MAX_COUNTS_C


def top_k_classes(
    const int64_t[::1] indptr,
    const int32_t[::1] indices,
    const double[::1] data,
    int64_t own_offset,
    const int64_t[::1] counts,
    int32_t[::1] out_indices,
    float[::1] out_data,
    uint8_t[::1] out_class,
    int64_t[::1] out_len,
    double[::1] work,
):
    """Each CSR row's largest positive entries at every count of ``counts``, in one pass.

    Row ``r`` is item ``own_offset + r``; its own column is never kept. For each count
    ``k`` (ascending, distinct), the row's ``k`` largest positive entries (all of them when
    it has fewer) form a set; the sets nest, and ties at a set's k-th value go to the entries
    stored first. The rows' entries of the largest set are written one row after the other,
    each in stored order: column, value (float32) and class ``c``, the index of the smallest
    count whose set holds it (so the top ``counts[c]`` of a row are its entries of class
    ``<= c``); ``out_len[r]`` says how many row ``r`` wrote. The outputs need
    ``sum_r min(stored entries of r, counts[-1])`` places; ``work`` holds the longest row.
    """
    cdef Py_ssize_t n_rows = indptr.shape[0] - 1, n_counts = counts.shape[0]
    cdef Py_ssize_t r, p, c, m, cur, kc, g, cls, start, end, row_start
    cdef Py_ssize_t pos = 0, room = out_data.shape[0]
    cdef int error = 0
    cdef int64_t own
    cdef double v
    cdef double thr[MAX_COUNTS_C]
    cdef int64_t quota[MAX_COUNTS_C]
    cdef bint keep_all[MAX_COUNTS_C]
    if n_counts == 0 or n_counts > MAX_COUNTS_C:
        raise ValueError(f"between 1 and {MAX_COUNTS_C} counts are ranked at once")
    for c in range(n_counts):
        if counts[c] < 1 or (c > 0 and counts[c] <= counts[c - 1]):
            raise ValueError("counts must be positive and strictly ascending")
    if out_len.shape[0] < n_rows:
        raise ValueError("out_len needs one entry per row")
    if out_indices.shape[0] != out_data.shape[0] or out_class.shape[0] != out_data.shape[0]:
        raise ValueError("the output arrays must have one length")
    if work.shape[0] < 1:
        raise ValueError("work needs room for the longest row (at least one place)")
    with nogil:
        for r in range(n_rows):
            start = indptr[r]
            end = indptr[r + 1]
            if start < 0 or end < start or end > data.shape[0] or end > indices.shape[0] \
                    or end - start > work.shape[0]:
                error = 1
                break
            own = own_offset + r
            m = 0
            for p in range(start, end):
                v = data[p]
                if v > 0 and indices[p] != own:
                    work[m] = v
                    m += 1
            # thresholds from the largest count down: each selection runs within the last one
            cur = m
            for c in range(n_counts - 1, -1, -1):
                kc = counts[c]
                if kc >= m:
                    keep_all[c] = True
                    continue
                keep_all[c] = False
                _select_largest(&work[0], cur, kc)
                thr[c] = work[kc - 1]
                g = 0
                for p in range(kc):
                    if work[p] > thr[c]:
                        g += 1
                quota[c] = kc - g
                cur = kc
            row_start = pos
            if pos + min(m, counts[n_counts - 1]) > room:
                error = 2
                break
            for p in range(start, end):
                v = data[p]
                if not (v > 0) or indices[p] == own:
                    continue
                cls = -1
                for c in range(n_counts - 1, -1, -1):
                    if keep_all[c] or v > thr[c]:
                        cls = c
                    elif v == thr[c] and quota[c] > 0:
                        quota[c] -= 1
                        cls = c
                    else:
                        break
                if cls >= 0:
                    out_indices[pos] = indices[p]
                    out_data[pos] = <float>v
                    out_class[pos] = <uint8_t>cls
                    pos += 1
            out_len[r] = pos - row_start
    if error == 1:
        raise ValueError("indptr must ascend within the entries, and work hold the longest row")
    if error == 2:
        raise ValueError("the outputs have too few places for the rows' kept entries")
