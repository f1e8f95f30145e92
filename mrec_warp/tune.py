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

import itertools
import json
import math
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np
import pandas as pd
import scipy.sparse as sp

from .data.io import PathLike, atomic_write
from .errors import InputError
from .data.npz import NpzArchive, check_csr, write_npz
from .models.families import EPOCH_FAMILIES, FAMILIES, TUNABLE_FAMILIES  # noqa: F401 (TUNABLE_FAMILIES: the CLI's list)
from .context import context_for
from .workers import Workers
from .progress import SILENT, Progress
from .seeds import DEFAULT_SEED

#: WARP's parameters a search may vary, and what each must be (other families: FAMILIES).
TUNABLE = FAMILIES["warp"].tunable
#: Parameters whose value may also be ``null`` (None): no limit.
NULLABLE = FAMILIES["warp"].nullable

#: Where ``--random N`` samples WARP when no grid file gives the values: around the defaults.
DEFAULT_SPACE: Dict[str, Any] = FAMILIES["warp"].space
#: The column holding a trial's model family.
MODEL = "model"


# ---------------------------------------------------------------------------------------------
# the candidates
# ---------------------------------------------------------------------------------------------
def read_grid(path: PathLike, families: Sequence[str] = ("warp",)) -> Dict[str, Dict[str, List[Any]]]:
    """Read a grid file into ``{family: grid}``.

    The file is a JSON object of parameter -> list of values (or one value), e.g.
    ``{"factors": [32, 64], "learning_rate": [0.02, 0.05], "max_sampled": 50}``, for a
    search of one family; or an object of family -> such a grid, e.g.
    ``{"slim": {"l1": [2, 5]}, "ease": {"l2": [100, 400]}}``. Errors are one line naming
    the file and what to fix.
    """
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise InputError("grid file does not exist", path=str(path), hint="check the path") from None
    try:
        grid = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg}", path=str(path), line=exc.lineno,
                         hint='expected e.g. {"factors": [32, 64], "learning_rate": [0.02, 0.05]}') from None
    if isinstance(grid, dict) and grid and all(k in FAMILIES for k in grid):
        for fam in grid:
            if fam not in families:
                raise InputError(f"the grid is for {fam!r}, which is not searched", path=str(path),
                                 hint=f"add it to --models (searching: {', '.join(families)})")
        return {fam: check_grid(g, source=str(path), family=fam) for fam, g in grid.items()}
    if len(families) != 1:
        raise InputError("with several --models, the grid names its family", path=str(path),
                         hint='e.g. {"slim": {"l1": [2, 5]}, "ease": {"l2": [100, 400]}}')
    return {families[0]: check_grid(grid, source=str(path), family=families[0])}


def check_grid(grid: Any, source: Optional[str] = None, family: str = "warp") -> Dict[str, List[Any]]:
    """Validate a grid (dict of name -> list of values); scalars become one-value lists."""
    if not isinstance(grid, dict) or not grid:
        raise InputError("a grid is a JSON object of parameter -> list of values", path=source,
                         hint='e.g. {"factors": [32, 64], "learning_rate": [0.02, 0.05]}')
    tunable, nullable = FAMILIES[family].tunable, FAMILIES[family].nullable
    out: Dict[str, List[Any]] = {}
    for name, values in grid.items():
        if name not in tunable:
            extra = " (epochs come from early stopping)" if family == "warp" else ""
            raise InputError(f"{name!r} cannot be tuned" + ("" if family == "warp" else f" for {family}"),
                             path=source, hint=f"tunable: {', '.join(tunable)}{extra}")
        values = values if isinstance(values, list) else [values]
        if not values:
            raise InputError(f"{name!r} has an empty list of values", path=source)
        kind = tunable[name]
        for v in values:
            if v is None and name in nullable:
                continue
            ok = isinstance(v, bool) if kind is bool else (
                isinstance(v, (int, float)) and not isinstance(v, bool) if kind is not str else isinstance(v, str))
            if not ok or (kind is int and float(v) != int(v)):
                raise InputError(f"{name!r}: {v!r} is not a valid {kind.__name__}", path=source)
        out[name] = [v if kind is bool or v is None else kind(v) for v in values]
    return out


def grid_points(grid: Dict[str, List[Any]]) -> List[Dict[str, Any]]:
    """Every combination of a grid, in a stable order."""
    names = sorted(grid)
    return [dict(zip(names, combo)) for combo in itertools.product(*(grid[n] for n in names))]


