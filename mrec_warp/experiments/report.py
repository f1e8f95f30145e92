"""An experiment's report folder.

Per split set ``NAME``, evaluate's own reports of the study (:mod:`mrec_warp.evaluation.report`):
``NAME/report.md``, ``NAME/report.json`` and ``NAME/per_user.csv``; at the top:

* ``results.md`` -- each split set's headline table (mean ± interval per model and metric,
  paired difference to the baseline with its corrected p-value) and the verdicts in words;
* ``results.csv`` -- the same numbers, one row per (split set, model, metric);
* ``runs.csv`` -- one row per (model, split): training size, epochs kept and trained;
* ``accuracy-vs-novelty.png`` -- accuracy against novelty and coverage (needs matplotlib);
* ``experiment.toml`` (the file's exact bytes) and ``reproduce.json`` (data and config
  digests, seeds, package versions, the command);
* ``tuned.json`` -- with models that ``tune``: the parameters chosen on each split;
* ``.mrec-warp-report.json`` -- whose report the folder holds (:func:`claim_folder`).

A report folder is an experiment's own: a folder holding other files, or the report of
another experiment (another configuration), is refused before any work unless ``force``
is given, and then the whole earlier report is replaced (its files that the new report
does not write are removed), so one folder never holds two experiments.

All but the plot are text rendered from the study's plain structure, so the same file gives
the same bytes. Run times are not in them: they are logged, and kept in ``timing.json``.
"""
from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import os
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any, Dict, List, Optional

from .. import strict_json
from .._version import __version__
from ..evaluation.formatting import comparison_lines, headline_markdown
from ..evaluation.report import write_reports
from ..errors import InputError
from ..files import atomic_write, file_digest, is_temp_name
from ..progress import plural
from ..workdir import JOB_FILE

#: Packages whose versions can change a number of the report.
VERSIONED = ("numpy", "scipy", "pandas", "joblib", "threadpoolctl", "click", "matplotlib")
PLOT_FILE = "accuracy-vs-novelty.png"


def _versions() -> Dict[str, Optional[str]]:
    found: Dict[str, Optional[str]] = {"mrec-warp": __version__, "python": platform.python_version()}
    for name in VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def _data_source(cfg) -> Dict[str, Any]:
    """Where the data came from: the file as the config gives it, or the data set ``fetch``
    read from the cache (the file is then the cache's), with the data's digest."""
    if cfg.data.get("fetched"):
        return {"fetch": cfg.data["fetched"], "file": cfg.data["path"], "sha256": _data_digest(cfg.data["path"])}
    return {"file": cfg.raw["data"]["path"], "relative_to": "the config file's folder",
            "sha256": _data_digest(cfg.data["path"])}


def reproduce_info(result) -> Dict[str, Any]:
    """What reproducing the report needs: the config and data digests, every seed, the versions."""
    cfg = result.config
    return {
        "command": "mrec-warp experiment experiment.toml",
        # paths as the file gives them, relative to its folder (results.md says so too), not to
        # where the command happened to run
        "config": {"file": cfg.path.name, "sha256": cfg.digest},
        "data": _data_source(cfg),
        "seeds": {"models": cfg.seed, "paired_test": cfg.seed,
                  "splits": {s.name: s.seed for s in cfg.splits}},
        "threads": "one per model fit, BLAS on one thread",
        "versions": _versions(),
        "platform": {"system": platform.system(), "machine": platform.machine(),
                     "byteorder": sys.byteorder},
    }


def _data_digest(path: str) -> str:
    return file_digest(path)


def _cell(stat: Dict[str, Any]) -> Dict[str, Any]:
    return {k: stat.get(k) for k in ("mean", "plus_minus", "kind")}


