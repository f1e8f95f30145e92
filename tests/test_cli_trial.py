"""What a new user's first session found at the command line: .gz outputs that were plain
text, `similar -o x.csv` that wrote TSV, a silent -k cap, Ctrl-C ending in "Aborted!" and a
joblib warning, ids cut at commas without a word, and rotated evaluate files scoring 0."""
from __future__ import annotations

import csv
import gzip
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from .conftest import planted_low_rank
from .faults import Fault
from .test_guards import one_line_error, run

#: Item ids holding commas and quotes, as game titles do.
COMMA_ID = "Warhammer 40,000 Dawn of War II"


def item_name(i: int) -> str:
    return COMMA_ID if i == 0 else ('The "Quoted" Game' if i == 1 else f"i{i}")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A split with item ids holding commas, a small WARP model, a popularity model and its
    recommendations."""
    d = tmp_path_factory.mktemp("trial")
    out = {"dir": d}
    for name, matrix in zip(("train", "test"), planted_low_rank(n_users=120, n_items=60, per_user=10, rank=2, seed=3)):
        coo = matrix.tocoo()
        frame = pd.DataFrame({"user": [f"u{u}" for u in coo.row], "item": [item_name(i) for i in coo.col],
                              "value": 1, "ts": 880000000 + pd.RangeIndex(len(coo.row))})
        out[name] = d / f"{name}.tsv"
        frame.to_csv(out[name], sep="\t", header=False, index=False, quoting=csv.QUOTE_NONE)
    out["warp"], out["pop"], out["recs"] = d / "warp.npz", d / "pop.npz", d / "recs.tsv"
    assert run("train", out["train"], "-o", out["warp"], "--epochs", 2, "-q").exit_code == 0
    assert run("train", out["train"], "-o", out["pop"], "--model", "popularity", "-q").exit_code == 0
    assert run("recommend", out["pop"], "-o", out["recs"], "-q").exit_code == 0
    return out


def no_temporaries(folder: Path, keep=()):
    left = sorted(p.name for p in folder.iterdir() if p.name not in keep)
    assert left == [], left


# -- 1. a .gz output is gzip ------------------------------------------------------------------------
@pytest.mark.parametrize("extra", [(), ("--workdir", "work")], ids=["streamed", "parts"])
@pytest.mark.parametrize("suffix", ["tsv", "csv"])
def test_recommend_gz_output_is_gzip_and_evaluates(files, tmp_path, extra, suffix):
    plain, packed = tmp_path / f"r.{suffix}", tmp_path / f"r.{suffix}.gz"
    extra = tuple(str(tmp_path / e) if e == "work" else e for e in extra)
    assert run("recommend", files["pop"], "-o", plain, "-k", 5, "-q").exit_code == 0
    assert run("recommend", files["pop"], "-o", packed, "-k", 5, "-q", *extra).exit_code == 0
    with gzip.open(packed, "rb") as fh:  # raises on plain text
        assert fh.read() == plain.read_bytes()
    result = run("evaluate", "--train", files["train"], "--test", files["test"], "--recs", packed, "-k", 5)
    assert result.exit_code == 0, result.output
    no_temporaries(tmp_path, keep={plain.name, packed.name})


def test_similar_gz_output_is_gzip_and_parquet_gz_is_refused(files, tmp_path):
    out = tmp_path / "s.tsv.gz"
    assert run("similar", files["warp"], "--items", "i5,i6", "-k", 3, "-o", out).exit_code == 0
    with gzip.open(out, "rt") as fh:
        rows = [line.split("\t") for line in fh.read().splitlines()]
    assert len(rows) == 6 and {r[0] for r in rows} == {"i5", "i6"}
    one_line_error(run("recommend", files["pop"], "-o", tmp_path / "r.parquet.gz"), "Parquet", "drop the .gz")
    one_line_error(run("similar", files["warp"], "--items", "i5", "-o", tmp_path / "s.parquet.gz"), "drop the .gz")
    no_temporaries(tmp_path, keep={out.name})


# -- 2. similar's format follows the suffix ---------------------------------------------------------
def test_similar_csv_output_is_csv_and_ids_with_commas_survive(files, tmp_path):
    items = tmp_path / "items.txt"
    items.write_text(f"{COMMA_ID}\nThe \"Quoted\" Game\n", encoding="utf-8")
    out = tmp_path / "sim.csv"
    result = run("similar", files["warp"], "--items-file", items, "-k", 4, "-o", out)
    assert result.exit_code == 0, result.output
    with open(out, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["item", "similar_item", "score", "rank"]
    assert [r[0] for r in rows[1:]] == [COMMA_ID] * 4 + ['The "Quoted" Game'] * 4
    assert all(len(r) == 4 for r in rows)
    # --format csv on standard output, and parquet by suffix
    shown = run("similar", files["warp"], "--items", "i5", "-k", 2, "--format", "csv")
    assert shown.output.splitlines()[0] == "item,similar_item,score,rank"
    pq = tmp_path / "sim.parquet"
    assert run("similar", files["warp"], "--items-file", items, "-k", 4, "-o", pq).exit_code == 0
    assert list(pd.read_parquet(pq)["item"]) == [COMMA_ID] * 4 + ['The "Quoted" Game'] * 4


# -- 3. the -k cap is said by default ---------------------------------------------------------------
def test_k_above_the_catalogue_is_noted_without_verbose(files, tmp_path):
    result = run("recommend", files["pop"], "-o", tmp_path / "r.tsv", "-k", 1000)
    assert result.exit_code == 0
    assert "note: -k 1,000 is more than the 60 items there are; using -k 60" in result.stderr
    result = run("similar", files["warp"], "--items", "i5", "-k", 1000, "-o", tmp_path / "s.tsv")
    assert "using -k 59" in result.stderr
    quiet = run("recommend", files["pop"], "-o", tmp_path / "r.tsv", "-k", 1000, "-q")
    assert quiet.exit_code == 0 and quiet.output == ""


# -- 5. an id cut at a comma ------------------------------------------------------------------------
def test_items_cut_at_a_comma_point_to_items_file(files):
    # one id with a comma, alone, is that id; in a list it is cut, and the hint says why
    assert run("similar", files["warp"], "--items", COMMA_ID).exit_code == 0
    result = run("similar", files["warp"], "--items", COMMA_ID + ",nope")
    one_line_error(result, "'Warhammer 40' is not in the model", "splits at commas", "--items-file")
    # an id that is simply unknown keeps the plain advice
    one_line_error(run("similar", files["warp"], "--items", "nope"), "'nope' is not in the model",
                   "present in the training data")


# -- 6. rotated evaluate files ----------------------------------------------------------------------
def test_evaluate_refuses_recommendations_given_as_train(files):
    result = run("evaluate", "--train", files["recs"], "--test", files["test"], "--recs", files["train"])
    one_line_error(result, "recs.tsv", "training file looks like a recommendations file", "--train and --recs")


def test_evaluate_refuses_a_ratings_file_without_ranks_as_recs(files, tmp_path):
    ratings = pd.read_csv(files["train"], sep="\t", header=None, dtype=str, quoting=csv.QUOTE_NONE)
    ratings[2] = (ratings.index % 5 + 1).astype(str)  # ratings 1..5, up and down within a user
    three = tmp_path / "train3.tsv"
    ratings[[0, 1, 2]].to_csv(three, sep="\t", header=False, index=False, quoting=csv.QUOTE_NONE)
    result = run("evaluate", "--train", files["train"], "--test", files["test"], "--recs", three)
    one_line_error(result, "train3.tsv", "no rank column", "looks like a ratings file")
    # a ranked list without its rank column (scores falling) is still read as recommendations
    recs = pd.read_csv(files["recs"], sep="\t", header=None, dtype=str, quoting=csv.QUOTE_NONE)
    unranked = tmp_path / "unranked.tsv"
    recs[[0, 1, 2]].to_csv(unranked, sep="\t", header=False, index=False, quoting=csv.QUOTE_NONE)
    ok = run("evaluate", "--train", files["train"], "--test", files["test"], "--recs", unranked, "-k", 5)
    assert ok.exit_code == 0, ok.output


# -- 4. Ctrl-C --------------------------------------------------------------------------------------
#: Runs the CLI with one function replaced by a wait (after touching a "ready" file), so that
#: the test can interrupt it at a known point.
DRIVER = """
import importlib, json, pathlib, sys, time
ready, target, fault, args = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
if fault:
    from tests.faults import Fault
    Fault(**json.loads(fault)).install()
