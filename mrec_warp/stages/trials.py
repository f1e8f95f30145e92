"""One trial of a search: a candidate built and fitted by its family's hooks, then scored.

Every trial fits one candidate (a model family and its parameters) on the same
fit/validation split and scores precision@k on the validation users, training items
excluded. How a trial is built and fitted is the family's
(:meth:`~mrec_warp.models.tuning.TuneHooks.trial_params` and
:meth:`~mrec_warp.models.tuning.TuneHooks.fit_trial`): an ``early_stopping`` family's
trial early-stops on the split (its epoch count is chosen per trial, not searched), a
family whose fit takes ``use_values`` weighs the training values, the others fit once on
the pairs. Trials are independent work units; with a work folder each finished trial is
a part file that a rerun skips.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Dict, Optional, Tuple, Type

import numpy as np
import pandas as pd
import scipy.sparse as sp

from .. import strict_json
from ..errors import InputError
from ..files import PathLike, atomic_write
from ..jobs import cached, job_manifest, read_inputs, unit_of_job
from ..models.base import Recommender
from ..models.families import DEFAULT_FAMILY, baseline_family, model_classes
from ..models.selection import AUTO, chosen_values, describe
from ..progress import Progress, plural
from ..topk import iter_top_k
from .candidates import MODEL

#: The column of a short trial's epoch cap (a time budget's early rungs; empty for full trials).
SHORT = "epochs_cap"
#: The column of what a trial's fit chose on its hold-out (every parameter it selected,
#: ``factors=64 alpha=3 regularization=40``; empty when it chose none): a parameter of the
#: point left at ``auto`` shows the chosen value in its own column.
CHOSEN = "chosen"
#: z of a two-sided 95% normal interval.
Z95 = 1.959964


def family_class(family: str) -> Type[Recommender]:
    """The class of a registered family."""
    return model_classes()[family]


def point_values(point: Dict[str, Any]) -> Dict[str, Any]:
    """A point's parameters (without its ``model``)."""
    return {n: v for n, v in point.items() if n != MODEL}


def trial_model(family: str, base: Dict[str, Any], values: Dict[str, Any], k: int,
                short: Optional[int] = None) -> Recommender:
    """The unfitted model of one trial, as its family builds it
    (:meth:`~mrec_warp.models.tuning.TuneHooks.trial_params`). ``short``: a short trial
    of an early-stopping family (at most that many epochs, early stopping on a sample of
    the validation users)."""
    cls = family_class(family)
    return cls(**cls.trial_params(values, base, k, short if cls.early_stopping else None))


def load_split(path: str, values: bool = False):
    """The fit and validation matrices a search staged in its work folder (the fit one with
    its values when ``values``), checked as every staged input is, cached per process."""
    def load(p):
        z = read_inputs(p, matrices=["fit", "val"], values=["fit"] if values else [])
        return z["fit"], z["val"]

    return cached(f"split-{values:d}", path, load)


def per_user_precision(score_fn, n_items: int, exclude: sp.csr_matrix, truth: sp.csr_matrix,
                       k: int) -> np.ndarray:
    """Precision@k of each user with a ``truth`` item (as :func:`~mrec_warp.models.early_stopping.precision_at_k` averages it)."""
    users = np.flatnonzero(np.diff(truth.indptr) > 0)
    out = np.zeros(len(users))
    pos = 0
    for block_users, items, _ in iter_top_k(score_fn, n_items, users, k, exclude=exclude):
        sub = truth[block_users]
        rows = np.repeat(np.arange(len(block_users)), k)
        flat = items.ravel()
        valid = flat >= 0
        hit = np.zeros(len(flat), dtype=bool)
        hit[valid] = np.asarray(sub[rows[valid], flat[valid]]).ravel() != 0
        out[pos:pos + len(block_users)] = hit.reshape(len(block_users), k).sum(axis=1) / k
        pos += len(block_users)
    return out


#: A full trial's row key holding its per-user hit counts (not a table column): every full
#: trial scores the same validation users in the same order, so two trials compare user by user.
HITS = "_hits"


def paired_interval(hits_a, hits_b) -> Tuple[float, float]:
    """95% interval of the mean per-user difference of hits ``a - b`` (precision@k times k)
    of two trials scored on the same validation users (normal approximation); NaNs when
    they were not. Whether it holds 0 does not depend on k."""
    a, b = np.asarray(hits_a, dtype=np.float64), np.asarray(hits_b, dtype=np.float64)
    if a.shape != b.shape or len(a) < 2:
        return float("nan"), float("nan")
    diff = a - b
    mean, half = float(diff.mean()), Z95 * float(np.std(diff, ddof=1)) / np.sqrt(len(diff))
    return mean - half, mean + half


def interval(score: float, per_user: np.ndarray) -> Tuple[float, float]:
    """95% interval of a mean over users: ``score +- 1.96 sd / sqrt(n)`` (normal approximation
    over the per-user precisions; with a thousand users and more the mean is close to normal)."""
    n = len(per_user)
    if n < 2 or score != score:
        return float("nan"), float("nan")
    half = Z95 * float(np.std(per_user, ddof=1)) / np.sqrt(n)
    return score - half, score + half


