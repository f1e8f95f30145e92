"""Defaults chosen on the selection suite (issue 22): what they are, the data-aware ones'
rules, and early stopping's hold-out following the pairs rather than the row order."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from mrec_warp.data.interactions import Interactions
from mrec_warp.models import WARP, WRMF
from mrec_warp.models.base import load
from mrec_warp.models.ease import EASE
from mrec_warp.models.itemknn import ItemKNN
from mrec_warp.models.slim import SLIM
from mrec_warp.models.hybrid import HybridWARP
from mrec_warp.models.early_stopping import holdout_split, id_keys, sample_users
from mrec_warp.data.confidence import BINARY_ALPHA
from mrec_warp.models.wrmf import AUTO_ALPHA, auto_alpha


def _pairs(n_users=40, n_items=30, seed=3):
    rng = np.random.default_rng(seed)
    rows = [(f"u{u}", f"i{i}", float(rng.integers(1, 20)))
            for u in range(n_users) for i in rng.choice(n_items, rng.integers(2, 12), replace=False)]
    return pd.DataFrame(rows, columns=["user", "item", "value"])


def _held_pairs(df, seed):
    X = Interactions.from_dataframe(df)
    fit, val = holdout_split(X.matrix, 0.25, np.random.default_rng(seed), id_keys(X.user_ids, X.n_users),
                             id_keys(X.item_ids, X.n_items))
    coo = val.tocoo()
    held = {(X.user_ids[r], X.item_ids[c]) for r, c in zip(coo.row, coo.col)}
    users = sample_users(val, 5, np.random.default_rng(seed), id_keys(X.user_ids, X.n_users))
    return held, set(X.user_ids[users]), fit.nnz


def test_validation_split_follows_the_pairs_not_the_row_order():
    df = _pairs()
    shuffled = df.sample(frac=1.0, random_state=7).reset_index(drop=True)
    assert Interactions.from_dataframe(shuffled).user_ids.tolist() != Interactions.from_dataframe(df).user_ids.tolist()
    held, users, n_fit = _held_pairs(df, seed=5)
    held2, users2, n_fit2 = _held_pairs(shuffled, seed=5)
    assert held == held2 and users == users2 and len(users) == 5
    assert n_fit == n_fit2 and len(held) + n_fit == len(df)
    held3, _, _ = _held_pairs(df, seed=6)
    assert held3 != held  # the seed still decides


def test_warp_fit_holds_out_the_same_pairs_in_any_row_order(monkeypatch):
    """Through the model's own fit: the hold-out it early-stops on is the same set of pairs."""
    import mrec_warp.models.early_stopping as early_stopping

    seen = []
    real = early_stopping.holdout_split

    def spy(csr, fraction, rng, user_keys=None, item_keys=None):
        fit, val = real(csr, fraction, rng, user_keys, item_keys)
        seen.append(val)
        return fit, val

    monkeypatch.setattr(early_stopping, "holdout_split", spy)
    df = _pairs()
    held = []
    for frame in (df, df.iloc[::-1].reset_index(drop=True)):
        X = Interactions.from_dataframe(frame)
        WARP(factors=4, max_epochs=2, random_state=1).fit(X)
        coo = seen[-1].tocoo()
        held.append({(X.user_ids[r], X.item_ids[c]) for r, c in zip(coo.row, coo.col)})
    assert held[0] == held[1] and held[0]


def test_defaults_as_stated():
    for cls in (WARP, HybridWARP):
        params = cls().get_params()
        assert (params["eval_every"], params["patience"], params["min_improvement"]) == (1, 10, 0.0)
        assert params["validation_users"] == 1000 and params["warm_epochs"] == 0 and params["refit_reuse"] == 0.25
    assert WRMF().get_params()["alpha"] == "auto"
    # chosen on the hold-out by default; the fixed values are what select=False fits
    assert EASE().get_params()["l2"] == "auto" and EASE.FIXED == {"l2": 200.0}
    assert (SLIM().l1, SLIM().l2, ItemKNN().neighbours) == ("auto", "auto", "auto")
    assert (SLIM.FIXED, ItemKNN.FIXED["neighbours"]) == ({"l1": 1.0, "l2": 100.0}, 800)


