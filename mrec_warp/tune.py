"""Hyper-parameter search for WARP (or WRMF): grid or random trials, run in parallel.

Every trial fits WARP on the same fit/validation split with early stopping (so the number
of epochs is chosen per trial, not searched) and scores precision@k on the validation
users. Trials are independent work units: they run on the chosen backend's workers (each
trial single-threaded, so J workers run J trials at once), and with a work folder each
finished trial is a part file that a rerun skips.

The best trial's parameters, with its early-stopped epoch count as ``epochs``, are what
``mrec-warp train --params best.json`` reads.
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
from .parallel import Backend, backend_for
from .progress import SILENT, Progress

#: The parameters a search may vary, and what each must be.
TUNABLE = {
    "factors": int, "learning_rate": float, "user_reg": float, "item_reg": float, "max_sampled": int,
    "loss": str, "learning_schedule": str, "item_bias": bool,
    "user_max_norm": float, "item_max_norm": float, "kos_k": int, "kos_n": int,
    "alpha": float, "regularization": float, "confidence": str, "cg_steps": int,  # WRMF
}
#: Parameters whose value may also be ``null`` (None): no limit.
NULLABLE = {"user_max_norm", "item_max_norm"}

#: Where ``--random N`` samples when no grid file gives the values.
DEFAULT_SPACE: Dict[str, Any] = {
    "factors": [16, 32, 64, 128],
    "learning_rate": ("log", 0.005, 0.2),
    "user_reg": ("log0", 1e-7, 1e-3),  # 0 a quarter of the time, else log-uniform
    "item_reg": ("log0", 1e-7, 1e-3),
    "max_sampled": [10, 20, 50, 100],
    "user_max_norm": [None, 1.0, 1.25, 1.5, 2.0],
}
#: ``--random N`` for WRMF: around its defaults (64 factors, alpha 1, regularization 40).
WRMF_SPACE: Dict[str, Any] = {
    "factors": [32, 64, 128],
    "alpha": ("log", 0.1, 20.0),
    "regularization": ("log", 1.0, 200.0),
    "confidence": ["linear", "log"],
}


# ---------------------------------------------------------------------------------------------
# the candidates
# ---------------------------------------------------------------------------------------------
def read_grid(path: PathLike) -> Dict[str, List[Any]]:
    """Read a grid file: a JSON object of parameter -> list of values (or one value).

    Example: ``{"factors": [32, 64], "learning_rate": [0.02, 0.05], "max_sampled": 50}``.
    Errors are one line naming the file and what to fix.
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
    return check_grid(grid, source=str(path))


def check_grid(grid: Any, source: Optional[str] = None) -> Dict[str, List[Any]]:
    """Validate a grid (dict of name -> list of values); scalars become one-value lists."""
    if not isinstance(grid, dict) or not grid:
        raise InputError("a grid is a JSON object of parameter -> list of values", path=source,
                         hint='e.g. {"factors": [32, 64], "learning_rate": [0.02, 0.05]}')
    out: Dict[str, List[Any]] = {}
    for name, values in grid.items():
        if name not in TUNABLE:
            raise InputError(f"{name!r} cannot be tuned", path=source,
                             hint=f"tunable: {', '.join(TUNABLE)} (epochs come from early stopping)")
        values = values if isinstance(values, list) else [values]
        if not values:
            raise InputError(f"{name!r} has an empty list of values", path=source)
        kind = TUNABLE[name]
        for v in values:
            if v is None and name in NULLABLE:
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


def random_points(n: int, space: Optional[Dict[str, Any]] = None, seed: int = 42) -> List[Dict[str, Any]]:
    """``n`` random points: lists are sampled uniformly, ``("log", lo, hi)`` log-uniformly,
    ``("log0", lo, hi)`` is 0 a quarter of the time and log-uniform otherwise."""
    rng = np.random.default_rng(seed)
    space = space or DEFAULT_SPACE
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
                point[name] = float(f"{value:.3g}")
            else:
                v = spec[int(rng.integers(len(spec)))]
                point[name] = v.item() if hasattr(v, "item") else v
        points.append(point)
    return points