def run_trial(split_src, trial: int, params: Dict[str, Any], base: Dict[str, Any], k: int,
              workdir: Optional[str] = None, use_values: bool = False, short: Optional[int] = None) -> Dict[str, Any]:
    """Fit one candidate and return its row of the results table.

    ``short``: a short trial (at most that many epochs) of an early-stopping family.
    A parameter of the point left at ``auto`` is the value the fit chose in the row (and
    :data:`CHOSEN` lists every value chosen on the hold-out).

    ``split_src`` is ``(fit, val)`` CSR matrices (threads) or the ``.npz`` holding them;
    with ``use_values`` the fit matrix holds the training values, which the families that
    weigh them (their fit takes ``use_values``) turn into confidences (the others binarise it).
    With ``workdir`` the row is also saved as ``trial-NNNN.json``, and an existing one is
    returned without fitting again.
    """
    part = Path(workdir) / f"trial-{trial:04d}.json" if workdir else None
    if part is not None and part.exists():
        return read_trial_row(part)
    if workdir:
        started = job_manifest(workdir)  # the part is kept only if the folder still holds this job
    fit, val = load_split(split_src, use_values) if isinstance(split_src, (str, os.PathLike)) else split_src
    family = params.get(MODEL, DEFAULT_FAMILY)
    epochs = family_class(family).early_stopping
    values = point_values(params)
    t0 = time.perf_counter()
    row: Dict[str, Any] = {"trial": trial, MODEL: family, **values}
    if short is not None:
        row[SHORT] = int(short)
    try:
        model = trial_model(family, base, values, k, short)
        model.fit_trial(fit, val, use_values)
        chosen = {n: _plain(v) for n, v in chosen_values(model).items()}
        if chosen:
            row.update({n: chosen[n] for n, v in values.items() if v == AUTO and n in chosen})
            row[CHOSEN] = describe(chosen)
        per_user = per_user_precision(model.score_users, model.n_items, fit, val, k)
        score = float(per_user.mean()) if len(per_user) else float("nan")
        if epochs:
            if len(per_user) <= getattr(model, "validation_users"):
                score = float(getattr(model, "best_score_"))  # early stopping scored every user: its best epoch's
            # else it scored a sample of users; families compare on all of them
            row["epochs"] = int(getattr(model, "best_epoch_"))
        row[f"precision@{k}"] = score
        row["ci_low"], row["ci_high"] = interval(score, per_user)
        if short is None:  # each validation user's hits, in a fixed user order: paired comparisons
            row[HITS] = np.rint(per_user * k).astype(int).tolist()
    except InputError as exc:  # a diverging candidate is a result (a bad one), not a failed search
        row.update({f"precision@{k}": float("nan"), "error": str(exc)})
        if epochs:
            row["epochs"] = 0
    row["seconds"] = round(time.perf_counter() - t0, 3)
    if part is not None:
        with unit_of_job(workdir, started), atomic_write(part) as fh:
            strict_json.dump(row, fh)
    return row


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def chosen_names(row: Any) -> Tuple[str, ...]:
    """The parameters a trial's row says its fit chose on the hold-out (its :data:`CHOSEN`)."""
    text = row.get(CHOSEN) if hasattr(row, "get") else None
    if not isinstance(text, str):
        return ()
    return tuple(part.split("=", 1)[0] for part in text.split() if "=" in part)


def read_trial_row(path: PathLike) -> Dict[str, Any]:
    """A finished trial's row as :func:`run_trial` returned it: its scores that could not be
    computed (a diverged fit) are written ``null``, strict JSON, and read back as NaN."""
    row = json.loads(Path(path).read_text())
    for key, value in row.items():
        if value is None and (key.startswith("precision@") or key in ("ci_low", "ci_high")):
            row[key] = float("nan")
    return row


def check_pick(table: pd.DataFrame, metric: str) -> None:
    """Refuse a search without a pick: the top row must be a full trial (not a time budget's
    short one), not the baseline, with a score. Otherwise every trial failed, or the budget
    ended before a full one finished -- a best.json of the baseline or of a failed trial
    would be a plausible-looking wrong answer."""
    top, baseline = table.iloc[0], baseline_family()
    short = SHORT in table.columns and pd.notna(top.get(SHORT))
    if top[MODEL] != baseline and not short and top[metric] == top[metric]:
        return
    searched = table[table[MODEL] != baseline]
    failed = searched[searched[metric].isna()]
    if len(searched) and len(failed) == len(searched):
        first = failed.iloc[0]
        raise InputError(f"every trial failed ({len(failed)}); trial {int(first['trial'])} ({first[MODEL]}): "
                         f"{first.get('error', 'no score')}", hint="change the searched ranges or the families")
    raise InputError("the time budget ended before any full trial finished (only short trials or the baseline did)",
                     hint="give a longer `time_budget`, or fewer `models`")


def log_trial(progress: Progress, row: Dict[str, Any], point: Dict[str, Any], metric: str,
               estimate: Optional[float] = None) -> None:
    """One line per finished trial, shown even when standard error is a pipe (a search runs
    for minutes: a silent one looks hung)."""
    shown = ", ".join(f"{n}={row[n]}" for n in sorted(point) if n != MODEL)
    after = f" after {plural(row['epochs'], 'epoch')}" if "epochs" in row else ""
    if row.get(SHORT) is not None:
        after += f" (short trial: at most {row[SHORT]})"
    ci = f" [{row['ci_low']:.4f}, {row['ci_high']:.4f}]" if row.get("ci_low") == row.get("ci_low") \
        and "ci_low" in row else ""
    took = f"{row['seconds']:.1f}s" + ("" if estimate is None else f", estimated {estimate:.1f}s")
    chose = f" (chosen on the hold-out: {row[CHOSEN]})" if row.get(CHOSEN) else ""
    progress.note(f"trial {row['trial']} ({row[MODEL]}): {metric} {row[metric]:.4f}{ci}{after} ({took})  {shown}{chose}")