def test_wrmf_auto_alpha_on_a_binary_matrix():
    X = sp.csr_matrix(np.array([[1.0, 0, 1.0], [0, 1.0, 1.0], [1.0, 1.0, 0]], dtype=np.float32))
    model = WRMF(factors=2, epochs=1, random_state=0).fit(X)
    assert model.alpha_ == BINARY_ALPHA == auto_alpha(None) == 3.0
    np.testing.assert_allclose(model.confidence_, 1.0 + BINARY_ALPHA)
    # every value equal but not 1: the same confidences as the 0/1 file
    same = WRMF(factors=2, epochs=1, random_state=0).fit(X * 4.0)
    assert same.alpha_ == pytest.approx(BINARY_ALPHA / 4.0)
    np.testing.assert_allclose(same.confidence_, 1.0 + BINARY_ALPHA, rtol=1e-6)
    # without values (use_values=False) too
    plain = WRMF(factors=2, epochs=1, random_state=0).fit(X * 4.0, use_values=False)
    np.testing.assert_allclose(plain.confidence_, 1.0 + BINARY_ALPHA)


def _binary(n_users, n_items, per_user, seed=0):
    """A binary user x item matrix, ``per_user`` distinct items in every row."""
    rng = np.random.default_rng(seed)
    cols = np.concatenate([rng.choice(n_items, per_user, replace=False) for _ in range(n_users)])
    rows = np.repeat(np.arange(n_users), per_user)
    return sp.csr_matrix((np.ones(rows.size, dtype=np.float32), (rows, cols)), shape=(n_users, n_items))


def test_wrmf_auto_alpha_falls_from_3_to_1_as_a_binary_file_grows():
    from mrec_warp.data.confidence import BINARY_EVIDENCE, binary_alpha, binary_evidence

    # the measured sets (docs/models/wrmf.rst, 'alpha "auto"'): a 2k x 13k long tail gets 3,
    # 20k users x 400 items gets 1
    assert binary_alpha((2000, 13472, 71989)) == BINARY_ALPHA == 3.0
    assert binary_alpha((20_000, 400, 158_186)) == AUTO_ALPHA == 1.0
    assert binary_alpha() == BINARY_ALPHA  # no sizes: the small-file alpha
    assert binary_alpha((1, 1, 1)) == BINARY_ALPHA and binary_evidence(0, 0, 0) == 0.0
    # more users of the same habits (8 pairs each, 400 items): 3, then down without a jump, then 1
    sizes = [(int(u), 400, int(u) * 8) for u in np.geomspace(3000, 60_000, 200)]
    evidence = np.array([binary_evidence(*s) for s in sizes])
    alphas = np.array([binary_alpha(s) for s in sizes])
    low, high = BINARY_EVIDENCE
    assert np.all(alphas[evidence <= low] == 3.0) and np.all(alphas[evidence >= high] == 1.0)
    between = (evidence > low) & (evidence < high)
    assert between.sum() > 10 and np.all((alphas[between] < 3.0) & (alphas[between] > 1.0))
    assert np.all(np.diff(alphas) <= 0) and np.abs(np.diff(np.log(alphas))).max() < 0.1  # (a jump: log 3 = 1.1)


