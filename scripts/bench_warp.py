#!/usr/bin/env python
"""Benchmark mrec-warp's WARP against LightFM's WARP (and popularity, implicit ALS).

Run by hand (``make bench`` sets up its own environment with the peers); never a test.

Two parts, both in one run so every ratio compares like with like:

1. **Accuracy** on MovieLens 100k (``../shared/data/ml-100k``): ratings >= 4 are positives,
   per-user random 80/20 split with seed 42 (``mrec_warp prepare``), top-10 excluding
   training items, metrics from ``mrec_warp.evaluation``. mrec-warp runs with its defaults
   (early stopping picks the epochs); LightFM WARP with 64 factors and learning rate 0.05 is
   scored after 10, 30 and 50 epochs.
2. **Speed and memory** on synthetic sets from ``mrec_warp.data.synthetic`` with about 1M
   and 10M training interactions: seconds per epoch at the same threads, factors (64) and
   max_sampled (10) for both libraries, peak RSS of a process that loads the data and fits
   (measured right after fitting) and how much of it the fit itself added,
   and precision@10 on a 10% hold-out after the same number of epochs.

Prints a table and writes ``bench-out/bench_warp.json``.

``--scaling`` runs only a third part: **thread scaling** of mrec-warp's WARP epochs on the
0.8M set (50k users x 20k items, Zipf items; see ``_benchlib.SCALING_SET``) with the
model's defaults (max_sampled 50), 1 and 2 threads, each run in its own process and the
two alternated ``--rounds`` times. An epoch's time is the mean of epochs 2..N of a run (the
first is cheaper: fresh factors find a violator at once), so loading cancels as in "an
N-epoch run minus a 1-epoch run". Prints wall and CPU seconds per epoch, the load average
before each run, precision@10 on the hold-out, the 2-vs-1 thread throughput ratio (median
over rounds), and writes ``bench-out/bench_warp_scaling.json``. On a shared machine the
wall ratio measures the neighbours too; the CPU columns show whether two threads spend
more CPU per epoch than one (contention) -- if not, an idle machine gives about 2x.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

from _benchlib import (
    cpu_seconds, holdout_precision_at_10, lightfm_factors, load_avg, movielens_split, scaling_split,
    synthetic_matrix,
)

ROOT = Path(__file__).resolve().parents[1]


# -- shared helpers ------------------------------------------------------------------------------
def top_k_from_factors(user_f, item_f, item_b, exclude, k=10):
    """Top-k per user with the same selection code for every library (fair comparison)."""
    from mrec_warp.topk import iter_top_k

    def score(rows):
        s = user_f[rows] @ item_f.T
        return s + item_b if item_b is not None else s

    blocks = list(iter_top_k(score, item_f.shape[0], np.arange(user_f.shape[0]), k, exclude=exclude))
    return np.vstack([b[1] for b in blocks])


# -- part 1: accuracy on MovieLens 100k ---------------------------------------------------------
def accuracy(seeds):
    from mrec_warp.data.interactions import Interactions
    from mrec_warp.evaluation.metrics import evaluate_recommendations
    from mrec_warp.models import WARP, Popularity

    train_df, test_df = movielens_split()
    train = Interactions.from_dataframe(train_df)
    X = train.matrix

    def metrics(items):
        rows = np.repeat(np.arange(items.shape[0]), items.shape[1])
        flat = items.ravel()
        ok = flat >= 0
        recs = pd.DataFrame({"user": train.user_ids[rows[ok]], "item": train.item_ids[flat[ok]],
                             "rank": np.tile(np.arange(1, items.shape[1] + 1), items.shape[0])[ok]})
        ev = evaluate_recommendations(train_df, test_df, recs, ks=(10,))
        return {m: ev.mean(f"{m}@10") for m in ("precision", "recall", "ndcg", "map")}

    rows = []

    def record(name, seed, seconds, items, **extra):
        row = {"model": name, "seed": seed, "fit_seconds": round(seconds, 3), **metrics(items), **extra}
        rows.append(row)
        print(f"  {name:<28} seed {seed}  P@10 {row['precision']:.4f}  fit {seconds:6.2f}s", flush=True)

    t = time.perf_counter()
    pop = Popularity().fit(train)
    record("popularity", 0, time.perf_counter() - t, pop.recommend(k=10)[0])
    for seed in seeds:
        t = time.perf_counter()
        warp = WARP(random_state=seed).fit(train)
        record("mrec-warp WARP (defaults)", seed, time.perf_counter() - t, warp.recommend(k=10)[0],
               epochs=warp.best_epoch_)
    try:
        from lightfm import LightFM
    except ImportError:
        print("  LightFM not installed: skipped (make bench installs lightfm-next)")
    else:
        coo = X.tocoo()
        for seed in seeds:
            model = LightFM(no_components=64, loss="warp", learning_rate=0.05, random_state=seed)
            spent, done = 0.0, 0
            for target in (10, 30, 50):
                t = time.perf_counter()
                model.fit_partial(coo, epochs=target - done, num_threads=1)
                spent += time.perf_counter() - t
                done = target
                uf, itf, ib = lightfm_factors(model)
                record(f"LightFM WARP ({target} epochs)", seed, spent, top_k_from_factors(uf, itf, ib, X))
    try:
        from implicit.cpu.als import AlternatingLeastSquares
    except ImportError:
        print("  implicit not installed: skipped")
    else:
        for seed in seeds[:1]:
            als = AlternatingLeastSquares(factors=64, random_state=seed)
            t = time.perf_counter()
            als.fit(X, show_progress=False)
            record("implicit ALS (64 factors)", seed, time.perf_counter() - t,
                   top_k_from_factors(als.user_factors, als.item_factors, None, X))
    table = pd.DataFrame(rows)
    summary = table.groupby("model", sort=False).agg(
        P10=("precision", "mean"), P10_sd=("precision", "std"), R10=("recall", "mean"),
        NDCG10=("ndcg", "mean"), MAP10=("map", "mean"), fit_s=("fit_seconds", "mean"), runs=("seed", "count"))
    return rows, summary


# -- part 2: speed and memory on synthetic sets ---------------------------------------------------
def _status_mb(field):
    """A memory figure of this process from /proc (Linux), in MB."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _reset_peak():
    """Start a new high-water mark (Linux: writing 5 to clear_refs resets VmHWM)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def worker(lib, data_path, threads, epochs, holdout):
    """Runs in its own process, so its peak RSS is the library's alone (plus the data)."""
    X = sp.load_npz(data_path).tocsr().astype(np.float32)
    X.data[:] = 1
    train, val = X, None
    if holdout:
        from mrec_warp.models.early_stopping import holdout_split

        train, val = holdout_split(X, 0.1, np.random.default_rng(0))
    times = []
    rss_before_fit = _status_mb("VmRSS")
    _reset_peak()
    if lib == "mrec-warp":
        from mrec_warp.models import WARP

        model = WARP(factors=64, max_sampled=10, learning_rate=0.05, epochs=epochs, n_jobs=threads, random_state=0)
        model.fit(train)
        times = [h["seconds"] for h in model.history_]
        factors = (model.user_factors, model.item_factors, model.item_bias_)
    else:
        from lightfm import LightFM

        coo = train.tocoo()
        model = LightFM(no_components=64, loss="warp", max_sampled=10, learning_rate=0.05, random_state=0)
        for _ in range(epochs):
            t = time.perf_counter()
            model.fit_partial(coo, epochs=1, num_threads=threads)
            times.append(time.perf_counter() - t)
        factors = lightfm_factors(model)
    # peak of the fit phase, and what fitting added on top of the loaded data
    fit_peak = _status_mb("VmHWM")
    out = {"lib": lib, "nnz": int(train.nnz), "threads": threads, "epoch_seconds": times,
           "seconds_per_epoch": float(np.median(times)), "peak_rss_mb": fit_peak,
           "fit_added_mb": fit_peak - rss_before_fit}
    out["interactions_per_second"] = train.nnz / out["seconds_per_epoch"]
    if holdout:
        out["precision@10"] = holdout_precision_at_10(*factors, train, val)
    print(json.dumps(out))


