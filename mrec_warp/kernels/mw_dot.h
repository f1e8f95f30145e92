/* The sampler's dot product (declared in vectors.pxd as dot_wide).

   Scoring a candidate is a 64-float dot product whose time is the latency of its add
   chain, not its arithmetic: four scalar accumulators (vectors.pxd's dot) leave 16
   dependent adds. Four SSE accumulators (16 lanes) leave 4, so a candidate is scored in
   a fraction of the time. The sum is rounded in another order than dot's, so a kernel
   that uses it gives other (equally valid) bits than one that uses dot. */
#ifndef MW_DOT_H
#define MW_DOT_H

#include <stddef.h>
#include "mw_cpu.h"

#ifdef MW_SSE
#include <emmintrin.h>
#endif

static inline float mw_dot_wide(const float* a, const float* b, ptrdiff_t d) {
    ptrdiff_t c = 0;
    float s = 0.0f;
#ifdef MW_SSE
    __m128 s0 = _mm_setzero_ps(), s1 = _mm_setzero_ps(), s2 = _mm_setzero_ps(), s3 = _mm_setzero_ps();
    for (; c + 16 <= d; c += 16) {
        s0 = _mm_add_ps(s0, _mm_mul_ps(_mm_loadu_ps(a + c), _mm_loadu_ps(b + c)));
        s1 = _mm_add_ps(s1, _mm_mul_ps(_mm_loadu_ps(a + c + 4), _mm_loadu_ps(b + c + 4)));
        s2 = _mm_add_ps(s2, _mm_mul_ps(_mm_loadu_ps(a + c + 8), _mm_loadu_ps(b + c + 8)));
        s3 = _mm_add_ps(s3, _mm_mul_ps(_mm_loadu_ps(a + c + 12), _mm_loadu_ps(b + c + 12)));
    }
    for (; c + 4 <= d; c += 4)
        s0 = _mm_add_ps(s0, _mm_mul_ps(_mm_loadu_ps(a + c), _mm_loadu_ps(b + c)));
    {
        float lanes[4];
        _mm_storeu_ps(lanes, _mm_add_ps(_mm_add_ps(s0, s1), _mm_add_ps(s2, s3)));
        s = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    }
#endif
    for (; c < d; c++) s += a[c] * b[c];
    return s;
}

#endif
