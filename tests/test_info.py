"""``mrec-warp info``: what a model file holds, as a table and as strict JSON."""
from __future__ import annotations

import json

import numpy as np
import pytest

import mrec_warp as mw
from mrec_warp.stages.info import info

from .conftest import run, run_ok


def _strict(text: str):
    """Parse as RFC 8259 JSON: NaN / Infinity refused."""
    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def messy_train(tmp_path_factory):
    """A training file whose ids need every byte kept: accents, emoji, spaces, a comma."""
    folder = tmp_path_factory.mktemp("info")
    rng = np.random.default_rng(3)
    users = ["Zoë", "u 2", "🎧fan", "a,b"] + [f"user{i}" for i in range(36)]
    items = ["café", " x ", "🎵"] + [f"item{i}" for i in range(27)]
    lines = sorted({f"{u}\t{items[j]}\t1\n" for u in users for j in rng.choice(len(items), 6, replace=False)})
    path = folder / "train.tsv"
    path.write_text("".join(lines), encoding="utf-8")
    return path, len(users), len(items), len(lines)


def test_json_describes_a_wrmf_file(messy_train, tmp_path):
    train, n_users, n_items, n_pairs = messy_train
    model = tmp_path / "wrmf.npz"
    run_ok("train", train, "-o", model, "--model", "wrmf", "--seed", "1", "-q")
    result = run_ok("info", model, "--json")
    data = _strict(result.stdout)
    assert data["family"] == "wrmf" and data["class"] == "WRMF"
    assert data["parameters"]["alpha"] == "auto"            # as trained ...
    assert isinstance(data["fitted"]["alpha_"], float)      # ... and what auto chose
    assert data["training_data"]["users"] == n_users
    assert data["training_data"]["items"] == n_items
    assert data["training_data"]["interactions"] == n_pairs
    assert data["size_bytes"] == model.stat().st_size
    assert data["parameters"]["factors"] == "auto" and data["parameters"]["select"] is True
    assert data["arrays"]["user_factors"]["shape"] == [n_users, data["fitted"]["factors_"]]  # what the fit chose
    assert isinstance(data["fitted"]["regularization_"], float)
    assert data["format_version"] == 1
    assert data["trained_with"] == f"mrec-warp {mw.__version__}"


def test_a_trained_with_that_is_not_a_short_printable_text_is_not_shown():
    from mrec_warp.stages.info import trained_with

    assert trained_with({"trained_with": "mrec-warp 9.9"}) == "mrec-warp 9.9"
    for crafted in ("line\nbreak\x1b[2J", "x" * 5000, {"a": 1}, 7):
        assert trained_with({"trained_with": crafted}) is None
    assert trained_with({}) is None


def test_same_data_same_fingerprint_other_data_another(messy_train, tmp_path):
    train, *_ = messy_train
    a, b, c = tmp_path / "a.npz", tmp_path / "b.npz", tmp_path / "c.npz"
    run_ok("train", train, "-o", a, "--model", "popularity", "-q")
    run_ok("train", train, "-o", b, "--model", "itemknn", "-q")
    fewer = tmp_path / "fewer.tsv"
    fewer.write_text("".join(train.read_text(encoding="utf-8").splitlines(keepends=True)[:-1]), encoding="utf-8")
    run_ok("train", fewer, "-o", c, "--model", "popularity", "-q")
    assert info(a).training_fingerprint == info(b).training_fingerprint
    assert info(a).training_fingerprint != info(c).training_fingerprint
    assert info(a).family == "popularity" and info(b).family == "itemknn"


def test_table_is_printed_with_quiet(messy_train, tmp_path):
    train, n_users, n_items, n_pairs = messy_train
    model = tmp_path / "pop.npz"
    mw.train(str(train), str(model), model="popularity")
    out = run_ok("info", model, "-q").stdout
    assert "family" in out and "popularity" in out
    assert f"{n_users} users x {n_items} items, {n_pairs} interactions" in out


@pytest.mark.parametrize("content, expected", [
    (b"", "empty"),
    (b"PK\x03\x04 not really a zip", "not an mrec-warp model file"),
])
def test_damaged_file_is_one_line(tmp_path, content, expected):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(content)
    result = run("info", bad)
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and expected in lines[0], result.stderr
