"""Confidence: how much one observed (user, item) value counts, shared by every model.

Implicit logs carry a value per pair (play counts, hours, quantities). A model either
ignores it (every pair is a positive, the value only chose which pairs are kept, see
``--min-rating``) or turns it into a confidence with one of the rules below (Hu, Koren &
Volinsky 2008):

* ``"none"``: ``c = 1`` for every pair (the value is ignored);
* ``"linear"``: ``c = 1 + alpha * value``;
* ``"log"``: ``c = 1 + alpha * log1p(value / eps)`` (heavy-tailed counts: 273 hours is
  not 2,730 times as telling as 0.1 hour).

WARP (``mrec_warp.models.warp``) and WRMF both compute it with :func:`confidence`.
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np
import scipy.sparse as sp

from ..errors import InputError
from .npz import MAX_FACTOR

#: Largest confidence: what a saved model's weights may hold (:data:`~mrec_warp.data.npz.MAX_FACTOR`).
MAX_CONFIDENCE = MAX_FACTOR

#: The rules :func:`confidence` knows.
CONFIDENCES = ("none", "linear", "log")


#: Largest ``eps``: the float32 maximum, what the kernels compute in.
MAX_FLOAT32 = float(np.finfo(np.float32).max)


def check_confidence(kind: str, alpha: float = 1.0, eps: float = 1.0, bounded: bool = False) -> None:
    """Raise :class:`~mrec_warp.errors.InputError` unless ``kind``, ``alpha`` and ``eps`` are usable.

    ``alpha`` must be finite and >= 0 (0 makes every confidence 1), ``eps`` finite and > 0,
    ``eps`` at most the float32 maximum. With ``bounded`` (a model file's parameters, no
    values at hand) ``alpha`` at most :data:`MAX_CONFIDENCE` too: a larger one makes
    confidences no model file holds. Otherwise :func:`confidence` checks the largest
    confidence the values make, naming the largest ``alpha`` that fits them.
    """
    if kind not in CONFIDENCES:
        raise InputError(f"unknown confidence {kind!r}", hint=f"use one of {', '.join(CONFIDENCES)}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.number)) \
            or alpha < 0 or (bounded and alpha > MAX_CONFIDENCE) or not np.isfinite(alpha):  # (a huge int: no float)
        raise InputError(f"confidence alpha must be a finite number >= 0{f' and <= {MAX_CONFIDENCE:.2g}' if bounded else ''}, "
                         f"got {alpha!r}",
                         hint="e.g. `alpha=1`")
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.number)) or eps <= 0 \
            or eps > MAX_FLOAT32 or not np.isfinite(eps):
        raise InputError(f"confidence eps must be a finite number > 0 and <= {MAX_FLOAT32:.2g}, got {eps!r}",
                         hint="e.g. `eps=1`")


def confidence(values: np.ndarray, kind: str = "log", alpha: float = 1.0, eps: float = 1.0,
               source: Optional[str] = None) -> np.ndarray:
    """Confidence of each observed value.

    Parameters
    ----------
    values : array-like of float
        The observed values (counts, hours, ratings), one per (user, item) pair. They must
        be finite and >= 0 unless ``kind`` is ``"none"``.
    kind : {"none", "linear", "log"}
        ``"none"``: 1; ``"linear"``: ``1 + alpha * value``; ``"log"``:
        ``1 + alpha * log1p(value / eps)``.
    alpha : float
        Scale of the value's contribution, >= 0.
    eps : float
        ``"log"`` only: the value that counts as "one unit", > 0 (e.g. 1 play, 1 hour).
    source : str, optional
        File the values came from, for error messages.

    Returns
    -------
    numpy.ndarray of float32
        ``c >= 1`` for every value, the same shape as ``values``.

    Raises
    ------
    InputError
        Unknown ``kind``, bad ``alpha`` / ``eps``, or a negative or non-finite value.

    Examples
    --------
    >>> confidence([0.0, 1.0, 9.0], "linear", alpha=2.0).tolist()
    [1.0, 3.0, 19.0]
    >>> confidence([0.0, 1.0], "log", alpha=1.0, eps=1.0).round(4).tolist()
    [1.0, 1.6931]
    """
    check_confidence(kind, alpha, eps)
    values = np.asarray(values, dtype=np.float64)
    if kind == "none":
        return np.ones(values.shape, dtype=np.float32)
    bad = ~np.isfinite(values) | (values < 0)
    if bad.any():
        first = values.ravel()[int(np.flatnonzero(bad.ravel())[0])]
        raise InputError(
            f"{int(bad.sum())} value(s) cannot be a confidence (negative or not finite), e.g. {float(first):g}",
            path=source, hint="confidence needs counts, hours or ratings >= 0; use `confidence=none` to ignore values",
        )
    scaled = values if kind == "linear" else np.log1p(values / float(eps))
    with np.errstate(over="ignore"):  # (an overflow is refused below, not printed as a warning)
        conf = 1.0 + float(alpha) * scaled
    top = float(conf.max()) if conf.size else 1.0
    if not top <= MAX_CONFIDENCE:
        # what a model file accepts on load: a larger confidence would train a model that never loads
        largest = (MAX_CONFIDENCE - 1.0) / float(scaled.max())
        raise InputError(f"`alpha={float(alpha):g}` makes confidences up to {top:.3g}, more than the "
                         f"{MAX_CONFIDENCE:.0e} a model can hold", path=source,
                         hint=f"use `alpha` <= {largest:.3g} for this data"
                              + (", or `confidence=log`" if kind == "linear" else ""))
    return conf.astype(np.float32)


def describe_confidence(kind: str, alpha: float = 1.0, eps: float = 1.0) -> str:
    """The rule in words for logs and summaries, e.g. ``"confidence log, alpha 1.0, eps 1.0"``."""
    if kind == "none":
        return "ignored (every row is a positive of weight 1)"
    if kind == "linear":
        return f"confidence linear, alpha {float(alpha)} (c = 1 + alpha * value)"
    return f"confidence log, alpha {float(alpha)}, eps {float(eps)} (c = 1 + alpha * log1p(value / eps))"


#: ``alpha="auto"`` on a small binary file (every value the same, or no values): every
#: observed pair weighs ``1 + BINARY_ALPHA`` (:func:`auto_alpha`).
BINARY_ALPHA = 3.0
#: ``alpha="auto"`` on values that differ (ratings, counts), and on a large binary file: the
#: alpha of the previous default, each unit of ``f(value)`` adding 1 to the pair's weight.
AUTO_ALPHA = 1.0
#: The :func:`binary_evidence` up to which a binary file gets ``BINARY_ALPHA`` and from which
#: it gets ``AUTO_ALPHA``; between them alpha falls geometrically (docs/models/wrmf.rst,
#: 'alpha "auto"').
BINARY_EVIDENCE = (90_000.0, 130_000.0)


def binary_evidence(users: int, items: int, pairs: int) -> float:
    """How much data WRMF's fixed regularization faces: ``sqrt(users * pairs) * (pairs / items) ** 0.2``.

    Parameters
    ----------
    users, items : int
        Users and items with at least one observed pair.
    pairs : int
        Observed pairs (stored entries, a value of 0 too).

    Notes
    -----
    Upweighting the observed pairs (alpha 3 rather than 1) gains 3-93% P@10 on binary
    files while the data is small against the regularization and loses 2-20% once it is
    large: on 37 binary sets (1k-50k users, 100-20k items) the sign of that gain is
    ordered by this number, not by density, users, items or pairs alone (dropping users
    from one set turns its loss into a gain). The exponents were chosen on 28 sets and
    checked on 9 new ones (5 shapes, 4 generator settings), each on the predicted side
    (docs/models/wrmf.rst, 'alpha "auto"').

    Examples
    --------
    >>> round(binary_evidence(2000, 13472, 71989))  # 2k users x 13k items, 72k pairs: small
    16777
    """
    if users <= 0 or items <= 0 or pairs <= 0:
        return 0.0
    return float(np.sqrt(float(users) * float(pairs)) * (float(pairs) / float(items)) ** 0.2)


def binary_alpha(sizes: Optional[Tuple[int, int, int]] = None) -> float:
    """``alpha="auto"`` for a binary file of ``sizes = (users, items, pairs)``.

    ``BINARY_ALPHA`` (3) up to ``BINARY_EVIDENCE[0]`` of :func:`binary_evidence`,
    ``AUTO_ALPHA`` (1) from ``BINARY_EVIDENCE[1]``, geometric in between; 3 without sizes.
    """
    if sizes is None:
        return BINARY_ALPHA
    low, high = BINARY_EVIDENCE
    evidence = binary_evidence(*sizes)
    if evidence <= low:
        return BINARY_ALPHA
    if evidence >= high:
        return AUTO_ALPHA
    share = np.log(evidence / low) / np.log(high / low)  # 0 at low, 1 at high
    return float(BINARY_ALPHA ** (1.0 - share) * AUTO_ALPHA ** share)


def auto_alpha(values: Optional[np.ndarray], kind: str = "linear", eps: float = 1.0,
               sizes: Optional[Tuple[int, int, int]] = None) -> float:
    """The ``alpha`` that ``alpha="auto"`` resolves to for these observed values.

    With ``f`` the confidence's rule (``value`` for ``"linear"``, ``log1p(value / eps)`` for
    ``"log"``):

    * a binary file: every value the same (all 1), no values (``None``) or
      ``confidence="none"``: :func:`binary_alpha` of ``sizes`` (``(users, items, pairs)``
      of the observed pairs) ``/ f(value)``, so every observed pair weighs ``1 + 3`` on a
      small file and ``1 + 1`` on a large one (:func:`binary_evidence`): alpha 3 gained up
      to 93% P@10 on small binary files and lost 2-20% on large ones. Without ``sizes``, 3;
    * values that differ (ratings, play counts): ``AUTO_ALPHA`` (1), the previous default.
      Scaling it to the mean value (``5 / mean f(value)``, so that the mean pair weighs
      ``1 + 5``) gained 0.003 P@10 on ratings and counts but lost 0.003 (2.5%, beyond seed
      noise) on a synthetic many-users x 400-items rating set, so the rule stays at 1 there:
      no suite set may get worse. It also leaves every other pair's weight alone when one
      value is a stray 1e6.

    Values whose ``f`` is 0 (all 0) give the binary alpha: they make every confidence 1 anyway.
    """
    if values is None or len(values) == 0 or kind == "none":
        return binary_alpha(sizes)
    f = np.asarray(values, dtype=np.float64)
    if kind == "log":
        f = np.log1p(f / float(eps))
    if not all_equal(f):
        return AUTO_ALPHA
    mean = float(f.mean())
    alpha = binary_alpha(sizes)
    return alpha / mean if mean > 0 and np.isfinite(mean) else alpha


def observed_sizes(matrix: sp.spmatrix) -> Tuple[int, int, int]:
    """``(users, items, pairs)`` of a user x item matrix: rows and columns with at least one
    stored entry, and the stored entries (a value of 0 is an observed pair too)."""
    csr = matrix.tocsr()
    users = int(np.count_nonzero(np.diff(csr.indptr)))
    items = int(np.count_nonzero(np.bincount(csr.indices, minlength=csr.shape[1]))) if csr.nnz else 0
    return users, items, int(csr.nnz)


def all_equal(values: Optional[np.ndarray]) -> bool:
    """Whether every value is the same (a binary file), or there are none."""
    return values is None or len(values) == 0 or bool(np.min(values) == np.max(values))
