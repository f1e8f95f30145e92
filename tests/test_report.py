"""Studies and reports: the numbers agree with the metrics, files exist, parse, and are atomic."""
from __future__ import annotations

import json
import math
import re
import sys

import numpy as np
import pandas as pd
import pytest

from mrec_warp.errors import InputError, ParameterError
from mrec_warp.evaluation import report as report_mod
from mrec_warp.evaluation.formatting import (
    TIDY_COLUMNS, format_json, format_long, format_markdown, format_table, tidy_rows,
)
from mrec_warp.evaluation.metrics import evaluate_recommendations
from mrec_warp.evaluation.plot import check_plot_available
from mrec_warp.evaluation.report import per_user_table, write_reports
from mrec_warp.stages.evaluate import default_names, evaluate_here as evaluate
from mrec_warp.evaluation.statistics import paired_difference


def synthetic_split(seed, n_users=60, n_items=40):
    rng = np.random.default_rng(seed)
    rows = [(f"u{u}", f"i{i}") for u in range(n_users) for i in range(n_items) if rng.random() < 0.15]
    df = pd.DataFrame(rows, columns=["user", "item"])
    is_test = rng.random(len(df)) < 0.25
    return df[~is_test], df[is_test]


def ranked_recs(train, scores, k=10):
    """Top-k unseen items per user by a per-item score (a popularity-like recommender)."""
    items = sorted(set(train["item"]), key=lambda i: -scores[i])
    seen = train.groupby("user")["item"].agg(set).to_dict()
    rows = []
    for u in sorted(set(train["user"])):
        ranked = [i for i in items if i not in seen.get(u, set())][:k]
        rows += [(u, i, scores[i], r + 1) for r, i in enumerate(ranked)]
    return pd.DataFrame(rows, columns=["user", "item", "score", "rank"])


@pytest.fixture
def split_files(tmp_path):
    """Three splits on disk, each with a popularity and a random recommender."""
    for s in range(3):
        train, test = synthetic_split(s)
        d = tmp_path / f"split-{s}"
        d.mkdir()
        train.to_csv(d / "train.tsv", sep="\t", header=False, index=False)
        test.to_csv(d / "test.tsv", sep="\t", header=False, index=False)
        counts = train["item"].value_counts().to_dict()
        rng = np.random.default_rng(100 + s)
        ranked_recs(train, counts).to_csv(d / "pop.tsv", sep="\t", header=False, index=False)
        random_scores = {i: float(rng.random()) for i in counts}
        ranked_recs(train, random_scores).to_csv(d / "rand.tsv", sep="\t", header=False, index=False)
    return tmp_path


def test_single_split_study_matches_direct_evaluation(split_files):
    d = split_files / "split-0"
    study = evaluate(d / "train.tsv", d / "test.tsv", [d / "pop.tsv", d / "rand.tsv"], ks=(5, 10))
    assert study.names == ["pop", "rand"]
    data = study.to_dict()
    train = pd.read_csv(d / "train.tsv", sep="\t", header=None, names=["user", "item"], dtype=str)
    test = pd.read_csv(d / "test.tsv", sep="\t", header=None, names=["user", "item"], dtype=str)
    recs = [pd.read_csv(d / f, sep="\t", header=None, names=["user", "item", "score", "rank"], dtype={0: str, 1: str})
            for f in ("pop.tsv", "rand.tsv")]
    direct = [evaluate_recommendations(train, test, r, ks=(5, 10)) for r in recs]
    diff = paired_difference(direct[0], direct[1])
    for m in data["metrics"]:
        assert data["runs"][0]["summary"][m]["mean"] == pytest.approx(direct[0].mean(m))
        assert data["runs"][1]["difference_to_baseline"][m]["mean"] == pytest.approx(diff.loc[m, "mean"])
        if not m.startswith("coverage"):
            assert data["runs"][1]["summary"][m]["plus_minus"] == pytest.approx(direct[1].summary.loc[m, "ci95"])
            assert data["runs"][1]["difference_to_baseline"][m]["plus_minus"] == pytest.approx(diff.loc[m, "ci95"])
    assert data["runs"][0]["difference_to_baseline"] is None
    assert data["uncertainty"] == "ci95" and data["n_users"] == direct[0].info["n_users_evaluated"]


