"""mrec-warp experiment: one TOML file -> every model on every split -> one report folder."""
from __future__ import annotations

import csv
import os
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import mrec_warp as mw
from mrec_warp.cli import main
from mrec_warp.context import ExecutionContext
from mrec_warp.errors import InputError
from mrec_warp.experiments.config import read_config
from mrec_warp.experiments.config_lines import line_of

from .faults import Fault

CONFIG = """\
# a small comparison
seed = 7
output = "report"

[data]
path = "ratings.tsv"
min_value = 2

[splits.random]
kind = "random"
repeats = 2
test_fraction = 0.25
seed = 3

[models.pop]
family = "popularity"

[models.mf]
family = "warp"
factors = 4
epochs = 3

[evaluate]
k = [3, 5]
metrics = ["precision", "ndcg", "novelty", "coverage"]
baseline = "pop"
"""


def write_ratings(path: Path, seed: int = 0) -> None:
    """40 users x 30 items, two taste groups, ratings 1-5 and timestamps; a few repeated rows."""
    rng = np.random.default_rng(seed)
    lines = []
    for u in range(40):
        group = u % 2
        items = rng.choice(np.arange(group * 12, group * 12 + 18), size=9, replace=False)
        for i in items:
            lines.append(f"u{u}\ti{i}\t{rng.integers(1, 6)}\t{1000 + rng.integers(0, 500)}")
    lines += [lines[0], lines[5]]  # repeated rows merge by the default rule (sum)
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture
def setup(tmp_path):
    write_ratings(tmp_path / "ratings.tsv")
    cfg = tmp_path / "exp.toml"
    cfg.write_text(CONFIG)
    return tmp_path, cfg


def tables(folder: Path):
    return {name: (folder / name).read_bytes() for name in
            ("results.md", "results.csv", "random/report.md", "random/report.json", "random/per_user.csv")}


def test_report_files_and_columns(setup):
    tmp, cfg = setup
    result = mw.experiment(cfg)
    out = tmp / "report"
    assert result.output == out and result.runs == 4 and result.skipped == 0
    for name in ("results.md", "results.csv", "experiment.toml", "reproduce.json", "timing.json",
                 "random/report.md", "random/report.json", "random/per_user.csv", "accuracy-vs-novelty.png"):
        assert (out / name).is_file(), name
    assert (out / "experiment.toml").read_bytes() == cfg.read_bytes()
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert list(rows[0]) == ["split_set", "model", "metric", "mean", "plus_minus", "interval", "difference",
                             "difference_plus_minus", "p", "p_adjusted", "significant"]
    metrics = {r["metric"] for r in rows}
    assert metrics == {"precision@3", "precision@5", "ndcg@3", "ndcg@5", "novelty@3", "novelty@5",
                       "coverage@3", "coverage@5"}
    assert {r["model"] for r in rows} == {"pop", "mf"}
    assert all(r["interval"] == "se" for r in rows)  # two splits: mean over splits +- standard error
    assert all(r["p"] == "" for r in rows if r["model"] == "pop")  # the baseline is not tested against itself
    # the test family is the table's metrics: coverage is tested over splits too
    assert sum(1 for r in rows if r["model"] == "mf" and r["p_adjusted"]) == 8
    report = json.loads((out / "random/report.json").read_text())
    assert [r["name"] for r in report["runs"]] == ["pop", "mf"]
    assert report["splits"] == ["split-0", "split-1"]
    assert report["comparison"]["correction"].lower().startswith("holm")
    repro = json.loads((out / "reproduce.json").read_text())
    assert repro["seeds"] == {"models": 7, "paired_test": 7, "splits": {"random": 3}}
    assert repro["versions"]["numpy"] == np.__version__
    # mean of the splits' values is the headline number
    per_split = report["runs"][1]["summary"]["ndcg@5"]
    assert per_split["mean"] == pytest.approx(np.mean(per_split["values"]))
    assert not (out / "work").exists()  # removed after a complete run


def test_rerun_is_byte_identical(setup, tmp_path):
    tmp, cfg = setup
    mw.experiment(cfg, tmp / "a")
    mw.experiment(cfg, tmp / "b", context=ExecutionContext("threads", n_jobs=2))  # two runs at once
    assert tables(tmp / "a") == tables(tmp / "b")
    # the tables name no path of the report folder or of the file, so they compare across folders too
    assert str(tmp).encode() not in (tmp / "a" / "results.md").read_bytes()
    assert str(tmp).encode() not in (tmp / "a" / "results.csv").read_bytes()


