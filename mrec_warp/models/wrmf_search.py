"""WRMF's settings chosen on the hold-out: a short successive-halving search over a small grid.

What ``factors``, ``alpha`` and ``regularization`` left at ``"auto"`` become
(:mod:`~mrec_warp.models.selection`). The candidates are a small grid (:func:`candidates`:
the fixed defaults first, then settings around them: a heavier regularization (with a
larger alpha), a lighter one, and 128 factors). The search is successive
halving, warm-started as ALS allows:

* **one shared start**: :data:`START` iterations of the fixed defaults from the fit's random
  initial factors; every setting goes on from those factors (ALS forgets its start within an
  iteration or two, so the start is paid once instead of once per setting; more factors get
  new columns drawn as at initialisation). The fixed defaults' iterations are each scored as
  the fit's early stopping scores them (:class:`FixedTrace`);
* **rung 1**: :data:`RUNG` iterations of each setting, scored on a sample of
  :data:`RUNG_USERS` of the hold-out's users;
* **rung 2**: the fixed defaults and the best third of the others go on for :data:`RUNG2`
  more iterations, scored on all the hold-out's scored users (those early stopping scores);
  another setting wins only by a margin over the fixed defaults (:data:`CHANGE_MARGIN`; more
  factors, whose iterations cost more, by :data:`MORE_FACTORS_MARGIN` more), and only when the
  users' paired difference says it is more than noise (:data:`CHANGE_Z`) and its lead is larger
  than what the fixed defaults still gained on it over rung 2 (ALS at the fixed
  regularization may still be rising where a setting that converges faster has levelled off);
* the winner is left in the model and the fit's early stopping goes on from it. Where the
  fixed defaults won, it goes on from their best scored iteration with the fit's patience
  and the refit runs from scratch for the best count: the model of ``select=False``, bit for
  bit. Where another setting won, its rung-2 score is the one to beat, with a shorter
  patience (:data:`CHALLENGER_PATIENCE`), and the refit is :data:`REFIT` iterations on all
  the data from its best factors on the hold-out.

Only the training states of the settings that may still be promoted are kept (at most
the number promoted, plus the one running): the memory of a few fits' factors, not of
the whole grid.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import scipy.sparse as sp

from ..memory import available_bytes
from .early_stopping import HoldoutScorer, id_keys, sample_users
from .selection import PASSED_OVER, Candidate, Stopwatch, clearly_above

#: Iterations of a factor count's shared start, of each setting in rung 1, and of the
#: promoted ones in rung 2 (the winner's early stopping then goes on from there).
START = 2
RUNG = 2
RUNG2 = 3
#: Iterations of the refit on all the data from the winner's best factors on the hold-out,
#: when a setting other than the fixed defaults won.
REFIT = 2
#: The patience, and the smallest rise (relative) that renews it, of the early stopping that
#: goes on from a winner other than the fixed defaults (which keep the fit's own: the same
#: count as without the search): after 7 iterations the hold-out's noise has settled, and on
#: play counts a creeping plateau (+0.3% over 11 iterations) took the fit to 2.7 times its old time.
CHALLENGER_PATIENCE = 5
CHALLENGER_MIN_RISE = 0.002
#: Hold-out users scoring rung 1 (a sample: rung 1 scores every setting once).
RUNG_USERS = 1000
#: The share of rung 1 promoted to rung 2 (at least one setting).
PROMOTED = 1.0 / 3.0

#: The settings tried besides the fixed defaults, as (factors, regularization, alpha
#: relative to the fixed alpha): chosen on the selection suite (scripts/bench_defaults.py,
#: docs/models/wrmf.rst, "Settings chosen on the hold-out").
GRID: Tuple[Tuple[int, float, float], ...] = (
    (64, 40.0, 1.0),
    (64, 150.0, 1.0),
    (64, 15.0, 1.0),
    (128, 40.0, 1.0),
    (64, 150.0, 10.0),  # (last: the one other alpha, its confidences built once)
)
#: A setting other than the fixed defaults wins only by more than this share of the score at
#: the same iteration count: on the hold-out of a long-tail set (2k users x 17k items) a
#: setting 3.6% ahead after 7 iterations (and 2 standard errors of the users' paired
#: difference) ended 3% behind the fixed defaults on the test split, where the fixed ones rise
#: for 27 iterations; on play counts a 4.4% lead held (+2.9% on the test split).
CHANGE_MARGIN = 0.04
#: ... and by more than this many standard errors of the users' paired difference in hits
#: against the fixed defaults (at the same iteration count, on the same users).
CHANGE_Z = 2.0
#: A setting with more factors than the first (the fixed count) wins only by more than this
#: share of the score: its iterations cost about (factors / 64)^2 as much, and on the
#: selection suite 128 factors were never more than 0.4% above 64.
MORE_FACTORS_MARGIN = 0.02


def candidates(fixed: Dict[str, Any], names: Sequence[str], explicit: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The settings to try: :data:`GRID` over the ``names`` chosen, the ``explicit`` values
    kept (an explicit value is never searched), the fixed defaults first, no repeats.

    ``fixed``: the fixed value of each selected parameter (``alpha``: the data rule's value).
    """
    out: List[Dict[str, Any]] = []
    for factors, reg, alpha_scale in GRID:
        point = {"factors": factors, "regularization": reg, "alpha": float(fixed["alpha"]) * alpha_scale}
        values = {n: (point[n] if n in names else explicit[n]) for n in ("factors", "alpha", "regularization")}
        if values not in out:
            out.append(values)
    return out


