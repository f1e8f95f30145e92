"""What a search may spend: durations, each trial's estimated cost, and the rungs of short trials.

``tune --time-budget`` runs successive halving (Li et al.'s hyperband with one bracket):
the families that early-stop (WARP, WRMF) first try every candidate with a few epochs
and a sample of validation users, and only the best half of each rung goes on to the
next, longer one, up to the full trial; families without epochs (item-kNN, SLIM, EASE)
fit once. Every trial's cost is estimated before it starts, from the data's size and
the family (EASE: :func:`mrec_warp.models.ease.estimate`), corrected by what the
family's finished trials actually took; a trial that does not fit in what is left is not
started, and a family whose cheapest trial cannot fit the budget or the memory is
skipped with one line.
"""
from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import scipy.sparse as sp

from ..errors import InputError
from .. import memory

#: Epoch caps of the short rungs of each early-stopping family; the last rung is the
#: full trial (``None``: the search's own ``max_epochs`` and patience).
RUNGS: Dict[str, Tuple[Optional[int], ...]] = {"warp": (5, 15, None), "wrmf": (5, 10, None)}
#: Validation users the early stopping of a short trial scores (a sample of them).
SHORT_VALIDATION_USERS = 1000
#: A rung's trials are cut to ``1 / ETA`` for the next one. Half, not Li et al.'s third:
#: on a 1.9k x 16k long-tail set, WRMF's best setting ranked 5th of 9 after 3 iterations
#: (strong regularisation converges later), so a third lost it.
ETA = 2

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """Seconds of ``90s``, ``2m``, ``1h``, ``1h30m``, ``1.5h`` or a bare number (seconds).

    Raises
    ------
    InputError
        On anything else, or a duration that is not positive.
    """
    s = str(text).strip().lower()
    parts = re.fullmatch(r"((\d+(\.\d*)?|\.\d+)\s*[smhd]\s*)+", s)
    if re.fullmatch(r"\d+(\.\d*)?|\.\d+", s):
        seconds = float(s)
    elif parts:
        seconds = sum(float(v) * _UNITS[u] for v, _, u in re.findall(r"(\d+(\.\d*)?|\.\d+)\s*([smhd])", s))
    else:
        raise InputError(f"`time_budget` {text!r} is not a duration", hint="e.g. 90s, 2m, 1h or 1h30m")
    if not seconds > 0 or not math.isfinite(seconds):
        raise InputError(f"`time_budget` {text!r} is not a positive duration", hint="e.g. 90s, 2m or 1h")
    return seconds


