#!/usr/bin/env python
"""Every family's defaults on the selection suite: P@10 per set, 3 seeds, before vs after.

The suite (issue 22): sets of different shapes, each split per user 80/20 with seed 42 by
the library's own ``prepare`` (written once under ``--data``, default /tmp/defaults-data,
never into the project):

* ``ml-100k``: MovieLens 100k, ratings >= 4 (``prepare --min-rating 4``: the train file
  keeps the ratings 4 and 5 as its value column);
* ``mls-4``: ml-latest-small (671 users x 9.1k movies), ratings >= 4, values kept;
* ``mls-bin``: ml-latest-small, every row, as a binary ``user item`` file;
* ``syn-longtail``: a long-tail catalogue with few interactions per item (2k users x
  17k items, 90k pairs: the shape of a music log), binary;
* ``syn-wide``: many users x few items (20k users x 400 items, 200k pairs), binary;
* ``syn-counts``: play counts instead of 0/1 (3k x 3k, 100k pairs, ``values="counts"``);
* ``syn-library``: a sparse library log (5.5k users x 17k items, 205k pairs: ~37 items per
  user over a long catalogue, the shape of a new user's log where WRMF's fixed defaults lost
  to implicit's), binary;
* ``syn-catalogue``: a small dense catalogue (4k users x 140 items, 120k pairs), binary.

``CHECK_SETS`` (held-out binary shapes and generator settings that checked WRMF's binary
alpha rule, docs/models/wrmf.rst, 'alpha "auto"') run when ``--sets`` names them; they are not
in the default.

Every family (popularity, itemknn, rp3beta, slim, ease, wrmf, warp) is trained as ``mrec-warp
train`` trains it (:func:`mrec_warp.stages.train.train`, its defaults, one thread), top 10
of every test user with training items excluded, P@10 from :mod:`mrec_warp.evaluation`;
warp and wrmf with seeds 0..2. ``--params family:key=value`` overrides a default (to try
a candidate), ``--before PATH`` runs the same sets and settings with another checkout's
code (its ``.venv``) in a subprocess and shows both side by side, flagging a set that got
worse beyond seed noise.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_defaults.py --before /work/main

Prints the table, writes ``bench-out/bench_defaults.json`` (``--out``). Not a test.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
if not SHARED.exists():  # a worktree beside the main checkout
    SHARED = Path("/work/shared/data")
FAMILIES = ("popularity", "itemknn", "rp3beta", "slim", "ease", "wrmf", "warp")
SEEDED = ("warp", "wrmf")

#: name -> how to make its ratings: a shared file (read by prepare) or a synthetic set.
SETS: Dict[str, Dict[str, Any]] = {
    "ml-100k": dict(path="ml-100k/u.data", format="movielens", min_rating=4),
    "mls-4": dict(path="ml-latest-small/ratings.csv", format="auto", min_rating=4),
    "mls-bin": dict(path="ml-latest-small/ratings.csv", format="auto", binary=True),
    "syn-longtail": dict(synth=dict(n_users=2000, n_items=17000, n_interactions=90_000, zipf_exponent=0.9,
                                    seed=11), binary=True),
    "syn-wide": dict(synth=dict(n_users=20_000, n_items=400, n_interactions=200_000, seed=12), binary=True),
    "syn-counts": dict(synth=dict(n_users=3000, n_items=3000, n_interactions=100_000, values="counts", seed=13)),
    "syn-library": dict(synth=dict(n_users=5500, n_items=17_000, n_interactions=205_000, zipf_exponent=0.8,
                                   seed=14), binary=True),
    "syn-catalogue": dict(synth=dict(n_users=4000, n_items=140, n_interactions=120_000, seed=15), binary=True),
}

#: Held-out shapes that check a data-aware default chosen on the suite (``--sets`` names them;
#: never in the default ``--sets``): binary files of other densities, users per item and
#: catalogue sizes (docs/models/wrmf.rst, 'alpha "auto"'), and ml-100k with every row as a binary file.
CHECK_SETS: Dict[str, Dict[str, Any]] = {
    "ml-100k-bin": dict(path="ml-100k/u.data", format="movielens", binary=True),
    "chk-dense": dict(synth=dict(n_users=5000, n_items=2000, n_interactions=200_000, seed=21), binary=True),
    "chk-mid": dict(synth=dict(n_users=10_000, n_items=800, n_interactions=100_000, seed=22), binary=True),
    "chk-sparse": dict(synth=dict(n_users=1000, n_items=20_000, n_interactions=40_000, zipf_exponent=0.9,
                                  seed=23), binary=True),
    "chk-tall": dict(synth=dict(n_users=30_000, n_items=1000, n_interactions=150_000, seed=24), binary=True),
    "chk-square": dict(synth=dict(n_users=3000, n_items=3000, n_interactions=150_000, seed=25), binary=True),
    "chk-20x": dict(synth=dict(n_users=20_000, n_items=1000, n_interactions=400_000, seed=26), binary=True),
    "chk-40x": dict(synth=dict(n_users=8000, n_items=200, n_interactions=40_000, seed=27), binary=True),
    "chk-10x": dict(synth=dict(n_users=4000, n_items=400, n_interactions=100_000, seed=28), binary=True),
    "chk-20x-thin": dict(synth=dict(n_users=40_000, n_items=2000, n_interactions=200_000, seed=29), binary=True),
    "chk-50x": dict(synth=dict(n_users=15_000, n_items=300, n_interactions=300_000, seed=30), binary=True),
    "chk-big-sparse": dict(synth=dict(n_users=25_000, n_items=10_000, n_interactions=250_000, seed=31),
                           binary=True),
    "chk-12k": dict(synth=dict(n_users=12_000, n_items=3000, n_interactions=150_000, seed=32), binary=True),
    "chk-wide2": dict(synth=dict(n_users=20_000, n_items=400, n_interactions=200_000, seed=33), binary=True),
    "val-13k": dict(synth=dict(n_users=13_500, n_items=1500, n_interactions=100_000, seed=41), binary=True),
    "val-18k": dict(synth=dict(n_users=18_000, n_items=6000, n_interactions=180_000, seed=42), binary=True),
    "val-6k": dict(synth=dict(n_users=6000, n_items=150, n_interactions=60_000, seed=43), binary=True),
    "val-50k": dict(synth=dict(n_users=50_000, n_items=3000, n_interactions=300_000, seed=44), binary=True),
    "val-11k": dict(synth=dict(n_users=11_000, n_items=500, n_interactions=110_000, seed=45), binary=True),
    "val-12k-dense": dict(synth=dict(n_users=12_500, n_items=300, n_interactions=250_000, seed=46), binary=True),
    "val-16k-sparse": dict(synth=dict(n_users=16_000, n_items=8000, n_interactions=130_000, seed=47), binary=True),
    "val-8k-dense": dict(synth=dict(n_users=8000, n_items=250, n_interactions=200_000, seed=48), binary=True),
    "new-30k-sparse": dict(synth=dict(n_users=30_000, n_items=5000, n_interactions=60_000, seed=51), binary=True),
    "new-3k-dense": dict(synth=dict(n_users=3000, n_items=100, n_interactions=90_000, seed=52), binary=True),
    "new-10k-dense": dict(synth=dict(n_users=10_000, n_items=500, n_interactions=250_000, seed=53), binary=True),
    "new-6k-heavy": dict(synth=dict(n_users=6000, n_items=1000, n_interactions=400_000, seed=54), binary=True),
    "new-40k-long": dict(synth=dict(n_users=40_000, n_items=20_000, n_interactions=120_000, zipf_exponent=0.9,
                                    seed=55), binary=True),
    # other generator settings (topics, noise, popularity, user mixtures), not only other shapes
    "gen-topics50": dict(synth=dict(n_users=5000, n_items=2000, n_interactions=100_000, n_topics=50, seed=61),
                         binary=True),
    "gen-noisy": dict(synth=dict(n_users=20_000, n_items=1000, n_interactions=200_000, noise=0.4, seed=62),
                      binary=True),
    "gen-flat": dict(synth=dict(n_users=8000, n_items=3000, n_interactions=150_000, zipf_exponent=0.5,
                                activity_sigma=0.5, seed=63), binary=True),
    "gen-mixed": dict(synth=dict(n_users=25_000, n_items=800, n_interactions=250_000, concentration=3.0,
                                 seed=64), binary=True),
}


# -- the suite's files ---------------------------------------------------------------------------
def prepare_set(name: str, data: Path) -> Path:
    """The folder holding ``name``'s train.tsv and test.tsv, prepared once."""
    from mrec_warp.data.ratings import read_ratings
    from mrec_warp.stages.prepare import prepare

    folder = data / name
    if (folder / "test.tsv").exists():
        return folder
    spec = SETS[name] if name in SETS else CHECK_SETS[name]
    data.mkdir(parents=True, exist_ok=True)
    if "synth" in spec:
        from mrec_warp.data.synthetic import generate

        ratings, _ = generate(**spec["synth"])
        raw, fmt, min_rating = data / f"{name}-raw.tsv", "tsv", None
        cols = ["user", "item"] if spec.get("binary") else ["user", "item", "value"]
        ratings[cols].to_csv(raw, sep="\t", header=False, index=False)
    else:
        raw, fmt, min_rating = SHARED / spec["path"], spec["format"], spec.get("min_rating")
        if spec.get("binary"):  # every row, as a "user item" file (a derived copy in --data, not the project)
            df = read_ratings(raw, format=fmt)
            raw, fmt = data / f"{name}-raw.tsv", "tsv"
            df[["user", "item"]].to_csv(raw, sep="\t", header=False, index=False)
    prepare(raw, folder, format=fmt, min_rating=min_rating, test_fraction=0.2, seed=42)
    return folder