# ---------------------------------------------------------------------------------------------
# one trial
# ---------------------------------------------------------------------------------------------
def _load_split(path: str):
    from .distributed import _cached

    def load(p):
        with np.load(p, allow_pickle=False) as z:
            shape = tuple(z["shape"])
            mats = [sp.csr_matrix((z[f"{w}_data"] if f"{w}_data" in z.files else np.ones(len(z[f"{w}_indices"]), np.float32),
                                   z[f"{w}_indices"], z[f"{w}_indptr"]), shape=shape) for w in ("fit", "val")]
        return mats[0], mats[1]

    return _cached("split", path, load)


def run_trial(split_src, trial: int, params: Dict[str, Any], base: Dict[str, Any], k: int,
              workdir: Optional[str] = None, model_name: str = "warp", use_values: bool = False) -> Dict[str, Any]:
    """Fit one candidate with early stopping and return its row of the results table.

    ``split_src`` is ``(fit, val)`` CSR matrices (threads) or the ``.npz`` holding them.
    With ``workdir`` the row is also saved as ``trial-NNNN.json``, and an existing one is
    returned without fitting again.
    """
    from .distributed import maybe_inject_fault
    from .models import WARP, WRMF

    part = Path(workdir) / f"trial-{trial:04d}.json" if workdir else None
    if part is not None and part.exists():
        return json.loads(part.read_text())
    if workdir:
        maybe_inject_fault(workdir, trial)
    fit, val = _load_split(split_src) if isinstance(split_src, (str, os.PathLike)) else split_src
    model = {"warp": WARP, "wrmf": WRMF}[model_name](**{**base, **params, "epochs": None, "n_jobs": 1, "eval_k": k})
    t0 = time.perf_counter()
    row: Dict[str, Any] = {"trial": trial, **params}
    try:
        model.fit(fit, validation=val, **({"use_values": use_values} if model_name == "wrmf" else {}))
        row.update({f"precision@{k}": float(model.best_score_), "epochs": int(model.best_epoch_)})
    except InputError as exc:  # a diverging candidate is a result (a bad one), not a failed search
        row.update({f"precision@{k}": float("nan"), "epochs": 0, "error": str(exc)})
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
        One row per trial, best first: the parameters, ``precision@k``, ``epochs`` (chosen
        by early stopping) and ``seconds``.
    metric : str
        The column the table is sorted by.
    base : dict
        Parameters shared by every trial.
    """

    table: pd.DataFrame
    metric: str
    base: Dict[str, Any]

    @property
    def best_params(self) -> Dict[str, Any]:
        """The best trial's parameters, with its epoch count as ``epochs``."""
        row = self.table.iloc[0]
        names = [c for c in self.table.columns if c in TUNABLE]
        params = {n: _cast(n, row[n]) for n in names if not (isinstance(row[n], float) and math.isnan(row[n]))}
        params["epochs"] = int(row["epochs"])
        return params

    def best_json(self) -> Dict[str, Any]:
        """What ``--output`` holds: ``params`` (for ``train --params``) plus the evidence."""
        row = self.table.iloc[0]
        return {"params": self.best_params, "metric": self.metric, "score": _plain(row[self.metric]),
                "trials": len(self.table)}

    def format_table(self, max_rows: Optional[int] = None) -> str:
        table = self.table if max_rows is None else self.table.head(max_rows)
        return table.to_string(index=False, float_format=lambda v: f"{v:.4g}") + "\n"


