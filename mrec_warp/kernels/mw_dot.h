/* The dot product of two float rows, the operation WARP's sampler runs for every candidate
   negative (declared in vectors.pxd as `dot`).

   Four SSE accumulators of 4 floats each: a sum over one accumulator waits on the latency of
   every add before it (4 cycles on current x86, 16 adds for 64 factors), while four
   independent chains keep the adder busy. Other CPUs get four scalar accumulators, which
   break the chain the same way once the compiler vectorises them. */
#ifndef MW_DOT_H
#define MW_DOT_H

#include <stddef.h>
#include "mw_cpu.h"

#ifdef MW_SSE
#include <emmintrin.h>
#endif

static inline float mw_dot(const float* a, const float* b, ptrdiff_t d) {
    ptrdiff_t c = 0;
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
    __m128 s = _mm_add_ps(_mm_add_ps(s0, s1), _mm_add_ps(s2, s3));
    /* the four lanes: (0 + 2) + (1 + 3) */
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    float total = _mm_cvtss_f32(s);
    for (; c < d; c++) total += a[c] * b[c];
    return total;
#else
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (; c + 4 <= d; c += 4) {
        s0 += a[c] * b[c];
        s1 += a[c + 1] * b[c + 1];
        s2 += a[c + 2] * b[c + 2];
        s3 += a[c + 3] * b[c + 3];
    }
    for (; c < d; c++) s0 += a[c] * b[c];
    return (s0 + s1) + (s2 + s3);
#endif
}

#endif