def results_rows(result) -> List[Dict[str, Any]]:
    """One row per (split set, model, metric): the headline number, and for challengers the
    paired difference to the baseline with its raw and corrected p-values."""
    rows = []
    for set_name, study in result.studies.items():
        data = study.to_dict()
        for run in data["runs"]:
            for m in data["metrics"]:
                s = run["summary"][m]
                d = (run["difference_to_baseline"] or {}).get(m) or {}
                rows.append({"split_set": set_name, "model": run["name"], "metric": m, "mean": s["mean"],
                             "plus_minus": s["plus_minus"], "interval": s["kind"],
                             "difference": d.get("mean"), "difference_plus_minus": d.get("plus_minus"),
                             "p": d.get("p"), "p_adjusted": d.get("p_adjusted"),
                             "significant": d.get("significant")})
    return rows


def format_results_csv(rows: List[Dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:  # repr of a float is exact and the same on every run; blank where none applies
        writer.writerow({k: "" if v is None else (repr(v) if isinstance(v, float) else v) for k, v in row.items()})
    return buf.getvalue()


def _data_words(cfg) -> str:
    """The data in the report's first line: the config's path, or the data set fetched."""
    if cfg.data.get("fetched"):
        return f"`{cfg.data['fetched']}` (fetched into the cache)"
    return f"`{cfg.raw['data']['path']}` (relative to the file)"


def format_results_markdown(result) -> str:
    """Each split set's headline table and verdicts, as evaluate's reports show them."""
    cfg = result.config
    out = ["# Experiment report", "", f"Produced by mrec-warp {__version__} from `experiment.toml` "
           f"(sha256 {cfg.digest[:12]}); data {_data_words(cfg)}.", ""]
    for model in cfg.models:
        given = ", ".join(f"{n}={v}" for n, v in model.params.items()) or "defaults"
        tuned = f"; tuned on each split ({model.tune} random trials and the defaults: tuned.json)" if model.tune else ""
        baseline = " (baseline)" if model.name == cfg.baseline else ""
        out.append(f"- **{model.name}**{baseline}: {model.family}, {given}{tuned}{_epochs_words(result, model.name)}")
    out += ["", f"Only differences to the baseline ({cfg.baseline}) are tested; to compare two other models, "
            "make one of them the baseline (the baseline key of [evaluate]) and rerun.", ""]
    for set_name, study in result.studies.items():
        data = study.to_dict()
        split_set = next(s for s in cfg.splits if s.name == set_name)
        how = (f"{split_set.kind}, {plural(split_set.repeats, 'split')}, seed {split_set.seed}"
               + (f", test_fraction {split_set.test_fraction}" if split_set.test_fraction is not None else "")
               + (f", leave_out {split_set.leave_out}" if split_set.leave_out is not None else "")
               + (f", cutoff {split_set.cutoff}" if split_set.cutoff is not None else ""))
        n = data["n_users"]
        users = n if isinstance(n, int) else (f"{min(n)}" if min(n) == max(n) else f"{min(n)}-{max(n)}")
        interval = ("mean over splits ± standard error" if data["uncertainty"] == "se"
                    else "mean ± 95% CI over users")
        c = data.get("comparison") or {}
        out += [f"## {set_name} ({how})", "",
                f"{users} evaluated users per split; values: {interval}."
                + (f" Δ: paired difference to {c['baseline']}; p: {c['correction']}-adjusted p of the "
                   f"{c['test']} over the {c['n_tests']} tests of this table; * = adjusted p < {c['alpha']:g}."
                   + _star_words(data, set_name, cfg) if c else ""), "", *headline_markdown(data)]
        out += [f"- {line}" for line in comparison_lines(data)] + [""]
    out += ["Per split, per user and the protocol: `SPLIT_SET/report.md`, `SPLIT_SET/per_user.csv`; "
            "reproduce with `reproduce.json`.", ""]
    return "\n".join(out)


def _star_words(data: Dict[str, Any], set_name: str, cfg) -> str:
    """What a star does and does not say, and how the one-number metrics are tested."""
    several = data["uncertainty"] == "se"
    words = (f" A star says the difference is consistent across {'splits' if several else 'users'}, not that "
             "it is large: read Δ and its interval beside it.")
    global_ = [m for m in ("coverage", "gini") if m in cfg.metrics]
    if global_:
        names = " and ".join({"coverage": "coverage", "gini": "Gini"}[m] for m in global_)
        names = names[0].upper() + names[1:]
        words += (f" {names} {'is' if len(global_) == 1 else 'are'} one number per split: "
                  + ("tested over splits like the per-user metrics (a t-test on the per-split values), so a tiny "
                     "but steady difference can be starred." if several else "shown, not tested."))
    return words


def _epochs_words(result, model: str) -> str:
    """``; early stopping kept epoch 2 of 5 trained (max 200)`` over the model's runs (ranges
    across splits), or nothing for a model without epochs or with ``epochs`` fixed."""
    rows = [r for r in result.run_rows if r["model"] == model and r.get("best_epoch") is not None
            and r.get("max_epochs") is not None]
    if not rows:
        return ""

    def span(key):
        lo, hi = min(r[key] for r in rows), max(r[key] for r in rows)
        return f"{lo}" if lo == hi else f"{lo}-{hi}"
    return (f"; early stopping kept epoch {span('best_epoch')} of {span('epochs_trained')} trained "
            f"(max {span('max_epochs')}; per run: runs.csv)")


def format_runs_csv(rows: List[Dict[str, Any]]) -> str:
    """``runs.csv``: one row per (model, split): training size and, for iterative families,
    the epochs kept and trained (blank: no epochs, or ``epochs`` fixed)."""
    buf = io.StringIO()
    fields = ["split_set", "split", "model", "users", "items", "best_epoch", "epochs_trained", "max_epochs"]
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if row.get(k) is None else row[k] for k in fields})
    return buf.getvalue()


