"""Metrics cross-checked against a slow, obviously-correct pure-Python reference."""
from __future__ import annotations

import math
import os
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest

from mrec_warp.data.interactions import Interactions
from mrec_warp.errors import InputError
from mrec_warp.evaluation.metrics import evaluate_recommendations
from mrec_warp.evaluation.result import metric_names

ML100K = "/work/shared/data/ml-100k/u.data"


# ----------------------------------------------------------------------------------------
# the reference: loops and sets, written straight from the definitions
# ----------------------------------------------------------------------------------------
def reference(train_rows, test_rows, recs_rows, ks):
    """Per-user metrics and coverage; recs_rows are (user, item, rank) in file order."""
    train, test = defaultdict(set), defaultdict(set)
    train_items = set()
    for u, i in train_rows:
        train[u].add(i)
        train_items.add(i)
    for u, i in test_rows:
        if i not in train[u]:
            test[u].add(i)
    by_user = defaultdict(list)
    for order, (u, i, r) in enumerate(recs_rows):
        by_user[u].append((r, order, i))
    lists = {}
    for u, rows in by_user.items():
        seen, out = set(), []
        for _, _, i in sorted(rows):
            if i in train[u] or i in seen:
                continue
            seen.add(i)
            out.append(i)
        lists[u] = out

    per_user = {}
    for u, relevant in test.items():
        if not relevant:
            continue
        recs = lists.get(u, [])
        m = {"n_test": len(relevant), "n_recs": len(recs)}
        for k in ks:
            top = recs[:k]
            hits = sum(1 for i in top if i in relevant)
            m[f"precision@{k}"] = hits / k
            m[f"recall@{k}"] = hits / len(relevant)
            dcg = sum(1 / math.log2(r + 2) for r, i in enumerate(top) if i in relevant)
            idcg = sum(1 / math.log2(r + 2) for r in range(min(k, len(relevant))))
            m[f"ndcg@{k}"] = dcg / idcg
            ap, seen_hits = 0.0, 0
            for r, i in enumerate(top):
                if i in relevant:
                    seen_hits += 1
                    ap += seen_hits / (r + 1)
            m[f"map@{k}"] = ap / min(k, len(relevant))
            m[f"hit_rate@{k}"] = 1.0 if hits else 0.0
        m["mrr"] = next((1 / (r + 1) for r, i in enumerate(recs) if i in relevant), 0.0)
        per_user[u] = m
    coverage = {}
    for k in ks:
        shown = {i for u in per_user for i in lists.get(u, [])[:k] if i in train_items}
        coverage[k] = len(shown) / len(train_items)
    return per_user, coverage


def random_case(seed):
    """Random sizes, overlapping train/test, test-only users and items, messy recs."""
    rng = np.random.default_rng(seed)
    n_users, n_items = int(rng.integers(1, 40)), int(rng.integers(2, 30))
    users = [f"u{j}" for j in range(n_users)]
    items = [f"i{j}" for j in range(n_items)]
    density = rng.uniform(0.05, 0.5)
    train = [(u, i) for u in users for i in items if rng.random() < density]
    if not train:
        train = [(users[0], items[0])]
    test = [(u, i) for u in users for i in items if rng.random() < density / 2]
    test += [("new_user", items[-1]), (users[0], "new_item")]  # in test only
    # recs: random length (0 .. more than n_items), train items, repeats, rank ties
    recs = []
    known = {u for u, _ in train + test}
    catalogue = sorted({i for _, i in train + test})
    for u in users + ["new_user"]:
        if u not in known or rng.random() < 0.2:
            continue  # a user without recommendations
        length = int(rng.integers(0, n_items + 6))
        picks = rng.choice(catalogue, size=length, replace=True)
        ranks = rng.permutation(length) + 1 if rng.random() < 0.7 else rng.integers(1, 4, size=length)
        recs += [(u, str(i), int(r)) for i, r in zip(picks, ranks)]
    order = rng.permutation(len(recs))
    recs = [recs[j] for j in order]  # the file need not be sorted
    ks = sorted(set(int(k) for k in rng.integers(1, n_items + 8, size=3)))
    return train, test, recs, ks


