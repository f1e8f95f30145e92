"""A study's plain structure (:meth:`~mrec_warp.evaluation.report.Study.to_dict`) as a text
table for a terminal, a Markdown report, a long (tidy) table, or JSON.

Every report is rendered from that one structure, so they can never disagree. The text
table and the Markdown report share one layout rule (:func:`_tables`): metrics as rows and
runs as columns, each run but the baseline followed by its paired difference (Δ) with
interval and adjusted p, when that fits the width; otherwise runs as rows and metrics as
columns, cut into blocks of metrics -- in the text table as many as fit its width, each Δ
only starred when significant; in Markdown one metric family (precision@5/10/20, ...) per
table, each Δ in full. The long table (:func:`tidy_rows`) has every number of the headline
tables, one row per run and metric.
"""
from __future__ import annotations

import math
import textwrap
from typing import Any, Callable, Dict, List, Optional

from .. import strict_json
from .significance import MAX_RESAMPLES

#: Width of the text table when the caller knows none (a pipe, a file, the library): a
#: terminal's 80 columns cut a block of three ``mean ± ci`` metrics short, 100 hold it.
DEFAULT_WIDTH = 100
#: Columns of the long table (:func:`tidy_rows`), in order; ``group`` only with a grouping.
TIDY_COLUMNS = ("group", "run", "metric", "mean", "plus_minus", "interval", "baseline", "difference",
                "difference_plus_minus", "p", "p_adjusted", "p_at_floor", "significant")

_SEP = "  "

#: A cell of a run in a block: (run, metric) -> text.
Cell = Callable[[Dict[str, Any], str], str]


def _fmt(mean: Optional[float], pm: Optional[float], signed: bool = False) -> str:
    """``0.213 ± 0.011``; differences are signed."""
    if mean is None:
        return "n/a"
    text = f"{mean:+.3f}" if signed else f"{mean:.3f}"
    if pm is not None:
        text += f" ± {pm:.3f}"
    return text


def p_text(d: Dict[str, Any]) -> str:
    """The adjusted p-value of a difference in 7 characters: ``p=0.012``, ``p<0.001``, or
    ``p≤0.004`` when the test's sign flips could give no smaller p (the bound rounded up:
    the true p may be smaller)."""
    p = d["p_adjusted"]
    if p < 0.001:
        return "p<0.001"
    if d.get("p_at_floor"):
        return f"p≤{math.ceil(p * 1000 - 1e-9) / 1000:.3f}"
    return f"p={p:.3f}"


def _two_digits(p: float) -> str:
    """``0.0044``, ``0.035``, ``1``: two significant digits, never in exponent notation."""
    if p <= 0:
        return "0"
    decimals = max(0, 1 - math.floor(math.log10(p)))
    return f"{p:.{decimals}f}"


def _delta_full(d: Dict[str, Any]) -> str:
    """``+0.012 ± 0.005 p=0.003 *``: the difference, its interval, the adjusted p-value, and a
    star only when that p-value is significant."""
    text = _fmt(d["mean"], d["plus_minus"], signed=True)
    if d.get("p_adjusted") is not None:
        text += f" {p_text(d)}" + (" *" if d.get("significant") else "  ")  # spaces: the columns line up
    return text


def _delta_short(d: Dict[str, Any]) -> str:
    """``+0.012*`` (significant) or ``+0.012`` and a space, so the digits of a column line up."""
    if d["mean"] is None:
        return "n/a "
    return f"{d['mean']:+.3f}" + ("*" if d.get("significant") else " ")


def _value(run: Dict[str, Any], m: str) -> str:
    return _fmt(run["summary"][m]["mean"], run["summary"][m]["plus_minus"])


def _delta_cell(render: Callable[[Dict[str, Any]], str]) -> Cell:
    def cell(run: Dict[str, Any], m: str) -> str:
        diffs = run["difference_to_baseline"]
        return "" if diffs is None else render(diffs[m])  # the baseline's own row: nothing to compare
    return cell


def _families(metrics: List[str]) -> List[List[str]]:
    """Consecutive metrics of one name (``precision@5``, ``precision@10``) grouped."""
    out: List[List[str]] = []
    for m in metrics:
        name = m.split("@")[0]
        if out and "@" in m and out[-1][0].split("@")[0] == name:
            out[-1].append(m)
        else:
            out.append([m])
    return out


