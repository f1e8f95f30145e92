"""``mrec-warp evaluate``: exit codes, one-line messages, and no output left by a failure."""
from __future__ import annotations

import functools
import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import List

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from mrec_warp.cli.evaluate import evaluate

from .conftest import run as run_cli

REPO = Path(__file__).resolve().parents[1]


def write_split(d: Path, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    rows = [(f"u{u}", f"i{i}") for u in range(30) for i in range(25) if rng.random() < 0.2]
    df = pd.DataFrame(rows, columns=["user", "item"])
    is_test = rng.random(len(df)) < 0.25
    d.mkdir(parents=True, exist_ok=True)
    df[~is_test].to_csv(d / "train.tsv", sep="\t", header=False, index=False)
    df[is_test].to_csv(d / "test.tsv", sep="\t", header=False, index=False)
    items = sorted(set(df["item"]))
    recs = []
    for u in sorted(set(df["user"])):
        for r, i in enumerate(rng.permutation(items)[:10]):
            recs.append((u, i, round(1.0 - r / 10, 2), r + 1))
    pd.DataFrame(recs).to_csv(d / "a.tsv", sep="\t", header=False, index=False)
    reversed_ranks = [(u, i, -score, 11 - r) for u, i, score, r in recs]  # the same lists upside down
    pd.DataFrame(reversed_ranks).to_csv(d / "b.tsv", sep="\t", header=False, index=False)


@pytest.fixture
def files(tmp_path):
    write_split(tmp_path)
    return tmp_path


run = functools.partial(run_cli, command=evaluate)  # the evaluate command alone


def base_args(d: Path):
    return ["--train", d / "train.tsv", "--test", d / "test.tsv", "--recs", d / "a.tsv"]


def outputs(d: Path):
    return ["--report", d / "out" / "r.md", "--json", d / "out" / "r.json",
            "--per-user", d / "out" / "u.csv"]


def assert_no_outputs(d: Path):
    out = d / "out"
    assert not out.exists() or list(out.iterdir()) == []
    assert not list(d.glob("**/.*")), "no temporary files left behind"


def assert_one_line_error(result, *fragments):
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert err.startswith("Error: ") and "\n" not in err, err
    for fragment in fragments:
        assert fragment in err, err
    assert "Traceback" not in result.output


# ----------------------------------------------------------------------------------------
# success
# ----------------------------------------------------------------------------------------
def test_evaluates_two_files_and_writes_every_report(files):
    pytest.importorskip("matplotlib")
    r = run(*base_args(files), "--recs", files / "b.tsv", "--name", "first", "--name", "second",
            "-k", "3,10", *outputs(files), "--plot", files / "out" / "c.png")
    assert r.exit_code == 0, r.output
    assert "precision@3" in r.stdout and "Δ second" in r.stdout and "±" in r.stdout
    data = json.loads((files / "out" / "r.json").read_text())
    assert [run["name"] for run in data["runs"]] == ["first", "second"]
    assert data["ks"] == [3, 10]
    assert (files / "out" / "r.md").read_text().startswith("# Evaluation report")
    assert len(pd.read_csv(files / "out" / "u.csv")) == 2 * data["n_users"]
    assert (files / "out" / "c.png").stat().st_size > 1000


def test_quiet_keeps_the_table_and_drops_the_logs(files):
    """The table is the command's result (shown with --quiet, alone on standard output);
    notes and 'wrote' lines are logs on standard error, silenced by --quiet."""
    loud = run(*base_args(files), "--json", files / "r.json")
    quiet = run(*base_args(files), "--quiet", "--json", files / "r.json")
    assert loud.exit_code == 0 and quiet.exit_code == 0
    assert "precision@" in quiet.stdout and quiet.stdout == loud.stdout
    assert "note:" not in loud.stdout and "wrote" not in loud.stdout
    assert f"wrote {files / 'r.json'}" in loud.stderr and quiet.stderr == ""
    assert (files / "r.json").exists()


def test_several_splits_with_placeholder(tmp_path):
    for s in range(3):
        write_split(tmp_path / f"cv{s}", seed=s)
    p = tmp_path / "cv{split}"
    r = run("--splits", "0,1,2", "--train", p / "train.tsv", "--test", p / "test.tsv",
            "--recs", p / "a.tsv", "--recs", p / "b.tsv", "--json", tmp_path / "r.json")
    assert r.exit_code == 0, r.output
    assert "3 splits" in r.stdout and "standard error" in r.stdout
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["uncertainty"] == "se" and len(data["runs"][1]["per_split"]) == 3


def test_baseline_picks_the_run_every_other_is_compared_with(files):
    out = files / "r.json"
    r = run(*base_args(files), "--recs", files / "b.tsv", "--name", "first", "--name", "second",
            "--baseline", "second", "--json", out)
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    assert data["baseline"] == "second" and data["runs"][1]["difference_to_baseline"] is None
    assert "Δ first" in r.stdout and "Δ: paired difference to second" in r.stdout
    assert data["comparison"]["verdicts"][0].startswith("first vs second")


def test_unknown_baseline_is_one_line_naming_the_runs(files):
    r = run_cli("evaluate", *base_args(files), "--recs", files / "b.tsv", "--name", "first", "--name", "second",
                "--baseline", "third", *outputs(files))  # through mrec-warp: its usage errors are one line
    assert_one_line_error(r, "--baseline third names none of the --recs (their names: first, second)")
    assert_no_outputs(files)


def write_runs(d: Path, n_runs: int) -> List[Path]:
    """``write_split``'s data and ``n_runs`` recommendation files of random lists."""
    write_split(d)
    train = pd.read_csv(d / "train.tsv", sep="\t", header=None, names=["user", "item"])
    items, users = sorted(set(train["item"])), sorted(set(train["user"]))
    paths = []
    for r in range(n_runs):
        rng = np.random.default_rng(r)
        rows = [(u, i, 1.0 - k / 10, k + 1) for u in users for k, i in enumerate(rng.permutation(items)[:10])]
        paths.append(d / f"run{r}.tsv")
        pd.DataFrame(rows).to_csv(paths[-1], sep="\t", header=False, index=False)
    return paths


@pytest.mark.parametrize("columns", ["100", "72"])
def test_twelve_runs_fit_the_terminal(tmp_path, columns):
    recs = [a for p in write_runs(tmp_path, 12) for a in ("--recs", p)]
    r = CliRunner().invoke(evaluate, [str(a) for a in ["--train", tmp_path / "train.tsv", "--test",
                                                      tmp_path / "test.tsv", *recs]], env={"COLUMNS": columns})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert max(len(line) for line in lines) <= int(columns)
    assert sum(line.startswith("run ") for line in lines) >= 2  # runs as rows, metrics in blocks
    rows = sum(re.match(r"run11 +\d", line) is not None for line in lines)  # one row in every block
    assert rows == sum(line.startswith("run ") for line in lines)


def test_long_table_loads_in_pandas_as_the_json_has_it(tmp_path):
    recs = [a for p in write_runs(tmp_path, 3) for a in ("--recs", p)]
    r = run("--train", tmp_path / "train.tsv", "--test", tmp_path / "test.tsv", *recs, "--baseline", "run1",
            "--table", "long", "--json", tmp_path / "r.json", "-k", "5")
    assert r.exit_code == 0, r.output
    frame = pd.read_csv(io.StringIO(r.stdout), sep="\t")
    data = json.loads((tmp_path / "r.json").read_text())
    expected = pd.DataFrame(data["table"])
    assert list(frame.columns) == list(expected.columns) and len(frame) == 3 * len(data["metrics"])
    pd.testing.assert_frame_equal(frame[["run", "metric", "baseline"]], expected[["run", "metric", "baseline"]])
    for column in ("mean", "plus_minus", "difference", "p", "p_adjusted"):
        assert np.array_equal(frame[column].to_numpy(float), expected[column].to_numpy(float), equal_nan=True)
    assert set(frame["baseline"]) == {"run1"} and frame[frame["run"] == "run1"]["difference"].isna().all()


def test_several_splits_with_groups_and_files(tmp_path):
    for s in range(2):
        write_split(tmp_path / f"cv{s}", seed=s)
    p = tmp_path / "cv{split}"
    r = run("--splits", "0,1", "--train", p / "train.tsv", "--test", p / "test.tsv", "--recs", p / "a.tsv",
            "--recs", p / "b.tsv", "--groups", "user-activity", "--json", tmp_path / "r.json")
    assert r.exit_code == 0, r.output
    data = json.loads((tmp_path / "r.json").read_text(), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert [g["name"] for g in data["groups"]["groups"]] == ["light", "medium", "heavy"]


def test_registered_in_the_command_group():
    proc = subprocess.run([sys.executable, "-m", "mrec_warp", "evaluate", "--help"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "Examples:" in proc.stdout and "--splits" in proc.stdout


# ----------------------------------------------------------------------------------------
# bad input: exit status 2, one line, no output file
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", ["0", "5,0", "-3", "abc", ""])
def test_bad_k_is_a_usage_error(files, k):
    r = run(*base_args(files), "-k", k, *outputs(files))
    assert r.exit_code == 2
    assert "Invalid value for -k" in r.stderr
    assert_no_outputs(files)


@pytest.mark.parametrize("kind, line, bad", [("user", "u_nobody\ti1\t0.5\t1", "'u_nobody'"),
                                            ("item", "u1\ti_nothing\t0.5\t1", "'i_nothing'")])
def test_unknown_id_names_file_line_and_id(files, kind, line, bad):
    recs = files / "a.tsv"
    lines = recs.read_text().splitlines()
    lines.insert(2, line)  # becomes line 3
    recs.write_text("\n".join(lines) + "\n")
    r = run(*base_args(files), *outputs(files))
    assert_one_line_error(r, f"{recs}:3:", f"{kind} {bad} is in neither the training nor the test data")
    assert_no_outputs(files)


@pytest.mark.parametrize("which, what", [("train.tsv", "training file"), ("test.tsv", "test file"),
                                         ("a.tsv", "recommendations file")])
def test_missing_file(files, which, what):
    (files / which).unlink()
    r = run(*base_args(files), *outputs(files))
    assert_one_line_error(r, f"{files / which}: {what} does not exist")
    assert_no_outputs(files)


@pytest.mark.parametrize("which", ["train.tsv", "test.tsv", "a.tsv"])
def test_empty_file(files, which):
    (files / which).write_text("")
    r = run(*base_args(files), *outputs(files))
    assert_one_line_error(r, f"{files / which}:", "is empty")
    assert_no_outputs(files)


def test_bad_rank_names_the_line(files):
    recs = files / "a.tsv"
    lines = recs.read_text().splitlines()
    lines[4] = lines[4].rsplit("\t", 1)[0] + "\tfirst"
    recs.write_text("\n".join(lines) + "\n")
    r = run(*base_args(files), *outputs(files))
    assert_one_line_error(r, f"{recs}:5: rank 'first' is not a number")
    assert_no_outputs(files)


def test_plot_without_matplotlib_fails_before_writing_anything(files, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    r = run(*base_args(files), *outputs(files), "--plot", files / "out" / "c.png")
    assert_one_line_error(r, "plotting needs matplotlib", "pip install mrec-warp[plot]")
    assert_no_outputs(files)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--name", "only-one", "--recs", "{d}/a.tsv"], "one name per --recs"),
        (["--splits", "0,1"], "needs {split}"),
        (["--json", "{d}/a.tsv"], "would overwrite an input file"),
        (["--json", "{d}/x.out", "--report", "{d}/x.out"], "both write"),
        (["--recs", "{d}/a.tsv", "--name", "x", "--name", "x"], "must be distinct"),
    ],
)
def test_inconsistent_options_are_usage_errors(files, extra, message):
    before = sorted(p.name for p in files.iterdir())
    r = run(*base_args(files), *[e.replace("{d}", str(files)) for e in extra])
    assert r.exit_code == 2, r.output
    assert message in r.stderr
    assert sorted(p.name for p in files.iterdir()) == before


def test_placeholder_without_splits_is_a_usage_error(files):
    r = run("--train", files / "{split}" / "train.tsv", "--test", files / "test.tsv", "--recs", files / "a.tsv")
    assert r.exit_code == 2 and "--splits" in r.stderr


def test_missing_split_file_names_the_resolved_path(tmp_path):
    write_split(tmp_path / "cv0")
    p = tmp_path / "cv{split}"
    r = run("--splits", "0,1", "--train", p / "train.tsv", "--test", p / "test.tsv", "--recs", p / "a.tsv")
    assert_one_line_error(r, f"{tmp_path / 'cv1' / 'train.tsv'}: training file does not exist")


def test_test_file_equal_to_train_is_an_error(files):
    r = run("--train", files / "train.tsv", "--test", files / "train.tsv", "--recs", files / "a.tsv",
            *outputs(files))
    assert_one_line_error(r, f"{files / 'train.tsv'}: no test interaction is left")
    assert_no_outputs(files)
