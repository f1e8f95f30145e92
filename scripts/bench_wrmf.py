#!/usr/bin/env python
"""Benchmark mrec-warp's WRMF (implicit ALS) against implicit's AlternatingLeastSquares.

Run by hand in the benchmark environment (peers are never dependencies), e.g.
``PYTHONPATH=$PWD /work/venv-bench/bin/python scripts/bench_wrmf.py``. Three parts, each
comparing like with like in the same run:

1. **Accuracy** on MovieLens 100k (``../shared/data/ml-100k``), the protocol of ``prepare``:
   ratings >= 4, per-user random 80/20 split, seed 42, top 10 excluding training items.
   WRMF runs with its defaults (early stopping on a split of the training data picks the
   iterations; the test split is never looked at), over several seeds; implicit's ALS with
   its own defaults and with WRMF's parameters (same objective: implicit is given the
   confidence matrix ``1 + alpha * value``, its ``alpha`` left at 1).
2. **Planted counts**: a generated set where a user's genuine interests have large play
   counts and a decoy topic's items (played once or twice) small ones; validation and test
   sets hold unseen items of the user's interests. WRMF with ``log`` and ``linear``
   confidence against binary input (every pair ``1 + alpha``), each with the ``alpha`` best
   on the validation set.
3. **Speed and memory** on the synthetic 1M and 10M sets of ``_benchlib``: seconds per ALS
   iteration for both libraries at the same factors (64), CG steps (3), regularisation,
   confidence and threads (implicit's ``num_threads`` and a threadpoolctl BLAS limit), each
   fit in its own process for its peak RSS (median and fastest iteration: the machine is
   shared), and precision@10 on a 10% hold-out after the same number of iterations; then
   hold-out precision@10 on the 1M set after 15 iterations over several seeds.

Prints tables and writes ``bench-out/bench_wrmf.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

from _benchlib import holdout_precision_at_10, synthetic_matrix
from bench_warp import _reset_peak, _status_mb, top_k_from_factors

ROOT = Path(__file__).resolve().parents[1]
ML100K = ROOT.parent / "shared" / "data" / "ml-100k" / "u.data"


def _implicit_als(**kw):
    from implicit.cpu.als import AlternatingLeastSquares

    return AlternatingLeastSquares(use_cg=True, **kw)


# -- part 1: MovieLens 100k ---------------------------------------------------------------------
def accuracy(seeds):
    from mrec_warp.data.interactions import Interactions
    from mrec_warp.data.ratings import read_ratings
    from mrec_warp.stages.prepare import prepare
    from mrec_warp.evaluation.metrics import evaluate_recommendations
    from threadpoolctl import threadpool_limits

    from mrec_warp.models import WRMF, Popularity

    with tempfile.TemporaryDirectory() as tmp:
        prepare(ML100K, tmp, format="movielens", min_rating=4, test_fraction=0.2, seed=42)
        train_df = read_ratings(Path(tmp) / "train.tsv")
        test_df = read_ratings(Path(tmp) / "test.tsv")
    train = Interactions.from_dataframe(train_df, value_col="value")
    X = train.matrix
    rows = []

    def record(name, seed, seconds, items, **extra):
        r = np.repeat(np.arange(items.shape[0]), items.shape[1])
        flat = items.ravel()
        ok = flat >= 0
        recs = pd.DataFrame({"user": train.user_ids[r[ok]], "item": train.item_ids[flat[ok]],
                             "rank": np.tile(np.arange(1, items.shape[1] + 1), items.shape[0])[ok]})
        ev = evaluate_recommendations(train_df, test_df, recs, ks=(10,))
        row = {"model": name, "seed": seed, "fit_seconds": round(seconds, 3),
               **{m: ev.mean(f"{m}@10") for m in ("precision", "recall", "ndcg")}, **extra}
        rows.append(row)
        print(f"  {name:<40} seed {seed}  P@10 {row['precision']:.4f}  fit {seconds:6.2f}s", flush=True)

    t = time.perf_counter()
    record("popularity", 0, time.perf_counter() - t, Popularity().fit(train).recommend(k=10)[0])
    defaults = WRMF()
    for seed in seeds:
        t = time.perf_counter()
        model = WRMF(random_state=seed).fit(train)
        record("mrec-warp WRMF (defaults)", seed, time.perf_counter() - t, model.recommend(k=10)[0],
               iterations=model.best_epoch_)
    conf = X.copy()
    conf.data = 1 + defaults.alpha * conf.data
    binary = X.copy()
    binary.data[:] = 1
    for seed in seeds:
        for name, matrix, kw in (
            ("implicit ALS (its defaults)", binary, {}),
            (f"implicit ALS (WRMF's params, {15} it.)", conf,
             dict(factors=defaults.factors, regularization=defaults.regularization, iterations=15)),
        ):
            als = _implicit_als(random_state=seed, num_threads=1, **kw)
            t = time.perf_counter()
            with threadpool_limits(limits=1, user_api="blas"):  # as WRMF does, and as implicit advises
                als.fit(matrix, show_progress=False)
            record(name, seed, time.perf_counter() - t, top_k_from_factors(als.user_factors, als.item_factors, None, X))
    table = pd.DataFrame(rows)
    summary = table.groupby("model", sort=False).agg(
        P10=("precision", "mean"), P10_sd=("precision", "std"), R10=("recall", "mean"),
        NDCG10=("ndcg", "mean"), fit_s=("fit_seconds", "mean"), runs=("seed", "count"))
    return rows, summary


# -- part 2: planted counts -----------------------------------------------------------------------
def planted_counts(n_users=6000, n_items=3000, n_topics=30, per_user=40, noise=0.4, seed=0):
    """(train counts, validation, test) CSR where the size of a count says which rows are real interest.

    Every item belongs to one topic and has a Zipf popularity. Every user has one interest
    topic and one decoy topic (think of a shared account, or autoplay): ``1 - noise`` of
    their rows are interest items played 1 + Geometric(1/8) - 1 times (mean 8), the rest are
    decoy items played once or twice. Validation and test sets are each 10 further unseen
    interest items of every user, so only the heavily played rows say what the user wants; binary input sees
    two equally strong topics.
    """
    rng = np.random.default_rng(seed)
    topic = rng.integers(0, n_topics, n_items)
    pop = 1.0 / (1 + rng.permutation(n_items)) ** 0.8
    rows, cols, vals, held = [], [], [], []
    n_int = int(round(per_user * (1 - noise)))
    for u in range(n_users):
        interest, decoy = rng.choice(n_topics, 2, replace=False)
        own = np.flatnonzero(topic == interest)
        picks = rng.choice(own, n_int + 20, replace=False, p=pop[own] / pop[own].sum())
        other = np.flatnonzero(topic == decoy)
        noisy = rng.choice(other, per_user - n_int, replace=False, p=pop[other] / pop[other].sum())
        items = np.concatenate([picks[:n_int], noisy])
        counts = np.concatenate([rng.geometric(1 / 8, n_int), rng.integers(1, 3, len(noisy))])
        rows.append(np.full(len(items), u))
        cols.append(items)
        vals.append(counts)
        held.append(rng.permutation(picks[n_int:]))  # validation and test alike
    shape = (n_users, n_items)
    train = sp.csr_matrix((np.concatenate(vals).astype(np.float32), (np.concatenate(rows), np.concatenate(cols))),
                          shape=shape)
    held = np.array(held)
    users = np.repeat(np.arange(n_users), 10)

    def part(cols):
        return sp.csr_matrix((np.ones(cols.size, np.float32), (users, cols.ravel())), shape=shape)

    return train, part(held[:, 10:]), part(held[:, :10])


def counts_part():
    from mrec_warp.models import WRMF
    from mrec_warp.models.early_stopping import precision_at_k

    train, val, test = planted_counts()
    rows = []
    for name, conf, use_values in (("binary (1 + alpha)", "linear", False), ("linear counts", "linear", True),
                                   ("log counts", "log", True)):
        best = None
        for alpha in (0.25, 0.5, 1, 2, 4, 8, 16, 32, 64):
            m = WRMF(alpha=alpha, confidence=conf, epochs=10, random_state=0).fit(train, use_values=use_values)
            score = precision_at_k(m.score_users, m.n_items, train, val, 10)
            if best is None or score > best[0]:
                best = (score, alpha, m)
        p = precision_at_k(best[2].score_users, train.shape[1], train, test, 10)
        rows.append({"input": name, "alpha": best[1], "val_P@10": best[0], "test_P@10": p})
        print(f"  {name:<20} alpha {best[1]:<5} val P@10 {best[0]:.4f}  test P@10 {p:.4f}", flush=True)
    return rows


# -- part 3: speed and memory -----------------------------------------------------------------------
def worker(lib, data_path, threads, iterations):
    """Runs in its own process, so its peak RSS is the library's alone (plus the data)."""
    from threadpoolctl import threadpool_limits

    from mrec_warp.models import WRMF
    from mrec_warp.models.early_stopping import holdout_split

    X = sp.load_npz(data_path).tocsr().astype(np.float32)
    X.data[:] = 1
    train, val = holdout_split(X, 0.1, np.random.default_rng(0))
    params = WRMF()  # the defaults, shared by both libraries
    rss_before_fit = _status_mb("VmRSS")
    load_peak = _status_mb("VmHWM")  # of this process since its exec: reading and splitting the data
    _reset_peak()
    with threadpool_limits(limits=threads, user_api="blas"):
        if lib == "mrec-warp":
            model = WRMF(epochs=iterations, n_jobs=threads, random_state=0).fit(train, use_values=False)
            times = [h["seconds"] for h in model.history_]
            factors = (model.user_factors, model.item_factors)
        else:
            conf = train.copy()
            conf.data[:] = 1 + params.alpha  # WRMF's confidence without values; implicit's alpha stays 1
            model = _implicit_als(factors=params.factors, regularization=params.regularization,
                                  iterations=iterations, num_threads=threads, random_state=0)
            times = []
            model.fit(conf, show_progress=False, callback=lambda it, secs, loss: times.append(secs))
            factors = (model.user_factors, model.item_factors)
    fit_peak = _status_mb("VmHWM")
    # the whole process's peak; not ru_maxrss, which Linux carries over from the parent
    # through fork and exec (a parent that generated the data set reports its own 3 GB)
    whole_peak = max(load_peak, fit_peak)
    out = {"lib": lib, "nnz": int(train.nnz), "threads": threads, "iteration_seconds": times,
           "seconds_per_iteration": float(np.median(times)), "fastest_iteration": float(np.min(times)),
           "peak_rss_mb": fit_peak,
           "fit_added_mb": fit_peak - rss_before_fit,
           "process_peak_mb": whole_peak,
           "precision@10": holdout_precision_at_10(*factors, 0.0, train, val)}
    print(json.dumps(out))


