"""Does WARP gain from the value column? Binary input against confidence (sampled or weighted).

Two sets, several random splits each, test judged on binary relevance (P@10 over every test
user, training items excluded), model seed 42, early stopping on WARP's own hold-out:

* ``synth``: ``mrec-warp synth --values counts --noise 0.3`` (play counts, large for the
  items of the user's own topics); a random 20% of each user's rows is the test.
* ``ml100k``: MovieLens 100k ratings; a random 20% of each user's rated rows is split off
  and its rows rated >= 4 are the test. ``binary >=4`` trains on the training rows rated
  >= 4 (today's ``--min-rating 4``); the others train on every training row with the rating
  as the value.

    PYTHONPATH=. python scripts/bench_confidence.py [--sets synth,ml100k] [--splits 3]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from mrec_warp.data.interactions import Interactions
from mrec_warp.data.split import iter_splits
from mrec_warp.models import WARP
from mrec_warp.models.early_stopping import precision_at_k

ML100K = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "ml-100k" / "u.data"

#: (label, WARP parameters); ``None`` rows train on binary input.
VARIANTS = [
    ("binary", {}),
    ("log, sample", {"confidence": "log", "confidence_use": "sample"}),
    ("log, weight", {"confidence": "log", "confidence_use": "weight"}),
    ("linear, sample", {"confidence": "linear", "confidence_use": "sample"}),
    ("linear, weight", {"confidence": "linear", "confidence_use": "weight"}),
]


def p_at_10(model: WARP, train: Interactions, test: Interactions) -> float:
    return precision_at_k(model.score_users, model.n_items, model.train_, test.matrix, 10)


def run(train_df, test_df, params, binary_train_df=None) -> float:
    frame = train_df if binary_train_df is None else binary_train_df
    train = Interactions.from_dataframe(frame, value_col="value")
    test = Interactions.from_dataframe(test_df, user_ids=train.user_ids, item_ids=train.item_ids)
    model = WARP(random_state=42, **params).fit(train)
    return p_at_10(model, train, test)


def synth_splits(n_splits: int):
    from mrec_warp.data.synthetic import generate

    for seed in range(n_splits):
        ratings, _ = generate(values="counts", noise=0.3, seed=seed)
        train, test, _ = next(iter_splits(ratings, test_fraction=0.2, seed=seed))
        yield seed, {label: (train, test, params) for label, params in VARIANTS}


def ml100k_splits(n_splits: int):
    from mrec_warp.data.ratings import read_ratings

    ratings = read_ratings(ML100K, format="movielens")
    for seed in range(n_splits):
        train, test, _ = next(iter_splits(ratings, test_fraction=0.2, seed=seed))
        test = test[test["value"] >= 4]
        cases = {"binary >=4": (train[train["value"] >= 4], test, {}),
                 "binary, all rows": (train, test, {})}
        for label, params in VARIANTS[1:]:
            cases[f"{label}, all rows"] = (train, test, params)
        cases["log, sample, >=4 rows"] = (train[train["value"] >= 4], test, VARIANTS[1][1])
        yield seed, cases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="synth,ml100k")
    ap.add_argument("--splits", type=int, default=3)
    args = ap.parse_args()
    for name in args.sets.split(","):
        scores = {}
        t0 = time.perf_counter()
        for seed, cases in (synth_splits if name == "synth" else ml100k_splits)(args.splits):
            for label, (train, test, params) in cases.items():
                scores.setdefault(label, []).append(run(train, test, params))
        print(f"\n{name}: P@10 over {args.splits} splits ({time.perf_counter() - t0:.0f}s)")
        base = np.mean(next(iter(scores.values())))
        for label, vals in scores.items():
            print(f"  {label:24s} {np.mean(vals):.4f}  ({', '.join(f'{v:.4f}' for v in vals)})  "
                  f"{np.mean(vals) / base - 1:+.1%}")


if __name__ == "__main__":
    main()
