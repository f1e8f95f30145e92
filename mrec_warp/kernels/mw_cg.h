/* The conjugate-gradient loop of the WRMF kernel (declared in als.pyx).

   It is C so that GCC can build it twice, plain and with FMA, and pick one when the module
   loads (MW_CLONES, see mw_cpu.h). */
#ifndef MW_CG_H
#define MW_CG_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "mw_cpu.h"

static inline float mw_als_dot(const float* a, const float* b, ptrdiff_t d) {
    float s = 0.0f;
    for (ptrdiff_t c = 0; c < d; c++) s += a[c] * b[c];
    return s;
}
static inline void mw_als_axpy(float alpha, const float* x, float* y, ptrdiff_t d) {
    for (ptrdiff_t c = 0; c < d; c++) y[c] += alpha * x[c];
}

/* Rows [start, stop) of X: `steps` CG steps on (G + Y^T (C_u - I) Y) x = Y^T C_u 1,
   from the current row. buf holds 3 * d floats. One body for both index widths. */
#define MW_CG_ROWS(NAME, IDX_T)                                                              \
MW_CLONES static void NAME(float* X, const float* Y, const float* G, const int64_t* indptr,  \
                           const IDX_T* idx, const float* conf, ptrdiff_t start,             \
                           ptrdiff_t stop, ptrdiff_t d, int steps, float* buf) {             \
    float* r = buf; float* p = buf + d; float* ap = buf + 2 * d;                             \
    for (ptrdiff_t u = start; u < stop; u++) {                                               \
        float* x = X + u * d;                                                                \
        int64_t p0 = indptr[u], p1 = indptr[u + 1];                                          \
        /* r = b - A x = -G x + sum_i (c_i - (c_i - 1) y_i.x) y_i */                         \
        for (ptrdiff_t a = 0; a < d; a++) r[a] = -mw_als_dot(G + a * d, x, d);               \
        for (int64_t k = p0; k < p1; k++) {                                                  \
            const float* y = Y + (ptrdiff_t)idx[k] * d;                                      \
            float c = conf[k];                                                               \
            mw_als_axpy(c - (c - 1.0f) * mw_als_dot(y, x, d), y, r, d);                      \
        }                                                                                    \
        memcpy(p, r, (size_t)d * sizeof(float));                                             \
        float rs_old = mw_als_dot(r, r, d);                                                  \
        for (int it = 0; it < steps && rs_old >= 1e-20f; it++) {                             \
            /* A p = G p + sum_i (c_i - 1) (y_i.p) y_i */                                    \
            for (ptrdiff_t a = 0; a < d; a++) ap[a] = mw_als_dot(G + a * d, p, d);           \
            for (int64_t k = p0; k < p1; k++) {                                              \
                const float* y = Y + (ptrdiff_t)idx[k] * d;                                  \
                mw_als_axpy((conf[k] - 1.0f) * mw_als_dot(y, p, d), y, ap, d);               \
            }                                                                                \
            float pap = mw_als_dot(p, ap, d);                                                \
            if (pap <= 0.0f) break; /* singular system (reg = 0): keep the last iterate */   \
            float alpha = rs_old / pap;                                                      \
            mw_als_axpy(alpha, p, x, d);                                                     \
            mw_als_axpy(-alpha, ap, r, d);                                                   \
            float rs_new = mw_als_dot(r, r, d);                                              \
            float beta = rs_new / rs_old;                                                    \
            for (ptrdiff_t a = 0; a < d; a++) p[a] = r[a] + beta * p[a];                     \
            rs_old = rs_new;                                                                 \
        }                                                                                    \
    }                                                                                        \
}
MW_CG_ROWS(mw_cg_rows_i32, int32_t)
MW_CG_ROWS(mw_cg_rows_i64, int64_t)

#endif
