"""prepare(): split per user, and the files it writes (merging and filtering: test_positives.py)."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mrec_warp.data.ratings import read_ratings
from mrec_warp.data.split import iter_splits
from mrec_warp.stages.prepare import prepare
from mrec_warp.errors import InputError

from .conftest import error_line

ML100K = Path(__file__).resolve().parents[2] / "shared/data/ml-100k"
COLUMNS = ["user", "item", "value", "timestamp"]


def write_rows(path: Path, rows) -> Path:
    path.write_text("".join("\t".join(str(f) for f in row) + "\n" for row in rows))
    return path


def read_split(folder: Path):
    cols = COLUMNS if len((folder / "train.tsv").read_text().split("\n", 1)[0].split("\t")) == 4 else COLUMNS[:3]
    train = pd.read_csv(folder / "train.tsv", sep="\t", header=None, names=cols, dtype={"user": str, "item": str})
    test = pd.read_csv(folder / "test.tsv", sep="\t", header=None, names=cols, dtype={"user": str, "item": str})
    return train, test, json.loads((folder / "summary.json").read_text())


def random_ratings(n_users=300, n_items=200, n_rows=6000, seed=0, with_time=True) -> pd.DataFrame:
    """Skewed random ratings with some duplicate rows."""
    rng = np.random.default_rng(seed)
    users = np.floor(rng.pareto(1.5, n_rows) * 10).astype(int) % n_users
    items = np.floor(rng.pareto(1.2, n_rows) * 20).astype(int) % n_items
    df = pd.DataFrame({
        "user": [f"u{u}" for u in users], "item": [f"i{i}" for i in items],
        "value": rng.integers(1, 6, n_rows).astype(float),
    })
    if with_time:
        df["timestamp"] = rng.integers(0, 1000, n_rows)
    return df


def frame_file(tmp_path: Path, df: pd.DataFrame, name="ratings.tsv") -> Path:
    path = tmp_path / name
    df.to_csv(path, sep="\t", header=False, index=False)
    return path


def test_file_without_ratings_makes_every_row_a_positive(tmp_path):
    path = write_rows(tmp_path / "pairs.tsv", [("a", f"i{j}") for j in range(5)] + [("b", "i0"), ("b", "i1")])
    summary = prepare(path, tmp_path / "out", test_fraction=0.4)
    train, test, _ = read_split(tmp_path / "out")
    assert summary["train"]["rows"] + summary["test"]["rows"] + summary["test_rows_with_unknown_item"] == 7
    assert set(train["value"]) | set(test["value"]) == {1}


def test_min_rating_needs_a_rating_column(tmp_path):
    path = write_rows(tmp_path / "pairs.tsv", [("a", "x"), ("a", "y")])
    with pytest.raises(InputError, match="`min_value` compares each pair's value, and the table has only user and item") as info:
        prepare(path, tmp_path / "out", min_rating=4)
    assert "--min-value compares each pair's value" in error_line(info.value)  # what the CLI says
    assert not (tmp_path / "out").exists()


def test_nothing_left_is_an_error_and_writes_nothing(tmp_path):
    path = write_rows(tmp_path / "r.tsv", [("a", "x", 1), ("a", "y", 2), ("b", "x", 3)])
    with pytest.raises(InputError, match="no interactions left.*lower `min_value`") as info:
        prepare(path, tmp_path / "out", min_rating=4)
    assert re.search("no interactions left.*lower --min-value", error_line(info.value))
    assert not (tmp_path / "out").exists()


def test_no_user_with_two_positives_is_an_error(tmp_path):
    path = write_rows(tmp_path / "r.tsv", [("a", "x", 5), ("b", "y", 5)])
    with pytest.raises(InputError, match="no user has 2 or more positives"):
        prepare(path, tmp_path / "out")


# -- how many go to test ------------------------------------------------------------------------
def _shared_items_frame(sizes, copies=30):
    """Users with the given numbers of items; every item is rated by many users."""
    rows = []
    for n in sizes:
        for c in range(copies):
            rows += [(f"u{n}_{c}", f"i{j}", 5.0, j) for j in range(n)]
    return pd.DataFrame(rows, columns=COLUMNS)


@pytest.mark.parametrize("fraction", [0.1, 0.2, 0.5, 0.8])
def test_random_fraction_per_user(fraction):
    sizes = [1, 2, 3, 4, 5, 7, 10, 11, 25]
    train, test, summary = next(iter_splits(_shared_items_frame(sizes, copies=60), test_fraction=fraction, seed=3))
    assert summary["test_rows_with_unknown_item"] == 0  # with 60 copies every item stays in train
    n_test = test.groupby("user").size()
    for n in sizes:
        expected = 0 if n < 2 else min(max(math.floor(fraction * n + 0.5), 1), n - 1)
        got = {int(n_test.get(f"u{n}_{c}", 0)) for c in range(60)}
        assert got == {expected}, (n, fraction)


def test_half_rounds_up():
    # 0.5 * 5 = 2.5 -> 3, 0.5 * 3 = 1.5 -> 2 (numpy's round would give 2 and 2)
    _, test, _ = next(iter_splits(_shared_items_frame([3, 5], copies=10), test_fraction=0.5))
    sizes = test.groupby("user").size()
    assert set(sizes[[u.startswith("u5_") for u in sizes.index]]) == {3}
    assert set(sizes[[u.startswith("u3_") for u in sizes.index]]) == {2}


@pytest.mark.parametrize("k", [1, 2, 4])
def test_leave_out_k_per_user(k):
    sizes = [1, 2, 3, 5, 8]
    train, test, summary = next(iter_splits(_shared_items_frame(sizes), leave_out=k, seed=5))
    assert summary["parameters"]["split"] == "leave-out"
    n_test = test.groupby("user").size()
    for n in sizes:
        expected = 0 if n < 2 else min(k, n - 1)
        assert {int(n_test.get(f"u{n}_{c}", 0)) for c in range(30)} == {expected}


def test_random_choice_differs_between_users_and_seeds():
    df = _shared_items_frame([10], copies=40)
    _, test_a, _ = next(iter_splits(df, leave_out=1, seed=1))
    _, test_b, _ = next(iter_splits(df, leave_out=1, seed=2))
    assert test_a["item"].nunique() > 5  # not the same item for everyone
    assert test_a["item"].tolist() != test_b["item"].tolist()


def test_temporal_puts_the_latest_in_test():
    df = random_ratings(seed=4)
    train, test, summary = next(iter_splits(df, test_fraction=0.3, split="temporal"))
    last_train = train.groupby("user")["timestamp"].max()
    first_test = test.groupby("user")["timestamp"].min()
    assert len(first_test) > 50
    assert (last_train[first_test.index] <= first_test).all()
    assert summary["parameters"]["split"] == "temporal"


def test_temporal_leave_last_out():
    rows = [("a", f"i{j}", 5, 100 - j) for j in range(6)] + [("b", f"i{j}", 5, j) for j in range(6)]
    train, test, _ = next(iter_splits(pd.DataFrame(rows, columns=COLUMNS), leave_out=2, split="temporal"))
    assert sorted(map(tuple, test[["user", "item"]].values.tolist())) == [("a", "i0"), ("a", "i1"), ("b", "i4"), ("b", "i5")]


def test_temporal_needs_timestamps(tmp_path):
    path = write_rows(tmp_path / "r.tsv", [("a", "x", 5), ("a", "y", 5)])
    with pytest.raises(InputError, match="temporal split needs timestamps"):
        prepare(path, tmp_path / "out", split="temporal")
    assert not (tmp_path / "out").exists()


def test_users_with_fewer_than_two_positives_stay_in_train():
    df = pd.DataFrame({
        "user": ["solo", "pair", "pair", "big", "big", "big", "big"],
        "item": ["x", "x", "y", "x", "y", "z", "w"],
        "value": [5.0] * 7,
    })
    train, test, summary = next(iter_splits(df, test_fraction=0.5, seed=0))
    assert "solo" in set(train["user"]) and "solo" not in set(test["user"])
    assert summary["users"]["train_only"] == 1


def test_items_only_in_test_are_dropped_and_counted():
    rows = [("a", "common", 5, 1), ("a", "rare", 5, 2), ("b", "common", 5, 1), ("b", "other", 5, 0)]
    train, test, summary = next(iter_splits(pd.DataFrame(rows, columns=COLUMNS), leave_out=1, split="temporal"))
    # a's latest item is "rare", seen by nobody in train; b's latest is "common", seen in a's train
    assert test[["user", "item"]].values.tolist() == [["b", "common"]]
    assert summary["test_rows_with_unknown_item"] == 1
    assert summary["items"]["dropped_only_in_test"] == 1
    assert "rare" not in set(train["item"])


def test_split_is_a_partition_and_every_count_adds_up():
    df = random_ratings(seed=7)
    for train, test, s in iter_splits(df, min_rating=2, min_user_items=3, test_fraction=0.25, num_splits=3, seed=9,
                                      duplicates="max"):
        pairs_train = set(zip(train["user"], train["item"]))
        pairs_test = set(zip(test["user"], test["item"]))
        assert not pairs_train & pairs_test
        assert len(pairs_train) == len(train) and len(pairs_test) == len(test)
        assert set(test["user"]) <= set(train["user"])  # every test user has training data
        assert set(test["item"]) <= set(train["item"])  # every test item is known
        assert (train["value"] >= 2).all() and (test["value"] >= 2).all()
        kept = (s["rows_read"] - s["duplicates_merged"] - s["rows_below_min_rating"]
                - s["rows_of_users_below_min_user_items"] - s["test_rows_with_unknown_item"])
        assert kept == s["train"]["rows"] + s["test"]["rows"]
        u, i = s["users"], s["items"]
        assert u["read"] == df["user"].nunique() == u["kept"] + u["dropped_without_positives"] + u["dropped_below_min_user_items"]
        assert i["read"] == df["item"].nunique() == i["kept"] + i["dropped_without_positives"] + i["dropped_only_in_test"]
        assert s["train"]["users"] == u["kept"] and s["train"]["items"] == i["kept"]
        assert s["malformed_rows"] == 0


def test_per_user_counts_match_a_pandas_reference():
    # the vectorised grouping against a plain groupby on a larger skewed table
    df = random_ratings(n_users=2000, n_items=800, n_rows=60_000, seed=11)
    train, test, _ = next(iter_splits(df, test_fraction=0.3, seed=1))
    merged = df.drop_duplicates(["user", "item"])
    n = merged.groupby("user").size()
    expected = np.where(n >= 2, np.clip(np.floor(0.3 * n + 0.5), 1, n - 1), 0)
    both = pd.concat([train, test])
    got = test.groupby("user").size().reindex(n.index, fill_value=0)
    dropped = both.groupby("user").size().reindex(n.index, fill_value=0) < n  # unknown-item drops
    assert (got[~dropped].to_numpy() == expected[~dropped.to_numpy()]).all()
    assert dropped.mean() < 0.2


# -- files --------------------------------------------------------------------------------------
def test_files_and_summary(tmp_path):
    path = frame_file(tmp_path, random_ratings(seed=2))
    summary = prepare(path, tmp_path / "out", min_rating=3, seed=1, duplicates="max")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["summary.json", "test.tsv", "train.tsv"]
    train, test, on_disk = read_split(tmp_path / "out")
    assert on_disk == summary
    assert len(train) == summary["train"]["rows"] and len(test) == summary["test"]["rows"]
    line = (tmp_path / "out/train.tsv").read_text().split("\n", 1)[0]
    assert len(line.split("\t")) == 4 and line.split("\t")[2] in "345"  # integral ratings stay "4"
    assert summary["input"] == str(path)
    assert summary["parameters"] == {
        "format": "auto", "sep": None, "header": None, "columns": None,
        "duplicates": "max", "negatives": "refuse", "empty_ids": "refuse", "min_value": 3, "min_rating": 3,
        "min_user_items": 1, "split": "random", "test_fraction": 0.2, "leave_out": None,
        "num_splits": 1, "seed": 1,
    }
    # the files read back through the project's own reader
    assert len(read_ratings(tmp_path / "out/test.tsv")) == summary["test"]["rows"]


def test_same_seed_gives_byte_identical_files(tmp_path):
    path = frame_file(tmp_path, random_ratings(seed=3))
    prepare(path, tmp_path / "a", seed=7)
    prepare(path, tmp_path / "b", seed=7)
    prepare(path, tmp_path / "c", seed=8)
    for name in ("train.tsv", "test.tsv", "summary.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert (tmp_path / "a/test.tsv").read_bytes() != (tmp_path / "c/test.tsv").read_bytes()


def test_num_splits_writes_one_folder_each(tmp_path):
    path = frame_file(tmp_path, random_ratings(seed=5))
    result = prepare(path, tmp_path / "cv", num_splits=3, seed=4)
    assert result["num_splits"] == 3 and [s["split"] for s in result["splits"]] == [0, 1, 2]
    folders = sorted(p.name for p in (tmp_path / "cv").iterdir())
    assert folders == ["split-0", "split-1", "split-2"]
    tests = [(tmp_path / "cv" / f / "test.tsv").read_bytes() for f in folders]
    assert len(set(tests)) == 3  # different seeds, different splits
    for f in folders:
        assert sorted(p.name for p in (tmp_path / "cv" / f).iterdir()) == ["summary.json", "test.tsv", "train.tsv"]
    # split 0 does not depend on how many splits were asked for
    prepare(path, tmp_path / "one", num_splits=1, seed=4)
    assert (tmp_path / "one/test.tsv").read_bytes() == tests[0]


@pytest.mark.parametrize("fraction", [1.0, 1.5, -0.2, float("nan")])
def test_bad_test_fraction(tmp_path, fraction):
    path = frame_file(tmp_path, random_ratings(seed=1))
    with pytest.raises(InputError, match=r"test fraction must be at least 0 and below 1.*`test_fraction=0.2`") as info:
        prepare(path, tmp_path / "out", test_fraction=fraction)
    assert re.search(r"test fraction must be at least 0 and below 1.*--test-fraction 0.2", error_line(info.value))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "options, message",
    [
        ({"test_fraction": 0.2, "leave_out": 1}, "either --test-fraction F or --leave-out K"),
        ({"leave_out": -1}, "leave-out count must be a whole number >= 0"),
        ({"split": "leave-out"}, "needs a count"),
        ({"split": "sideways"}, "unknown split 'sideways'"),
        ({"split": "temporal", "num_splits": 3}, "temporal split is the same every time"),
        ({"num_splits": 0}, "number of splits"),
        ({"min_user_items": 0}, "minimum items per user"),
        ({"seed": -1}, "seed must be a non-negative integer"),
    ],
)
def test_bad_options(tmp_path, options, message):
    path = frame_file(tmp_path, random_ratings(seed=1))
    with pytest.raises(InputError) as info:
        prepare(path, tmp_path / "out", **options)
    assert re.search(message, error_line(info.value))  # as the CLI says it: flags, not parameter names
    assert "--" not in str(info.value)  # the library names parameters
    assert not (tmp_path / "out").exists()


def test_malformed_input_is_an_error_not_a_skipped_row(tmp_path):
    path = write_rows(tmp_path / "r.tsv", [("a", "x", 5, 1), ("a", "y", 5, 2), ("b", "x", "five", 3)])
    with pytest.raises(InputError, match=r"r\.tsv:3: rating 'five'"):
        prepare(path, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(not (ML100K / "u.data").exists(), reason="MovieLens 100k not available")
def test_movielens_100k(tmp_path):
    s = prepare(ML100K / "u.data", tmp_path / "ml", format="movielens", min_rating=4, test_fraction=0.2, seed=42)
    assert s["rows_read"] == 100_000 and s["duplicates_merged"] == 0
    assert s["rows_below_min_rating"] == 44_625  # ratings 1-3
    # one of the 943 users rated nothing 4 or 5, so 942 are kept; all of them reach test
    assert s["users"]["read"] == 943 and s["users"]["kept"] == 942 and s["users"]["dropped_without_positives"] == 1
    assert s["test"]["users"] == 942
    assert s["train"]["rows"] + s["test"]["rows"] + s["test_rows_with_unknown_item"] == 55_375
    assert 0.19 < s["test"]["rows"] / 55_375 < 0.21


def test_a_failed_write_leaves_no_partial_split(tmp_path, monkeypatch):
    from mrec_warp.data import split

    path = frame_file(tmp_path, random_ratings(seed=1))
    real = split.write_interactions
    calls = []

    def failing(df, target):
        calls.append(target)
        if len(calls) == 2:  # train written, then the test file fails (e.g. disk full)
            raise OSError(28, "No space left on device")
        real(df, target)

    monkeypatch.setattr(split, "write_interactions", failing)
    with pytest.raises(OSError):
        prepare(path, tmp_path / "out")
    # a new folder is written whole, then renamed: no folder, no temporary files beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


@pytest.mark.parametrize("split", ["cold-items", "cold-users"])
def test_cold_splits_hold_one_side_out_and_count_what_they_drop(split):
    df = random_ratings(n_users=300, n_items=200, n_rows=3000, seed=4)  # many users with 1-2 rows
    train, test, summary = next(iter_splits(df, test_fraction=0.2, split=split, seed=1))
    held, other = ("item", "user") if split == "cold-items" else ("user", "item")
    assert not set(train[held]) & set(test[held])  # held-out side: never in train
    assert set(test[other]) <= set(train[other])  # other side: always known from train
    positives = len(df.drop_duplicates(["user", "item"]))
    dropped = positives - len(train) - len(test)
    assert dropped > 0 and summary[f"test_rows_with_unknown_{other}"] == dropped
    assert summary["items" if held == "item" else "users"]["cold_in_test"] == test[held].nunique()
    if split == "cold-items":
        assert summary["test_rows_with_unknown_item"] == 0 and summary["items"]["dropped_only_in_test"] == 0