def as_frames(train, test, recs):
    tr = pd.DataFrame(train, columns=["user", "item"])
    te = pd.DataFrame(test, columns=["user", "item"])
    rc = pd.DataFrame(recs, columns=["user", "item", "rank"]) if recs else pd.DataFrame(
        {"user": pd.Series([], dtype=str), "item": pd.Series([], dtype=str), "rank": pd.Series([], dtype=float)})
    return tr, te, rc


@pytest.mark.parametrize("seed", range(25))
def test_every_metric_matches_the_reference(seed):
    train, test, recs, ks = random_case(seed)
    want, want_cov = reference(train, test, recs, ks)
    ev = evaluate_recommendations(*as_frames(train, test, recs), ks=ks)

    assert sorted(ev.per_user.index) == sorted(want)
    for u, m in want.items():
        got = ev.per_user.loc[u]
        for name, value in m.items():
            assert got[name] == pytest.approx(value, abs=1e-12), (seed, u, name)
    for k in ks:
        assert ev.mean(f"coverage@{k}") == pytest.approx(want_cov[k])
    for name in metric_names(ks):
        expected = np.mean([m[name] for m in want.values()])
        assert ev.mean(name) == pytest.approx(expected, abs=1e-12)


def test_same_result_from_interactions_and_dataframes():
    train, test, recs, ks = random_case(3)
    tr, te, rc = as_frames(train, test, recs)
    a = evaluate_recommendations(tr, te, rc, ks=ks)
    b = evaluate_recommendations(Interactions.from_dataframe(tr), Interactions.from_dataframe(te), rc, ks=ks)
    pd.testing.assert_frame_equal(a.per_user.sort_index(), b.per_user.sort_index())
    pd.testing.assert_frame_equal(a.summary, b.summary)


def test_hand_computed_example():
    train = pd.DataFrame({"user": ["a", "a", "b", "b"], "item": ["x", "y", "x", "v"]})
    test = pd.DataFrame({"user": ["a", "a", "b", "c"], "item": ["z", "w", "y", "x"]})
    # a: train item y is dropped, so the list becomes z(1) v(2) w(3)
    recs = pd.DataFrame({"user": ["a", "a", "a", "a"], "item": ["y", "z", "v", "w"], "rank": [1, 2, 3, 4]})
    ev = evaluate_recommendations(train, test, recs, ks=(2,))
    a = ev.per_user.loc["a"]
    assert a["precision@2"] == 0.5 and a["recall@2"] == 0.5
    assert a["ndcg@2"] == pytest.approx(1.0 / (1 + 1 / math.log2(3)))
    assert a["map@2"] == pytest.approx(1.0 / 2)
    assert a["mrr"] == 1.0
    # b and c have test items but no recs: zeros, still counted in the mean
    assert ev.per_user.loc[["b", "c"], "mrr"].tolist() == [0.0, 0.0]
    assert ev.info["n_users_evaluated"] == 3 and ev.info["n_users_without_recs"] == 2
    assert ev.info["n_rec_rows_in_train"] == 1
    assert ev.mean("precision@2") == pytest.approx(0.5 / 3)
    assert ev.mean("coverage@2") == pytest.approx(1 / 3)  # v of x, y, v (z is test-only, not counted)


def test_k_larger_than_catalogue_and_short_lists():
    train = pd.DataFrame({"user": ["a"], "item": ["x"]})
    test = pd.DataFrame({"user": ["a"], "item": ["y"]})
    recs = pd.DataFrame({"user": ["a"], "item": ["y"], "rank": [1]})
    ev = evaluate_recommendations(train, test, recs, ks=(1, 50))
    row = ev.per_user.loc["a"]
    assert row["precision@50"] == pytest.approx(1 / 50)  # always divided by k
    assert row["recall@50"] == row["ndcg@50"] == row["map@50"] == 1.0
    assert ev.info["n_users_short_list"] == 1


def test_unknown_recommended_id_names_file_and_line():
    train = pd.DataFrame({"user": ["a"], "item": ["x"]})
    test = pd.DataFrame({"user": ["a"], "item": ["y"]})
    recs = pd.DataFrame({"user": ["a", "a"], "item": ["y", "nope"], "rank": [1, 2], "line": [1, 7]})
    with pytest.raises(InputError, match=r"recs.tsv:7: item 'nope' is in neither"):
        evaluate_recommendations(train, test, recs, source="recs.tsv")