def render_plot(result) -> bytes:
    """PNG: the first accuracy metric at the largest cut-off against novelty and coverage,
    one row of panels per split set, one point (with its interval) per model."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    k = max(result.config.ks)
    studies = list(result.studies.items())
    metrics = studies[0][1].to_dict()["metrics"]
    accuracy = next((f"{m}@{k}" for m in ("ndcg", "precision", "recall", "map", "hit_rate") if f"{m}@{k}" in metrics),
                    None)
    xs = [m for m in (f"novelty@{k}", f"coverage@{k}") if m in metrics]
    if accuracy is None or not xs:
        return b""
    fig = Figure(figsize=(5.5 * len(xs), 4.5 * len(studies) + 0.4), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(studies), len(xs), squeeze=False)
    for r, (name, study) in enumerate(studies):
        data = study.to_dict()
        bars = "bars: standard error over splits" if data["uncertainty"] == "se" else "bars: 95% CI over users"
        for c, x in enumerate(xs):
            ax = axes[r][c]
            points = []
            for run in data["runs"]:
                sx, sy = run["summary"][x], run["summary"][accuracy]
                if sx["mean"] is None or sy["mean"] is None:
                    continue
                ax.errorbar(sx["mean"], sy["mean"], xerr=sx["plus_minus"] or 0, yerr=sy["plus_minus"] or 0,
                            marker="o", capsize=3)
                points.append((run["name"], sx["mean"], sy["mean"]))
            for label, px, py, dy in _label_offsets(points, ax):
                ax.annotate(label, (px, py), textcoords="offset points", xytext=(5, dy), fontsize=8)
            ax.set_xlabel(x)
            ax.set_ylabel(accuracy)
            ax.set_title(f"{name} ({bars})", fontsize=9)
            ax.grid(alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _label_offsets(points, ax, step: float = 10.0):
    """``(label, x, y, dy)``: each point's label raised ``dy`` points above the last label it
    would overlap (points close in both axes, as models near popularity are), so no two labels
    print over each other."""
    xs = [p[1] for p in points] or [0.0]
    ys = [p[2] for p in points] or [0.0]
    wx, wy = (max(xs) - min(xs)) or 1.0, (max(ys) - min(ys)) or 1.0
    placed: List[tuple] = []
    out = []
    for label, x, y in sorted(points, key=lambda p: (p[2], p[1], p[0])):
        dy = 4.0
        for _, px, py, pdy in placed:
            if abs(px - x) < 0.12 * wx and abs(py - y) < 0.06 * wy and abs(pdy - dy) < step:
                dy = pdy + step
        placed.append((label, x, y, dy))
        out.append((label, x, y, dy))
    return out


def report_files(cfg, output) -> List[str]:
    """Every file the report folder may get (checked against the inputs before any work)."""
    names = ["results.md", "results.csv", "runs.csv", "experiment.toml", "reproduce.json", "timing.json", "tuned.json",
             PLOT_FILE]
    names += [f"{s.name}/{f}" for s in cfg.splits for f in ("report.md", "report.json", "per_user.csv")]
    return [str(output / name) for name in names]


def write_report(result, notes: Optional[List[str]] = None) -> List[str]:
    """Write the report folder (see the module docstring); returns the paths written."""
    out = result.output
    out.mkdir(parents=True, exist_ok=True)
    refuse_links(out)  # again: a link made while the experiment ran
    written: List[str] = []
    for set_name, study in result.studies.items():
        folder = out / set_name
        folder.mkdir(exist_ok=True)
        written += write_reports(study, markdown=folder / "report.md", json_path=folder / "report.json",
                                 per_user=folder / "per_user.csv", notes=notes)
    contents = [(out / "results.md", format_results_markdown(result).encode()),
                (out / "results.csv", format_results_csv(results_rows(result)).encode()),
                (out / "runs.csv", format_runs_csv(result.run_rows).encode()),
                (out / "experiment.toml", result.config.text),
                (out / "reproduce.json", (strict_json.dumps(reproduce_info(result), indent=2) + "\n").encode())]
    if result.tuned:
        contents.append((out / "tuned.json", (strict_json.dumps(result.tuned, indent=1, sort_keys=True) + "\n").encode()))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        if notes is not None:
            notes.append("no plot: matplotlib is not installed (pip install mrec-warp[plot])")
    else:
        png = render_plot(result)
        if png:
            contents.append((out / PLOT_FILE, png))
        elif notes is not None:
            notes.append("no plot: it needs an accuracy metric and novelty or coverage in the metrics list")
    for path, content in contents:
        with atomic_write(path, mode="wb") as fh:
            fh.write(content)
        written.append(str(path))
    return written


def write_timing(result) -> str:
    """``timing.json``: the wall time (the only file that differs between reruns)."""
    path = result.output / "timing.json"
    with atomic_write(path) as fh:
        strict_json.dump({"seconds": round(result.seconds, 1), "runs": result.runs, "skipped": result.skipped}, fh)
        fh.write("\n")
    return str(path)


#: The report folder's record of whose report it holds: the experiment's digest
#: (:func:`experiment_digest`) and the files its report wrote.
OWNER_FILE = ".mrec-warp-report.json"


def experiment_digest(cfg) -> str:
    """SHA-256 of what the experiment is: every key of its file but ``output``, in a
    canonical form (comments, spacing and key order do not change it)."""
    meaning = {key: value for key, value in cfg.raw.items() if key != "output"}
    return hashlib.sha256(json.dumps(meaning, sort_keys=True, default=str).encode()).hexdigest()


def _read_owner(output: Path) -> Optional[Dict[str, Any]]:
    try:
        found = json.loads((output / OWNER_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        found = None
    if not isinstance(found, dict) or not isinstance(found.get("experiment_sha256"), str):
        return {"experiment_sha256": "unreadable", "files": []}
    return found


def _write_owner(output: Path, digest: str, files: List[str]) -> None:
    with atomic_write(output / OWNER_FILE) as fh:
        strict_json.dump({"experiment_sha256": digest, "files": sorted(set(files))}, fh, indent=1)
        fh.write("\n")


def _foreign(output: Path, work: str) -> List[str]:
    """What ``output`` holds that no report of ours put there: not the record, not our
    temporaries, not the work folder of a run of ours (it holds ``job.json``)."""
    names = []
    for name in sorted(os.listdir(output)):
        if name == OWNER_FILE or is_temp_name(name):
            continue
        if name == work and (output / name / JOB_FILE).is_file():
            continue  # a run interrupted before it wrote its record: its job says whose it is
        names.append(name)
    return names


def refuse_links(output: Path) -> None:
    """Refuse, in one line, a report folder holding a symbolic link (a ``results.md`` or a
    split-set folder pointing elsewhere): the report is written through its names, and a
    link would make it replace a file outside the folder. The folder itself may be a link."""
    if not output.is_dir():
        return
    for folder, dirs, files in os.walk(output):  # links to folders are listed, never followed
        for name in dirs + files:
            path = Path(folder) / name
            if path.is_symlink():
                raise InputError(f"the report folder holds a symbolic link, {path.relative_to(output)} -> "
                                 f"{os.readlink(path)}: the report would be written through it, outside the folder",
                                 path=str(output), hint="remove the link, or give another output folder")


def claim_folder(output: Path, digest: str, force: bool = False, work: str = "work") -> Optional[Dict[str, Any]]:
    """Make ``output`` the report folder of the experiment ``digest``, before any work.

    A new or empty folder is claimed (:data:`OWNER_FILE` written); a folder of this
    experiment's report (a rerun, or a resumed run) is kept as it is. A folder holding
    another experiment's report, or files mrec-warp did not write, is refused in one line,
    unless ``force``: then it is claimed, and :func:`record_report` removes the earlier
    report's files the new one does not write (files of the same name are replaced).

    Returns
    -------
    dict or None
        ``None`` when the folder already was this experiment's; else the record it held
        before (empty: none), which :func:`release_folder` puts back when the run fails
        before any work.

    Raises
    ------
    InputError
        The folder is someone else's and ``force`` is not given.
    """
    refuse_links(output)  # even with force: never written through
    owner = _read_owner(output) if output.is_dir() else None
    if owner is not None:
        if owner["experiment_sha256"] == digest:
            return None
        if not force:
            raise InputError(f"the report folder holds the report of another experiment (configuration sha256 "
                             f"{owner['experiment_sha256'][:12]}, this one {digest[:12]})", path=str(output),
                             hint="give another output folder, or --force (force=True) to replace that report")
        earlier = [str(f) for f in owner.get("files", []) if isinstance(f, str)]
    else:
        foreign = _foreign(output, work) if output.is_dir() else []
        if foreign and not force:
            more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
            raise InputError(f"the report folder holds files mrec-warp did not write ({', '.join(foreign[:3])}{more})",
                             path=str(output), hint="give a new or empty folder, or --force (force=True) to write "
                                                    "the report there (files of the report's names are replaced)")
        earlier = []
    output.mkdir(parents=True, exist_ok=True)
    _write_owner(output, digest, earlier)  # the earlier report's files go once the new report is written
    return owner or {}


def release_folder(output: Path, previous: Optional[Dict[str, Any]]) -> None:
    """Undo :func:`claim_folder` (a run that failed before any work): the folder's earlier
    record back, or none as before. ``previous`` is what :func:`claim_folder` returned."""
    if previous is None:
        return
    if previous:
        _write_owner(output, previous["experiment_sha256"], previous.get("files", []))
        return
    with contextlib.suppress(OSError):
        (output / OWNER_FILE).unlink()


def record_report(output: Path, digest: str, written: List[str]) -> None:
    """Record the report just written as the folder's, and remove the files of an earlier
    report (of this or, after ``force``, another experiment) that it did not write again,
    with the split-set folders they leave empty."""
    owner = _read_owner(output) or {"files": []}
    mine = {Path(os.path.relpath(p, output)).as_posix() for p in written}
    root = output.resolve()
    for name in owner.get("files", []):
        if not isinstance(name, str) or name in mine:
            continue
        target = (output / name).resolve()
        if root not in target.parents:  # the record names files inside the folder only
            continue
        with contextlib.suppress(OSError):
            target.unlink()
        with contextlib.suppress(OSError):
            if target.parent != root:
                target.parent.rmdir()  # an emptied split-set folder
    _write_owner(output, digest, sorted(mine))


__all__ = ["write_report", "report_files", "write_timing", "results_rows", "reproduce_info", "claim_folder",
           "record_report", "experiment_digest"]
