"""What a search may spend: durations, each trial's estimated cost, and the rungs of short trials.

``tune --time-budget`` runs successive halving (Li et al.'s hyperband with one bracket):
the families that early-stop (WARP, WRMF) first try every candidate with a few epochs
and a sample of validation users, and only the best half of each rung goes on to the
next, longer one, up to the full trial; families without epochs (item-kNN, SLIM, EASE)
fit once. Every trial's cost is estimated before it starts, from the data's size by
the family (:meth:`~mrec_warp.models.tuning.TuneHooks.fit_cost`; its rungs are its
``tune_rungs``), corrected by what the family's finished trials actually took; a trial
that does not fit in what is left is not started, and a family whose cheapest trial cannot fit the budget or the memory
(:meth:`~mrec_warp.models.tuning.TuneHooks.memory_refusal`) is skipped with one line.
"""
from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np
import scipy.sparse as sp

from ..errors import InputError
from ..models.families import baseline_family
from ..models.tuning import TrialShape
from ..progress import Progress
from .candidates import MODEL
from .trials import family_class, point_values

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
#: Most co-occurrences for which the Gram matrix's structure is counted exactly (else bounded).
EXACT_GRAM = 5e7


def data_shape(fit: sp.csr_matrix, val: sp.csr_matrix) -> TrialShape:
    """The sizes costs depend on (and ``fit`` itself, for a family whose estimate reads it)."""
    csr = sp.csr_matrix(fit)
    per_user = np.diff(csr.indptr).astype(np.float64)
    cooc = float((per_user ** 2).sum())
    n_items = csr.shape[1]
    if cooc <= EXACT_GRAM:
        pattern = sp.csr_matrix((np.ones(csr.nnz, np.float32), csr.indices, csr.indptr), shape=csr.shape)
        gram = (pattern.T @ pattern).tocsr()
        deg = np.diff(gram.indptr).astype(np.float64)
    else:  # an upper bound: every item of the item's users
        deg = np.minimum(n_items, np.bincount(csr.indices, weights=np.repeat(per_user, np.diff(csr.indptr).astype(int)),
                                              minlength=n_items))
    return TrialShape(users=csr.shape[0], items=n_items, nnz=csr.nnz, cooc=cooc, deg2=float((deg ** 2).sum()),
                      val_users=int(np.count_nonzero(np.diff(val.indptr))), fit=fit)


def unit_cost(point: Dict[str, Any], cap: Optional[int], shape: TrialShape, base: Dict[str, Any], k: int) -> float:
    """Estimated seconds of one trial of ``point`` (``cap``: a short one's most epochs), as its
    family estimates it (:meth:`~mrec_warp.models.tuning.TuneHooks.fit_cost`) from the trial's
    constructor parameters."""
    cls = family_class(point[MODEL])
    return cls.fit_cost(shape, cls.trial_params(point_values(point), base, k), cap)


def has_rungs(family: str) -> bool:
    """Whether a budgeted search shortens the family's trials (successive halving)."""
    cls = family_class(family)
    return bool(cls.early_stopping and cls.tune_rungs)


def rungs(family: str) -> Tuple[Optional[int], ...]:
    """The epoch caps of a family's units in a budgeted search (``(None,)``: one full trial)."""
    return family_class(family).tune_rungs if has_rungs(family) else (None,)


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


# -- the search within a budget -----------------------------------------------------------------------
Units = Sequence[Tuple[int, Optional[int]]]