# -- one run ---------------------------------------------------------------------------------------
def run_one(folder: Path, family: str, seed: int, params: Dict[str, Any]) -> Dict[str, Any]:
    """Train ``family`` as ``mrec-warp train`` does and score P@10 on the test split."""
    from mrec_warp.data.ratings import read_ratings
    from mrec_warp.evaluation.metrics import evaluate_recommendations
    from mrec_warp.stages.train import train

    t = time.perf_counter()
    result = train(folder / "train.tsv", model=family, params=params, seed=seed)
    seconds = time.perf_counter() - t
    model = result.model
    train_df, test_df = read_ratings(folder / "train.tsv"), read_ratings(folder / "test.tsv")
    users = sorted(set(test_df["user"]) & set(model.user_ids))
    recs = model.recommend_frame(users, k=10)
    p10 = evaluate_recommendations(train_df, test_df, recs, ks=(10,)).mean("precision@10")
    row = {"family": family, "seed": seed, "precision@10": float(p10), "seconds": round(seconds, 3),
           "params": params}
    for attr in ("best_epoch_", "alpha_", "l2_"):
        if getattr(model, attr, None) is not None:
            row[attr.rstrip("_")] = float(getattr(model, attr))
    history = getattr(model, "history_", None) or []
    if history:  # the honest cost: epochs of each phase times their mean seconds
        for phase in ("fit", "refit"):
            rows = [h for h in history if h.get("phase") == phase]
            row[f"{phase}_epochs"] = len(rows)
            row[f"{phase}_epoch_seconds"] = sum(h["seconds"] for h in rows) / len(rows) if rows else 0.0
        evals = [h["eval_seconds"] for h in history if "eval_seconds" in h]
        row["eval_seconds"] = sum(evals) / len(evals) if evals else 0.0
    return row


