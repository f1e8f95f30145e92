#!/usr/bin/env python
"""How many sub-models should a cluster fit by default? P@10 and fit time on ml-100k.

Run by hand, never a test::

    PYTHONPATH=. .venv/bin/python scripts/bench_submodels.py [--seeds 0 1 2] [--models 1 2 4]
    PYTHONPATH=. .venv/bin/python scripts/bench_submodels.py --backend dask --n-jobs 2

ml-100k (ratings >= 4, per-user 80/20 split with seed 42, as ``bench_warp.py``), 64 factors
in total, default WARP settings (early stopping on each sub-model's own hold-out, refit):
for each seed, K = 1, 2, 4 sub-models of 64/K factors (``fit_submodels``; by default the
units run one after the other on one thread, so "seconds" is the fit's total work; with
``--backend dask --n-jobs J``, the wall time on a local cluster of J workers), alternated so the machine's load hits them alike, then precision@10 on the
test split (``mrec_warp.evaluation``). Prints one row per fit and a summary.
"""
from __future__ import annotations

import argparse
import time

import pandas as pd

from _benchlib import load_avg, movielens_split


def main() -> None:
    from mrec_warp.context import ExecutionContext
    from mrec_warp.data.interactions import Interactions

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--models", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--factors", type=int, default=64)
    ap.add_argument("--backend", default="threads", choices=["threads", "processes", "dask"])
    ap.add_argument("--n-jobs", type=int, default=1)
    args = ap.parse_args()
    train_df, test_df = movielens_split()
    data = Interactions.from_dataframe(train_df)
    print(f"load {load_avg()}; {args.backend}, {args.n_jobs} worker(s)", flush=True)
    rows = []
    with ExecutionContext(args.backend, n_jobs=args.n_jobs) as context:
        for seed in args.seeds:
            for k in args.models:
                rows.append(run(data, train_df, test_df, context, k, seed, args.factors))
    table = pd.DataFrame(rows).groupby("models").agg(P10=("P@10", "mean"), P10_sd=("P@10", "std"),
                                                     seconds=("seconds", "median"))
    print(table.round(4).to_string())
    print(f"load {load_avg()}")


def run(data, train_df, test_df, context, k, seed, factors):
    """One fit of ``k`` sub-models: its P@10 on the test split and its seconds."""
    from mrec_warp.evaluation.metrics import evaluate_recommendations
    from mrec_warp.stages.submodels import fit_submodels

    t = time.perf_counter()
    model = fit_submodels(data, {"factors": factors}, context, n_models=k, random_state=seed)
    seconds = time.perf_counter() - t
    p10 = evaluate_recommendations(train_df, test_df, model.recommend_frame(k=10), ks=(10,)).mean("precision@10")
    epochs = [m["epochs"] for m in model.sub_models_]
    print(f"  {k} x {factors // k:<3} seed {seed}  P@10 {p10:.4f}  {seconds:6.2f}s  epochs {epochs}", flush=True)
    return {"models": k, "seed": seed, "P@10": p10, "seconds": seconds}


if __name__ == "__main__":
    main()
