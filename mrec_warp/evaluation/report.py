"""Studies (several recommendation files, one or more splits) and their reports.

:func:`evaluate` reads the files and scores every recommendations file on every split;
:meth:`Study.to_dict` turns the result into one plain, JSON-ready structure, and every
report (text table, Markdown, JSON: :mod:`~mrec_warp.evaluation.formatting`; plot:
:mod:`~mrec_warp.evaluation.plot`) is rendered from that structure, so they can never
disagree. The per-user CSV comes straight from the per-user tables.

Uncertainty
-----------
* One split: each mean comes with a 95% confidence interval over users,
  ``mean +- 1.96 * sd / sqrt(n)``; later recommendation files also get the paired
  per-user difference to the first file, with the same kind of interval.
* Several splits: each number is first computed per split, then reported as the mean
  over splits +- its standard error ``sd / sqrt(n_splits)``; differences likewise.
"""
from __future__ import annotations

import io
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np
import pandas as pd

from .._version import __version__
from ..data.inputs import output_encoding
from ..data.interactions import Interactions
from ..data.ratings import read_ratings
from ..data.rows import refuse_negatives
from ..errors import InputError
from ..files import PathLike, atomic_write
from ..progress import SILENT, Progress
from ..tables import neutralise_cells, neutralised_note
from .formatting import format_json, format_markdown
from .metrics import score_against
from .plot import render_plot
from .recs_file import read_recs
from .result import Evaluation, metric_names
from .sanity import check_evaluation, check_recs_table, check_test_table
from .space import build_space
from .statistics import across_splits, paired_difference

SPLIT_PLACEHOLDER = "{split}"

PROTOCOL = {
    "users": "test users with at least one test item that is not also in their training items",
    "cleaning": "training items are removed from each user's recommendations before scoring "
                "(the list closes up); a repeated item keeps its best rank; test items that are "
                "also training items are ignored",
    "averaging": "macro average over evaluated users; a user without recommendations scores 0",
    "precision@k": "hits in the top k / k (k even when fewer than k items were recommended)",
    "recall@k": "hits in the top k / number of the user's test items",
    "ndcg@k": "sum over hits at rank r <= k of 1/log2(r+1), divided by the same sum for "
              "min(k, number of test items) hits at ranks 1, 2, ...",
    "map@k": "sum over hits at rank r <= k of (hits in the top r) / r, divided by "
             "min(k, number of test items)",
    "hit_rate@k": "1 if the top k hold at least one test item, else 0",
    "mrr": "1 / rank of the first test item anywhere in the list, 0 if none",
    "coverage@k": "distinct training items in the top k of the evaluated users / number of "
                  "training items (one global number, no interval)",
    "interval": "95% confidence interval over users: mean +- 1.96 * sd / sqrt(n), sample sd",
    "paired_difference": "per-user difference (this file minus the first), mean +- 1.96 * sd / sqrt(n)",
    "splits": "mean over splits +- standard error sd / sqrt(number of splits)",
}


# ----------------------------------------------------------------------------------------
# running a study
# ----------------------------------------------------------------------------------------
@dataclass
class Study:
    """Every recommendations file scored on every split.

    Attributes
    ----------
    names : list of str
        One display name per recommendations file; the first is the baseline of the
        paired differences.
    sources : list of str
        The recommendations files (patterns with ``{split}`` when there are splits).
    splits : list of str
        Split labels; empty for a single train/test pair.
    evaluations : list of list of Evaluation
        ``evaluations[s][r]``: recommendations ``r`` on split ``s``.
    ks : tuple of int
    train, test : str
        Descriptions (file names or patterns) of the training and test data.
    id_encoding : str
        Encoding the test data's ids were read in (``"latin-1"`` for a file that is not
        valid UTF-8): the per-user CSV is written in it, so user ids keep their bytes.
    """

    names: List[str]
    sources: List[str]
    splits: List[str]
    evaluations: List[List[Evaluation]]
    ks: tuple
    train: str = ""
    test: str = ""
    id_encoding: str = "utf-8"
    _dict: Optional[Dict[str, Any]] = field(default=None, repr=False, compare=False)

    @property
    def metrics(self) -> List[str]:
        """Per-user metrics, then coverage@k: the rows of every table."""
        return metric_names(self.ks) + [f"coverage@{k}" for k in self.ks]

    def to_dict(self) -> Dict[str, Any]:
        """The whole study as plain numbers and strings (NaN becomes ``None``)."""
        if self._dict is None:
            self._dict = _clean_json(_study_dict(self))
        return self._dict