def test_several_splits_mean_and_standard_error(split_files):
    p = str(split_files / "split-{split}")
    study = evaluate(f"{p}/train.tsv", f"{p}/test.tsv", [f"{p}/pop.tsv", f"{p}/rand.tsv"], ks=(10,),
                     splits=["0", "1", "2"])
    data = study.to_dict()
    assert data["splits"] == ["0", "1", "2"] and data["uncertainty"] == "se"
    per_split = [study.evaluations[s][0].mean("ndcg@10") for s in range(3)]
    head = data["runs"][0]["summary"]["ndcg@10"]
    assert head["mean"] == pytest.approx(np.mean(per_split))
    assert head["plus_minus"] == pytest.approx(np.std(per_split, ddof=1) / math.sqrt(3))
    diffs = [study.evaluations[s][1].mean("mrr") - study.evaluations[s][0].mean("mrr") for s in range(3)]
    dh = data["runs"][1]["difference_to_baseline"]["mrr"]
    assert dh["mean"] == pytest.approx(np.mean(diffs))
    assert dh["plus_minus"] == pytest.approx(np.std(diffs, ddof=1) / math.sqrt(3))
    assert "standard error" in format_table(data)


def test_splits_need_placeholders(split_files):
    d = split_files / "split-0"
    with pytest.raises(ValueError, match="placeholder"):
        evaluate(d / "train.tsv", d / "test.tsv", [d / "pop.tsv"], splits=["0", "1"])


def test_table_and_markdown_show_every_metric(split_files):
    d = split_files / "split-0"
    data = evaluate(d / "train.tsv", d / "test.tsv", [d / "pop.tsv", d / "rand.tsv"], ks=(5, 10)).to_dict()
    table = format_table(data)
    for m in data["metrics"]:
        assert m in table
    mean = data["runs"][0]["summary"]["precision@5"]
    assert f"{mean['mean']:.3f} ± {mean['plus_minus']:.3f}" in table
    assert "Δ rand" in table
    md = format_markdown(data)
    assert "| metric | pop | rand | Δ rand |" in md
    assert "## Protocol" in md and "1.96" in md


def test_json_is_strict_and_complete(split_files):
    d = split_files / "split-0"
    data = evaluate(d / "train.tsv", d / "test.tsv", [d / "pop.tsv"], ks=(5,)).to_dict()

    def no_nan(token):
        raise AssertionError(f"non-standard JSON constant {token}")

    parsed = json.loads(format_json(data), parse_constant=no_nan)
    assert parsed["protocol"]["ks"] == [5]
    assert parsed["runs"][0]["per_split"][0]["metrics"]["coverage@5"]["ci95"] is None
    assert parsed["runs"][0]["per_split"][0]["metrics"]["recall@5"]["n"] == parsed["n_users"]
    assert "precision@k" in parsed["protocol"]


