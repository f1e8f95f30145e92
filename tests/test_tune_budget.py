"""tune within a time budget: durations, the budget's stop, intervals, the popularity row, the tie
rule and one line per finished trial on a pipe."""
from __future__ import annotations

import importlib
import json
import types

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from mrec_warp.cli import main
from mrec_warp.errors import InputError
from mrec_warp.stages.budget import parse_duration, promoted
from tests.test_tune import planted_train_file

tune_module = importlib.import_module("mrec_warp.stages.tune")


@pytest.mark.parametrize("text, seconds", [("90s", 90), ("2m", 120), ("1h", 3600), ("1h30m", 5400),
                                           ("1.5h", 5400), ("45", 45), (" 2 m ", 120)])
def test_durations_parse(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "2x", "m", "-5s", "0s", "1h-2m", "nan"])
def test_bad_durations_are_one_line_errors(text):
    with pytest.raises(InputError, match="duration"):
        parse_duration(text)


def test_cli_refuses_a_bad_budget_before_reading(tmp_path):
    res = CliRunner().invoke(main, ["tune", str(tmp_path / "not-read.tsv"), "--time-budget", "soon"])
    assert res.exit_code == 2 and "--time-budget" in res.output and "e.g. 90s, 2m" in res.output


def test_promotion_keeps_the_best_half_and_never_a_failed_trial():
    assert promoted([(0, 0.1), (1, 0.3), (2, float("nan")), (3, 0.2), (4, 0.3)]) == [1, 4]
    assert promoted([(7, 0.5)]) == [7] and promoted([]) == []


def test_a_tiny_budget_stops_after_the_running_trial_and_keeps_the_best_so_far(tmp_path, monkeypatch):
    tsv = planted_train_file(tmp_path)
    clock = {"now": 0.0}
    real_run_trial = tune_module.run_trial

    def slow_trial(*args):  # every trial "takes" 10 s on the search's clock
        row = real_run_trial(*args)
        clock["now"] += 10.0
        return row

    monkeypatch.setattr(tune_module, "run_trial", slow_trial)
    monkeypatch.setattr(tune_module, "time", types.SimpleNamespace(monotonic=lambda: clock["now"],
                                                                   perf_counter=tune_module.time.perf_counter))
    out = tmp_path / "best.json"
    res = CliRunner().invoke(main, ["tune", str(tsv), "--models", "itemknn,slim", "--time-budget", "15s",
                                    "-o", str(out), "--table", str(tmp_path / "t.tsv")])
    assert res.exit_code == 0, res.output
    table = pd.read_csv(tmp_path / "t.tsv", sep="\t")
    # the baseline, then one trial started with 5 s left; none after the budget was spent
    assert len(table) == 2 and set(table["model"]) == {"popularity", "itemknn"}
    assert "not started" in res.stderr
    # each trial's cost was estimated before it started, and its line says so
    assert sum(", estimated " in line for line in res.stderr.splitlines() if " trial " in line) == 2
    best = json.loads(out.read_text())
    assert best["model"] == "itemknn" and best["trials"] == 2


def test_the_table_shows_intervals_and_the_popularity_baseline(tmp_path):
    tsv = planted_train_file(tmp_path)
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps({"itemknn": {"neighbours": [5, 20]}}))
    res = CliRunner().invoke(main, ["tune", str(tsv), "--models", "itemknn", "--grid", str(grid), "-q",
                                    "--table", str(tmp_path / "t.tsv")])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    header = lines[0].split()
    assert header[header.index("precision@10") + 1:header.index("precision@10") + 3] == ["vs_defaults_pct", "ci95"]
    rows = [line.split() for line in lines[1:] if not line.startswith(("best:", "tie:"))]
    assert [r[1] for r in rows][-1] == "popularity"  # a reference row, after the candidates
    table = pd.read_csv(tmp_path / "t.tsv", sep="\t")
    assert ((table["ci_low"] <= table["precision@10"]) & (table["precision@10"] <= table["ci_high"])).all()
    assert (table["ci_high"] > table["ci_low"]).all()
    for line, (lo, hi) in zip(lines[1:], zip(table["ci_low"], table["ci_high"])):  # shown as lo-hi
        assert f"{lo:.4f}-{hi:.4f}" in line
    assert res.stderr == ""  # -q: no log lines, the table stays