def _tables(runs: List[Dict[str, Any]], metrics: List[str], value: Cell, width: int, full: Optional[Cell] = None,
            short: Optional[Cell] = None, by_family: bool = False) -> List[List[List[str]]]:
    """The headline as tables (lists of rows): metrics as rows when that fits ``width`` (each
    run's value, then the difference of each run but the baseline as ``full`` cells); else
    runs as rows in blocks of metrics (:func:`_run_blocks`, differences as ``short`` cells),
    as many metrics as fit ``width`` per block, or one family per block with ``by_family``.
    Without ``full``, values only."""
    wide = _metric_rows(runs, metrics, value, full)
    if max(len(line) for line in _aligned(wide)) <= width:
        return [wide]
    return _run_blocks(runs, metrics, value, short if full is not None else None, None if by_family else width)


def _metric_rows(runs: List[Dict[str, Any]], metrics: List[str], value: Cell, delta: Optional[Cell]) -> List[List[str]]:
    """One row per metric: its value for each run, then each difference to the baseline."""
    challengers = [r for r in runs if r.get("difference_to_baseline") is not None] if delta is not None else []
    rows = [["metric"] + [r["name"] for r in runs] + [f"Δ {r['name']}" for r in challengers]]
    for m in metrics:
        rows.append([m] + [value(r, m) for r in runs] + [delta(r, m) for r in challengers if delta is not None])
    return rows


def _run_blocks(runs: List[Dict[str, Any]], metrics: List[str], value: Cell, delta: Optional[Cell],
                width: Optional[int]) -> List[List[List[str]]]:
    """Tables of one row per run (after a header): the run's name, then for each metric its
    value and, with ``delta``, its difference to the baseline under ``Δ``.

    The metrics are cut into blocks, a family (``precision@5/10/20``) kept in one block when
    it fits one: with ``width``, as many as fit in ``width`` characters beside the names
    (one alone when even that does not fit); without, one family per block.
    """
    names = ["run"] + [r["name"] for r in runs]
    columns = {}
    for m in metrics:
        cols = [[m] + [value(r, m) for r in runs]]
        if delta is not None:
            cols.append(["Δ"] + [delta(r, m) for r in runs])
        columns[m] = cols
    used = {m: sum(len(_SEP) + max(len(c) for c in col) for col in cols) for m, cols in columns.items()}
    room = None if width is None else width - max(len(n) for n in names)
    blocks: List[List[str]] = []
    for family in _families(metrics):
        if room is None:
            blocks.append(family)
            continue
        # a family that fits no block alone goes metric by metric
        for unit in [family] if sum(used[m] for m in family) <= room else [[m] for m in family]:
            if blocks and sum(used[m] for m in blocks[-1] + unit) <= room:
                blocks[-1] += unit
            else:
                blocks.append(list(unit))
    tables = []
    for block in blocks:
        cols = [names] + [col for m in block for col in columns[m]]
        tables.append([[col[i] for col in cols] for i in range(len(names))])
    return tables


def _aligned(rows: List[List[str]]) -> List[str]:
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    return [_SEP.join(cell.ljust(w) if c == 0 else cell.rjust(w) for c, (cell, w) in enumerate(zip(row, widths)))
            .rstrip() for row in rows]


def _markdown_table(rows: List[List[str]]) -> List[str]:
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "|".join([":---"] + ["---:"] * (len(rows[0]) - 1)) + "|"]
    return lines + ["| " + " | ".join(cell.strip() for cell in r) + " |" for r in rows[1:]]  # no alignment padding


def _legend(data: Dict[str, Any]) -> List[str]:
    """What the values, Δ, the star and a ``p≤`` mean, in a few sentences."""
    if data["uncertainty"] == "se":
        n = data["n_users"]
        users = f"{min(n)}" if min(n) == max(n) else f"{min(n)}-{max(n)}"
        lines = [f"{len(data['splits'])} splits ({users} evaluated users each); "
                 "values: mean over splits ± standard error"]
    else:
        lines = [f"{data['n_users']} evaluated users (test users with a test item not in train); "
                 "values: mean ± 95% CI (1.96·sd/√n)"]
    c = data.get("comparison")
    if c:
        adjusted = "p" if c["correction"] == "no correction" else f"{c['correction']}-adjusted p"
        lines.append(f"Δ: paired difference to {c['baseline']}; p: {adjusted} of the {c['test']}, over the "
                     f"{c['n_tests']} tests of this table; * = {adjusted} < {c['alpha']:g}")
        lines += _resolution(c)
    return lines


