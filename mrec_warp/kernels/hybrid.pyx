# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""WARP / BPR kernel for the hybrid model: users and items as sums of feature embeddings.

The sampling rule is ``warp_sample`` / ``bpr_sample`` from ``sampler.pxd``, the same code as
the plain matrix-factorisation kernel; only the scoring callback and the update differ.

A user's representation is ``p_u = sum_f w_uf E_f`` over its feature row of the user
feature matrix (CSR, row-normalised weights), an item's is ``q_i = sum_g w_ig F_g`` and its
bias ``b_i = sum_g w_ig c_g``; ``f(u, i) = p_u . q_i + b_i``. A step on the weighted hinge
``L(rank) (1 + f(u, j) - f(u, i))`` takes the gradients with respect to ``p_u``, ``q_i``,
``q_j`` at the old values and hands each feature row its share (``w_f`` times the gradient,
plus its L2 term), with adagrad per parameter. The feature-sum helpers are inline so that
each loop compiles them in place.

Rows made of one feature of weight 1 (identity only: the common case, and every row when
there are no feature files) are detected up front (``single``): their representation *is* an
embedding row, so scoring reads it in place and the update is the plain MF ``mf_step``.
With no feature files this kernel therefore does exactly what the MF kernel does.

Everything runs without the GIL on raw pointers into contiguous float32 arrays, so joblib's
threading backend runs shards of an epoch at once (hogwild). Shared feature rows (a genre)
are written by several threads; like any hogwild write, a lost update now and then is
harmless to SGD.

A hybrid model folds new users in with :func:`mrec_warp.kernels.warp.fold_in_shard`, on its
items' representations (fixed during fold-in).
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport malloc, free
from libc.string cimport memset

from mrec_warp.kernels.rng cimport MAX_ITEMS, order_t
from mrec_warp.kernels.sampler cimport Candidates, candidates_init, pick_pair
from mrec_warp.kernels.steps cimport StepSettings, adagrad_axpy, bias_step, mf_step
from mrec_warp.kernels.vectors cimport clip_norm, dot, prefetch_row

cnp.import_array()


def single_columns(indptr, indices, data, bias_data=None):
    """Column of each row that is exactly one feature of weight 1 (and bias weight 1, when
    ``bias_data`` is given), else -1 (int32).

    Those rows take the fast path: no representation to build, the MF update.
    """
    indptr = np.asarray(indptr, dtype=np.int64)
    counts = np.diff(indptr)
    out = np.full(len(counts), -1, dtype=np.int32)
    one = counts == 1
    first = indptr[:len(indptr) - 1][one]
    ok = np.asarray(data)[first] == 1.0
    if bias_data is not None and len(bias_data):
        ok &= np.asarray(bias_data)[first] == 1.0
    rows = np.flatnonzero(one)[ok]
    out[rows] = np.asarray(indices)[first[ok]]
    return out


# -- the feature side of the model ------------------------------------------------------------
cdef struct Side:
    const int64_t* indptr
    const int32_t* indices
    const float* data
    const float* bias_w     # weights of the feature biases (items; see fit_shard)
    const int32_t* single   # see single_columns
    float* emb              # (n_columns, d) embeddings
    float* accum            # their adagrad accumulators


cdef struct ScoreContext:
    const float* user       # the current user's representation
    Side items
    float* bias             # item feature biases, or NULL
    Py_ssize_t d
    # Content features are shared by many items (a genre by hundreds), so while one user's
    # candidates are scored, p_u . F_g + c_g is computed once per content feature g and
    # remembered: memo[g] is valid when stamp[g] == now (a counter of positives). Scoring
    # an item then costs one dot for its identity plus a lookup per content feature.
    float* memo
    int64_t* stamp
    int64_t now
    int64_t n_memo          # content columns (0 .. n_memo - 1) that are memoised


