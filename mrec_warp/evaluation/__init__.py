"""Evaluation: top-k ranking metrics with confidence intervals, and their reports.

``evaluate_recommendations`` scores one recommendations table against one train/test
split; ``evaluate`` reads files and scores several recommendation files on one or more
splits; ``write_reports`` / ``format_table`` turn the result into reports.
"""
from .metrics import (
    AUCResult,
    Evaluation,
    across_splits,
    auc,
    evaluate_recommendations,
    metric_names,
    paired_difference,
    read_recs,
    summarize,
)
from .report import Study, evaluate, format_json, format_markdown, format_table, per_user_table, write_reports

__all__ = [
    "AUCResult",
    "Evaluation",
    "Study",
    "across_splits",
    "auc",
    "evaluate",
    "evaluate_recommendations",
    "format_json",
    "format_markdown",
    "format_table",
    "metric_names",
    "paired_difference",
    "per_user_table",
    "read_recs",
    "summarize",
    "write_reports",
]