def _resolution(c: Dict[str, Any]) -> List[str]:
    """Why the test drew more sign flips than usual, and which p-values sit at the floor."""
    lines = []
    if c.get("n_resamples") and c["n_resamples"] != c["n_resamples_default"]:
        lines.append(f"{c['n_resamples']:,} sign flips instead of {c['n_resamples_default']:,}, so that the "
                     f"{c['n_tests']} corrected tests can give an adjusted p well below {c['alpha']:g} "
                     f"(never more than {MAX_RESAMPLES:,}: ten times the time of {c['n_resamples_default']:,})")
    if c.get("n_at_floor"):
        lines.append(f"{c['n_at_floor']} of the {c['n_tests']} p-values are the smallest the "
                     f"{c['n_resamples']:,} sign flips can give (adjusted: up to {_two_digits(c['p_adjusted_floor'])}, "
                     "shown as p≤ and rounded up): their true p may be smaller")
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


def format_table(data: Dict[str, Any], notes: bool = True, width: int = DEFAULT_WIDTH) -> str:
    """Plain-text report for a terminal, every line at most ``width`` characters.

    Each value is ``mean ± interval``. When it fits, metrics are rows and runs columns, each
    run but the baseline followed by its difference to the baseline (Δ) with its interval and
    adjusted p; otherwise runs are rows and metrics columns, in blocks of metrics that fit
    ``width``, each Δ starred when significant (every p-value is in :func:`tidy_rows` and the
    JSON). The legend, the verdicts in words, each group's table and (with ``notes``) the
    :func:`study_notes` lines are wrapped to ``width``.
    """
    lines = _wrapped(_legend(data), width) + _blocks_text(data, width) + _words(comparison_lines(data), width)
    for group in data.get("groups", {}).get("groups", []):
        title = f"{data['groups']['by']}: {group['name']} ({'; '.join(sorted(set(group['bounds'])))})"
        lines += [""] + _wrapped([title], width) + _blocks_text({**data, **group}, width)
        lines += _words(comparison_lines(group), width)
    found = study_notes(data) if notes else []
    if found:
        lines += [""] + _wrapped([f"note: {n}" for n in found], width)
    return "\n".join(lines) + "\n"


def _blocks_text(data: Dict[str, Any], width: int) -> List[str]:
    compared = data.get("comparison") is not None
    full = _delta_cell(_delta_full) if compared else None
    short = _delta_cell(_delta_short) if compared else None
    out: List[str] = []
    for rows in _tables(data["runs"], data["metrics"], _value, width, full, short):
        out += [""] + _aligned(rows)
    return out


def _wrapped(lines: List[str], width: int) -> List[str]:
    """Each line cut at spaces to ``width``, its continuation indented by two."""
    return [part for line in lines for part in textwrap.wrap(line, width, subsequent_indent="  ",
                                                             break_on_hyphens=False) or [""]]


def _words(lines: List[str], width: int) -> List[str]:
    return [""] + _wrapped(lines, width) if lines else []


def headline_markdown(data: Dict[str, Any]) -> List[str]:
    """The headline tables in Markdown (as :func:`format_table` lays them out, in full), each
    followed by a blank line."""
    full = _delta_cell(_delta_full) if data.get("comparison") else None
    out: List[str] = []
    for rows in _tables(data["runs"], data["metrics"], _value, DEFAULT_WIDTH, full, full, by_family=True):
        out += _markdown_table(rows) + [""]
    return out


