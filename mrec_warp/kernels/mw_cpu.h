/* Portability macros shared by the kernels' C helpers (mw_adagrad.h, mw_cg.h) and the
   Cython kernels (through vectors.pxd). */
#ifndef MW_CPU_H
#define MW_CPU_H

/* Any libc header defines __GLIBC__ where the C library is glibc (MW_CLONES below). */
#include <limits.h>

/* Ask for a cache line before it is needed: GCC and clang (Linux, macOS) have a builtin,
   MSVC on x64 the SSE intrinsic; a no-op elsewhere. */
#if defined(__GNUC__) || defined(__clang__)
#define MW_PREFETCH(p) __builtin_prefetch((const void*)(p), 0, 3)
#elif defined(_MSC_VER) && defined(_M_X64)
#include <xmmintrin.h>
#define MW_PREFETCH(p) _mm_prefetch((const char*)(p), _MM_HINT_T0)
#else
#define MW_PREFETCH(p) ((void)0)
#endif

/* `restrict` tells the compiler that rows never overlap, which is what lets it vectorise
   a loop over several of them (Cython has no way to say so). */
#if defined(_MSC_VER)
#define MW_RESTRICT __restrict
#else
#define MW_RESTRICT __restrict__
#endif

/* SSE2 is part of every x86-64 CPU, so wheels built without -march may use it. */
#if defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2)
#define MW_SSE 1
#endif

/* GCC can build a function twice -- for any x86-64, and for CPUs with FMA (256-bit AVX)
   -- and pick one when the module loads (target_clones). Wheels are built without -march,
   so without this a loop would be SSE2 only; BLAS libraries do the same runtime dispatch.
   The dispatch is an ifunc, which needs glibc (musl, as on Alpine, has none). Elsewhere
   (clang on macOS, MSVC, aarch64, musl) it is one plain portable build. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) \
    && defined(__GLIBC__)
#define MW_CLONES __attribute__((target_clones("fma", "default")))
#else
#define MW_CLONES
#endif

#endif
