"""The hybrid pipeline through the CLI: prepare --features / cold splits, train --model hybrid,
recommend with new items, new users and fold-in, evaluate --items; one-line errors."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mrec_warp.data.features import check_ids_match
from mrec_warp.errors import InputError

from .conftest import run



def ok(result):
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def assert_one_line_error(result, *fragments):
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def recs_of(path) -> pd.DataFrame:
    return pd.read_csv(path, sep="\t", header=None, names=["user", "item", "score", "rank"], dtype={0: str, 1: str})


@pytest.fixture(scope="module")
def synth(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("synth")
    ok(run("synth", "-o", folder, "--users", 300, "--items", 150, "--interactions", 6000, "--topics", 6, "-q"))
    return folder


@pytest.fixture(scope="module")
def cold_split(synth, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cold")
    result = ok(run("prepare", synth / "ratings.tsv", "-o", out, "--split", "cold-items", "--test-fraction", 0.2,
                    "--features"))
    assert f"wrote {out / 'item_features.tsv'}" in result.output
    return out


@pytest.fixture(scope="module")
def hybrid_model(cold_split) -> Path:
    model = cold_split / "hybrid.npz"
    ok(run("train", cold_split / "train.tsv", "-o", model, "--model", "hybrid", "--item-features",
           cold_split / "item_features.tsv", "--epochs", 8, "-q"))
    return model


def test_cold_items_split_and_features(cold_split, synth):
    summary = json.loads((cold_split / "summary.json").read_text())
    assert summary["parameters"]["split"] == "cold-items"
    assert summary["items"]["cold_in_test"] == 30  # 20% of 150 items, every row of theirs in test
    train, test = (pd.read_csv(cold_split / f, sep="\t", header=None, dtype=str) for f in ("train.tsv", "test.tsv"))
    assert not set(train[1]) & set(test[1])
    feats = pd.read_csv(cold_split / "item_features.tsv", sep="\t", header=None, dtype=str)
    assert set(test[1]) <= set(feats[0]) and feats[1].str.startswith("tag:").all()


def test_new_items_recommended_and_evaluated(cold_split, hybrid_model):
    test = pd.read_csv(cold_split / "test.tsv", sep="\t", header=None, dtype=str)
    train = pd.read_csv(cold_split / "train.tsv", sep="\t", header=None, dtype=str)
    result = ok(run("recommend", hybrid_model, "-o", cold_split / "cold.tsv", "--new-items-only", "-k", 5, "--item-features",
                    cold_split / "item_features.tsv"))
    assert "nothing is excluded" not in result.output  # new items were never seen: no note about exclusions
    cold = recs_of(cold_split / "cold.tsv")
    assert not set(cold["item"]) & set(train[1]) and cold.groupby("user").size().eq(5).all()
    ok(run("recommend", hybrid_model, "-o", cold_split / "both.tsv", "--include-new-items", "-k", 40, "-q"))
    both = recs_of(cold_split / "both.tsv")
    assert set(both["item"]) & set(test[1]) and set(both["item"]) & set(train[1])
    ok(run("recommend", hybrid_model, "-o", cold_split / "warm.tsv", "-q"))
    assert not set(recs_of(cold_split / "warm.tsv")["item"]) & set(test[1])  # new items are opt-in
    # evaluate: the new items are in the catalogue given by --items
    result = run("evaluate", "--train", cold_split / "train.tsv", "--test", cold_split / "test.tsv",
                 "--recs", cold_split / "cold.tsv", "-k", 5, "--items", cold_split / "item_features.tsv")
    ok(result)
    assert "precision@5" in result.output
    without = run("evaluate", "--train", cold_split / "train.tsv", "--test", cold_split / "test.tsv",
                  "--recs", cold_split / "cold.tsv", "-k", 5)
    # here every recommended new item has a test row, so --items changes no score (recs of
    # items in neither file are an error without it: test_cli_evaluate::test_unknown_id_names_file_line_and_id)
    ok(without)
    line = [ln for ln in result.output.splitlines() if ln.startswith("precision@5")]
    assert line and line == [ln for ln in without.output.splitlines() if ln.startswith("precision@5")]


def test_new_users_by_features_and_by_history(cold_split, hybrid_model, tmp_path):
    users = tmp_path / "users.tsv"
    users.write_text("newbie\tgroup:a\nu1\tgroup:a\n")
    # the model has no user features: a new user with unknown features gets the
    # non-personal ranking (item biases); recommendations are for the users of the file
    result = run("recommend", hybrid_model, "-o", tmp_path / "r.tsv", "--user-features", users, "-v")
    ok(result)
    assert "1 have no feature the model knows" in result.stderr
    assert set(recs_of(tmp_path / "r.tsv")["user"]) == {"u1", "newbie"}
    history = tmp_path / "history.tsv"
    train = pd.read_csv(cold_split / "train.tsv", sep="\t", header=None, dtype=str)
    items = train[1].value_counts().index[:4]
    history.write_text("".join(f"fresh\t{i}\n" for i in items))
    ok(run("recommend", hybrid_model, "-o", tmp_path / "h.tsv", "--history", history, "-k", 7, "-q"))
    recs = recs_of(tmp_path / "h.tsv")
    assert set(recs["user"]) == {"fresh"} and len(recs) == 7 and not set(recs["item"]) & set(items)


def test_fold_in_with_a_plain_warp_model(cold_split, tmp_path):
    model = tmp_path / "warp.npz"
    ok(run("train", cold_split / "train.tsv", "-o", model, "--epochs", 3, "-q"))
    history = tmp_path / "history.tsv"
    history.write_text("a\ti1\na\ti2\nb\ti3\nb\tunknown-item\n")
    result = run("recommend", model, "-o", tmp_path / "recs.tsv", "--history", history, "--fold-in-epochs", 3, "-v")
    ok(result)
    assert "folded in 2 users (2 new)" in result.stderr and "1 row with items the model does not know was skipped" in result.stderr
    assert set(recs_of(tmp_path / "recs.tsv")["user"]) == {"a", "b"}
    # new-item options need a hybrid model
    assert_one_line_error(run("recommend", model, "-o", tmp_path / "x.tsv", "--include-new-items"),
                          "--include-new-items needs a hybrid model")


def test_feature_file_errors_are_one_line(cold_split, tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("i1\ttag:a\t1\ni2\ttag:b\t-2\n")
    result = run("train", cold_split / "train.tsv", "-o", tmp_path / "m.npz", "--model", "hybrid", "--item-features", bad)
    assert_one_line_error(result, f"{bad}:2:", "weight -2 is negative")
    bad.write_text("i1\ttag:a\tNaN\n")
    assert_one_line_error(run("train", cold_split / "train.tsv", "-o", tmp_path / "m.npz", "--model", "hybrid",
                              "--item-features", bad), f"{bad}:1:", "not a finite number")
    bad.write_text("")
    assert_one_line_error(run("train", cold_split / "train.tsv", "-o", tmp_path / "m.npz", "--model", "hybrid",
                              "--item-features", bad), "item feature file is empty")
    bad.write_text("movie-1\ttag:a\nmovie-2\ttag:b\n")
    assert_one_line_error(run("train", cold_split / "train.tsv", "-o", tmp_path / "m.npz", "--model", "hybrid",
                              "--item-features", bad), "none of the 2 ids of the item feature file are item ids")

    assert_one_line_error(run("train", cold_split / "train.tsv", "-o", tmp_path / "m.npz",
                              "--item-features", cold_split / "item_features.tsv"), "need --model hybrid")
    assert not (tmp_path / "m.npz").exists()


def test_a_feature_file_of_foreign_ids_shows_both_sides_ids_as_text():
    table = pd.DataFrame({"id": ["movie-1", "movie-2"], "feature": ["tag:a", "tag:b"], "weight": [1.0, 1.0]})
    with pytest.raises(InputError) as err:  # numpy text ids, as a model holds them
        check_ids_match(table, np.array(["track13", "track2"]), "item", "f.tsv")
    assert "(file: 'movie-1', 'movie-2'; training: 'track13', 'track2')" in str(err.value)


def test_cold_users_split(synth, tmp_path):
    ok(run("prepare", synth / "ratings.tsv", "-o", tmp_path, "--split", "cold-users", "--test-fraction", 0.1, "-q"))
    train, test = (pd.read_csv(tmp_path / f, sep="\t", header=None, dtype=str) for f in ("train.tsv", "test.tsv"))
    assert not set(train[0]) & set(test[0]) and test[0].nunique() == 30
    assert_one_line_error(run("prepare", synth / "ratings.tsv", "-o", tmp_path / "x", "--split", "cold-items",
                              "--leave-out", 1), "use --test-fraction")