def random_points(n: int, space: Optional[Dict[str, Any]] = None, seed: int = DEFAULT_SEED,
                  family: str = "warp") -> List[Dict[str, Any]]:
    """``n`` random points: lists are sampled uniformly, ``("log", lo, hi)`` log-uniformly,
    ``("logint", lo, hi)`` log-uniformly rounded to an int, ``("log0", lo, hi)`` is 0 a
    quarter of the time and log-uniform otherwise. The default space is the family's
    (:data:`~mrec_warp.models.families.FAMILIES`), which contains its defaults."""
    rng = np.random.default_rng(seed)
    space = space or FAMILIES[family].space
    points = []
    for _ in range(int(n)):
        point: Dict[str, Any] = {}
        for name in sorted(space):
            spec = space[name]
            if isinstance(spec, tuple):
                kind, lo, hi = spec
                value = float(math.exp(rng.uniform(math.log(lo), math.log(hi))))
                if kind == "log0" and rng.random() < 0.25:
                    value = 0.0
                point[name] = int(round(value)) if kind == "logint" else float(f"{value:.3g}")
            else:
                v = spec[int(rng.integers(len(spec)))]
                point[name] = v.item() if hasattr(v, "item") else v
        points.append(point)
    return points


def candidates(families: Sequence[str], grids: Optional[Dict[str, Dict[str, List[Any]]]] = None,
               n_random: Optional[int] = None, seed: int = DEFAULT_SEED) -> List[Dict[str, Any]]:
    """The points of a multi-family search, each with its ``model``: per family, its grid's
    points, ``n_random`` random points (from the grid's values when there is a grid, else
    around the defaults), or its built-in grid when neither is given. :func:`tune` adds each
    family's defaults."""
    points: List[Dict[str, Any]] = []
    for fam in families:
        if fam not in TUNABLE_FAMILIES:
            raise InputError(f"cannot tune --models {fam}", hint=f"choose among {', '.join(TUNABLE_FAMILIES)}")
        grid = (grids or {}).get(fam)
        if n_random:
            found = random_points(n_random, grid, seed=seed, family=fam)
        elif grid:
            found = grid_points(grid)
        elif grids:
            found = []  # a grid file that leaves this family out: its defaults only
        else:
            found = grid_points(FAMILIES[fam].grid)
        points.extend({MODEL: fam, **p} for p in found)
    return points


