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
from libc.stdint cimport uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy

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


cdef void _select_largest(uint64_t* a, Py_ssize_t n, Py_ssize_t k) noexcept nogil:
    """Reorder ``a[0:n]`` so that ``a[0:k]`` holds its ``k`` largest values and ``a[k-1]``
    is the k-th largest (``0 < k <= n``): Wirth's selection, descending, with a median of
    three as pivot (expected linear time; runs of equal values stop both pointers, so they
    cannot make it quadratic)."""
    cdef Py_ssize_t lo = 0, hi = n - 1, i, j, target = k - 1
    cdef uint64_t x, t, a_lo, a_mid, a_hi
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
    # rows up to this long are ranked by selections alone; longer ones by buckets first
    BUCKETED_ROW = 128
    MAX_BUCKETS = 4096
    # a product's row is put in column order by a scan of the columns when there are at most
    # this many columns per kept entry (a sort of the kept entries is cheaper beyond)
    COLUMN_SCAN = 16


#: Most neighbour counts :func:`top_k_classes` ranks at once.
MAX_COUNTS = MAX_COUNTS_C


cdef inline uint64_t _key(double v) noexcept nogil:
    """The bits of a positive double: as unsigned integers they order as the values do
    (+inf included), and two keys are equal exactly when the values are."""
    cdef uint64_t key
    memcpy(&key, &v, 8)
    return key


cdef inline double _value(uint64_t key) noexcept nogil:
    cdef double v
    memcpy(&v, &key, 8)
    return v


cdef void _nested_thresholds(uint64_t* keys, Py_ssize_t m, uint64_t lo, uint64_t hi, const int64_t* counts,
                             Py_ssize_t n_selected, uint64_t* scratch, int64_t* hist, int32_t* tag,
                             uint64_t* thr, int64_t* greater) noexcept nogil:
    """The ``counts[c]``-th largest of ``keys[0:m]`` (``thr[c]``) and how many keys are above
    it (``greater[c]``), for the first ``n_selected`` counts (ascending, each below ``m``).

    Short rows: one selection per count, each within the last (from the largest count
    down). Long rows: one histogram of the keys over buckets of equal key width (the bits of
    positive doubles, so the buckets are about equal in the values' logarithm) finds every
    count's bucket in one walk from the top; only those buckets' keys are gathered and
    selected in. ``tag`` is -1 everywhere on entry and on return; ``keys`` may be reordered."""
    cdef Py_ssize_t c, i, cur, b, n_buckets, filled, size, shift = 0
    cdef int64_t above, kc, rank
    cdef int32_t slot
    cdef int64_t bucket_of[MAX_COUNTS_C]
    cdef int64_t rank_of[MAX_COUNTS_C]
    cdef int64_t above_of[MAX_COUNTS_C]
    cdef int64_t start_of[MAX_COUNTS_C]
    cdef int64_t fill[MAX_COUNTS_C]
    if n_selected == 0:
        return
    if m <= BUCKETED_ROW:
        cur = m
        for c in range(n_selected - 1, -1, -1):
            kc = counts[c]
            _select_largest(keys, cur, kc)
            thr[c] = keys[kc - 1]
            greater[c] = 0
            for i in range(kc):
                if keys[i] > thr[c]:
                    greater[c] += 1
            cur = kc
        return
    n_buckets = 16
    while n_buckets < MAX_BUCKETS and n_buckets * 4 < m:
        n_buckets *= 2
    while ((hi - lo) >> shift) >= <uint64_t>n_buckets:
        shift += 1
    for b in range(n_buckets):
        hist[b] = 0
    for i in range(m):
        hist[(keys[i] - lo) >> shift] += 1
    # one walk down the buckets: the smallest count's bucket is the highest
    b = <Py_ssize_t>((hi - lo) >> shift)
    above = 0
    filled = 0
    for c in range(n_selected):
        kc = counts[c]
        while above + hist[b] < kc:
            above += hist[b]
            b -= 1
        bucket_of[c] = b
        above_of[c] = above
        rank_of[c] = kc - above
        if tag[b] < 0:
            tag[b] = <int32_t>c
            start_of[c] = filled
            fill[c] = 0
            filled += hist[b]
    for i in range(m):
        slot = tag[(keys[i] - lo) >> shift]
        if slot >= 0:
            scratch[start_of[slot] + fill[slot]] = keys[i]
            fill[slot] += 1
    for c in range(n_selected):
        slot = tag[bucket_of[c]]
        size = hist[bucket_of[c]]
        rank = rank_of[c]
        _select_largest(&scratch[start_of[slot]], size, rank)
        thr[c] = scratch[start_of[slot] + rank - 1]
        greater[c] = above_of[c]
        for i in range(size):
            if scratch[start_of[slot] + i] > thr[c]:
                greater[c] += 1
    for c in range(n_selected):
        tag[bucket_of[c]] = -1


