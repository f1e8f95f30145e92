"""Settings chosen on the user's data: what ``"auto"`` means for the parameters a family selects.

A family names the parameters whose best value depends on the data (``SELECTED``: WRMF's
``factors``, ``alpha`` and ``regularization``, EASE's ``l2``...) and their fixed values
(``FIXED``, what ``select=False`` uses). A parameter left at ``"auto"`` is chosen by the fit
on the internal hold-out early stopping uses (the same share of each user's pairs, the same
scored users: :func:`~mrec_warp.models.early_stopping.internal_holdout`), then the model is
fitted on all of the data with the chosen values. An explicit value is never overridden:
only the parameters left at ``"auto"`` are searched.

How the candidates are found is the family's (a grid it can afford, warm starts, one
eigendecomposition for every ``l2``...); this module holds what every family shares:

* which parameters a fit chooses (:func:`selected_names`), the value in force
  (:func:`value_of`: the chosen one after a fit) and what a fit chose (:func:`chosen_values`);
* a tried setting and its hold-out score (:class:`Candidate`), the pick (:func:`best`:
  the highest score, the first listed on a tie, so a family lists its fixed values first);
* the log (:func:`report`: one line per candidate with ``-v``, one summary line), and what
  a model file keeps (:func:`chosen_attrs`: each chosen value as ``name_``).
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Optional, Sequence, Tuple

import numpy as np

from ..errors import InputError
from ..progress import Progress
from .declared import Param

#: The word a selected parameter's default is: chosen by the fit on the hold-out.
AUTO = "auto"


def select_param() -> Param:
    """The declared ``select`` switch of a family that chooses settings on its hold-out."""
    return Param("select", bool, True, "Choose the settings left at auto on the internal hold-out (the same "
                 "share of each user's items early stopping holds out), then fit on all the data; off: the "
                 "fixed defaults.")


def selected_names(model) -> Tuple[str, ...]:
    """The parameters this fit chooses: the family's ``SELECTED`` left at ``"auto"`` with
    ``select`` on (none with ``select=False``)."""
    if not getattr(model, "select", False):
        return ()
    return tuple(name for name in getattr(type(model), "SELECTED", ()) if getattr(model, name) == AUTO)


def fixed_value(model, name: str) -> Any:
    """The fixed default of a selected parameter (what ``select=False`` uses)."""
    return type(model).FIXED[name]


def value_of(model, name: str) -> Any:
    """The value of ``name`` in force: the explicit one, else what the fit chose (``name_``),
    else, before a fit with ``select=False``, the fixed default."""
    value = getattr(model, name)
    if value != AUTO:
        return value
    chosen = getattr(model, name + "_", None)
    if chosen is not None and chosen != "":
        return chosen
    if not getattr(model, "select", False):
        return fixed_value(model, name)
    raise InputError(f"`{name}=auto` is chosen by fit on the hold-out: fit the model first",
                     hint=f"fit the model, or give `{name}` a value")


def chosen_values(model) -> Dict[str, Any]:
    """What a fitted model chose on its hold-out: the value of each parameter it selected
    (:func:`selected_names`), in the family's order; empty when it chose none."""
    return {name: value_of(model, name) for name in selected_names(model)}


def chosen_attrs(model) -> Dict[str, Any]:
    """What a model file keeps of the choice: ``name_`` per selected parameter (its value in
    force after a fit; an empty placeholder of the parameter's kind before one, so that the
    loader knows each attribute's type)."""
    out: Dict[str, Any] = {}
    for name in getattr(type(model), "SELECTED", ()):
        value = getattr(model, name + "_", None)
        if value is None:
            value = "" if isinstance(fixed_value(model, name), str) else None
        out[name + "_"] = value
    return out


def remember(model, chosen: Dict[str, Any]) -> None:
    """Set ``name_`` for every selected parameter of the family: the value ``chosen`` gives,
    else the one in force (explicit, or the fixed default with ``select=False``)."""
    for name in getattr(type(model), "SELECTED", ()):
        if name in chosen:
            setattr(model, name + "_", chosen[name])
        elif getattr(model, name) != AUTO or not getattr(model, "select", False):
            setattr(model, name + "_", getattr(model, name) if getattr(model, name) != AUTO
                    else fixed_value(model, name))
        else:
            raise ValueError(f"the fit chose no value for {name!r}")


@dataclass
class Candidate:
    """One setting tried on the hold-out.

    Attributes
    ----------
    values : dict
        The selected parameters' values.
    score : float
        Precision@k on the hold-out's scored users (NaN: not scored, e.g. dropped early).
    seconds : float
        Time spent on it (fit and scoring).
    note : str
        What else the log should say (``"best at iteration 12"``, ``"stopped at rung 1"``).
    extra : dict
        What the family keeps of the run for its refit (WRMF: the best iteration count).
    """

    values: Dict[str, Any]
    score: float = math.nan
    seconds: float = 0.0
    note: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)


