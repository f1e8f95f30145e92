"""WRMF's settings chosen on the hold-out (``factors``, ``alpha``, ``regularization`` at "auto")."""
import logging

import numpy as np
import pytest
import scipy.sparse as sp

from mrec_warp.models import WRMF
from mrec_warp.models import wrmf_search
from mrec_warp.errors import InputError
from mrec_warp.models.base import load
from mrec_warp.progress import Progress


def blocks(n_users=240, n_items=120, n_blocks=8, per_user=12, seed=0):
    """Users each drawn from one of ``n_blocks`` disjoint item blocks: a rank-``n_blocks`` set."""
    rng = np.random.default_rng(seed)
    size = n_items // n_blocks
    rows, cols = [], []
    for u in range(n_users):
        b = u % n_blocks
        items = rng.choice(size, per_user, replace=False) + b * size
        rows += [u] * per_user
        cols += items.tolist()
    return sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(n_users, n_items))


def test_selection_picks_the_planted_rank(monkeypatch):
    # candidates of 1 and 8 factors on a set of 8 disjoint blocks: 1 factor cannot tell them apart
    monkeypatch.setattr(wrmf_search, "GRID", ((1, 1.0, 1.0), (8, 1.0, 1.0)))
    model = WRMF(regularization=1.0, alpha=3.0, random_state=0).fit(blocks())
    assert model.factors_ == 8 and model.item_factors_.shape[1] == 8
    assert model.factors == "auto"


def test_selection_picks_the_regularization_that_clearly_wins(monkeypatch):
    # almost no penalty with 64 factors on 240 users: the factors fit the noise of each user's 12 items
    monkeypatch.setattr(wrmf_search, "GRID", ((64, 1e-4, 1.0), (64, 40.0, 1.0)))
    model = WRMF(factors=64, alpha=3.0, random_state=0).fit(blocks(n_blocks=4))
    assert model.regularization_ == 40.0


def test_an_explicit_value_is_never_searched(caplog):
    with caplog.at_level(logging.DEBUG, logger="mrec_warp"):
        model = WRMF(factors=16, regularization=5.0, random_state=0).fit(blocks(), progress=Progress())
    assert model.factors_ == 16 and model.regularization_ == 5.0
    tried = [r.getMessage() for r in caplog.records if "wrmf: tried" in r.getMessage()]
    # only alpha is searched: every setting tried keeps the explicit two
    assert len(tried) == 2 and all("factors=16 " in t and "regularization=5:" in t for t in tried)
    assert model.alpha_ in {3.0, 30.0}  # the fixed alpha (3 on this small binary set) and 10x it


def test_all_explicit_is_the_plain_fit_and_select_false_the_fixed_defaults():
    X = blocks()
    fixed = WRMF(select=False, random_state=3).fit(X)
    plain = WRMF(factors=64, regularization=40.0, alpha=fixed.alpha_, random_state=3).fit(X)
    assert (fixed.factors_, fixed.regularization_) == (64, 40.0)
    np.testing.assert_array_equal(fixed.item_factors_, plain.item_factors_)
    np.testing.assert_array_equal(fixed.user_factors_, plain.user_factors_)
    assert fixed.best_epoch_ == plain.best_epoch_


def test_log_lines_one_per_candidate_with_v_and_one_summary(caplog):
    with caplog.at_level(logging.DEBUG, logger="mrec_warp"):
        WRMF(random_state=0).fit(blocks(), progress=Progress())
    tried = [r for r in caplog.records if "wrmf: tried" in r.getMessage()]
    chose = [r for r in caplog.records if "wrmf: chose" in r.getMessage()]
    assert len(tried) == len(wrmf_search.GRID) and all(r.levelno == logging.DEBUG for r in tried)
    assert len(chose) == 1 and chose[0].levelno == logging.INFO
    assert "settings tried" in chose[0].getMessage()


def test_model_file_records_the_chosen_values_and_loads(tmp_path):
    X = blocks()
    model = WRMF(random_state=0).fit(X)
    path = tmp_path / "m.npz"
    model.save(path)
    back = load(path)
    assert back.factors == "auto" and back.select is True
    for name in ("factors_", "alpha_", "regularization_"):
        assert getattr(back, name) == getattr(model, name)
    np.testing.assert_array_equal(back.item_factors_, model.item_factors_)
    users = np.arange(10)
    np.testing.assert_array_equal(back.recommend(users, k=5)[0], model.recommend(users, k=5)[0])
    # fold-in reads the chosen regularization
    assert back.regularization_in_force() == model.regularization_


def test_a_file_whose_factors_disagree_with_its_arrays_is_refused(tmp_path):
    model = WRMF(random_state=0, max_epochs=3).fit(blocks())
    model.factors_ = model.factors_ + 1
    with pytest.raises(InputError, match="factors_ .* does not match"):  # save checks by loading it back
        model.save(tmp_path / "m.npz")


def test_fixed_epochs_and_given_validation_choose_too():
    X = blocks()
    model = WRMF(epochs=4, random_state=0).fit(X)
    assert model.best_epoch_ == 4 and model.factors_ in (64, 128)
    fit, val = X.copy(), X.copy()
    trial = WRMF(random_state=0, max_epochs=12).fit(fit, validation=val)
    assert trial.regularization_ in {40.0, 150.0, 15.0}


def test_tune_cost_counts_the_search():
    from mrec_warp.models.tuning import TrialShape

    shape = TrialShape(users=1000, items=2000, nnz=50_000, cooc=0.0, deg2=0.0, val_users=900)
    fixed = WRMF.fit_cost(shape, WRMF.trial_params({"factors": 64, "alpha": 3.0, "regularization": 40.0}, {}, 10))
    chosen = WRMF.fit_cost(shape, WRMF.trial_params({}, {}, 10))
    wide = WRMF.fit_cost(shape, WRMF.trial_params({"factors": 128}, {}, 10))  # alpha, regularization chosen
    assert fixed < chosen < wide
    assert WRMF.fit_cost(shape, WRMF.trial_params({"select": False}, {}, 10)) == fixed


def test_where_the_fixed_defaults_win_the_model_is_the_fixed_fit_bit_for_bit(monkeypatch):
    # the only other setting cannot win (no penalty at all): the fit is the one without the search
    monkeypatch.setattr(wrmf_search, "GRID", ((64, 40.0, 1.0), (64, 0.0, 30.0)))
    X = blocks()
    chosen = WRMF(random_state=5).fit(X)
    fixed = WRMF(select=False, random_state=5).fit(X)
    assert (chosen.factors_, chosen.regularization_, chosen.alpha_) == (64, 40.0, fixed.alpha_)
    assert chosen.best_epoch_ == fixed.best_epoch_
    np.testing.assert_array_equal(chosen.item_factors_, fixed.item_factors_)
    np.testing.assert_array_equal(chosen.user_factors_, fixed.user_factors_)
