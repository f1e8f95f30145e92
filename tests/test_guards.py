"""Command lines that used to exit 0 with a plausible-looking wrong answer: swapped
evaluate files, a --train of another data set, --n-jobs 0; and what popularity and
--exclude-items now serve."""
from __future__ import annotations

import pandas as pd
import pytest

from mrec_warp.workers import cpu_count

from .conftest import planted_low_rank
from .conftest import run_strict as run



def one_line_error(result, *needles):
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    for needle in needles:
        assert needle in lines[0], lines[0]


def _write(matrix, path, timestamps=False):
    coo = matrix.tocoo()
    df = pd.DataFrame({"user": [f"u{u}" for u in coo.row], "item": [f"i{i}" for i in coo.col]})
    if timestamps:  # a ratings file's 4 columns: value and Unix time
        df["value"] = 4
        df["ts"] = 880000000 + pd.RangeIndex(len(df))
    df.to_csv(path, sep="\t", header=False, index=False)
    return path


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    """A train/test split (ratings with timestamps, as prepare writes), a popularity model
    and its recommendations."""
    d = tmp_path_factory.mktemp("guards")
    train, test = planted_low_rank(n_users=200, n_items=100, per_user=20, seed=5)
    files = {"dir": d, "train": _write(train, d / "train.tsv", True), "test": _write(test, d / "test.tsv", True)}
    assert run("train", files["train"], "-o", d / "pop.npz", "--model", "popularity", "-q").exit_code == 0
    assert run("recommend", d / "pop.npz", "-o", d / "recs.tsv", "-k", "10", "-q").exit_code == 0
    files.update(model=d / "pop.npz", recs=d / "recs.tsv")
    ok = run("evaluate", "--train", files["train"], "--test", files["test"], "--recs", files["recs"], "-k", "10")
    assert ok.exit_code == 0, ok.output  # the right files still evaluate
    return files


# -- evaluate -----------------------------------------------------------------------------------
def test_evaluate_refuses_recommendations_given_as_the_test_file(split, tmp_path):
    result = run("evaluate", "--train", split["train"], "--test", split["recs"], "--recs", split["test"])
    one_line_error(result, "recs.tsv", "looks like a recommendations file", "swapped")
    # but a log whose 4th column numbers each user's rows 1, 2, 3 with values that go up and
    # down is a plain test file: only ranked lists, scores falling, are refused
    test = pd.read_csv(split["test"], sep="\t", header=None, dtype=str)
    test[3] = test.groupby(0).cumcount() + 1
    test[2] = [1, 5] * (len(test) // 2) + [1] * (len(test) % 2)
    path = tmp_path / "numbered.tsv"
    test.to_csv(path, sep="\t", header=False, index=False)
    result = run("evaluate", "--train", split["train"], "--test", path, "--recs", split["recs"], "-k", "10")
    assert result.exit_code == 0, result.output


def test_evaluate_refuses_a_ratings_file_given_as_recommendations(split):
    result = run("evaluate", "--train", split["train"], "--test", split["test"], "--recs", split["test"])
    one_line_error(result, "test.tsv", "ratings file", "swapped")


def test_evaluate_refuses_train_and_test_swapped(split):
    # used to print all zeros with a note that some recommended items were training items
    result = run("evaluate", "--train", split["test"], "--test", split["train"], "--recs", split["recs"])
    one_line_error(result, "recs.tsv", "--train and --test look swapped")


def test_evaluate_refuses_recommendations_for_other_users(split, tmp_path):
    recs = pd.read_csv(split["recs"], sep="\t", header=None, dtype=str)
    few = tmp_path / "few.tsv"
    recs[recs[0].isin(["u1", "u2", "u3"])].to_csv(few, sep="\t", header=False, index=False)
    result = run("evaluate", "--train", split["train"], "--test", split["test"], "--recs", few)
    one_line_error(result, "few.tsv", "only 3 of the", "test users have recommendations")


# -- recommend ----------------------------------------------------------------------------------
def test_recommend_refuses_a_train_file_of_other_ids(split, tmp_path):
    other, _ = planted_low_rank(n_users=200, n_items=100, per_user=20, seed=6)
    coo = other.tocoo()
    path = tmp_path / "other.tsv"
    pd.DataFrame({"u": [f"x{u}" for u in coo.row], "i": [f"i{i}" for i in coo.col]}).to_csv(
        path, sep="\t", header=False, index=False)
    result = run("recommend", split["model"], "-o", tmp_path / "r.tsv", "--train", path)
    one_line_error(result, "other.tsv", "does not match the model", f"{coo.nnz} of {coo.nnz} rows", "200 users")
    assert not (tmp_path / "r.tsv").exists()


def test_recommend_ignores_a_few_unknown_rows_of_train_and_says_so(split, tmp_path):
    path = tmp_path / "train_plus.tsv"
    lines = split["train"].read_text() + "newcomer\ti1\t4\t880000000\n"
    path.write_text(lines)
    result = run("recommend", split["model"], "-o", tmp_path / "r.tsv", "--train", path, "-v")
    assert result.exit_code == 0, result.output
    assert "1 of" in result.output and "ignored" in result.output


def test_recommend_exclude_items(split, tmp_path):
    top = pd.read_csv(split["recs"], sep="\t", header=None, dtype=str)
    banned = top[1].value_counts().index[:3].tolist()
    (tmp_path / "banned.txt").write_text("\n".join(banned + ["not-an-item"]) + "\n")
    result = run("recommend", split["model"], "-o", tmp_path / "r.tsv", "-k", "10", "--exclude-items",
                 tmp_path / "banned.txt")
    assert result.exit_code == 0, result.output
    recs = pd.read_csv(tmp_path / "r.tsv", sep="\t", header=None, dtype=str)
    assert not recs[1].isin(banned).any() and recs.groupby(0).size().eq(10).all()
    train = pd.read_csv(split["train"], sep="\t", header=None, dtype=str)
    assert recs.merge(train, on=[0, 1]).empty  # training items stay excluded
    # resumable part files take the same exclusions, and give the same file
    result = run("recommend", split["model"], "-o", tmp_path / "p.tsv", "-k", "10", "--exclude-items",
                 tmp_path / "banned.txt", "--workdir", tmp_path / "parts", "--part-size", "50")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "p.tsv").read_bytes() == (tmp_path / "r.tsv").read_bytes()


