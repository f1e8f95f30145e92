"""Studies (several recommendation files, one or more splits) and their reports.

:func:`mrec_warp.stages.evaluate.evaluate` reads the files and scores every recommendations
file on every split into a :class:`Study`; :meth:`Study.to_dict` turns the result into one plain, JSON-ready structure, and every
report (text table, Markdown, JSON: :mod:`~mrec_warp.evaluation.formatting`; plot:
:mod:`~mrec_warp.evaluation.plot`) is rendered from that structure, so they can never
disagree. The per-user CSV comes straight from the per-user tables.

Uncertainty
-----------
* One split: each mean comes with a 95% confidence interval over users,
  ``mean +- 1.96 * sd / sqrt(n)``; every recommendations file but the baseline (the first,
  or the one :attr:`Study.baseline` names) also gets the paired per-user difference to the
  baseline, with the same kind of interval.
* Several splits: each number is first computed per split, then reported as the mean
  over splits +- its standard error ``sd / sqrt(n_splits)``; differences likewise.

Is a difference real? Each difference to the baseline gets a paired test (over users on
one split, over splits with several) and every p-value of a table is adjusted for the
number of tests (Holm by default); only differences significant after that get a star:
:mod:`~mrec_warp.evaluation.significance`. The permutation test draws more sign flips for a
table of many tests (:func:`~mrec_warp.evaluation.significance.resamples_for`), and a p at
the smallest value its sign flips can give is marked ``p_at_floor``.
"""
from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pandas as pd

from .._version import __version__
from ..errors import InputError, ParameterError
from ..files import PathLike, atomic_write
from ..tables import neutralise_cells, neutralised_note
from ..seeds import DEFAULT_SEED
from .formatting import format_json, format_markdown, tidy_rows
from .groups import RULES
from .plot import render_plot
from .result import Evaluation, metric_names
from .significance import (
    ALPHA, DEFAULT_CORRECTION, DEFAULT_TEST, FEW_SPLITS, MAX_RESAMPLES, N_RESAMPLES, RESOLUTION_MARGIN, adjust, describe,
    paired_splits_test, paired_users_pvalues, resamples_for, smallest_p,
)
from .statistics import across_splits, paired_difference

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
    "paired_difference": "per-user difference (this file minus the baseline), mean +- 1.96 * sd / sqrt(n)",
    "paired_test": "two-sided, per metric and file against the baseline: over users, a sign-flip permutation test "
                   "of the mean difference (default) or the Wilcoxon signed-rank test (scipy.stats.wilcoxon, zero "
                   "differences dropped); over several splits, a paired t-test on the per-split means; the "
                   "p-values of a table are adjusted together (Holm, Benjamini-Hochberg or none) and * marks "
                   "adjusted p < 0.05",
    "resolution": f"the permutation test's N random sign flips give no p below 2 / (N + 1); N is {N_RESAMPLES:,}, "
                  f"raised for a table of many tests until its smallest adjusted p is at most "
                  f"{ALPHA / RESOLUTION_MARGIN:g} (at most {MAX_RESAMPLES:,} flips); p≤ marks a p at that floor, "
                  "whose true value may be smaller",
    "novelty@k": "mean self-information log2(training users / item's training interactions) of the top k "
                 "(an item without training interactions counts as 1)",
    "popularity@k": "mean number of training interactions of the top-k items",
    "long_tail@k": "share of the top-k items outside the head (the most-interacted training items holding 20% "
                   "of training interactions)",
    "diversity@k": "mean cosine distance 1 - cos between the feature vectors of every pair of top-k items that "
                   "have features",
    "gini@k": "Gini coefficient of how often each training item is in the evaluated users' top k (one global "
              "number: 0 = equal exposure)",
    "splits": "mean over splits +- standard error sd / sqrt(number of splits)",
}