if target:
    module, _, attr = target.partition(":")
    owner = importlib.import_module(module)
    *path, name = attr.split(".")
    for p in path:
        owner = getattr(owner, p)
    original = getattr(owner, name)
    def hold(*a, **k):
        result = original(*a, **k)  # a real first step, so that outputs are half written
        ready.touch()
        # short sleeps: a SIGINT that the kernel hands to another thread only sets a flag,
        # which the main thread sees at its next step (as it would while computing)
        for _ in range(2400):
            time.sleep(0.05)
        return result
    setattr(owner, name, hold)
from mrec_warp.cli import main
main(args, prog_name="mrec-warp")
"""


def interrupt(tmp_path, ready: Path, target: str, *args, fault=None):
    full_env = fault.env() if fault else dict(os.environ)
    injected = fault.to_json() if fault else ""
    # SIGINT back to its default in the child: a child started while this process ignores
    # it (some libraries do, for a while) would inherit the ignoring and run to the end
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(ready), target, injected, *map(str, args)],
                            env=full_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: interrupted"), err
    return lines[0]


def test_ctrl_c_in_streamed_recommend_leaves_nothing(files, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    line = interrupt(tmp_path, tmp_path / "ready", "mrec_warp.stages.recommend:block_to_frame",
                     "recommend", files["warp"], "-o", out / "recs.tsv.gz", "--block-size", 8, "-q")
    assert "resume" not in line
    no_temporaries(out)


def test_ctrl_c_in_recommend_parts_says_rerun_and_no_joblib_warning(files, tmp_path):
    out, work = tmp_path / "out", tmp_path / "work"
    out.mkdir()
    held = Fault.at("wait:2", tmp_path / "fault")
    line = interrupt(tmp_path, held.fired, "", "recommend", files["warp"], "-o", out / "recs.tsv", "--workdir",
                     work, "--part-size", 10, "--n-jobs", 2, "-q", fault=held)
    assert "rerun the same command to resume" in line
    no_temporaries(out)
    held.release()  # rerun: resumes and completes
    assert run("recommend", files["warp"], "-o", out / "recs.tsv", "--workdir", work, "--part-size", 10,
               "-q").exit_code == 0
    assert len((out / "recs.tsv").read_text().splitlines()) == 120 * 10


@pytest.mark.parametrize("command", ["train", "prepare"])
def test_ctrl_c_in_train_and_prepare(files, tmp_path, command):
    out = tmp_path / "out"
    out.mkdir()
    if command == "train":
        args = ("train", files["train"], "-o", out / "model.npz", "-q")
        target = "mrec_warp.models.warp:WARP.fit"
    else:
        args = ("prepare", files["train"], "-o", out / "split", "-q")
        # the split's first file written but not yet in place (its data being synced)
        target = "os:fsync"
    line = interrupt(tmp_path, tmp_path / "ready", target, *args)
    # train is stopped before it writes; prepare while writing the split it names
    assert line == ("Error: interrupted" if command == "train" else f"Error: interrupted; removed the partial {out / 'split'}")
    no_temporaries(out)


def test_ctrl_c_promises_a_resume_only_where_a_job_kept_a_folder(files, tmp_path):
    """--backend processes without sub-models (here an item-kNN fit) keeps no part files:
    the line must not send the user to a work folder that does not exist."""
    out = tmp_path / "out"
    out.mkdir()
    line = interrupt(tmp_path, tmp_path / "ready", "mrec_warp.models.itemknn:ItemKNN.fit", "train", files["train"],
                     "-o", out / "knn.npz", "--model", "itemknn", "--backend", "processes", "-q")
    assert line == "Error: interrupted"
    no_temporaries(out)