def test_write_reports_outputs_exist_and_parse(split_files, tmp_path):
    pytest.importorskip("matplotlib")
    p = str(split_files / "split-{split}")
    study = evaluate(f"{p}/train.tsv", f"{p}/test.tsv", [f"{p}/pop.tsv", f"{p}/rand.tsv"], ks=(5, 10),
                     splits=["0", "1"])
    out = tmp_path / "out"
    written = write_reports(study, out / "r.md", out / "r.json", out / "u.csv", out / "c.png")
    assert len(written) == 4
    assert (out / "r.md").read_text().startswith("# Evaluation report")
    json.loads((out / "r.json").read_text())
    users = pd.read_csv(out / "u.csv", dtype={"user": str, "split": str})
    assert list(users.columns[:5]) == ["split", "recs", "user", "n_test", "n_recs"]
    expected = sum(len(ev.per_user) for row in study.evaluations for ev in row)
    assert len(users) == expected
    assert (out / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(f.name for f in out.iterdir()) == ["c.png", "r.json", "r.md", "u.csv"]


def test_per_user_table_has_no_split_column_for_one_split(split_files):
    d = split_files / "split-0"
    study = evaluate(d / "train.tsv", d / "test.tsv", [d / "pop.tsv"], ks=(5,))
    assert list(per_user_table(study).columns[:2]) == ["recs", "user"]


def test_a_failure_while_rendering_writes_nothing(split_files, tmp_path, monkeypatch):
    d = split_files / "split-0"
    study = evaluate(d / "train.tsv", d / "test.tsv", [d / "pop.tsv"], ks=(5,))

    def broken(data):
        raise RuntimeError("boom")

    monkeypatch.setattr(report_mod, "render_plot", broken)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(RuntimeError):
        write_reports(study, out / "r.md", out / "r.json", out / "u.csv", out / "c.png")
    assert list(out.iterdir()) == []


def test_missing_matplotlib_is_one_clear_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes "import matplotlib" fail
    with pytest.raises(InputError) as info:
        check_plot_available("curves.png")
    assert str(info.value) == ("curves.png: plotting needs matplotlib, which is not installed "
                               "(pip install mrec-warp[plot])")


def test_default_names_stay_distinct():
    assert default_names(["a/recs.tsv", "b/warp.tsv"]) == ["recs", "warp"]
    assert default_names(["a/recs.tsv", "b/recs.tsv"]) == ["a/recs", "b/recs"]
    assert default_names(["x/recs.tsv", "x/recs.tsv"]) == ["x/recs#1", "x/recs#2"]
    assert default_names([pd.DataFrame()]) == ["recs1"]


# ----------------------------------------------------------------------------------------
# the baseline, the layouts, the long table and strict JSON
# ----------------------------------------------------------------------------------------
def test_baseline_choice_changes_the_differences(split_files):
    d = split_files / "split-0"
    first = evaluate(d / "train.tsv", d / "test.tsv", [d / "pop.tsv", d / "rand.tsv"], ks=(5,)).to_dict()
    study = evaluate(d / "train.tsv", d / "test.tsv", [d / "pop.tsv", d / "rand.tsv"], ks=(5,), baseline="rand")
    chosen = study.to_dict()
    assert first["baseline"] == "pop" and chosen["baseline"] == chosen["comparison"]["baseline"] == "rand"
    assert chosen["runs"][1]["difference_to_baseline"] is None
    for m in chosen["metrics"]:
        flipped = chosen["runs"][0]["difference_to_baseline"][m]["mean"]
        assert flipped == pytest.approx(-first["runs"][1]["difference_to_baseline"][m]["mean"])
        assert flipped == pytest.approx(study.evaluations[0][0].mean(m) - study.evaluations[0][1].mean(m))
    assert chosen["comparison"]["verdicts"][0].startswith("pop vs rand")
    assert "Δ: paired difference to rand" in format_table(chosen) and "Δ pop" in format_table(chosen)
    assert "**rand** (baseline)" in format_markdown(chosen)
    assert set(study.to_frame()["baseline"]) == {"rand"}


def test_unknown_baseline_is_refused_before_any_work(split_files):
    d = split_files / "split-0"
    with pytest.raises(ParameterError, match=r"`baseline=nope` names none of the `recs` \(their names: pop, rand\)"):
        evaluate(d / "train.tsv", d / "missing.tsv", [d / "pop.tsv", d / "rand.tsv"], baseline="nope")


def many_runs_study(d, n_runs=12):
    train, test = synthetic_split(7, n_users=80)
    counts = train["item"].value_counts().to_dict()
    recs = []
    for r in range(n_runs):
        rng = np.random.default_rng(r)
        scores = {i: c * r / n_runs + float(rng.random()) * 10 for i, c in counts.items()}
        recs.append(ranked_recs(train, scores, k=20))
    return evaluate(train, test, recs, names=[f"model-{r}" for r in range(n_runs)])


@pytest.mark.parametrize("width", [60, 100, 180])
def test_many_runs_fit_the_width_runs_as_rows(width):
    data = many_runs_study(None).to_dict()
    table = format_table(data, width=width)
    lines = table.splitlines()
    assert max(len(line) for line in lines) <= width
    blocks = [line for line in lines if line.startswith("run ")]
    assert len(blocks) > 1  # 12 runs x 19 metrics fit no width as one table
    shown = [cell for line in blocks for cell in line.split() if "@" in cell or cell == "mrr"]
    assert shown == data["metrics"]  # every metric once, in order
    for run in data["runs"]:  # one row per run in every block
        assert sum(re.match(rf"{run['name']} +\d", line) is not None for line in lines) == len(blocks)
    cells = [line.split()[-1] for line in lines if re.match(r"model-11 +\d", line)]
    assert all(c.endswith("*") or c[-1].isdigit() for c in cells)


def test_few_runs_keep_metrics_as_rows_when_they_fit(split_files):
    d = split_files / "split-0"
    data = evaluate(d / "train.tsv", d / "test.tsv", [d / "pop.tsv", d / "rand.tsv"], ks=(5, 10)).to_dict()
    lines = format_table(data).splitlines()
    assert any(line.startswith("metric ") and line.endswith("Δ rand") for line in lines)
    assert max(len(line) for line in lines) <= 100


def test_long_table_round_trips_through_pandas(split_files, tmp_path):
    import io

    d = split_files / "split-0"
    study = evaluate(d / "train.tsv", d / "test.tsv", [d / "pop.tsv", d / "rand.tsv", d / "pop.tsv"],
                     names=["pop", "rand", "again"], ks=(5, 10), groups="user-activity")
    data = study.to_dict()
    text = format_long(data)
    frame = pd.read_csv(io.StringIO(text), sep="\t")
    assert list(frame.columns) == list(TIDY_COLUMNS)
    assert len(frame) == 4 * 3 * len(data["metrics"])  # all + 3 activity groups, 3 runs, every metric
    expected = pd.DataFrame(tidy_rows(data))
    for column in ("mean", "plus_minus", "difference", "difference_plus_minus", "p", "p_adjusted"):
        assert np.array_equal(frame[column].to_numpy(float), expected[column].to_numpy(float), equal_nan=True)
    head = frame[(frame["group"] == "all") & (frame["run"] == "rand") & (frame["metric"] == "ndcg@10")].iloc[0]
    cell = data["runs"][1]["difference_to_baseline"]["ndcg@10"]
    assert head["difference"] == cell["mean"] and head["p_adjusted"] == cell["p_adjusted"]
    assert bool(head["significant"]) == cell["significant"] and head["baseline"] == "pop"
    assert frame[frame["run"] == "pop"]["difference"].isna().all()
    assert frame[frame["metric"] == "coverage@5"]["p"].isna().all()  # one global number: untested
    assert study.to_frame().equals(expected)


def _strict(text):
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON (RFC 8259)")
    return json.loads(text, parse_constant=refuse)


def test_every_json_evaluate_writes_is_strict(split_files, tmp_path):
    """NaN everywhere it can appear: one user (no sd), global metrics, empty groups, splits."""
    p = str(split_files / "split-{split}")
    studies = [
        evaluate(f"{p}/train.tsv", f"{p}/test.tsv", [f"{p}/pop.tsv", f"{p}/rand.tsv"], ks=(5,), splits=["0", "1", "2"],
                 beyond=True, groups="item-popularity"),
        evaluate(pd.DataFrame({"user": ["a", "a"], "item": ["x", "y"]}), pd.DataFrame({"user": ["a"], "item": ["z"]}),
                 [pd.DataFrame({"user": ["a"], "item": ["z"], "rank": [1]}),
                  pd.DataFrame({"user": ["a"], "item": ["w"], "rank": [1]})], ks=(1,), catalog=["w"], beyond=True,
                 groups="user-activity"),
    ]
    for i, study in enumerate(studies):
        path = tmp_path / f"r{i}.json"
        write_reports(study, json_path=path)
        data = _strict(path.read_text())
        assert data["table"] == _strict(json.dumps(tidy_rows(study.to_dict())))
        assert _strict(format_json(study.to_dict())) == data
