/* The SGD / adagrad updates of the WARP-family kernels (declared in steps.pxd).

   Adagrad divides every step by a square root. sqrtps + divps are the slowest SSE
   instructions (a few cycles per 4 floats each), so on x86 the steps use rsqrtps plus one
   Newton-Raphson refinement (relative error ~1e-7, plenty for SGD), several times faster.
   Other CPUs, and the tails of rows, use sqrtf. */
#ifndef MW_ADAGRAD_H
#define MW_ADAGRAD_H

#include <math.h>
#include <stddef.h>
#include "mw_cpu.h"

#ifdef MW_SSE
#include <emmintrin.h>
static inline __m128 mw_rsqrt_ps(__m128 x) {
    __m128 y = _mm_rsqrt_ps(x);
    __m128 hx = _mm_mul_ps(_mm_set1_ps(0.5f), x);
    return _mm_mul_ps(y, _mm_sub_ps(_mm_set1_ps(1.5f), _mm_mul_ps(hx, _mm_mul_ps(y, y))));
}
/* one adagrad step on 4 parameters: G += g^2; x -= lr * g / sqrt(G) */
static inline __m128 mw_adagrad_ps(__m128 x, float* acc, __m128 g, __m128 lr) {
    __m128 G = _mm_add_ps(_mm_loadu_ps(acc), _mm_mul_ps(g, g));
    _mm_storeu_ps(acc, G);
    return _mm_sub_ps(x, _mm_mul_ps(_mm_mul_ps(lr, g), mw_rsqrt_ps(G)));
}
#endif

/* param -= lr * grad / sqrt(accum) after accum += grad^2 (adagrad), or plain SGD. */
static inline void mw_adagrad_axpy(float* MW_RESTRICT param, float* MW_RESTRICT accum,
                                   const float* MW_RESTRICT grad, ptrdiff_t d, float lr,
                                   int adagrad) {
    ptrdiff_t c = 0;
    if (adagrad) {
#ifdef MW_SSE
        const __m128 LR = _mm_set1_ps(lr);
        for (; c + 4 <= d; c += 4)
            _mm_storeu_ps(param + c, mw_adagrad_ps(_mm_loadu_ps(param + c), accum + c,
                                                   _mm_loadu_ps(grad + c), LR));
#endif
        for (; c < d; c++) {
            accum[c] += grad[c] * grad[c];
            param[c] -= lr * grad[c] / sqrtf(accum[c]);
        }
    } else {
        for (c = 0; c < d; c++) param[c] -= lr * grad[c];
    }
}

/* One step on weight * (f(u,j) - f(u,i)) + L2 for the user row pu and item rows qi, qj,
   gradients taken at the old values; g* are the adagrad accumulators of each row. */
static inline void mw_pair_step(float* MW_RESTRICT pu, float* MW_RESTRICT qi,
                                float* MW_RESTRICT qj, float* MW_RESTRICT gpu,
                                float* MW_RESTRICT gqi, float* MW_RESTRICT gqj,
                                ptrdiff_t d, float w, float lr, float user_reg,
                                float item_reg, int adagrad) {
    ptrdiff_t c = 0;
    if (adagrad) {
#ifdef MW_SSE
        const __m128 W = _mm_set1_ps(w), LR = _mm_set1_ps(lr);
        const __m128 UR = _mm_set1_ps(user_reg), IR = _mm_set1_ps(item_reg);
        for (; c + 4 <= d; c += 4) {
            __m128 p = _mm_loadu_ps(pu + c), a = _mm_loadu_ps(qi + c), b = _mm_loadu_ps(qj + c);
            __m128 wp = _mm_mul_ps(W, p);
            __m128 gu = _mm_add_ps(_mm_mul_ps(W, _mm_sub_ps(b, a)), _mm_mul_ps(UR, p));
            __m128 gi = _mm_sub_ps(_mm_mul_ps(IR, a), wp);
            __m128 gj = _mm_add_ps(wp, _mm_mul_ps(IR, b));
            _mm_storeu_ps(pu + c, mw_adagrad_ps(p, gpu + c, gu, LR));
            _mm_storeu_ps(qi + c, mw_adagrad_ps(a, gqi + c, gi, LR));
            _mm_storeu_ps(qj + c, mw_adagrad_ps(b, gqj + c, gj, LR));
        }
#endif
        for (; c < d; c++) {
            float p = pu[c], a = qi[c], b = qj[c];
            float gu = w * (b - a) + user_reg * p;
            float gi = -w * p + item_reg * a;
            float gj = w * p + item_reg * b;
            gpu[c] += gu * gu;
            gqi[c] += gi * gi;
            gqj[c] += gj * gj;
            pu[c] = p - lr * gu / sqrtf(gpu[c]);
            qi[c] = a - lr * gi / sqrtf(gqi[c]);
            qj[c] = b - lr * gj / sqrtf(gqj[c]);
        }
    } else {
        for (; c < d; c++) {
            float p = pu[c], a = qi[c], b = qj[c];
            pu[c] = p - lr * (w * (b - a) + user_reg * p);
            qi[c] = a - lr * (-w * p + item_reg * a);
            qj[c] = b - lr * (w * p + item_reg * b);
        }
    }
}

#endif