def test_wrmf_auto_alpha_on_a_large_and_a_small_binary_matrix():
    large = _binary(20_000, 400, 8)  # 160,000 pairs, 400 per item: evidence about 190,000
    model = WRMF(factors=2, epochs=1, random_state=0).fit(large)
    assert model.alpha_ == AUTO_ALPHA
    np.testing.assert_allclose(model.confidence_, 1.0 + AUTO_ALPHA)
    # a quarter of its users: each item vector sees 4 times less data, and the pairs weigh 1 + 3
    small = WRMF(factors=2, epochs=1, random_state=0).fit(large[:5000])
    assert small.alpha_ == BINARY_ALPHA
    # every value 4 on the large file: the same confidences as its 0/1 file
    fours = WRMF(factors=2, epochs=1, random_state=0).fit(large * 4.0)
    assert fours.alpha_ == pytest.approx(AUTO_ALPHA / 4.0)
    np.testing.assert_allclose(fours.confidence_, 1.0 + AUTO_ALPHA, rtol=1e-6)
    # values that differ stay at 1 and a number is used as given, large or small
    counts = large.copy()
    counts.data = np.random.default_rng(0).integers(1, 9, counts.nnz).astype(np.float32)
    assert WRMF(factors=2, epochs=1, random_state=0).fit(counts[:5000]).alpha_ == AUTO_ALPHA
    assert WRMF(factors=2, epochs=1, alpha=3.0, random_state=0).fit(large).alpha_ == 3.0
    assert WRMF(factors=2, epochs=1, alpha=0.5, random_state=0).fit(large[:5000]).alpha_ == 0.5


def test_wrmf_auto_alpha_counts_the_observed_pairs_not_the_matrix_shape():
    from mrec_warp.data.confidence import observed_sizes

    X = sp.csr_matrix((np.array([1.0, 0.0, 1.0], dtype=np.float32), (np.array([0, 0, 3]), np.array([1, 4, 1]))),
                      shape=(6, 9))
    # rows 1, 2, 4, 5 and seven columns are empty; the stored 0 is an observed pair
    assert observed_sizes(X) == (2, 2, 3)
    assert observed_sizes(X.tocoo()) == (2, 2, 3)
    assert observed_sizes(sp.csr_matrix((4, 3), dtype=np.float32)) == (0, 0, 0)
    # empty rows and columns do not make a small file large: a 20,000-row matrix of 600 pairs gets 3
    padded = sp.vstack([_binary(100, 400, 6), sp.csr_matrix((19_900, 400), dtype=np.float32)]).tocsr()
    assert WRMF(factors=2, epochs=1, random_state=0).fit(padded).alpha_ == BINARY_ALPHA


def test_wrmf_auto_alpha_on_counts():
    X = sp.csr_matrix(np.array([[2.0, 0, 6.0], [0, 1.0, 3.0]], dtype=np.float32))
    model = WRMF(factors=2, epochs=1, random_state=0).fit(X)
    assert AUTO_ALPHA == 1.0 and model.alpha_ == AUTO_ALPHA  # values that differ: the previous default
    np.testing.assert_allclose(model.confidence_, 1.0 + np.array([2.0, 6.0, 1.0, 3.0]), rtol=1e-6)
    logged = WRMF(factors=2, epochs=1, confidence="log", random_state=0).fit(X)
    assert logged.alpha_ == AUTO_ALPHA
    # a number is used as given
    assert WRMF(factors=2, epochs=1, alpha=2.5, random_state=0).fit(X).alpha_ == 2.5


def test_wrmf_auto_alpha_is_saved_and_an_old_numeric_alpha_still_loads(tmp_path):
    X = sp.csr_matrix(np.array([[2.0, 0, 6.0], [0, 1.0, 3.0]], dtype=np.float32))
    model = WRMF(factors=2, epochs=1, random_state=0).fit(X)
    model.save(tmp_path / "auto.npz")
    back = load(tmp_path / "auto.npz")
    assert back.get_params()["alpha"] == "auto" and back.alpha_ == pytest.approx(model.alpha_)
    assert back.resolved_alpha() == AUTO_ALPHA
    # a file written before "auto": alpha a number, no alpha_ among the attributes
    WRMF(factors=2, epochs=1, alpha=1.0, random_state=0).fit(X).save(tmp_path / "old.npz")
    with np.load(tmp_path / "old.npz", allow_pickle=False) as z:
        members = {k: z[k] for k in z.files}
    meta = json.loads(str(members["__meta__"]))
    meta["attrs"].pop("alpha_")
    members["__meta__"] = np.array(json.dumps(meta))
    np.savez(tmp_path / "old.npz", **members)
    old = load(tmp_path / "old.npz")
    assert old.get_params()["alpha"] == 1.0 and old.resolved_alpha() == 1.0
    # its fold-in weighs a new history 1 + 1, as the model was trained
    old.fold_in(sp.csr_matrix(np.array([[1.0, 0, 0]], dtype=np.float32)), user_ids=["new"])
    assert old.n_users == 3


