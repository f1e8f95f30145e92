#!/usr/bin/env python
"""WRMF's defaults against implicit's ALS at its best test-picked grid point, on the suite.

Run by hand in the benchmark environment (implicit is never a dependency of the package)::

    PYTHONPATH=$PWD .venv-bench/bin/python scripts/bench_wrmf_implicit.py

On every set of the selection suite (``bench_defaults.py``: the same prepared 80/20 splits,
seed 42), data already in memory, two threads each (implicit's ``num_threads=2`` with
``OPENBLAS_NUM_THREADS=1``, as implicit itself asks; WRMF's ``n_jobs=2``):

* **implicit** (``AlternatingLeastSquares``, conjugate gradient) over its grid: factors
  32/64/128 x regularization 0.01/0.1/1 x alpha 1/5/20 on the binary matrix (implicit
  weighs an observed pair ``alpha * value``), each trained up to ``--max-iterations`` and
  scored on the test split after every iteration (as early stopping scores a hold-out). The
  best (grid point, iteration count) by test P@10 is its anchor: an optimistic one, picked on
  the test set. That point is then
  trained again for exactly its iteration count, with no callback, and timed (``fit`` only).
* **mrec-warp WRMF** as ``mrec-warp train`` fits it: its defaults (``--wrmf key=value``
  overrides one, e.g. ``--wrmf factors=32``), the value column when the file has one,
  ``fit`` timed whole: the hold-out, an evaluation every iteration until the patience runs
  out, and the refit.

Both are scored the same way (the top 10 of every test user with training items excluded,
P@10 from :mod:`mrec_warp.evaluation`). The two contenders' timed fits alternate,
``--repeats`` times each; the table shows the median. The target (issue 34): WRMF reaches
implicit's best P@10 in at most 0.7x implicit's fit time. Prints a table and writes
``bench-out/bench_wrmf_implicit.json``. Not a test.
"""
from __future__ import annotations

import os

# implicit warns that OpenBLAS's own threads make it ~10x slower; set before numpy loads BLAS
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_defaults import SETS, parse_params, prepare_set  # noqa: E402
from bench_time_to_accuracy import load, precision  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GRID = dict(factors=(32, 64, 128), regularization=(0.01, 0.1, 1.0), alpha=(1.0, 5.0, 20.0))
THREADS = 2
TARGET = 0.7


def implicit_model(point, iterations, seed):
    from implicit.cpu.als import AlternatingLeastSquares

    return AlternatingLeastSquares(use_cg=True, iterations=iterations, num_threads=THREADS, random_state=seed,
                                   calculate_training_loss=False, **point)


def implicit_fit(model, user_items, callback=None):
    model.fit(user_items, show_progress=False, callback=callback)


def implicit_p10(model, train, train_df, test_df) -> float:
    uf, itf = (np.ascontiguousarray(a, dtype=np.float32) for a in (model.user_factors, model.item_factors))
    return precision(uf, itf, np.zeros(itf.shape[0], np.float32), train, train_df, test_df)


def test_scorer(train, test_df):
    """P@10 on the test split as early stopping scores a hold-out (:class:`HoldoutScorer`: the
    test pairs of known users and items, training items excluded): fast enough to score every
    iteration of every grid point. It only ranks the grid; the table's P@10 is :func:`precision`'s."""
    import scipy.sparse as sp

    from mrec_warp.models.early_stopping import HoldoutScorer

    users = pd.Index(train.user_ids).get_indexer(test_df["user"].astype(str))
    items = pd.Index(train.item_ids).get_indexer(test_df["item"].astype(str))
    known = (users >= 0) & (items >= 0)
    truth = sp.csr_matrix((np.ones(int(known.sum()), np.float32), (users[known], items[known])),
                          shape=train.matrix.shape)
    truth.sum_duplicates()
    return HoldoutScorer(train.matrix, truth, np.flatnonzero(np.diff(truth.indptr) > 0), 10)


def implicit_grid(train, train_df, test_df, seed, max_iterations):
    """Every grid point scored after each iteration: [(point, iteration, P@10)]."""
    binary = train.matrix.copy().astype(np.float32)
    binary.data[:] = 1
    scorer = test_scorer(train, test_df)
    scores = []
    for values in itertools.product(*GRID.values()):
        point = dict(zip(GRID, values))
        model = implicit_model(point, max_iterations, seed)

        def score(iteration, *_):  # implicit calls back after every iteration
            uf, itf = (np.ascontiguousarray(a, dtype=np.float32) for a in (model.user_factors, model.item_factors))
            p = scorer(lambda rows, out=None: np.matmul(uf[rows], itf.T, out=out))
            scores.append((point, int(iteration) + 1, p))

        implicit_fit(model, binary, score)
    return scores, binary


def timed_implicit(point, iterations, binary, seed, train, train_df, test_df):
    model = implicit_model(point, iterations, seed)
    t = time.perf_counter()
    implicit_fit(model, binary)
    seconds = time.perf_counter() - t
    return seconds, implicit_p10(model, train, train_df, test_df)