def speed(sizes, threads, epochs, cache, libs):
    rows = []
    for name in sizes:
        path = synthetic_matrix(name, cache)
        for lib in libs:
            cmd = [sys.executable, __file__, "--worker", lib, "--data", str(path), "--threads", str(threads),
                   "--epochs", str(epochs)] + (["--holdout"] if name == "1m" else [])
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                print(f"  {lib} on {name} failed:\n{res.stderr[-2000:]}")
                continue
            row = json.loads(res.stdout.strip().splitlines()[-1])
            row["set"] = name
            rows.append(row)
            print(f"  {name:>4} {lib:<10} {row['seconds_per_epoch']:7.2f} s/epoch  "
                  f"{row['interactions_per_second'] / 1e6:5.2f} M/s  peak {row['peak_rss_mb']:7.0f} MB"
                  f" (fit adds {row['fit_added_mb']:5.0f} MB)"
                  + (f"  P@10 {row['precision@10']:.4f}" if "precision@10" in row else ""), flush=True)
    return rows


# -- part 3: thread scaling (--scaling) -----------------------------------------------------------
def scaling_worker(train_path, val_path, threads, epochs):
    """One WARP fit with the defaults and a fixed epoch count, in its own process."""
    from mrec_warp.models import WARP

    train, val = sp.load_npz(train_path).tocsr(), sp.load_npz(val_path).tocsr()
    marks = []
    model = WARP(epochs=epochs, n_jobs=threads, random_state=0)
    start = cpu_seconds()
    model.fit(train, callbacks=[lambda m, logs: marks.append(cpu_seconds())])
    wall = [h["seconds"] for h in model.history_]
    cpu = list(np.diff([start] + marks))  # the first also holds the set-up: not used below
    out = {"threads": threads, "nnz": int(train.nnz), "epoch_seconds": wall, "epoch_cpu_seconds": cpu,
           "seconds_per_epoch": float(np.mean(wall[1:])), "cpu_seconds_per_epoch": float(np.mean(cpu[1:])),
           "precision@10": holdout_precision_at_10(model.user_factors_, model.item_factors_, model.item_bias_,
                                                    train, val)}
    print(json.dumps(out))


