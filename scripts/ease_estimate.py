#!/usr/bin/env python
"""EASE's time estimate (what ``tune`` plans with) against the fit it estimates, same process.

For each named set of ``bench_defaults.py``'s selection suite (its train split): ``tune``'s
estimate of a trial's fit (:meth:`EASE.fit_cost` on the measured shape, less the validation
scoring: the flop rate probed on this machine, :func:`mrec_warp.models.ease.flops_rate`),
then the fit itself timed, one BLAS thread, for each variant: the fixed ``l2``
(``select=False``), the default (``l2="auto"``: the choice on the hold-out, by the users'
side or the items' side, then the fit) and, on sets of more than ``--max-items`` items, the
default restricted to that many items. The ``path`` column says which way the fit goes. A
ratio within 1/1.5..1.5 passes.

    PYTHONPATH=$PWD python scripts/ease_estimate.py
    PYTHONPATH=$PWD python scripts/ease_estimate.py --sets ml-100k,syn-library --max-items 0

Prints a table and writes ``bench-out/ease_estimate.json``. Not a test.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETS = "ml-100k,mls-4,mls-bin,syn-catalogue,syn-counts,syn-library"


def path_of(model, csr) -> str:
    """Which way ``model``'s fit on ``csr`` goes: the fixed ``l2``, or the choice's side and items."""
    import numpy as np

    from mrec_warp.memory import available_bytes
    from mrec_warp.models.early_stopping import VALIDATION_FRACTION, VALIDATION_USERS, held_out_counts
    from mrec_warp.models.ease import selection_plan
    from mrec_warp.models.selection import selected_names

    n_all = csr.shape[1]
    limit = n_all if model.max_items is None else min(int(model.max_items), n_all)
    if not selected_names(model):
        return f"fixed l2, {limit:,} items"
    counts = np.diff(csr.indptr)
    held = held_out_counts(counts, VALIDATION_FRACTION)
    fitting = counts - held
    max_bytes = model.memory_limit_mb * 2**20 if model.memory_limit_mb is not None else 0.75 * available_bytes()
    side, n = selection_plan(limit, int(np.count_nonzero(fitting)), min(int(np.count_nonzero(held)), VALIDATION_USERS),
                             int(fitting.sum()), max_bytes, np.dtype(model.dtype).itemsize)
    return f"choice {side}' side on {n:,}, fit {limit:,} items"


def main():
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_defaults import prepare_set
    from choose_itemsim_defaults import suite_matrices

    from mrec_warp.models import EASE
    from mrec_warp.stages.budget import data_shape

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default=SETS)
    ap.add_argument("--data", default="/tmp/defaults-data")
    ap.add_argument("--max-items", type=int, default=2000, help="the restricted variant's items (0: none)")
    ap.add_argument("--out", default=str(ROOT / "bench-out"))
    args = ap.parse_args()
    load = os.getloadavg()
    rows = []
    print(f"{'set':<14}{'variant':<16}{'path':<46}{'estimate':>10}{'fit':>10}{'ratio':>8}")
    for name in args.sets.split(","):
        train, test, _ = suite_matrices(prepare_set(name, Path(args.data)))
        shape = replace(data_shape(train, test), measured=True)
        variants = [("select off", {"select": False}), ("default", {})]
        if 0 < args.max_items < train.shape[1]:
            variants.append((f"max_items {args.max_items}", {"max_items": args.max_items}))
        for label, params in variants:
            estimate = EASE.fit_cost(shape, params) - shape.scoring()  # the fit alone: scoring is tune's
            model = EASE(**params)
            t = time.perf_counter()
            model.fit(train)
            seconds = time.perf_counter() - t
            rows.append({"set": name, "variant": label, "params": params, "path": path_of(model, train),
                         "items": train.shape[1], "users": train.shape[0], "pairs": int(train.nnz),
                         "estimate": estimate, "fit": seconds, "ratio": estimate / seconds,
                         "load": os.getloadavg()[0]})
            r = rows[-1]
            print(f"{name:<14}{label:<16}{r['path']:<46}{r['estimate']:9.2f}s{r['fit']:9.2f}s{r['ratio']:8.2f}"
                  f"  load {r['load']:.1f}", flush=True)
    ratios = [r["ratio"] for r in rows]
    ok = all(1 / 1.5 <= x <= 1.5 for x in ratios)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "ease_estimate.json"
    path.write_text(json.dumps({"rows": rows, "load_average": [load, os.getloadavg()],
                                "within_1.5": ok}, indent=1))
    print(f"ratios {min(ratios):.2f}-{max(ratios):.2f} ({'all' if ok else 'not all'} within 0.67-1.5); "
          f"load average at start {load[0]:.2f}, at end {os.getloadavg()[0]:.2f}; wrote {path}")


if __name__ == "__main__":
    main()
