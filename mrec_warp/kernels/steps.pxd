# cython: language_level=3
"""The SGD / adagrad updates of the WARP family (plain, hybrid, fold-in) and their settings.

The vector loops are C (``mw_adagrad.h``) for ``restrict`` and SSE; the matrix-factorisation
step on one (user, positive, negative) triple is :func:`mf_step`, written once for the plain
kernel and the hybrid kernel's identity-only rows.
"""
from libc.stdint cimport int64_t
from libc.math cimport sqrtf

from mrec_warp.kernels.vectors cimport clip_norm

cdef extern from "mw_adagrad.h":
    void adagrad_axpy "mw_adagrad_axpy" (float* param, float* accum, const float* grad,
                                         Py_ssize_t d, float lr, bint adagrad) noexcept nogil
    void pair_step "mw_pair_step" (float* pu, float* qi, float* qj, float* gpu, float* gqi,
                                   float* gqj, Py_ssize_t d, float weight, float lr,
                                   float user_reg, float item_reg, bint adagrad) noexcept nogil


# The step settings, one struct for every kernel: Python passes a dict with every field
# (Cython converts it), built in one place: ``WARP._step_settings`` in mrec_warp/models/warp.py.
cdef struct StepSettings:
    int loss                # LOSS_WARP, LOSS_BPR or LOSS_WARP_KOS (sampler.pxd)
    int max_sampled
    float learning_rate
    float user_reg
    float item_reg
    bint adagrad            # else plain SGD
    bint use_bias
    float user_max_norm     # 0: no limit
    float item_max_norm
    int kos_n               # WARP-kOS: positives sampled, and which order statistic
    int kos_k


cdef inline void bias_step(float* b, float* acc, float grad, float lr, bint adagrad) noexcept nogil:
    """One adagrad (or SGD) step on a single bias."""
    if adagrad:
        acc[0] += grad * grad
        b[0] -= lr * grad / sqrtf(acc[0])
    else:
        b[0] -= lr * grad


cdef inline void mf_step(const StepSettings* cfg, float* pu, float* qi, float* qj,
                         float* gpu, float* gqi, float* gqj, float* bias, float* bias_accum,
                         int64_t i, int64_t j, Py_ssize_t d, float weight) noexcept nogil:
    """The matrix-factorisation step on ``weight * (f(u,j) - f(u,i))``: user row ``pu``,
    item rows ``qi`` / ``qj`` (``g*`` their adagrad accumulators), each row then held
    within its max norm, and the item biases ``bias[i]`` / ``bias[j]`` when ``cfg.use_bias``."""
    pair_step(pu, qi, qj, gpu, gqi, gqj, d, weight, cfg.learning_rate, cfg.user_reg, cfg.item_reg,
              cfg.adagrad)
    clip_norm(pu, d, cfg.user_max_norm)
    if cfg.item_max_norm > 0:
        clip_norm(qi, d, cfg.item_max_norm)
        clip_norm(qj, d, cfg.item_max_norm)
    if cfg.use_bias:
        bias_step(&bias[i], &bias_accum[i], -weight, cfg.learning_rate, cfg.adagrad)
        bias_step(&bias[j], &bias_accum[j], weight, cfg.learning_rate, cfg.adagrad)