def test_processes_give_the_same_tables(setup):
    tmp, cfg = setup  # the units are pickled to other processes: paths and plain values only
    mw.experiment(cfg, tmp / "threads")
    mw.experiment(cfg, tmp / "procs", context=ExecutionContext("processes", n_jobs=2))
    assert tables(tmp / "threads") == tables(tmp / "procs")


def test_resume_skips_finished_runs(setup, monkeypatch):
    tmp, cfg = setup
    with monkeypatch.context() as patch:
        Fault.at("raise:2", tmp / "fault").install(patch)  # the third run fails
        with pytest.raises(RuntimeError, match="injected failure in part 2"):
            mw.experiment(cfg, tmp / "r")
    work = tmp / "r" / "work"
    done = sorted(p.name for p in work.glob("run-*.json"))
    assert done == ["run-0000.json", "run-0001.json"]
    stamps = {p: p.stat().st_mtime_ns for p in (work / "recs").rglob("*.tsv")}
    result = mw.experiment(cfg, tmp / "r", context=ExecutionContext("threads", keep_parts=True))
    assert result.skipped == 2 and result.runs == 4
    for path, stamp in stamps.items():  # finished runs were not redone
        assert path.stat().st_mtime_ns == stamp
    mw.experiment(cfg, tmp / "fresh")
    assert tables(tmp / "r") == tables(tmp / "fresh")


def test_changed_config_is_not_mixed_with_old_runs(setup, monkeypatch):
    tmp, cfg = setup
    with monkeypatch.context() as patch:
        Fault.at("raise:1", tmp / "fault").install(patch)
        with pytest.raises(RuntimeError):
            mw.experiment(cfg, tmp / "r")
    cfg.write_text(CONFIG.replace("factors = 4", "factors = 5"))
    with pytest.raises(InputError, match="report of another experiment"):
        mw.experiment(cfg, tmp / "r")
    with pytest.raises(InputError, match="different job"):  # forced: the work folder still refuses to mix
        mw.experiment(cfg, tmp / "r", force=True)


BAD = [
    # (replace this, with that, expected line (None: of the new text's first key), message part)
    ('family = "warp"', 'family = "wrap"', "family = \"wrap\"", "unknown model family 'wrap'"),
    ("factors = 4", "factors = 0", "factors = 0", "factors must be an integer >= 1"),
    ("factors = 4", "factor = 4", "factor = 4", "'factor' is not a parameter of the warp family"),
    ("epochs = 3", "epochs = 3\nrandom_state = 1", "random_state = 1", "set by the experiment"),
    ('path = "ratings.tsv"', 'path = "missing.tsv"', 'path = "missing.tsv"', "does not exist"),
    ("[models.mf]", "[models.pop]", "[models.pop]", "model 'pop' is defined twice (first at line"),
    ('metrics = ["precision", "ndcg", "novelty", "coverage"]', 'metrics = ["precision", "ndcg@10"]',
     'metrics = ["precision", "ndcg@10"]', "unknown metric 'ndcg@10'"),
    ('baseline = "pop"', 'baseline = "nobody"', 'baseline = "nobody"', "baseline 'nobody' is not a model"),
    ("repeats = 2", "repeats = 2\nshuffle = true", "shuffle = true", "unknown key 'shuffle' in [splits.random]"),
    ('kind = "random"', 'kind = "temporal"', "repeats = 2", "several splits would be copies"),
    ("test_fraction = 0.25", "test_fraction = 1.5", "test_fraction = 1.5", "test fraction must be at least 0"),
    ("min_value = 2", 'duplicates = "mean"', 'duplicates = "mean"', "duplicates"),
    ("k = [3, 5]", "k = [3, 0]", "k = [3, 0]", "k must be a list of distinct positive integers"),
    ("[evaluate]", '[evaluate]\ncorrection = "bonferroni"', 'correction = "bonferroni"', "unknown correction"),
    ("seed = 7", "seed = 7\nthreads = 2", "threads = 2", "unknown key 'threads'"),
    ("factors = 4", "factors = 4\nlearning_rate = -1.0", "learning_rate = -1.0", "learning_rate must be a number > 0"),
    ("epochs = 3", "epochs = 3\nalpha = 2.0", "alpha = 2.0", "only matter with a confidence"),
    ("[splits.random]", '[splits."../up"]', '[splits."../up"]', "split set name '../up' is not a plain folder"),
    ("[splits.random]", "[splits.work]", "[splits.work]", "split set name 'work'"),
    ('family = "popularity"', 'family = "popularity"\ntune = 4', "tune = 4", "the popularity family cannot be tuned"),
    ("epochs = 3", "epochs = 3\ntune = 0", "tune = 0", "tune must be an integer >= 1"),
    ("epochs = 3", "epochs = 3 3", "epochs = 3 3", "not valid TOML"),
    ("repeats = 2", 'repeats = "2"', 'repeats = "2"', "repeats must be an integer, got '2' (write it without quotes"),
    ('family = "warp"', 'famly = "warp"', 'famly = "warp"', "[models.mf] has no family: unknown key 'famly'"),
    ("[evaluate]", "[evalute]", "[evalute]", "unknown key 'evalute' in the experiment file"),
    ("factors = 4", 'factors = "4"', 'factors = "4"', "factors must be a number, got the text '4'"),
    ("epochs = 3", 'epochs = 3\nrefit = "false"', 'refit = "false"', "refit must be true or false"),
]


