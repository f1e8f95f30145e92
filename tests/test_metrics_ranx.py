"""The ranking metrics against an independent library: ranx (a test-only dependency).

``evaluate`` computes precision, recall, NDCG, MAP, hit rate and MRR with its own vectorised
code; here the same lists are scored by ranx, user by user, and must agree to float
precision. One definition differs by design and is mapped, not skipped: this toolkit's
``map@k`` divides by ``min(k, |T|)`` (a user with more test items than k can still reach
1), ranx's by ``|T|``.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from mrec_warp.evaluation.metrics import evaluate_recommendations

ranx = pytest.importorskip("ranx")


def random_case(seed: int, n_users: int = 300, n_items: int = 400, list_len: int = 20):
    """Train, test and recommendation tables with test sets of 1-15 items, lists of 20 items
    (some shorter), none of a user's train items in their list, scores strictly decreasing."""
    rng = np.random.default_rng(seed)
    train, test, recs = [], [], []
    for u in range(n_users):
        user = f"u{u}"
        items = rng.permutation(n_items)
        n_train, n_test = int(rng.integers(1, 30)), int(rng.integers(1, 16))
        train += [(user, f"i{i}") for i in items[:n_train]]
        test_items = items[n_train:n_train + n_test]
        test += [(user, f"i{i}") for i in test_items]
        # a list mixing test items and others, in random order, never a train item
        pool = np.concatenate([test_items, items[n_train + n_test:n_train + n_test + 40]])
        length = list_len if rng.random() > 0.1 else int(rng.integers(1, list_len))
        chosen = rng.permutation(pool)[:length]
        recs += [(user, f"i{i}", float(length - r), r + 1) for r, i in enumerate(chosen)]
    return (pd.DataFrame(train, columns=["user", "item"]), pd.DataFrame(test, columns=["user", "item"]),
            pd.DataFrame(recs, columns=["user", "item", "score", "rank"]))


def ranx_scores(test: pd.DataFrame, recs: pd.DataFrame, metrics):
    qrels = ranx.Qrels({u: {i: 1 for i in g["item"]} for u, g in test.groupby("user")})
    run = ranx.Run({u: dict(zip(g["item"], g["score"])) for u, g in recs.groupby("user")})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba's type-safety notes about its own casts
        scores = ranx.evaluate(qrels, run, metrics, return_mean=False, make_comparable=True)
    return pd.DataFrame(scores, index=list(qrels.keys()))


@pytest.mark.parametrize("seed", [0, 1])
def test_every_metric_equals_ranx_user_by_user(seed):
    train, test, recs = random_case(seed)
    ks = (1, 5, 10, 20)
    ours = evaluate_recommendations(train, test, recs, ks=ks).per_user
    metrics = [f"{m}@{k}" for k in ks for m in ("precision", "recall", "ndcg", "map", "hit_rate")] + ["mrr"]
    theirs = ranx_scores(test, recs, metrics).loc[ours.index]
    n_test = test.groupby("user").size().loc[ours.index].to_numpy()
    assert len(ours) == test["user"].nunique()
    for k in ks:
        for m in ("precision", "recall", "ndcg", "hit_rate"):
            np.testing.assert_allclose(ours[f"{m}@{k}"], theirs[f"{m}@{k}"], rtol=1e-9, atol=1e-12,
                                       err_msg=f"{m}@{k}")
        # ranx divides average precision by |T|, this toolkit by min(k, |T|)
        np.testing.assert_allclose(ours[f"map@{k}"] * np.minimum(k, n_test), theirs[f"map@{k}"] * n_test,
                                   rtol=1e-9, atol=1e-12, err_msg=f"map@{k}")
    np.testing.assert_allclose(ours["mrr"], theirs["mrr"], rtol=1e-9, atol=1e-12)