cdef inline float hybrid_score(void* ctx, int64_t j) noexcept nogil:
    cdef ScoreContext* c = <ScoreContext*>ctx
    cdef int64_t col = c.items.single[j], k
    cdef float f = 0, g
    if col >= 0:
        f = dot(c.user, c.items.emb + col * c.d, c.d)
        if c.bias != NULL:
            f += c.bias[col]
        return f
    # sum_g w_g (p . F_g + c_g): no representation to write
    for k in range(c.items.indptr[j], c.items.indptr[j + 1]):
        col = c.items.indices[k]
        if col < c.n_memo and c.stamp[col] == c.now:
            g = c.memo[col]
        else:
            g = dot(c.user, c.items.emb + col * c.d, c.d)
            if col < c.n_memo:
                c.memo[col] = g
                c.stamp[col] = c.now
        f += c.items.data[k] * g
        if c.bias != NULL:
            f += c.items.bias_w[k] * c.bias[col]
    return f


cdef inline void hybrid_prefetch(void* ctx, int64_t j) noexcept nogil:
    cdef ScoreContext* c = <ScoreContext*>ctx
    cdef int64_t col = c.items.single[j], k
    if col >= 0:
        prefetch_row(c.items.emb + col * c.d, c.d)
    else:  # content rows are few and hot; the identity row is the one that misses
        k = c.items.indptr[j + 1] - 1
        if k >= c.items.indptr[j] and c.items.indices[k] >= c.n_memo:
            prefetch_row(c.items.emb + c.items.indices[k] * c.d, c.d)


cdef inline void represent(const Side* side, int64_t r, Py_ssize_t d, float* out) noexcept nogil:
    """``out = sum_f w_f E_f`` over row ``r``."""
    cdef int64_t k
    cdef Py_ssize_t c
    cdef float w
    cdef const float* row
    memset(out, 0, d * sizeof(float))
    for k in range(side.indptr[r], side.indptr[r + 1]):
        w = side.data[k]
        row = side.emb + side.indices[k] * d
        for c in range(d):
            out[c] += w * row[c]


cdef inline const float* representation(const Side* side, int64_t r, Py_ssize_t d, float* buf) noexcept nogil:
    """The row's representation: the embedding row itself when single, else built in ``buf``."""
    cdef int64_t col = side.single[r]
    if col >= 0:
        return side.emb + col * d
    represent(side, r, d, buf)
    return buf


cdef inline void distribute(Side* side, int64_t r, const float* grad, float reg, float* tmp,
                            Py_ssize_t d, float lr, bint adagrad, float max_norm) noexcept nogil:
    """Step every feature row of row ``r`` on its share ``w_f * grad`` plus ``reg * E_f``,
    then hold it within ``max_norm`` (0: no limit)."""
    cdef int64_t k, col
    cdef Py_ssize_t c
    cdef float w
    cdef float* row
    for k in range(side.indptr[r], side.indptr[r + 1]):
        w = side.data[k]
        col = side.indices[k]
        row = side.emb + col * d
        for c in range(d):
            tmp[c] = w * grad[c] + reg * row[c]
        adagrad_axpy(row, side.accum + col * d, tmp, d, lr, adagrad)
        clip_norm(row, d, max_norm)


cdef inline void bias_distribute(const Side* side, int64_t r, float* bias, float* acc, float grad,
                                 float lr, bint adagrad) noexcept nogil:
    cdef int64_t k, col
    for k in range(side.indptr[r], side.indptr[r + 1]):
        col = side.indices[k]
        bias_step(&bias[col], &acc[col], side.bias_w[k] * grad, lr, adagrad)


cdef Side make_side(const int64_t[::1] indptr, const int32_t[::1] indices, const float[::1] data,
                    const float[::1] bias_w, const int32_t[::1] single, float[:, ::1] emb, float[:, ::1] accum):
    cdef Side s
    s.indptr = &indptr[0]
    s.indices = &indices[0] if indices.shape[0] > 0 else NULL
    s.data = &data[0] if data.shape[0] > 0 else NULL
    s.bias_w = &bias_w[0] if bias_w.shape[0] > 0 else s.data
    s.single = &single[0] if single.shape[0] > 0 else NULL
    s.emb = &emb[0, 0] if emb.shape[0] > 0 else NULL
    s.accum = &accum[0, 0] if accum.shape[0] > 0 else NULL
    return s


