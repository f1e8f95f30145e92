"""What a WARP epoch reads, and the check after it: shared by training and fold-in.

:class:`TrainingData` holds the kernel's arrays for a set of positives (the CSR
structure, each positive's user, the visit order, the confidence weights or alias
table); :func:`check_divergence` stops a run whose factors blew up. Both
:mod:`~mrec_warp.models.warp` (fitting) and :mod:`~mrec_warp.models.foldin` (new users)
use them, so they live below both.
"""
from __future__ import annotations

import threading
from typing import Dict, Optional, Sequence, Tuple

import numpy as np
import scipy.sparse as sp

from ..errors import TrainingDivergedError
from ..kernels import rng as _rng

#: Training stops as diverged when a learned array's typical vector length (root mean square
#: of its row norms) passes this many times the initial one (``init_scale``, counted as at
#: least 0.1). With the hinge's margin of 1, sound models stay within about 30 times: 1.6 on
#: MovieLens 100k and planted data with the defaults, ~130 even at learning rate 10, while a
#: learning rate of 1e6 reaches 1e8 times in one epoch.
DIVERGENCE_GROWTH = 1e4

#: Largest bitmap of the positives (one bit per user and item) the WARP kernel tests its
#: negatives against instead of searching CSR rows; bigger sets keep the search (a bitmap
#: that does not stay in cache would cost a memory load per draw).
SEEN_BITMAP_BYTES = 16 * 1024 * 1024


class TrainingData:
    """The arrays the kernel reads: CSR structure, the user of each positive, the visit order.

    Every stored pair of ``csr`` is a positive (never sampled as a negative); an epoch visits
    them all, or only the pairs of ``visit`` (a subset of ``csr``) when it is given.
    ``confidence``, one value per visited pair (in CSR order), weighs them: ``use="weight"``
    builds step weights (confidence over its mean; 1 for pairs not visited),
    ``use="sample"`` the alias table the epochs draw the visited pairs from.
    """

    def __init__(self, csr: sp.csr_matrix, visit: Optional[sp.csr_matrix] = None,
                 confidence: Optional[np.ndarray] = None, use: str = "weight") -> None:
        self.indptr = csr.indptr.astype(np.int64)  # small: one entry per user
        self.indices = csr.indices.astype(np.int32, copy=False)  # shared with the model's CSR
        counts = np.diff(self.indptr)
        self.pos_users = np.repeat(np.arange(csr.shape[0], dtype=np.int32), counts)
        # the visit order is shuffled in place every epoch; int32 halves its memory when it fits
        dtype = np.int32 if csr.nnz < 2**31 - 1 else np.int64
        if visit is None:
            self.order = np.arange(csr.nnz, dtype=dtype)
        else:
            self.order = _positions(csr, visit).astype(dtype)
        self.rank_weights = _rng.harmonic_table(csr.shape[1])
        self.shape: Tuple[int, int] = (int(csr.shape[0]), int(csr.shape[1]))
        self._seen_bits: Optional[np.ndarray] = None
        self._seen_lock = threading.Lock()  # hogwild shards ask for it at once in the first epoch
        self.alias: Optional[Tuple[np.ndarray, np.ndarray]] = None
        self.targets: Optional[np.ndarray] = None  # what an alias draw k stands for: order[k]
        self.step_weights: Optional[np.ndarray] = None
        if confidence is not None and len(self.order):
            values = np.asarray(confidence, dtype=np.float64)
            if use == "sample":
                self.alias = _rng.alias_table(values)
                if visit is not None:
                    self.targets = self.order.astype(np.int64)
            else:
                self.step_weights = np.ones(csr.nnz, dtype=np.float32)
                self.step_weights[self.order] = values / values.mean()


    @property
    def seen_bits(self) -> Optional[np.ndarray]:
        """The positives as a bitmap, bit ``u * n_items + j`` (little-endian within each
        byte), built at first use; ``None`` above :data:`SEEN_BITMAP_BYTES`."""
        n_users, n_items = self.shape
        with self._seen_lock:
            if self._seen_bits is None and 0 < n_users * n_items <= 8 * SEEN_BITMAP_BYTES:
                rows = np.repeat(np.arange(n_users, dtype=np.int64), np.diff(self.indptr))
                bits = rows * n_items + self.indices
                seen = np.zeros((n_users * n_items + 7) // 8, dtype=np.uint8)
                np.bitwise_or.at(seen, bits >> 3, np.left_shift(1, bits & 7).astype(np.uint8))
                self._seen_bits = seen
            return self._seen_bits


def _pair_keys(csr: sp.csr_matrix) -> np.ndarray:
    """One int64 per stored pair, ``row * n_cols + col``: increasing for sorted indices."""
    rows = np.repeat(np.arange(csr.shape[0], dtype=np.int64), np.diff(csr.indptr))
    return rows * csr.shape[1] + csr.indices


def _positions(csr: sp.csr_matrix, subset: sp.csr_matrix) -> np.ndarray:
    """Where each stored pair of ``subset`` sits among the stored pairs of ``csr``."""
    csr.sort_indices()
    subset.sort_indices()
    return np.searchsorted(_pair_keys(csr), _pair_keys(subset))


def merge_seen(seen: sp.csr_matrix, new: sp.csr_matrix) -> sp.csr_matrix:
    """The union of two binary users x items matrices: sorted, ones, float32."""
    merged = sp.csr_matrix(seen + new, dtype=np.float32)
    merged.sum_duplicates()
    merged.sort_indices()
    merged.data[:] = 1.0
    return merged


def check_divergence(arrays: Sequence[np.ndarray], init_scale: float, learning_rate: float, what: str,
                     alpha: Optional[float] = None, scales: Optional[Dict[str, float]] = None) -> None:
    """Raise :class:`TrainingDivergedError` when an array is not finite or has blown up.

    Blown up: its typical vector length (root mean square of the row norms; of the values
    for a 1-D array) passed :data:`DIVERGENCE_GROWTH` times ``init_scale`` (at least 0.1).
    ``alpha``: the confidence scale, when confidences weight each step; ``scales``: other
    parameters that multiply each step (a hybrid's un-normalised ``identity_weight``). The
    hint names them first, the largest first: a step scaled by ``identity_weight=1e30`` is
    not fixed by a learning rate ten times lower.
    """
    scales = {**({"alpha": alpha} if alpha else {}), **(scales or {})}
    scaled = "".join(f"lower `{name}` from {value:g} ({'confidences multiply' if name == 'alpha' else 'it multiplies'} "
                     "each step), " for name, value in sorted(scales.items(), key=lambda kv: -kv[1]))
    hint = (scaled + f"lower the learning rate from {learning_rate:g} to {learning_rate / 10:g} or less, "
            "or add regularisation")
    limit = DIVERGENCE_GROWTH * max(float(init_scale), 0.1)
    for a in arrays:
        if a.size == 0:
            continue
        flat = a.reshape(-1)
        typical = float(np.sqrt(np.dot(flat, flat) / a.shape[0]))  # float32 dot: inf when huge
        if not np.isfinite(typical) and not np.isfinite(flat).all():
            raise TrainingDivergedError(f"{what}: factors are no longer finite", hint=hint)
        if not typical <= limit:
            raise TrainingDivergedError(
                f"{what}: factor lengths grew to {typical:.3g}, more than {DIVERGENCE_GROWTH:.0e} times "
                f"their initial {max(float(init_scale), 0.1):g}", hint=hint)
