#!/usr/bin/env python
"""Parallel scaling benchmark: fit threads, top-k for all users, parallel tuning trials.

Run by hand with the bench environment (LightFM is only there, never a dependency):

    .venv-bench/bin/python scripts/bench_scale.py                  # everything
    .venv-bench/bin/python scripts/bench_scale.py --parts topk     # one part

Parts (each compares like with like in one run, on this machine):

1. **fit** -- epoch throughput (interactions/s) of 1 and 2 threads on the 10M synthetic set
   (200k users x 50k items, 10% of each user's items held out), WARP with 64 factors,
   max_sampled 10, learning rate 0.05, for mrec-warp (hogwild shards on joblib threads)
   and LightFM (OpenMP). Each configuration runs in its own process; P@10 on 5,000
   held-out users after the same number of epochs checks that quality does not move.
2. **topk** -- top-10 for 10k users x 100k items with 64 random factors: the bare matrix
   product (BLAS, block by block, nothing kept), numpy product + argpartition + argsort,
   mrec-warp's ``iter_top_k`` with 1 and 2 workers, and (``--lightfm-predict``) LightFM's
   ``predict`` for every pair.
3. **tune** -- the same 4 trials (grid over factors x learning rate, early stopping) on the
   1M set, serially and on 2 workers: wall time ratio.

Prints tables, the machine's load average before each part (the machine may be shared),
and writes ``bench-out/bench_scale.json``.
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
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _benchlib import (  # noqa: E402
    SIZES, cpu_seconds, holdout_precision_at_10, lightfm_factors, load_avg, synthetic_matrix,
)


# -- part 1: fit ----------------------------------------------------------------------------------
def fit_worker(lib: str, data: str, threads: int, epochs: int) -> None:
    """One library at one thread count, in its own process."""
    from mrec_warp.models.early_stopping import holdout_split

    X = sp.load_npz(data).tocsr().astype(np.float32)
    X.data[:] = 1
    train, val = holdout_split(X, 0.1, np.random.default_rng(0))
    if lib == "mrec-warp":
        from mrec_warp.models import WARP

        model = WARP(factors=64, max_sampled=10, learning_rate=0.05, epochs=epochs, n_jobs=threads, random_state=0)
        marks = [cpu_seconds()]
        model.fit(train, callbacks=[lambda m, logs: marks.append(cpu_seconds())])
        times = [h["seconds"] for h in model.history_]
        cpu = list(np.diff(marks))  # the first also holds the set-up; the median ignores it
        uf, itf, ib = model.user_factors_, model.item_factors_, model.item_bias_
    else:
        from lightfm import LightFM

        coo = train.tocoo()
        model = LightFM(no_components=64, loss="warp", max_sampled=10, learning_rate=0.05, random_state=0)
        times, cpu = [], []
        for _ in range(epochs):
            t, c = time.perf_counter(), cpu_seconds()
            model.fit_partial(coo, epochs=1, num_threads=threads)
            times.append(time.perf_counter() - t)
            cpu.append(cpu_seconds() - c)
        uf, itf, ib = lightfm_factors(model)
    sec = float(np.median(times))
    print(json.dumps({"lib": lib, "threads": threads, "nnz": int(train.nnz), "epoch_seconds": times,
                      "seconds_per_epoch": sec, "interactions_per_second": train.nnz / sec,
                      "cpu_seconds_per_epoch": float(np.median(cpu)),
                      "precision@10": holdout_precision_at_10(uf, itf, ib, train, val)}))


def bench_fit(args, cache: Path):
    path = synthetic_matrix(args.fit_size, cache)
    libs = ["mrec-warp"] + (["lightfm"] if _has_lightfm() else [])
    rows = []
    for lib in libs:
        for threads in (1, 2):
            load = load_avg()
            cmd = [sys.executable, __file__, "--fit-worker", lib, "--data", str(path), "--threads", str(threads),
                   "--epochs", str(args.epochs)]
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                print(f"  {lib} x{threads} failed:\n{res.stderr[-2000:]}")
                continue
            row = json.loads(res.stdout.strip().splitlines()[-1])
            row["load_before"] = load
            rows.append(row)
            print(f"  {lib:<10} {threads} thread(s)  {row['seconds_per_epoch']:7.2f} s/epoch  "
                  f"{row['interactions_per_second'] / 1e6:5.3f} M interactions/s  "
                  f"cpu {row.get('cpu_seconds_per_epoch', float('nan')):6.2f} s/epoch  P@10 {row['precision@10']:.4f}"
                  f"  (load {load})", flush=True)
    for lib in libs:
        r = {x["threads"]: x for x in rows if x["lib"] == lib}
        if 1 in r and 2 in r:
            print(f"  {lib}: 2 threads = {r[2]['interactions_per_second'] / r[1]['interactions_per_second']:.2f}x "
                  f"the throughput of 1; P@10 {r[1]['precision@10']:.4f} -> {r[2]['precision@10']:.4f}")
            if "cpu_seconds_per_epoch" in r[1] and "cpu_seconds_per_epoch" in r[2]:
                # On a shared machine wall time measures the neighbours too. CPU time does not:
                # if 2 threads spend no more CPU per epoch than 1, an idle machine gives ~2x.
                est = 2 * r[1]["cpu_seconds_per_epoch"] / r[2]["cpu_seconds_per_epoch"]
                print(f"  {lib}: CPU-seconds per epoch {r[1]['cpu_seconds_per_epoch']:.2f} (1 thread) vs "
                      f"{r[2]['cpu_seconds_per_epoch']:.2f} (2 threads): {est:.2f}x on an otherwise idle machine, "
                      "if the threads never wait")
    return rows


def _has_lightfm() -> bool:
    try:
        import lightfm  # noqa: F401

        return True
    except ImportError:
        return False


# -- part 2: top-k ---------------------------------------------------------------------------------
def bench_topk(args):
    from threadpoolctl import threadpool_limits

    from mrec_warp.topk import iter_top_k

    n_users, n_items, d, k = args.topk_users, args.topk_items, 64, 10
    rng = np.random.default_rng(0)
    U = rng.standard_normal((n_users, d), dtype=np.float32) * 0.1
    V = rng.standard_normal((n_items, d), dtype=np.float32) * 0.1
    block = 1000
    out = {}

    def timed(name, fn, repeat=2):
        best = float("inf")
        for _ in range(repeat):
            t = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t)
        out[name] = best
        print(f"  {name:<44} {best:7.2f} s  (load {load_avg()})", flush=True)

    def product():
        for s in range(0, n_users, block):
            U[s:s + block] @ V.T

    def numpy_topk():
        for s in range(0, n_users, block):
            scores = U[s:s + block] @ V.T
            part = np.argpartition(-scores, k, axis=1)[:, :k]
            order = np.argsort(-np.take_along_axis(scores, part, 1), axis=1)
            np.take_along_axis(part, order, 1)

    def ours(n_jobs):
        def run():
            for _ in iter_top_k(lambda r: U[r] @ V.T, n_items, np.arange(n_users), k, n_jobs=n_jobs):
                pass
        return run

    timed("bare product U @ V.T (BLAS, all cores)", product)
    with threadpool_limits(1, user_api="blas"):
        timed("bare product, 1 BLAS thread", product)
    timed("numpy product + argpartition + argsort", numpy_topk, repeat=1)
    timed("mrec-warp iter_top_k, n_jobs=1", ours(1))
    timed("mrec-warp iter_top_k, n_jobs=2", ours(2))
    if args.lightfm_predict and _has_lightfm():
        from lightfm import LightFM

        model = LightFM(no_components=d)
        model.fit_partial(sp.coo_matrix(([1.0], ([n_users - 1], [n_items - 1])), shape=(n_users, n_items)), epochs=1)
        model.user_embeddings[:] = U
        model.item_embeddings[:] = V

        def lightfm_predict():
            items = np.arange(n_items, dtype=np.int32)
            for u in range(n_users):
                scores = model.predict(u, items, num_threads=2)
                np.argpartition(-scores, k)[:k]

        timed("LightFM predict (num_threads=2) + argpartition", lightfm_predict, repeat=1)
    base = out["bare product U @ V.T (BLAS, all cores)"]
    for name, sec in out.items():
        print(f"  {name:<44} {sec / base:5.2f}x the bare product")
    return out


# -- part 3: tune ----------------------------------------------------------------------------------
def bench_tune(args, cache: Path):
    from mrec_warp.stages.candidates import grid_points
    from mrec_warp.context import ExecutionContext
    from mrec_warp.stages.tune import tune

    X = sp.load_npz(synthetic_matrix("1m", cache)).tocsr()
    points = grid_points({"factors": [32, 64], "learning_rate": [0.03, 0.08]})
    base = {"max_epochs": args.tune_epochs, "patience": 2, "max_sampled": 10}
    out, cpu = {}, {}
    tables = {}
    for n_jobs in (1, 2):
        load = load_avg()
        t, c = time.perf_counter(), cpu_seconds()
        tables[n_jobs] = tune(X, points, base=base, context=ExecutionContext(n_jobs=n_jobs)).table
        out[n_jobs] = time.perf_counter() - t
        cpu[n_jobs] = cpu_seconds() - c
        print(f"  {len(points)} trials, n_jobs={n_jobs}: {out[n_jobs]:7.1f} s wall, {cpu[n_jobs]:7.1f} s CPU "
              f"({cpu[n_jobs] / out[n_jobs]:.2f} cores busy)  (load {load})", flush=True)
    same = tables[1][["trial", "precision@10", "epochs"]].equals(tables[2][["trial", "precision@10", "epochs"]])
    print(f"  2 workers: {out[2] / out[1]:.2f} of the serial time; identical results: {same}")
    print(tables[1].to_string(index=False))
    return {"seconds": out, "cpu_seconds": cpu, "identical_results": bool(same)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "bench-out"))
    ap.add_argument("--parts", default="fit,topk,tune", help="comma-separated: fit, topk, tune")
    ap.add_argument("--fit-size", default="10m", choices=sorted(SIZES))
    ap.add_argument("--epochs", type=int, default=2, help="timed epochs per fit configuration")
    ap.add_argument("--topk-users", type=int, default=10_000)
    ap.add_argument("--topk-items", type=int, default=100_000)
    ap.add_argument("--lightfm-predict", action="store_true", help="also time LightFM predict (slow)")
    ap.add_argument("--tune-epochs", type=int, default=8, help="max epochs of each tuning trial")
    ap.add_argument("--fit-worker", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.fit_worker:
        fit_worker(args.fit_worker, args.data, args.threads, args.epochs)
        return
    out_dir = Path(args.out)
    cache = out_dir / "cache"
    results = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()}}
    for part in args.parts.split(","):
        print(f"\n== {part} ==  (load average {load_avg()})", flush=True)
        if part == "fit":
            results["fit"] = bench_fit(args, cache)
        elif part == "topk":
            results["topk"] = bench_topk(args)
        elif part == "tune":
            results["tune"] = bench_tune(args, cache)
        else:
            raise SystemExit(f"unknown part {part!r}")
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "bench_scale.json", "w") as fh:
        json.dump(results, fh, indent=2, default=str)
    print(f"\nwrote {out_dir / 'bench_scale.json'}")


if __name__ == "__main__":
    main()
