"""What scoring one recommendations table against one split gives: :class:`Evaluation`."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Sequence, Tuple

import pandas as pd

#: Metrics that are averaged over users, each computed at every k (in this order).
AT_K_METRICS = ("precision", "recall", "ndcg", "map", "hit_rate")


def metric_names(ks: Sequence[int]) -> List[str]:
    """Per-user metric column names in report order: each metric at every k, then ``mrr``."""
    return [f"{m}@{k}" for m in AT_K_METRICS for k in ks] + ["mrr"]


@dataclass
class Evaluation:
    """The result of scoring one recommendations table against one train/test split.

    Attributes
    ----------
    per_user : pandas.DataFrame
        One row per evaluated user (index: user id): ``n_test``, ``n_recs`` (after removing
        train items and repeats) and one column per metric (``precision@10``, ..., ``mrr``).
    summary : pandas.DataFrame
        One row per metric (the per-user metrics, then ``coverage@k``), columns ``mean``,
        ``sd``, ``n``, ``ci95`` (half-width ``1.96 * sd / sqrt(n)``), ``low``, ``high``.
        Coverage is one global number: its ``sd``/``ci95`` are NaN.
    ks : tuple of int
    info : dict
        Counts describing what was evaluated and cleaned (see
        :func:`~mrec_warp.evaluation.metrics.evaluate_recommendations`).
    groups : dict
        With a grouping (:mod:`~mrec_warp.evaluation.groups`): the evaluation of each group,
        by label, in group order.
    group_bounds : dict
        What each group is on this split, in words (e.g. ``"profile size <= 21"``).
    """

    per_user: pd.DataFrame
    summary: pd.DataFrame
    ks: Tuple[int, ...]
    info: Dict[str, int] = field(default_factory=dict)
    groups: Dict[str, "Evaluation"] = field(default_factory=dict)
    group_bounds: Dict[str, str] = field(default_factory=dict)

    @property
    def metrics(self) -> List[str]:
        """Metric names, in report order."""
        return list(self.summary.index)

    def mean(self, metric: str) -> float:
        return float(self.summary.loc[metric, "mean"])
