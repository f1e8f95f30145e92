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
from mrec_warp.evaluation.metrics import (
    across_splits,
    auc,
    evaluate_recommendations,
    metric_names,
    paired_difference,
    read_recs,
    summarize,
)

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
# statistics
# ----------------------------------------------------------------------------------------
def test_ci_formula():
    rng = np.random.default_rng(0)
    v = rng.random(57)
    s = summarize(v)
    sd = math.sqrt(sum((x - v.mean()) ** 2 for x in v) / (len(v) - 1))
    assert s["mean"] == pytest.approx(v.mean())
    assert s["sd"] == pytest.approx(sd)
    assert s["ci95"] == pytest.approx(1.96 * sd / math.sqrt(57))
    assert (s["low"], s["high"]) == pytest.approx((v.mean() - s["ci95"], v.mean() + s["ci95"]))
    assert math.isnan(summarize([0.3])["ci95"])


def test_paired_difference_matches_reference():
    train, test, recs, ks = random_case(11)
    rng = np.random.default_rng(1)
    recs2 = [(u, i, int(r)) for (u, i, _), r in zip(recs, rng.permutation(len(recs)) + 1)]
    tr, te, rc = as_frames(train, test, recs)
    a = evaluate_recommendations(tr, te, rc, ks=ks)
    b = evaluate_recommendations(tr, te, as_frames(train, test, recs2)[2], ks=ks)
    d = paired_difference(a, b)
    for name in metric_names(ks):
        diffs = [b.per_user.loc[u, name] - a.per_user.loc[u, name] for u in a.per_user.index]
        n = len(diffs)
        mean = sum(diffs) / n
        sd = math.sqrt(sum((x - mean) ** 2 for x in diffs) / (n - 1))
        assert d.loc[name, "mean"] == pytest.approx(mean, abs=1e-12)
        assert d.loc[name, "ci95"] == pytest.approx(1.96 * sd / math.sqrt(n), abs=1e-12)
    k = ks[0]
    assert d.loc[f"coverage@{k}", "mean"] == pytest.approx(b.mean(f"coverage@{k}") - a.mean(f"coverage@{k}"))


def test_across_splits_standard_error():
    out = across_splits([0.1, 0.2, 0.3, 0.2])
    assert out["mean"] == pytest.approx(0.2)
    assert out["se"] == pytest.approx(np.std([0.1, 0.2, 0.3, 0.2], ddof=1) / 2)
    assert out["n_splits"] == 4
    assert math.isnan(across_splits([0.5])["se"])


# ----------------------------------------------------------------------------------------
# AUC
# ----------------------------------------------------------------------------------------
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


# ----------------------------------------------------------------------------------------
# reading recommendation files
# ----------------------------------------------------------------------------------------
def test_read_recs_tsv_with_blank_lines_and_header(tmp_path):
    p = tmp_path / "recs.tsv"
    p.write_text("user\titem\tscore\trank\na\tx\t0.9\t1\n\na\ty\t0.5\t2\n")
    recs = read_recs(p)
    assert recs[["user", "item"]].values.tolist() == [["a", "x"], ["a", "y"]]
    assert recs["line"].tolist() == [2, 4]
    assert recs["rank"].tolist() == [1, 2]


def test_read_recs_header_after_a_utf8_bom(tmp_path):
    p = tmp_path / "recs.csv"
    p.write_bytes("\ufeffuser,item,score\na,x,0.9\n".encode("utf-8"))  # as Excel saves CSV
    recs = read_recs(p)
    assert recs[["user", "item"]].values.tolist() == [["a", "x"]]


def test_read_recs_rank_from_score_then_file_order(tmp_path):
    p = tmp_path / "recs.csv"
    p.write_text("a,x,0.1\na,y,0.9\nb,x,0.5\n")
    recs = read_recs(p)
    assert recs.set_index(["user", "item"])["rank"].to_dict() == {("a", "x"): 2, ("a", "y"): 1, ("b", "x"): 1}
    q = tmp_path / "two.tsv"
    q.write_text("a\tx\na\ty\n")
    assert read_recs(q)["rank"].tolist() == [1, 2]


def test_read_recs_parquet(tmp_path):
    pytest.importorskip("pyarrow")
    p = tmp_path / "recs.parquet"
    pd.DataFrame({"user": [1, 1], "item": [5, 6], "score": [2.0, 1.0], "rank": [1, 2]}).to_parquet(p)
    recs = read_recs(p)
    assert recs["user"].tolist() == ["1", "1"] and recs["item"].tolist() == ["5", "6"]


@pytest.mark.parametrize(
    "text, pattern",
    [
        ("a\tx\t0.9\t1\na\ty\t0.5\tsecond\n", r"recs.tsv:2: rank 'second' is not a number"),
        ("a\tx\t0.9\t1\na\ty\t0.5\t2\t7\n", r"recs.tsv:2: .*same number of columns"),
        ("a\tx\t1\t1\t1\n", r"recs.tsv:1: expected at most 4 columns"),
        ("a\tx\t0.9\t1\n\t\t0.2\t2\n", r"recs.tsv:2: missing user id"),
        ("a\tx\t0.9\t1\na\ty\t0.5\n", r"recs.tsv:2: missing rank"),
        ("user\titem\tscore\trank\n\na\tx\t0.9\t1\na\ty\t0.5\t2\t9\n", r"recs.tsv:4: .*same number of columns"),
        ("\n\n", r"recs.tsv: recommendations file has no data lines"),
    ],
)
def test_read_recs_errors(tmp_path, text, pattern):
    p = tmp_path / "recs.tsv"
    p.write_text(text)
    with pytest.raises(InputError, match=pattern):
        read_recs(p)


def test_read_recs_missing_and_empty(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        read_recs(tmp_path / "nope.tsv")
    (tmp_path / "empty.tsv").write_text("")
    with pytest.raises(InputError, match="is empty"):
        read_recs(tmp_path / "empty.tsv")


# ----------------------------------------------------------------------------------------
# scale and an independent check on real data
# ----------------------------------------------------------------------------------------
def test_scales_to_many_users_quickly():
    import time

    rng = np.random.default_rng(0)
    n_users, n_items, k = 150_000, 5_000, 20
    users = np.repeat(np.arange(n_users), 3).astype(str)
    train = pd.DataFrame({"user": users, "item": rng.integers(0, n_items, users.size).astype(str)})
    test = pd.DataFrame({"user": users, "item": rng.integers(0, n_items, users.size).astype(str)})
    recs = pd.DataFrame({"user": np.repeat(np.arange(n_users), k).astype(str),
                         "item": rng.integers(0, n_items, n_users * k).astype(str),
                         "rank": np.tile(np.arange(1, k + 1), n_users)})
    t0 = time.perf_counter()
    ev = evaluate_recommendations(train, test, recs, ks=(5, 10, 20))
    assert time.perf_counter() - t0 < 20
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
