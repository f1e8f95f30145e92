"""The Cython kernels: every loop that runs per interaction, per row or per score.

Compiled modules (no GIL, typed memoryviews, float32; no OpenMP -- callers split the work
over threads) and what they are for:

* :mod:`~mrec_warp.kernels.warp` -- WARP / BPR / WARP-kOS epochs of matrix factorisation,
  and fold-in of user rows against fixed items (plain WARP's and the hybrid's).
* :mod:`~mrec_warp.kernels.hybrid` -- the same epochs for the hybrid model (feature embeddings).
* :mod:`~mrec_warp.kernels.rng` -- seeding the xoshiro streams, shuffling, weighted draws of
  positives and WARP's rank weights.
* :mod:`~mrec_warp.kernels.als` -- WRMF's per-row least-squares solves.
* :mod:`~mrec_warp.kernels.slim` -- SLIM's per-item coordinate descent.
* :mod:`~mrec_warp.kernels.gram` -- dense rows of the item-item Gram matrix ``X'X`` (EASE).
* :mod:`~mrec_warp.kernels.topk` -- top-k per row of a score block, seen items skipped; each
  item's largest weights at several counts.
* :mod:`~mrec_warp.kernels.itemsim` -- item-item scores: histories times sparse weights, dense.

What they share, compiled into each one that cimports it (inline, no call cost):
``rng.pxd`` (xoshiro256** and splitmix64), ``vectors.pxd`` (dot, prefetch, norm clip),
``steps.pxd`` (the adagrad / SGD updates and the one matrix-factorisation step),
``sampler.pxd`` (the WARP / BPR / kOS sampler behind score and prefetch callbacks). The C
helpers are real headers: ``mw_cpu.h`` (portability macros), ``mw_adagrad.h`` (SSE
updates), ``mw_cg.h`` (WRMF's conjugate gradient, built for FMA CPUs too), ``mw_rng.h``.

A kernel imports nothing of the package but other kernels' .pxd files.
"""
