#!/usr/bin/env python
"""Benchmark HybridWARP against LightFM's hybrid model, all in one run.

Run by hand with the benchmark environment (LightFM is never a dependency of mrec-warp)::

    .venv-bench/bin/python scripts/bench_hybrid.py            # 3 seeds, ~5 min on 2 cores

Three parts, each comparing like with like in the same process:

1. **Warm accuracy** on MovieLens 100k (``../shared/data/ml-100k``): ratings >= 4 are
   positives, per-user random 80/20 split with seed 42 (``mrec_warp prepare``), top-10
   excluding training items, metrics from ``mrec_warp.evaluation``. Features from
   ``mrec-warp prepare --features``: identity + genres; identity + genres + user demographics
   (age bucket, gender, occupation); and all of it plus the release-year bucket. mrec-warp
   runs with its defaults (early stopping picks the epochs); LightFM's hybrid (identity +
   genres, 64 factors, learning rate 0.05, WARP, its default normalisation) after 10 and
   30 epochs.
2. **Cold items**: ``prepare --split cold-items --test-fraction 0.2`` (seed 42) holds out
   20% of the items with every interaction of theirs. Each user's top 10 among the items
   absent from training (every item with features but no training row, also the ones
   nobody liked) is scored against their test items. Same features and models; LightFM
   knows every item at fit time (its usual set-up: identity + genres for all items).
   Baselines: random, and "feature popularity" (an item scores the summed mean training
   popularity of the items sharing each of its features).
3. **Speed**: seconds per epoch on the warm training set, identity + genres, 64 factors,
   learning rate 0.05, ``max_sampled`` 10 (LightFM's default) for both, 30 epochs, at 1
   and 2 threads; wall time (median epoch) and CPU time (process time, all threads). On a
   shared machine wall time measures the neighbours too; the load average is recorded.
   MovieLens 100k is small: hogwild threads mostly fight over the same hot rows (the 19
   genre rows are written on every step), so for both libraries 2 threads are no faster
   than 1 here; the comparison is at equal threads.

Prints tables and writes ``bench-out/bench_hybrid.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ML100K = ROOT.parent / "shared" / "data" / "ml-100k" / "u.data"

from mrec_warp.data.features import read_features  # noqa: E402
from mrec_warp.data.interactions import Interactions  # noqa: E402
from mrec_warp.data.ratings import read_ratings  # noqa: E402
from mrec_warp.stages.prepare import prepare  # noqa: E402
from mrec_warp.evaluation.metrics import evaluate_recommendations  # noqa: E402
from mrec_warp.models import WARP, HybridWARP, Popularity  # noqa: E402


def load_split(folder: Path):
    tr = read_ratings(folder / "train.tsv")
    te = read_ratings(folder / "test.tsv")
    items = read_features(folder / "item_features.tsv", kind="item")
    users = read_features(folder / "user_features.tsv", kind="user")
    return tr, te, items, users


def feature_sets(items, users):
    genres = items[items["feature"].str.startswith("genre:")]
    return {
        "identity + genres": (None, genres),
        "identity + genres + user demographics": (users, genres),
        "identity + genres + year + user demographics": (users, items),
    }


def metrics(tr, te, recs, catalog=None):
    ev = evaluate_recommendations(tr, te, recs, ks=(10,), catalog=catalog)
    return {m: ev.mean(f"{m}@10") for m in ("precision", "recall", "ndcg")}


def frame(users, item_ids, top):
    k = top.shape[1]
    return pd.DataFrame({"user": np.repeat(users, k), "item": item_ids[top.ravel()],
                         "rank": np.tile(np.arange(1, k + 1), len(users))})


# -- LightFM -------------------------------------------------------------------------------------
def lightfm_data(tr, items_table, users_table, all_items):
    from lightfm.data import Dataset

    ds = Dataset()  # identity features for every user and item, rows normalised (its defaults)
    ds.fit(tr["user"].unique(), all_items,
           user_features=None if users_table is None else users_table["feature"].unique(),
           item_features=items_table["feature"].unique())
    inter, _ = ds.build_interactions(zip(tr["user"], tr["item"]))
    item_f = ds.build_item_features((i, list(g["feature"])) for i, g in items_table.groupby("id")
                                    if i in set(all_items))
    user_f = None
    if users_table is not None:
        known = set(tr["user"])
        user_f = ds.build_user_features((u, list(g["feature"])) for u, g in users_table.groupby("id") if u in known)
    return ds, inter, user_f, item_f


def lightfm_scores(model, ds, user_f, item_f, users, items):
    uid, _, iid, _ = ds.mapping()
    _, ue = model.get_user_representations(user_f)
    ib, ie = model.get_item_representations(item_f)
    u = np.array([uid[x] for x in users])
    i = np.array([iid[x] for x in items])
    return ue[u] @ ie[i].T + ib[i]


def top_k(scores, k=10, exclude=None):
    scores = scores.copy()
    if exclude is not None:
        scores[exclude] = -np.inf
    part = np.argpartition(-scores, k, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, part, axis=1), axis=1)
    return np.take_along_axis(part, order, axis=1)


# -- part 1: warm ------------------------------------------------------------------------------------
def warm(folder: Path, seeds, rows):
    tr, te, items, users = load_split(folder)
    train = Interactions.from_dataframe(tr)

    def record(model, features, seed, seconds, recs, **extra):
        row = {"part": "warm", "model": model, "features": features, "seed": seed,
               "fit_seconds": round(seconds, 2), **metrics(tr, te, recs), **extra}
        rows.append(row)
        print(f"  {model:<22} {features:<46} seed {seed}  P@10 {row['precision']:.4f}  fit {seconds:6.1f}s", flush=True)

    t = time.perf_counter()
    pop = Popularity().fit(train)
    record("popularity", "-", 0, time.perf_counter() - t, pop.recommend_frame(k=10))
    for seed in seeds:
        t = time.perf_counter()
        m = WARP(random_state=seed).fit(train)
        record("mrec-warp WARP", "identity", seed, time.perf_counter() - t, m.recommend_frame(k=10), epochs=m.best_epoch_)
        for name, (uf, itf) in feature_sets(items, users).items():
            t = time.perf_counter()
            m = HybridWARP(random_state=seed).fit(train, user_features=uf, item_features=itf)
            record("mrec-warp HybridWARP", name, seed, time.perf_counter() - t, m.recommend_frame(k=10),
                   epochs=m.best_epoch_)
    try:
        from lightfm import LightFM
    except ImportError:
        print("  LightFM not installed: skipped (use .venv-bench/bin/python)")
        return
    users_list = train.user_ids
    seen = train.matrix.toarray() > 0
    for name, (uf, itf) in list(feature_sets(items, users).items())[:2]:
        ds, inter, user_f, item_f = lightfm_data(tr, itf, uf, train.item_ids)
        for seed in seeds:
            model = LightFM(no_components=64, loss="warp", learning_rate=0.05, random_state=seed)
            spent, done = 0.0, 0
            for target in (10, 30):
                t = time.perf_counter()
                model.fit_partial(inter, user_features=user_f, item_features=item_f, epochs=target - done, num_threads=2)
                spent += time.perf_counter() - t
                done = target
                s = lightfm_scores(model, ds, user_f, item_f, users_list, train.item_ids)
                record(f"LightFM ({target} epochs)", name, seed, spent, frame(users_list, train.item_ids, top_k(s, 10, seen)))


# -- part 2: cold items --------------------------------------------------------------------------------
def cold(folder: Path, seeds, rows):
    tr, te, items, users = load_split(folder)
    train = Interactions.from_dataframe(tr)
    new_items = np.array(sorted(set(items["id"]) - set(tr["item"])))
    users_list = train.user_ids

    def record(model, features, seed, recs, **extra):
        row = {"part": "cold", "model": model, "features": features, "seed": seed,
               **metrics(tr, te, recs, catalog=new_items), **extra}
        rows.append(row)
        print(f"  {model:<22} {features:<46} seed {seed}  cold P@10 {row['precision']:.4f}", flush=True)

    rng = np.random.default_rng(0)
    record("random", "-", 0, frame(users_list, new_items, np.array([rng.choice(len(new_items), 10, replace=False)
                                                                    for _ in users_list])))
    for name, (uf, itf) in list(feature_sets(items, users).items())[::2]:
        pop = pd.Series(np.asarray(train.matrix.sum(axis=0)).ravel(), index=train.item_ids)
        fpop = itf.assign(pop=itf["id"].map(pop)).groupby("feature")["pop"].mean()
        score = itf[itf["id"].isin(set(new_items))].assign(s=lambda t: t["feature"].map(fpop).fillna(0)) \
            .groupby("id")["s"].sum().reindex(new_items).fillna(0).to_numpy()
        top = np.tile(np.argsort(-score)[:10], (len(users_list), 1))
        record("feature popularity", name, 0, frame(users_list, new_items, top))
    for seed in seeds:
        for name, (uf, itf) in feature_sets(items, users).items():
            m = HybridWARP(random_state=seed).fit(train, user_features=uf, item_features=itf)
            record("mrec-warp HybridWARP", name, seed, m.with_new_items(only=True).recommend_frame(k=10),
                   epochs=m.best_epoch_)
    try:
        from lightfm import LightFM
    except ImportError:
        return
    all_items = np.array(sorted(set(train.item_ids) | set(new_items)))
    for name, (uf, itf) in list(feature_sets(items, users).items()):
        ds, inter, user_f, item_f = lightfm_data(tr, itf, uf, all_items)
        for seed in seeds:
            model = LightFM(no_components=64, loss="warp", learning_rate=0.05, random_state=seed)
            done = 0
            for target in (10, 30):
                model.fit_partial(inter, user_features=user_f, item_features=item_f, epochs=target - done, num_threads=2)
                done = target
                s = lightfm_scores(model, ds, user_f, item_f, users_list, new_items)
                record(f"LightFM ({target} epochs)", name, seed, frame(users_list, new_items, top_k(s, 10)))


# -- part 3: speed --------------------------------------------------------------------------------------
def speed(folder: Path, threads_list, epochs, rows):
    tr, te, items, users = load_split(folder)
    train = Interactions.from_dataframe(tr)
    genres = items[items["feature"].str.startswith("genre:")]
    try:
        from lightfm import LightFM
    except ImportError:
        LightFM = None
    for threads in threads_list:
        for rep in range(2):  # interleaved, twice: both libraries see the same neighbours
            load_before = os.getloadavg()[0]
            wall, cpu = [], []

            def timed(call):
                w, c = time.perf_counter(), time.process_time()
                call()
                wall.append(time.perf_counter() - w)
                cpu.append(time.process_time() - c)

            m = HybridWARP(factors=64, learning_rate=0.05, max_sampled=10, epochs=0, n_jobs=threads, random_state=rep)
            m.fit(train, item_features=genres)
            data = __import__("mrec_warp.models.warp", fromlist=["TrainingData"]).TrainingData(m.train_)
            from mrec_warp.progress import SILENT
            for _ in range(epochs):
                timed(lambda: m._epoch(data, SILENT))
            rows.append({"part": "speed", "model": "mrec-warp HybridWARP", "threads": threads, "rep": rep,
                         "epochs": epochs, "wall_s_per_epoch": float(np.median(wall)),
                         "cpu_s_per_epoch": float(np.median(cpu)), "load": load_before})
            print(f"  mrec-warp HybridWARP  {threads} thread(s)  {np.median(wall) * 1000:7.1f} ms/epoch wall  "
                  f"{np.median(cpu) * 1000:7.1f} ms/epoch CPU  (load {load_before:.2f})", flush=True)
            if LightFM is None:
                continue
            ds, inter, _, item_f = lightfm_data(tr, genres, None, train.item_ids)
            model = LightFM(no_components=64, loss="warp", learning_rate=0.05, max_sampled=10, random_state=rep)
            wall, cpu = [], []
            for _ in range(epochs):
                timed(lambda: model.fit_partial(inter, item_features=item_f, epochs=1, num_threads=threads))
            rows.append({"part": "speed", "model": "LightFM", "threads": threads, "rep": rep, "epochs": epochs,
                         "wall_s_per_epoch": float(np.median(wall)), "cpu_s_per_epoch": float(np.median(cpu)),
                         "load": os.getloadavg()[0]})
            print(f"  LightFM               {threads} thread(s)  {np.median(wall) * 1000:7.1f} ms/epoch wall  "
                  f"{np.median(cpu) * 1000:7.1f} ms/epoch CPU", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=3, help="Seeds per model [3].")
    ap.add_argument("--parts", default="warm,cold,speed", help="Which parts to run [warm,cold,speed].")
    ap.add_argument("--speed-epochs", type=int, default=30)
    ap.add_argument("--out", default=str(ROOT / "bench-out"))
    args = ap.parse_args()
    if not ML100K.exists():
        sys.exit(f"MovieLens 100k not found at {ML100K}")
    parts = set(args.parts.split(","))
    seeds = list(range(args.seeds))
    rows = []
    started = time.time()
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        warm_dir, cold_dir = Path(tmp) / "warm", Path(tmp) / "cold"
        prepare(ML100K, warm_dir, format="movielens", min_rating=4, test_fraction=0.2, seed=42, features=True)
        prepare(ML100K, cold_dir, format="movielens", min_rating=4, test_fraction=0.2, seed=42, features=True,
                split="cold-items")
        if "warm" in parts:
            print("warm: ml-100k, rating >= 4, per-user 80/20, seed 42")
            warm(warm_dir, seeds, rows)
        if "cold" in parts:
            print("cold items: 20% of items held out, ranked among all items absent from training")
            cold(cold_dir, seeds, rows)
        if "speed" in parts:
            print(f"speed: identity + genres, 64 factors, lr 0.05, max_sampled 10, {args.speed_epochs} epochs")
            speed(warm_dir, (1, 2), args.speed_epochs, rows)
    table = pd.DataFrame(rows)
    summaries = {}
    for part in ("warm", "cold"):
        sub = table[table["part"] == part] if len(table) else table
        if len(sub):
            s = sub.groupby(["model", "features"], sort=False).agg(
                P10=("precision", "mean"), P10_sd=("precision", "std"), R10=("recall", "mean"),
                NDCG10=("ndcg", "mean"), runs=("seed", "count"))
            summaries[part] = s
            print(f"\n{part}:\n{s.round(4).to_string()}")
    sub = table[table["part"] == "speed"] if len(table) else table
    if len(sub):
        s = sub.groupby(["model", "threads"], sort=False).agg(
            wall_ms=("wall_s_per_epoch", lambda x: 1000 * x.median()),
            cpu_ms=("cpu_s_per_epoch", lambda x: 1000 * x.median()))
        summaries["speed"] = s
        print(f"\nspeed (median over repeats of the median epoch):\n{s.round(1).to_string()}")
    report = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "processor": platform.machine()},
        "date": time.strftime("%Y-%m-%d %H:%M"), "seconds": round(time.time() - started),
        "load_average_start": load_start, "load_average_end": os.getloadavg(),
        "rows": rows,
        "summary": {k: v.reset_index().to_dict("records") for k, v in summaries.items()},
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "bench_hybrid.json"
    path.write_text(json.dumps(report, indent=2, default=float))
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
