"""A study's plain structure (:meth:`~mrec_warp.evaluation.report.Study.to_dict`) as a text
table for a terminal, a Markdown report, or JSON.

Every report is rendered from that one structure, so they can never disagree.
"""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional


def _fmt(mean: Optional[float], pm: Optional[float], signed: bool = False, star_at: Optional[float] = None) -> str:
    """``0.213 ± 0.011``; differences are signed and starred when ``|mean| > star_at``."""
    if mean is None:
        return "n/a"
    text = f"{mean:+.3f}" if signed else f"{mean:.3f}"
    if pm is not None:
        text += f" ± {pm:.3f}"
        if star_at is not None and abs(mean) > star_at:
            text += " *"
    return text


def _significance_threshold(stat: Dict[str, Any]) -> Optional[float]:
    """Half-width of a 95% interval for a difference: the CI itself, or t * se over splits.

    With a handful of splits the normal 1.96 would be too lenient, so the star uses the
    Student t quantile with n_splits - 1 degrees of freedom.
    """
    if stat["plus_minus"] is None:
        return None
    if stat["kind"] == "ci95":
        return stat["plus_minus"]
    from scipy.stats import t  # scipy.stats takes a second to import: only when a difference is starred

    return float(t.ppf(0.975, stat["n_splits"] - 1)) * stat["plus_minus"]


def _table_rows(data: Dict[str, Any]) -> List[List[str]]:
    runs = data["runs"]
    header = ["metric"] + [r["name"] for r in runs] + [f"Δ {r['name']}" for r in runs[1:]]
    rows = [header]
    for m in data["metrics"]:
        row = [m]
        row += [_fmt(r["summary"][m]["mean"], r["summary"][m]["plus_minus"]) for r in runs]
        for r in runs[1:]:
            d = r["difference_to_first"][m]
            row.append(_fmt(d["mean"], d["plus_minus"], signed=True, star_at=_significance_threshold(d)))
        rows.append(row)
    return rows


def _legend(data: Dict[str, Any]) -> List[str]:
    runs = data["runs"]
    if data["uncertainty"] == "se":
        n = data["n_users"]
        users = f"{min(n)}" if min(n) == max(n) else f"{min(n)}-{max(n)}"
        lines = [f"{len(data['splits'])} splits ({users} evaluated users each); "
                 "values: mean over splits ± standard error"]
    else:
        lines = [f"{data['n_users']} evaluated users (test users with a test item not in train); "
                 "values: mean ± 95% CI (1.96·sd/√n)"]
    if len(runs) > 1:
        star = ("95% t-interval over splits excludes 0" if data["uncertainty"] == "se"
                else "95% CI of the paired difference excludes 0")
        lines.append(f"Δ: paired per-user difference to {runs[0]['name']}; * = {star}")
    return lines


def study_notes(data: Dict[str, Any]) -> List[str]:
    """Warnings worth reading before trusting the numbers."""
    notes = []
    for r in data["runs"]:
        infos = [p["info"] for p in r["per_split"]]
        total = {k: sum(i[k] for i in infos) for k in infos[0]}
        if total["n_users_without_recs"]:
            notes.append(f"{r['name']}: {total['n_users_without_recs']} evaluated users have no recommendations (scored 0)")
        if total["n_rec_rows_in_train"]:
            notes.append(f"{r['name']}: {total['n_rec_rows_in_train']} recommended items were training items and were removed")
        if total["n_rec_rows_repeated"]:
            notes.append(f"{r['name']}: {total['n_rec_rows_repeated']} repeated recommendations were removed")
        if total["n_users_short_list"]:
            notes.append(f"{r['name']}: {total['n_users_short_list']} evaluated users have fewer than "
                         f"{max(data['ks'])} recommendations (precision still divides by k)")
    info = data["runs"][0]["per_split"]
    overlap = sum(p["info"]["n_test_pairs_in_train"] for p in info)
    if overlap:
        notes.append(f"{overlap} test interaction(s) were also in train and were ignored")
    return notes


def format_table(data: Dict[str, Any], notes: bool = True) -> str:
    """Plain-text table for a terminal: metrics as rows, recommendation files as columns,
    then (with ``notes``) the :func:`study_notes` lines."""
    rows = _table_rows(data)
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    lines = _legend(data) + [""]
    for row in rows:
        lines.append("  ".join(cell.ljust(w) if c == 0 else cell.rjust(w) for c, (cell, w) in enumerate(zip(row, widths))).rstrip())
    found = study_notes(data) if notes else []
    if found:
        lines += [""] + [f"note: {n}" for n in found]
    return "\n".join(lines) + "\n"


def format_markdown(data: Dict[str, Any]) -> str:
    """A self-contained Markdown report: protocol, headline table, per-split tables, notes."""
    rows = _table_rows(data)
    out = ["# Evaluation report", "", f"Produced by {data['tool']}.", ""]
    out += [f"- training data: `{data['protocol']['train']}`", f"- test data: `{data['protocol']['test']}`"]
    for r in data["runs"]:
        out.append(f"- **{r['name']}**: `{r['recs']}`")
    if data["splits"]:
        out.append(f"- splits: {', '.join(data['splits'])}")
    out += ["", *[f"{line}." for line in _legend(data)], "", *_markdown_table(rows), ""]

    if len(data["splits"]) > 1:
        out += ["## Per split", ""]
        for s, label in enumerate(data["splits"]):
            out += [f"### Split {label}", ""]
            header = ["metric"] + [r["name"] for r in data["runs"]]
            body = [[m] + [_fmt(r["per_split"][s]["metrics"][m]["mean"], r["per_split"][s]["metrics"][m]["ci95"])
                           for r in data["runs"]] for m in data["metrics"]]
            out += _markdown_table([header] + body) + [""]

    notes = study_notes(data)
    if notes:
        out += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    out += ["## Protocol", ""]
    for key in ("users", "cleaning", "averaging"):
        out.append(f"- **{key}**: {data['protocol'][key]}")
    for m in ("precision@k", "recall@k", "ndcg@k", "map@k", "hit_rate@k", "mrr", "coverage@k"):
        out.append(f"- **{m}**: {data['protocol'][m]}")
    for key in ("interval", "paired_difference", "splits"):
        if key in data["protocol"]:
            out.append(f"- **{key.replace('_', ' ')}**: {data['protocol'][key]}")
    return "\n".join(out) + "\n"


def _markdown_table(rows: List[List[str]]) -> List[str]:
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "|".join([":---"] + ["---:"] * (len(rows[0]) - 1)) + "|"]
    return lines + ["| " + " | ".join(r) + " |" for r in rows[1:]]


def format_json(data: Dict[str, Any]) -> str:
    return json.dumps(data, indent=2, allow_nan=False) + "\n"
