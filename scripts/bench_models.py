#!/usr/bin/env python
"""Benchmark every mrec-warp model against LightFM WARP, implicit ALS/BPR/Cosine/BM25 and popularity.

Run by hand in the benchmark environment (peers are never dependencies of the package):

    PYTHONPATH=$PWD /work/venv-bench/bin/python scripts/bench_models.py

Three parts, all in one run so every ratio compares like with like:

1. **Accuracy** on MovieLens 100k (ratings >= 4, per-user 80/20 split with seed 42, as
   ``mrec-warp prepare`` makes it) and two synthetic shapes from
   :mod:`mrec_warp.data.synthetic`: ``dense`` (few items, many interactions per user) and
   ``longtail`` (a wider catalogue, steeper popularity, fewer interactions per user), split
   per user 80/20 with seed 42. Every model with its defaults (no peeking at test), top 10
   with training items excluded, metrics from :mod:`mrec_warp.evaluation`: P@10, NDCG@10,
   MAP@10, coverage@10; fit and recommend (every user) seconds at one thread.
2. **Item-kNN speed** against implicit's ``CosineRecommender`` / ``BM25Recommender`` with the
   same number of neighbours, fit + recommend at 1 and 2 threads, as ratios.
3. **Big catalogue** (``--big``): EASE and SLIM on a synthetic set of 20k items and 1M
   interactions, each in its own process: fit seconds and peak memory, against the memory
   EASE announces.

Prints tables and writes ``bench-out/bench_models.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
ML100K = ROOT.parent / "shared" / "data" / "ml-100k" / "u.data"
#: Synthetic shapes: generate() arguments.
SHAPES = {
    "dense": dict(n_users=6000, n_items=1500, n_interactions=300_000, seed=1),
    "longtail": dict(n_users=20000, n_items=8000, n_interactions=300_000, zipf_exponent=1.3,
                     activity_sigma=1.3, seed=2),
}
BIG = dict(n_users=50_000, n_items=20_000, n_interactions=1_000_000, seed=1)
K = 100  # neighbours of every item-kNN, ours and implicit's


# -- data ----------------------------------------------------------------------------------------
def load_set(name: str, cache: Path):
    """(train Interactions, test Interactions) of a named set."""
    from mrec_warp.data.interactions import Interactions
    from mrec_warp.data.ratings import read_ratings
    from mrec_warp.stages.prepare import prepare

    folder = cache / name
    if not (folder / "train.tsv").exists():
        if name == "ml100k":
            prepare(ML100K, folder, format="movielens", min_rating=4, test_fraction=0.2, seed=42)
        else:
            from mrec_warp.data.synthetic import generate

            ratings, _ = generate(**SHAPES[name])
            cache.mkdir(parents=True, exist_ok=True)
            raw = cache / f"{name}-ratings.tsv"
            ratings.to_csv(raw, sep="\t", header=False, index=False)
            prepare(raw, folder, format="tsv", test_fraction=0.2, seed=42)
    train = Interactions.from_dataframe(read_ratings(folder / "train.tsv"))
    test = Interactions.from_dataframe(read_ratings(folder / "test.tsv"), user_ids=train.user_ids,
                                       item_ids=train.item_ids)
    return train, test


def binary(X: sp.csr_matrix) -> sp.csr_matrix:
    X = sp.csr_matrix(X, dtype=np.float32, copy=True)
    X.data[:] = 1.0
    return X


# -- the contestants: name -> fit(X, threads) returning a top-10 function ----------------------------
def ours(make):
    def fit(X, threads):
        model = make(threads).fit(X)
        return lambda: model.recommend(k=10, n_jobs=threads)[0]
    return fit


def factors_top10(uf, itf, ib, X, threads):
    from mrec_warp.topk import iter_top_k

    def score(rows):
        s = uf[rows] @ itf.T
        return s + ib if ib is not None else s

    return np.vstack([b[1] for b in iter_top_k(score, itf.shape[0], np.arange(uf.shape[0]), 10, exclude=X,
                                               n_jobs=threads)])


def lightfm_fit(X, threads):
    from lightfm import LightFM

    model = LightFM(no_components=64, loss="warp", learning_rate=0.05, random_state=0)
    model.fit(X.tocoo(), epochs=30, num_threads=threads)
    ib, iemb = model.get_item_representations()
    _, uemb = model.get_user_representations()
    return lambda: factors_top10(uemb.astype(np.float32), iemb.astype(np.float32), ib.astype(np.float32), X, threads)


def implicit_fit(kind):
    def fit(X, threads):
        from threadpoolctl import threadpool_limits

        import implicit.cpu.als
        import implicit.cpu.bpr
        import implicit.nearest_neighbours as nn

        make = {"als": lambda: implicit.cpu.als.AlternatingLeastSquares(factors=64, random_state=0,
                                                                        num_threads=threads),
                "bpr": lambda: implicit.cpu.bpr.BayesianPersonalizedRanking(factors=64, random_state=0,
                                                                           num_threads=threads),
                "cosine": lambda: nn.CosineRecommender(K=K, num_threads=threads),
                "bm25": lambda: nn.BM25Recommender(K=K, num_threads=threads)}[kind]
        with threadpool_limits(threads):
            model = make()
            model.fit(X, show_progress=False)

        def top10():
            with threadpool_limits(threads):
                ids, _ = model.recommend(np.arange(X.shape[0]), X, N=10, filter_already_liked_items=True)
            return np.asarray(ids, dtype=np.int64)
        return top10
    return fit


def contestants(peers: bool):
    from mrec_warp.models import EASE, SLIM, WARP, ItemKNN, Popularity

    out = {
        "popularity": ours(lambda t: Popularity()),
        "mrec-warp WARP": ours(lambda t: WARP(random_state=0, n_jobs=t)),
        "mrec-warp itemknn (defaults)": ours(lambda t: ItemKNN(n_jobs=t)),
        f"mrec-warp itemknn cosine K={K}": ours(lambda t: ItemKNN(neighbours=K, similarity="cosine", n_jobs=t)),
        f"mrec-warp itemknn bm25 K={K}": ours(lambda t: ItemKNN(neighbours=K, similarity="bm25", n_jobs=t)),
        "mrec-warp slim": ours(lambda t: SLIM(n_jobs=t)),
        "mrec-warp ease": ours(lambda t: EASE()),
    }
    if peers:
        out.update({
            "LightFM WARP (30 epochs)": lightfm_fit,
            "implicit ALS": implicit_fit("als"),
            "implicit BPR": implicit_fit("bpr"),
            f"implicit Cosine K={K}": implicit_fit("cosine"),
            f"implicit BM25 K={K}": implicit_fit("bm25"),
        })
    return out


def metrics(train, test, items):
    from mrec_warp.evaluation.metrics import evaluate_recommendations

    rows = np.repeat(np.arange(items.shape[0]), items.shape[1])
    flat = items.ravel()
    ok = flat >= 0
    recs = pd.DataFrame({"user": train.user_ids[rows[ok]], "item": train.item_ids[flat[ok]],
                         "rank": np.tile(np.arange(1, items.shape[1] + 1), items.shape[0])[ok]})
    ev = evaluate_recommendations(train, test, recs, ks=(10,))
    return {m: ev.mean(f"{m}@10") for m in ("precision", "ndcg", "map", "coverage")}


def run_one(fit, X, threads):
    t = time.perf_counter()
    top10 = fit(X, threads)
    fit_s = time.perf_counter() - t
    t = time.perf_counter()
    items = top10()
    return items, fit_s, time.perf_counter() - t


# -- part 1 --------------------------------------------------------------------------------------
def accuracy(sets, cache, peers, only=None):
    rows = []
    for name in sets:
        train, test = load_set(name, cache)
        X = binary(train.matrix)
        print(f"{name}: {X.shape[0]} users x {X.shape[1]} items, {X.nnz} train / {test.matrix.nnz} test",
              flush=True)
        for model, fit in contestants(peers).items():
            if only and not any(word in model for word in only):
                continue
            try:
                items, fit_s, rec_s = run_one(fit, X, 1)
            except Exception as exc:  # a peer failing is reported, not fatal
                print(f"  {model:<32} failed: {type(exc).__name__}: {exc}", flush=True)
                continue
            row = {"set": name, "model": model, **metrics(train, test, items), "fit_s": fit_s, "recommend_s": rec_s}
            rows.append(row)
            print(f"  {model:<32} P@10 {row['precision']:.4f}  NDCG@10 {row['ndcg']:.4f}  MAP@10 {row['map']:.4f}"
                  f"  cov@10 {row['coverage']:.3f}  fit {fit_s:7.2f}s  rec {rec_s:6.2f}s", flush=True)
    return rows


# -- part 2 --------------------------------------------------------------------------------------
def knn_speed(cache, sets, repeats=3):
    from mrec_warp.models import ItemKNN

    rows = []
    for name in sets:
        train, _ = load_set(name, cache)
        X = binary(train.matrix)
        for threads in (1, 2):
            for sim in ("cosine", "bm25"):
                pair = {"ours": ours(lambda t, s=sim: ItemKNN(neighbours=K, similarity=s, n_jobs=t)),
                        "implicit": implicit_fit(sim)}
                best = {}
                for _ in range(repeats):  # alternate the two, keep each one's fastest run
                    for who, fit in pair.items():
                        _, f, r = run_one(fit, X, threads)
                        best[who] = min(best.get(who, (np.inf,)), (f + r, f, r))
                row = {"set": name, "similarity": sim, "threads": threads,
                       "ours_fit_s": best["ours"][1], "ours_recommend_s": best["ours"][2],
                       "implicit_fit_s": best["implicit"][1], "implicit_recommend_s": best["implicit"][2],
                       "speedup": best["implicit"][0] / best["ours"][0]}
                rows.append(row)
                print(f"  {name:<9} {sim:<6} {threads} thread(s): ours {best['ours'][0]:6.2f}s "
                      f"(fit {best['ours'][1]:.2f} + rec {best['ours'][2]:.2f}), implicit {best['implicit'][0]:6.2f}s "
                      f"(fit {best['implicit'][1]:.2f} + rec {best['implicit'][2]:.2f}): {row['speedup']:.2f}x",
                      flush=True)
    return rows


# -- part 3 --------------------------------------------------------------------------------------
def big_worker(which: str, path: str, threads: int):
    """In its own process, so the peak RSS is this model's fit (plus the data)."""
    from mrec_warp.models import EASE, SLIM

    X = sp.load_npz(path).tocsr()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    model = EASE(dtype=which.split("-")[1]) if which.startswith("ease") else SLIM(n_jobs=threads)
    t, cpu = time.perf_counter(), time.process_time()
    model.fit(X)
    out = {"model": which, "threads": threads, "fit_s": time.perf_counter() - t,
           "fit_cpu_s": time.process_time() - cpu,  # on a shared machine, the wall time is not ours alone
           "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "rss_before_fit_mb": before}
    if which.startswith("ease"):
        out["announced_mb"] = EASE.memory_needed(X.shape[1], model.dtype, X.nnz) / 2**20
    print(json.dumps(out))


def big(cache: Path, threads: int, models):
    from mrec_warp.data.interactions import Interactions
    from mrec_warp.data.synthetic import generate

    path = cache / "big-20k.npz"
    if not path.exists():
        ratings, _ = generate(**BIG)
        cache.mkdir(parents=True, exist_ok=True)
        sp.save_npz(path, binary(Interactions.from_dataframe(ratings).matrix))
    rows = []
    for which in models:
        res = subprocess.run([sys.executable, __file__, "--big-worker", which, "--data", str(path),
                              "--threads", str(threads)], capture_output=True, text=True)
        if res.returncode != 0:
            print(f"  {which} failed:\n{res.stderr[-2000:]}")
            continue
        row = json.loads(res.stdout.strip().splitlines()[-1])
        rows.append(row)
        extra = f", announced {row['announced_mb']:.0f} MB" if "announced_mb" in row else ""
        print(f"  {which:<12} {threads} threads: fit {row['fit_s']:7.1f}s ({row['fit_cpu_s']:.0f} CPU s), peak RSS {row['peak_rss_mb']:.0f} MB "
              f"(data {row['rss_before_fit_mb']:.0f} MB){extra}", flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "bench-out"))
    ap.add_argument("--sets", default="ml100k,dense,longtail")
    ap.add_argument("--models", help="comma-separated words: only the contestants whose name holds one")
    ap.add_argument("--skip-accuracy", action="store_true")
    ap.add_argument("--skip-knn-speed", action="store_true")
    ap.add_argument("--big", action="store_true", help="also time EASE and SLIM on 20k items / 1M interactions")
    ap.add_argument("--big-models", default="ease-float32,ease-float64,slim")
    ap.add_argument("--threads", type=int, default=2, help="threads of the big part")
    ap.add_argument("--big-worker", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    args = ap.parse_args()
    warnings.filterwarnings("ignore", message="Method expects CSR input")  # implicit, about its own conversion
    if args.big_worker:
        big_worker(args.big_worker, args.data, args.threads)
        return
    out = Path(args.out)
    cache = out / "cache"
    try:
        import implicit  # noqa: F401
        import lightfm  # noqa: F401
        peers = True
    except ImportError:
        print("LightFM / implicit not installed: mrec-warp models only (run in the benchmark environment)")
        peers = False
    report = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                          "processor": platform.processor() or platform.machine(),
                          "load_before": os.getloadavg()},
              "date": time.strftime("%Y-%m-%d %H:%M")}
    sets = [s for s in args.sets.split(",") if s]
    if not args.skip_accuracy:
        print("Accuracy, every model with its defaults, top 10, one thread:")
        rows = accuracy(sets, cache, peers, args.models.split(",") if args.models else None)
        report["accuracy"] = rows
        table = pd.DataFrame(rows).set_index(["set", "model"])
        print()
        print(table.to_string(float_format=lambda v: f"{v:.4f}"))
        print()
    if peers and not args.skip_knn_speed:
        print(f"Item-kNN fit + recommend vs implicit, K={K} (best of 3 alternating runs):")
        report["knn_speed"] = knn_speed(cache, sets)
    if args.big:
        print(f"Big catalogue ({BIG['n_items']} items, {BIG['n_interactions']:,} interactions):")
        report["big"] = big(cache, args.threads, args.big_models.split(","))
    report["machine"]["load_after"] = os.getloadavg()
    out.mkdir(parents=True, exist_ok=True)
    path = out / "bench_models.json"
    path.write_text(json.dumps(report, indent=2, default=float))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
