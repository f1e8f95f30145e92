"""binarise(): merge duplicates, drop rows below min_rating, drop users with too few rows."""
from __future__ import annotations

import numpy as np
import pandas as pd

from mrec_warp.data.rows import binarise


def test_duplicates_merge_by_the_rule_chosen_with_the_earliest_time():
    df = pd.DataFrame({
        "user": ["a", "a", "a", "b"], "item": ["x", "x", "x", "x"],
        "value": [2.0, 5.0, 3.0, 1.0], "timestamp": [30, 20, 10, 5],
    })
    for rule, value in (("sum", 10.0), ("max", 5.0), ("first", 2.0), ("last", 3.0), ("count", 3.0)):
        pos = binarise(df, duplicates=rule)
        assert len(pos) == 2 and pos.counts["duplicates_merged"] == 2
        merged = pos.take(np.ones(len(pos), dtype=bool))
        assert merged.to_dict("records")[0] == {"user": "a", "item": "x", "value": value, "timestamp": 10}, rule
    assert binarise(df).take(np.ones(2, dtype=bool))["value"].tolist() == [10.0, 1.0]  # the default is sum


def test_merge_happens_before_the_rating_filter():
    # the low duplicate does not hide the high one, and the high one is not counted as dropped
    df = pd.DataFrame({"user": ["a", "a", "a"], "item": ["x", "x", "y"], "value": [2.0, 5.0, 1.0]})
    pos = binarise(df, min_rating=4, duplicates="max")
    assert pos.take(np.ones(len(pos), dtype=bool))[["user", "item", "value"]].values.tolist() == [["a", "x", 5.0]]
    assert pos.counts["duplicates_merged"] == 1
    assert pos.counts["rows_below_min_rating"] == 1  # only (a, y): counted after merging


def test_min_user_items_counts_rows_left_after_the_rating_filter():
    df = pd.DataFrame({
        "user": ["a"] * 3 + ["b"] * 3 + ["c"],
        "item": ["x", "y", "z"] * 2 + ["x"],
        "value": [5, 5, 1, 5, 5, 5, 1.0],
    })
    pos = binarise(df, min_rating=4, min_user_items=3)
    kept = pos.take(np.ones(len(pos), dtype=bool))
    assert sorted(set(kept["user"])) == ["b"]  # a has only 2 positives left, c has none
    assert pos.counts["users_below_min_user_items"] == 1
    assert pos.counts["users_without_positives"] == 1
    assert pos.counts["rows_of_users_below_min_user_items"] == 2