def promoted_count(n_settings: int) -> int:
    """How many of ``n_settings`` rung 1 promotes besides the first: :data:`PROMOTED` of the
    others (at least one when there are others)."""
    return int(math.ceil(PROMOTED * (n_settings - 1)))


class Rung:
    """The states kept while a rung runs: the first setting's (the fixed defaults: always
    promoted, so that a change is judged against them at the same iteration count) and at
    most ``keep`` of the best of the others scored so far."""

    def __init__(self, keep: int) -> None:
        self.keep = max(int(keep), 0)
        self.states: Dict[int, Any] = {}
        self.scores: Dict[int, float] = {}

    def offer(self, index: int, score: float, state: Callable[[], Any]) -> None:
        """Keep ``state()`` of setting ``index`` if its ``score`` is among the best ``keep``."""
        self.scores[index] = score
        ranked = [0] + sorted((i for i in self.scores if i != 0), key=lambda i: (-_finite(self.scores[i]), i))[:self.keep]
        if index in ranked:
            self.states[index] = state()
        for i in list(self.states):
            if i not in ranked:
                del self.states[i]

    def best(self) -> List[int]:
        """The kept settings, best first (a tie: the one listed first)."""
        return sorted(self.states, key=lambda i: (-_finite(self.scores[i]), i))


def _handicap(score: float, setting: Dict[str, Any], first: Dict[str, Any]) -> float:
    """``score`` as the pick compares it: a setting other than the first (the fixed
    defaults) lowered by :data:`CHANGE_MARGIN`, and by :data:`MORE_FACTORS_MARGIN` more with
    more factors than the first."""
    if setting == first:
        return score
    score /= 1.0 + CHANGE_MARGIN
    return score / (1.0 + MORE_FACTORS_MARGIN) if setting["factors"] > first["factors"] else score


def _finite(score: float) -> float:
    return -math.inf if math.isnan(score) else score