def format_markdown(data: Dict[str, Any]) -> str:
    """A self-contained Markdown report: protocol, headline tables, per-split tables, notes."""
    out = ["# Evaluation report", "", f"Produced by {data['tool']}.", ""]
    out += [f"- training data: `{data['protocol']['train']}`", f"- test data: `{data['protocol']['test']}`"]
    for r in data["runs"]:
        base = " (baseline)" if data.get("comparison") and r["name"] == data["baseline"] else ""
        out.append(f"- **{r['name']}**{base}: `{r['recs']}`")
    if data["splits"]:
        out.append(f"- splits: {', '.join(data['splits'])}")
    out += ["", *[f"{line}." for line in _legend(data)], "", *headline_markdown(data)]
    verdicts = comparison_lines(data)
    if verdicts:
        out += [f"- {v}" for v in verdicts] + [""]
    if "groups" in data:
        out += [f"## By {data['groups']['by']}", "", f"Rule: {data['groups']['rule']}.", ""]
        for group in data["groups"]["groups"]:
            out += [f"### {group['name']} ({'; '.join(sorted(set(group['bounds'])))})", ""]
            out += headline_markdown({**data, **group})
            out += [f"- {v}" for v in comparison_lines(group)] + [""]

    if len(data["splits"]) > 1:
        out += ["## Per split", ""]
        for s, label in enumerate(data["splits"]):
            def value(run: Dict[str, Any], m: str, s: int = s) -> str:
                stat = run["per_split"][s]["metrics"][m]
                return _fmt(stat["mean"], stat["ci95"])
            out += [f"### Split {label}", ""]
            for rows in _tables(data["runs"], data["metrics"], value, DEFAULT_WIDTH, by_family=True):
                out += _markdown_table(rows) + [""]

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
    for key in ("interval", "paired_difference", "paired_test", "resolution", "splits"):
        compared = key.startswith("paired") or key == "resolution"
        if key in data["protocol"] and (data.get("comparison") or not compared):
            out.append(f"- **{key.replace('_', ' ')}**: {data['protocol'][key]}")
    if data.get("comparison"):
        c = data["comparison"]
        out.append(f"- **this report**: {c['test']}; {c['correction']} over the {c['n_tests']} tests of the "
                   f"headline table (each group table is its own family); significant at {c['alpha']:g}")
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------------------
# the long (tidy) table and JSON
# ----------------------------------------------------------------------------------------
def tidy_rows(data: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Every headline number, one row (a dict) per run and metric, and per group with a
    grouping (``group``: ``all``, then each group); ready for ``pandas.DataFrame(rows)``.

    Columns (:data:`TIDY_COLUMNS`): ``mean`` and ``plus_minus`` (``interval``: ``ci95``, a
    95% CI half-width over users, or ``se``, the standard error over splits); for every run
    but the baseline, ``difference`` to ``baseline`` with ``difference_plus_minus``, the raw
    ``p``, ``p_adjusted`` over the table, ``p_at_floor`` (p is the smallest the permutation
    test's sign flips can give: read it as an upper bound) and ``significant``. A number
    that does not apply (the baseline's difference, an untested global metric) is None.
    """
    tables = [("all", data)] + [(g["name"], g) for g in data.get("groups", {}).get("groups", [])]
    rows = []
    for group, table in tables:
        for run in table["runs"]:
            diffs = run["difference_to_baseline"] or {}
            for m in data["metrics"]:
                s, d = run["summary"][m], diffs.get(m) or {}
                row = {"group": group, "run": run["name"], "metric": m, "mean": s["mean"],
                       "plus_minus": s["plus_minus"], "interval": s["kind"], "baseline": data["baseline"],
                       "difference": d.get("mean"), "difference_plus_minus": d.get("plus_minus"), "p": d.get("p"),
                       "p_adjusted": d.get("p_adjusted"),
                       "p_at_floor": d.get("p_at_floor") if d.get("p") is not None else None,
                       "significant": d.get("significant") if d.get("p_adjusted") is not None else None}
                if "groups" not in data:
                    del row["group"]
                rows.append(row)
    return rows


def format_long(data: Dict[str, Any]) -> str:
    """:func:`tidy_rows` as tab-separated text with a header: numbers as Python writes them
    (they read back exactly), an empty cell for None, ``True``/``False``.
    ``pandas.read_csv(path, sep="\\t")`` loads it."""
    rows = tidy_rows(data)
    columns = list(rows[0]) if rows else [c for c in TIDY_COLUMNS if c != "group"]
    lines = ["\t".join(columns)]
    for row in rows:
        lines.append("\t".join("" if row[c] is None else repr(row[c]) if isinstance(row[c], float) else str(row[c])
                               for c in columns))
    return "\n".join(lines) + "\n"


def format_json(data: Dict[str, Any]) -> str:
    """The whole structure, plus ``table``: the long table's rows (:func:`tidy_rows`), as
    strict JSON (RFC 8259: ``null``, never ``NaN`` or ``Infinity``)."""
    return strict_json.dumps({**data, "table": tidy_rows(data)}, indent=2) + "\n"