def quality(cache, iterations, seeds):
    """Hold-out P@10 of both libraries on the 1M set over several seeds (one thread): is a
    difference at one seed more than the spread between seeds?"""
    from threadpoolctl import threadpool_limits

    from mrec_warp.models import WRMF
    from mrec_warp.models.early_stopping import holdout_split

    X = sp.load_npz(synthetic_matrix("1m", cache)).tocsr().astype(np.float32)
    X.data[:] = 1
    train, val = holdout_split(X, 0.1, np.random.default_rng(0))
    params = WRMF()
    conf = train.copy()
    conf.data[:] = 1 + params.alpha
    rows = []
    with threadpool_limits(limits=1, user_api="blas"):
        for seed in seeds:
            model = WRMF(epochs=iterations, random_state=seed).fit(train, use_values=False)
            rows.append({"lib": "mrec-warp", "seed": seed,
                         "precision@10": holdout_precision_at_10(model.user_factors, model.item_factors, 0.0, train, val)})
            als = _implicit_als(factors=params.factors, regularization=params.regularization, iterations=iterations,
                                num_threads=1, random_state=seed)
            als.fit(conf, show_progress=False)
            rows.append({"lib": "implicit", "seed": seed,
                         "precision@10": holdout_precision_at_10(als.user_factors, als.item_factors, 0.0, train, val)})
    table = pd.DataFrame(rows).groupby("lib")["precision@10"].agg(["mean", "std", "min", "max"])
    print(table.to_string(float_format=lambda v: f"{v:.4f}"))
    return rows


