"""Measure EASE (and SLIM, item-kNN) model-file size and test P@10, dense vs top-N per item.

Usage: python scripts/ease_topk.py [ml-100k|ml-latest-small ...] [--keep 50,100,200]

Per-user 80/20 split (seed 0) of binary data (ml-100k: every rating; ml-latest-small:
ratings >= 4), P@10 on the test items with training items excluded. Prints one line per
setting and writes scripts/ease_topk.json. Reads ../shared/data, copies nothing.
"""
from __future__ import annotations

import functools
import json
import os
import sys
import tempfile
import time

import numpy as np
import pandas as pd
import scipy.sparse as sp

from mrec_warp.models import EASE, SLIM, ItemKNN
from mrec_warp.models.validation import holdout_split, precision_at_k

DATA = os.environ.get("MREC_DATA", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))


def load(name: str) -> sp.csr_matrix:
    if name == "ml-100k":
        df = pd.read_csv(os.path.join(DATA, "ml-100k", "u.data"), sep="\t", header=None, usecols=[0, 1, 2])
        df.columns = ["u", "i", "r"]
    else:
        df = pd.read_csv(os.path.join(DATA, "ml-latest-small", "ratings.csv"), usecols=[0, 1, 2])
        df.columns = ["u", "i", "r"]
        df = df[df.r >= 4]
    u = pd.factorize(df.u)[0]
    i = pd.factorize(df.i)[0]
    m = sp.csr_matrix((np.ones(len(df), np.float32), (u, i)))
    m.sum_duplicates()
    m.data[:] = 1
    return m


def file_size(model, X) -> int:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.npz")
        model.save(path)
        return os.path.getsize(path)


def main(argv):
    sets = [a for a in argv if not a.startswith("--")] or ["ml-100k", "ml-latest-small"]
    keeps = [50, 100, 200, 400]
    for a in argv:
        if a.startswith("--keep="):
            keeps = [int(x) for x in a.split("=", 1)[1].split(",")]
    out = []
    for name in sets:
        X = load(name)
        fit, test = holdout_split(X, 0.2, np.random.default_rng(0))
        n_items = X.shape[1]
        runs = [("ease", 0, lambda: EASE(topk=0))] + [("ease", k, functools.partial(EASE, topk=k)) for k in keeps]
        runs += [("slim", 200, lambda: SLIM()), ("itemknn", 200, lambda: ItemKNN())]
        dense_bytes = 4 * n_items * n_items
        for fam, keep, make in runs:
            t0 = time.perf_counter()
            model = make().fit(fit)
            secs = time.perf_counter() - t0
            p10 = precision_at_k(model.score_users, model.n_items, fit, test, 10)
            size = file_size(model, fit)
            row = {"data": name, "users": X.shape[0], "items": n_items, "model": fam, "topk": keep,
                   "p@10": round(p10, 4), "file_mb": round(size / 2**20, 2),
                   "vs_dense_matrix": round(size / dense_bytes, 4), "fit_s": round(secs, 2)}
            print(json.dumps(row), flush=True)
            out.append(row)
    with open(os.path.join(os.path.dirname(__file__), "ease_topk.json"), "w") as fh:
        json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