cdef struct RankBuffers:
    # what ranking one row needs besides the row: its keys, a scratch copy of its counts'
    # buckets, a histogram and the buckets' tags (-1 between rows), each as long as a row
    # can be (MAX_BUCKETS for the last two)
    uint64_t* keys
    uint64_t* scratch
    int64_t* hist
    int32_t* tag


cdef int _alloc_buffers(RankBuffers* b, Py_ssize_t longest) noexcept nogil:
    """Allocate ``b`` for rows of up to ``longest`` entries; 0 on success, -1 without memory
    (:func:`_free_buffers` frees what was allocated either way)."""
    cdef Py_ssize_t i
    b.keys = <uint64_t*> malloc(max(longest, 1) * sizeof(uint64_t))
    b.scratch = <uint64_t*> malloc(max(longest, 1) * sizeof(uint64_t))
    b.hist = <int64_t*> malloc(MAX_BUCKETS * sizeof(int64_t))
    b.tag = <int32_t*> malloc(MAX_BUCKETS * sizeof(int32_t))
    if b.keys == NULL or b.scratch == NULL or b.hist == NULL or b.tag == NULL:
        return -1
    for i in range(MAX_BUCKETS):
        b.tag[i] = -1
    return 0


cdef void _free_buffers(RankBuffers* b) noexcept nogil:
    free(b.keys)
    free(b.scratch)
    free(b.hist)
    free(b.tag)


cdef Py_ssize_t _rank_row(const int32_t* indices, const double* data, Py_ssize_t n, int64_t own,
                          const int64_t* counts, Py_ssize_t n_counts, RankBuffers* b, int32_t* out_indices,
                          float* out_data, uint8_t* out_class, Py_ssize_t room) noexcept nogil:
    """One row's largest positive entries (``indices[0:n]``, ``data[0:n]``; column ``own``
    never kept) at every count, written class by class from ``out_*[0]`` (see
    :func:`top_k_classes`). Returns how many it wrote, -1 when ``room`` is too small, -2 if
    the classes did not come out at the counts' sizes (a bug: never a silent result)."""
    cdef Py_ssize_t p, c, m = 0, n_selected = 0, kept, cls
    cdef double v
    cdef uint64_t lo = 0xFFFFFFFFFFFFFFFF, hi = 0
    cdef double thr[MAX_COUNTS_C]
    cdef uint64_t thr_key[MAX_COUNTS_C]
    cdef int64_t greater[MAX_COUNTS_C]
    cdef int64_t quota[MAX_COUNTS_C]
    cdef Py_ssize_t fill_at[MAX_COUNTS_C]
    cdef Py_ssize_t class_end[MAX_COUNTS_C]
    for p in range(n):
        v = data[p]
        if v > 0 and indices[p] != own:
            b.keys[m] = _key(v)
            m += 1
    # the counts below the row's length need a threshold; the others keep it all
    while n_selected < n_counts and counts[n_selected] < m:
        n_selected += 1
    if n_selected > 0 and m > BUCKETED_ROW:
        for p in range(m):
            lo = min(lo, b.keys[p])
            hi = max(hi, b.keys[p])
    _nested_thresholds(b.keys, m, lo, hi, counts, n_selected, b.scratch, b.hist, b.tag, thr_key, greater)
    for c in range(n_selected):
        thr[c] = _value(thr_key[c])
        quota[c] = counts[c] - greater[c]
    kept = min(m, counts[n_counts - 1])
    if kept > room:
        return -1
    # class c holds exactly min(m, counts[c]) - min(m, counts[c - 1]) entries: each class is
    # written to its own stretch of the row, so that a count's entries are a prefix of it
    for c in range(n_counts):
        fill_at[c] = min(m, counts[c - 1]) if c > 0 else 0
        class_end[c] = min(m, counts[c])
    for p in range(n):
        v = data[p]
        if not (v > 0) or indices[p] == own:
            continue
        cls = -1
        for c in range(n_counts - 1, -1, -1):
            if c >= n_selected or v > thr[c]:
                cls = c
            elif v == thr[c] and quota[c] > 0:
                quota[c] -= 1
                cls = c
            else:
                break
        if cls >= 0:
            if fill_at[cls] >= class_end[cls]:
                return -2
            out_indices[fill_at[cls]] = indices[p]
            out_data[fill_at[cls]] = <float>v
            out_class[fill_at[cls]] = <uint8_t>cls
            fill_at[cls] += 1
    for c in range(n_counts):
        if fill_at[c] != class_end[c]:
            return -2
    return kept


