"""``train``, ``recommend`` and ``similar`` from the command line, including bad input."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from mrec_warp.cli import main
from mrec_warp.models import WARP, load

from .conftest import planted_low_rank
from .conftest import run_strict as run
from .conftest import run_ok


@pytest.fixture(scope="module")
def train_file(tmp_path_factory):
    train, _ = planted_low_rank(n_users=200, n_items=120, per_user=20, seed=1)
    coo = train.tocoo()
    d = tmp_path_factory.mktemp("cli")
    df = pd.DataFrame({"user": [f"user{u}" for u in coo.row], "item": [f"item{i}" for i in coo.col]})
    path = d / "train.tsv"
    df.to_csv(path, sep="\t", header=False, index=False)
    return path



def one_line_error(result, *needles):
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_train_recommend_similar_round_trip(train_file, tmp_path):
    model_path = tmp_path / "m.npz"
    result = run("train", train_file, "-o", model_path, "--epochs", "3", "--factors", "8", "--quiet")
    assert result.exit_code == 0 and result.output == ""
    model = load(model_path)
    assert isinstance(model, WARP) and model.factors == 8 and model.epochs == 3
    recs = tmp_path / "recs.tsv"
    assert run("recommend", model_path, "-o", recs, "-k", "5").exit_code == 0
    df = pd.read_csv(recs, sep="\t", header=None, names=["user", "item", "score", "rank"], dtype={"user": str, "item": str})
    assert df.groupby("user").size().eq(5).all() and df["user"].nunique() == model.n_users
    train = pd.read_csv(train_file, sep="\t", header=None, names=["user", "item"])
    assert df.merge(train, on=["user", "item"]).empty, "training items are excluded"
    assert (df.groupby("user")["score"].diff().dropna() <= 0).all()
    assert set(df["rank"]) == {1, 2, 3, 4, 5}
    sim = run("similar", model_path, "--items", "item3,item7", "-k", "4")
    rows = [ln.split("\t") for ln in sim.output.strip().splitlines()]
    assert len(rows) == 8 and {r[0] for r in rows} == {"item3", "item7"}
    assert all(r[0] != r[1] for r in rows)


def test_params_file_and_explicit_options(train_file, tmp_path):
    params = tmp_path / "best.json"
    params.write_text(json.dumps({"params": {"factors": 6, "learning_rate": 0.07}}))
    out = tmp_path / "m.npz"
    assert run("train", train_file, "-o", out, "--params", params, "--epochs", "1", "--learning-rate", "0.03", "-q").exit_code == 0
    model = load(out)
    assert model.factors == 6 and model.learning_rate == 0.03


def test_norm_limit_options_and_zero_for_none(train_file, tmp_path):
    out = tmp_path / "m.npz"
    assert run("train", train_file, "-o", out, "--epochs", "2", "--factors", "4",
               "--user-max-norm", "0.2", "--item-max-norm", "0", "-q").exit_code == 0
    model = load(out)
    assert model.user_max_norm == 0.2 and model.item_max_norm is None
    assert np.linalg.norm(model.user_factors, axis=1).max() <= 0.2 * (1 + 1e-5)
    result = run("train", train_file, "-o", out, "--user-max-norm", "-1")
    assert result.exit_code == 2 and "-1" in result.output


def test_model_selection_options(train_file, tmp_path):
    out = tmp_path / "m.npz"
    result = run("train", train_file, "-o", out, "--factors", "4", "--max-epochs", "6", "--eval-every", "3",
                 "--min-improvement", "0.01", "--warm-epochs", "2", "-v")
    assert result.exit_code == 0, result.output
    model = load(out)
    assert (model.eval_every, model.min_improvement, model.warm_epochs) == (3, 0.01, 2)
    assert "2 more epochs from epoch" in result.output and "refit epoch   2" in result.output
    assert "refit epoch   3" not in result.output
    # a WRMF has no warm refit: the option is refused, not ignored
    one_line_error(run("train", train_file, "-o", tmp_path / "w.npz", "--model", "wrmf", "--warm-epochs", "2"),
                   "--warm-epochs", "does not apply to --model wrmf")
    # a switch given off is named as typed
    one_line_error(run("train", train_file, "-o", tmp_path / "w.npz", "--model", "warp", "--no-select"),
                   "--no-select does not apply to --model warp")


def test_warp_kos_from_the_command_line(train_file, tmp_path):
    out = tmp_path / "m.npz"
    assert run("train", train_file, "-o", out, "--epochs", "2", "--factors", "4", "--loss", "warp-kos",
               "--kos-k", "2", "--kos-n", "4", "-q").exit_code == 0
    model = load(out)
    assert (model.loss, model.kos_k, model.kos_n) == ("warp-kos", 2, 4)
    one_line_error(run("train", train_file, "-o", tmp_path / "bad.npz", "--loss", "warp-kos", "--kos-k", "11"),
                   "kos_k")
    assert not (tmp_path / "bad.npz").exists()


def test_recommend_for_listed_users_and_csv(train_file, tmp_path):
    model = tmp_path / "m.npz"
    run("train", train_file, "-o", model, "--model", "popularity", "-q")
    users = tmp_path / "users.txt"
    users.write_text("user3\nuser9\n")
    out = tmp_path / "r.csv"
    assert run("recommend", model, "-o", out, "-k", "3", "--users", users).exit_code == 0
    df = pd.read_csv(out)
    assert list(df.columns) == ["user", "item", "score", "rank"]
    assert sorted(df["user"].unique()) == ["user3", "user9"] and len(df) == 6


def test_bad_inputs_give_one_line_errors_and_no_output(train_file, tmp_path):
    model = tmp_path / "m.npz"
    run("train", train_file, "-o", model, "--epochs", "1", "--factors", "4", "-q")
    out = tmp_path / "out.tsv"
    # truncated model file
    truncated = tmp_path / "trunc.npz"
    truncated.write_bytes(model.read_bytes()[: model.stat().st_size // 2])
    one_line_error(run("recommend", truncated, "-o", out), "trunc.npz", "truncated")
    # a file of another format
    other = tmp_path / "other.npz"
    np.savez(other, x=np.arange(3))
    one_line_error(run("recommend", other, "-o", out), "other.npz", "not an mrec-warp model")
    # unknown user in --users, with its line
    users = tmp_path / "users.txt"
    users.write_text("user1\nnobody\n")
    one_line_error(run("recommend", model, "-o", out, "--users", users), "users.txt:2", "nobody")
    # missing and empty training files
    one_line_error(run("train", tmp_path / "missing.tsv", "-o", tmp_path / "x.npz"), "missing.tsv", "does not exist")
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    one_line_error(run("train", empty, "-o", tmp_path / "x.npz"), "empty.tsv", "empty")
    # a non-numeric rating names its line
    bad = tmp_path / "bad.tsv"
    bad.write_text("u1\ti1\t4\nu1\ti2\tfive\n")
    one_line_error(run("train", bad, "-o", tmp_path / "x.npz"), "bad.tsv:2", "five")
    # -k 0 is a usage error
    assert run("recommend", model, "-o", out, "-k", "0").exit_code == 2
    assert not out.exists() and not (tmp_path / "x.npz").exists()
    assert not list(tmp_path.glob(".*")), "no temporary files left behind"


def test_divergence_is_one_line_with_a_hint(train_file, tmp_path):
    result = run("train", train_file, "-o", tmp_path / "m.npz", "--epochs", "2", "--learning-rate", "1e38", "-q")
    one_line_error(result, "learning rate")
    assert not (tmp_path / "m.npz").exists()


def test_console_script_runs_in_a_subprocess(train_file, tmp_path):
    # the real entry point, as a user runs it (no CliRunner)
    out = tmp_path / "m.npz"
    proc = subprocess.run([sys.executable, "-m", "mrec_warp", "train", str(train_file), "-o", str(out),
                           "--epochs", "2", "--factors", "4"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", "quiet in a pipe: no progress or log lines"
    assert "wrote" in proc.stdout and out.exists()
    proc = subprocess.run([sys.executable, "-m", "mrec_warp", "train", str(train_file), "-o", str(out),
                           "--epochs", "2", "--factors", "4", "--verbose"], capture_output=True, text=True)
    assert proc.stderr.count("epoch") == 2, "one log line per epoch"


def test_parquet_output_matches_tsv(train_file, tmp_path):
    pytest.importorskip("pyarrow")
    model = tmp_path / "m.npz"
    run("train", train_file, "-o", model, "--epochs", "1", "--factors", "4", "-q")
    assert run("recommend", model, "-o", tmp_path / "r.tsv", "-k", "3", "--block-size", "7").exit_code == 0
    assert run("recommend", model, "-o", tmp_path / "r.parquet", "-k", "3", "--block-size", "7").exit_code == 0
    tsv = pd.read_csv(tmp_path / "r.tsv", sep="\t", header=None, names=["user", "item", "score", "rank"],
                      dtype={"user": str, "item": str})
    pq = pd.read_parquet(tmp_path / "r.parquet")
    assert list(pq.columns) == ["user", "item", "score", "rank"]
    pd.testing.assert_frame_equal(pq[["user", "item", "rank"]].astype({"rank": "int64"}).reset_index(drop=True),
                                  tsv[["user", "item", "rank"]].astype({"rank": "int64"}), check_dtype=False)
    np.testing.assert_allclose(pq["score"], tsv["score"], rtol=1e-5)


@pytest.mark.parametrize("model_name", ["popularity", "itemknn"])
def test_seed_for_a_model_without_randomness_is_accepted_and_said_to_change_nothing(train_file, tmp_path,
                                                                                   model_name):
    # --seed used to vanish without a word for the models that draw no random numbers
    seeded, plain = tmp_path / "seeded.npz", tmp_path / "plain.npz"
    given = CliRunner().invoke(main, ["train", str(train_file), "-o", str(seeded), "--model", model_name,
                                      "--seed", "7"])
    assert given.exit_code == 0, given.output
    assert f"--model {model_name} draws no random numbers: --seed 7 changes nothing" in given.stderr
    default = CliRunner().invoke(main, ["train", str(train_file), "-o", str(plain), "--model", model_name])
    assert default.exit_code == 0 and "--seed" not in default.stderr
    assert seeded.read_bytes() == plain.read_bytes()


def test_a_named_value_column_that_is_ignored_is_a_note(tmp_path):
    """Naming a value column in --columns and then not weighing by it says so by default (not
    only in -v's log); weighing by it, or naming no value column, says nothing."""
    path = tmp_path / "purchases.csv"
    path.write_text("customer,product,qty\n" + "".join(f"c{i % 17},p{(i * 7) % 23},{1 + i % 4}\n" for i in range(400)))
    named = ("--columns", "customer,product,qty")
    ignored = run_ok("train", path, "-o", tmp_path / "a.npz", *named, "--model", "itemknn")
    assert "note: the 3rd column of --columns (qty) is ignored" in ignored.stderr
    warp = run_ok("train", path, "-o", tmp_path / "b.npz", *named, "--epochs", 1)
    assert "(--confidence log to weight by it)" in warp.stderr
    weighed = run_ok("train", path, "-o", tmp_path / "c.npz", *named, "--epochs", 1, "--confidence", "log")
    assert "is ignored" not in weighed.stderr
    unnamed = run_ok("train", path, "-o", tmp_path / "d.npz", "--model", "itemknn")
    assert "is ignored" not in unnamed.stderr
