"""The evaluate stage: score recommendation files against held-out interactions.

:func:`evaluate` reads the train, test and recommendations files and scores every
recommendations file on every split (:func:`evaluate_here`), or runs its units -- one per
(split, recommendations file) -- at once on an execution context's workers; the same
:class:`~mrec_warp.evaluation.report.Study` comes back. Each unit reads its own
train/test/recs files (the metrics themselves are vectorised over all users of a file), so
one split with one file gains nothing; several splits or files gain up to one worker each.
File paths must be visible to the workers. The metrics, tests and reports are
:mod:`mrec_warp.evaluation`'s.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import pandas as pd

from ..context import ExecutionContext
from ..data.features import as_feature_table
from ..data.inputs import output_encoding
from ..data.interactions import Interactions
from ..data.ratings import read_ratings
from ..data.rows import refuse_negatives
from ..errors import InputError
from ..evaluation.beyond import feature_matrix
from ..evaluation.groups import GROUPINGS, group_spaces
from ..evaluation.metrics import score_against
from ..evaluation.recs_file import read_recs
from ..evaluation.report import Study, check_baseline
from ..evaluation.result import Evaluation
from ..evaluation.sanity import check_evaluation, check_recs_table, check_test_table
from ..evaluation.significance import DEFAULT_CORRECTION, DEFAULT_TEST, check_test_options
from ..evaluation.space import build_space
from ..files import PathLike
from ..progress import SILENT, Progress
from ..seeds import DEFAULT_SEED

#: What a path names the split by: ``splits/{split}/train.tsv``.
SPLIT_PLACEHOLDER = "{split}"


def _evaluate_unit(train, test, recs, name: str, ks: Sequence[int], catalog=None, options=None):
    """One unit: the evaluation of one recommendations file on one split."""
    return evaluate_here(train, test, [recs], names=[name], ks=ks, catalog=catalog,
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
    baseline: Optional[str] = None,
) -> Study:
    """Evaluate recommendation files (see :func:`evaluate_here` for every argument), their
    (split, file) units run on ``context``'s workers.

    Without a context, or with one worker of local threads, the units run here one after
    the other. The paired tests run here, on the gathered per-user results.
    """
    recs = list(recs)
    names = list(names) if names else default_names(recs)
    if len(names) != len(recs):  # zip below would drop files silently
        raise ValueError(f"{len(names)} names for {len(recs)} recommendation files")
    labels: List[Optional[str]] = [str(s) for s in splits] if splits else [None]
    check_test_options(paired_test, correction)
    check_baseline(baseline, names)
    # what each unit scores; the tests themselves run here, once every unit is back
    options: Dict[str, Any] = dict(beyond=beyond, item_features=as_feature_table(item_features), groups=groups)
    tests: Dict[str, Any] = dict(paired_test=paired_test, correction=correction, seed=seed, baseline=baseline)
    units = [(resolve_split(train, lab), resolve_split(test, lab), resolve_split(r, lab), n, tuple(ks), catalog,
              options) for lab in labels for r, n in zip(recs, names)]
    if len(units) == 1 or context is None or (context.is_local_memory and context.workers == 1):
        return evaluate_here(train, test, recs, names=names, ks=ks, splits=splits, progress=progress,
                             catalog=catalog, **options, **tests)
    with context:
        progress.log(f"evaluating {len(units)} (split, recs) pairs on {context.describe()}")
        flat = list(context.map(_evaluate_unit, units))
    evaluations = [flat[i * len(recs):(i + 1) * len(recs)] for i in range(len(labels))]
    return Study(names=names, sources=[_describe(r) for r in recs],
                 splits=[lab for lab in labels if lab is not None], evaluations=evaluations,
                 ks=evaluations[0][0].ks, train=_describe(train), test=_describe(test),
                 grouping=groups, **tests)


def resolve_split(pattern: Union[PathLike, Any], split: Optional[str]) -> Any:
    """Substitute ``split`` for ``{split}`` in a path; anything else is returned as is."""
    if split is None or not isinstance(pattern, (str, os.PathLike)):
        return pattern
    return str(pattern).replace(SPLIT_PLACEHOLDER, str(split))


def evaluate_here(
    train: Union[PathLike, Interactions, pd.DataFrame],
    test: Union[PathLike, Interactions, pd.DataFrame],
    recs: Sequence[Union[PathLike, pd.DataFrame]],
    names: Optional[Sequence[str]] = None,
    ks: Sequence[int] = (5, 10, 20),
    splits: Optional[Sequence[str]] = None,
    progress: Progress = SILENT,
    catalog: Optional[Sequence[str]] = None,
    beyond: bool = False,
    item_features: Optional[Union[PathLike, pd.DataFrame]] = None,
    groups: Optional[str] = None,
    paired_test: str = DEFAULT_TEST,
    correction: str = DEFAULT_CORRECTION,
    seed: int = DEFAULT_SEED,
    baseline: Optional[str] = None,
) -> Study:
    """Score one or more recommendation files against a train/test split, or several splits,
    here in this process (:func:`evaluate` with no context).

    Parameters
    ----------
    train, test : path-like, Interactions or pandas.DataFrame
        Training and held-out positives (files are read with
        :func:`~mrec_warp.data.ratings.read_ratings`; every row is a positive).
    recs : sequence of path-like or pandas.DataFrame
        Recommendation files (see :func:`~mrec_warp.evaluation.recs_file.read_recs`) or tables.
    names : sequence of str, optional
        Display names; default: derived from the file names.
    ks : sequence of int
        Cut-offs.
    splits : sequence of str, optional
        Split labels. Every path must then contain ``{split}``, replaced by each label in
        turn, e.g. ``splits/{split}/train.tsv`` with ``splits=["0", "1", "2"]``.
    progress : Progress
    catalog : sequence of str, optional
        Extra item ids recommendations may name (see
        :func:`~mrec_warp.evaluation.metrics.evaluate_recommendations`).
    beyond : bool
        Add the beyond-accuracy metrics (:mod:`~mrec_warp.evaluation.beyond`).
    item_features : path-like or pandas.DataFrame, optional
        Item feature file or table: adds ``diversity@k`` (implies ``beyond``).
    groups : {"user-activity", "item-popularity"}, optional
        Also score every group (:mod:`~mrec_warp.evaluation.groups`).
    paired_test : {"wilcoxon", "permutation"}
        Paired test over users of the differences to the baseline.
    correction : {"holm", "bh", "none"}
        Multiple-comparison correction over each table's p-values.
    seed : int
        Seed of the permutation test.
    baseline : str, optional
        Name (in ``names``) of the file every other is compared with; default: the first.

    Returns
    -------
    Study
    """
    check_test_options(paired_test, correction)
    if groups is not None and groups not in GROUPINGS:
        raise InputError(f"unknown grouping {groups!r}", hint=f"use `groups` {' or '.join(GROUPINGS)}")
    features_table = as_feature_table(item_features) if item_features is not None else None
    recs = list(recs)
    if not recs:
        raise ValueError("give at least one recommendations file")
    names = list(names) if names else default_names(recs)
    if len(names) != len(recs):
        raise ValueError(f"{len(names)} names for {len(recs)} recommendation files")
    check_baseline(baseline, names)
    labels: List[Optional[str]] = [str(s) for s in splits] if splits else [None]
    if splits:
        _check_placeholders({"train": train, "test": test, **{f"recs {n}": r for n, r in zip(names, recs)}})

    evaluations = []
    id_encoding = "utf-8"
    for label in labels:
        where = "" if label is None else f" (split {label})"
        train_data = _load_interactions(resolve_split(train, label), "train", progress)
        test_data = _load_interactions(resolve_split(test, label), "test", progress)
        id_encoding = _encoding_of(test_data, id_encoding)
        space = build_space(train_data, test_data, catalog)  # once per split, shared by every file
        features = None
        if features_table is not None:  # a feature file in another id format would make every diversity n/a
            _check_feature_ids(features_table, space.item_ids, _describe(item_features))
            features = feature_matrix(features_table, space.item_ids)
        parts = group_spaces(space, groups) if groups else []
        if not (space.n_test > 0).any():
            # nothing to average: almost always the wrong file, not a result worth printing
            raise InputError("no test interaction is left once those also in the training data are removed",
                             path=_describe(resolve_split(test, label)),
                             hint="is this the held-out part of the same split as the training file?")
        row: List[Evaluation] = []
        for name, source in progress.iterate(list(zip(names, recs)), total=len(recs), desc=f"evaluate{where}",
                                             unit="file"):
            path = resolve_split(source, label)
            progress.log(f"scoring {name}{where}")
            table = read_recs(path) if isinstance(path, (str, os.PathLike)) else path
            where_from = str(path) if isinstance(path, (str, os.PathLike)) else name
            check_recs_table(table, space.n_items, where_from)
            result = score_against(space, table, ks=ks, source=where_from, beyond=beyond, features=features)
            check_evaluation(result.info, result.per_user, where_from, len(space.train_keys),
                             len(space.test_keys) + space.n_test_in_train)
            for group, part, bounds in parts:
                result.groups[group] = score_against(part, table, ks=ks, source=where_from, beyond=beyond,
                                                     features=features)
                result.group_bounds[group] = bounds
            row.append(result)
        evaluations.append(row)
    return Study(
        names=names, sources=[_describe(r) for r in recs], splits=[l for l in labels if l is not None],
        evaluations=evaluations, ks=evaluations[0][0].ks, train=_describe(train), test=_describe(test),
        id_encoding=id_encoding, paired_test=paired_test, correction=correction, seed=int(seed), grouping=groups,
        baseline=baseline,
    )


def _check_feature_ids(table: pd.DataFrame, item_ids: pd.Index, source: str) -> None:
    """An item feature file none of whose ids are items here is in another id format."""
    ids = pd.unique(table["id"].to_numpy())
    if not (item_ids.get_indexer(ids) >= 0).any():
        shown = ", ".join(repr(x) for x in ids[:2])
        raise InputError(f"none of the {len(ids)} ids of the item feature file are item ids of the training or test "
                         f"data (file: {shown}; data: {', '.join(repr(x) for x in item_ids[:2])})", path=source,
                         hint="its first column must hold the same item ids as the training file")


def _encoding_of(data: Any, default: str) -> str:
    """Output encoding of the ids of a table read from a file (``attrs``) or an Interactions."""
    if isinstance(data, pd.DataFrame):
        found = data.attrs.get("encoding")
    else:
        found = getattr(data, "id_encoding", None)
    return output_encoding(found) if found else default


def default_names(recs: Sequence[Any]) -> List[str]:
    """File stems (``recs`` for ``recs.tsv``), made longer only where they would clash."""
    def stem(r, parts):
        if not isinstance(r, (str, os.PathLike)):
            return None
        p = Path(str(r))
        name = p.name.split(".")[0] or p.name
        return "/".join(list(p.parent.parts[-parts:]) + [name]) if parts else name

    out = []
    for i, r in enumerate(recs):
        for parts in range(0, 4):
            name = stem(r, parts) or f"recs{i + 1}"
            if sum(1 for other in recs if (stem(other, parts) or "") == name) <= 1:
                break
        out.append(name)
    # still clashing (same file twice, or tables): number them
    return [n if out.count(n) == 1 else f"{n}#{i + 1}" for i, n in enumerate(out)]


def _check_placeholders(paths: Dict[str, Any]) -> None:
    missing = [k for k, v in paths.items() if not (isinstance(v, (str, os.PathLike)) and SPLIT_PLACEHOLDER in str(v))]
    if missing:
        raise ValueError(f"with splits, every path needs a {SPLIT_PLACEHOLDER} placeholder; missing in: {', '.join(missing)}")


def _load_interactions(data: Any, what: str, progress: Progress):
    if isinstance(data, (str, os.PathLike)):
        progress.log(f"reading {what} {data}")
        # evaluate has no reader options; ids as codes, as train reads them (no string per row)
        table = read_ratings(data, reader_options=(), coded_ids=True)
        refuse_negatives(table, str(data))  # a return is no hit, nor an interaction to exclude
        if what in ("test", "train"):
            check_test_table(table, str(data), role=what)
        return table[["user", "item"]]
    if what == "test" and isinstance(data, pd.DataFrame) and "rank" in data.columns:
        check_test_table(data[["user"]].assign(timestamp=data["rank"]), None)
    return data


def _describe(x: Any) -> str:
    return str(x) if isinstance(x, (str, os.PathLike)) else f"<{type(x).__name__}>"


__all__ = ["evaluate", "evaluate_here", "default_names", "resolve_split", "SPLIT_PLACEHOLDER"]