def test_one_line_per_finished_trial_on_a_pipe(tmp_path):
    tsv = planted_train_file(tmp_path)
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps({"itemknn": {"neighbours": [5, 20]}}))
    res = CliRunner().invoke(main, ["tune", str(tsv), "--models", "itemknn", "--grid", str(grid)])
    assert res.exit_code == 0, res.output
    trial_lines = [line for line in res.stderr.splitlines() if " trial " in line and "precision@10" in line]
    assert len(trial_lines) == 4  # the defaults, 2 candidates, the baseline (CliRunner's stderr is no terminal)
    assert sorted(int(line.split("trial ")[1].split()[0]) for line in trial_lines) == [0, 1, 2, 3]


def _row(trial, model, score, half, seconds=1.0, **params):
    return {"trial": trial, "model": model, **params, "precision@10": score, "ci_low": score - half,
            "ci_high": score + half, "seconds": seconds}


def test_a_statistical_tie_goes_to_the_cheaper_family_and_says_so():
    rows = [_row(0, "ease", 0.300, 0.02, l2=400.0), _row(1, "itemknn", 0.290, 0.02, neighbours=200),
            _row(2, "itemknn", 0.250, 0.02, neighbours=5), _row(3, "popularity", 0.289, 0.02)]
    points = [{"model": "ease", "l2": 400.0}, {"model": "itemknn", "neighbours": 200},
              {"model": "itemknn", "neighbours": 5}, {"model": "popularity"}]
    costs = {0: 50.0, 1: 2.0, 2: 1.0, 3: 0.1}
    table, notes = tune_module._results_table(rows, points, {0, 1, 3}, "precision@10", costs)
    # itemknn's best row is within noise of EASE and cheaper; popularity is never the pick
    assert table["trial"].tolist()[:2] == [1, 0] and table["trial"].tolist()[-1] == 3
    assert len(notes) == 1 and notes[0].startswith("tie: itemknn (0.2900) is within noise of ease 0.3000")
    result = tune_module.TuneResult(table=table, metric="precision@10", base={}, notes=notes)
    assert result.best_model == "itemknn" and result.best_params == {"neighbours": 200}
    assert result.summary().splitlines()[1] == notes[0]
    assert "within noise of the popularity baseline" in result.baseline_note()
    # intervals apart: the higher score stays first, nothing to say
    rows[1] = _row(1, "itemknn", 0.200, 0.02, neighbours=200)
    table, notes = tune_module._results_table(rows, points, {0, 1, 3}, "precision@10", costs)
    assert table["trial"].iloc[0] == 0 and notes == []


def test_overlapping_intervals_are_no_tie_when_the_paired_difference_is_clear():
    # the new user's case: wrmf 0.0092 [0.0082, 0.0102] against itemknn 0.0073 [0.0064,
    # 0.0083]: separate intervals overlap, but user by user wrmf is ahead
    rng = np.random.default_rng(0)
    n = 3000
    common = rng.random(n) < 0.07  # users both models get right
    itemknn_hits = common.astype(int)
    wrmf_hits = itemknn_hits + (rng.random(n) < 0.02)  # a few more users, never fewer
    rows = [dict(_row(0, "wrmf", wrmf_hits.mean() / 10, 0.001), _hits=wrmf_hits.tolist()),
            dict(_row(1, "itemknn", itemknn_hits.mean() / 10, 0.001, neighbours=800), _hits=itemknn_hits.tolist())]
    points = [{"model": "wrmf"}, {"model": "itemknn", "neighbours": 800}]
    assert rows[1]["ci_high"] >= rows[0]["ci_low"]  # the unpaired intervals overlap
    table, notes = tune_module._results_table(rows, points, {0, 1}, "precision@10", {0: 5.0, 1: 1.0})
    assert table["trial"].iloc[0] == 0 and notes == []  # the better model stays the pick
    assert "_hits" not in table.columns
    # the same hits shuffled against each other: no user-by-user edge, a tie to the cheaper
    rows[0]["_hits"] = rng.permutation(itemknn_hits).tolist()
    rows[0]["precision@10"] = rows[1]["precision@10"] + 1e-4
    rows[0]["ci_low"], rows[0]["ci_high"] = rows[0]["precision@10"] - 0.001, rows[0]["precision@10"] + 0.001
    table, notes = tune_module._results_table(rows, points, {0, 1}, "precision@10", {0: 5.0, 1: 1.0})
    assert table["trial"].iloc[0] == 1 and notes[0].startswith("tie: itemknn")
    assert "per-user difference includes 0" in notes[0]