def format_duration(seconds: float) -> str:
    """``45 s``, ``2.0 min``, ``1.5 h``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


# -- cost of one trial ------------------------------------------------------------------------------
#: Seconds per unit of work of each family (one thread), measured here (2 shared cores)
#: on ml-100k and a 1.9k x 16k long-tail synthetic set (scripts in the report): warp per
#: ``nnz x factors`` and epoch (at 50 sampled negatives); wrmf per ``(users + items) x
#: factors^2`` and iteration; item-kNN per ``items^2`` (its dense blocks) and per
#: co-occurrence (``sum n_u^2``); SLIM per ``sum_k deg_k^2`` (``deg_k``: items co-occurring
#: with ``k``: coordinate descent on a target visits each neighbour's Gram row); scoring per
#: ``users x items``. The search corrects them by what its finished trials took.
RATES = {"warp": 3.5e-8, "wrmf": 2.0e-9, "square": 2.6e-8, "cooc": 2.0e-8, "slim": 2.5e-9, "score": 9e-9}
#: Epochs an early-stopped full trial is assumed to run (its ``max_epochs`` is an upper bound).
TYPICAL_EPOCHS = {"warp": 60, "wrmf": 15}
#: Most co-occurrences for which the Gram matrix's structure is counted exactly (else bounded).
EXACT_GRAM = 5e7


def data_shape(fit: sp.csr_matrix, val: sp.csr_matrix) -> Dict[str, float]:
    """The sizes costs depend on."""
    fit = sp.csr_matrix(fit)
    per_user = np.diff(fit.indptr).astype(np.float64)
    cooc = float((per_user ** 2).sum())
    n_items = fit.shape[1]
    if cooc <= EXACT_GRAM:
        pattern = sp.csr_matrix((np.ones(fit.nnz, np.float32), fit.indices, fit.indptr), shape=fit.shape)
        gram = (pattern.T @ pattern).tocsr()
        deg = np.diff(gram.indptr).astype(np.float64)
    else:  # an upper bound: every item of the item's users
        deg = np.minimum(n_items, np.bincount(fit.indices, weights=np.repeat(per_user, np.diff(fit.indptr).astype(int)),
                                              minlength=n_items))
    return {"users": fit.shape[0], "items": n_items, "nnz": fit.nnz, "cooc": cooc,
            "deg2": float((deg ** 2).sum()), "val_users": int(np.count_nonzero(np.diff(val.indptr)))}


def trial_cost(family: str, params: Dict[str, Any], shape: Dict[str, float], base: Dict[str, Any],
               epochs_cap: Optional[int] = None, ease_cost=None) -> float:
    """Estimated seconds of one trial (fit and validation scoring), before it starts.

    ``epochs_cap``: a short trial's most epochs (``None``: a full one). ``ease_cost``: an
    EASE trial's :class:`~mrec_warp.models.ease.Cost` (its time is used as is).
    """
    users, items, nnz = shape["users"], shape["items"], shape["nnz"]
    val_users = shape["val_users"]
    scoring = RATES["score"] * val_users * items  # the trial's final scoring of every validation user
    sample = min(val_users, SHORT_VALIDATION_USERS) if epochs_cap else val_users
    if family == "popularity":
        return scoring
    if family == "warp":
        full = min(int(base.get("max_epochs", 100)), TYPICAL_EPOCHS["warp"])
        epochs = min(epochs_cap, full) if epochs_cap else full
        factors = int(params.get("factors", 64))
        sampled = min(int(params.get("max_sampled", 50)), 100) / 50  # negatives drawn per positive, about
        per_epoch = RATES["warp"] * nnz * factors * (0.5 + sampled) / 1.5 \
            + RATES["score"] * min(sample, 5000) * items / 2  # evaluated every other epoch
        return epochs * per_epoch + scoring
    if family == "wrmf":
        epochs = min(epochs_cap, TYPICAL_EPOCHS["wrmf"]) if epochs_cap else TYPICAL_EPOCHS["wrmf"]
        f = int(params.get("factors", 64))
        per_epoch = RATES["wrmf"] * (users + items) * f * f + RATES["score"] * sample * items
        return epochs * per_epoch + scoring
    if family == "itemknn":
        return RATES["square"] * items * items + RATES["cooc"] * shape["cooc"] + scoring
    if family == "slim":
        l1 = float(params.get("l1", 2.0))  # a larger l1 leaves fewer neighbours active
        return RATES["slim"] * shape["deg2"] / max(0.25, math.sqrt(l1 / 2.0)) + RATES["cooc"] * shape["cooc"] \
            + scoring
    if family == "ease":
        return (ease_cost.seconds if ease_cost is not None else 1e-10 * items ** 3) + scoring
    return scoring


def ease_fits(fit: sp.csr_matrix, params: Dict[str, Any]):
    """EASE's :class:`~mrec_warp.models.ease.Cost` on ``fit`` and, when its peak exceeds
    the memory it may use, the one-line reason; ``(cost, None)`` when it fits."""
    from ..models.ease import EASE, estimate

    model = EASE(**params)
    csr = fit
    if model.max_items is not None and model.max_items < fit.shape[1]:
        csr = fit[:, : int(model.max_items)]  # (only its size matters here)
    cost = estimate(csr, model.dtype, int(model.topk), 1)
    limit = (model.memory_limit_mb * 2**20 if model.memory_limit_mb is not None
             else 0.75 * memory.available_bytes())
    if cost.peak_bytes > limit:
        return cost, (f"needs about {memory.format_bytes(cost.peak_bytes)} of memory, more than the "
                      f"{memory.format_bytes(limit)} it may use")
    return cost, None


class CostModel:
    """Trial estimates corrected per family by the ratio of what its finished trials took
    to what they were estimated to take (geometric mean, so one slow trial moves it little)."""

    def __init__(self) -> None:
        self._logs: Dict[str, List[float]] = {}

    def correct(self, family: str, estimate: float) -> float:
        logs = self._logs.get(family)
        return estimate * (math.exp(sum(logs) / len(logs)) if logs else 1.0)

    def record(self, family: str, estimate: float, actual: float) -> None:
        if estimate > 0 and actual > 0:
            self._logs.setdefault(family, []).append(math.log(actual / estimate))


def promoted(scores: List[Tuple[int, float]], eta: int = ETA) -> List[int]:
    """The best ``ceil(n / eta)`` of ``(candidate, score)`` (NaN scores never), best first;
    ties go to the earlier candidate."""
    ok = [(c, s) for c, s in scores if s == s]
    ok.sort(key=lambda cs: (-cs[1], cs[0]))
    return [c for c, _ in ok[: max(1, math.ceil(len(ok) / eta))]] if ok else []