@dataclass
class Study:
    """Every recommendations file scored on every split.

    Attributes
    ----------
    names : list of str
        One display name per recommendations file.
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
    paired_test, correction : str
        Paired test over users and multiple-comparison correction
        (:mod:`~mrec_warp.evaluation.significance`).
    seed : int
        Seed of the permutation test.
    grouping : str, optional
        ``user-activity`` or ``item-popularity`` when each evaluation holds per-group results.
    baseline : str, optional
        Name of the run every other is compared with (paired differences and tests); None:
        the first. A name not in ``names`` raises :class:`~mrec_warp.errors.ParameterError`.
    """

    names: List[str]
    sources: List[str]
    splits: List[str]
    evaluations: List[List[Evaluation]]
    ks: tuple
    train: str = ""
    test: str = ""
    id_encoding: str = "utf-8"
    paired_test: str = DEFAULT_TEST
    correction: str = DEFAULT_CORRECTION
    seed: int = DEFAULT_SEED
    grouping: Optional[str] = None
    baseline: Optional[str] = None
    _dict: Optional[Dict[str, Any]] = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_baseline(self.baseline, self.names)

    @property
    def baseline_index(self) -> int:
        """Position of the baseline in :attr:`names`."""
        return 0 if self.baseline is None else self.names.index(self.baseline)

    @property
    def metrics(self) -> List[str]:
        """Per-user metrics, then coverage@k, then any beyond-accuracy ones: the rows of every table."""
        if self.evaluations and self.evaluations[0]:
            return list(self.evaluations[0][0].summary.index)
        return metric_names(self.ks) + [f"coverage@{k}" for k in self.ks]

    def group(self, label: str) -> "Study":
        """The study of one group (same files, splits and options), with no grouping of its own."""
        return Study(names=self.names, sources=self.sources, splits=self.splits,
                     evaluations=[[ev.groups[label] for ev in row] for row in self.evaluations], ks=self.ks,
                     train=self.train, test=self.test, id_encoding=self.id_encoding, paired_test=self.paired_test,
                     correction=self.correction, seed=self.seed, baseline=self.baseline)

    def to_dict(self) -> Dict[str, Any]:
        """The whole study as plain numbers and strings (NaN becomes ``None``)."""
        if self._dict is None:
            self._dict = _clean_json(_study_dict(self))
        return self._dict

    def to_frame(self) -> pd.DataFrame:
        """The headline numbers as a long (tidy) table: one row per (group,) run and metric,
        with its interval, the difference to the baseline, p-values and the star
        (:func:`~mrec_warp.evaluation.formatting.tidy_rows` says what each column holds)."""
        return pd.DataFrame(tidy_rows(self.to_dict()))


def check_baseline(baseline: Optional[str], names: List[str]) -> None:
    """Refuse, in one line naming every run, a baseline that is no run's name."""
    if baseline is not None and baseline not in names:
        raise ParameterError(f"`baseline={baseline}` names none of the `recs`", hint=f"their names: {', '.join(names)}")


# ----------------------------------------------------------------------------------------
# the study as one plain structure
# ----------------------------------------------------------------------------------------
def _stat_dict(row: pd.Series) -> Dict[str, Any]:
    n = row["n"]
    return {"mean": row["mean"], "sd": row["sd"], "n": None if pd.isna(n) else int(n), "ci95": row["ci95"],
            "low": row["low"], "high": row["high"]}


def _study_dict(study: Study, with_groups: bool = True) -> Dict[str, Any]:
    multi = len(study.splits) > 1
    metrics = study.metrics
    b = study.baseline_index
    n_resamples = _resamples(study)
    # over users only on one split: with several, the test is over splits
    tested = [{} if multi else _users_p(row, b, study, n_resamples) for row in study.evaluations]
    runs = []
    for r, (name, source) in enumerate(zip(study.names, study.sources)):
        per_split = []
        for s, row in enumerate(study.evaluations):
            ev = row[r]
            diff = None
            if r != b:
                diff = {m: _stat_dict(row_) for m, row_ in paired_difference(row[b], ev).iterrows()}
                found = tested[s].get(r, {})
                for m in metrics:
                    diff[m]["p"], diff[m]["p_at_floor"] = found.get(m, (None, False))
            per_split.append({
                "split": study.splits[s] if study.splits else None,
                "info": dict(ev.info),
                "metrics": {m: _stat_dict(ev.summary.loc[m]) for m in metrics},
                "difference_to_baseline": diff,
            })
        runs.append({
            "name": name,
            "recs": source,
            "per_split": per_split,
            "summary": _headline(per_split, "metrics", metrics, multi),
            "difference_to_baseline": (_headline(per_split, "difference_to_baseline", metrics, multi)
                                       if r != b else None),
        })
    comparison = _compare(runs, metrics, multi, study, n_resamples) if len(runs) > 1 else None
    n_users = [row[0].info["n_users_evaluated"] for row in study.evaluations]
    protocol = dict(PROTOCOL)
    protocol.update(train=study.train, test=study.test, ks=list(study.ks))
    if not multi:
        protocol.pop("splits")
    out = {
        "tool": f"mrec-warp {__version__}",
        "protocol": protocol,
        "ks": list(study.ks),
        "metrics": metrics,
        "splits": list(study.splits),
        "n_users": n_users[0] if len(n_users) == 1 else n_users,
        "uncertainty": "se" if multi else "ci95",
        "baseline": study.names[b],
        "runs": runs,
        "comparison": comparison,
    }
    if with_groups and study.grouping:
        labels = list(study.evaluations[0][0].groups)
        out["groups"] = {"by": study.grouping, "rule": RULES[study.grouping], "groups": []}
        for label in labels:
            part = _study_dict(study.group(label), with_groups=False)
            out["groups"]["groups"].append({
                "name": label,
                "bounds": [row[0].group_bounds[label] for row in study.evaluations],
                **{key: part[key] for key in ("n_users", "uncertainty", "runs", "comparison")},
            })
    return out