@pytest.mark.parametrize("old,new,line_text,message", BAD, ids=[b[3][:30] for b in BAD])
def test_bad_config_names_its_line(setup, old, new, line_text, message):
    tmp, cfg = setup
    text = CONFIG.replace(old, new, 1)
    assert text != CONFIG
    cfg.write_text(text)
    start = CONFIG[:CONFIG.index(old)].count("\n")  # the line the change begins on
    expected = text.splitlines().index(line_text, start) + 1
    with pytest.raises(InputError) as info:
        mw.experiment(cfg)
    err = info.value
    assert err.path == str(cfg) and err.line == expected, str(err)
    assert message in str(err)
    assert "\n" not in str(err)
    assert not (tmp / "report").exists()  # nothing ran, nothing written


def test_hybrid_and_missing_file(setup):
    tmp, cfg = setup
    cfg.write_text(CONFIG.replace('family = "warp"', 'family = "hybrid"'))
    with pytest.raises(InputError, match="feature files"):
        read_config(cfg)
    with pytest.raises(InputError, match="experiment file not found"):
        read_config(tmp / "nope.toml")


def test_line_of_finds_quoted_tables_and_keys():
    text = 'a = 1\n[models."my model"]\nfamily = "ease"\n  l2 = 5 # x\n[evaluate]\nk = 1\n'
    assert line_of(text, (), "a") == 1
    assert line_of(text, ("models", "my model")) == 2
    assert line_of(text, ("models", "my model"), "l2") == 4
    assert line_of(text, ("evaluate",), "k") == 6
    assert line_of(text, ("evaluate",), "baseline") == 5  # not in the file: its table


def test_cli_runs_and_errors_are_one_line(setup):
    tmp, cfg = setup
    runner = CliRunner()
    res = runner.invoke(main, ["experiment", str(cfg), "-o", str(tmp / "cli"), "-v"])
    assert res.exit_code == 0, res.output + res.stderr
    assert "# Experiment report" in res.stdout and "| precision@3 |" in res.stdout
    assert res.stderr.count("run ") >= 4 and "run 4/4: mf on random split-1" in res.stderr
    quiet = runner.invoke(main, ["experiment", str(cfg), "-o", str(tmp / "q"), "-q"])
    assert quiet.exit_code == 0 and quiet.stderr == ""
    cfg.write_text(CONFIG.replace("factors = 4", "factors = -2"))
    bad = runner.invoke(main, ["experiment", str(cfg)])
    assert bad.exit_code == 2
    line = CONFIG.splitlines().index("factors = 4") + 1
    assert bad.stderr == (f"Error: {cfg}:{line}: invalid parameter: factors must be an integer >= 1, got -2\n")
    missing = runner.invoke(main, ["experiment", str(tmp / "none.toml")])
    assert missing.exit_code == 2 and missing.stderr.count("\n") == 1 and "not found" in missing.stderr


def test_without_matplotlib_the_plot_is_skipped_with_a_note(setup, monkeypatch):
    tmp, cfg = setup
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)  # import matplotlib fails
    result = mw.experiment(cfg)
    assert not (tmp / "report" / "accuracy-vs-novelty.png").exists()
    assert any("matplotlib is not installed" in n for n in result.notes)
    assert (tmp / "report" / "results.md").exists()


def test_cli_dask_backend_gives_the_same_tables(setup):
    pytest.importorskip("distributed")
    tmp, cfg = setup
    mw.experiment(cfg, tmp / "threads")
    res = CliRunner().invoke(main, ["experiment", str(cfg), "-o", str(tmp / "dask"), "--backend", "dask",
                                    "--n-jobs", "2", "-q"])
    assert res.exit_code == 0, res.output + res.stderr
    assert tables(tmp / "threads") == tables(tmp / "dask")