def run_budget(run: Callable[[Sequence[int], Dict[int, float]], None], done: Dict[int, Dict[str, Any]],
               points: Sequence[Dict[str, Any]], units: Units, todo: Sequence[int], shape: TrialShape,
               base: Dict[str, Any], k: int, time_budget: float, started: float, workers: int, progress: Progress,
               metric: str, clock: Callable[[], float]) -> List[str]:
    """Successive halving within ``time_budget`` seconds of ``started`` (on ``clock``):
    ``run(units, estimates)`` runs trials, which land in ``done``. Returns the notes."""
    notes: List[str] = []
    model = CostModel()
    left_todo = set(todo)
    deadline = started + time_budget
    measured = replace(shape, measured=True)
    by_point: Dict[int, List[int]] = {}
    for u, (i, _) in enumerate(units):
        by_point.setdefault(i, []).append(u)
    families = list(dict.fromkeys(p[MODEL] for p in points))
    skipped: Set[str] = set()

    def say(line: str) -> None:
        notes.append(line)
        progress.note(line)

    def raw(u: int) -> float:
        i, cap = units[u]
        return unit_cost(points[i], cap, measured, base, k)

    def estimate(u: int) -> float:
        return model.correct(points[units[u][0]][MODEL], raw(u))

    # families that cannot fit: their memory, or a first trial longer than the whole budget
    for fam in families:
        first = [by_point[i][0] for i, p in enumerate(points) if p[MODEL] == fam]
        cls = family_class(fam)
        refusal = cls.memory_refusal(shape.fit, cls.trial_params(point_values(points[units[first[0]][0]]), base, k))
        if refusal:
            skipped.add(fam)
            say(f"skipping {fam}: {refusal}")
            continue
        cheapest = min(estimate(u) for u in first)
        if cheapest > time_budget:
            skipped.add(fam)
            say(f"skipping {fam}: its cheapest trial is estimated at {format_duration(cheapest)}, "
                f"more than the {format_duration(time_budget)} budget")

    def halved() -> List[str]:
        """The searched families whose trials run in rungs."""
        return [f for f in families if f not in skipped and has_rungs(f)]

    def reserve(family: str, full: bool) -> float:
        """What must stay free for each early-stopping family's first full trial (``full``:
        this trial is its family's full one)."""
        out = 0.0
        for f in halved():
            if any(units[u][1] is None and points[units[u][0]][MODEL] == f for u in done) or (f == family and full):
                continue
            i = next(i for i, p in enumerate(points) if p[MODEL] == f)
            out += estimate(by_point[i][-1])
        return out

    def run_wave(queue: List[int], reserving: bool) -> None:
        """Run ``queue`` in waves of ``workers`` trials; a trial whose estimate (plus, when
        ``reserving``, what the full trials still to come need) does not fit what is left is
        not started."""
        not_started: Dict[str, int] = {}
        queue = [u for u in queue if u in left_todo]  # the others an earlier run finished
        while queue:
            left = deadline - clock()
            wave: List[int] = []
            while queue and len(wave) < workers:
                u = queue.pop(0)
                fam = points[units[u][0]][MODEL]
                held = reserve(fam, units[u][1] is None) if reserving else 0.0
                if left <= 0 or estimate(u) + held > left:
                    not_started[fam] = not_started.get(fam, 0) + 1
                    continue
                wave.append(u)
            if not wave:
                break
            costs = {u: raw(u) for u in wave}
            run(wave, {u: estimate(u) for u in wave})
            for u in wave:
                left_todo.discard(u)
                if u in done:
                    model.record(done[u][MODEL], costs[u], float(done[u]["seconds"]))
        for fam, n in not_started.items():
            say(f"{fam}: {n} trial(s) not started: they would not fit the "
                f"{format_duration(max(deadline - clock(), 0))} left")

    # 1. the baseline and every family's defaults (short ones for the early-stopping families),
    # cheapest first, so that each family has a result early
    first_points = [i for i, p in enumerate(points)
                    if p[MODEL] not in skipped and i == min(j for j, q in enumerate(points) if q[MODEL] == p[MODEL])]
    run_wave(sorted((by_point[i][0] for i in first_points),
                    key=lambda u: (points[units[u][0]][MODEL] != baseline_family(), estimate(u))), reserving=True)
    # 2. successive halving of the early-stopping families: every candidate short, then the
    # best half of each rung on to the next, longer one, up to full trials
    for level in range(max((len(rungs(f)) for f in halved()), default=1)):
        queue = []
        for fam in halved():
            mine = [i for i, p in enumerate(points) if p[MODEL] == fam and len(by_point[i]) > level]
            if level == 0:
                queue += [by_point[i][0] for i in mine]
            else:
                prev = [(i, done[by_point[i][level - 1]][metric]) for i in mine if by_point[i][level - 1] in done]
                queue += [by_point[i][level] for i in promoted(prev)]
        run_wave(queue, reserving=True)
    # 3. the families without epochs: their other candidates, cheapest first
    rest = [by_point[i][0] for i, p in enumerate(points) if p[MODEL] not in skipped and len(by_point[i]) == 1]
    run_wave(sorted(rest, key=estimate), reserving=False)
    return notes
