#!/usr/bin/env python
"""How WARP's defaults were chosen: a small grid on several datasets of different shapes.

For each dataset (MovieLens 100k and synthetic sets of other shapes) and each setting, fit
with early stopping (as a user running the defaults does) on a per-user 80/20 split and
measure precision@10 on the held-out part. A setting's score on a dataset is its precision
relative to the best setting there; defaults should be good everywhere, so settings are
ranked by their *worst* relative score across datasets. Not a test: run by hand.

Two studies, each varying its own parameters around the other defaults:

- ``rate``: learning rate x max_sampled;
- ``norm``: the user norm limit x early-stopping patience (a limit makes the validation
  curve rise more slowly, so patience is chosen with it).

Prints a table and writes ``bench-out/choose_defaults-STUDY.json``.
"""
from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from mrec_warp.data.interactions import Interactions
from mrec_warp.data.ratings import read_ratings
from mrec_warp.data.synthetic import generate
from mrec_warp.models import WARP
from mrec_warp.models.early_stopping import holdout_split, precision_at_k

ROOT = Path(__file__).resolve().parents[1]
ML100K = ROOT.parent / "shared" / "data" / "ml-100k" / "u.data"


def datasets():
    df = read_ratings(ML100K, format="movielens")
    yield "ml-100k", Interactions.from_dataframe(df[df.value >= 4]).matrix
    # many items per user, small catalogue
    ratings, _ = generate(n_users=2000, n_items=1000, n_interactions=100_000, seed=3)
    yield "synth-dense", Interactions.from_dataframe(ratings).matrix
    # long tail: large catalogue, few items per user
    ratings, _ = generate(n_users=5_000, n_items=10_000, n_interactions=60_000, seed=4)
    yield "synth-sparse", Interactions.from_dataframe(ratings).matrix


STUDIES = {
    "rate": {"learning_rate": [0.02, 0.03, 0.05], "max_sampled": [10, 50, 100]},
    "norm": {"user_max_norm": [None, 1.0, 1.25, 1.5, 2.0], "patience": [5, 10, 15]},
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--study", choices=sorted(STUDIES), default="norm")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench-out"))
    args = ap.parse_args()
    grid = STUDIES[args.study]
    settings = [dict(zip(grid, values)) for values in itertools.product(*grid.values())]
    rows = []
    for name, X in datasets():
        train, test = holdout_split(X, 0.2, np.random.default_rng(42))
        for setting in settings:
            for seed in range(args.seeds):
                t = time.perf_counter()
                model = WARP(random_state=seed, **setting).fit(train)
                p = precision_at_k(model.score_users, model.n_items, train, test, 10)
                rows.append({"dataset": name, **setting, "seed": seed, "precision@10": p,
                             "epochs": model.best_epoch_, "seconds": time.perf_counter() - t})
            last = rows[-args.seeds:]
            print(f"{name:<13} {setting}  P@10 {np.mean([r['precision@10'] for r in last]):.4f}  "
                  f"epochs {[r['epochs'] for r in last]}", flush=True)
    table = pd.DataFrame(rows)
    keys = list(grid)
    table[keys] = table[keys].astype(object).where(table[keys].notna(), "none")  # groupby drops NaN keys
    mean = table.groupby(["dataset"] + keys)["precision@10"].mean().reset_index()
    mean["relative"] = mean["precision@10"] / mean.groupby("dataset")["precision@10"].transform("max")
    wide = mean.pivot_table(index=keys, columns="dataset", values="relative")
    wide["worst"] = wide.min(axis=1)
    wide = wide.sort_values("worst", ascending=False)
    print("\nprecision@10 relative to the best setting per dataset (sorted by the worst dataset):")
    print(wide.to_string(float_format=lambda v: f"{v:.3f}"))
    absolute = mean.pivot_table(index=keys, columns="dataset", values="precision@10").loc[wide.index]
    print("\nprecision@10 (mean over seeds):")
    print(absolute.to_string(float_format=lambda v: f"{v:.4f}"))
    cost = table.groupby(keys + ["dataset"])["seconds"].mean().unstack().loc[wide.index]
    print("\nfit seconds (early stopping and refit included):")
    print(cost.to_string(float_format=lambda v: f"{v:.1f}"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"choose_defaults-{args.study}.json").write_text(json.dumps({"runs": rows}, indent=1, default=float))


if __name__ == "__main__":
    main()