cdef _check_counts(const int64_t[::1] counts):
    cdef Py_ssize_t c, n_counts = counts.shape[0]
    if n_counts == 0 or n_counts > MAX_COUNTS_C:
        raise ValueError(f"between 1 and {MAX_COUNTS_C} counts are ranked at once")
    for c in range(n_counts):
        if counts[c] < 1 or (c > 0 and counts[c] <= counts[c - 1]):
            raise ValueError("counts must be positive and strictly ascending")


cdef _check_outputs(int32_t[::1] out_indices, float[::1] out_data, uint8_t[::1] out_class, int64_t[::1] out_len,
                    Py_ssize_t n_rows):
    if out_len.shape[0] < n_rows:
        raise ValueError("out_len needs one entry per row")
    if out_indices.shape[0] != out_data.shape[0] or out_class.shape[0] != out_data.shape[0]:
        raise ValueError("the output arrays must have one length")


cdef _raise_rank_error(int error):
    if error == -1:
        raise ValueError("the outputs have too few places for the rows' kept entries")
    if error == -2:
        raise RuntimeError("a row's classes did not hold the counts' sizes")
    if error == -3:
        raise MemoryError("no room to rank the longest row")
    if error == -4:
        raise ValueError("A's column indices must be rows of B, and B's indptr ascend within its entries")
    if error == -5:
        raise ValueError("B's column indices must be below n_cols")