def timed_wrmf(params, train, train_df, test_df, seed):
    from mrec_warp.models import WRMF

    model = WRMF(**{"random_state": seed, "n_jobs": THREADS, **params})
    t = time.perf_counter()
    model.fit(train, use_values=bool(getattr(train, "has_values", True)))
    seconds = time.perf_counter() - t
    p = precision(model.user_factors_, model.item_factors_, np.zeros(model.n_items, np.float32), train, train_df,
                  test_df)
    fit = [h for h in model.history_ if h["phase"] == "fit"]
    return seconds, p, {"best_iteration": int(model.best_epoch_), "fit_iterations": len(fit),
                        "refit_iterations": sum(h["phase"] == "refit" for h in model.history_),
                        "iteration_seconds": float(np.mean([h["seconds"] for h in model.history_])),
                        "eval_seconds": float(np.mean([h["eval_seconds"] for h in fit if "eval_seconds" in h] or [0])),
                        "alpha": float(getattr(model, "alpha_", float("nan")))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3, help="timed fits of each contender, alternated (median)")
    ap.add_argument("--max-iterations", type=int, default=30, help="implicit's iterations scored per grid point")
    ap.add_argument("--wrmf", action="append", default=[], metavar="KEY=VALUE",
                    help="override a WRMF default (repeatable), e.g. --wrmf factors=32")
    ap.add_argument("--implicit-from", metavar="JSON", help="take implicit's grid point and iteration count per "
                    "set from an earlier run's bench_wrmf_implicit.json instead of searching the grid again (implicit "
                    "is still timed in this run)")
    ap.add_argument("--data", default="/tmp/defaults-data")
    ap.add_argument("--out", default=str(ROOT / "bench-out"))
    args = ap.parse_args()
    params = parse_params([f"wrmf:{kv}" for kv in args.wrmf]).get("wrmf", {})
    import implicit

    picked = {}
    if args.implicit_from:
        picked = {r["set"]: r for r in json.loads(Path(args.implicit_from).read_text())["rows"]}
    load_start = os.getloadavg()
    rows = []
    for name in args.sets.split(","):
        train, train_df, test_df = load(prepare_set(name, Path(args.data)))
        if name in picked:
            point, iterations, grid_p = (picked[name][k] for k in ("implicit_point", "implicit_iterations",
                                                                   "implicit_grid_p10"))
            binary = train.matrix.copy().astype(np.float32)
            binary.data[:] = 1
        else:
            scores, binary = implicit_grid(train, train_df, test_df, args.seed, args.max_iterations)
            point, iterations, grid_p = max(scores, key=lambda s: s[2])
        imp_s, wrmf_s = [], []
        for _ in range(args.repeats):  # alternate the contenders
            s, imp_p = timed_implicit(point, iterations, binary, args.seed, train, train_df, test_df)
            imp_s.append(s)
            s, wrmf_p, info = timed_wrmf(params, train, train_df, test_df, args.seed)
            wrmf_s.append(s)
        row = {"set": name, "implicit_point": point, "implicit_iterations": iterations,
               "implicit_grid_p10": grid_p, "implicit_p10": imp_p, "implicit_seconds": statistics.median(imp_s),
               "implicit_runs": imp_s, "wrmf_p10": wrmf_p, "wrmf_seconds": statistics.median(wrmf_s),
               "wrmf_runs": wrmf_s, "wrmf_params": params, **info, "load": os.getloadavg()[0]}
        row["ratio"] = row["wrmf_seconds"] / row["implicit_seconds"]
        row["met"] = bool(wrmf_p >= imp_p and row["ratio"] <= TARGET)
        rows.append(row)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "bench_wrmf_implicit.json").write_text(json.dumps({"rows": rows}, indent=1, default=float))
        print(f"  {name:<13} implicit {point} x{iterations}: P@10 {imp_p:.4f} in {row['implicit_seconds']:.2f}s;  "
              f"WRMF P@10 {wrmf_p:.4f} in {row['wrmf_seconds']:.2f}s  load {row['load']:.2f}",
              file=sys.stderr, flush=True)
    lines = [f"{'set':<13} {'implicit best (f/reg/alpha x it)':>32} {'P@10':>7} {'s':>6} {'WRMF P@10':>9} {'s':>6} "
             f"{'WRMF/impl.':>10} {'target':>7}"]
    for r in rows:
        p = r["implicit_point"]
        desc = f"{p['factors']}/{p['regularization']:g}/{p['alpha']:g} x{r['implicit_iterations']}"
        lines.append(f"{r['set']:<13} {desc:>32} {r['implicit_p10']:>7.4f} {r['implicit_seconds']:>6.2f} "
                     f"{r['wrmf_p10']:>9.4f} {r['wrmf_seconds']:>6.2f} {r['ratio']:>9.2f}x "
                     f"{'met' if r['met'] else 'MISSED':>7}")
    text = "\n".join(lines)
    print(f"\n{THREADS} threads each (OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}), implicit "
          f"{implicit.__version__}, median of {args.repeats} alternated fits; load average at start "
          f"{load_start[0]:.2f}, at end {os.getloadavg()[0]:.2f}; WRMF parameters: {params or 'defaults'}")
    print(text)
    print("\nWRMF's fit: iterations (fit + refit), mean seconds per iteration and per evaluation")
    for r in rows:
        print(f"{r['set']:<13} {r['fit_iterations']:>3} + {r['refit_iterations']:<3} {r['iteration_seconds']:.4f}s "
              f"{r['eval_seconds']:.4f}s  best {r['best_iteration']}  alpha {r['alpha']:g}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "bench_wrmf_implicit.json"
    path.write_text(json.dumps({"rows": rows, "table": text, "threads": THREADS, "implicit": implicit.__version__,
                                "load_average": [load_start, os.getloadavg()]}, indent=1, default=float))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