def resolve_split(pattern: Union[PathLike, Any], split: Optional[str]) -> Any:
    """Substitute ``split`` for ``{split}`` in a path; anything else is returned as is."""
    if split is None or not isinstance(pattern, (str, os.PathLike)):
        return pattern
    return str(pattern).replace(SPLIT_PLACEHOLDER, str(split))


def evaluate(
    train: Union[PathLike, Interactions, pd.DataFrame],
    test: Union[PathLike, Interactions, pd.DataFrame],
    recs: Sequence[Union[PathLike, pd.DataFrame]],
    names: Optional[Sequence[str]] = None,
    ks: Sequence[int] = (5, 10, 20),
    splits: Optional[Sequence[str]] = None,
    progress: Progress = SILENT,
    catalog: Optional[Sequence[str]] = None,
) -> Study:
    """Score one or more recommendation files against a train/test split, or several splits.

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

    Returns
    -------
    Study
    """
    recs = list(recs)
    if not recs:
        raise ValueError("give at least one recommendations file")
    names = list(names) if names else default_names(recs)
    if len(names) != len(recs):
        raise ValueError(f"{len(names)} names for {len(recs)} recommendation files")
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
        if not (space.n_test > 0).any():
            # nothing to average: almost always the wrong file, not a result worth printing
            raise InputError("no test interaction is left once those also in the training data are removed",
                             path=_describe(resolve_split(test, label)),
                             hint="is this the held-out part of the same split as the training file?")
        row: List[Evaluation] = []
        for name, source in zip(names, recs):
            path = resolve_split(source, label)
            progress.log(f"scoring {name}{where}")
            table = read_recs(path) if isinstance(path, (str, os.PathLike)) else path
            where_from = str(path) if isinstance(path, (str, os.PathLike)) else name
            check_recs_table(table, space.n_items, where_from)
            result = score_against(space, table, ks=ks, source=where_from)
            check_evaluation(result.info, result.per_user, where_from, len(space.train_keys),
                             len(space.test_keys) + space.n_test_in_train)
            row.append(result)
        evaluations.append(row)
    return Study(
        names=names, sources=[_describe(r) for r in recs], splits=[l for l in labels if l is not None],
        evaluations=evaluations, ks=evaluations[0][0].ks, train=_describe(train), test=_describe(test),
        id_encoding=id_encoding,
    )


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
        table = read_ratings(data, reader_options=())  # evaluate has no reader options
        refuse_negatives(table, str(data))  # a return is no hit, nor an interaction to exclude
        if what in ("test", "train"):
            check_test_table(table, str(data), role=what)
        return table[["user", "item"]]
    if what == "test" and isinstance(data, pd.DataFrame) and "rank" in data.columns:
        check_test_table(data[["user"]].assign(timestamp=data["rank"]), None)
    return data


def _describe(x: Any) -> str:
    return str(x) if isinstance(x, (str, os.PathLike)) else f"<{type(x).__name__}>"


# ----------------------------------------------------------------------------------------
# the study as one plain structure
# ----------------------------------------------------------------------------------------
def _stat_dict(row: pd.Series) -> Dict[str, Any]:
    n = row["n"]
    return {"mean": row["mean"], "sd": row["sd"], "n": None if pd.isna(n) else int(n), "ci95": row["ci95"],
            "low": row["low"], "high": row["high"]}


def _study_dict(study: Study) -> Dict[str, Any]:
    multi = len(study.splits) > 1
    metrics = study.metrics
    runs = []
    for r, (name, source) in enumerate(zip(study.names, study.sources)):
        per_split = []
        for s, row in enumerate(study.evaluations):
            ev = row[r]
            diff = paired_difference(row[0], ev) if r > 0 else None
            per_split.append({
                "split": study.splits[s] if study.splits else None,
                "info": dict(ev.info),
                "metrics": {m: _stat_dict(ev.summary.loc[m]) for m in metrics},
                "difference_to_first": None if diff is None else {m: _stat_dict(diff.loc[m]) for m in metrics},
            })
        runs.append({
            "name": name,
            "recs": source,
            "per_split": per_split,
            "summary": _headline(per_split, "metrics", metrics, multi),
            "difference_to_first": _headline(per_split, "difference_to_first", metrics, multi) if r > 0 else None,
        })
    n_users = [row[0].info["n_users_evaluated"] for row in study.evaluations]
    protocol = dict(PROTOCOL)
    protocol.update(train=study.train, test=study.test, ks=list(study.ks))
    if not multi:
        protocol.pop("splits")
    return {
        "tool": f"mrec-warp {__version__}",
        "protocol": protocol,
        "ks": list(study.ks),
        "metrics": metrics,
        "splits": list(study.splits),
        "n_users": n_users[0] if len(n_users) == 1 else n_users,
        "uncertainty": "se" if multi else "ci95",
        "runs": runs,
    }