def top_k_classes(
    const int64_t[::1] indptr,
    const int32_t[::1] indices,
    const double[::1] data,
    const double[::1] column_scale,
    int64_t own_offset,
    const int64_t[::1] counts,
    int32_t[::1] out_indices,
    float[::1] out_data,
    uint8_t[::1] out_class,
    int64_t[::1] out_len,
):
    """Each CSR row's largest positive entries at every count of ``counts``, in one pass.

    Row ``r`` is item ``own_offset + r``; its own column is never kept. For each count
    ``k`` (ascending, distinct), the row's ``k`` largest positive entries (all of them when
    it has fewer) form a set; the sets nest, and ties at a set's k-th value go to the entries
    stored first. The rows' entries of the largest set are written one row after the other:
    column, value (float32) and class ``c``, the index of the smallest
    count whose set holds it (so the top ``counts[c]`` of a row are its entries of class
    ``<= c``); ``out_len[r]`` says how many row ``r`` wrote. The outputs need
    ``sum_r min(stored entries of r, counts[-1])`` places.

    A row's entries are written class by class, each class in stored order: the top
    ``counts[c]`` of a row that wrote ``n`` are its first ``min(n, counts[c])`` entries.

    ``column_scale`` (empty: none) multiplies each entry by its column's value first, as
    ``data * column_scale[indices]`` would (RP3beta's betas rank one stored walk product).
    """
    cdef Py_ssize_t n_rows = indptr.shape[0] - 1, n_counts = counts.shape[0]
    cdef Py_ssize_t r, p, written, longest = 0
    cdef Py_ssize_t pos = 0, room = out_data.shape[0]
    cdef int error = 0
    cdef bint scaled = column_scale.shape[0] > 0
    cdef RankBuffers b = RankBuffers(NULL, NULL, NULL, NULL)
    cdef double* row_data = NULL
    cdef const double* values
    _check_counts(counts)
    _check_outputs(out_indices, out_data, out_class, out_len, n_rows)
    for r in range(n_rows):
        if indptr[r] < 0 or indptr[r + 1] < indptr[r] or indptr[r + 1] > data.shape[0] \
                or indptr[r + 1] > indices.shape[0]:
            raise ValueError("indptr must ascend within the entries")
        longest = max(longest, indptr[r + 1] - indptr[r])
    if scaled:
        for p in range(indptr[n_rows] if n_rows > 0 else 0):
            if indices[p] < 0 or indices[p] >= column_scale.shape[0]:
                raise ValueError("a column is beyond column_scale")
    with nogil:
        if scaled:
            row_data = <double*> malloc(max(longest, 1) * sizeof(double))
        if _alloc_buffers(&b, longest) < 0 or (scaled and row_data == NULL):
            error = -3
        else:
            for r in range(n_rows):
                values = &data[0] + indptr[r]
                if scaled:
                    for p in range(indptr[r], indptr[r + 1]):
                        row_data[p - indptr[r]] = data[p] * column_scale[indices[p]]
                    values = row_data
                written = _rank_row(&indices[0] + indptr[r], values, indptr[r + 1] - indptr[r],
                                    own_offset + r, &counts[0], n_counts, &b, &out_indices[0] + pos,
                                    &out_data[0] + pos, &out_class[0] + pos, room - pos)
                if written < 0:
                    error = written
                    break
                out_len[r] = written
                pos += written
        free(row_data)
        _free_buffers(&b)
    _raise_rank_error(error)


