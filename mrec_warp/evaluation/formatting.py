"""A study's plain structure (:meth:`~mrec_warp.evaluation.report.Study.to_dict`) as a text
table for a terminal, a Markdown report, or JSON.

Every report is rendered from that one structure, so they can never disagree.
"""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional


def _fmt(mean: Optional[float], pm: Optional[float], signed: bool = False) -> str:
    """``0.213 ± 0.011``; differences are signed."""
    if mean is None:
        return "n/a"
    text = f"{mean:+.3f}" if signed else f"{mean:.3f}"
    if pm is not None:
        text += f" ± {pm:.3f}"
    return text


def _p(p: float) -> str:
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"


def _diff_cell(d: Dict[str, Any]) -> str:
    """``+0.012 ± 0.005 p=0.003 *``: the difference, its interval, the adjusted p-value, and a
    star only when that p-value is significant."""
    text = _fmt(d["mean"], d["plus_minus"], signed=True)
    if d.get("p_adjusted") is not None:
        text += f" {_p(d['p_adjusted'])}"
        if d.get("significant"):
            text += " *"
    return text


def _table_rows(data: Dict[str, Any]) -> List[List[str]]:
    runs = data["runs"]
    header = ["metric"] + [r["name"] for r in runs] + [f"Δ {r['name']}" for r in runs[1:]]
    rows = [header]
    for m in data["metrics"]:
        row = [m]
        row += [_fmt(r["summary"][m]["mean"], r["summary"][m]["plus_minus"]) for r in runs]
        row += [_diff_cell(r["difference_to_first"][m]) for r in runs[1:]]
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
        c = data["comparison"]
        adjusted = "p" if c["correction"] == "no correction" else f"{c['correction']}-adjusted p"
        lines.append(f"Δ: paired difference to {runs[0]['name']}; p: {adjusted} of the {c['test']}, over the "
                     f"{c['n_tests']} tests of this table; * = {adjusted} < {c['alpha']:g}")
    return lines


def comparison_lines(data: Dict[str, Any]) -> List[str]:
    """What differs from the baseline, in words, and what to keep in mind reading it."""
    c = data.get("comparison")
    return [] if not c else list(c["verdicts"]) + list(c["notes"])


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
    lines = _legend(data) + [""] + _aligned(_table_rows(data))
    lines += _words(comparison_lines(data))
    for group in data.get("groups", {}).get("groups", []):
        lines += ["", f"{data['groups']['by']}: {group['name']} ({'; '.join(sorted(set(group['bounds'])))})", ""]
        lines += _aligned(_table_rows({**data, **group}))
        lines += _words(comparison_lines(group))
    found = study_notes(data) if notes else []
    if found:
        lines += [""] + [f"note: {n}" for n in found]
    return "\n".join(lines) + "\n"


def _words(lines: List[str]) -> List[str]:
    return [""] + lines if lines else []


def _aligned(rows: List[List[str]]) -> List[str]:
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) if c == 0 else cell.rjust(w) for c, (cell, w) in enumerate(zip(row, widths))).rstrip()
            for row in rows]


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
    verdicts = comparison_lines(data)
    if verdicts:
        out += [f"- {v}" for v in verdicts] + [""]
    if "groups" in data:
        out += [f"## By {data['groups']['by']}", "", f"Rule: {data['groups']['rule']}.", ""]
        for group in data["groups"]["groups"]:
            out += [f"### {group['name']} ({'; '.join(sorted(set(group['bounds'])))})", ""]
            out += _markdown_table(_table_rows({**data, **group})) + [""]
            out += [f"- {v}" for v in comparison_lines(group)] + [""]

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
    shown = {m.split("@")[0] + ("@k" if "@" in m else "") for m in data["metrics"]}
    always = ("precision@k", "recall@k", "ndcg@k", "map@k", "hit_rate@k", "mrr", "coverage@k")
    for m in always + ("novelty@k", "popularity@k", "long_tail@k", "diversity@k", "gini@k"):
        if m in always or m in shown:  # beyond-accuracy ones only when they are in the report
            out.append(f"- **{m}**: {data['protocol'][m]}")
    for key in ("interval", "paired_difference", "paired_test", "splits"):
        if key in data["protocol"] and (data.get("comparison") or not key.startswith("paired")):
            out.append(f"- **{key.replace('_', ' ')}**: {data['protocol'][key]}")
    if data.get("comparison"):
        c = data["comparison"]
        out.append(f"- **this report**: {c['test']}; {c['correction']} over the {c['n_tests']} tests of the "
                   f"headline table (each group table is its own family); significant at {c['alpha']:g}")
    return "\n".join(out) + "\n"


def _markdown_table(rows: List[List[str]]) -> List[str]:
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "|".join([":---"] + ["---:"] * (len(rows[0]) - 1)) + "|"]
    return lines + ["| " + " | ".join(r) + " |" for r in rows[1:]]


def format_json(data: Dict[str, Any]) -> str:
    return json.dumps(data, indent=2, allow_nan=False) + "\n"