def test_report_never_replaces_an_input(setup):
    tmp, cfg = setup
    (tmp / "ratings.tsv").rename(tmp / "results.csv")
    cfg.write_text(CONFIG.replace('path = "ratings.tsv"', 'path = "results.csv"').replace('"report"', '"."'))
    before = (tmp / "results.csv").read_bytes()
    with pytest.raises(InputError, match="results.csv"):
        mw.experiment(cfg)
    assert (tmp / "results.csv").read_bytes() == before


def test_tune_budget_picks_parameters_per_split(setup):
    tmp, cfg = setup
    cfg.write_text(CONFIG.replace('family = "warp"\nfactors = 4\nepochs = 3',
                                  'family = "ease"\ntune = 2').replace("repeats = 2", "repeats = 1"))
    result = mw.experiment(cfg)
    assert [t["model"] for t in result.tuned] == ["mf"]
    chosen = result.tuned[0]["params"]
    # the pick is a number or "auto" (the defaults' trial: EASE chooses l2 on its own hold-out)
    assert set(chosen) == {"l2"} and (chosen["l2"] == "auto" or chosen["l2"] > 0)
    saved = json.loads((tmp / "report" / "tuned.json").read_text())
    assert saved == [{"model": "mf", "params": chosen, "split": None, "split_set": "random"}]
    first = (tmp / "report" / "results.csv").read_bytes()
    mw.experiment(cfg, tmp / "again")
    assert (tmp / "again" / "results.csv").read_bytes() == first
    assert (tmp / "again" / "tuned.json").read_bytes() == (tmp / "report" / "tuned.json").read_bytes()


def test_global_time_split_with_a_toml_date(setup):
    tmp, cfg = setup  # timestamps run from 1000 to 1499 s after 1970-01-01T00:00:00Z
    cfg.write_text(CONFIG.replace('kind = "random"\nrepeats = 2\ntest_fraction = 0.25\nseed = 3',
                                  'kind = "global-time"\ncutoff = 1970-01-01T00:23:20Z'))
    result = mw.experiment(cfg, context=ExecutionContext("threads", keep_parts=True))
    assert result.studies["random"].splits == [] and result.runs == 2
    split = tmp / "report" / "work" / "splits" / "s0"
    train = np.loadtxt(split / "train.tsv", usecols=3)
    test = np.loadtxt(split / "test.tsv", usecols=3)
    assert train.max() <= 1400 < test.min()
    assert "cutoff 1970-01-01T00:23:20+00:00" in (tmp / "report" / "results.md").read_text()


DATA_FAULTS = [
    # (replace this, with that, the line the error names, message part): faults only the data shows
    ('kind = "random"\nrepeats = 2\ntest_fraction = 0.25\nseed = 3', 'kind = "global-time"\ncutoff = 2030-01-01',
     "cutoff = 2030-01-01", "not before the latest interaction"),
    ('kind = "random"\nrepeats = 2\ntest_fraction = 0.25\nseed = 3', 'kind = "global-time"\ncutoff = "01/06/2021"',
     'cutoff = "01/06/2021"', "is not an ISO 8601 date"),
    ("min_value = 2", 'min_value = 2\ncolumns = ["user", "item", "stars"]', 'columns = ["user", "item", "stars"]',
     "stars"),
]


@pytest.mark.parametrize("old,new,line_text,message", DATA_FAULTS, ids=["late-cutoff", "us-date", "bad-column"])
def test_data_faults_are_found_before_any_work_on_the_config_line(setup, old, new, line_text, message):
    tmp, cfg = setup
    ratings = tmp / "ratings.tsv"
    if "stars" in new:  # a file with a header, naming other columns
        ratings.write_text("user\titem\trating\ttime\n" + ratings.read_text())
    text = CONFIG.replace(old, new, 1)
    assert text != CONFIG
    cfg.write_text(text)
    with pytest.raises(InputError) as info:
        read_config(cfg)  # the check alone finds it: no work folder, no report folder
    err = info.value
    assert err.path == str(cfg) and err.line == text.splitlines().index(line_text) + 1, str(err)
    assert message in str(err) and "\n" not in str(err) and "--" not in str(err)
    with pytest.raises(InputError):
        mw.experiment(cfg)
    assert not (tmp / "report").exists()