def search(model, unit_fit: sp.csr_matrix, held_out: sp.csr_matrix, users: np.ndarray, settings: List[Dict[str, Any]],
           init_seed: int, rng: np.random.Generator, progress, workers=None,
           confidences: Optional["Confidences"] = None) -> Tuple[Candidate, List[Candidate]]:
    """Successive halving over ``settings`` on the hold-out (see the module docstring).

    ``unit_fit``: the fit part of the hold-out split, each pair's ``f(value)`` (so that the
    confidences of any ``alpha`` are ``1 + alpha * f``); ``held_out`` and ``users``: the
    held-out pairs and the users early stopping scores. ``model`` provides
    :meth:`~mrec_warp.models.wrmf.WRMF.use_setting`, ``training_data`` and ``iterate``. Returns the winner
    (its state left in ``model``, its iterations in ``extra["iterations"]``) and every
    candidate tried, in the order of ``settings``. ``confidences``: the fit part's
    (:class:`Confidences` of ``unit_fit``), when the caller goes on training on them.
    """
    n_users, n_items = unit_fit.shape
    tried = [Candidate(dict(s)) for s in settings]
    k = int(model.eval_k)
    rung_users = sample_users(_rows(held_out, users), RUNG_USERS, rng,
                              id_keys(getattr(model, "user_ids", None), n_users))
    scorer1 = HoldoutScorer(unit_fit, held_out, rung_users, k)
    scorer2 = HoldoutScorer(unit_fit, held_out, users, k) if len(users) > len(rung_users) else scorer1
    rung = Rung(promoted_count(len(settings)))  # (the first always, and these)
    confidences = confidences if confidences is not None else Confidences(unit_fit, model.training_data)
    # rung 1: one shared start (the first setting's first iterations), each setting from it
    clock = Stopwatch()
    model.use_setting(settings[0])
    model.init_state(n_users, n_items, np.random.default_rng(init_seed))
    trace = FixedTrace(scorer2)
    trace.iterate(model, confidences.of(settings[0]["alpha"]), START, workers)
    start = model.train_state()
    start_seconds = clock.seconds / len(settings)
    widen_rng = np.random.default_rng(init_seed + 1)
    for i, setting in enumerate(settings):
        clock = Stopwatch()
        model.use_setting(setting)
        model.set_train_state(start)
        model.resize_factors(int(setting["factors"]), widen_rng)
        if i == 0:
            last = trace.iterate(model, confidences.of(setting["alpha"]), RUNG, workers)
            # the trace scored this very state: on rung 1's users too when they are all the scored users
            score = last if scorer1 is scorer2 else scorer1(model.score_users)
        else:
            model.iterate(confidences.of(setting["alpha"]), RUNG, workers)
            score = scorer1(model.score_users)
        tried[i].score, tried[i].note = score, f"rung 1 ({START + RUNG} iterations, {len(rung_users):,} users)"
        rung.offer(i, _handicap(score, setting, settings[0]), model.train_state)
        tried[i].seconds = clock.seconds + start_seconds
    del start
    # rung 2: the fixed defaults and the best third of the others go on, scored on every scored user
    promoted = rung.best()
    final: Dict[int, float] = {}
    hits: Dict[int, np.ndarray] = {}
    rise: Dict[int, float] = {}
    states: Dict[int, Any] = {}
    best_i: Optional[int] = None
    for i in promoted:
        clock = Stopwatch()
        model.use_setting(settings[i])
        model.set_train_state(rung.states.pop(i), copy=False)
        if len(promoted) > 1:
            if i == 0:
                final[i] = trace.iterate(model, confidences.of(settings[i]["alpha"]), RUNG2, workers)
            else:
                model.iterate(confidences.of(settings[i]["alpha"]), RUNG2, workers)
                final[i] = scorer2(model.score_users)
            hits[i] = scorer2.user_hits()
            tried[i].extra["coverage"] = scorer2.coverage()
            # how much it still rose over rung 2, on rung 1's users
            rise[i] = (scorer1(model.score_users) - tried[i].score) if scorer2 is not scorer1 else \
                final[i] - tried[i].score
            tried[i].note = f"rung 2 ({START + RUNG + RUNG2} iterations)"
        else:  # nothing to compare: scored as early stopping goes on scoring it
            final[i] = scorer2(model.score_users) if scorer2 is not scorer1 else tried[i].score
        tried[i].score = final[i]
        tried[i].seconds += clock.seconds
        if best_i is None or _finite(_handicap(final[i], settings[i], settings[0])) > \
                _finite(_handicap(final[best_i], settings[best_i], settings[0])):
            best_i = i
        if i in (0, best_i):
            states[i] = model.train_state()
        for j in [j for j in states if j not in (0, best_i)]:
            del states[j]
    for i, c in enumerate(tried):
        if i not in final:
            c.note = f"stopped at rung 1 ({START + RUNG} iterations, {len(rung_users):,} users)"
    assert best_i is not None  # at least one setting is promoted
    if best_i != 0 and 0 in hits:
        if not clearly_above(hits[best_i], hits[0], CHANGE_Z):
            tried[best_i].note += f"; not clearly above the fixed defaults (paired over {len(users):,} users)"
            tried[best_i].extra[PASSED_OVER] = True
            best_i = 0
        elif final[best_i] - final[0] <= rise[0] - rise[best_i]:
            tried[best_i].note += (f"; the fixed defaults still rose {rise[0]:+.4f} over rung 2 against "
                                   f"{rise[best_i]:+.4f}: they would catch up")
            tried[best_i].extra[PASSED_OVER] = True
            best_i = 0
    winner = tried[best_i]
    model.use_setting(settings[best_i])
    model.set_train_state(states.pop(best_i), copy=False)
    winner.extra["iterations"] = int(model.epochs_done_)
    if best_i == 0:
        winner.extra["trace"] = trace
    return winner, tried


