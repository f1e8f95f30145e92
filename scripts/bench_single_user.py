#!/usr/bin/env python
"""One user at a time: the library's single-user calls next to the bare numpy product.

A WARP and a WRMF model with 20k items and 64 factors (random factors, N(0, 0.3), item
biases N(0, 0.1): what matters here is the shape, not the fit), then p50 and p99 latency
over ``--calls`` calls (default 10,000) of, in one run:

* ``bare``: ``item_factors @ user + bias`` and ``argpartition`` top 10 (no exclusions);
* ``recommend(u, k=10)``: top 10 of a known user, training items excluded;
* ``recommend_frame(id, k=10)``: the same as a table of ids;
* ``similar_items(i, k=10)``: the 10 nearest items by cosine;
* ``recommend_history(items, k=10)``: an anonymous 20-item history folded in and ranked
  (absent on older versions: then ``fold_in`` + ``recommend``, on ``--slow-calls`` calls);
* ``fold_in + recommend``: the mutating library API, on ``--slow-calls`` calls.

Runs on whichever mrec_warp is importable, so the same script measures an older checkout
(``PYTHONPATH=/path/to/old python scripts/bench_single_user.py``). BLAS runs on one thread
throughout (as a serving process would: the machine has 2 cores, and a threaded gemv on a
busy machine is slower, not faster). Prints a table and writes ``--json``
(default ``bench-out/single_user.json``).
"""
from __future__ import annotations

import argparse
import copy
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchlib import load_avg  # noqa: E402

import mrec_warp  # noqa: E402
from mrec_warp.models import WARP, WRMF  # noqa: E402


def build(cls, n_users: int, n_items: int, factors: int, seed: int = 0):
    """A fitted ``cls`` of the given shape: one short fit on random positives (20 per user),
    then random factors."""
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(n_users), 20)
    cols = rng.integers(0, n_items, len(rows))
    X = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(n_users, n_items))
    X.sum_duplicates()
    X.data[:] = 1.0
    model = cls(factors=factors, epochs=1, random_state=seed).fit(
        X, user_ids=[f"u{u}" for u in range(n_users)], item_ids=[f"i{i}" for i in range(n_items)])
    arrays = dict(model.get_arrays(),
                  user_factors=rng.normal(0, 0.3, (n_users, factors)).astype(np.float32),
                  item_factors=rng.normal(0, 0.3, (n_items, factors)).astype(np.float32))
    if cls is WARP:
        arrays["item_bias"] = rng.normal(0, 0.1, n_items).astype(np.float32)
    model.set_arrays(arrays)
    return model


def timings(fn, args, warmup: int = 50):
    """Per-call seconds of ``fn(*a)`` for each ``a`` in ``args`` (after ``warmup`` calls)."""
    for a in args[:warmup]:
        fn(*a)
    out = np.empty(len(args))
    for n, a in enumerate(args):
        t = time.perf_counter()
        fn(*a)
        out[n] = time.perf_counter() - t
    return out


def row(name: str, secs: np.ndarray, bare_p50: float):
    p50, p99 = np.percentile(secs, 50) * 1e3, np.percentile(secs, 99) * 1e3
    return {"call": name, "calls": len(secs), "p50_ms": round(p50, 4), "p99_ms": round(p99, 4),
            "p50_vs_bare": round(p50 / bare_p50, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=20_000)
    ap.add_argument("--users", type=int, default=5_000)
    ap.add_argument("--factors", type=int, default=64)
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--slow-calls", type=int, default=300, help="Calls of the paths that mutate or are slow.")
    ap.add_argument("--json", default="bench-out/single_user.json")
    a = ap.parse_args()
    rng = np.random.default_rng(1)
    results = []
    with threadpool_limits(1, "blas"):
        for cls in (WARP, WRMF):
            model = build(cls, a.users, a.items, a.factors)
            users = rng.integers(0, a.users, a.calls)
            histories = [rng.choice(a.items, 20, replace=False) for _ in range(a.calls)]
            Q = model.item_factors_
            b = model.item_bias_ if cls is WARP else np.zeros(a.items, np.float32)
            uf = model.user_factors_

            def bare(u):
                s = Q @ uf[u] + b
                top = np.argpartition(-s, 10)[:10]
                return top[np.argsort(-s[top])]

            bare_t = timings(bare, [(u,) for u in users])
            bare_p50 = np.percentile(bare_t, 50) * 1e3
            name = cls.__name__
            results.append(dict(model=name, **row("bare numpy dot + argpartition", bare_t, bare_p50)))
            results.append(dict(model=name, **row("recommend(u, k=10)",
                                                  timings(lambda u: model.recommend(int(u), k=10),
                                                          [(u,) for u in users]), bare_p50)))
            ids = model.user_ids
            results.append(dict(model=name, **row("recommend_frame(id, k=10)",
                                                  timings(lambda u: model.recommend_frame(ids[u], k=10),
                                                          [(u,) for u in users]), bare_p50)))
            items_asked = rng.integers(0, a.items, a.calls)
            results.append(dict(model=name, **row("similar_items(i, k=10)",
                                                  timings(lambda i: model.similar_items(int(i), k=10),
                                                          [(i,) for i in items_asked]), bare_p50)))
            if hasattr(model, "recommend_history"):
                results.append(dict(model=name, **row("recommend_history(20 items, k=10)",
                                                      timings(lambda h: model.recommend_history(h, k=10),
                                                              [(h,) for h in histories]), bare_p50)))
            grown = copy.deepcopy(model)
            item_ids = model.item_ids

            def fold_and_recommend(n, h):
                grown.fold_in([(f"new{n}", i) for i in item_ids[h]])
                return grown.recommend(grown.n_users - 1, k=10)

            slow = [(n, histories[n]) for n in range(a.slow_calls)]
            results.append(dict(model=name, **row("fold_in(20 items) + recommend", timings(fold_and_recommend, slow,
                                                                                          warmup=5), bare_p50)))
    print(f"mrec_warp {mrec_warp.__file__}; {a.items:,} items x {a.factors} factors, {a.users:,} users; "
          f"load {load_avg()}")
    print(f"{'model':6} {'call':36} {'calls':>6} {'p50 ms':>9} {'p99 ms':>9} {'p50/bare':>9}")
    for r in results:
        print(f"{r['model']:6} {r['call']:36} {r['calls']:>6} {r['p50_ms']:>9.3f} {r['p99_ms']:>9.3f} "
              f"{r['p50_vs_bare']:>9.2f}")
    out = Path(a.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"library": str(Path(mrec_warp.__file__).parent), "python": platform.python_version(),
                               "load_avg": load_avg(), "items": a.items, "factors": a.factors, "users": a.users,
                               "results": results}, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
