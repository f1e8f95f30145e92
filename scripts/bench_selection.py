#!/usr/bin/env python
"""Time to a good model: WARP's default fit (early stopping + refit) against LightFM's 10 epochs.

Run by hand with the benchmark environment (LightFM installed), never a test::

    PYTHONPATH=. /work/main/.venv-bench/bin/python scripts/bench_selection.py

One run measures, alternating the contenders so that the machine's load hits them alike:

* **ml-100k** (ratings >= 4, per-user 80/20 split with seed 42, as ``bench_warp.py``): for
  model seeds 0..4, fit seconds (data already in memory) and precision@10 on the test split
  (``mrec_warp.evaluation``) of WARP's defaults ("after": the new early stopping, refit from
  scratch), of the old early stopping ("before": eval every epoch, patience 10, any rise
  counts, refit from scratch), of the new early stopping with the warm refit ("after-warm",
  ``warm_epochs=8``) and of LightFM WARP (64 factors, learning rate 0.05, 10 epochs, 1 thread).
* **The 1M synthetic set** (``_benchlib.synthetic_matrix("1m")``, 10% per-user hold-out
  with seed 0, as ``bench_warp.py``): the same three, ``--rounds`` times, hold-out P@10.
* **Two more synthetic shapes** (the defaults study's dense and long-tail sets, 80/20):
  the three mrec-warp fits, seeds 0..2, P@10 and seconds.

Every fit runs on one thread. Prints a table (medians of the seconds, means of P@10) and
writes ``bench-out/bench_selection.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

from _benchlib import holdout_precision_at_10, lightfm_factors, movielens_split, synthetic_matrix

ROOT = Path(__file__).resolve().parents[1]

#: The early-stopping defaults before patience counted in epochs (bit for bit the old fit).
BEFORE = {"patience": 10, "eval_every": 1, "min_improvement": 0.0, "warm_epochs": 0}
#: LightFM's usual settings at its best fixed epoch count on ml-100k (README, bench_warp.py).
LIGHTFM = {"no_components": 64, "loss": "warp", "learning_rate": 0.05}


def fit_warp(X, seed, settings):
    from mrec_warp.models import WARP

    model = WARP(random_state=seed, n_jobs=1, **settings)
    t = time.perf_counter()
    model.fit(X)
    seconds = time.perf_counter() - t
    fit_epochs = sum(h["phase"] == "fit" for h in model.history_)
    refit_epochs = sum(h["phase"] == "refit" for h in model.history_)
    factors = (model.user_factors_, model.item_factors_, model.item_bias_)
    return seconds, factors, {"best_epoch": int(model.best_epoch_), "fit_epochs": fit_epochs,
                              "refit_epochs": refit_epochs}


def fit_lightfm(X, seed):
    from lightfm import LightFM

    coo = X.tocoo()
    model = LightFM(random_state=seed, **LIGHTFM)
    t = time.perf_counter()
    model.fit(coo, epochs=10, num_threads=1)
    return time.perf_counter() - t, lightfm_factors(model), {}


def contenders(with_lightfm=True):
    yield "before", lambda X, s: fit_warp(X, s, BEFORE)
    yield "after", lambda X, s: fit_warp(X, s, {})
    yield "after-warm", lambda X, s: fit_warp(X, s, {"warm_epochs": 8})
    if with_lightfm:
        yield "lightfm-10", fit_lightfm


def movielens(seeds, rows):
    from mrec_warp.data.interactions import Interactions
    from mrec_warp.evaluation.metrics import evaluate_recommendations

    train_df, test_df = movielens_split()
    train = Interactions.from_dataframe(train_df)
    X = train.matrix

    def precision(uf, itf, ib):
        from mrec_warp.recommend import iter_top_k

        blocks = list(iter_top_k(lambda r: uf[r] @ itf.T + ib, itf.shape[0], np.arange(uf.shape[0]), 10, exclude=X))
        items = np.vstack([b[1] for b in blocks])
        ok = items.ravel() >= 0
        users = np.repeat(np.arange(items.shape[0]), 10)[ok]
        recs = pd.DataFrame({"user": train.user_ids[users], "item": train.item_ids[items.ravel()[ok]],
                             "rank": np.tile(np.arange(1, 11), items.shape[0])[ok]})
        return evaluate_recommendations(train_df, test_df, recs, ks=(10,)).mean("precision@10")

    for seed in seeds:
        for name, fit in contenders():
            seconds, factors, extra = fit(X, seed)
            record(rows, "ml-100k", name, seed, seconds, precision(*factors), extra)


def synthetic_1m(rounds, cache, rows):
    from mrec_warp.models.early_stopping import holdout_split

    X = sp.load_npz(synthetic_matrix("1m", cache)).tocsr().astype(np.float32)
    X.data[:] = 1
    train, val = holdout_split(X, 0.1, np.random.default_rng(0))
    for r in range(rounds):
        for name, fit in contenders():
            seconds, factors, extra = fit(train, 0)
            record(rows, "synth-1m", name, r, seconds, holdout_precision_at_10(*factors, train, val), extra)


def other_shapes(seeds, rows):
    from mrec_warp.data.interactions import Interactions
    from mrec_warp.data.synthetic import generate
    from mrec_warp.models.early_stopping import holdout_split, precision_at_k

    shapes = {"synth-dense": (2000, 1000, 100_000, 3), "synth-longtail": (5000, 10_000, 60_000, 4)}
    for name, (users, items, n, data_seed) in shapes.items():
        ratings, _ = generate(n_users=users, n_items=items, n_interactions=n, seed=data_seed)
        train, test = holdout_split(Interactions.from_dataframe(ratings).matrix, 0.2, np.random.default_rng(42))
        for seed in seeds:
            for label, fit in contenders(with_lightfm=False):
                seconds, (uf, itf, ib), extra = fit(train, seed)
                p = precision_at_k(lambda r: uf[r] @ itf.T + ib, itf.shape[0], train, test, 10)
                record(rows, name, label, seed, seconds, p, extra)


def record(rows, data, name, seed, seconds, precision, extra):
    row = {"data": data, "fit": name, "seed": seed, "seconds": round(seconds, 3), "precision@10": precision, **extra}
    rows.append(row)
    print(f"  {data:<15} {name:<13} seed {seed}  P@10 {precision:.4f}  {seconds:7.2f}s  {extra}", flush=True)


def summarise(rows):
    table = pd.DataFrame(rows)
    out = table.groupby(["data", "fit"], sort=False).agg(
        P10=("precision@10", "mean"), P10_sd=("precision@10", "std"), seconds=("seconds", "median"),
        best_epoch=("best_epoch", "mean"), fit_epochs=("fit_epochs", "mean"), refit_epochs=("refit_epochs", "mean"),
        runs=("seed", "count")).reset_index()
    lightfm = out[out.fit == "lightfm-10"].set_index("data")["seconds"]
    out["x_lightfm_10"] = [s / lightfm[d] if d in lightfm else np.nan for d, s in zip(out.data, out.seconds)]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=5, help="model seeds on ml-100k")
    ap.add_argument("--rounds", type=int, default=3, help="alternated runs on the 1M set")
    ap.add_argument("--shape-seeds", type=int, default=3, help="model seeds on the dense and long-tail sets")
    ap.add_argument("--skip", default="", help="comma list of parts to skip: ml,1m,shapes")
    ap.add_argument("--out", default=str(ROOT / "bench-out"))
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    load = os.getloadavg()
    rows = []
    if "ml" not in skip:
        movielens(range(args.seeds), rows)
    if "1m" not in skip:
        synthetic_1m(args.rounds, Path(args.out) / "cache", rows)
    if "shapes" not in skip:
        other_shapes(range(args.shape_seeds), rows)
    summary = summarise(rows)
    print(f"\nload average at start {load[0]:.2f}, at end {os.getloadavg()[0]:.2f}")
    print(summary.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    with open(Path(args.out) / "bench_selection.json", "w") as fh:
        json.dump({"rows": rows, "summary": summary.to_dict(orient="records"),
                   "load_average": [load, os.getloadavg()]}, fh, indent=1, default=float)


if __name__ == "__main__":
    main()
