"""Measure EASE (and SLIM, item-kNN) model-file size and test P@10, dense vs top-N per item.

Usage: python scripts/ease_topk.py [SET ...] [--keep 50,100,200] [--no-others] [--json PATH]

SET is ``ml-100k`` or ``ml-latest-small`` (per-user 80/20 split, seed 0, of binary data:
ml-100k every rating, ml-latest-small ratings >= 4), or a folder holding ``train.tsv`` and
``test.tsv`` (user, item, ... per line; every row an interaction, as binary), such as the
selection suite's split. P@10 on the test items, training items excluded. For each
``topk`` it prints one line: the file's bytes and its share of the dense model's file, the
P@10 of the stored (float16-rounded) weights, and of the same kept weights unrounded (the
rounding's own effect); SLIM and item-kNN at their defaults unless ``--no-others``. Writes
scripts/ease_topk.json (or PATH). Reads ../shared/data, copies nothing.
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

from mrec_warp.models import EASE, SLIM, ItemKNN, load
from mrec_warp.models.early_stopping import holdout_split, precision_at_k

DATA = os.environ.get("MREC_DATA", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))


def load_movielens(name: str) -> sp.csr_matrix:
    if name == "ml-100k":
        df = pd.read_csv(os.path.join(DATA, "ml-100k", "u.data"), sep="\t", header=None, usecols=[0, 1, 2])
        df.columns = ["u", "i", "r"]
    else:
        df = pd.read_csv(os.path.join(DATA, "ml-latest-small", "ratings.csv"), usecols=[0, 1, 2])
        df.columns = ["u", "i", "r"]
        df = df[df.r >= 4]
    u, users = pd.factorize(df.u)
    i, items = pd.factorize(df.i)
    m = sp.csr_matrix((np.ones(len(df), np.float32), (u, i)))
    m.sum_duplicates()
    m.data[:] = 1
    return m, users.astype(str).to_numpy(), items.astype(str).to_numpy()


def load_split(folder: str):
    """(fit, test) from a folder's train.tsv / test.tsv; test pairs of unknown ids are dropped."""
    read = functools.partial(pd.read_csv, sep="\t", header=None, usecols=[0, 1], dtype=str)
    train, test = read(os.path.join(folder, "train.tsv")), read(os.path.join(folder, "test.tsv"))
    users, items = pd.Index(pd.unique(train[0])), pd.Index(pd.unique(train[1]))

    def matrix(df):
        u, i = users.get_indexer(df[0]), items.get_indexer(df[1])
        ok = (u >= 0) & (i >= 0)
        m = sp.csr_matrix((np.ones(int(ok.sum()), np.float32), (u[ok], i[ok])), shape=(len(users), len(items)))
        m.sum_duplicates()
        m.data[:] = 1
        return m
    return matrix(train), matrix(test), users.to_numpy(), items.to_numpy()


def saved(model):
    """(file bytes, the model loaded back from it)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.npz")
        model.save(path)
        return os.path.getsize(path), load(path)


def main(argv):
    sets, keeps, others = [], [50, 100, 200, 400], True
    target = os.path.join(os.path.dirname(__file__), "ease_topk.json")
    args = iter(argv)
    for a in args:
        if a.startswith("--keep"):
            value = a.split("=", 1)[1] if "=" in a else next(args)
            keeps = [int(x) for x in value.split(",")]
        elif a.startswith("--json"):
            target = a.split("=", 1)[1] if "=" in a else next(args)
        elif a == "--no-others":
            others = False
        else:
            sets.append(a)
    out = []
    for name in sets or ["ml-100k", "ml-latest-small"]:
        if os.path.isdir(name):
            fit, test, users, items = load_split(name)
        else:
            X, users, items = load_movielens(name)
            fit, test = holdout_split(X, 0.2, np.random.default_rng(0))
        ids = dict(user_ids=users, item_ids=items)  # the files' own ids: the model file holds them
        n_items = fit.shape[1]
        dense = EASE(topk=0).fit(fit, **ids)
        dense_bytes, _ = saved(dense)
        dense_p10 = precision_at_k(dense.score_users, n_items, fit, test, 10)
        runs = [("ease", 0, lambda dense=dense: dense)] + [("ease", k, functools.partial(EASE, topk=k)) for k in keeps]
        if others:
            runs += [("slim", SLIM().topk, lambda: SLIM()), ("itemknn", ItemKNN().neighbours, lambda: ItemKNN())]
        for fam, keep, make in runs:
            t0 = time.perf_counter()
            model = make() if keep == 0 and fam == "ease" else make().fit(fit, **ids)
            secs = time.perf_counter() - t0
            size, back = saved(model)
            p10 = precision_at_k(back.score_users, n_items, fit, test, 10)  # the stored model
            row = {"data": os.path.basename(os.path.normpath(name)), "users": fit.shape[0], "items": n_items,
                   "model": fam, "topk": keep, "file_bytes": size, "dense_file_bytes": dense_bytes,
                   "share": round(size / dense_bytes, 4), "p@10": round(p10, 5), "p@10_dense": round(dense_p10, 5),
                   "vs_dense_%": round(100 * (p10 / dense_p10 - 1), 2), "fit_s": round(secs, 2)}
            if fam == "ease" and sp.issparse(model.weights_):
                # the same kept entries with the dense (unrounded) values: the rounding's own effect
                kept = model.weights_.tocoo()
                model.weights_ = sp.csr_matrix((dense.weights_[kept.row, kept.col], (kept.row, kept.col)),
                                               shape=kept.shape, dtype=np.float32)
                row["p@10_unrounded"] = round(precision_at_k(model.score_users, n_items, fit, test, 10), 5)
            print(json.dumps(row), flush=True)
            out.append(row)
    with open(target, "w") as fh:
        json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
