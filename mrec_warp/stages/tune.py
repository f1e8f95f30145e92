"""Hyper-parameter search over model families: grid or random trials, run in parallel.

Every trial fits one candidate (a model family and its parameters) on the same
fit/validation split and scores precision@k on the validation users, training items
excluded. WARP trials early-stop on that split (so the number of epochs is chosen per
trial, not searched); the item-item models (item-kNN, SLIM, EASE) have no epochs. Each
family's defaults are always a trial, so a search never hands back something that scores
worse on validation than not searching. Trials are independent work units: they run on
the chosen backend's workers (each trial single-threaded, so J workers run J trials at
once), and with a work folder each finished trial is a part file that a rerun skips.

The best trial's family and parameters (a WARP one with its early-stopped epoch count as
``epochs``) are what ``mrec-warp train --params best.json`` reads.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Union

import numpy as np
import pandas as pd

from ..context import ExecutionContext, local_context
from ..data.interactions import Interactions, as_csr, binary_csr, check_values
from ..files import atomic_write
from ..errors import InputError
from ..jobs import (INPUTS_FILE, Job, cached, fingerprint, job_manifest, maybe_inject_fault, read_inputs, unit_of_job,
                    write_inputs)
from ..models import WARP, WRMF
from ..models.families import EPOCH_FAMILIES, FAMILIES, TUNABLE_FAMILIES
from ..models.params import check_number, integer_params
from ..models.validation import holdout_split, precision_at_k
from ..progress import SILENT, Progress
from ..seeds import DEFAULT_SEED
from ..data.rows import DEFAULT_EMPTY_IDS, DEFAULT_NEGATIVES
from ._inputs import RowOptions, load_interactions, load_validation
from .candidates import MODEL, with_defaults as defaults_first


# ---------------------------------------------------------------------------------------------
# one trial
# ---------------------------------------------------------------------------------------------
def _load_split(path: str, values: bool = False):
    """The fit and validation matrices a search staged in its work folder (the fit one with
    its values when ``values``), checked as every staged input is, cached per process."""
    def load(p):
        z = read_inputs(p, matrices=["fit", "val"], values=["fit"] if values else [])
        return z["fit"], z["val"]

    return cached(f"split-{values:d}", path, load)


def _trial_model(family: str, base: Dict[str, Any], values: Dict[str, Any], k: int):
    """The unfitted model of one trial: WARP with ``base`` under its values, WRMF with the
    seed only (its own patience), the other families with their values alone."""
    if family == "warp":
        return WARP(**{**base, **values, "epochs": None, "n_jobs": 1, "eval_k": k})
    if family == "wrmf":  # scored on every validation user
        return WRMF(**{"random_state": base.get("random_state"), **values, "epochs": None, "n_jobs": 1,
                       "eval_k": k, "validation_users": 10**9})
    return FAMILIES[family].cls(**values)


def run_trial(split_src, trial: int, params: Dict[str, Any], base: Dict[str, Any], k: int,
              workdir: Optional[str] = None, use_values: bool = False) -> Dict[str, Any]:
    """Fit one candidate with early stopping and return its row of the results table.

    ``split_src`` is ``(fit, val)`` CSR matrices (threads) or the ``.npz`` holding them;
    with ``use_values`` the fit matrix holds the training values, which WRMF trials turn
    into confidences (the other families binarise it).
    With ``workdir`` the row is also saved as ``trial-NNNN.json``, and an existing one is
    returned without fitting again.
    """
    part = Path(workdir) / f"trial-{trial:04d}.json" if workdir else None
    if part is not None and part.exists():
        return json.loads(part.read_text())
    if workdir:
        maybe_inject_fault(workdir, trial)
        started = job_manifest(workdir)  # the part is kept only if the folder still holds this job
    fit, val = _load_split(split_src, use_values) if isinstance(split_src, (str, os.PathLike)) else split_src
    family = params.get(MODEL, "warp")
    values = {n: v for n, v in params.items() if n != MODEL}
    t0 = time.perf_counter()
    row: Dict[str, Any] = {"trial": trial, MODEL: family, **values}
    try:
        if family == "warp":
            model = _trial_model(family, base, values, k)
            model.fit(binary_csr(fit) if use_values else fit, validation=val)
            score = float(model.best_score_)
            if np.count_nonzero(np.diff(val.indptr)) > model.validation_users:
                # early stopping scored a sample of users; families compare on all of them
                score = float(precision_at_k(model.score_users, model.n_items, fit, val, k))
            row.update({f"precision@{k}": score, "epochs": int(model.best_epoch_)})
        elif family == "wrmf":  # early-stopped too, with its own patience (ALS converges in few iterations)
            model = _trial_model(family, base, values, k)
            model.fit(fit, validation=val, use_values=use_values)
            row.update({f"precision@{k}": float(model.best_score_), "epochs": int(model.best_epoch_)})
        else:  # no epochs: fit once, score the validation users
            other = _trial_model(family, base, values, k)
            other.fit(binary_csr(fit) if use_values else fit)  # values are WRMF's confidences only
            row[f"precision@{k}"] = float(precision_at_k(other.score_users, other.n_items, fit, val, k))
    except InputError as exc:  # a diverging candidate is a result (a bad one), not a failed search
        row.update({f"precision@{k}": float("nan"), "error": str(exc)})
        if family in EPOCH_FAMILIES:
            row["epochs"] = 0
    row["seconds"] = round(time.perf_counter() - t0, 3)
    if part is not None:
        with unit_of_job(workdir, started), atomic_write(part) as fh:
            json.dump(row, fh)
    return row


# ---------------------------------------------------------------------------------------------
# the search
# ---------------------------------------------------------------------------------------------
@dataclass
class TuneResult:
    """A finished search.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per trial, best first: ``model`` (the family), its parameters,
        ``precision@k``, ``vs_defaults`` (the score relative to the same family's defaults,
        e.g. 0.03 = 3% higher), ``epochs`` (WARP: chosen by early stopping) and ``seconds``.
    metric : str
        The column the table is sorted by.
    base : dict
        Parameters shared by every WARP trial.
    """

    table: pd.DataFrame
    metric: str
    base: Dict[str, Any]

    @property
    def best_model(self) -> str:
        """The family of the best trial."""
        return str(self.table.iloc[0].get(MODEL, "warp"))

    @property
    def best_params(self) -> Dict[str, Any]:
        """The best trial's parameters (an early-stopped trial's epoch count as ``epochs``)."""
        row = self.table.iloc[0]
        fam = FAMILIES[self.best_model]
        params = {}
        for n in (c for c in self.table.columns if c in fam.tunable):
            if pd.isna(row[n]):
                if n in fam.nullable:  # a family's trials share their names: NaN was null
                    params[n] = None
                continue
            params[n] = _cast(fam.tunable[n], row[n])
        if self.best_model in EPOCH_FAMILIES:
            params["epochs"] = int(row["epochs"])
        return params

    def defaults_score(self, family: Optional[str] = None) -> float:
        """Validation score of a family's defaults (default: the best trial's family)."""
        family = family or self.best_model
        rows = self.table[(self.table[MODEL] == family) & self.table["defaults"]]
        return float(rows[self.metric].iloc[0]) if len(rows) else float("nan")

    def best_json(self) -> Dict[str, Any]:
        """What ``--output`` holds: ``model`` and ``params`` (for ``train --params``) plus the evidence."""
        row = self.table.iloc[0]
        return {"model": self.best_model, "params": self.best_params, "metric": self.metric,
                "score": _plain(row[self.metric]), "defaults_score": self.defaults_score(),
                "trials": len(self.table)}

    def format_table(self, max_rows: Optional[int] = None) -> str:
        table = self.table if max_rows is None else self.table.head(max_rows)
        shown = table.drop(columns=["defaults"])
        for c in shown.columns:  # whole-number columns: a blank where a family has no such count
            if isinstance(shown[c].dtype, pd.Int64Dtype):
                shown[c] = shown[c].map(lambda v: "" if pd.isna(v) else str(v))
        return shown.to_string(index=False, float_format=lambda v: f"{v:.4g}", na_rep="") + "\n"

    def summary(self) -> str:
        """One line: the best family and how far it is above its defaults (and the others')."""
        best = float(self.table.iloc[0][self.metric])
        parts = []
        for fam in dict.fromkeys(self.table[MODEL]):
            ref = self.defaults_score(fam)
            if ref == ref and ref > 0:
                parts.append(f"{(best / ref - 1) * 100:+.1f}% vs {fam} defaults ({ref:.4f})")
        return f"best: {self.best_model}, {self.metric} {best:.4f}; " + ", ".join(parts)


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

    Returns
    -------
    TuneResult
    """
    if not points:
        raise InputError("no candidates to try", hint="give a grid or a number of random points")
    # by its own name, before the trials' models take it as their internal `eval_k`
    check_number(k, "k", integer=True, at_least=1)
    for p in points:
        family = p.get(MODEL, "warp")
        if family not in FAMILIES:
            raise InputError(f"unknown model family {family!r}", hint=f"choose among {', '.join(TUNABLE_FAMILIES)}")
        foreign = sorted(set(p) - {MODEL} - set(FAMILIES[family].cls._param_names()))
        if foreign:
            raise InputError(f"{foreign[0]!r} is not a parameter of the {family} model",
                             hint="tune it with the family it belongs to")
    rows = RowOptions(sep=sep, header=header, columns=columns, duplicates=duplicates, negatives=negatives,
                      min_value=min_value, empty_ids=empty_ids)
    base = {**(base or {}), "random_state": seed}
    for p in points:  # a value no model takes is the search's error, found before the data is read
        model = _trial_model(p.get(MODEL, "warp"), base, {n: v for n, v in p.items() if n != MODEL}, k)
        if hasattr(model, "_check_params"):  # (popularity has no parameters to check)
            model._check_params()
    wrmf_trials = any(p.get(MODEL, "warp") == "wrmf" for p in points)
    if isinstance(train, (str, os.PathLike)):
        train = load_interactions(train, format, values=wrmf_trials, required=False, rows=rows)
    if isinstance(validation, (str, os.PathLike)):
        if not isinstance(train, Interactions):
            raise InputError("a validation file needs the training data with its ids (an Interactions or a file)",
                             path=validation, hint="pass the validation set as a matrix of the same shape")
        validation = load_validation(validation, train, rows)
    if use_values is None:
        use_values = bool(getattr(train, "has_values", False))
    points = defaults_first(points) if with_defaults else [{MODEL: p.get(MODEL, "warp"), **p} for p in points]
    default_trials = set(range(len(dict.fromkeys(p[MODEL] for p in points)))) if with_defaults else set()
    fit, val, use_values = _split(train, validation, validation_fraction, seed, use_values and wrmf_trials)
    metric = f"precision@{k}"
    description = {"kind": "tune", "version": 1, "data": fingerprint(fit, val), "points": list(points), "base": base,
                   "k": k}
    if use_values:
        description["values"] = fingerprint(fit.data)
    context = context if context is not None else local_context()
    with context:
        job = Job(context, description, [f"trial-{i:04d}.json" for i in range(len(points))],
                  folder=context.workdir, progress=progress)
        # finished trials are read here, never sent to a worker again
        rows = [json.loads(job.part(i).read_text()) for i in range(len(points)) if i not in job.todo]
        split_src: Any = (fit, val)
        if job.off_process:
            split_src = job.stage(INPUTS_FILE, lambda p: write_inputs(p, {"fit": fit, "val": val},
                                                                      values=["fit"] if use_values else []))
        progress.log(f"tune: {len(points)} trials ({job.skipped} already done) on {context.describe()}; "
                     f"{fit.nnz:,} fit / {val.nnz:,} validation interactions")
        tasks = [(split_src, i, dict(points[i]), base, k, str(job.path), use_values) for i in job.todo]
        for row in job.run(run_trial, tasks, desc="trials", unit="trial"):
            rows.append(row)
            shown = ", ".join(f"{n}={row[n]}" for n in sorted(points[row["trial"]]) if n != MODEL)
            after = f" after {row['epochs']} epochs" if "epochs" in row else ""
            progress.log(f"trial {row['trial']} ({row[MODEL]}): {metric} {row[metric]:.4f}{after} "
                         f"({row['seconds']:.1f}s)  {shown}")
        job.finish(staged=[INPUTS_FILE])
    return TuneResult(table=_results_table(rows, points, default_trials, metric), metric=metric, base=base)


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
        fit, val = holdout_split(fit_all, float(validation_fraction), np.random.default_rng(seed))
    else:
        fit, val = fit_all, as_csr(validation)
        if val.shape != fit.shape:
            raise InputError(f"validation has shape {val.shape}, training {fit.shape}")
    # validation is relevance, never a weight: with the values kept for WRMF, a held-out
    # play count of 40 would otherwise count as 40 hits
    return fit, binary_csr(val), use_values


def _results_table(rows, points, default_trials, metric: str) -> pd.DataFrame:
    """One row per trial, best first (on a tie the defaults, the lowest trial numbers, win)."""
    table = pd.DataFrame(rows)
    table["defaults"] = table["trial"].isin(default_trials)
    table = table.sort_values([metric, "trial"], ascending=[False, True], na_position="last", kind="stable")
    if default_trials:
        ref = table[table["defaults"]].set_index(MODEL)[metric]
        table["vs_defaults"] = table[metric] / table[MODEL].map(ref).astype(float) - 1
    front = ["trial", MODEL] + sorted({n for p in points for n in p if n != MODEL}) + [metric, "vs_defaults",
                                                                                       "epochs", "seconds"]
    table = table[[c for c in front if c in table.columns] + [c for c in table.columns if c not in front]]
    # counts stay whole numbers beside the families that lack them (pandas makes 6 a 6.0 next to NaN)
    counts = {"trial", "epochs"}.union(*(integer_params(fam.cls) for fam in FAMILIES.values()))
    for c in table.columns:
        if c in counts and _all_whole(table[c]):
            table[c] = table[c].astype("Int64")
    return table.reset_index(drop=True)


def _all_whole(column: pd.Series) -> bool:
    """Whether every non-missing value of ``column`` is a whole number (not a bool or a text)."""
    values = column.dropna()
    return pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values) \
        and bool((values == values.round()).all())