def _resamples(study: Study) -> int:
    """Sign flips of the permutation test over users for this study's tables: one table's
    tests are every non-baseline run times every per-user metric (each group table has as
    many)."""
    if study.paired_test != "permutation" or len(study.splits) > 1 or not study.evaluations:
        return N_RESAMPLES
    per_user = [m for m in study.metrics if m in study.evaluations[0][0].per_user.columns]
    return resamples_for((len(study.names) - 1) * len(per_user), study.correction)


def _users_p(row: List[Evaluation], b: int, study: Study,
             n_resamples: int) -> Dict[int, Dict[str, Tuple[Optional[float], bool]]]:
    """For every run ``r`` but the baseline ``b`` of one split, ``(p, at_floor)`` of the paired
    test over users of every per-user metric (global ones have none): ``at_floor`` when p is
    the smallest the test's random sign flips can give.

    Every run of a split has the same evaluated users, so the runs' difference columns go
    through the test together: one set of sign flips for the whole table (the same flips each
    run would draw alone from the seed), which makes a table of many runs many times faster.
    """
    base = row[b]
    metrics = {r: [m for m in study.metrics if m in base.per_user.columns and m in ev.per_user.columns]
               for r, ev in enumerate(row) if r != b}
    users = {r: base.per_user.index.intersection(row[r].per_user.index) for r in metrics}
    groups: List[List[int]] = []  # runs that share their users (all of them, unless a table was made by hand)
    for r in metrics:
        same = next((g for g in groups if users[g[0]].equals(users[r])), None)
        if same is None:
            groups.append([r])
        else:
            same.append(r)
    out: Dict[int, Dict[str, Tuple[Optional[float], bool]]] = {}
    for group in groups:
        common = users[group[0]]
        diff = np.hstack([row[r].per_user.loc[common, metrics[r]].to_numpy(np.float64)
                          - base.per_user.loc[common, metrics[r]].to_numpy(np.float64) for r in group])
        found = iter(paired_users_pvalues(diff, study.paired_test, study.seed, n_resamples=n_resamples))
        floor = smallest_p(len(common), n_resamples) if study.paired_test == "permutation" else None
        for r in group:
            out[r] = {}
            for m in metrics[r]:
                p = next(found)
                out[r][m] = (p, bool(floor is not None and p is not None and p <= floor * (1 + 1e-9)))
    return out