def parse_params(items: List[str]) -> Dict[str, Dict[str, Any]]:
    """``family:key=value`` -> {family: {key: value}}; values read as JSON when they parse."""
    out: Dict[str, Dict[str, Any]] = {}
    for item in items:
        fam, _, kv = item.partition(":")
        key, _, value = kv.partition("=")
        if not (fam and key and _):
            raise SystemExit(f"--params {item!r}: expected family:key=value, e.g. wrmf:alpha=5")
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            pass
        out.setdefault(fam, {})[key] = value
    return out


def run_all(sets: List[str], folders: Dict[str, str], families: List[str], seeds: int,
            params: Dict[str, Dict[str, Any]], label: str) -> List[Dict[str, Any]]:
    rows = []
    for name in sets:
        for fam in families:
            for seed in range(seeds if fam in SEEDED else 1):
                row = {"set": name, "label": label, **run_one(Path(folders[name]), fam, seed, params.get(fam, {}))}
                rows.append(row)
                extra = {k: row[k] for k in ("best_epoch", "alpha", "l2") if k in row}
                print(f"  [{label}] {name:<13} {fam:<10} seed {seed}  P@10 {row['precision@10']:.4f}  "
                      f"{row['seconds']:7.2f}s  {extra or ''}", file=sys.stderr, flush=True)
    return rows


# -- the table -------------------------------------------------------------------------------------
def summarise(rows: List[Dict[str, Any]]):
    """{(label, set, family): (mean, sd, n, mean seconds)}."""
    groups: Dict[tuple, List[Dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["label"], r["set"], r["family"]), []).append(r)
    out = {}
    for key, rs in groups.items():
        ps = [r["precision@10"] for r in rs]
        mean = sum(ps) / len(ps)
        sd = math.sqrt(sum((p - mean) ** 2 for p in ps) / (len(ps) - 1)) if len(ps) > 1 else 0.0
        out[key] = (mean, sd, len(ps), sum(r["seconds"] for r in rs) / len(rs))
    return out


