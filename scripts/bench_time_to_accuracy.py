#!/usr/bin/env python
"""Time to accuracy: WARP's default fit (its own model selection and refit) against LightFM.

Run by hand in the benchmark environment (LightFM is never a dependency of the package)::

    PYTHONPATH=$PWD .venv-bench/bin/python scripts/bench_time_to_accuracy.py

On every set of the selection suite (``bench_defaults.py``: the same prepared 80/20 splits,
seed 42), one thread, data already in memory, in the same run, alternating contenders:

* **mrec-warp**: ``WARP(random_state=seed)`` with every default, ``fit`` timed whole: the
  internal hold-out, an evaluation every epoch until the patience runs out, the refit on
  all the training data. The per-epoch training and evaluation seconds come from
  ``history_`` (``seconds``, ``eval_seconds``).
* **LightFM** at the best setting a test-set search found on ml-100k (issue 22): 128
  factors, WARP loss, learning rate 0.02, max_sampled 50, 32 epochs, trained once. With
  ``--lightfm-checkpoints`` it also trains on to more epochs and keeps the best test P@10
  among the checkpoints (test-picked epochs: LightFM's best, not a fixed count), timed to
  the checkpoint that scored it (training only).

Both are scored the same way: the top 10 of every test user with training items excluded
(:mod:`mrec_warp.topk`), P@10 from :mod:`mrec_warp.evaluation`. The target (issue 22): at
least LightFM's best P@10 in at most half its time. Prints a table and writes
``bench-out/bench_time_to_accuracy.json``. Not a test.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_defaults import SETS, prepare_set  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LIGHTFM = dict(no_components=128, loss="warp", learning_rate=0.02, max_sampled=50)
LIGHTFM_EPOCHS = 32


def load(folder: Path):
    from mrec_warp.data.interactions import Interactions
    from mrec_warp.data.ratings import read_ratings

    train_df, test_df = read_ratings(folder / "train.tsv"), read_ratings(folder / "test.tsv")
    return Interactions.from_dataframe(train_df), train_df, test_df


def precision(uf, itf, ib, train, train_df, test_df) -> float:
    """P@10 of factors over every test user (mrec_warp.evaluation), training items excluded."""
    from mrec_warp.evaluation.metrics import evaluate_recommendations
    from mrec_warp.topk import iter_top_k

    users = np.flatnonzero(np.isin(train.user_ids, test_df["user"].astype(str).unique()))
    blocks = list(iter_top_k(lambda r: uf[r] @ itf.T + ib, itf.shape[0], users, 10, exclude=train.matrix))
    items = np.vstack([b[1] for b in blocks])
    ok = items.ravel() >= 0
    rows = np.repeat(users, 10)[ok]
    recs = pd.DataFrame({"user": train.user_ids[rows], "item": train.item_ids[items.ravel()[ok]],
                         "rank": np.tile(np.arange(1, 11), len(users))[ok]})
    return float(evaluate_recommendations(train_df, test_df, recs, ks=(10,)).mean("precision@10"))


def run_mrec(train, train_df, test_df, seed):
    from mrec_warp.models import WARP

    X = train.matrix.copy()
    X.data[:] = 1  # WARP's defaults ignore values; a binary matrix for both contenders
    model = WARP(random_state=seed, n_jobs=1)
    t = time.perf_counter()
    model.fit(X, user_ids=train.user_ids, item_ids=train.item_ids)
    seconds = time.perf_counter() - t
    hist = model.history_
    fit = [h for h in hist if h["phase"] == "fit"]
    evals = [h["eval_seconds"] for h in fit if "eval_seconds" in h]
    parts = {"fit_train_s": sum(h["seconds"] for h in fit), "eval_s": sum(evals),
             "refit_s": sum(h["seconds"] for h in hist if h["phase"] == "refit")}
    parts["other_s"] = seconds - sum(parts.values())
    p = precision(model.user_factors_, model.item_factors_, model.item_bias_, train, train_df, test_df)
    return {"contender": "mrec-warp", "seconds": seconds, "precision@10": p, "best_epoch": int(model.best_epoch_),
            "fit_epochs": len(fit), "refit_epochs": sum(h["phase"] == "refit" for h in hist),
            "epoch_seconds": float(np.mean([h["seconds"] for h in hist])),
            "eval_seconds": float(np.mean(evals)) if evals else float("nan"), **parts}


def run_lightfm(train, train_df, test_df, seed, checkpoints):
    from lightfm import LightFM

    coo = train.matrix.tocoo()
    coo.data[:] = 1
    model = LightFM(random_state=seed, **LIGHTFM)
    spent, done, out = 0.0, 0, []
    for stop in checkpoints:
        t = time.perf_counter()
        model.fit_partial(coo, epochs=stop - done, num_threads=1)
        spent += time.perf_counter() - t
        done = stop
        ib, iemb = model.get_item_representations()
        _, uemb = model.get_user_representations()
        p = precision(uemb.astype(np.float32), iemb.astype(np.float32), ib.astype(np.float32), train, train_df,
                      test_df)
        out.append({"epochs": stop, "seconds": spent, "precision@10": p})
    fixed = next(r for r in out if r["epochs"] == LIGHTFM_EPOCHS)
    best = max(out, key=lambda r: r["precision@10"])
    return ({"contender": f"lightfm-{LIGHTFM_EPOCHS}", **fixed},
            {"contender": "lightfm-best", **best, "checkpoints": out})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--lightfm-checkpoints", default="16,32,48",
                    help=f"epochs at which LightFM is scored (must include {LIGHTFM_EPOCHS})")
    ap.add_argument("--speedup", type=float, default=3.0,
                    help="the target: LightFM's best P@10 in at most 1/SPEEDUP of its time")
    ap.add_argument("--data", default="/tmp/defaults-data")
    ap.add_argument("--out", default=str(ROOT / "bench-out"))
    args = ap.parse_args()
    checkpoints = sorted({int(x) for x in args.lightfm_checkpoints.split(",")} | {LIGHTFM_EPOCHS})
    load_start = os.getloadavg()
    rows = []
    for name in args.sets.split(","):
        train, train_df, test_df = load(prepare_set(name, Path(args.data)))
        for seed in range(args.seeds):
            for row in (run_mrec(train, train_df, test_df, seed),
                        *run_lightfm(train, train_df, test_df, seed, checkpoints)):
                row.update(set=name, seed=seed, load=os.getloadavg()[0])
                rows.append(row)
                print(f"  {name:<13} {row['contender']:<13} seed {seed}  P@10 {row['precision@10']:.4f}  "
                      f"{row['seconds']:7.2f}s  load {row['load']:.2f}", file=sys.stderr, flush=True)
    table = pd.DataFrame(rows)
    summary = table.groupby(["set", "contender"], sort=False).agg(
        P10=("precision@10", "mean"), seconds=("seconds", "mean")).unstack("contender")
    lines = [f"{'set':<13} {'mrec-warp P@10':>14} {'s':>6} {'LightFM-32 P@10':>15} {'s':>6} "
             f"{'LightFM best P@10':>17} {'s':>6} {'x faster':>8} {'target':>7}"]
    for s in dict.fromkeys(table.set):
        m, f, b = (summary.loc[s, ("P10", c)] for c in ("mrec-warp", f"lightfm-{LIGHTFM_EPOCHS}", "lightfm-best"))
        ms, fs, bs = (summary.loc[s, ("seconds", c)] for c in ("mrec-warp", f"lightfm-{LIGHTFM_EPOCHS}",
                                                               "lightfm-best"))
        ref_p, ref_s = max((f, fs), (b, bs))  # LightFM's best P@10 and the time it took
        met = m >= ref_p and ms <= ref_s / args.speedup
        lines.append(f"{s:<13} {m:>14.4f} {ms:>6.1f} {f:>15.4f} {fs:>6.1f} {b:>17.4f} {bs:>6.1f} "
                     f"{ref_s / ms:>8.2f} {'met' if met else 'MISSED':>7}")
    text = "\n".join(lines)
    import mrec_warp

    print(f"\n1 thread each; load average at start {load_start[0]:.2f}, at end {os.getloadavg()[0]:.2f}; "
          f"target {args.speedup:g}x; mrec_warp from {Path(mrec_warp.__file__).parent}")
    print(text)
    mrec = table[table.contender == "mrec-warp"]
    print("\nmrec-warp per epoch (mean seconds): training vs validation evaluation")
    print(mrec.groupby("set", sort=False)[["fit_epochs", "refit_epochs", "epoch_seconds", "eval_seconds"]]
          .mean().to_string(float_format=lambda v: f"{v:.3f}"))
    print("\nmrec-warp's fit, where the time goes (mean seconds): hold-out epochs, their evaluations, refit, rest")
    print(mrec.groupby("set", sort=False)[["seconds", "fit_train_s", "eval_s", "refit_s", "other_s"]]
          .mean().to_string(float_format=lambda v: f"{v:.2f}"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "bench_time_to_accuracy.json"
    path.write_text(json.dumps({"rows": rows, "table": text, "lightfm": LIGHTFM,
                                "load_average": [load_start, os.getloadavg()]}, indent=1, default=float))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