def test_global_time_on_a_file_without_timestamps_names_the_kind_line(setup):
    tmp, cfg = setup
    rows = [line.rsplit("\t", 1)[0] for line in (tmp / "ratings.tsv").read_text().splitlines()]
    (tmp / "ratings.tsv").write_text("\n".join(rows) + "\n")
    text = CONFIG.replace('kind = "random"\nrepeats = 2\ntest_fraction = 0.25\nseed = 3',
                          'kind = "global-time"\ntest_fraction = 0.2')
    cfg.write_text(text)
    with pytest.raises(InputError) as info:
        mw.experiment(cfg)
    err = info.value
    assert err.line == text.splitlines().index('kind = "global-time"') + 1
    assert "needs timestamps" in str(err) and "ratings.tsv" in str(err) and "--columns" not in str(err)
    assert not (tmp / "report").exists()


def test_a_job_failing_before_any_run_finished_leaves_nothing_and_the_fixed_config_runs(setup, monkeypatch):
    tmp, cfg = setup
    with monkeypatch.context() as patch:
        Fault.at("raise:0", tmp / "fault").install(patch)  # the first run fails (one worker: before any other)
        with pytest.raises(RuntimeError, match="injected failure in part 0"):
            mw.experiment(cfg)
    assert not (tmp / "report").exists()  # no job.json, no split folders to block another config
    cfg.write_text(CONFIG.replace("factors = 4", "factors = 5"))
    result = mw.experiment(cfg)
    assert result.skipped == 0 and (tmp / "report" / "results.md").exists()


def test_a_failing_job_keeps_a_report_folder_it_did_not_make(setup, monkeypatch):
    tmp, cfg = setup
    (tmp / "report").mkdir()
    (tmp / "report" / "mine.txt").write_text("x")
    Fault.at("raise:0", tmp / "fault").install(monkeypatch)
    with pytest.raises(RuntimeError):
        mw.experiment(cfg, force=True)
    assert sorted(p.name for p in (tmp / "report").iterdir()) == ["mine.txt"]


ONE_SPLIT = CONFIG.replace("repeats = 2", "repeats = 1")


