"""Statistics of evaluations: means with 95% intervals, paired differences, across splits.

* One split: a mean over users comes with a normal-approximation 95% confidence interval
  (:func:`summarize`); two recommenders on the same split are compared by the per-user
  paired difference (:func:`paired_difference`), which removes the between-user variance.
* Several splits: one number per split, reported as mean +- standard error
  (:func:`across_splits`).
"""
from __future__ import annotations

from typing import Dict, Sequence, Union

import numpy as np
import pandas as pd

from .result import Evaluation

#: z value of a two-sided 95% normal interval.
Z95 = 1.96
#: Columns of a summary row (see :func:`summarize`).
SUMMARY_COLUMNS = ("mean", "sd", "n", "ci95", "low", "high")


def summarize(values: Union[np.ndarray, pd.Series]) -> Dict[str, float]:
    """Mean and normal-approximation 95% confidence interval of per-user values.

    ``ci95 = 1.96 * sd / sqrt(n)`` with the sample standard deviation (ddof=1); the
    interval is ``mean +- ci95``. With fewer than two values sd and ci95 are NaN. NaN values
    (a user a metric is undefined for, such as novelty without recommendations) are left out.
    """
    v = np.asarray(values, dtype=np.float64)
    v = v[~np.isnan(v)]
    n = int(v.size)
    mean = float(v.mean()) if n else float("nan")
    sd = float(v.std(ddof=1)) if n > 1 else float("nan")
    half = Z95 * sd / np.sqrt(n) if n > 1 else float("nan")
    return {"mean": mean, "sd": sd, "n": n, "ci95": half, "low": mean - half, "high": mean + half}


def global_number(value: float) -> Dict[str, float]:
    """A summary row for one global number (coverage): its mean, no spread, no interval."""
    nan = float("nan")
    return {"mean": float(value), "sd": nan, "n": nan, "ci95": nan, "low": nan, "high": nan}


def paired_difference(base: Evaluation, other: Evaluation) -> pd.DataFrame:
    """Per-user paired difference ``other - base`` for every metric, with its 95% CI.

    Users are matched by id; only users evaluated in both count (with the same train and
    test files that is all of them). Pairing removes the between-user variance, so the
    interval is much tighter than comparing the two separate intervals. Coverage, a global
    number, gets the plain difference and no interval.

    Returns
    -------
    pandas.DataFrame
        Same layout as :attr:`Evaluation.summary`.
    """
    common = base.per_user.index.intersection(other.per_user.index)
    if len(common) == 0 and (len(base.per_user) or len(other.per_user)):  # both empty: an empty group
        raise ValueError("the two evaluations share no evaluated users; were they made on the same split?")
    rows = {}
    for metric in base.metrics:
        if metric in base.per_user.columns and metric in other.per_user.columns:
            diff = other.per_user.loc[common, metric].to_numpy() - base.per_user.loc[common, metric].to_numpy()
            rows[metric] = summarize(diff)
        elif metric in other.summary.index:
            rows[metric] = global_number(other.mean(metric) - base.mean(metric))
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(SUMMARY_COLUMNS))


def across_splits(values: Sequence[float]) -> Dict[str, float]:
    """Mean and standard error of one number measured on several splits.

    ``se = sd(values, ddof=1) / sqrt(n_splits)``; NaN with a single split. The standard
    error (not a 1.96 interval) is reported because with a handful of splits a normal
    95% interval would be too narrow; read mean +- 2 se as a rough 95% interval.
    """
    v = np.asarray([x for x in values], dtype=np.float64)
    n = int(v.size)
    se = float(v.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    return {"mean": float(v.mean()) if n else float("nan"), "se": se, "n_splits": n, "values": v.tolist()}