def product_top_k_classes(
    const int64_t[::1] a_indptr,
    const int32_t[::1] a_indices,
    const double[::1] a_data,
    const int64_t[::1] b_indptr,
    const int32_t[::1] b_indices,
    const double[::1] b_data,
    const double[::1] column_scale,
    Py_ssize_t n_cols,
    int64_t own_offset,
    const int64_t[::1] counts,
    int32_t[::1] out_indices,
    float[::1] out_data,
    uint8_t[::1] out_class,
    int64_t[::1] out_len,
):
    """:func:`top_k_classes` of the rows of ``A @ B`` (both CSR, float64), each column
    times ``column_scale`` (empty: 1), without the product ever stored: each row is summed
    into one dense accumulator and ranked from it.

    A row's entries and their order are those of scipy's sparse product (the same sums in the
    same order, its columns in the order it lists them, zero sums dropped), then scaled as
    ``product.data *= column_scale[product.indices]`` would: the same entries and ties as
    ranking that product with :func:`top_k_classes`, without its symbolic pass, its stored
    entries and a second read of them. ``B`` has ``n_cols`` columns (``column_scale``, when
    given, one value each). The outputs need ``sum_r min(stored entries of row r of the
    product, counts[-1])`` places. With one count, a row that keeps at least ``n_cols / 16``
    entries is written in column order (the same entries, in another order), so that the
    fit's weights need no sort.
    """
    cdef Py_ssize_t n_rows = a_indptr.shape[0] - 1, n_b = b_indptr.shape[0] - 1, n_counts = counts.shape[0]
    cdef Py_ssize_t r, jj, kk, j, k, c, length, m, written, b_nnz
    cdef Py_ssize_t pos = 0, room = out_data.shape[0]
    cdef int64_t head, nxt_k
    cdef double v
    cdef int error = 0
    cdef bint scaled = column_scale.shape[0] > 0
    cdef RankBuffers b = RankBuffers(NULL, NULL, NULL, NULL)
    cdef double* sums = NULL
    cdef int64_t* nxt = NULL
    cdef int32_t* row_indices = NULL
    cdef double* row_data = NULL
    cdef float* sorted_data = NULL
    cdef int64_t q, d
    cdef int64_t class_at[MAX_COUNTS_C]
    _check_counts(counts)
    _check_outputs(out_indices, out_data, out_class, out_len, n_rows)
    if n_b < 0:
        raise ValueError("B needs an indptr")
    if n_cols < 0 or (column_scale.shape[0] > 0 and column_scale.shape[0] != n_cols):
        raise ValueError("column_scale needs one value per column of B")
    if a_indices.shape[0] < a_indptr[n_rows] or a_data.shape[0] < a_indptr[n_rows]:
        raise ValueError("A's indptr points past its entries")
    for r in range(n_rows):
        if a_indptr[r] < 0 or a_indptr[r + 1] < a_indptr[r]:
            raise ValueError("A's indptr must ascend within its entries")
    # B's rows and columns are checked as they are read: a block of A reads few of B's rows
    b_nnz = min(b_indices.shape[0], b_data.shape[0])
    with nogil:
        sums = <double*> calloc(max(n_cols, 1), sizeof(double))
        nxt = <int64_t*> malloc(max(n_cols, 1) * sizeof(int64_t))
        row_indices = <int32_t*> malloc(max(n_cols, 1) * sizeof(int32_t))
        row_data = <double*> malloc(max(n_cols, 1) * sizeof(double))
        sorted_data = <float*> malloc(max(n_cols, 1) * sizeof(float))
        if sums == NULL or nxt == NULL or row_indices == NULL or row_data == NULL or sorted_data == NULL \
                or _alloc_buffers(&b, n_cols) < 0:
            error = -3
        else:
            for k in range(n_cols):
                nxt[k] = -1
            for r in range(n_rows):
                # scipy's csr_matmat: a linked list of the row's columns, newest first
                head = -2
                length = 0
                for jj in range(a_indptr[r], a_indptr[r + 1]):
                    j = a_indices[jj]
                    if j < 0 or j >= n_b or b_indptr[j] < 0 or b_indptr[j + 1] < b_indptr[j] \
                            or b_indptr[j + 1] > b_nnz:
                        error = -4
                        break
                    v = a_data[jj]
                    for kk in range(b_indptr[j], b_indptr[j + 1]):
                        k = b_indices[kk]
                        if k < 0 or k >= n_cols:
                            error = -5
                            break
                        sums[k] += v * b_data[kk]
                        if nxt[k] == -1:
                            nxt[k] = head
                            head = k
                            length += 1
                    if error:
                        break
                if error:
                    break
                m = 0
                for jj in range(length):
                    k = <Py_ssize_t>head
                    if sums[k] != 0:
                        row_indices[m] = <int32_t>k
                        row_data[m] = sums[k] * column_scale[k] if scaled else sums[k]
                        m += 1
                    head = nxt[k]
                    nxt[k] = -1
                    sums[k] = 0
                written = _rank_row(row_indices, row_data, m, own_offset + r, &counts[0], n_counts, &b,
                                    &out_indices[0] + pos, &out_data[0] + pos, &out_class[0] + pos, room - pos)
                if written < 0:
                    error = written
                    break
                if n_counts == 1 and written > 1 and n_cols <= COLUMN_SCAN * written:
                    # the fit's weights (one count) in column order, so that they need no sort of
                    # their rows: a scan of the columns costs less than sorting a dense row (the
                    # hold-out's candidates, several counts, are scored in any order)
                    for q in range(written):
                        nxt[out_indices[pos + q]] = q
                    for c in range(n_counts):
                        class_at[c] = 0
                    for q in range(written):
                        class_at[out_class[pos + q]] += 1
                    q = 0
                    for c in range(n_counts):
                        d = class_at[c]
                        class_at[c] = q
                        q += d
                    for k in range(n_cols):
                        if nxt[k] >= 0:
                            q = nxt[k]
                            nxt[k] = -1
                            c = out_class[pos + q]
                            d = class_at[c]
                            class_at[c] += 1
                            row_indices[d] = <int32_t>k
                            sorted_data[d] = out_data[pos + q]
                    for d in range(written):
                        out_indices[pos + d] = row_indices[d]
                        out_data[pos + d] = sorted_data[d]
                out_len[r] = written
                pos += written
        free(sums)
        free(nxt)
        free(row_indices)
        free(row_data)
        free(sorted_data)
        _free_buffers(&b)
    _raise_rank_error(error)