def _snapshot(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_folder_holding_other_files_is_refused_before_any_work(setup):
    """output = "." beside the user's own results.md and experiment.toml: refused, nothing
    changed; --force writes the report there and leaves the user's other files alone."""
    tmp, cfg = setup
    cfg.write_text(ONE_SPLIT)
    mine = tmp / "mine"
    mine.mkdir()
    (mine / "results.md").write_text("my own notes\n")
    (mine / "experiment.toml").write_text("# another tool's file\n")
    (mine / "notes.txt").write_text("keep me\n")
    before = _snapshot(mine)
    with pytest.raises(InputError, match="holds files mrec-warp did not write") as info:
        mw.experiment(cfg, mine)
    assert "--force" in str(info.value) and "experiment.toml" in str(info.value)
    assert _snapshot(mine) == before
    res = CliRunner().invoke(main, ["experiment", str(cfg), "-o", str(mine), "-q"])
    assert res.exit_code == 2 and "did not write" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert _snapshot(mine) == before
    res = CliRunner().invoke(main, ["experiment", str(cfg), "-o", str(mine), "-q", "--force"])
    assert res.exit_code == 0, res.stderr
    assert (mine / "notes.txt").read_text() == "keep me\n"
    assert (mine / "experiment.toml").read_bytes() == cfg.read_bytes()
    mw.experiment(cfg, mine)  # now the folder is this experiment's: a rerun needs no --force


def test_another_experiments_report_is_refused_and_force_replaces_it_whole(setup):
    tmp, cfg = setup
    cfg.write_text(ONE_SPLIT)
    out = tmp / "out"
    mw.experiment(cfg, out)
    first = _snapshot(out)
    assert (out / "random" / "report.md").is_file()
    record = json.loads((out / ".mrec-warp-report.json").read_text())
    assert "random/report.md" in record["files"] and "results.md" in record["files"]
    other = ONE_SPLIT.replace("[splits.random]", "[splits.holdout]")
    cfg.write_text(other)
    with pytest.raises(InputError, match="report of another experiment") as info:
        mw.experiment(cfg, out)
    assert "--force" in str(info.value)
    assert _snapshot(out) == first
    cfg.write_text("# the same experiment, other comments\n" + ONE_SPLIT)
    mw.experiment(cfg, out)  # comments do not make another experiment
    cfg.write_text(other)
    mw.experiment(cfg, out, force=True)
    assert not (out / "random").exists(), "the first experiment's split-set reports are gone"
    assert (out / "holdout" / "report.md").is_file()
    assert "holdout" in (out / "results.md").read_text() and "random" not in (out / "results.csv").read_text()
    record = json.loads((out / ".mrec-warp-report.json").read_text())
    assert "holdout/report.md" in record["files"] and "random/report.md" not in record["files"]


def test_runs_csv_and_results_show_each_runs_epochs(setup):
    # an early stop at epoch 2 makes WARP close to popularity: the reader must see it
    tmp, cfg = setup
    cfg.write_text(CONFIG.replace("epochs = 3", "max_epochs = 6"))
    result = mw.experiment(cfg)
    rows = list(csv.DictReader(open(tmp / "report" / "runs.csv")))
    assert [(r["model"], r["split"]) for r in rows] == [("pop", "split-0"), ("mf", "split-0"),
                                                         ("pop", "split-1"), ("mf", "split-1")]
    for r in rows:
        if r["model"] == "pop":
            assert r["best_epoch"] == r["epochs_trained"] == r["max_epochs"] == ""
        else:
            assert 1 <= int(r["best_epoch"]) <= int(r["epochs_trained"]) <= 6 and r["max_epochs"] == "6"
            assert int(r["users"]) == 40
    mf = [r for r in rows if r["model"] == "mf"]
    best = sorted(int(r["best_epoch"]) for r in mf)
    span = str(best[0]) if best[0] == best[-1] else f"{best[0]}-{best[-1]}"
    assert f"early stopping kept epoch {span} of" in (tmp / "report" / "results.md").read_text()
    assert [r["best_epoch"] for r in result.run_rows if r["model"] == "mf"] == [int(r["best_epoch"]) for r in mf]
    mw.experiment(cfg, tmp / "again")  # epochs are seeded: the same bytes
    assert (tmp / "again" / "runs.csv").read_bytes() == (tmp / "report" / "runs.csv").read_bytes()


def test_fixed_epochs_are_listed_without_early_stopping_words(setup):
    tmp, cfg = setup
    mw.experiment(cfg)
    rows = [r for r in csv.DictReader(open(tmp / "report" / "runs.csv")) if r["model"] == "mf"]
    assert {(r["best_epoch"], r["epochs_trained"], r["max_epochs"]) for r in rows} == {("3", "3", "")}
    assert "early stopping" not in (tmp / "report" / "results.md").read_text()


def test_results_say_what_a_star_means_and_that_only_the_baseline_is_compared(setup):
    tmp, cfg = setup
    mw.experiment(cfg)
    text = (tmp / "report" / "results.md").read_text()
    assert "A star says the difference is consistent across splits, not that it is large" in text
    assert "Coverage is one number per split: tested over splits" in text
    assert "Only differences to the baseline (pop) are tested" in text and "the baseline key of [evaluate]" in text
    cfg.write_text(CONFIG.replace("repeats = 2", "repeats = 1"))
    mw.experiment(cfg, tmp / "one")
    text = (tmp / "one" / "results.md").read_text()
    assert "consistent across users, not that it is large" in text and "Coverage is one number per split: shown, not tested" in text


def test_a_quoted_number_is_a_type_fault_without_the_range_hint(setup):
    tmp, cfg = setup
    cfg.write_text(CONFIG.replace('family = "warp"\nfactors = 4\nepochs = 3', 'family = "ease"\nl2 = "100"'))
    with pytest.raises(InputError) as info:
        read_config(cfg)
    text = str(info.value)
    assert "l2 must be a number, got the text '100'" in text and "without quotes" in text
    assert "singular" not in text and "> 0" not in text


def test_top_level_seed_seeds_splits_without_their_own(setup):
    tmp, cfg = setup
    cfg.write_text(CONFIG.replace("seed = 3\n", ""))
    assert [s.seed for s in read_config(cfg).splits] == [7]
    cfg.write_text(CONFIG.replace("seed = 3\n", "").replace("seed = 7\n", ""))
    assert [s.seed for s in read_config(cfg).splits] == [42]
    cfg.write_text(CONFIG)
    assert [s.seed for s in read_config(cfg).splits] == [3]


def test_reproduce_json_paths_are_relative_to_the_config_file(setup, monkeypatch):
    tmp, cfg = setup
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    mw.experiment(cfg)
    repro = json.loads((tmp / "report" / "reproduce.json").read_text())
    assert repro["config"]["file"] == "exp.toml" and repro["data"]["file"] == "ratings.tsv"
    assert repro["data"]["relative_to"] == "the config file's folder"


def test_one_split_report_says_the_split_not_each_split(setup):
    tmp, cfg = setup
    cfg.write_text(CONFIG.replace("repeats = 2", "repeats = 1"))
    mw.experiment(cfg)
    text = (tmp / "report" / "random" / "report.md").read_text()
    assert "train.tsv of the split" in text and "of each split" not in text


def test_plot_labels_of_close_points_are_offset():
    from mrec_warp.experiments.report import _label_offsets
    placed = _label_offsets([("pop", 0.10, 0.200), ("warp", 0.101, 0.2001), ("ease", 0.5, 0.4)], None)
    offsets = {label: dy for label, _, _, dy in placed}
    assert abs(offsets["pop"] - offsets["warp"]) >= 10 and offsets["ease"] == 4.0


def test_item_popularity_groups_say_list_metrics_are_of_whole_lists():
    # the head table's coverage is of the whole lists of users with a head test item, over the
    # whole catalogue -- not coverage of head items: the report must say so
    import pandas as pd
    from mrec_warp.evaluation.formatting import format_markdown
    from mrec_warp.stages.evaluate import evaluate
    train = pd.DataFrame([(f"u{u}", "hit") for u in range(6)] + [("u0", "t1"), ("u1", "t2"), ("u2", "t3")],
                         columns=["user", "item"])
    test = pd.DataFrame([("u3", "t1"), ("u4", "t2"), ("u5", "hit2")], columns=["user", "item"])
    recs = pd.DataFrame([("u3", "t1", 1), ("u4", "t3", 1), ("u5", "t3", 1)], columns=["user", "item", "rank"])
    study = evaluate(train, test, [recs], ks=(1,), groups="item-popularity")
    text = format_markdown(study.to_dict())
    assert "coverage, Gini, novelty and popularity describe the whole lists of the group's users over the whole " \
           "catalogue (not the group's items only)" in text


# -- [data] fetch: the example runs on a plain clone (issue 33.6) -------------------------------
def _movielens_zip(path: Path) -> str:
    """A stand-in for ml-100k.zip (its layout, data of write_ratings); returns its MD5."""
    import hashlib
    import zipfile

    write_ratings(path.parent / "u.data")
    with zipfile.ZipFile(path, "w") as zf:
        zf.write(path.parent / "u.data", "ml-100k/u.data")
    return hashlib.md5(path.read_bytes()).hexdigest()


@pytest.fixture
def offline_fetch(tmp_path, monkeypatch):
    """The cache in a folder of the test's and the download replaced (no network in tests):
    ``calls`` lists the URLs asked for; ``fail`` set to an error makes the download raise it."""
    import dataclasses
    import shutil

    from mrec_warp.data import datasets

    archive = tmp_path / "mirror" / "ml-100k.zip"
    archive.parent.mkdir()
    md5 = _movielens_zip(archive)
    monkeypatch.setitem(datasets.DATASETS, "movielens-100k",
                        dataclasses.replace(datasets.DATASETS["movielens-100k"], md5=md5))
    monkeypatch.setenv(datasets.ENV_VAR, str(tmp_path / "cache"))
    state = {"calls": [], "fail": None}

    def download(url, path, progress, max_bytes):
        state["calls"].append(url)
        if state["fail"] is not None:
            raise state["fail"]
        shutil.copy(archive, path)
        return md5

    monkeypatch.setattr(datasets, "_download", download)
    return state


FETCHED = CONFIG.replace('path = "ratings.tsv"\n', 'path = "not-here/u.data"\nfetch = "movielens-100k"\n')


def test_data_fetch_is_used_when_the_path_is_absent_and_downloaded_once(tmp_path, offline_fetch):
    cfg = tmp_path / "exp.toml"
    cfg.write_text(FETCHED)
    first = read_config(cfg)
    cached = tmp_path / "cache" / "ml-100k" / "u.data"
    assert first.data["path"] == str(cached) and cached.is_file()
    assert first.data["format"] == "movielens"  # the data set's format, "auto" not guessed
    assert len(offline_fetch["calls"]) == 1 and offline_fetch["calls"][0].endswith("/ml-100k.zip")
    # later runs read the cache; a path that is present wins over fetch
    assert read_config(cfg).data["path"] == str(cached) and len(offline_fetch["calls"]) == 1
    write_ratings(tmp_path / "here.tsv")
    cfg.write_text(FETCHED.replace("not-here/u.data", "here.tsv"))
    assert read_config(cfg).data["path"] == str(tmp_path / "here.tsv") and len(offline_fetch["calls"]) == 1
    # fetch alone, without a path
    cfg.write_text(FETCHED.replace('path = "not-here/u.data"\n', ""))
    assert read_config(cfg).data["path"] == str(cached)
    result = CliRunner().invoke(main, ["experiment", str(cfg), "-o", str(tmp_path / "report"), "-q"])
    assert result.exit_code == 0, result.output
    reproduce = json.loads((tmp_path / "report" / "reproduce.json").read_text())
    assert reproduce["data"]["fetch"] == "movielens-100k" and reproduce["data"]["file"] == str(cached)
    assert "data `movielens-100k` (fetched into the cache)" in (tmp_path / "report" / "results.md").read_text()


def test_data_fetch_that_cannot_download_says_how_to_get_the_data_in_one_line(tmp_path, offline_fetch):
    from mrec_warp.data.datasets import DownloadError

    offline_fetch["fail"] = DownloadError("cannot download: [Errno 111] Connection refused",
                                          path="https://files.grouplens.org/datasets/movielens/ml-100k.zip")
    cfg = tmp_path / "exp.toml"
    cfg.write_text(FETCHED)
    result = CliRunner().invoke(main, ["experiment", str(cfg), "-o", str(tmp_path / "report")])
    assert result.exit_code == 2 and result.stdout == ""
    line = FETCHED.splitlines().index('fetch = "movielens-100k"') + 1
    missing = tmp_path / "not-here" / "u.data"
    assert result.stderr == (
        f"Error: {cfg}:{line}: data file '{missing}' does not exist, and movielens-100k could not be downloaded "
        "(cannot download: [Errno 111] Connection refused) (run 'mrec-warp fetch movielens-100k' where there is "
        f"a network, which unpacks it into {tmp_path / 'cache' / 'ml-100k'}; or set path to a copy of "
        "ml-100k/u.data)\n")
    assert not (tmp_path / "report").exists() and not (tmp_path / "cache" / "ml-100k").exists()
    cfg.write_text(FETCHED.replace('"movielens-100k"', '"netflix"'))
    with pytest.raises(InputError, match=r"exp.toml:\d+: unknown data set 'netflix'.*movielens-100k"):
        read_config(cfg)
    cfg.write_text(FETCHED.replace('path = "not-here/u.data"\nfetch = "movielens-100k"\n', ""))
    with pytest.raises(InputError, match=r"\[data\] has no path.*fetch = \"movielens-100k\""):
        read_config(cfg)


def test_the_shipped_example_reads_shared_data_when_present_and_fetches_on_a_plain_clone(tmp_path, offline_fetch):
    shipped = Path(__file__).resolve().parents[1] / "data" / "experiment-ml100k.toml"
    shared = shipped.parent / "../../shared/data/ml-100k/u.data"
    if shared.is_file():  # this layout: the shared copy, nothing downloaded
        assert read_config(shipped).data["path"] == os.path.normpath(shared) and not offline_fetch["calls"]
    clone = tmp_path / "clone" / "data"
    clone.mkdir(parents=True)
    (clone / shipped.name).write_bytes(shipped.read_bytes())
    assert read_config(clone / shipped.name).data["path"] == str(tmp_path / "cache" / "ml-100k" / "u.data")
    assert len(offline_fetch["calls"]) == 1


@pytest.mark.parametrize("link", ["results.md", "random"])
def test_a_symbolic_link_in_the_report_folder_is_refused_never_written_through(setup, link):
    """A results.md, or a split-set folder, that links outside the report folder: refused in one
    line (even with force), before any work, and the file outside stays as it was."""
    tmp, cfg = setup
    cfg.write_text(ONE_SPLIT)
    out = tmp / "out"
    mw.experiment(cfg, out)
    outside = tmp / "outside"
    outside.mkdir()
    (outside / "results.md").write_text("mine\n")
    (outside / "report.md").write_text("mine\n")
    target = out / link
    if target.is_dir():
        import shutil

        shutil.rmtree(target)
    else:
        target.unlink()
    target.symlink_to(outside / "results.md" if link == "results.md" else outside)
    for force in (False, True):
        with pytest.raises(InputError, match=f"symbolic link, {link} ->"):
            mw.experiment(cfg, out, force=force)
    assert (outside / "results.md").read_text() == "mine\n" and (outside / "report.md").read_text() == "mine\n"
    assert sorted(p.name for p in outside.iterdir()) == ["report.md", "results.md"]
