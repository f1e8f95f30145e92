#!/usr/bin/env python
"""How many sub-models should a cluster fit by default? P@10 and fit time on ml-100k.

Run by hand, never a test::

    PYTHONPATH=. .venv/bin/python scripts/bench_submodels.py [--seeds 0 1 2] [--models 1 2 4]

ml-100k (ratings >= 4, per-user 80/20 split with seed 42, as ``bench_warp.py``), 64 factors
in total, default WARP settings (early stopping on each sub-model's own hold-out, refit):
for each seed, K = 1, 2, 4 sub-models of 64/K factors (``fit_submodels``, the units run one
after the other on one thread, so "seconds" is the fit's total work: K workers would divide
it by up to K), alternated so the machine's load hits them alike, then precision@10 on the
test split (``mrec_warp.evaluation``). Prints one row per fit and a summary.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from _benchlib import load_avg, movielens_split


def main() -> None:
    from mrec_warp.context import ExecutionContext
    from mrec_warp.data.interactions import Interactions
    from mrec_warp.evaluation.metrics import evaluate_recommendations
    from mrec_warp.stages.submodels import fit_submodels

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--models", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--factors", type=int, default=64)
    args = ap.parse_args()
    train_df, test_df = movielens_split()
    data = Interactions.from_dataframe(train_df)
    print(f"load {load_avg()}", flush=True)
    rows = []
    for seed in args.seeds:
        for k in args.models:
            t = time.perf_counter()
            model = fit_submodels(data, {"factors": args.factors}, ExecutionContext("threads", n_jobs=1),
                                  n_models=k, random_state=seed)
            seconds = time.perf_counter() - t
            recs = model.recommend_frame(k=10)
            p10 = evaluate_recommendations(train_df, test_df, recs, ks=(10,)).mean("precision@10")
            epochs = [m["epochs"] for m in model.sub_models_]
            rows.append({"models": k, "seed": seed, "P@10": p10, "seconds": seconds})
            print(f"  {k} x {args.factors // k:<3} seed {seed}  P@10 {p10:.4f}  {seconds:6.2f}s  epochs {epochs}",
                  flush=True)
    table = pd.DataFrame(rows).groupby("models").agg(P10=("P@10", "mean"), P10_sd=("P@10", "std"),
                                                     seconds=("seconds", "median"))
    print(table.round(4).to_string())
    print(f"load {load_avg()}")


if __name__ == "__main__":
    main()
