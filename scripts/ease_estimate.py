#!/usr/bin/env python
"""EASE's time estimate (what ``tune`` plans with) against the fit it estimates, same process.

For each named set of ``bench_defaults.py``'s selection suite (its train split): ``tune``'s
estimate of a trial (:meth:`EASE.fit_cost` on the measured shape: the flop rate probed on
this machine, :func:`mrec_warp.models.ease.flops_rate`), then the fit itself timed, for the
fixed ``l2`` (``select=False``) and for the default (``l2="auto"``: the choice on the hold-out
and the fit). A ratio within 1/1.5..1.5 passes. One BLAS thread.

    PYTHONPATH=$PWD python scripts/ease_estimate.py --sets ml-100k,syn-counts,mls-bin,syn-library

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


def main():
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_defaults import prepare_set
    from choose_itemsim_defaults import suite_matrices

    from mrec_warp.models import EASE
    from mrec_warp.stages.budget import data_shape

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default="ml-100k,syn-counts,mls-bin,syn-library")
    ap.add_argument("--data", default="/tmp/defaults-data")
    ap.add_argument("--out", default=str(ROOT / "bench-out"))
    args = ap.parse_args()
    load = os.getloadavg()
    rows = []
    for name in args.sets.split(","):
        train, test, _ = suite_matrices(prepare_set(name, Path(args.data)))
        shape = replace(data_shape(train, test), measured=True)
        for params in ({"select": False}, {}):
            estimate = EASE.fit_cost(shape, params) - shape.scoring()  # the fit alone: scoring is tune's
            t = time.perf_counter()
            EASE(**params).fit(train)
            seconds = time.perf_counter() - t
            rows.append({"set": name, "params": params, "items": train.shape[1], "users": train.shape[0],
                         "estimate": estimate, "fit": seconds, "ratio": estimate / seconds,
                         "load": os.getloadavg()[0]})
            r = rows[-1]
            print(f"{name:<14}{'select off' if params else 'default':<12}{r['estimate']:9.1f}s{r['fit']:9.1f}s"
                  f"{r['ratio']:8.2f}  load {r['load']:.1f}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "ease_estimate.json"
    path.write_text(json.dumps({"rows": rows, "load_average": [load, os.getloadavg()]}, indent=1))
    print(f"load average at start {load[0]:.2f}, at end {os.getloadavg()[0]:.2f}; wrote {path}")


if __name__ == "__main__":
    main()