def best(candidates: Sequence[Candidate]) -> Candidate:
    """The candidate with the highest score; on a tie the first listed (a family lists its
    fixed values first, so a tie keeps them)."""
    scored = [c for c in candidates if not math.isnan(c.score)]
    if not scored:
        raise InputError("no setting could be scored on the hold-out (no user has a held-out item)",
                         hint="give the selected parameters values, or use select=False")
    top = scored[0]
    for c in scored[1:]:
        if c.score > top.score:
            top = c
    return top


def clearly_above(hits: np.ndarray, fixed_hits: np.ndarray, z: float) -> bool:
    """Whether a setting's per-user hits beat another's on the same users by more than ``z``
    standard errors of the mean paired difference: a lead beyond the hold-out's noise (a
    family keeps its fixed values otherwise)."""
    d = np.asarray(hits, dtype=np.float64) - np.asarray(fixed_hits, dtype=np.float64)
    if len(d) < 2:
        return False
    se = float(d.std(ddof=1)) / math.sqrt(len(d))
    return float(d.mean()) > z * se


def walk(n: int, start: int, evaluate: Callable[[int], float]) -> None:
    """Score the ordered settings ``0..n-1`` of one parameter from ``start`` (already
    evaluated or not: ``evaluate(start)`` runs first) towards the better side: down the list
    while the hold-out's score rises, and up it only when the first step down did not rise.
    A unimodal curve's peak for a few settings instead of all of them."""
    first = evaluate(start)
    for direction in (-1, 1):
        i, previous = start + direction, first
        while 0 <= i < n:
            score = evaluate(i)
            if not score > previous:
                break
            previous, i = score, i + direction
        if i - direction != start:  # it rose this way: the other way is not walked
            break


def describe(values: Dict[str, Any]) -> str:
    """``factors=128 alpha=5 regularization=10``: a setting as the log shows it."""
    return " ".join(f"{k}={_short(v)}" for k, v in values.items())


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


class Stopwatch:
    """Seconds since it was made (``with`` not needed): a candidate's cost."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.start


#: The key of ``Candidate.extra`` a family sets on a setting that scored above the fixed
#: values but not clearly (within the hold-out's noise), so the summary names it.
PASSED_OVER = "passed_over"


def report(progress: Progress, family: str, candidates: Iterable[Candidate], chosen: Candidate,
           fixed: Optional[Candidate], seconds: float, k: int = 10) -> None:
    """Log the search: one line per candidate (``-v``), one summary line (shown by default).

    ``fixed``: the candidate of the fixed defaults, when it was scored, so the summary says
    what the choice gained."""
    tried = list(candidates)
    for c in tried:
        score = "not scored" if math.isnan(c.score) else f"P@{k} {c.score:.4f}"
        progress.detail(f"{family}: tried {describe(c.values)}: {score} ({c.seconds:.1f} s"
                        + (f", {c.note}" if c.note else "") + ")")
    than = ""
    if fixed is not None and fixed is not chosen and not math.isnan(fixed.score):
        than = f" against {fixed.score:.4f} at the fixed {describe(fixed.values)}"
    elif fixed is chosen:
        # only a setting the family compared with the fixed values and passed over is named:
        # another one's score may come from fewer users or passes (WRMF's first rung)
        passed = [c for c in tried if c.extra.get(PASSED_OVER) and c is not fixed]
        if passed:
            top = best(passed)
            than = f" ({describe(top.values)} scored {top.score:.4f}, not clearly better than these fixed values)"
        else:
            than = " (the fixed values were best)"
    listed = "" if progress.logger.isEnabledFor(logging.DEBUG) else " (-v lists them)"
    progress.log(f"{family}: chose {describe(chosen.values)} on the hold-out: P@{k} {chosen.score:.4f}{than}; "
                 f"{len(tried)} settings tried in {seconds:.1f} s{listed}{narrower(chosen, fixed, k)}")


#: A chosen setting whose hold-out lists cover less than this share of what the fixed
#: values' lists cover is said to be closer to popularity (the summary warns).
NARROWER = 0.5


def narrower(chosen: Candidate, fixed: Optional[Candidate], k: int) -> str:
    """The summary's warning when the chosen setting's top-``k`` lists on the hold-out cover
    far fewer items than the fixed values' (``extra["coverage"]``): precision, what the
    choice maximises, can rise as every list tends to the same popular items (a new user's
    600-user file: WRMF's regularization 150 took coverage@10 from 0.98 to 0.07)."""
    if fixed is None or fixed is chosen:
        return ""
    ours, theirs = chosen.extra.get("coverage"), fixed.extra.get("coverage")
    if ours is None or not theirs or ours >= NARROWER * theirs:
        return ""
    fixed_values = " ".join(f"--{name.replace('_', '-')} {_short(value)}" for name, value in fixed.values.items())
    return (f"; its top-{k} lists cover {ours:.0%} of the items against {theirs:.0%} at the fixed values, closer to "
            f"popularity: {fixed_values} keeps them")