def fit_shard(
    float[:, ::1] user_emb,
    float[:, ::1] item_emb,
    float[::1] item_bias,
    float[:, ::1] user_accum,
    float[:, ::1] item_accum,
    float[::1] bias_accum,
    const int64_t[::1] uf_indptr,
    const int32_t[::1] uf_indices,
    const float[::1] uf_data,
    const int32_t[::1] uf_single,
    const int64_t[::1] if_indptr,
    const int32_t[::1] if_indices,
    const float[::1] if_data,
    const float[::1] if_bias_data,
    const int32_t[::1] if_single,
    const int64_t[::1] indptr,
    const int32_t[::1] indices,
    const int32_t[::1] pos_users,
    const order_t[::1] order,
    Py_ssize_t start,
    Py_ssize_t stop,
    const float[::1] rank_weights,
    uint64_t[::1] state,
    StepSettings cfg,
    Py_ssize_t n_item_content=0,
):
    """Visit the positives ``order[start:stop]`` once each (see :func:`mrec_warp.kernels.warp.fit_shard`).

    ``uf_*`` / ``if_*`` are the user / item feature matrices (CSR) and their
    :func:`single_columns`; ``user_emb`` / ``item_emb`` hold one embedding per feature
    column and ``item_bias`` one bias per item feature column. Item columns below
    ``n_item_content`` are content features (shared by many items; their scores are
    memoised per positive), the others identities. ``indptr`` / ``indices`` are
    the users x items positives. Arrays are updated in place.
    ``if_bias_data`` (same sparsity as ``if_data``, or empty for "the same weights")
    weights the item feature biases: ``b_i = sum_g bias_w_ig c_g``.
    Every embedding row a step touches is then held within ``user_max_norm`` (user
    features) or ``item_max_norm`` (item features); 0 means no limit.

    Returns
    -------
    (n_updates, total_weight, total_loss, n_compared)
    """
    cdef Py_ssize_t d = user_emb.shape[1]
    cdef int64_t n_users = uf_indptr.shape[0] - 1
    cdef int64_t n_items = if_indptr.shape[0] - 1
    cdef Py_ssize_t t, p, c
    cdef Candidates cand
    cdef int64_t u, i, j, row_start, row_len, n_neg, ucol, icol, jcol
    cdef float weight
    cdef const float* pu
    cdef const float* qi
    cdef const float* qj
    cdef const int32_t* row
    cdef uint64_t* s = &state[0]
    cdef int64_t n_updates = 0, n_compared = 0
    cdef double total_weight = 0.0, total_loss = 0.0
    cdef ScoreContext ctx
    cdef Side users, items
    cdef float* buf
    cdef float* pu_buf
    cdef float* qi_buf
    cdef float* qj_buf
    cdef float* gp
    cdef float* gi
    cdef float* gj
    cdef float* tmp
    cdef float* memo = NULL
    cdef int64_t* stamp = NULL
    cdef float* bias_ptr = &item_bias[0] if item_bias.shape[0] > 0 else NULL
    cdef float* bias_acc = &bias_accum[0] if bias_accum.shape[0] > 0 else NULL
    if d != item_emb.shape[1] or d < 1:
        raise ValueError("user and item embeddings must have the same width")
    if n_items >= MAX_ITEMS:
        raise ValueError("too many items for the sampler")
    if indptr.shape[0] != n_users + 1:
        raise ValueError("positives and user features disagree on the number of users")
    if uf_single.shape[0] != n_users or if_single.shape[0] != n_items:
        raise ValueError("single_columns must have one entry per row")
    if user_accum.shape[0] != user_emb.shape[0] or item_accum.shape[0] != item_emb.shape[0]:
        raise ValueError("accumulators must match the embeddings")
    if cfg.use_bias and (item_bias.shape[0] != item_emb.shape[0] or bias_accum.shape[0] != item_emb.shape[0]):
        raise ValueError("item_bias must have one entry per item feature")
    if n_items == 0 or stop <= start:
        return 0, 0.0, 0.0, 0
    if if_bias_data.shape[0] != 0 and if_bias_data.shape[0] != if_data.shape[0]:
        raise ValueError("if_bias_data must be empty or match if_data")
    users = make_side(uf_indptr, uf_indices, uf_data, uf_data, uf_single, user_emb, user_accum)
    items = make_side(if_indptr, if_indices, if_data, if_bias_data, if_single, item_emb, item_accum)
    ctx.items = items
    ctx.bias = bias_ptr if cfg.use_bias else NULL
    ctx.d = d
    if n_item_content < 0 or n_item_content > item_emb.shape[0]:
        raise ValueError("n_item_content is out of range")
    ctx.n_memo = n_item_content
    ctx.now = -1

    buf = <float*>malloc(7 * d * sizeof(float))
    if n_item_content > 0:
        memo = <float*>malloc(n_item_content * sizeof(float))
        stamp = <int64_t*>malloc(n_item_content * sizeof(int64_t))
    if buf == NULL or (n_item_content > 0 and (memo == NULL or stamp == NULL)):
        free(buf)
        free(memo)
        free(stamp)
        raise MemoryError()
    for t in range(n_item_content):
        stamp[t] = -1
    ctx.memo = memo
    ctx.stamp = stamp
    pu_buf, qi_buf, qj_buf = buf, buf + d, buf + 2 * d
    gp, gi, gj, tmp = buf + 3 * d, buf + 4 * d, buf + 5 * d, buf + 6 * d
    try:
        with nogil:
            candidates_init(&cand, s, n_items)
            for t in range(start, stop):
                if t + 1 < stop:  # warm the cache for the next positive
                    p = order[t + 1]
                    ucol = users.single[pos_users[p]]
                    if ucol >= 0:
                        prefetch_row(users.emb + ucol * d, d)
                    icol = items.single[indices[p]]
                    if icol >= 0:
                        prefetch_row(items.emb + icol * d, d)
                p = order[t]
                u = pos_users[p]
                i = indices[p]
                row_start = indptr[u]
                row_len = indptr[u + 1] - row_start
                row = &indices[row_start]
                n_neg = n_items - row_len
                if n_neg <= 0:
                    continue
                pu = representation(&users, u, d, pu_buf)
                ctx.user = pu
                ctx.now = t  # a new user representation: forget the memoised scores
                j = pick_pair(&cfg, &ctx, hybrid_score, hybrid_prefetch, &i, row, row_len, n_items, s, &cand,
                              &rank_weights[0], &weight, &total_loss, &n_compared)
                if j < 0:
                    continue

                total_weight += weight
                n_updates += 1
                ucol = users.single[u]
                icol = items.single[i]
                jcol = items.single[j]
                if ucol >= 0 and icol >= 0 and jcol >= 0:
                    # identity-only rows: exactly the matrix-factorisation step
                    mf_step(&cfg, users.emb + ucol * d, items.emb + icol * d, items.emb + jcol * d,
                            users.accum + ucol * d, items.accum + icol * d, items.accum + jcol * d,
                            bias_ptr, bias_acc, icol, jcol, d, weight)
                    continue
                # gradients with respect to the representations, all at the old values
                qi = representation(&items, i, d, qi_buf)
                qj = representation(&items, j, d, qj_buf)
                for c in range(d):
                    gp[c] = weight * (qj[c] - qi[c])
                    gi[c] = -weight * pu[c]
                    gj[c] = weight * pu[c]
                distribute(&users, u, gp, cfg.user_reg, tmp, d, cfg.learning_rate, cfg.adagrad, cfg.user_max_norm)
                distribute(&items, i, gi, cfg.item_reg, tmp, d, cfg.learning_rate, cfg.adagrad, cfg.item_max_norm)
                distribute(&items, j, gj, cfg.item_reg, tmp, d, cfg.learning_rate, cfg.adagrad, cfg.item_max_norm)
                if cfg.use_bias:
                    bias_distribute(&items, i, bias_ptr, bias_acc, -weight, cfg.learning_rate, cfg.adagrad)
                    bias_distribute(&items, j, bias_ptr, bias_acc, weight, cfg.learning_rate, cfg.adagrad)
    finally:
        free(buf)
        free(memo)
        free(stamp)
    return n_updates, total_weight, total_loss, n_compared