def test_popularity_recommends_for_new_users_from_their_history(split, tmp_path):
    top = pd.read_csv(split["recs"], sep="\t", header=None, dtype=str)
    by_popularity = pd.read_csv(split["train"], sep="\t", header=None, dtype=str)[1].value_counts()
    seen = by_popularity.index[:2].tolist()
    (tmp_path / "hist.tsv").write_text("".join(f"newbie\t{i}\n" for i in seen))
    result = run("recommend", split["model"], "-o", tmp_path / "r.tsv", "-k", "5", "--history", tmp_path / "hist.tsv")
    assert result.exit_code == 0, result.output
    recs = pd.read_csv(tmp_path / "r.tsv", sep="\t", header=None, dtype=str)
    assert recs[0].unique().tolist() == ["newbie"]
    # the most popular unseen items (ties may fall either way: compare the counts)
    unseen = by_popularity.drop(seen)
    assert not set(recs[1]) & set(seen)
    assert by_popularity[recs[1]].tolist() == unseen.sort_values(ascending=False).iloc[:5].tolist()
    assert len(top)  # the fixture's lists are still there
    (tmp_path / "users.txt").write_text("u3\nstranger\n")
    result = run("recommend", split["model"], "-o", tmp_path / "s.tsv", "-k", "5", "--users", tmp_path / "users.txt")
    assert result.exit_code == 0, result.output
    recs = pd.read_csv(tmp_path / "s.tsv", sep="\t", header=None, dtype=str)
    stranger = recs[recs[0] == "stranger"][1]
    assert by_popularity[stranger].tolist() == by_popularity.sort_values(ascending=False).iloc[:5].tolist()


# -- --n-jobs -----------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["0", str(-cpu_count() - 1)])
@pytest.mark.parametrize("command", ["recommend", "evaluate", "train", "tune"])
def test_n_jobs_must_be_positive_or_count_back_from_the_cores(split, command, value, tmp_path):
    args = {"recommend": [split["model"], "-o", tmp_path / "r.tsv"],
            "evaluate": ["--train", split["train"], "--test", split["test"], "--recs", split["recs"]],
            "train": [split["train"], "-o", tmp_path / "m.npz"],
            "tune": [split["train"], "--random", "1", "-o", tmp_path / "t.json"]}[command]
    result = run(command, *args, "--n-jobs", value)
    assert result.exit_code == 2 and "--n-jobs" in result.output, result.output
    assert not any(p.exists() for p in tmp_path.iterdir())


def test_n_jobs_minus_one_is_logged_as_the_real_number_of_cores(split, tmp_path):
    result = run("train", split["train"], "-o", tmp_path / "m.npz", "--epochs", "1", "--factors", "4",
                 "--n-jobs", "-1", "--backend", "processes", "-v")
    assert result.exit_code == 0, result.output
    assert f"fitting on {cpu_count()} thread(s)" in result.output and "-1 thread" not in result.output


def test_an_option_of_another_model_names_the_flag_and_this_models_options(split, tmp_path):
    result = run("train", split["train"], "-o", tmp_path / "e.npz", "--model", "ease", "--factors", "32")
    one_line_error(result, "--factors does not apply to --model ease", "--l2", "--max-items")
    assert "dtype" not in result.output.replace("--ease-dtype", "")  # flags, not Python names
    result = run("train", split["train"], "-o", tmp_path / "p.npz", "--model", "popularity", "--factors", "3")
    one_line_error(result, "--model popularity takes no options")
