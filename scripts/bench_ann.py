#!/usr/bin/env python
"""Approximate top-10 against exact top-10 on factors of TRAINED models: recall@10 and speed.

Sets (WARP, 64 factors, models cached in bench-out/cache/):

* ``synth-20k``: ``mrec_warp.data.synthetic.generate`` with 20k users x 20k items, 500k rows;
* ``synth-100k``: 20k users x 100k items, 1M rows (the issue's large catalogue);
* ``ml-latest-small``: ../shared/data/ml-latest-small/ratings.csv, ratings >= 4 (9.7k items).

For each set, ``--users`` users (default 2,000) get their exact top-10 (training items
excluded, the list ``mrec-warp recommend`` writes) and an approximate one, over-fetched
and filtered as :mod:`mrec_warp.models.ann` does. recall@10 = |approx ∩ exact| / 10, averaged.
Speed: one user at a time (p50 / p99 microseconds, the serving case) and the whole sample
as one batch (users per second), exact = one matrix-vector product + top-k (the single-user
path of the package) or one matrix product per block.

``--libraries`` compares hnswlib and faiss (HNSW, inner product, same M and ef) when both
are installed; the package ships one (:mod:`mrec_warp.models.ann`), measured again end to end.
Prints a table, writes ``bench-out/bench_ann.json``. Run: ``python scripts/bench_ann.py``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench-out"
ML_LATEST = ROOT.parent / "shared" / "data" / "ml-latest-small" / "ratings.csv"
SETS = {"synth-20k": (20_000, 20_000, 500_000), "synth-100k": (20_000, 100_000, 1_000_000)}


def trained(name: str, epochs: int):
    """A WARP model with 64 factors on set ``name``, trained once and cached."""
    from mrec_warp.data.interactions import Interactions
    from mrec_warp.models import WARP, load

    path = OUT / "cache" / f"ann-{name}-e{epochs}.npz"
    if path.exists():
        return load(path)
    if name == "ml-latest-small":
        from mrec_warp.data.ratings import read_ratings

        data = Interactions.from_dataframe(read_ratings(ML_LATEST), value_col="value", min_value=4,
                                           duplicates="last")
    else:
        from mrec_warp.data.synthetic import generate

        users, items, n = SETS[name]
        ratings, _ = generate(n_users=users, n_items=items, n_interactions=n, seed=1)
        data = Interactions.from_dataframe(ratings)
    t = time.perf_counter()
    model = WARP(factors=64, epochs=epochs, random_state=1, n_jobs=2).fit(data)
    print(f"  trained {name}: {data.n_users:,} users x {data.n_items:,} items, {data.nnz:,} rows, "
          f"{time.perf_counter() - t:.0f} s", flush=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    model.save(path)
    return model


def exact_lists(model, users, k):
    from mrec_warp.models.single_user import recommend_few

    return [recommend_few(model, np.array([u]), k, model.train_, None, positions=[u])[0][0] for u in users]


def timed(fn, users, repeat=1):
    """Per-call microseconds (p50, p99) of ``fn(user)`` over ``users``."""
    times = []
    for _ in range(repeat):
        for u in users:
            t = time.perf_counter_ns()
            fn(u)
            times.append(time.perf_counter_ns() - t)
    times = np.array(times) / 1e3
    return float(np.percentile(times, 50)), float(np.percentile(times, 99))


def recall(approx, exact, k):
    return float(np.mean([len(set(a[:k].tolist()) & set(e[:k].tolist())) / k for a, e in zip(approx, exact)]))


def library_rows(model, users, exact, k, M, ef):
    """hnswlib and faiss side by side on the same augmented vectors (inner product + bias)."""
    from mrec_warp.models.ann import augmented

    items, queries = augmented(model)
    rows = []
    seen = model.train_
    for lib in ("hnswlib", "faiss"):
        try:
            __import__(lib)
        except ImportError:
            print(f"  {lib} not installed: skipped", flush=True)
            continue
        t = time.perf_counter()
        if lib == "hnswlib":
            import hnswlib

            index = hnswlib.Index(space="ip", dim=items.shape[1])
            index.init_index(max_elements=len(items), M=M, ef_construction=200, random_seed=1)
            index.set_num_threads(1)
            index.add_items(items, np.arange(len(items)))

            def search(q, n):
                index.set_ef(max(ef, n))
                return index.knn_query(q, k=n)[0]
        else:
            import faiss

            faiss.omp_set_num_threads(1)
            index = faiss.IndexHNSWFlat(items.shape[1], M, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = 200
            index.add(items)

            def search(q, n):
                index.hnsw.efSearch = max(ef, n)
                return index.search(q, n)[1]
        build = time.perf_counter() - t

        def one(u):
            row = seen.indices[seen.indptr[u]:seen.indptr[u + 1]]
            n = min(len(items), k + len(row))
            got = search(queries[u:u + 1], n)[0]
            return got[~np.isin(got, row) & (got >= 0)][:k]

        approx = [one(u) for u in users]
        p50, p99 = timed(one, users[:1000])
        rows.append({"library": lib, "M": M, "ef": ef, "build_s": round(build, 1),
                     "recall@10": round(recall(approx, exact, k), 4), "p50_us": round(p50), "p99_us": round(p99)})
        print(f"  {lib:8s} M={M} ef={ef}: build {build:.1f} s, recall@10 {rows[-1]['recall@10']:.4f}, "
              f"p50 {p50:.0f} us, p99 {p99:.0f} us", flush=True)
    return rows


def package_row(model, users, exact, k, ef):
    """The shipped index (mrec_warp.models.ann) end to end: build, over-fetch, filter, rescore."""
    from mrec_warp.models import ann
    from mrec_warp.models.single_user import recommend_few

    t = time.perf_counter()
    index = ann.build(model, ef_search=ef)
    build = time.perf_counter() - t
    approx = [ann.top_k(index, model, np.array([u]), k, model.train_)[0][0] for u in users]
    p50, p99 = timed(lambda u: ann.top_k(index, model, np.array([u]), k, model.train_), users[:1000], repeat=2)
    e50, e99 = timed(lambda u: recommend_few(model, np.array([u]), k, model.train_, None, positions=[u]),
                     users[:1000], repeat=2)
    t = time.perf_counter()
    ann.top_k(index, model, np.asarray(users), k, model.train_)
    batch_ann = len(users) / (time.perf_counter() - t)
    from mrec_warp.topk import top_k_block

    t = time.perf_counter()
    top_k_block(model.score_users, np.asarray(users, dtype=np.int64), k, model.train_, 0)
    batch_exact = len(users) / (time.perf_counter() - t)
    return {"build_s": round(build, 1), "ef": ef, "recall@10": round(recall(approx, exact, k), 4),
            "ann_p50_us": round(p50), "ann_p99_us": round(p99), "exact_p50_us": round(e50), "exact_p99_us": round(e99),
            "speedup_p50": round(e50 / p50, 1), "batch_ann_users_per_s": round(batch_ann),
            "batch_exact_users_per_s": round(batch_exact)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", default="ml-latest-small,synth-20k,synth-100k")
    parser.add_argument("--users", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--libraries", action="store_true", help="also compare hnswlib and faiss directly")
    parser.add_argument("--M", type=int, default=16)
    parser.add_argument("--ef", default="64,128", help="ef_search values of the shipped index")
    parser.add_argument("--json", default=str(OUT / "bench_ann.json"))
    args = parser.parse_args(argv)
    from mrec_warp.workers import one_blas_thread

    k = 10
    result = {"k": k, "sets": {}}
    with one_blas_thread():
        for name in args.sets.split(","):
            print(f"{name}:", flush=True)
            model = trained(name, args.epochs)
            rng = np.random.default_rng(0)
            has = np.flatnonzero(np.diff(model.train_.indptr) > 0)
            users = rng.choice(has, min(args.users, len(has)), replace=False)
            exact = exact_lists(model, users, k)
            entry = {"users": int(model.n_users), "items": int(model.n_items), "sample": len(users), "rows": []}
            if args.libraries:
                entry["libraries"] = library_rows(model, users, exact, k, args.M, int(args.ef.split(",")[0]))
            for ef in (int(e) for e in args.ef.split(",")):
                row = package_row(model, users, exact, k, ef)
                entry["rows"].append(row)
                print(f"  mrec_warp.models.ann ef={ef}: recall@10 {row['recall@10']:.4f}, one user {row['ann_p50_us']} us "
                      f"p50 / {row['ann_p99_us']} us p99 vs exact {row['exact_p50_us']} / {row['exact_p99_us']} us "
                      f"({row['speedup_p50']}x); batch {row['batch_ann_users_per_s']:,} vs "
                      f"{row['batch_exact_users_per_s']:,} users/s; build {row['build_s']} s", flush=True)
            result["sets"][name] = entry
    print("\n| set | items | ef | recall@10 | ANN p50/p99 (us) | exact p50/p99 (us) | speed-up p50 |")
    print("|---|---|---|---|---|---|---|")
    for name, entry in result["sets"].items():
        for row in entry["rows"]:
            print(f"| {name} | {entry['items']:,} | {row['ef']} | {row['recall@10']:.3f} | {row['ann_p50_us']}/"
                  f"{row['ann_p99_us']} | {row['exact_p50_us']}/{row['exact_p99_us']} | {row['speedup_p50']}x |")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=2))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    sys.exit(main())