def speed(sizes, threads_list, iterations, cache):
    rows = []
    for name in sizes:
        path = synthetic_matrix(name, cache)
        for threads in threads_list:
            for lib in ("mrec-warp", "implicit"):
                cmd = [sys.executable, __file__, "--worker", lib, "--data", str(path), "--threads", str(threads),
                       "--iterations", str(iterations)]
                res = subprocess.run(cmd, capture_output=True, text=True)
                if res.returncode != 0:
                    print(f"  {lib} on {name} failed:\n{res.stderr[-2000:]}")
                    continue
                row = json.loads(res.stdout.strip().splitlines()[-1])
                row.update(set=name, load=os.getloadavg()[0])
                rows.append(row)
                print(f"  {name:>4} {threads} thr {lib:<10} {row['seconds_per_iteration']:7.3f} s/iteration "
                      f"(fastest {row['fastest_iteration']:7.3f})  "
                      f"peak {row['peak_rss_mb']:7.0f} MB (fit adds {row['fit_added_mb']:5.0f} MB, "
                      f"process peak {row['process_peak_mb']:5.0f} MB)  "
                      f"P@10 {row['precision@10']:.4f}  load {row['load']:.1f}", flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "bench-out"))
    ap.add_argument("--sizes", default="1m,10m", help="comma-separated: 1m, 10m")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--iterations", type=int, default=5, help="timed ALS iterations per library")
    ap.add_argument("--seeds", type=int, default=3, help="seeds in the accuracy part")
    ap.add_argument("--skip-accuracy", action="store_true")
    ap.add_argument("--skip-counts", action="store_true")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--memory", action="store_true",
                    help="only the speed and memory part (no accuracy, counts or 1M quality runs): each fit in "
                         "a fresh process, its peak RSS (VmHWM over the fit, and over the whole process)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.data, int(args.threads), args.iterations)
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                          "processor": platform.processor() or platform.machine()},
              "date": time.strftime("%Y-%m-%d %H:%M"), "load_at_start": os.getloadavg()}
    path = out / "bench_wrmf.json"

    def save():
        path.write_text(json.dumps(report, indent=2, default=float))

    if args.memory:
        args.skip_accuracy = args.skip_counts = True
    if not args.skip_accuracy:
        print("Accuracy on MovieLens 100k (rating >= 4, per-user 80/20, seed 42), top 10:")
        rows, summary = accuracy(list(range(42, 42 + args.seeds)))
        report["accuracy"] = rows
        print()
        print(summary.to_string(float_format=lambda v: f"{v:.4f}"))
        print()
        save()
    if not args.skip_counts:
        print("Planted play counts: confidence from counts vs binary input (alpha picked on validation):")
        report["counts"] = counts_part()
        print()
        save()
    if not args.skip_speed:
        threads = [int(t) for t in args.threads.split(",") if t]
        print(f"Speed: 64 factors, 3 CG steps, {args.iterations} iterations, threads {threads}:")
        rows = speed([s for s in args.sizes.split(",") if s], threads, args.iterations, out / "cache")
        report["speed"] = rows
        save()
        if not args.memory:
            # quality after 15 iterations (converged; implicit's tiny start lags a few iterations behind)
            print(f"1M hold-out P@10 after 15 iterations over seeds 0-{args.seeds - 1}:")
            report["quality_1m"] = quality(out / "cache", 15, list(range(args.seeds)))
        by = {(r["set"], r["threads"], r["lib"]): r for r in rows}
        for (name, t, lib), a in sorted(by.items()):
            b = by.get((name, t, "implicit"))
            if lib == "mrec-warp" and b:
                ratio = a["seconds_per_iteration"] / b["seconds_per_iteration"]
                fastest = a["fastest_iteration"] / b["fastest_iteration"]
                mem = a["peak_rss_mb"] / b["peak_rss_mb"]
                report.setdefault("ratios", {})[f"{name}-{t}"] = {
                    "time_vs_implicit": ratio, "fastest_vs_implicit": fastest, "peak_rss_vs_implicit": mem}
                print(f"  {name} at {t} thread(s): mrec-warp time per iteration {ratio:.2f}x implicit's "
                      f"(fastest iterations: {fastest:.2f}x), peak memory {mem:.2f}x")
    report["load_at_end"] = os.getloadavg()
    save()
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
