"""prepare --split global-time: one cut-off for everyone, unseen users and items dropped and counted."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from mrec_warp.cli.prepare import prepare as prepare_cli
from mrec_warp.data.split import iter_splits, parse_cutoff
from mrec_warp.stages.prepare import prepare
from mrec_warp.errors import InputError

DAY = 86400
T0 = 1_600_000_000  # 2020-09-13T12:26:40Z


def table(rows):
    return pd.DataFrame(rows, columns=["user", "item", "value", "timestamp"])


def messy_rows():
    """Four users over ten days; u4 only appears late, item z only late, u1 repeats x late."""
    return [
        ("u1", "x", 5, T0), ("u1", "y", 4, T0 + 1 * DAY), ("u1", "w", 3, T0 + 6 * DAY),
        ("u2", "x", 3, T0 + 2 * DAY), ("u2", "w", 4, T0 + 7 * DAY), ("u2", "z", 5, T0 + 8 * DAY),
        ("u3", "y", 1, T0 + 3 * DAY), ("u3", "w", 2, T0 + 4 * DAY), ("u3", "x", 2, T0 + 9 * DAY),
        ("u4", "x", 5, T0 + 8 * DAY),
        ("u1", "x", 1, T0 + 9 * DAY),  # a repeat: merged, the pair keeps its first time (train)
    ]


def test_cutoff_splits_everyone_at_one_time_and_drops_unseen_users_and_items():
    cutoff = T0 + 5 * DAY
    (train, test, summary), = iter_splits(table(messy_rows()), split="global-time", cutoff=cutoff)
    assert train["timestamp"].max() <= cutoff and test["timestamp"].min() > cutoff
    # after the cut-off: u1-w, u2-w, u2-z, u3-x, u4-x; u4 has no training row, z no training row
    assert sorted(zip(test["user"], test["item"])) == [("u1", "w"), ("u2", "w"), ("u3", "x")]
    assert summary["test_rows_with_unknown_user"] == 1 and summary["test_rows_with_unknown_item"] == 1
    assert summary["users"]["dropped_only_in_test"] == 1
    assert ("u1", "x") in set(zip(train["user"], train["item"]))  # merged, earliest time, so in train
    assert train.loc[(train["user"] == "u1") & (train["item"] == "x"), "value"].item() == 6  # summed
    assert summary["cutoff"] == {"timestamp": cutoff, "date": "2020-09-18T12:26:40Z",
                                 "latest_train_timestamp": T0 + 4 * DAY, "earliest_test_timestamp": T0 + 6 * DAY}
    assert summary["parameters"]["split"] == "global-time" and summary["parameters"]["test_fraction"] is None


def test_iso_date_and_unix_timestamp_mean_the_same_cutoff():
    assert parse_cutoff("2020-09-18T12:26:40") == T0 + 5 * DAY == parse_cutoff(str(T0 + 5 * DAY))
    assert parse_cutoff("2020-09-18T14:26:40+02:00") == T0 + 5 * DAY
    assert parse_cutoff(T0 + 0.5) == T0
    a = next(iter_splits(table(messy_rows()), split="global-time", cutoff="2020-09-18"))
    b = next(iter_splits(table(messy_rows()), split="global-time", cutoff=1600387200))
    assert a[0].equals(b[0]) and a[1].equals(b[1])


def test_test_fraction_puts_the_cutoff_at_the_quantile():
    rng = np.random.default_rng(0)
    rows = [(f"u{u}", f"i{i}", 1, T0 + int(t)) for u, i, t in
            zip(rng.integers(0, 40, 3000), rng.integers(0, 60, 3000), rng.permutation(3000) * 100)]
    df = table(rows).drop_duplicates(["user", "item"])
    (train, test, summary), = iter_splits(df, split="global-time", test_fraction=0.25)
    ts = np.sort(df["timestamp"].to_numpy())
    expected = int(np.quantile(ts, 0.75, method="lower"))
    assert summary["cutoff"]["timestamp"] == expected
    later = int((ts > expected).sum())
    assert later == pytest.approx(0.25 * len(ts), abs=1)
    assert len(test) + summary["test_rows_with_unknown_user"] + summary["test_rows_with_unknown_item"] == later
    assert train["timestamp"].max() <= expected < test["timestamp"].min()


@pytest.mark.parametrize("options, fragment", [
    ({"cutoff": "2020-01-01"}, "before the earliest interaction"),
    ({"cutoff": T0 + 9 * DAY}, "not before the latest interaction"),
    ({"cutoff": "next tuesday"}, "is not an ISO 8601 date"),
    ({"cutoff": "now"}, "is not an ISO 8601 date"),
    ({"cutoff": T0, "test_fraction": 0.2}, "both a cut-off and a test fraction"),
    ({"leave_out": 1}, "one time"),
    ({"cutoff": T0, "num_splits": 3}, "same every time"),
])
def test_bad_global_time_options_are_one_clear_error(options, fragment):
    with pytest.raises(InputError, match=fragment):
        next(iter_splits(table(messy_rows()), split="global-time", **options))


def test_cutoff_only_with_global_time():
    with pytest.raises(InputError, match="for `split=global-time`"):
        next(iter_splits(table(messy_rows()), split="temporal", cutoff=T0))


def test_cli_writes_the_split_and_refuses_a_file_without_timestamps(tmp_path):
    src = tmp_path / "ratings.tsv"
    table(messy_rows()).to_csv(src, sep="\t", header=False, index=False)
    r = CliRunner().invoke(prepare_cli, [str(src), "-o", str(tmp_path / "out"), "--split", "global-time",
                                         "--cutoff", "2020-09-18T12:26:40"])
    assert r.exit_code == 0, r.output
    assert "cut-off 2020-09-18T12:26:40Z" in r.output and "1 test row with users unseen in train" in r.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["test"]["rows"] == 3 and summary["cutoff"]["timestamp"] == T0 + 5 * DAY
    test = pd.read_csv(tmp_path / "out" / "test.tsv", sep="\t", header=None)
    assert (test[3] > T0 + 5 * DAY).all()

    no_time = tmp_path / "no_time.tsv"
    table(messy_rows())[["user", "item", "value"]].to_csv(no_time, sep="\t", header=False, index=False)
    r = CliRunner().invoke(prepare_cli, [str(no_time), "-o", str(tmp_path / "out2"), "--split", "global-time",
                                         "--cutoff", str(T0)])
    assert r.exit_code != 0 and "needs timestamps" in r.output and "Traceback" not in r.output
    assert "\n" not in r.output.strip()
    assert not (tmp_path / "out2").exists()


def test_prepare_file_api_takes_a_cutoff(tmp_path):
    src = tmp_path / "ratings.csv"
    table(messy_rows()).to_csv(src, index=False)
    summary = prepare(src, tmp_path / "out", split="global-time", cutoff="2020-09-18T12:26:40")
    assert summary["cutoff"]["latest_train_timestamp"] <= summary["cutoff"]["timestamp"]
    assert summary["parameters"]["cutoff"] == "2020-09-18T12:26:40"


@pytest.mark.parametrize("cutoff", ["01/06/2021", "06/01/2021", "2021/06/01", "1 June 2021", "June 1, 2021",
                                    "2021-6-1", "2021-13-45"])
def test_cutoff_other_than_iso_8601_or_a_number_is_refused_not_read_in_some_order(cutoff):
    # "01/06/2021" used to be read silently as 6 January (US order)
    with pytest.raises(InputError, match="is not an ISO 8601 date"):
        parse_cutoff(cutoff)


@pytest.mark.parametrize("cutoff, expected", [
    ("2020-09-18", 1600387200), ("2020-09-18T12:26:40Z", T0 + 5 * DAY), ("2020-09-18 12:26:40", T0 + 5 * DAY),
    ("2020-09-18T12:26", T0 + 5 * DAY - 40), ("2020-09-18T14:26:40+02:00", T0 + 5 * DAY), ("1600387200", 1600387200),
    ("1600387200.5", 1600387200)])
def test_cutoff_iso_8601_forms_and_numbers_are_read(cutoff, expected):
    assert parse_cutoff(cutoff) == expected


def test_prepare_cli_refuses_a_day_first_or_month_first_cutoff(tmp_path):
    src = tmp_path / "plays.tsv"
    table(messy_rows()).to_csv(src, sep="\t", header=False, index=False)
    out = CliRunner().invoke(prepare_cli, [str(src), "-o", str(tmp_path / "o"), "--split", "global-time",
                                         "--cutoff", "01/06/2021"])
    assert out.exit_code != 0 and "is not an ISO 8601 date" in out.output and "Traceback" not in out.output
    assert not (tmp_path / "o").exists()
