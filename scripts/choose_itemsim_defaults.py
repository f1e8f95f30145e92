#!/usr/bin/env python
"""How the item-similarity defaults were chosen: grids on three data sets, ranked by the worst.

For each data set (MovieLens 100k and the two synthetic shapes of ``bench_models.py``), the
training split is split again (10% of each user's items held out, seed 42) and every grid
point is scored by validation precision@10 with :func:`mrec_warp.stages.tune.tune`; the test split
is never looked at. A setting's score on a set is its precision relative to the best setting
there, and settings are ranked by their *worst* set, as for WARP's defaults.

    PYTHONPATH=$PWD python scripts/choose_itemsim_defaults.py [--families slim,ease,itemknn]

Prints one table per family and writes ``bench-out/choose_itemsim_defaults.json``.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from bench_models import load_set

ROOT = Path(__file__).resolve().parents[1]
GRIDS = {
    "slim": {"l1": [1.0, 2.0, 5.0, 10.0], "l2": [30.0, 100.0, 200.0, 500.0]},
    "ease": {"l2": [50.0, 100.0, 200.0, 400.0, 800.0, 1600.0]},
    "itemknn": {"neighbours": [20, 50, 100, 200, 400], "similarity": ["cosine", "tfidf", "bm25"]},
}


def main():
    from mrec_warp.stages.candidates import MODEL, grid_points
    from mrec_warp.context import ExecutionContext
    from mrec_warp.stages.tune import tune

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--families", default="slim,ease,itemknn")
    ap.add_argument("--sets", default="ml100k,dense,longtail")
    ap.add_argument("--out", default=str(ROOT / "bench-out"))
    ap.add_argument("--n-jobs", type=int, default=1)
    args = ap.parse_args()
    out = Path(args.out)
    report = {}
    for fam in args.families.split(","):
        names = sorted(GRIDS[fam])
        points = [{MODEL: fam, **p} for p in grid_points(GRIDS[fam])]
        per_set = {}
        for name in args.sets.split(","):
            train, _ = load_set(name, out / "cache")
            table = tune(train.matrix, points, seed=42, context=ExecutionContext(n_jobs=args.n_jobs),
                         with_defaults=False).table
            per_set[name] = table.set_index(names)["precision@10"]
            print(f"{fam} on {name}: best {per_set[name].max():.4f}", flush=True)
        scores = pd.DataFrame(per_set)
        relative = scores / scores.max()
        relative["worst"] = relative.min(axis=1)
        table = relative.join(scores.add_suffix(" P@10")).sort_values("worst", ascending=False)
        print(table.to_string(float_format=lambda v: f"{v:.4f}"))
        report[fam] = table.reset_index().to_dict(orient="records")
    out.mkdir(parents=True, exist_ok=True)
    path = out / "choose_itemsim_defaults.json"
    path.write_text(json.dumps(report, indent=2, default=float))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
