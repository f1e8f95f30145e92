"""Hyper-parameter search over model families: grid or random trials, run in parallel.

Every trial fits one candidate (a model family and its parameters) on the same
fit/validation split and scores precision@k on the validation users, training items
excluded (:mod:`.trials`): the early-stopping families' trials (WARP, WRMF) choose their
number of epochs on that split, the others (item-kNN, SLIM, EASE, ...) fit once; what
the search asks a family is its hooks (:mod:`mrec_warp.models.tuning`). Each
family's defaults are always a trial, so a search never hands back something that scores
worse on validation than not searching. Trials are independent work units: they run on
the chosen backend's workers (each trial single-threaded, so J workers run J trials at
once), and with a work folder each finished trial is a part file that a rerun skips.

The best trial's family and parameters (an early-stopping one with its chosen epoch count
as ``epochs``) are what ``mrec-warp train --params best.json`` reads.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from ..context import ExecutionContext, local_context
from ..data.interactions import Interactions, as_csr, binary_csr, check_values
from ..errors import InputError
from ..jobs import INPUTS_FILE, Job, fingerprint, write_inputs
from ..models.families import DEFAULT_FAMILY, FAMILIES, baseline_family, fit_takes, tunable_families
from ..models.params import check_number, integer_params
from ..models.early_stopping import holdout_split, id_keys
from ..models.selection import AUTO, describe
from ..progress import SILENT, Progress
from ..seeds import DEFAULT_SEED
from ..workers import effective_n_jobs
from ..data.rows import DEFAULT_EMPTY_IDS, DEFAULT_NEGATIVES
from ._inputs import load_interactions, load_validation
from .options import RowOptions
from . import budget
from .candidates import MODEL, with_defaults as defaults_first
from .trials import (CHOSEN, HITS, SHORT, check_pick, chosen_names, family_class, log_trial, paired_interval,
                     point_values, read_trial_row, run_trial, trial_model)


#: The family of the baseline row (a reference in the table, never the pick).
BASELINE = baseline_family()

#: The table's column of each trial's score against its family's defaults, in percent
#: (3.0: 3% higher), the unit of the summary line.
VS_DEFAULTS = "vs_defaults_pct"


# ---------------------------------------------------------------------------------------------
# the search
# ---------------------------------------------------------------------------------------------
@dataclass
class TuneResult:
    """A finished search.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per trial, the pick first, then best first: ``model`` (the family), its
        parameters (one left at ``auto``: the value its fit chose), ``chosen`` (every value
        the fit chose on its hold-out, ``factors=64 alpha=3 regularization=40``; empty when
        it chose none), ``precision@k``, ``vs_defaults_pct`` (the score against the same
        family's defaults in percent, the summary line's unit: 3.0 = 3% higher; NaN without
        a full trial of the defaults; :meth:`format_table` shows it as ``+3.0%``),
        ``ci_low`` / ``ci_high`` (its 95% interval over validation users), ``epochs``
        (early-stopping families: the chosen count), ``epochs_cap`` (a short trial of a time
        budget: its cap; such trials are never the pick), ``seconds`` and ``cost`` (the
        trial's estimated seconds at a fixed reference speed, which the tie rule compares;
        not shown by :meth:`format_table`).
        The popularity baseline, when asked for, is the last row: a reference, never the pick.
    metric : str
        The column the table is sorted by.
    base : dict
        Parameters shared by every WARP trial.
    notes : list of str
        What the search decided that the table alone does not say (a statistical tie
        broken towards a cheaper model, families skipped for the budget, a trial whose
        ``auto`` chose the setting another trial ran).
    """

    table: pd.DataFrame
    metric: str
    base: Dict[str, Any]
    notes: List[str] = field(default_factory=list)

    @property
    def best_model(self) -> str:
        """The family of the best trial."""
        return str(self.table.iloc[0].get(MODEL, DEFAULT_FAMILY))

    @property
    def best_params(self) -> Dict[str, Any]:
        """The best trial's parameters (an early-stopped trial's epoch count as ``epochs``);
        one its fit chose on the hold-out stays ``auto`` (``train`` chooses it again on all
        of its data: the trial validated the choice; ``best_json`` says what it chose)."""
        row = self.table.iloc[0]
        fam = FAMILIES[self.best_model]
        params: Dict[str, Any] = {}
        chosen = chosen_names(row)
        for n in (c for c in self.table.columns if c in fam.tunable):
            if n in chosen:
                params[n] = AUTO
                continue
            if pd.isna(row[n]):
                if n in fam.nullable:  # a family's trials share their names: NaN was null
                    params[n] = None
                continue
            params[n] = _cast(fam.tunable[n], row[n])
        if fam.cls.early_stopping:
            params["epochs"] = int(row["epochs"])
        return params

    def defaults_score(self, family: Optional[str] = None) -> float:
        """Validation score of a family's defaults as a full trial (default: the best trial's
        family); NaN when they ran only as short trials (a few epochs: no reference)."""
        family = family or self.best_model
        full = self.table[SHORT].isna() if SHORT in self.table else True
        rows = self.table[(self.table[MODEL] == family) & self.table["defaults"] & full]
        return float(rows[self.metric].iloc[0]) if len(rows) else float("nan")

    def best_json(self) -> Dict[str, Any]:
        """What ``--output`` holds: ``model`` and ``params`` (for ``train --params``) plus the evidence."""
        row = self.table.iloc[0]
        out = {"model": self.best_model, "params": self.best_params, "metric": self.metric,
               "score": _plain(row[self.metric]), "defaults_score": self.defaults_score(),
               "trials": len(self.table)}
        if "ci_low" in row:
            out["interval"] = [_plain(row["ci_low"]), _plain(row["ci_high"])]
        if isinstance(row.get(CHOSEN), str):
            out["chosen"] = row[CHOSEN]
        return out

    def baseline_note(self) -> Optional[str]:
        """A line when the pick is not clearly above the popularity baseline (intervals
        overlapping), else ``None``."""
        pop = self.table[self.table[MODEL] == BASELINE]
        if pop.empty or "ci_low" not in self.table or self.best_model == BASELINE:
            return None
        best, ref = self.table.iloc[0], pop.iloc[0]
        if not ref["ci_high"] >= best["ci_low"]:
            return None
        return (f"note: {self.best_model} ({best[self.metric]:.4f}) is within noise of the popularity baseline "
                f"({ref[self.metric]:.4f}): more validation users would tell them apart")

    def format_table(self, max_rows: Optional[int] = None) -> str:
        table = self.table if max_rows is None else self.table.head(max_rows)
        shown = table.drop(columns=[c for c in ("defaults", "cost") if c in table.columns])
        if "ci_low" in shown.columns:  # one column, right after the score's comparison
            ci = [("" if lo != lo else f"{lo:.4f}-{hi:.4f}") for lo, hi in zip(shown["ci_low"], shown["ci_high"])]
            at = list(shown.columns).index("ci_low")
            shown = shown.drop(columns=["ci_low", "ci_high"])
            shown.insert(at, "ci95", ci)
        if VS_DEFAULTS in shown.columns:  # as the summary line writes it: +3.0%
            shown[VS_DEFAULTS] = shown[VS_DEFAULTS].map(lambda v: "" if v != v else f"{v:+.1f}%")
        for c in shown.columns:  # whole-number columns: a blank where a family has no such count
            if isinstance(shown[c].dtype, pd.Int64Dtype):
                shown[c] = shown[c].map(lambda v: "" if pd.isna(v) else str(v))
        return shown.to_string(index=False, float_format=lambda v: f"{v:.4g}", na_rep="") + "\n"

    def summary(self) -> str:
        """One line: the best family and how far it is above its defaults (and the others');
        then one line per note of a tie broken towards a cheaper model or of trials that
        ran the same setting."""
        best = float(self.table.iloc[0][self.metric])
        parts = []
        for fam in dict.fromkeys(self.table[MODEL]):
            ref = self.defaults_score(fam)
            if ref == ref and ref > 0:
                parts.append(f"{(best / ref - 1) * 100:+.1f}% vs {fam} defaults ({ref:.4f})")
        return "\n".join([f"best: {self.best_model}, {self.metric} {best:.4f}; " + ", ".join(parts)]
                         + [n for n in self.notes if n.startswith(("tie:", "same setting:"))])


def _cast(kind: type, v: Any) -> Any:
    """A table cell back to the parameter's own type (pandas turns ints to floats beside NaN)."""
    v = _plain(v)
    # a string stays one: a default chosen from the data (WRMF's alpha "auto")
    return kind(v) if kind in (int, float) and not isinstance(v, str) else v


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def tune(
    train,
    points: Sequence[Dict[str, Any]],
    validation=None,
    validation_fraction: float = 0.1,
    k: int = 10,
    base: Optional[Dict[str, Any]] = None,
    seed: int = DEFAULT_SEED,
    context: Optional[ExecutionContext] = None,
    progress: Progress = SILENT,
    with_defaults: bool = True,
    use_values: Optional[bool] = None,
    format: str = "auto",
    sep: Optional[str] = None,
    header: Optional[bool] = None,
    columns: Optional[Union[str, Sequence]] = None,
    duplicates: Optional[str] = None,
    negatives: str = DEFAULT_NEGATIVES,
    min_value: Optional[float] = None,
    empty_ids: str = DEFAULT_EMPTY_IDS,
    time_budget: Optional[float] = None,
    baseline: bool = False,
) -> TuneResult:
    """Fit one model per point (in parallel) and rank them by validation precision@k.

    Parameters
    ----------
    train : Interactions, sparse matrix or path
        Training positives; a path is read as ``train`` reads it (with its values when a
        WRMF trial may weigh them).
    points : sequence of dict
        Candidates (see :mod:`~mrec_warp.stages.candidates`).
    validation : Interactions, sparse matrix or path, optional
        Held-out positives (a path is read like ``train``); default: ``validation_fraction`` of each user's items, drawn
        once with ``seed`` so every trial sees the same split.
    k : int
        Cut-off of the validation precision (also the early-stopping metric).
    base : dict, optional
        WARP parameters shared by every WARP trial (e.g. ``max_epochs``, ``patience``).
    seed : int
        Seed of the split and of every trial's model (trials differ only by parameters).
    context : ExecutionContext, optional
        Where trials run (each is single-threaded), and the work folder of one result file
        per finished trial: a rerun skips those trials. Default: one thread, a temporary
        folder.
    with_defaults : bool
        Try each family's defaults as well (first), so the best can never score below them.
    use_values : bool, optional
        WRMF trials weigh the training values (``train``'s matrix data) as confidences;
        otherwise, and for every other family, each pair counts the same. Default: when
        ``train`` was read from a file with a value column (as ``train`` reads it).
    format, sep, header, columns : optional
        How the file ``train`` names is read (default: guessed); ``validation`` is read with
        its own layout guessed, as :func:`~mrec_warp.stages.train.train` reads it.
    duplicates, negatives, min_value, empty_ids
        What the rows of both files become (default: duplicates summed, negative values
        refused): :mod:`mrec_warp.data.rows`.
    time_budget : float, optional
        Seconds the search may take (counted from this call): successive halving
        (:mod:`~mrec_warp.stages.budget`) -- short trials of the early-stopping families
        first, the best half of each rung promoted to longer ones, up to full trials;
        trials whose estimated cost does not fit what is left are not started, and no
        trial starts after the budget is spent (the one running finishes). ``None``:
        every point, fully.
    baseline : bool
        Add the popularity baseline as a row (a trial with nothing to tune).

    The best row is the highest validation score among full trials, except that a
    statistical tie (95% intervals over users overlapping) between families goes to
    the family whose trial is estimated to be cheaper (:attr:`TuneResult.notes` says so).

    Returns
    -------
    TuneResult
    """
    return run_tune(train, points, validation=validation, validation_fraction=validation_fraction, k=k, base=base,
                    seed=seed, context=context, progress=progress, with_defaults=with_defaults, use_values=use_values,
                    rows=RowOptions(format=format, sep=sep, header=header, columns=columns, duplicates=duplicates,
                                    negatives=negatives, min_value=min_value, empty_ids=empty_ids),
                    time_budget=time_budget, baseline=baseline)


def run_tune(
    train,
    points: Sequence[Dict[str, Any]],
    validation=None,
    validation_fraction: float = 0.1,
    k: int = 10,
    base: Optional[Dict[str, Any]] = None,
    seed: int = DEFAULT_SEED,
    context: Optional[ExecutionContext] = None,
    progress: Progress = SILENT,
    with_defaults: bool = True,
    use_values: Optional[bool] = None,
    rows: Optional[RowOptions] = None,
    time_budget: Optional[float] = None,
    baseline: bool = False,
) -> TuneResult:
    """:func:`tune` with its reader options and row rules as one object, as ``mrec-warp tune``
    calls it: ``rows`` says how the file ``train`` names is read and what the rows of both
    files become (``validation`` is read with its own layout guessed:
    :meth:`~mrec_warp.stages.options.RowOptions.rules_only`). Every other argument is :func:`tune`'s.
    """
    rows = rows or RowOptions()
    started = time.monotonic()
    if time_budget is not None:
        check_number(time_budget, "time_budget", above=0)
    if not points:
        raise InputError("no candidates to try", hint="give a grid or a number of random points")
    # by its own name, before the trials' models take it as their internal `eval_k`
    check_number(k, "k", integer=True, at_least=1)
    for p in points:
        family = p.get(MODEL, DEFAULT_FAMILY)
        if family not in FAMILIES:
            raise InputError(f"unknown model family {family!r}", hint=f"choose among {', '.join(tunable_families())}")
        foreign = sorted(set(p) - {MODEL} - set(FAMILIES[family].cls.param_names()))
        if foreign:
            raise InputError(f"{foreign[0]!r} is not a parameter of the {family} model",
                             hint="tune it with the family it belongs to")
    base = {**(base or {}), "random_state": seed}
    for p in points:  # a value no model takes is the search's error, found before the data is read
        trial_model(p.get(MODEL, DEFAULT_FAMILY), base, point_values(p), k).check_params()
    # only the families that weigh observed pairs take the values (as confidences)
    weighing = any(fit_takes(family_class(p.get(MODEL, DEFAULT_FAMILY)), "use_values") for p in points)
    if isinstance(train, (str, os.PathLike)):
        train = load_interactions(train, rows, values=weighing, required=False)
    if isinstance(validation, (str, os.PathLike)):
        if not isinstance(train, Interactions):
            raise InputError("a validation file needs the training data with its ids (an Interactions or a file)",
                             path=validation, hint="pass the validation set as a matrix of the same shape")
        validation = load_validation(validation, train, rows)
    if use_values is None:
        use_values = bool(getattr(train, "has_values", False))
    points = defaults_first(points) if with_defaults else [{MODEL: p.get(MODEL, DEFAULT_FAMILY), **p} for p in points]
    default_trials = set(range(len(dict.fromkeys(p[MODEL] for p in points)))) if with_defaults else set()
    if baseline and not any(p[MODEL] == BASELINE for p in points):
        default_trials.add(len(points))  # popularity's only trial: its defaults
        points = points + [{MODEL: BASELINE}]
    fit, val, use_values = _split(train, validation, validation_fraction, seed, use_values and weighing)
    metric = f"precision@{k}"
    # the units of work: one full trial per point, or with a budget every rung of it
    units: List[Tuple[int, Optional[int]]] = []
    for i, p in enumerate(points):
        caps = budget.rungs(p[MODEL]) if time_budget is not None else (None,)
        units.extend((i, cap) for cap in caps)
    description = {"kind": "tune", "version": 1, "data": fingerprint(fit, val), "points": list(points), "base": base,
                   "k": k}
    if time_budget is not None:
        description["units"] = units
    if use_values:
        description["values"] = fingerprint(fit.data)
    shape = budget.data_shape(fit, val)
    costs = {u: budget.unit_cost(points[i], cap, shape, base, k) for u, (i, cap) in enumerate(units)}
    notes: List[str] = []
    context = context if context is not None else local_context()
    with context:
        job = Job(context, description, [f"trial-{u:04d}.json" for u in range(len(units))],
                  folder=context.workdir, progress=progress)
        # finished trials are read here, never sent to a worker again
        done = {u: read_trial_row(job.part(u)) for u in range(len(units)) if u not in job.todo}
        split_src: Any = (fit, val)
        if job.off_process:
            split_src = job.stage(INPUTS_FILE, lambda p: write_inputs(p, {"fit": fit, "val": val},
                                                                      values=["fit"] if use_values else []))
        n_base = int(baseline and any(p[MODEL] == BASELINE for p in points))
        progress.log(f"tune: {len(points) - n_base} trials" + (f" and the {BASELINE} baseline" if n_base else "")
                     + f" ({job.skipped} already done) on {context.describe()}; "
                     f"{fit.nnz:,} fit / {val.nnz:,} validation interactions"
                     + (f"; budget {budget.format_duration(time_budget)}" if time_budget is not None else ""))

        def run(todo: Sequence[int], estimates: Optional[Dict[int, float]] = None) -> None:
            tasks = [(split_src, u, dict(points[units[u][0]]), base, k, str(job.path), use_values, units[u][1])
                     for u in todo]
            for row in job.run(run_trial, tasks, desc="trials", unit="trial", lines=False):  # log_trial's line
                done[row["trial"]] = row
                log_trial(progress, row, points[units[row["trial"]][0]], metric, (estimates or {}).get(row["trial"]))

        if time_budget is None:
            run(job.todo)
        else:
            notes += budget.run_budget(run, done, points, units, job.todo, shape, base, k, time_budget, started,
                                       effective_n_jobs(context.n_jobs), progress, metric, clock=time.monotonic)
        job.finish(staged=[INPUTS_FILE])
    finished = [done[u] for u in sorted(done)]
    if not finished:
        raise InputError("the time budget ended before any trial finished",
                         hint="give a longer `time_budget`")
    # a default point's rows, in every rung it ran (the table takes its longest as reference)
    default_units = {u for u, (i, _) in enumerate(units) if i in default_trials}
    table, tie = _results_table(finished, points, default_units, metric, {u: costs[u] for u in done})
    check_pick(table, metric)
    result = TuneResult(table=table, metric=metric, base=base, notes=notes + tie)
    reference = result.baseline_note()
    if reference:
        progress.note(reference)
    return result


def _split(train, validation, validation_fraction: float, seed: int, use_values: bool):
    """The fit and validation matrices every trial shares (validation always binary), and
    whether the fit one keeps its values (only WRMF trials weigh them)."""
    if isinstance(train, Interactions):
        fit_all = train.matrix
        if isinstance(validation, Interactions):
            validation = validation.reindex(train.user_ids, train.item_ids).matrix
    else:
        fit_all = as_csr(train)
    if use_values:
        # WRMF's confidence needs the values: the fit part keeps them, and every stored entry
        # (one of value 0 too) stays a pair for every family; read only, never changed here
        fit_all = as_csr(fit_all)
        check_values(fit_all.data, fit_all.indptr)  # before any trial: a trial's error is only its result
    else:
        fit_all = binary_csr(fit_all)
    if validation is None:
        # keyed by the ids when there are any: the split follows the pairs, not the row order
        keys = (id_keys(train.user_ids, fit_all.shape[0]), id_keys(train.item_ids, fit_all.shape[1])) \
            if isinstance(train, Interactions) else (None, None)
        fit, val = holdout_split(fit_all, float(validation_fraction), np.random.default_rng(seed), *keys)
    else:
        fit, val = fit_all, as_csr(validation)
        if val.shape != fit.shape:
            raise InputError(f"validation has shape {val.shape}, training {fit.shape}")
    # validation is relevance, never a weight: with the values kept for WRMF, a held-out
    # play count of 40 would otherwise count as 40 hits
    return fit, binary_csr(val), use_values


def _results_table(rows, points, default_trials, metric: str,
                   costs: Optional[Dict[int, float]] = None) -> Tuple[pd.DataFrame, List[str]]:
    """One row per trial, best first (on a tie the defaults, the lowest trial numbers, win),
    short trials after the full ones; then the statistical tie rule (:func:`_break_tie`)
    may move a cheaper family's best row to the top. Returns the table and its notes."""
    hits = {int(r["trial"]): r[HITS] for r in rows if HITS in r}  # per-user hits: not a column
    table = pd.DataFrame([{c: v for c, v in r.items() if c != HITS} for r in rows])
    table["defaults"] = table["trial"].isin(default_trials)
    if costs:
        table["cost"] = table["trial"].map(costs).astype(float)
    # full trials, then short ones (a time budget's), then the baseline (a reference, never the
    # pick), then failed trials (no score): a failed trial must never sort above a scored one
    rank = (table[SHORT].notna() if SHORT in table else pd.Series(False, index=table.index)) \
        .astype(int) + 2 * (table[MODEL] == BASELINE).astype(int) + 4 * table[metric].isna().astype(int)
    table = table.assign(_rank=rank).sort_values(["_rank", metric, "trial"], ascending=[True, False, True],
                                                 na_position="last", kind="stable").drop(columns="_rank")
    if default_trials:
        # a family's defaults as a full trial only: a short trial's score (a few epochs) is no
        # reference (a family whose defaults ran only short trials has none)
        full_rows = table[SHORT].isna() if SHORT in table else pd.Series(True, index=table.index)
        ref = table[table["defaults"] & full_rows].set_index(MODEL)[metric]
        ref = ref[~ref.index.duplicated()]
        table[VS_DEFAULTS] = (table[metric] / table[MODEL].map(ref).astype(float) - 1) * 100
    front = ["trial", MODEL] + sorted({n for p in points for n in p if n != MODEL}) + [
        CHOSEN, metric, VS_DEFAULTS, "ci_low", "ci_high", "epochs", SHORT, "seconds"]
    table = table[[c for c in front if c in table.columns] + [c for c in table.columns if c not in front]]
    # counts stay whole numbers beside the families that lack them (pandas makes 6 a 6.0 next to NaN)
    counts = {"trial", "epochs", SHORT}.union(*(integer_params(fam.cls) for fam in FAMILIES.values()))
    for c in table.columns:
        if c in counts and _all_whole(table[c]):
            table[c] = table[c].astype("Int64")
    table = table.reset_index(drop=True)
    notes: List[str] = _same_settings(table)
    if costs and "ci_low" in table:
        table, note = _break_tie(table, metric, hits)
        if note:
            notes.append(note)
    return table, notes


def _in_force(row: pd.Series, names: Sequence[str]) -> Dict[str, str]:
    """A trial's setting as it ran, ``name -> "name=value"`` as the log shows them: its
    parameters' cells, and what its fit chose on the hold-out."""
    values = {n: describe({n: _plain(row[n])}) for n in names if not pd.isna(row[n])}
    if isinstance(row.get(CHOSEN), str):
        values.update({part.split("=", 1)[0]: part for part in row[CHOSEN].split()})
    return values


def _same_settings(table: pd.DataFrame) -> List[str]:
    """One note per pair of full trials of a family that ran one setting, at least one of
    them by its choice on the hold-out (``auto``): the table lists both (two fits that went
    different ways to the same values), and the note says so."""
    if CHOSEN not in table:
        return []
    full = table[SHORT].isna() if SHORT in table else pd.Series(True, index=table.index)
    notes = []
    for fam, rows in table[full].groupby(MODEL, sort=False):
        names = [c for c in table.columns if c in FAMILIES[fam].tunable]
        seen: Dict[Tuple[str, ...], pd.Series] = {}
        for _, row in rows.sort_values("trial").iterrows():
            setting = _in_force(row, names)
            key = tuple(sorted(setting.values()))
            first = seen.setdefault(key, row)
            if first is row or not (chosen_names(first) or chosen_names(row)):
                continue
            chose = "; ".join(f"trial {int(r['trial'])} chose {', '.join(chosen_names(r))}"
                              for r in (first, row) if chosen_names(r))
            notes.append(f"same setting: {fam} trials {int(first['trial'])} and {int(row['trial'])} both ran "
                         f"{' '.join(setting.values())} ({chose} on the hold-out)")
    return notes


def _tied(best: pd.Series, row: pd.Series, hits: Dict[int, Any]) -> bool:
    """Whether ``row`` is within noise of ``best``: the 95% interval of their per-user
    difference includes 0 (paired: both scored the same validation users; unpaired intervals
    overlapping let a model 20% below pass as tied), or, without per-user hits (trial files
    of an earlier version), their 95% intervals overlap."""
    if int(row["trial"]) == int(best["trial"]):
        return True
    a, b = hits.get(int(best["trial"])), hits.get(int(row["trial"]))
    if a is not None and b is not None:
        low, high = paired_interval(a, b)
        if low == low:
            return low <= 0.0 <= high
    return bool(row["ci_high"] >= best["ci_low"] and row["ci_low"] <= best["ci_high"])


def _break_tie(table: pd.DataFrame, metric: str,
               hits: Optional[Dict[int, Any]] = None) -> Tuple[pd.DataFrame, Optional[str]]:
    """Statistical ties go to the cheaper model: among the best row of each family within
    noise of the best row (:func:`_tied`: a paired 95% interval of the difference over the
    validation users that includes 0; full trials only; the popularity baseline is a
    reference, not a candidate), the one of least estimated cost (``cost``, deterministic:
    from the data's size and the parameters) comes first. Within a family the higher score
    stays first."""
    full = table[SHORT].isna() if SHORT in table else pd.Series(True, index=table.index)
    ok = table[full & table[metric].notna() & (table[MODEL] != BASELINE)]
    if ok.empty or ok.index[0] != 0 or not np.isfinite(ok.loc[0, "ci_low"]):
        return table, None
    best = ok.loc[0]
    heads = ok.drop_duplicates(MODEL)  # each family's best row (the table is best first)
    tied = heads[[_tied(best, r, hits or {}) for _, r in heads.iterrows()]]
    if len(tied) < 2:
        return table, None
    pick = tied.sort_values(["cost", metric], ascending=[True, False], kind="stable").index[0]
    others = ", ".join(f"{r[MODEL]} {r[metric]:.4f}" for i, r in tied.iterrows() if i != pick)
    if pick == 0:
        note = (f"tie: {best[MODEL]} ({best[metric]:.4f}) is within noise of {others} (the 95% interval of the "
                f"per-user difference includes 0) and the cheapest of them: kept")
        return table, note
    row = table.loc[pick]
    note = (f"tie: {row[MODEL]} ({row[metric]:.4f}) is within noise of {others} (the 95% interval of the "
            f"per-user difference includes 0) and cheaper (a fit estimated at {row['cost']:.1f} s against {best['cost']:.1f} s for the "
            f"top-scoring {best[MODEL]} trial {int(best['trial'])}, at a fixed reference speed): picked")
    order = [pick] + [i for i in table.index if i != pick]
    return table.loc[order].reset_index(drop=True), note


def _all_whole(column: pd.Series) -> bool:
    """Whether every non-missing value of ``column`` is a whole number (not a bool or a text)."""
    values = column.dropna()
    return pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values) \
        and bool((values == values.round()).all())