def _with_defaults(points: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """``points`` with each family's defaults first (over the parameters its points vary),
    and without repeats: every search has the not-searching answer as a trial."""
    families = list(dict.fromkeys(p.get(MODEL, "warp") for p in points))
    out: List[Dict[str, Any]] = []
    for fam in families:
        names = sorted({n for p in points if p.get(MODEL, "warp") == fam for n in p if n != MODEL})
        out.append({MODEL: fam, **FAMILIES[fam].defaults(names)})
    seen = {json.dumps(p, sort_keys=True) for p in out}
    for p in points:
        p = {MODEL: p.get(MODEL, "warp"), **{k: v for k, v in p.items() if k != MODEL}}
        key = json.dumps(p, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


# ---------------------------------------------------------------------------------------------
# one trial
# ---------------------------------------------------------------------------------------------
def _load_split(path: str):
    """The fit and validation matrices a search saved in its work folder, checked as every
    work-folder file is (:mod:`mrec_warp.data.npz`), cached per process."""
    from .distributed import WORK_HINT, _cached, _damaged

    def load(p):
        with NpzArchive(p, "a work-folder file", WORK_HINT) as z:
            spec = {"shape": ("iu", (2,)), "fit_indptr": ("iu", (None,)), "fit_indices": ("iu", (None,)),
                    "val_indptr": ("iu", (None,)), "val_indices": ("iu", (None,))}
            if "fit_data" in z:
                spec["fit_data"] = ("f", (None,))
            for key, (kinds, shape) in spec.items():
                z.header(key, kinds, shape)
            a = {key: z.read(key, kinds, shape) for key, (kinds, shape) in spec.items()}
        shape = tuple(int(v) for v in a["shape"])
        mats = []
        try:
            for w in ("fit", "val"):
                indptr = a[f"{w}_indptr"].astype(np.int64, copy=False)
                check_csr(indptr, a[f"{w}_indices"], shape, f"{w} interactions")
                data = a.get("fit_data") if w == "fit" else None
                if data is not None and (len(data) != len(a["fit_indices"]) or not (data >= 0).all()):
                    raise ValueError("fit values do not match the fit interactions or are negative")
                mats.append(sp.csr_matrix((np.ones(len(a[f"{w}_indices"]), np.float32) if data is None
                                           else data.astype(np.float32, copy=False),
                                           a[f"{w}_indices"].astype(np.int32, copy=False), indptr), shape=shape))
        except ValueError as exc:
            raise _damaged(p, str(exc)) from None
        return mats[0], mats[1]

    return _cached("split", path, load)


def run_trial(split_src, trial: int, params: Dict[str, Any], base: Dict[str, Any], k: int,
              workdir: Optional[str] = None, use_values: bool = False) -> Dict[str, Any]:
    """Fit one candidate with early stopping and return its row of the results table.

    ``split_src`` is ``(fit, val)`` CSR matrices (threads) or the ``.npz`` holding them;
    with ``use_values`` the fit matrix holds the training values, which WRMF trials turn
    into confidences (the other families binarise it).
    With ``workdir`` the row is also saved as ``trial-NNNN.json``, and an existing one is
    returned without fitting again.
    """
    from .distributed import maybe_inject_fault
    from .data.interactions import binary_csr
    from .models import WARP, WRMF
    from .models.validation import precision_at_k

    part = Path(workdir) / f"trial-{trial:04d}.json" if workdir else None
    if part is not None and part.exists():
        return json.loads(part.read_text())
    if workdir:
        maybe_inject_fault(workdir, trial)
    fit, val = _load_split(split_src) if isinstance(split_src, (str, os.PathLike)) else split_src
    family = params.get(MODEL, "warp")
    values = {n: v for n, v in params.items() if n != MODEL}
    t0 = time.perf_counter()
    row: Dict[str, Any] = {"trial": trial, MODEL: family, **values}
    try:
        if family == "warp":
            model = WARP(**{**base, **values, "epochs": None, "n_jobs": 1, "eval_k": k})
            model.fit(binary_csr(fit) if use_values else fit, validation=val)
            score = float(model.best_score_)
            if np.count_nonzero(np.diff(val.indptr)) > model.validation_users:
                # early stopping scored a sample of users; families compare on all of them
                score = float(precision_at_k(model.score_users, model.n_items, fit, val, k))
            row.update({f"precision@{k}": score, "epochs": int(model.best_epoch_)})
        elif family == "wrmf":  # early-stopped too, with its own patience (ALS converges in few iterations)
            model = WRMF(**{"random_state": base.get("random_state"), **values, "epochs": None, "n_jobs": 1,
                            "eval_k": k, "validation_users": 10**9})  # scored on every validation user
            model.fit(fit, validation=val, use_values=use_values)
            row.update({f"precision@{k}": float(model.best_score_), "epochs": int(model.best_epoch_)})
        else:  # no epochs: fit once, score the validation users
            other = FAMILIES[family].cls(**values)
            other.fit(binary_csr(fit) if use_values else fit)  # values are WRMF's confidences only
            row[f"precision@{k}"] = float(precision_at_k(other.score_users, other.n_items, fit, val, k))
    except InputError as exc:  # a diverging candidate is a result (a bad one), not a failed search
        row.update({f"precision@{k}": float("nan"), "error": str(exc)})
        if family in EPOCH_FAMILIES:
            row["epochs"] = 0
    row["seconds"] = round(time.perf_counter() - t0, 3)
    if part is not None:
        with atomic_write(part) as fh:
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
            if isinstance(row[n], float) and math.isnan(row[n]):
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
        return table.drop(columns=["defaults"]).to_string(index=False, float_format=lambda v: f"{v:.4g}",
                                                          na_rep="") + "\n"

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
    return kind(v) if kind in (int, float) else v


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
    backend: Union[str, Workers] = "threads",
    n_jobs: int = 1,
    scheduler: Optional[str] = None,
    workdir: Optional[PathLike] = None,
    keep_parts: bool = False,
    progress: Progress = SILENT,
    with_defaults: bool = True,
    use_values: bool = False,
) -> TuneResult:
    """Fit one WARP per point (in parallel) and rank them by validation precision@k.

    Parameters
    ----------
    train : Interactions or sparse matrix
        Training positives.
    points : sequence of dict
        Candidates (see :func:`grid_points`, :func:`random_points`).
    validation : Interactions or sparse matrix, optional
        Held-out positives; default: ``validation_fraction`` of each user's items, drawn
        once with ``seed`` so every trial sees the same split.
    k : int
        Cut-off of the validation precision (also the early-stopping metric).
    base : dict, optional
        WARP parameters shared by every WARP trial (e.g. ``max_epochs``, ``patience``).
    with_defaults : bool
        Try each family's defaults as well (first), so the best can never score below them.
    use_values : bool
        WRMF trials weigh the training values (``train``'s matrix data) as confidences;
        otherwise, and for every other family, each pair counts the same.
    seed : int
        Seed of the split and of every trial's model (trials differ only by parameters).
    backend, n_jobs, scheduler
        Where trials run (:class:`~mrec_warp.parallel.Backend`); each trial is single-threaded.
    workdir : path-like, optional
        Folder for one result file per finished trial; a rerun skips those trials.

    Returns
    -------
    TuneResult
    """
    from .data.interactions import Interactions, as_csr, binary_csr
    from .distributed import WorkDir, check_workdir_visible, fingerprint
    from .models.validation import holdout_split

    if not points:
        raise InputError("no candidates to try", hint="give --grid FILE or --random N")
    for p in points:
        family = p.get(MODEL, "warp")
        if family not in FAMILIES:
            raise InputError(f"unknown model family {family!r}", hint=f"choose among {', '.join(TUNABLE_FAMILIES)}")
        foreign = sorted(set(p) - {MODEL} - set(FAMILIES[family].cls._param_names()))
        if foreign:
            raise InputError(f"{foreign[0]!r} is not a parameter of the {family} model",
                             hint="tune it with the family it belongs to (--models)")
    points = _with_defaults(points) if with_defaults else [{MODEL: p.get(MODEL, "warp"), **p} for p in points]
    default_trials = set(range(len(dict.fromkeys(p[MODEL] for p in points)))) if with_defaults else set()
    if isinstance(train, Interactions):
        fit_all = train.matrix
        if isinstance(validation, Interactions):
            validation = validation.reindex(train.user_ids, train.item_ids).matrix
    else:
        fit_all = as_csr(train)
    use_values = bool(use_values) and any(p.get(MODEL, "warp") == "wrmf" for p in points)
    if use_values:  # WRMF's confidence needs the values: keep them in the fit part
        fit_all = as_csr(fit_all).copy()
        fit_all.eliminate_zeros()
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
    val = binary_csr(val)
    base = {**(base or {}), "random_state": seed}
    metric = f"precision@{k}"
    tmp_dir = None
    if workdir is None:
        tmp_dir = tempfile.mkdtemp(prefix="mrec-warp-tune-")
    job = {"kind": "tune", "version": 1, "data": fingerprint(fit, val), "points": list(points), "base": base, "k": k}
    if use_values:
        job["values"] = fingerprint(fit.data)
    wd = WorkDir(workdir or tmp_dir, job)
    names = [f"trial-{i:04d}.json" for i in range(len(points))]
    todo = [i for i, n in enumerate(names) if not wd.done(n)]
    done = len(points) - len(todo)
    # finished trials are read here, never sent to a worker again
    rows = [json.loads(wd.file(n).read_text()) for n in names if wd.done(n)]
    with context_for(backend, n_jobs, scheduler) as be:
        split_src: Any = (fit, val)
        if not be.is_local_memory and todo:
            split_src = str(wd.file("split.npz").resolve())
            if not wd.done("split.npz"):
                from .data.io import atomic_path

                with atomic_path(split_src) as tmp:
                    write_npz(tmp, dict(shape=np.array(fit.shape, np.int64),
                                        fit_indptr=fit.indptr.astype(np.int64), fit_indices=fit.indices.astype(np.int32),
                                        val_indptr=val.indptr.astype(np.int64), val_indices=val.indices.astype(np.int32),
                                        **({"fit_data": fit.data.astype(np.float32)} if use_values else {})))
            check_workdir_visible(be, wd.path, split_src)
        progress.log(f"tune: {len(points)} trials ({done} already done) on {be.describe()}; "
                     f"{fit.nnz:,} fit / {val.nnz:,} validation interactions")
        tasks = [(split_src, i, dict(points[i]), base, k, str(wd.path), use_values) for i in todo]
        for row in be.map(run_trial, tasks, ordered=False):
            rows.append(row)
            shown = ", ".join(f"{n}={row[n]}" for n in sorted(points[row["trial"]]) if n != MODEL)
            after = f" after {row['epochs']} epochs" if "epochs" in row else ""
            progress.log(f"trial {row['trial']} ({row[MODEL]}): {metric} {row[metric]:.4f}{after} "
                         f"({row['seconds']:.1f}s)  {shown}")
    table = pd.DataFrame(rows)
    table["defaults"] = table["trial"].isin(default_trials)
    # best first; on a tie the defaults (the lowest trial numbers) win
    table = table.sort_values([metric, "trial"], ascending=[False, True], na_position="last", kind="stable")
    if default_trials:
        ref = table[table["defaults"]].set_index(MODEL)[metric]
        table["vs_defaults"] = table[metric] / table[MODEL].map(ref).astype(float) - 1
    front = ["trial", MODEL] + sorted({n for p in points for n in p if n != MODEL}) + [metric, "vs_defaults",
                                                                                       "epochs", "seconds"]
    table = table[[c for c in front if c in table.columns] + [c for c in table.columns if c not in front]]
    if not keep_parts or tmp_dir is not None:
        wd.cleanup(names + ["split.npz"])
    return TuneResult(table=table.reset_index(drop=True), metric=metric, base=base)