def _compare(runs: List[Dict], metrics: List[str], multi: bool, study: Study, n_resamples: int) -> Dict[str, Any]:
    """Test every difference of the headline table, adjust the p-values as one family, and
    say in words what differs. Adds ``p``, ``p_at_floor``, ``p_adjusted`` and ``significant``
    to each headline difference."""
    b = study.baseline_index
    challengers = [run for r, run in enumerate(runs) if r != b]
    cells = []
    for run in challengers:
        for m in metrics:
            head = run["difference_to_baseline"][m]
            if multi:
                head["p"] = paired_splits_test([p["difference_to_baseline"][m]["mean"] for p in run["per_split"]])
                head["p_at_floor"] = False
            else:
                found = run["per_split"][0]["difference_to_baseline"][m]
                head["p"], head["p_at_floor"] = found["p"], found["p_at_floor"]
            cells.append(head)
    adjusted = adjust([c["p"] for c in cells], study.correction)
    for cell, p in zip(cells, adjusted):
        cell["p_adjusted"] = None if np.isnan(p) else float(p)
        cell["significant"] = bool(cell["p_adjusted"] is not None and cell["p_adjusted"] < ALPHA)
    base = runs[b]["name"]
    verdicts = [_verdict(run, base, metrics, study.correction) for run in challengers]
    notes = []
    if multi and len(study.splits) < FEW_SPLITS:
        notes.append(f"the test over {len(study.splits)} splits has {len(study.splits) - 1} degrees of freedom: its "
                     "power is low, so a missing star is weak evidence that there is no difference")
    untested = sorted({m.split("@")[0] for m in metrics if m not in study.evaluations[0][0].per_user.columns})
    if not multi and untested:
        notes.append(f"not tested: {' and '.join(untested)} (one global number per run on one split)")
    random_flips = not multi and study.paired_test == "permutation"
    floor = [c["p_adjusted"] for c in cells if c["p_at_floor"] and c["p_adjusted"] is not None]
    return {**describe(study.paired_test, study.correction, multi, study.seed, n_resamples), "baseline": base,
            "n_tests": int(np.count_nonzero(~np.isnan(adjusted))),
            "n_significant": int(sum(c["significant"] for c in cells)),
            "n_resamples": n_resamples if random_flips else None,
            "n_resamples_default": N_RESAMPLES if random_flips else None,
            "n_at_floor": len(floor), "p_adjusted_floor": max(floor) if floor else None,
            "verdicts": verdicts, "notes": notes}


def _verdict(run: Dict, base: str, metrics: List[str], correction: str) -> str:
    """One sentence: where ``run`` is significantly above / below the baseline, and where not."""
    diffs = run["difference_to_baseline"]
    tested = [m for m in metrics if diffs[m].get("p_adjusted") is not None]
    higher = [m for m in tested if diffs[m]["significant"] and diffs[m]["mean"] > 0]
    lower = [m for m in tested if diffs[m]["significant"] and diffs[m]["mean"] < 0]
    same = [m for m in tested if not diffs[m]["significant"]]
    adjusted = "p" if correction == "none" else f"{_CORRECTED[correction]}-adjusted p"
    if not tested:
        return f"{run['name']} vs {base}: nothing could be tested"
    if not higher and not lower:
        return (f"{run['name']} vs {base}: no detectable difference on any of the {len(tested)} tested "
                f"metrics ({adjusted} >= {ALPHA:g})")
    parts = [f"higher on {metric_list(higher)}" if higher else "", f"lower on {metric_list(lower)}" if lower else "",
             f"no detectable difference on {metric_list(same)}" if same else ""]
    return f"{run['name']} vs {base} ({adjusted} < {ALPHA:g}): " + "; ".join(p for p in parts if p)


def metric_list(metrics: List[str]) -> str:
    """``precision@5/10, recall@20, mrr``: metrics in order, the cut-offs of one metric after
    one name."""
    groups: List[List[str]] = []
    for m in metrics:
        name, _, k = m.partition("@")
        if k and groups and groups[-1][0] == name:
            groups[-1].append(k)
        else:
            groups.append([name, k] if k else [name])
    return ", ".join(g[0] + ("@" + "/".join(g[1:]) if len(g) > 1 else "") for g in groups)


_CORRECTED = {"holm": "Holm", "bh": "BH"}


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
    """Long table: one row per (split, recommendations, user) with every per-user metric.

    With a grouping, a ``group`` column follows: ``all`` for those rows, then one row per
    (split, recommendations, group, user) scored within each group."""
    frames = []
    for s, row in enumerate(study.evaluations):
        for name, ev in zip(study.names, row):
            parts = [("all", ev)] + list(ev.groups.items()) if study.grouping else [(None, ev)]
            for label, part in parts:
                frame = part.per_user.reset_index()
                if label is not None:
                    frame.insert(0, "group", label)
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