def _cast(name: str, v: Any) -> Any:
    """A table cell back to the parameter's own type (pandas turns ints to floats beside NaN)."""
    kind = TUNABLE[name]
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
    seed: int = 42,
    backend: Union[str, Backend] = "threads",
    n_jobs: int = 1,
    scheduler: Optional[str] = None,
    workdir: Optional[PathLike] = None,
    keep_parts: bool = False,
    progress: Progress = SILENT,
    model: str = "warp",
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
        WARP parameters shared by every trial (e.g. ``max_epochs``, ``patience``).
    seed : int
        Seed of the split and of every trial's model (trials differ only by parameters).
    backend, n_jobs, scheduler
        Where trials run (:class:`~mrec_warp.parallel.Backend`); each trial is single-threaded.
    workdir : path-like, optional
        Folder for one result file per finished trial; a rerun skips those trials.
    model : {"warp", "wrmf"}
        Which model every trial fits.
    use_values : bool
        WRMF: the training values set the confidence (otherwise every pair weighs ``1 + alpha``).

    Returns
    -------
    TuneResult
    """
    from .data.interactions import Interactions, as_csr, binary_csr
    from .distributed import WorkDir, check_workdir_visible, fingerprint
    from .models.validation import holdout_split

    if not points:
        raise InputError("no candidates to try", hint="give --grid FILE or --random N")
    from .models import WARP, WRMF

    valid = {"warp": WARP, "wrmf": WRMF}[model]._param_names()
    foreign = sorted({name for p in points for name in p} - set(valid))
    if foreign:
        raise InputError(f"{foreign[0]!r} is not a parameter of the {model} model",
                         hint="tune it with the model it belongs to (--model)")
    if isinstance(train, Interactions):
        fit_all = train.matrix
        if isinstance(validation, Interactions):
            validation = validation.reindex(train.user_ids, train.item_ids).matrix
    else:
        fit_all = as_csr(train)
    if model == "wrmf" and use_values:  # WRMF's confidence needs the values: keep them in the fit part
        fit_all = fit_all.copy()
        fit_all.eliminate_zeros()
    else:
        fit_all = binary_csr(fit_all)
    if validation is None:
        fit, val = holdout_split(fit_all, float(validation_fraction), np.random.default_rng(seed))
        val.data[:] = 1.0
    else:
        fit, val = fit_all, as_csr(validation)
        if val.shape != fit.shape:
            raise InputError(f"validation has shape {val.shape}, training {fit.shape}")
    base = {**(base or {}), "random_state": seed}
    metric = f"precision@{k}"
    tmp_dir = None
    if workdir is None:
        tmp_dir = tempfile.mkdtemp(prefix="mrec-warp-tune-")
    job = {"kind": "tune", "version": 1, "data": fingerprint(fit, val), "points": list(points), "base": base, "k": k}
    if model != "warp":
        job.update(model=model, use_values=bool(use_values), values=fingerprint(fit.data))
    wd = WorkDir(workdir or tmp_dir, job)
    names = [f"trial-{i:04d}.json" for i in range(len(points))]
    todo = [i for i, n in enumerate(names) if not wd.done(n)]
    done = len(points) - len(todo)
    # finished trials are read here, never sent to a worker again
    rows = [json.loads(wd.file(n).read_text()) for n in names if wd.done(n)]
    with backend_for(backend, n_jobs, scheduler) as be:
        split_src: Any = (fit, val)
        if not be.is_local_memory and todo:
            split_src = str(wd.file("split.npz").resolve())
            if not wd.done("split.npz"):
                from .data.io import atomic_path

                with atomic_path(split_src) as tmp:
                    np.savez(tmp, shape=np.array(fit.shape, np.int64),
                             fit_indptr=fit.indptr.astype(np.int64), fit_indices=fit.indices.astype(np.int32),
                             val_indptr=val.indptr.astype(np.int64), val_indices=val.indices.astype(np.int32),
                             **({"fit_data": fit.data.astype(np.float32)} if model == "wrmf" else {}))
            check_workdir_visible(be, wd.path, split_src)
        progress.log(f"tune: {len(points)} trials ({done} already done) on {be.describe()}; "
                     f"{fit.nnz:,} fit / {val.nnz:,} validation interactions")
        tasks = [(split_src, i, dict(points[i]), base, k, str(wd.path), model, use_values) for i in todo]
        for row in be.map(run_trial, tasks, ordered=False):
            rows.append(row)
            shown = ", ".join(f"{n}={row[n]}" for n in sorted(points[row["trial"]]))
            progress.log(f"trial {row['trial']}: {metric} {row[metric]:.4f} after {row['epochs']} epochs "
                         f"({row['seconds']:.1f}s)  {shown}")
    table = pd.DataFrame(rows)
    table = table.sort_values([metric, "trial"], ascending=[False, True], na_position="last", kind="stable")
    front = ["trial"] + sorted({n for p in points for n in p}) + [metric, "epochs", "seconds"]
    table = table[[c for c in front if c in table.columns] + [c for c in table.columns if c not in front]]
    if not keep_parts or tmp_dir is not None:
        wd.cleanup(names + ["split.npz"])
    return TuneResult(table=table.reset_index(drop=True), metric=metric, base=base)
