"""Per-user AUC cross-checked against a pairwise pure-Python reference."""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import pandas as pd
import pytest

from mrec_warp.data.interactions import Interactions
from mrec_warp.evaluation.roc_auc import auc


def reference_auc(scores, train, test):
    out = {}
    for u in range(scores.shape[0]):
        pos = [i for i in test.get(u, ()) if i not in train.get(u, ())]
        neg = [i for i in range(scores.shape[1]) if i not in train.get(u, ()) and i not in test.get(u, ())]
        if not pos or not neg:
            continue
        wins = sum(1.0 if scores[u, p] > scores[u, n] else 0.5 if scores[u, p] == scores[u, n] else 0.0
                   for p in pos for n in neg)
        out[u] = wins / (len(pos) * len(neg))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_auc_matches_pairwise_reference(seed):
    rng = np.random.default_rng(seed)
    n_users, n_items = int(rng.integers(2, 30)), int(rng.integers(2, 25))
    train_pairs = [(u, i) for u in range(n_users) for i in range(n_items) if rng.random() < 0.3]
    train_pairs.append((n_users - 1, n_items - 1))  # fix the index space size
    train_pairs.append((0, 0))
    test_pairs = [(u, i) for u in range(n_users) for i in range(n_items) if rng.random() < 0.2]
    tr = Interactions.from_dataframe(
        pd.DataFrame(train_pairs, columns=["user", "item"]).astype(str),
        user_ids=[str(u) for u in range(n_users)], item_ids=[str(i) for i in range(n_items)])
    te = pd.DataFrame(test_pairs + [(0, "unknown_item")], columns=["user", "item"]).astype(str)
    scores = rng.integers(0, 4, size=(n_users, n_items)).astype(float)  # many ties

    calls = []

    def score_fn(idx):
        calls.append(len(idx))
        return scores[idx]

    got = auc(score_fn, tr, te, block_size=3)
    train_d, test_d = defaultdict(set), defaultdict(set)
    for u, i in train_pairs:
        train_d[u].add(i)
    for u, i in test_pairs:
        test_d[u].add(i)
    want = reference_auc(scores, train_d, test_d)
    assert got.n_users == len(want)
    assert got.n_test_pairs_skipped == 1
    assert max(calls, default=0) <= 3
    for u, value in want.items():
        assert got.per_user.loc[str(u)] == pytest.approx(value)
    if want:
        assert got.mean == pytest.approx(np.mean(list(want.values())))


def test_auc_perfect_and_reversed_scores():
    tr = Interactions.from_dataframe(pd.DataFrame({"user": ["a", "b"], "item": ["x", "y"]}),
                                     item_ids=["x", "y", "z", "w"])
    te = pd.DataFrame({"user": ["a", "b"], "item": ["z", "w"]})
    good = np.array([[0, 0, 5, 1], [0, 0, 1, 5]], dtype=float)
    assert auc(lambda idx: good[idx], tr, te).mean == 1.0
    assert auc(lambda idx: -good[idx], tr, te).mean == 0.0
    with pytest.raises(ValueError, match="shape"):
        auc(lambda idx: good[idx, :2], tr, te)