def test_bad_ks():
    df = pd.DataFrame({"user": ["a"], "item": ["x"]})
    with pytest.raises(ValueError, match="positive integer"):
        evaluate_recommendations(df, df, df.assign(rank=1), ks=(0,))


# ----------------------------------------------------------------------------------------
# scale and an independent check on real data
# ----------------------------------------------------------------------------------------
def test_scales_to_many_users():
    # speed lives in the benchmarks; here: 150k users go through the vectorised path whole
    rng = np.random.default_rng(0)
    n_users, n_items, k = 150_000, 5_000, 20
    users = np.repeat(np.arange(n_users), 3).astype(str)
    train = pd.DataFrame({"user": users, "item": rng.integers(0, n_items, users.size).astype(str)})
    test = pd.DataFrame({"user": users, "item": rng.integers(0, n_items, users.size).astype(str)})
    recs = pd.DataFrame({"user": np.repeat(np.arange(n_users), k).astype(str),
                         "item": rng.integers(0, n_items, n_users * k).astype(str),
                         "rank": np.tile(np.arange(1, k + 1), n_users)})
    ev = evaluate_recommendations(train, test, recs, ks=(5, 10, 20))
    assert ev.info["n_users_evaluated"] > 140_000


def split_per_user(df, seed, fraction=0.2):
    """Per user: round(0.2 n) random positives to test, clipped to [1, n-1]; n < 2 all train."""
    rng = np.random.default_rng(seed)
    df = df.assign(_key=rng.random(len(df))).sort_values(["user", "_key"])
    n = df.groupby("user")["item"].transform("size").to_numpy()
    position = df.groupby("user").cumcount().to_numpy()
    n_test = np.clip(np.round(fraction * n), 1, n - 1)
    n_test[n < 2] = 0
    is_test = position < n_test
    return df.loc[~is_test, ["user", "item"]], df.loc[is_test, ["user", "item"]]


def popularity_recs(train, users, k=20):
    counts = train["item"].value_counts()
    seen = train.groupby("user")["item"].agg(set).to_dict()
    rows = []
    for u in users:
        s, r = seen.get(u, set()), 0
        for item in counts.index:
            if item in s:
                continue
            r += 1
            rows.append((u, item, float(counts[item]), r))
            if r == k:
                break
    return pd.DataFrame(rows, columns=["user", "item", "score", "rank"])


@pytest.mark.skipif(not os.path.exists(ML100K), reason="MovieLens 100k not available")
def test_popularity_on_movielens_100k():
    from mrec_warp.data.ratings import read_ratings

    ratings = read_ratings(ML100K, format="movielens")
    positives = ratings[ratings["value"] >= 4]
    train, test = split_per_user(positives, seed=0)
    recs = popularity_recs(train, pd.unique(positives["user"]))
    ev = evaluate_recommendations(train, test, recs, ks=(5, 10, 20))
    p10 = ev.mean("precision@10")
    print(f"ml-100k popularity P@10 = {p10:.4f} +- {ev.summary.loc['precision@10', 'ci95']:.4f}")
    assert 0.09 <= p10 <= 0.13
    assert ev.info["n_users_evaluated"] > 900


def test_ranking_from_score_when_rank_is_absent():
    train = pd.DataFrame({"user": ["a", "b"], "item": ["x", "y"]})
    test = pd.DataFrame({"user": ["a"], "item": ["y"]})
    recs = pd.DataFrame({"user": ["a", "a"], "item": ["z", "y"], "score": [0.1, 0.9]})
    train = pd.concat([train, pd.DataFrame({"user": ["b"], "item": ["z"]})])
    assert evaluate_recommendations(train, test, recs, ks=(1,)).per_user.loc["a", "precision@1"] == 1.0
    by_order = evaluate_recommendations(train, test, recs.drop(columns="score"), ks=(1,))
    assert by_order.per_user.loc["a", "precision@1"] == 0.0