def worse_beyond_noise(after, before) -> bool:
    """After's mean below before's by more than twice the standard error of the difference
    of the seed means (and by more than 0.0005, the noise of a deterministic family's
    recommendations with ties)."""
    (ma, sa, na, _), (mb, sb, nb, _) = after, before
    se = math.sqrt(sa ** 2 / na + sb ** 2 / nb)
    return mb - ma > max(2 * se, 0.0005)


def table(rows: List[Dict[str, Any]], sets: List[str], families: List[str], labels: List[str]) -> str:
    stats = summarise(rows)
    lines = []
    head = f"{'family':<18}" + "".join(f"{s:>24}" for s in sets)
    lines.append(head)
    for fam in families:
        for label in labels:
            cells = []
            for s in sets:
                st = stats.get((label, s, fam))
                if st is None:
                    cells.append(f"{'-':>24}")
                    continue
                mark = ""
                if label == "after" and ("before", s, fam) in stats:
                    mark = " WORSE" if worse_beyond_noise(st, stats[("before", s, fam)]) else ""
                sd = f"±{st[1]:.4f}" if st[2] > 1 else " " * 7
                cells.append(f"{st[0]:.4f}{sd} {st[3]:5.1f}s{mark:>6}")
            name = f"{fam} {label}" if len(labels) > 1 else fam
            lines.append(f"{name:<18}" + "".join(f"{c:>24}" for c in cells))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default=",".join(SETS), help="comma list of suite sets")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--seeds", type=int, default=3, help="seeds of warp and wrmf")
    ap.add_argument("--params", action="append", default=[], metavar="FAMILY:KEY=VALUE",
                    help="override a default, e.g. wrmf:alpha=5 (repeatable)")
    ap.add_argument("--before", metavar="CHECKOUT", help="another checkout to run the same sets with, or the "
                    "bench_defaults.json of an earlier run (its rows are the 'before')")
    ap.add_argument("--before-params", action="append", default=[], metavar="FAMILY:KEY=VALUE",
                    help="overrides for the --before run (default: its own defaults)")
    ap.add_argument("--label", default="after")
    ap.add_argument("--data", default="/tmp/defaults-data", help="where the prepared splits are kept")
    ap.add_argument("--out", default=str(ROOT / "bench-out"))
    ap.add_argument("--worker", help=argparse.SUPPRESS)  # JSON file of folders: run, print rows as JSON
    args = ap.parse_args()
    sets, families = args.sets.split(","), args.families.split(",")
    params = parse_params(args.params)
    if args.worker:
        folders = json.loads(Path(args.worker).read_text())
        print(json.dumps(run_all(sets, folders, families, args.seeds, params, args.label)))
        return
    load = os.getloadavg()
    folders = {s: str(prepare_set(s, Path(args.data))) for s in sets}
    rows: List[Dict[str, Any]] = []
    labels = [args.label]
    if args.before and args.before.endswith(".json"):  # a saved run of the other checkout
        saved = json.loads(Path(args.before).read_text())["rows"]
        rows += [dict(r, label="before") for r in saved if r["set"] in sets and r["family"] in families]
        labels = ["before", args.label]
    elif args.before:
        other = Path(args.before).resolve()
        python = other / ".venv" / "bin" / "python"
        spec = Path(args.data) / "folders.json"
        spec.write_text(json.dumps(folders))
        cmd = [str(python if python.exists() else sys.executable), str(Path(__file__).resolve()), "--worker", str(spec),
               "--sets", args.sets, "--families", args.families, "--seeds", str(args.seeds), "--label", "before"]
        for p in args.before_params:
            cmd += ["--params", p]
        env = {**os.environ, "PYTHONPATH": str(other)}
        done = subprocess.run(cmd, env=env, cwd=str(other), stdout=subprocess.PIPE, check=True, text=True)
        rows += json.loads(done.stdout)
        labels = ["before", args.label]
    rows += run_all(sets, folders, families, args.seeds, params, args.label)
    text = table(rows, sets, families, labels)
    print(f"\nP@10 mean±sd over seeds, mean fit seconds (1 thread); load average at start "
          f"{load[0]:.2f}, at end {os.getloadavg()[0]:.2f}")
    if params:
        print(f"overrides: {params}")
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "bench_defaults.json"
    path.write_text(json.dumps({"rows": rows, "params": params, "before": args.before, "table": text,
                                "load_average": [load, os.getloadavg()]}, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
