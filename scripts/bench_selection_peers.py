#!/usr/bin/env python
"""WRMF's settings chosen on the hold-out against its fixed defaults, its grid and implicit's best ALS.

Run by hand in the benchmark environment (implicit is never a dependency)::

    PYTHONPATH=$PWD OPENBLAS_NUM_THREADS=1 /work/main/.venv-bench/bin/python scripts/bench_selection_peers.py

On the selection suite (``bench_defaults.py``'s sets and splits, prepared there once), per set,
all in one run and on one thread, with the data already in memory:

* **default** (``WRMF()``: factors, alpha and regularization chosen on the internal hold-out)
  and **fixed** (``WRMF(select=False)``: today's fixed defaults, the same bits as before
  selection existed), alternating per seed so that the machine's load hits both alike: fit
  seconds and test P@10;
* **grid**: WRMF at each setting the search tries (``wrmf_search.GRID``, explicit values:
  early stopping on the internal hold-out as a user's fit), seed 0, test P@10: the best of
  it is what "within 3% of its best on the grid" compares with;
* **implicit**: ``AlternatingLeastSquares`` (CG, 1 thread) over factors 32/64/128 x
  regularization 0.01/0.1/1 x alpha 1/5/20, the iterations picked on the test split
  (evaluated after 5, 10, 15 and 20), given the pairs as 1s and, on a set with values that
  differ, also the values (its confidence ``alpha * value``): an optimistic anchor
  (BENCHMARKING.md).

P@10 is scored the same way for every contender (``early_stopping.precision_at_k`` on the
same test users, training items excluded; up to ``--users`` of them, a fixed sample). Prints
the table with the load average and writes ``bench-out/bench_selection_peers.json``. Not a test.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_defaults import prepare_set  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
IMPLICIT_GRID = dict(factors=(32, 64, 128), regularization=(0.01, 0.1, 1.0), alpha=(1.0, 5.0, 20.0))
IMPLICIT_CHECKS = (5, 10, 15, 20)


def load_set(folder: Path, n_users: int):
    """(Interactions of train, binary train, test matrix, the scored test users)."""
    from mrec_warp.data.interactions import Interactions
    from mrec_warp.data.ratings import read_ratings

    tr, te = read_ratings(folder / "train.tsv"), read_ratings(folder / "test.tsv")
    X = Interactions.from_dataframe(tr, value_col="value" if "value" in tr else None)
    te = te[te.user.isin(set(X.user_ids)) & te.item.isin(set(X.item_ids))]
    T = sp.csr_matrix((np.ones(len(te), np.float32), (X.user_indices(te.user.to_numpy()),
                                                      X.item_indices(te.item.to_numpy()))), shape=X.matrix.shape)
    T.data[:] = 1
    B = X.matrix.tocsr().astype(np.float32)
    B.data[:] = 1
    users = np.flatnonzero(np.diff(T.indptr) > 0)
    if len(users) > n_users:
        users = np.sort(np.random.default_rng(0).choice(users, n_users, replace=False))
    return X, B, T, users


def p_at_10(uf, itf, B, T, users) -> float:
    from mrec_warp.models.early_stopping import precision_at_k

    return float(precision_at_k(lambda rows: uf[rows] @ itf.T, itf.shape[0], B, T, 10, users=users))


def ours(X, B, T, users, seed, **params):
    from mrec_warp.models import WRMF

    t = time.perf_counter()
    m = WRMF(random_state=seed, **params).fit(X)
    seconds = time.perf_counter() - t
    return {"precision@10": p_at_10(m.user_factors_, m.item_factors_, B, T, users), "seconds": seconds,
            "factors": int(m.factors_), "alpha": float(m.alpha_), "regularization": float(m.regularization_),
            "best_epoch": int(m.best_epoch_)}


def implicit_point(X, B, T, users, factors, reg, alpha, binary):
    from implicit.cpu.als import AlternatingLeastSquares
    from threadpoolctl import threadpool_limits

    values = B if binary else X.matrix.tocsr().astype(np.float32)
    scores = {}
    t = time.perf_counter()
    model = AlternatingLeastSquares(factors=factors, regularization=reg, alpha=alpha, iterations=max(IMPLICIT_CHECKS),
                                    use_cg=True, num_threads=1, random_state=0)

    def check(iteration, elapsed, loss):
        if iteration + 1 in IMPLICIT_CHECKS:
            scores[iteration + 1] = p_at_10(model.user_factors, model.item_factors, B, T, users)

    with threadpool_limits(limits=1, user_api="blas"):
        model.fit(values, show_progress=False, callback=check)
    best = max(scores, key=scores.get)
    return {"precision@10": scores[best], "iterations": best, "seconds": time.perf_counter() - t}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default="ml-100k,mls-4,syn-counts,syn-catalogue,mls-bin,syn-wide,syn-longtail,syn-library")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--users", type=int, default=3000, help="most test users scored (a fixed sample)")
    ap.add_argument("--parts", default="default,grid,implicit")
    ap.add_argument("--data", default="/tmp/defaults-data")
    ap.add_argument("--out", default=str(ROOT / "bench-out"))
    args = ap.parse_args()
    from mrec_warp.models.wrmf_search import GRID

    parts = args.parts.split(",")
    load0 = os.getloadavg()
    rows = []
    for name in args.sets.split(","):
        X, B, T, users = load_set(prepare_set(name, Path(args.data)), args.users)

        def add(row):
            rows.append({"set": name, **row})
            print(f"  {name:14s} {row['who']:9s} " + " ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                                                       for k, v in row.items() if k != "who"), file=sys.stderr, flush=True)

        if "default" in parts:
            for seed in range(args.seeds):
                order = [("default", {}), ("fixed", {"select": False})]
                for who, params in (order if seed % 2 == 0 else order[::-1]):
                    add({"who": who, "seed": seed, **ours(X, B, T, users, seed, **params)})
        if "grid" in parts:
            from mrec_warp.data.confidence import auto_alpha, observed_sizes

            fixed_alpha = auto_alpha(X.matrix.data, "linear", 1.0, observed_sizes(X.matrix))  # the data rule
            for factors, reg, scale in GRID:
                add({"who": "grid", "seed": 0, **ours(X, B, T, users, 0, factors=factors, regularization=reg,
                                                      alpha=fixed_alpha * scale)})
        if "implicit" in parts:
            inputs = (True,) if np.all(X.matrix.data == X.matrix.data[0]) else (True, False)
            for binary, (f, reg, alpha) in itertools.product(inputs, itertools.product(*IMPLICIT_GRID.values())):
                add({"who": "implicit", "factors": f, "regularization": reg, "alpha": alpha, "binary": binary,
                     **implicit_point(X, B, T, users, f, reg, alpha, binary)})
    print(table(rows, load0))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_selection_peers.json").write_text(json.dumps({"rows": rows, "load_average": [load0, os.getloadavg()]},
                                                                indent=1))
    print(f"wrote {out / 'bench_selection_peers.json'}")


def table(rows, load0) -> str:
    sets = list(dict.fromkeys(r["set"] for r in rows))
    lines = [f"P@10 on the test split (mean over seeds), fit seconds; load average {load0[0]:.2f} at start, "
             f"{os.getloadavg()[0]:.2f} at end",
             f"{'set':14s} {'fixed':>15s} {'default':>15s} {'time x':>7s} {'chosen (seed 0)':>22s} {'grid best':>17s} "
             f"{'vs grid':>8s} {'implicit best':>28s} {'vs impl.':>8s}"]
    for s in sets:
        def of(who):
            return [r for r in rows if r["set"] == s and r["who"] == who]

        def mean(rs, key):
            return sum(r[key] for r in rs) / len(rs) if rs else float("nan")

        fx, df, gr, im = of("fixed"), of("default"), of("grid"), of("implicit")
        pd_, pf = mean(df, "precision@10"), mean(fx, "precision@10")
        ratio = mean(df, "seconds") / mean(fx, "seconds") if fx else float("nan")
        chosen = (f"{df[0]['factors']}/{df[0]['regularization']:g}/{df[0]['alpha']:g}" if df else "-")
        g = max(gr, key=lambda r: r["precision@10"]) if gr else None
        i = max(im, key=lambda r: r["precision@10"]) if im else None
        gtext = f"{g['precision@10']:.4f} {g['factors']}/{g['regularization']:g}/{g['alpha']:g}" if g else "-"
        itext = (f"{i['precision@10']:.4f} {i['factors']}/{i['regularization']:g}/{i['alpha']:g}@{i['iterations']}"
                 if i else "-")
        lines.append(f"{s:14s} {pf:.4f} {mean(fx, 'seconds'):5.1f}s {pd_:.4f} {mean(df, 'seconds'):5.1f}s "
                     f"{ratio:6.2f}x {chosen:>22s} {gtext:>17s} "
                     f"{(pd_ / g['precision@10'] if g else float('nan')):7.1%} {itext:>28s} "
                     f"{(pd_ / i['precision@10'] if i else float('nan')):7.1%}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
