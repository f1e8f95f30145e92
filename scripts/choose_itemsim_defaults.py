#!/usr/bin/env python
"""How the item-similarity defaults were chosen: grids on three data sets, ranked by the worst.

For each data set (MovieLens 100k and the two synthetic shapes of ``bench_models.py``), the
training split is split again (10% of each user's items held out, seed 42) and every grid
point is scored by validation precision@10 with :func:`mrec_warp.stages.tune.tune`; the test split
is never looked at. A setting's score on a set is its precision relative to the best setting
there, and settings are ranked by their *worst* set, as for WARP's defaults.

    PYTHONPATH=$PWD python scripts/choose_itemsim_defaults.py [--families slim,ease,itemknn]

Prints one table per family and writes ``bench-out/choose_itemsim_defaults.json``.

``--test-grid`` instead checks the defaults chosen on the hold-out (``"auto"``, issue 32) on
``bench_defaults.py``'s selection suite: per set, each family's test P@10 over a small grid
(:data:`TEST_GRIDS`), fitted on the set's train split, against the default's P@10 from a
``bench_defaults.json`` (``--defaults``, the rows labelled ``after``); a default within 3% of
the grid's best passes. The grid's points are scored as the fit's selection scores its
candidates (the same weights, computed once per kind and truncated per neighbour count; EASE's
dense weights for each ``l2`` by the cheaper side, exactly), so the whole grid of a 17k-item
set costs about one fit per kind; SLIM's six points are fitted one by one (about six fits):

    PYTHONPATH=$PWD python scripts/choose_itemsim_defaults.py --test-grid --defaults bench-out/bench_defaults.json

writes ``bench-out/itemsim_test_grid.json``.
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


#: The small grids ``--test-grid`` scores on each suite set's test split.
TEST_GRIDS = {
    "ease": {"l2": [25.0, 50.0, 100.0, 200.0, 400.0, 800.0, 1600.0, 3200.0]},
    "itemknn": {"similarity": ["cosine", "tfidf", "bm25"], "neighbours": [100, 200, 400, 800, 1600]},
    "rp3beta": {"beta": [0.1, 0.3, 0.5, 0.7, 0.9], "neighbours": [100, 200, 400, 800]},
    # SLIM's points are fitted one by one (no truncation shares them): the fixed l1 1, l2 100
    # and one step each way on each axis, plus the selection's strongest l1
    "slim": {"l1_l2": [(1.0, 100.0), (0.5, 100.0), (2.0, 100.0), (4.0, 100.0), (1.0, 30.0), (1.0, 300.0)]},
}


def suite_matrices(folder: Path):
    """A suite set's train and test pairs as users x items CSR over the train split's ids
    (test pairs of unknown users or items dropped: they are never recommended)."""
    import numpy as np
    import scipy.sparse as sp

    from mrec_warp.data.ratings import read_ratings

    train, test = read_ratings(folder / "train.tsv"), read_ratings(folder / "test.tsv")
    users = pd.Index(pd.unique(train["user"]))
    items = pd.Index(pd.unique(train["item"]))

    def matrix(frame):
        u, i = users.get_indexer(frame["user"]), items.get_indexer(frame["item"])
        ok = (u >= 0) & (i >= 0)
        m = sp.csr_matrix((np.ones(int(ok.sum()), np.float32), (u[ok], i[ok])), shape=(len(users), len(items)))
        m.sum_duplicates()
        m.data[:] = 1.0
        return m

    return matrix(train), matrix(test), np.flatnonzero(users.isin(test["user"]))


def test_grid(fam: str, train, test, users, progress):
    """``[(setting, test P@10)]`` of ``fam`` over :data:`TEST_GRIDS` on one set."""
    import numpy as np

    from mrec_warp.models import ItemKNN, RP3beta
    from mrec_warp.models._itemsim import RankedWeights, weights_scorer
    from mrec_warp.models.early_stopping import HoldoutScorer
    from mrec_warp.models.ease import items_side_scores, users_side_scores

    scorer = HoldoutScorer(train, test, users, 10)
    grid = TEST_GRIDS[fam]
    out = []
    if fam == "slim":
        from mrec_warp.models import SLIM
        fitted = [(l1, l2, SLIM(l1=l1, l2=l2, select=False).fit(train)) for l1, l2 in grid["l1_l2"]]
        return [({"l1": l1, "l2": l2}, scorer(model.score_users)) for l1, l2, model in fitted]
    if fam == "ease":
        counts = np.bincount(train.indices, minlength=train.shape[1]).astype(np.float32)
        active = int(np.count_nonzero(np.diff(train.indptr)))
        side = users_side_scores if active <= train.shape[1] else items_side_scores
        make = side(train, users, None, train.shape[1], counts, np.dtype("float32"))
        return [({"l2": l2}, scorer(make(l2))) for l2 in grid["l2"]]
    kinds, counts = (grid["similarity"], grid["neighbours"]) if fam == "itemknn" else (grid["beta"], grid["neighbours"])
    for kind in kinds:
        if fam == "itemknn":
            rows = ItemKNN(similarity=kind, select=False).similarity_rows(train, kind)
        else:
            rows = RP3beta(beta=kind, select=False).walk_rows(train, kind)
        ranked = RankedWeights.build(rows, train, counts, 256.0, progress, fam)
        for k in counts:
            setting = {"similarity" if fam == "itemknn" else "beta": kind, "neighbours": k}
            out.append((setting, scorer(weights_scorer(train, ranked.top(k)))))
    return out


def run_test_grid(args) -> None:
    import glob
    import os
    import sys

    from mrec_warp.progress import SILENT

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_defaults import SETS, prepare_set, summarise

    load = os.getloadavg()
    grids = []
    if args.from_grid:  # an earlier run's grids, joined to newer defaults
        grids = [(r["set"], r["family"], [(g["setting"], g["precision@10"]) for g in r["grid"]])
                 for r in json.loads(Path(args.from_grid).read_text())["rows"]]
    for name in [] if args.from_grid else args.sets.split(",") if args.sets != "ml100k,dense,longtail" else list(SETS):
        train, test, users = suite_matrices(prepare_set(name, Path(args.data)))
        for fam in args.families.split(","):
            grids.append((name, fam, test_grid(fam, train, test, users, SILENT)))
            print(f"{name} {fam}: grid done", file=sys.stderr, flush=True)
    # the defaults' rows are read last: the bench_defaults runs they come from may end meanwhile
    rows = [r for pattern in (args.defaults or "").split(",") if pattern for path in sorted(glob.glob(pattern))
            for r in json.loads(Path(path).read_text())["rows"]]
    stats = summarise([r for r in rows if r.get("label") == "after"])
    report, lines = [], []
    head = f"{'set':<14}{'family':<9}{'default':>9}{'grid best':>10}  {'best setting':<34}{'default/best':>13}"
    for name, fam, scores in grids:
        setting, top = max(scores, key=lambda sv: sv[1])
        default = stats.get(("after", name, fam), (float("nan"),))[0]
        ratio = default / top if top > 0 else float("nan")
        report.append({"set": name, "family": fam, "default": default, "grid_best": top, "best": setting,
                       "ratio": ratio, "grid": [{"setting": s, "precision@10": p} for s, p in scores]})
        lines.append(f"{name:<14}{fam:<9}{default:>9.4f}{top:>10.4f}  "
                     f"{' '.join(f'{k}={v}' for k, v in setting.items()):<34}{ratio:>12.1%}"
                     + ("" if ratio != ratio or ratio >= 0.97 else "  BELOW 97%"))
        print(lines[-1], flush=True)
    print(f"\ntest P@10 of the defaults (bench_defaults, 'after') against the best of {TEST_GRIDS}; "
          f"load average at start {load[0]:.2f}, at end {os.getloadavg()[0]:.2f}")
    print(head)
    print("\n".join(lines))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "itemsim_test_grid.json"
    path.write_text(json.dumps({"rows": report, "grids": TEST_GRIDS, "load_average": [load, os.getloadavg()]},
                               indent=1, default=float))
    print(f"wrote {path}")


def main():
    from mrec_warp.stages.candidates import MODEL, grid_points
    from mrec_warp.context import ExecutionContext
    from mrec_warp.stages.tune import tune

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--families", default="slim,ease,itemknn")
    ap.add_argument("--sets", default="ml100k,dense,longtail")
    ap.add_argument("--out", default=str(ROOT / "bench-out"))
    ap.add_argument("--n-jobs", type=int, default=1)
    ap.add_argument("--test-grid", action="store_true", help="check the hold-out's defaults on the selection "
                    "suite against a small grid (see the module docstring)")
    ap.add_argument("--defaults", help="bench_defaults.json files (comma list of globs) whose 'after' rows are "
                    "the defaults' P@10")
    ap.add_argument("--data", default="/tmp/defaults-data", help="where bench_defaults keeps the suite's splits")
    ap.add_argument("--from-grid", help="itemsim_test_grid.json of an earlier --test-grid run: its grids, not "
                    "computed again")
    args = ap.parse_args()
    if args.test_grid:
        if args.families == "slim,ease,itemknn":
            args.families = "ease,itemknn,rp3beta"
        run_test_grid(args)
        return
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
