"""Evaluation: top-k ranking metrics with confidence intervals, and their reports.

``evaluate_recommendations`` scores one recommendations table against one train/test
split; the evaluate stage (:func:`mrec_warp.evaluate`) reads files and scores several
recommendation files on one or more splits into a :class:`Study`, testing each difference to
the baseline (:mod:`.significance`); ``write_reports`` / ``format_table`` / ``format_long``
turn the result into reports.
"""
from .formatting import format_json, format_long, format_markdown, format_table, tidy_rows
from .metrics import evaluate_recommendations
from .recs_file import read_recs
from .report import Study, per_user_table, write_reports
from .result import Evaluation, metric_names
from .roc_auc import AUCResult, auc
from .significance import adjust, paired_splits_test, paired_users_pvalues, paired_users_test
from .statistics import across_splits, paired_difference, summarize

__all__ = [
    "AUCResult",
    "Evaluation",
    "Study",
    "across_splits",
    "adjust",
    "auc",
    "evaluate_recommendations",
    "format_json",
    "format_long",
    "format_markdown",
    "format_table",
    "metric_names",
    "paired_difference",
    "paired_splits_test",
    "paired_users_pvalues",
    "paired_users_test",
    "per_user_table",
    "read_recs",
    "summarize",
    "tidy_rows",
    "write_reports",
]
