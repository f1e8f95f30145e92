"""The value column as a confidence: the shared rule, planted counts, WARP using it, the CLI."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from mrec_warp.data.confidence import confidence
from mrec_warp.data.interactions import Interactions
from mrec_warp.data.ratings import read_ratings
from mrec_warp.data.split import iter_splits
from mrec_warp.data.synthetic import generate
from mrec_warp.errors import InputError
from mrec_warp.models import WARP
from mrec_warp.kernels import rng as _rng
from mrec_warp.models.early_stopping import precision_at_k
from .conftest import run



# -- the rule -------------------------------------------------------------------------------
def test_confidence_values():
    v = np.array([0.0, 0.5, 1.0, 273.0])
    assert confidence(v, "none").tolist() == [1.0, 1.0, 1.0, 1.0]
    np.testing.assert_allclose(confidence(v, "linear", alpha=2.0), 1 + 2 * v, rtol=1e-6)
    np.testing.assert_allclose(confidence(v, "log", alpha=3.0, eps=0.5), 1 + 3 * np.log1p(v / 0.5), rtol=1e-6)
    assert confidence(v, "log").dtype == np.float32
    assert confidence(v, "log", alpha=0.0).tolist() == [1.0] * 4


@pytest.mark.parametrize("values, kwargs, fragment", [
    ([1.0, -2.0], {"kind": "log"}, "negative or not finite"),
    ([1.0, np.nan], {"kind": "linear"}, "negative or not finite"),
    ([1.0], {"kind": "sqrt"}, "unknown confidence"),
    ([1.0], {"kind": "log", "alpha": -1.0}, "alpha"),
    ([1.0], {"kind": "log", "eps": 0.0}, "eps"),
])
def test_confidence_refuses_what_it_cannot_use(values, kwargs, fragment):
    with pytest.raises(InputError, match=fragment):
        confidence(values, **kwargs)


# -- the sampler ----------------------------------------------------------------------------
def test_alias_table_draws_in_proportion_and_never_a_zero_weight():
    weights = np.array([1.0, 0.0, 3.0, 6.0, 0.0, 10.0])
    prob, alias = _rng.alias_table(weights)
    order = np.zeros(400_000, dtype=np.int32)
    _rng.draw_positives(order, prob, alias, _rng.seed_state(7))
    share = np.bincount(order, minlength=len(weights)) / len(order)
    assert share[1] == 0 and share[4] == 0
    np.testing.assert_allclose(share, weights / weights.sum(), atol=0.004)


# -- planted counts ---------------------------------------------------------------------------
def _knn_precision(train: Interactions, test: Interactions, weigh) -> float:
    """P@10 of item co-occurrence scores, each history item weighted by ``weigh(value)``."""
    binary = train.matrix.copy()
    binary.data[:] = 1.0
    cooc = (binary.T @ binary).toarray()
    np.fill_diagonal(cooc, 0)
    history = train.matrix.copy()
    history.data = weigh(history.data).astype(np.float32)
    return precision_at_k(lambda rows: np.asarray(history[rows] @ cooc, dtype=np.float32),
                          train.n_items, binary, test.matrix, 10)


def _planted_split(seed=0, **kwargs):
    ratings, _ = generate(n_users=800, n_items=400, n_interactions=16_000, values="counts", noise=0.3,
                          seed=seed, **kwargs)
    train_df, test_df, _ = next(iter_splits(ratings, test_fraction=0.2, seed=seed))
    train = Interactions.from_dataframe(train_df, value_col="value")
    test = Interactions.from_dataframe(test_df, user_ids=train.user_ids, item_ids=train.item_ids)
    return train, test


def test_planted_counts_carry_signal():
    train, test = _planted_split()
    values = train.matrix.data
    assert values.min() >= 1 and values.max() > 30 and np.all(values == np.round(values))
    blind = _knn_precision(train, test, np.ones_like)
    aware = _knn_precision(train, test, lambda v: v)
    # the same ranking that trusts big counts more finds clearly more held-out items (+15%)
    assert aware > 1.10 * blind, (aware, blind)


def test_synth_counts_without_signal_when_ratings_asked():
    ratings, _ = generate(n_users=200, n_items=100, n_interactions=2_000, seed=1)
    assert set(ratings["value"].unique()) <= {1.0, 2.0, 3.0, 4.0, 5.0}
    counts, _ = generate(n_users=200, n_items=100, n_interactions=2_000, seed=1, values="counts")
    assert counts["value"].max() > 5
    with pytest.raises(InputError, match="values must be one of"):
        generate(n_users=20, n_items=10, n_interactions=50, values="hours")


# -- WARP -----------------------------------------------------------------------------------
def _handmade(seed=0):
    """200 users, 40 items, 10 random items each; items 0-19 are always played 50 times,
    items 20-39 once. Without counts the two halves are alike."""
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(200), 10)
    cols = np.concatenate([rng.choice(40, 10, replace=False) for _ in range(200)])
    vals = np.where(cols < 20, 50.0, 1.0).astype(np.float32)
    return sp.csr_matrix((vals, (rows, cols)), shape=(200, 40))


def _score_gap(model: WARP) -> float:
    scores = model.score_users(np.arange(model.n_users))
    return float(scores[:, :20].mean() - scores[:, 20:].mean())


@pytest.mark.parametrize("use", ["sample", "weight"])
def test_confidence_ranks_high_count_items_higher(use):
    X = _handmade()
    binary = WARP(factors=8, epochs=10, random_state=3).fit(X)
    weighted = WARP(factors=8, epochs=10, random_state=3, confidence="log", confidence_use=use).fit(X)
    assert abs(_score_gap(binary)) < 0.1
    assert _score_gap(weighted) > 0.3 + abs(_score_gap(binary))


@pytest.mark.parametrize("use", ["sample", "weight"])
def test_confidence_fit_is_bit_reproducible_on_one_thread(use):
    X = _handmade()
    a = WARP(factors=8, random_state=5, max_epochs=5, confidence="linear", confidence_use=use).fit(X)
    b = WARP(factors=8, random_state=5, max_epochs=5, confidence="linear", confidence_use=use).fit(X)
    assert np.array_equal(a.user_factors_, b.user_factors_) and np.array_equal(a.item_factors_, b.item_factors_)
    assert not np.array_equal(a.item_factors_, WARP(factors=8, random_state=5, max_epochs=5).fit(X).item_factors_)


def test_early_stopping_counts_held_out_positives_not_their_confidence():
    """The internal hold-out keeps each positive's confidence as its value; the validation
    precision must count a hit as one, whatever its count (it once summed the counts, so
    the score went above 1 and early stopping chased the most-played items)."""
    X = _handmade()
    model = WARP(factors=8, random_state=2, max_epochs=4, eval_every=1, confidence="linear", alpha=40.0).fit(X)
    scores = [h["val_precision@10"] for h in model.history_ if "val_precision@10" in h]
    assert scores and all(0.0 <= s <= 1.0 for s in scores)
    truth = sp.csr_matrix(([50.0, 1.0], ([0, 1], [3, 4])), shape=(2, 40))
    perfect = np.zeros((2, 40), dtype=np.float32)
    perfect[0, 3] = perfect[1, 4] = 1.0
    empty = sp.csr_matrix((2, 40))
    assert precision_at_k(lambda rows: perfect[rows], 40, empty, truth, k=1) == 1.0


def test_equal_confidences_weigh_like_binary():
    """Step weights are normalised to mean 1: values that are all alike change nothing."""
    X = _handmade()
    X.data[:] = 7.0
    binary = WARP(factors=8, epochs=3, random_state=1).fit(X)
    weighted = WARP(factors=8, epochs=3, random_state=1, confidence="log", confidence_use="weight").fit(X)
    assert np.array_equal(binary.item_factors_, weighted.item_factors_)
    assert weighted.train_.data.tolist() == [1.0] * X.nnz  # the model still excludes / stores binary data


def test_warp_refuses_bad_confidence_parameters():
    with pytest.raises(InputError, match="confidence_use"):
        WARP(epochs=1, confidence="log", confidence_use="both").fit(_handmade())
    X = _handmade()
    X.data[0] = -1.0
    with pytest.raises(InputError, match="negative"):
        WARP(epochs=1, confidence="log").fit(X)


@pytest.mark.parametrize("use", ["sample", "weight"])
@pytest.mark.parametrize("as_interactions", [False, True])
def test_partial_fit_keeps_using_confidence(use, as_interactions):
    """The first call fits a little; only the continued calls can open the gap."""
    X = _handmade()
    more = Interactions(X, np.arange(200), np.arange(40)) if as_interactions else X
    model = WARP(factors=8, random_state=3, confidence="log", confidence_use=use).partial_fit(X, epochs=1)
    binary = WARP(factors=8, random_state=3).partial_fit(X, epochs=1)
    model.partial_fit(more, epochs=9)
    binary.partial_fit(more, epochs=9)
    assert _score_gap(model) > 0.3 + abs(_score_gap(binary))


# -- CLI: prepare keeps the values, train uses them and says so --------------------------------
PLAYS = ("user-id\tgame\thours\n"
         + "".join(f"p{u}\tg{i}\t{(273 if (u + i) % 3 == 0 else 0.1)}\n" for u in range(30) for i in range(u % 5, u % 5 + 8)))


def test_values_round_trip_through_prepare_and_train_names_the_column(tmp_path):
    src = tmp_path / "plays.tsv"
    src.write_text(PLAYS, encoding="utf-8")
    result = run("prepare", src, "-o", tmp_path / "split", "--columns", "user-id,game,hours")
    assert result.exit_code == 0, result.output
    assert "value column 'hours': kept" in result.output
    summary = json.loads((tmp_path / "split" / "summary.json").read_text())
    assert summary["value_column"]["column"] == "hours" and summary["value_column"]["use"] == "kept"
    original = read_ratings(src, columns="user-id,game,hours").set_index(["user", "item"])["value"]
    for name in ("train.tsv", "test.tsv"):
        out = read_ratings(tmp_path / "split" / name).set_index(["user", "item"])["value"]
        assert len(out) and (out == original.loc[out.index]).all()
        assert set(out.unique()) == {273.0, 0.1}

    result = run("train", tmp_path / "split" / "train.tsv", "-o", tmp_path / "m.npz", "--epochs", "2",
                 "--confidence", "log", "--alpha", "2", "--eps", "0.5", "-v")
    assert result.exit_code == 0, result.output
    assert "value column (3rd): confidence log, alpha 2.0, eps 0.5" in result.output
    plain = run("train", tmp_path / "split" / "train.tsv", "-o", tmp_path / "b.npz", "--epochs", "2", "-v")
    assert "value column (3rd) ignored" in plain.output
    a, b = WARP.load(tmp_path / "m.npz"), WARP.load(tmp_path / "b.npz")
    assert a.confidence == "log" and not np.array_equal(a.item_factors_, b.item_factors_)


def test_prepare_names_the_value_column_from_the_header(tmp_path):
    src = tmp_path / "games.csv"
    src.write_text("user-id,game-title,value,\n" + "".join(f"u{u},g{i},{u * i},\n" for u in range(1, 5) for i in range(4)),
                   encoding="utf-8")
    result = run("prepare", src, "-o", tmp_path / "split")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "split" / "summary.json").read_text())["value_column"]["column"] == "value"
    result = run("prepare", src, "-o", tmp_path / "split2", "--columns", "0,1,2")
    assert json.loads((tmp_path / "split2" / "summary.json").read_text())["value_column"]["column"] == "value"


def test_prepare_says_what_binarising_dropped(tmp_path):
    src = tmp_path / "plays.tsv"
    src.write_text(PLAYS, encoding="utf-8")
    result = run("prepare", src, "-o", tmp_path / "split", "--columns", "user-id,game,hours", "--min-rating", "1")
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "split" / "summary.json").read_text())
    dropped = summary["rows_below_min_rating"]
    assert dropped > 0 and summary["value_column"]["use"] == "binarised"
    assert f"value column 'hours': binarised at >= 1: {dropped:,} pairs dropped" in result.output


@pytest.mark.parametrize("extra, fragment", [
    (["--model", "popularity"], "--confidence is used by --model warp"),
    (["--sub-models", "2"], "does not combine with sub-models"),
])
def test_train_refuses_confidence_where_it_is_not_used(tmp_path, extra, fragment):
    src = tmp_path / "t.tsv"
    src.write_text("".join(f"u{u}\ti{i}\t{u + i}\n" for u in range(10) for i in range(6)), encoding="utf-8")
    result = run("train", src, "-o", tmp_path / "m.npz", "--confidence", "log", *extra)
    assert result.exit_code == 2 and fragment in result.output and "Traceback" not in result.output
    assert not (tmp_path / "m.npz").exists()


def test_train_refuses_confidence_settings_without_a_confidence(tmp_path):
    src = tmp_path / "t.tsv"
    src.write_text("".join(f"u{u}\ti{i}\t{u + i}\n" for u in range(10) for i in range(6)), encoding="utf-8")
    result = run("train", src, "-o", tmp_path / "m.npz", "--alpha", "3")
    assert result.exit_code == 2 and "only matter with a confidence" in result.output
    assert not (tmp_path / "m.npz").exists()


def test_train_confidence_needs_a_value_column(tmp_path):
    src = tmp_path / "t.tsv"
    src.write_text("".join(f"u{u}\ti{i}\n" for u in range(10) for i in range(6)), encoding="utf-8")
    result = run("train", src, "-o", tmp_path / "m.npz", "--confidence", "linear")
    assert result.exit_code == 2 and "needs a value column" in result.output


def test_synth_cli_writes_counts(tmp_path):
    result = run("synth", "-o", tmp_path, "--users", 100, "--items", 60, "--interactions", 1000,
                 "--values", "counts", "--noise", 0.3)
    assert result.exit_code == 0, result.output
    df = pd.read_csv(tmp_path / "ratings.tsv", sep="\t", header=None)
    assert df[2].min() >= 1 and df[2].max() > 5


def test_sub_models_refuse_confidence_instead_of_dropping_it():
    from mrec_warp.data.interactions import Interactions
    from mrec_warp.stages.submodels import fit_submodels
    from mrec_warp.errors import InputError

    counts = sp.random(40, 30, density=0.2, format="csr", random_state=0, dtype=np.float32) * 10
    data = Interactions(counts, [f"u{i}" for i in range(40)], [f"i{j}" for j in range(30)])
    with pytest.raises(InputError, match="sub-models do not use confidence"):
        fit_submodels(data, {"factors": 4, "epochs": 1, "confidence": "log"}, n_models=2)


@pytest.mark.parametrize("model,two_columns,three_columns", [
    ("warp", "no value column: every row is a positive of weight 1",
     "value column (3rd) ignored: every row is a positive of weight 1 (--confidence log to weight by it)"),
    ("wrmf", "wrmf: confidence 1 + alpha * 1 (no value column)", "wrmf: confidence 1 + alpha * 1 (values ignored)"),
])
def test_the_value_line_of_train_says_whether_the_file_has_values(tmp_path, model, two_columns, three_columns):
    """A two-column file has no value column to ignore: train's log says so, and keeps the
    hint to weight by the values only for a file that has them."""
    rows = [(f"u{u}", f"i{(u * 3 + j) % 7}") for u in range(12) for j in range(3)]
    pairs, valued = tmp_path / "pairs.tsv", tmp_path / "valued.tsv"
    pairs.write_text("".join(f"{u} {i}\n" for u, i in rows))  # space-separated, as the docs' example
    valued.write_text("".join(f"{u}\t{i}\t{n + 1}\n" for n, (u, i) in enumerate(rows)))
    for path, expected, other in ((pairs, two_columns, three_columns), (valued, three_columns, two_columns)):
        result = run("train", path, "-o", tmp_path / "m.npz", "--model", model, "--epochs", "1", "--factors", "2",
                     "--confidence", "none", "-v")
        assert result.exit_code == 0, result.output
        assert expected in result.stderr and other not in result.stderr, result.stderr
        assert "ignored" not in result.stderr or path == valued, result.stderr