def _headline(per_split: List[Dict], key: str, metrics: List[str], multi: bool) -> Dict[str, Dict]:
    """The number every table shows: ``mean`` and ``plus_minus`` (a CI half-width or an SE)."""
    out = {}
    for m in metrics:
        if not multi:
            stat = per_split[0][key][m]
            out[m] = {"mean": stat["mean"], "plus_minus": stat["ci95"], "kind": "ci95"}
        else:
            stat = across_splits([p[key][m]["mean"] for p in per_split])
            out[m] = {"mean": stat["mean"], "plus_minus": stat["se"], "kind": "se",
                      "n_splits": stat["n_splits"], "values": stat["values"]}
    return out


def _clean_json(obj: Any) -> Any:
    """numpy scalars -> Python numbers, NaN -> None, so the JSON is strict and portable."""
    if isinstance(obj, dict):
        return {str(k): _clean_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean_json(v) for v in obj]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        value = float(obj)
        if math.isnan(value) or math.isinf(value):
            return None
        return value
    return obj


# ----------------------------------------------------------------------------------------
# per-user table
# ----------------------------------------------------------------------------------------
def per_user_table(study: Study) -> pd.DataFrame:
    """Long table: one row per (split, recommendations, user) with every per-user metric."""
    frames = []
    for s, row in enumerate(study.evaluations):
        for name, ev in zip(study.names, row):
            frame = ev.per_user.reset_index()
            frame.insert(0, "recs", name)
            if study.splits:
                frame.insert(0, "split", study.splits[s])
            frames.append(frame)
    return pd.concat(frames, ignore_index=True)


# ----------------------------------------------------------------------------------------
# writing: render everything first, then write each file atomically
# ----------------------------------------------------------------------------------------
def write_reports(
    study: Study,
    markdown: Optional[PathLike] = None,
    json_path: Optional[PathLike] = None,
    per_user: Optional[PathLike] = None,
    plot: Optional[PathLike] = None,
    notes: Optional[List[str]] = None,
) -> List[str]:
    """Write the requested report files; returns the paths written.

    All contents are produced in memory before the first file is touched, so an error
    while rendering leaves no file behind, and each file appears only when complete. The
    per-user CSV neutralises cells a spreadsheet would run as formulas
    (:func:`~mrec_warp.tables.neutralise_cells`); ``notes`` gets a note saying how many.
    """
    data = study.to_dict()
    contents: List[tuple] = []
    if markdown:
        contents.append((markdown, format_markdown(data)))
    if json_path:
        contents.append((json_path, format_json(data)))
    if per_user:
        buf = io.StringIO()
        table, neutralised = neutralise_cells(per_user_table(study))
        table.to_csv(buf, index=False, lineterminator="\n")
        note = neutralised_note(neutralised)
        if note and notes is not None:
            notes.append(note)
        # in the test file's encoding, so a Latin-1 user id comes back as the same bytes
        contents.append((per_user, _encoded(buf.getvalue(), study.id_encoding, per_user)))
    if plot:
        contents.append((plot, render_plot(data)))
    for path, content in contents:
        binary = isinstance(content, bytes)
        with atomic_write(path, mode="wb" if binary else "w") as fh:
            fh.write(content)
    return [str(p) for p, _ in contents]


def _encoded(text: str, encoding: str, path: PathLike) -> bytes:
    """``text`` as bytes in ``encoding``, or one line saying which character does not fit."""
    try:
        return text.encode(encoding)
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start:exc.end]
        raise InputError(f"{bad!r} cannot be written in {encoding}, the encoding of the test data's ids",
                         path=str(path), hint="give the recommendations files `name` values in plain "
                                              "text, or convert the data to UTF-8") from None