def scaling(cache, epochs, rounds):
    """1 vs 2 threads on the 0.8M set, alternated: rows per run and the summary."""
    train, val = scaling_split(cache)
    rows = []
    print(f"{'round':>5} {'threads':>7} {'s/epoch':>8} {'cpu s/epoch':>11} {'M inter./s':>10} {'P@10':>7}  load before")
    for r in range(rounds):
        for threads in (1, 2):
            load = load_avg()
            cmd = [sys.executable, __file__, "--scaling-worker", "--data", str(train), "--val", str(val),
                   "--threads", str(threads), "--epochs", str(epochs)]
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                print(f"  {threads} thread(s) failed:\n{res.stderr[-2000:]}")
                continue
            row = {**json.loads(res.stdout.strip().splitlines()[-1]), "round": r + 1, "load_before": load}
            rows.append(row)
            print(f"{r + 1:>5} {threads:>7} {row['seconds_per_epoch']:8.3f} {row['cpu_seconds_per_epoch']:11.3f} "
                  f"{row['nnz'] / row['seconds_per_epoch'] / 1e6:10.2f} {row['precision@10']:7.4f}  {load}", flush=True)
    med = {t: {k: float(np.median([x[k] for x in rows if x["threads"] == t]))
               for k in ("seconds_per_epoch", "cpu_seconds_per_epoch", "precision@10")}
           for t in (1, 2) if any(x["threads"] == t for x in rows)}
    summary = {"median": med}
    if 1 in med and 2 in med:
        summary["throughput_2_vs_1"] = med[1]["seconds_per_epoch"] / med[2]["seconds_per_epoch"]
        summary["cpu_per_epoch_2_vs_1"] = med[2]["cpu_seconds_per_epoch"] / med[1]["cpu_seconds_per_epoch"]
        print(f"median over {rounds} round(s): 2 threads = {summary['throughput_2_vs_1']:.2f}x the epoch throughput "
              f"of 1 ({med[1]['seconds_per_epoch']:.3f} -> {med[2]['seconds_per_epoch']:.3f} s/epoch); CPU per epoch "
              f"{summary['cpu_per_epoch_2_vs_1']:.2f}x; P@10 {med[1]['precision@10']:.4f} -> {med[2]['precision@10']:.4f}")
    return rows, summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "bench-out"))
    ap.add_argument("--sizes", default="1m,10m", help="comma-separated: 1m, 10m")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=5, help="timed epochs per library in the speed part")
    ap.add_argument("--seeds", type=int, default=3, help="seeds in the accuracy part")
    ap.add_argument("--skip-accuracy", action="store_true")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--scaling", action="store_true",
                    help="only the thread-scaling part: 1 vs 2 threads on the 0.8M set, defaults")
    ap.add_argument("--rounds", type=int, default=3, help="alternated 1- and 2-thread runs of --scaling")
    ap.add_argument("--scaling-epochs", type=int, default=6, help="epochs per --scaling run")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--scaling-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--val", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--holdout", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.data, args.threads, args.epochs, args.holdout)
        return
    if args.scaling_worker:
        scaling_worker(args.data, args.val, args.threads, args.epochs)
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        import lightfm  # noqa: F401
        libs = ["mrec-warp", "lightfm"]
    except ImportError:
        libs = ["mrec-warp"]
    report = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                          "processor": platform.processor() or platform.machine()},
              "date": time.strftime("%Y-%m-%d %H:%M")}
    if args.scaling:
        print(f"Thread scaling on the 0.8M set (WARP defaults, max_sampled 50, {args.scaling_epochs} epochs per run, "
              f"epochs 2..{args.scaling_epochs} timed):")
        rows, summary = scaling(out / "cache", args.scaling_epochs, args.rounds)
        report["scaling"] = {"runs": rows, **summary}
        path = out / "bench_warp_scaling.json"
        path.write_text(json.dumps(report, indent=2, default=float))
        print(f"wrote {path}")
        return
    if not args.skip_accuracy:
        print("Accuracy on MovieLens 100k (rating >= 4, per-user 80/20, seed 42), top 10:")
        rows, summary = accuracy(list(range(args.seeds)))
        report["accuracy"] = rows
        print()
        print(summary.to_string(float_format=lambda v: f"{v:.4f}"))
        print()
    if not args.skip_speed:
        print(f"Speed at {args.threads} thread(s), 64 factors, max_sampled 10, {args.epochs} epochs:")
        rows = speed([s for s in args.sizes.split(",") if s], args.threads, args.epochs, out / "cache", libs)
        report["speed"] = rows
        by = {(r["set"], r["lib"]): r for r in rows}
        for name in args.sizes.split(","):
            a, b = by.get((name, "mrec-warp")), by.get((name, "lightfm"))
            if a and b:
                ratio = a["interactions_per_second"] / b["interactions_per_second"]
                mem = a["peak_rss_mb"] / b["peak_rss_mb"]
                report.setdefault("ratios", {})[name] = {"throughput_vs_lightfm": ratio, "peak_rss_vs_lightfm": mem}
                print(f"  {name}: mrec-warp throughput {ratio:.2f}x LightFM's, peak memory {mem:.2f}x")
    path = out / "bench_warp.json"
    path.write_text(json.dumps(report, indent=2, default=float))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
