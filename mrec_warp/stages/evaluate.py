"""The evaluate stage: score recommendation files against held-out interactions.

:func:`evaluate` is :func:`mrec_warp.evaluation.report.evaluate` with its units -- one per
(split, recommendations file) -- scored at once on an execution context's workers; the
same :class:`~mrec_warp.evaluation.report.Study` comes back. Each unit reads its own
train/test/recs files (the metrics themselves are vectorised over all users of a file), so
one split with one file gains nothing; several splits or files gain up to one worker each.
File paths must be visible to the workers.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

from ..context import ExecutionContext
from ..evaluation import report
from ..evaluation.report import Study, default_names, resolve_split
from ..data.features import as_feature_table
from ..evaluation.significance import DEFAULT_CORRECTION, DEFAULT_TEST, check_test_options
from ..progress import SILENT, Progress
from ..seeds import DEFAULT_SEED


def _evaluate_unit(train, test, recs, name: str, ks: Sequence[int], catalog=None, options=None):
    """One unit: the evaluation of one recommendations file on one split."""
    return report.evaluate(train, test, [recs], names=[name], ks=ks, catalog=catalog,
                           **(options or {})).evaluations[0][0]


def evaluate(
    train,
    test,
    recs: Sequence[Any],
    names: Optional[Sequence[str]] = None,
    ks: Sequence[int] = (5, 10, 20),
    splits: Optional[Sequence[str]] = None,
    catalog: Optional[Sequence[str]] = None,
    context: Optional[ExecutionContext] = None,
    progress: Progress = SILENT,
    beyond: bool = False,
    item_features=None,
    groups: Optional[str] = None,
    paired_test: str = DEFAULT_TEST,
    correction: str = DEFAULT_CORRECTION,
    seed: int = DEFAULT_SEED,
) -> Study:
    """Evaluate recommendation files (see :func:`mrec_warp.evaluation.report.evaluate` for
    every argument), their (split, file) units run on ``context``'s workers.

    Without a context, or with one worker of local threads, the units run here one after
    the other. The paired tests run here, on the gathered per-user results.
    """
    recs = list(recs)
    names = list(names) if names else default_names(recs)
    if len(names) != len(recs):  # zip below would drop files silently
        raise ValueError(f"{len(names)} names for {len(recs)} recommendation files")
    labels: List[Optional[str]] = [str(s) for s in splits] if splits else [None]
    check_test_options(paired_test, correction)
    # what each unit scores; the tests themselves run here, once every unit is back
    options = dict(beyond=beyond, item_features=as_feature_table(item_features), groups=groups)
    tests = dict(paired_test=paired_test, correction=correction, seed=seed)
    units = [(resolve_split(train, lab), resolve_split(test, lab), resolve_split(r, lab), n, tuple(ks), catalog,
              options) for lab in labels for r, n in zip(recs, names)]
    if len(units) == 1 or context is None or (context.is_local_memory and context.workers == 1):
        return report.evaluate(train, test, recs, names=names, ks=ks, splits=splits, progress=progress,
                               catalog=catalog, **options, **tests)
    with context:
        progress.log(f"evaluating {len(units)} (split, recs) pairs on {context.describe()}")
        flat = list(context.map(_evaluate_unit, units))
    evaluations = [flat[i * len(recs):(i + 1) * len(recs)] for i in range(len(labels))]
    return Study(names=names, sources=[report._describe(r) for r in recs],
                 splits=[lab for lab in labels if lab is not None], evaluations=evaluations,
                 ks=evaluations[0][0].ks, train=report._describe(train), test=report._describe(test),
                 grouping=groups, **tests)