class FixedTrace:
    """The fixed defaults' iterations in the search, each scored on every scored user as the
    fit's early stopping scores them, the best kept: when they win, early stopping goes on
    as the fit without the search would (the same scores, the same best count)."""

    def __init__(self, scorer: HoldoutScorer) -> None:
        self.scorer = scorer
        self.score, self.epoch, self.snapshot = -math.inf, 0, None

    def iterate(self, model, conf: Any, iterations: int, workers) -> float:
        """``iterations`` iterations of ``model``, each scored; returns the last score."""
        score = math.nan
        for _ in range(int(iterations)):
            model.iterate(conf, 1, workers)
            score = self.scorer(model.score_users)
            if score > self.score:
                self.score, self.epoch, self.snapshot = score, int(model.epochs_done_), model.snapshot()
        return score


class PatienceFrom:
    """A callback of the early stopping that goes on from the search's winner: stop once
    ``patience`` iterations have passed without a rise of more than ``min_rise`` (relative)
    above the best score so far, the winner's ``score`` at iteration ``epoch`` counting
    (early stopping's own patience counts only the scores it saw itself)."""

    def __init__(self, score: float, epoch: int, patience: int, k: int, min_rise: float = 0.0) -> None:
        self.score, self.epoch, self.patience, self.key = score, epoch, patience, f"val_precision@{k}"
        self.min_rise = min_rise

    def __call__(self, model, logs: Dict[str, Any]) -> bool:
        score = logs.get(self.key)
        if score is not None and score > self.score * (1.0 + self.min_rise):
            self.score, self.epoch = score, int(logs["epoch"])
        return int(logs["epoch"]) - self.epoch >= self.patience


def _rows(matrix: sp.csr_matrix, users: np.ndarray) -> sp.csr_matrix:
    """``matrix`` with only the rows of ``users`` kept (the others emptied)."""
    keep = np.zeros(matrix.shape[0], dtype=bool)
    keep[users] = True
    counts = np.diff(matrix.indptr) * keep
    indptr = np.concatenate([[0], np.cumsum(counts)])
    mask = np.repeat(keep, np.diff(matrix.indptr))
    return sp.csr_matrix((matrix.data[mask], matrix.indices[mask], indptr), shape=matrix.shape)


class Confidences:
    """The fit part's confidences of an ``alpha``, both sides (``make``: the model's
    ``training_data``), the last one kept: the alphas are few, and one copy of the pairs
    besides the fit's is the most memory it takes."""

    def __init__(self, unit: sp.csr_matrix, make: Callable[[sp.csr_matrix], Any]) -> None:
        self.unit, self.make = unit, make
        self.alpha: Optional[float] = None
        self.data: Any = None

    def of(self, alpha: float) -> Any:
        if self.alpha != alpha or self.data is None:
            self.data = None  # (the previous one goes before the next is built)
            values = (1.0 + float(alpha) * self.unit.data.astype(np.float64)).astype(np.float32)
            self.data = self.make(sp.csr_matrix((values, self.unit.indices, self.unit.indptr), shape=self.unit.shape))
            self.alpha = alpha
        return self.data


def fits_in_memory(n_users: int, n_items: int, factors: int, states: int) -> bool:
    """Whether ``states`` copies of the factors of ``factors`` dimensions take at most half
    the memory available (a larger factor count is then left out of the grid)."""
    return 4.0 * factors * (n_users + n_items) * states <= 0.5 * available_bytes()