def test_wrmf_alpha_text_other_than_auto_is_refused():
    from mrec_warp.errors import InputError

    with pytest.raises(InputError, match="alpha"):
        WRMF(alpha="big").fit(sp.csr_matrix(np.eye(3, dtype=np.float32)))


def test_wrmf_auto_alpha_on_tiny_values_saves_and_loads(tmp_path):
    # a binary file written in a tiny unit makes alpha_ = 3 / value huge; it is a real number,
    # not a count, and the model must still save (it was refused as an attribute beyond the
    # count range)
    rng = np.random.default_rng(0)
    dense = (rng.random((30, 12)) < 0.3) * 1e-10
    dense[np.arange(30), np.arange(30) % 12] = 1e-10
    model = WRMF(factors=4, epochs=2, random_state=0).fit(sp.csr_matrix(dense))
    assert model.alpha_ > 1e9
    model.save(tmp_path / "m.npz")
    loaded = WRMF.load(tmp_path / "m.npz")
    assert loaded.alpha_ == model.alpha_
    np.testing.assert_array_equal(loaded.score_users(np.arange(5)), model.score_users(np.arange(5)))


def test_the_cli_and_a_tune_grid_take_alpha_auto(tmp_path):
    from click.testing import CliRunner

    from mrec_warp.cli import main
    rng = np.random.default_rng(1)
    rows = sorted({(int(u), int(i)) for u, i in zip(rng.integers(0, 40, 600), rng.integers(0, 30, 600))})
    train = tmp_path / "train.tsv"
    train.write_text("".join(f"u{u}\ti{i}\n" for u, i in rows))
    res = CliRunner().invoke(main, ["train", str(train), "-o", str(tmp_path / "m.npz"), "--model", "wrmf",
                                    "--alpha", "auto", "--epochs", "2", "-q"])
    assert res.exit_code == 0, res.output
    assert load(tmp_path / "m.npz").alpha_ == BINARY_ALPHA
    res = CliRunner().invoke(main, ["train", str(train), "-o", str(tmp_path / "x.npz"), "--model", "wrmf",
                                    "--alpha", "soon"])
    assert res.exit_code == 2 and "'soon' is not 'auto' or a number" in res.output
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps({"wrmf": {"alpha": ["auto", 1.0]}}))
    res = CliRunner().invoke(main, ["tune", str(train), "--models", "wrmf", "--grid", str(grid), "-q",
                                    "-o", str(tmp_path / "best.json")])
    assert res.exit_code == 0, res.output
    # the table shows what alpha=auto chose on the trial's hold-out, not the word
    assert "auto" not in res.output
    chosen = [line for line in res.output.splitlines() if " alpha=" in line]
    assert any(" factors=" in line and " regularization=" in line for line in chosen), res.output


def test_one_stray_value_does_not_set_wrmf_auto_alpha():
    from mrec_warp.data.confidence import auto_alpha
    ratings = np.random.default_rng(0).integers(1, 6, 100_000).astype(float)
    clean = auto_alpha(ratings)
    ratings[17] = 1e6  # one typo among 100,000 ratings
    assert auto_alpha(ratings) == pytest.approx(clean, rel=1e-3)