def test_defaults_that_ran_only_short_trials_are_no_reference():
    rows = [_row(0, "warp", 0.100, 0.01, factors=128), _row(1, "warp", 0.080, 0.01, factors=64),
            dict(_row(2, "warp", 0.050, 0.01, factors=64), epochs_cap=5)]
    points = [{"model": "warp", "factors": 128}, {"model": "warp", "factors": 64}]
    # trial 1 is the defaults' full trial: the reference
    table, _ = tune_module._results_table(rows, points, {1, 2}, "precision@10", {0: 2.0, 1: 1.0, 2: 0.2})
    assert table.loc[table["trial"] == 0, "vs_defaults_pct"].iloc[0] == pytest.approx(25.0)  # percent
    # the defaults only as a short trial: no reference, nothing claimed against it
    table, _ = tune_module._results_table(rows[:1] + rows[2:], points, {2}, "precision@10", {0: 2.0, 2: 0.2})
    assert table["vs_defaults_pct"].isna().all()
    result = tune_module.TuneResult(table=table, metric="precision@10", base={}, notes=[])
    assert "vs warp defaults" not in result.summary()


def test_a_budget_search_on_planted_data_ends_with_full_trials(planted):
    from mrec_warp.stages.candidates import candidates
    from mrec_warp.stages.tune import tune

    train, _ = planted
    points = candidates(["warp", "itemknn"], {"warp": {"factors": [4, 8]}, "itemknn": {"neighbours": [10]}})
    result = tune(train, points, base={"max_epochs": 6, "patience": 2}, time_budget=600, baseline=True)
    table = result.table
    full = table[table["epochs_cap"].isna() & (table["model"] != "popularity")]
    assert table.iloc[0]["trial"] in full["trial"].tolist()  # the pick is a full trial
    assert "warp" in set(full["model"])  # short warp trials were promoted to a full one
    short = table[table["epochs_cap"].notna()]
    assert len(short) and (short["model"] == "warp").all()
    assert np.isfinite(result.best_json()["score"])


def test_a_search_whose_every_trial_failed_is_refused(tmp_path):
    # an EASE refused for memory is a failed trial; the popularity baseline still scores, and
    # used to be outranked by the failed row (a best.json with a NaN score, exit 0)
    tsv = planted_train_file(tmp_path)
    with pytest.raises(InputError, match="every trial failed"):
        tune_module.tune(str(tsv), [{"model": "ease", "memory_limit_mb": 0.001}], with_defaults=False,
                         baseline=True, k=5)


def test_the_baseline_alone_is_never_the_pick(tmp_path, monkeypatch):
    # a budget that ends after the popularity row: no full trial, so no pick
    tsv = planted_train_file(tmp_path)
    clock = {"now": 0.0}
    real_run_trial = tune_module.run_trial

    def slow_trial(*args):
        row = real_run_trial(*args)
        clock["now"] += 100.0
        return row

    monkeypatch.setattr(tune_module, "run_trial", slow_trial)
    monkeypatch.setattr(tune_module, "time", types.SimpleNamespace(monotonic=lambda: clock["now"],
                                                                   perf_counter=tune_module.time.perf_counter))
    out = tmp_path / "best.json"
    res = CliRunner().invoke(main, ["tune", str(tsv), "--models", "warp,wrmf", "--time-budget", "50s", "-o", str(out)])
    assert res.exit_code != 0 and "before any full trial finished" in res.output, res.output
    assert not out.exists()


def test_vs_defaults_is_in_percent_in_the_table_its_tsv_and_the_summary(tmp_path):
    rows = [_row(0, "warp", 0.100, 0.01, factors=128), _row(1, "warp", 0.080, 0.01, factors=64),
            _row(2, "warp", 0.060, 0.01, factors=32)]
    points = [{"model": "warp", "factors": f} for f in (128, 64, 32)]
    table, _ = tune_module._results_table(rows, points, {1}, "precision@10", {0: 2.0, 1: 1.0, 2: 0.5})
    result = tune_module.TuneResult(table=table, metric="precision@10", base={}, notes=[])
    assert table["vs_defaults_pct"].tolist() == pytest.approx([25.0, 0.0, -25.0])
    printed = result.format_table().splitlines()
    at = printed[0].split().index("vs_defaults_pct")
    assert [line.split()[at] for line in printed[1:]] == ["+25.0%", "+0.0%", "-25.0%"]
    assert "+25.0% vs warp defaults" in result.summary()  # the best row's cell, in the same unit
    table.to_csv(tmp_path / "t.tsv", sep="\t", index=False)  # what --table writes: numbers
    assert pd.read_csv(tmp_path / "t.tsv", sep="\t")["vs_defaults_pct"].tolist() == pytest.approx([25.0, 0.0, -25.0])
