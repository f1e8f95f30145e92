"""Beyond-accuracy metrics and per-group results on tiny cases computed by hand."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from mrec_warp.cli.evaluate import evaluate as evaluate_cli
from mrec_warp.evaluation.beyond import gini, head_items
from mrec_warp.evaluation.formatting import format_markdown, format_table
from mrec_warp.evaluation.metrics import evaluate_recommendations
from mrec_warp.evaluation.report import per_user_table
from mrec_warp.stages.evaluate import evaluate_here as evaluate

# Training popularity: a 3, e 2, b 1, c 1, d 1; three training users.
TRAIN = [("u1", "a"), ("u1", "b"), ("u1", "e"), ("u2", "a"), ("u2", "c"), ("u2", "e"), ("u3", "a"), ("u3", "d")]
TEST = [("u1", "c"), ("u2", "d"), ("u3", "e")]
# u1's "a" is a training item: removed, the list closes up to [c, d]
RECS = [("u1", "a", 1), ("u1", "c", 2), ("u1", "d", 3), ("u2", "b", 1), ("u2", "d", 2), ("u3", "e", 1), ("u3", "b", 2)]
# c and d share feature x, d and b share y, e has none
FEATURES = [("c", "x"), ("d", "x"), ("d", "y"), ("b", "y")]


def frames():
    return (pd.DataFrame(TRAIN, columns=["user", "item"]), pd.DataFrame(TEST, columns=["user", "item"]),
            pd.DataFrame(RECS, columns=["user", "item", "rank"]))


def test_novelty_popularity_long_tail_and_gini_by_hand():
    train, test, recs = frames()
    ev = evaluate_recommendations(train, test, recs, ks=(1, 2), beyond=True)
    pu = ev.per_user
    l3, l15 = math.log2(3), math.log2(1.5)
    assert pu.loc[["u1", "u2", "u3"], "novelty@1"].tolist() == pytest.approx([l3, l3, l15])
    assert pu.loc[["u1", "u2", "u3"], "novelty@2"].tolist() == pytest.approx([l3, l3, (l15 + l3) / 2])
    assert pu.loc[["u1", "u2", "u3"], "popularity@2"].tolist() == pytest.approx([1.0, 1.0, 1.5])
    assert ev.mean("popularity@1") == pytest.approx((1 + 1 + 2) / 3)
    # head: "a" alone holds 3/8 >= 20% of training interactions; nothing recommended is in it
    assert ev.mean("long_tail@2") == 1.0
    # exposure at 1: b, c, e once, a and d never -> sorted 0 0 1 1 1: (0+0+0+2+4) / (5*3)
    assert ev.mean("gini@1") == pytest.approx(0.4)
    # at 2: c 1, d 2, b 2, e 1, a 0 -> sorted 0 1 1 2 2: (-2+0+4+8) / (5*6)
    assert ev.mean("gini@2") == pytest.approx(1 / 3)
    assert math.isnan(ev.summary.loc["gini@2", "ci95"])  # a global number: no interval
    assert "novelty@2" not in evaluate_recommendations(train, test, recs, ks=(2,)).per_user  # opt-in


def test_diversity_from_item_features_by_hand():
    train, test, recs = frames()
    features = pd.DataFrame(FEATURES, columns=["id", "feature"])
    ev = evaluate_recommendations(train, test, recs, ks=(2,), item_features=features)
    distance = 1 - 1 / math.sqrt(2)  # {x} vs {x, y}, and {y} vs {x, y}
    assert ev.per_user.loc["u1", "diversity@2"] == pytest.approx(distance)
    assert ev.per_user.loc["u2", "diversity@2"] == pytest.approx(distance)
    assert np.isnan(ev.per_user.loc["u3", "diversity@2"])  # e has no features: one item left, no pair
    assert ev.summary.loc["diversity@2", "n"] == 2 and ev.mean("diversity@2") == pytest.approx(distance)


def test_gini_and_head_rules():
    assert gini([0, 0, 0, 4]) == pytest.approx(0.75)  # (n - 1) / n: one item takes all
    assert gini([2, 2, 2]) == pytest.approx(0.0)
    assert math.isnan(gini([0, 0]))
    assert head_items(np.array([5, 3, 1, 1]), 0.5).tolist() == [True, False, False, False]
    assert head_items(np.array([5, 3, 1, 1]), 0.6).tolist() == [True, True, False, False]
    assert head_items(np.array([4, 1, 4, 1]), 0.2).tolist() == [True, False, True, False]  # ties both in


def test_user_activity_groups_by_hand(tmp_path):
    train, test, recs = frames()
    study = evaluate(train, test, [recs, recs.assign(rank=recs["rank"][::-1].to_numpy())], names=["a", "b"],
                     ks=(1,), groups="user-activity", beyond=True)
    # profile sizes u1 3, u2 3, u3 2: quantiles 2.667 and 3 -> u3 light, u1 and u2 medium, nobody heavy
    groups = study.evaluations[0][0].groups
    assert list(groups) == ["light", "medium", "heavy"]
    assert groups["light"].per_user.index.tolist() == ["u3"]
    assert sorted(groups["medium"].per_user.index) == ["u1", "u2"]
    assert groups["heavy"].per_user.empty
    assert groups["light"].mean("precision@1") == 1.0 and groups["medium"].mean("precision@1") == 0.5  # u1 hits c
    assert groups["light"].mean("gini@1") == pytest.approx(gini([0, 0, 0, 0, 1]))  # only u3's list
    data = study.to_dict()
    light = data["groups"]["groups"][0]
    assert data["groups"]["by"] == "user-activity" and light["bounds"] == ["profile size <= 2.66667"]
    assert light["runs"][0]["summary"]["precision@1"]["mean"] == 1.0
    assert data["groups"]["groups"][2]["runs"][0]["summary"]["precision@1"]["mean"] is None  # empty: n/a
    table = format_table(data)
    assert "user-activity: light (profile size <= 2.66667)" in table and "n/a" in table
    assert "## By user-activity" in format_markdown(data)
    long = per_user_table(study)
    assert long["group"].tolist().count("light") == 2 and (long["group"] == "all").sum() == 6
    json.dumps(data, allow_nan=False)


def test_item_popularity_groups_score_each_groups_test_items():
    train = pd.DataFrame([(f"u{u}", "hit") for u in range(6)] + [("u0", "t1"), ("u1", "t2"), ("u2", "t3")],
                         columns=["user", "item"])
    # head: "hit" (6 of 9 training interactions); test items: u3 likes t1 (tail) and u4 t2 (tail), u5 t3
    test = pd.DataFrame([("u3", "t1"), ("u4", "t2"), ("u5", "t3")], columns=["user", "item"])
    recs = pd.DataFrame([("u3", "t1", 1), ("u4", "t3", 1), ("u5", "t3", 1)], columns=["user", "item", "rank"])
    study = evaluate(train, test, [recs], ks=(1,), groups="item-popularity")
    groups = study.evaluations[0][0].groups
    assert groups["head"].per_user.empty  # nobody has a head item in test
    assert groups["tail"].mean("recall@1") == pytest.approx(2 / 3)
    assert study.evaluations[0][0].group_bounds["head"].startswith("1 items, 66.7%")


def test_cli_beyond_accuracy_and_groups(tmp_path):
    train, test, recs = frames()
    for name, table in (("train", train), ("test", test), ("recs", recs.assign(score=0.5)[["user", "item", "score", "rank"]])):
        table.to_csv(tmp_path / f"{name}.tsv", sep="\t", header=False, index=False)
    pd.DataFrame(FEATURES).to_csv(tmp_path / "features.tsv", sep="\t", header=False, index=False)
    r = CliRunner().invoke(evaluate_cli, ["--train", str(tmp_path / "train.tsv"), "--test", str(tmp_path / "test.tsv"),
                                          "--recs", str(tmp_path / "recs.tsv"), "-k", "2", "--item-features",
                                          str(tmp_path / "features.tsv"), "--groups", "user-activity",
                                          "--json", str(tmp_path / "r.json")])
    assert r.exit_code == 0, r.output
    for metric in ("novelty@2", "popularity@2", "long_tail@2", "diversity@2", "gini@2", "user-activity: light"):
        assert metric in r.stdout
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["runs"][0]["summary"]["gini@2"]["mean"] == pytest.approx(1 / 3)
    r = CliRunner().invoke(evaluate_cli, ["--train", str(tmp_path / "train.tsv"), "--test", str(tmp_path / "test.tsv"),
                                          "--recs", str(tmp_path / "recs.tsv"), "--item-features",
                                          str(tmp_path / "missing.tsv")])
    assert r.exit_code == 2 and "missing.tsv" in r.output and "Traceback" not in r.output
    pd.DataFrame([("item-c", "x"), ("item-d", "y")]).to_csv(tmp_path / "other.tsv", sep="\t", header=False, index=False)
    r = CliRunner().invoke(evaluate_cli, ["--train", str(tmp_path / "train.tsv"), "--test", str(tmp_path / "test.tsv"),
                                          "--recs", str(tmp_path / "recs.tsv"), "--item-features",
                                          str(tmp_path / "other.tsv")])
    assert r.exit_code == 2 and "none of the 2 ids of the item feature file" in r.output
    assert "Traceback" not in r.output


def test_workers_give_the_same_study_as_one_process(tmp_path):
    """The stage scores (split, file) units on workers; groups, beyond-accuracy metrics and
    the tests (run once every unit is back) come out the same."""
    from mrec_warp.context import ExecutionContext
    from mrec_warp.stages.evaluate import evaluate as evaluate_stage

    train, test, recs = frames()
    for name, table in (("train", train), ("test", test)):
        table.to_csv(tmp_path / f"{name}.tsv", sep="\t", header=False, index=False)
    for name, table in (("a", recs), ("b", recs.assign(rank=recs["rank"][::-1].to_numpy()))):
        table.assign(score=0.5)[["user", "item", "score", "rank"]].to_csv(tmp_path / f"{name}.tsv", sep="\t",
                                                                          header=False, index=False)
    args = (tmp_path / "train.tsv", tmp_path / "test.tsv", [tmp_path / "a.tsv", tmp_path / "b.tsv"])
    options = dict(ks=(1, 2), beyond=True, groups="user-activity", correction="bh")
    alone = evaluate_stage(*args, **options).to_dict()
    workers = evaluate_stage(*args, context=ExecutionContext("processes", n_jobs=2), **options).to_dict()
    assert json.dumps(workers, sort_keys=True) == json.dumps(alone, sort_keys=True)
    assert workers["comparison"]["correction"] == "Benjamini-Hochberg" and workers["groups"]["by"] == "user-activity"
