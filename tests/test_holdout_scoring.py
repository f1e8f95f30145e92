"""Early stopping's prepared hold-out scorer: the same numbers, epochs and factors as the
general top-k path it replaces, on one thread or several."""
import numpy as np
import pytest
import scipy.sparse as sp

from mrec_warp.models import WARP, WRMF
from mrec_warp.models import early_stopping
from mrec_warp.models.early_stopping import HoldoutScorer, holdout_split, precision_at_k
from mrec_warp.models.factor_model import factor_scores
from mrec_warp.topk import SCORE_ROWS


def _scoring(uf, itf, bias):
    """A ``score_users`` of these factors (what the scorer is given)."""
    return lambda rows, out=None: factor_scores(uf[rows], itf, bias, out=out)


def _random_problem(n_users, n_items, d=8, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n_users, n_items, density=0.05, format="csr", random_state=seed, dtype=np.float32)
    X.data[:] = 1
    fit, val = holdout_split(X, 0.3, rng)
    uf = rng.standard_normal((n_users, d), dtype=np.float32)
    itf = rng.standard_normal((n_items, d), dtype=np.float32)
    bias = rng.standard_normal(n_items, dtype=np.float32)
    users = np.flatnonzero(np.diff(val.indptr) > 0)
    return fit, val, uf, itf, bias, users


@pytest.mark.parametrize("with_bias", [True, False])
def test_scorer_gives_the_general_paths_precision(with_bias):
    # more users than one BLAS call: full calls and a partial last one
    fit, val, uf, itf, bias, users = _random_problem(2 * SCORE_ROWS + 37, 300)
    assert len(users) > SCORE_ROWS
    b = bias if with_bias else None
    expected = precision_at_k(lambda rows: factor_scores(uf[rows], itf, b), 300, fit, val, 10, users=users)
    scorer = HoldoutScorer(fit, val, users, 10)
    assert scorer(_scoring(uf, itf, b)) == expected
    # the buffers are reused: a second call on other factors is right too
    uf2 = uf[::-1].copy()
    assert scorer(_scoring(uf2, itf, b)) == precision_at_k(lambda rows: factor_scores(uf2[rows], itf, b), 300, fit, val, 10,
                                                  users=users)


def test_a_stored_zero_in_the_truth_is_a_hit():
    # one user, items 0..4; the held-out item 4 scores best and carries the value 0
    exclude = sp.csr_matrix(([1.0, 1.0], ([0, 0], [0, 1])), shape=(1, 5))
    truth = sp.csr_matrix(([0.0], ([0], [4])), shape=(1, 5))
    assert truth.nnz == 1
    uf = np.ones((1, 1), np.float32)
    itf = np.arange(5, dtype=np.float32)[:, None]
    assert HoldoutScorer(exclude, truth, np.array([0]), 1)(_scoring(uf, itf, None)) == 1.0


def test_no_users_scores_nan():
    X = sp.csr_matrix(np.ones((2, 3), np.float32))
    scoring = _scoring(np.ones((2, 1), np.float32), np.ones((3, 1), np.float32), None)
    assert np.isnan(HoldoutScorer(X, X, np.array([], dtype=np.int64), 2)(scoring))


@pytest.mark.parametrize("make", [lambda: WARP(factors=8, random_state=3), lambda: WRMF(factors=8, random_state=3)])
def test_early_stopping_picks_the_same_epoch_and_factors_as_the_general_path(planted, monkeypatch, make):
    train, _ = planted
    fast = make().fit(train)
    monkeypatch.setattr(early_stopping, "holdout_scorer", lambda *a, **k: None)
    general = make().fit(train)
    key = [k for k in fast.history_[0] if k.startswith("val_precision")][0]
    assert [h.get(key) for h in fast.history_] == [h.get(key) for h in general.history_]
    assert fast.best_epoch_ == general.best_epoch_
    np.testing.assert_array_equal(fast.user_factors_, general.user_factors_)
    np.testing.assert_array_equal(fast.item_factors_, general.item_factors_)


@pytest.mark.parametrize("with_bias", [True, False])
def test_scorer_on_threads_gives_the_general_paths_precision(with_bias):
    # nine calls dealt out to two threads, the last one partial
    fit, val, uf, itf, bias, users = _random_problem(8 * SCORE_ROWS + 37, 300, seed=1)
    assert len(users) > 8 * SCORE_ROWS
    b = bias if with_bias else None
    general = precision_at_k(lambda rows: factor_scores(uf[rows], itf, b), 300, fit, val, 10, users=users, n_jobs=2)
    scorer = HoldoutScorer(fit, val, users, 10, n_jobs=2)
    assert scorer.n_jobs == 2
    assert scorer(_scoring(uf, itf, b)) == general == HoldoutScorer(fit, val, users, 10)(_scoring(uf, itf, b))


def test_several_threads_use_the_scorer_unless_its_buffers_are_too_wide(planted, monkeypatch):
    train, _ = planted
    used = []
    original = early_stopping.holdout_scorer
    monkeypatch.setattr(early_stopping, "holdout_scorer",
                        lambda *a, **k: used.append(original(*a, **k)) or used[-1])
    WARP(factors=8, random_state=3, n_jobs=2, max_epochs=3).fit(train)
    WARP(factors=8, random_state=3, n_jobs=1, max_epochs=3).fit(train)
    # a catalogue whose SCORE_ROWS x items scores pass a general block: the bounded general path
    monkeypatch.setattr(early_stopping, "BLOCK_FLOATS", SCORE_ROWS * train.shape[1] - 1)
    WARP(factors=8, random_state=3, n_jobs=2, max_epochs=3).fit(train)
    WARP(factors=8, random_state=3, n_jobs=1, max_epochs=3).fit(train)
    assert [type(u).__name__ for u in used] == ["HoldoutScorer", "HoldoutScorer", "NoneType", "HoldoutScorer"]


def test_a_thread_gets_several_calls():
    fit, val, uf, itf, bias, users = _random_problem(6 * SCORE_ROWS, 50, seed=3)
    calls = -(-len(users) // SCORE_ROWS)
    assert HoldoutScorer(fit, val, users, 5, n_jobs=8).n_jobs == max(1, calls // early_stopping.CALLS_PER_THREAD)
    assert HoldoutScorer(fit, val, users[:SCORE_ROWS], 5, n_jobs=2).n_jobs == 1


def test_wrmf_on_two_threads_picks_the_same_iteration_and_factors_as_the_general_path(planted, monkeypatch):
    # (WRMF on threads is reproducible; hogwild WARP is not)
    train, _ = planted
    fast = WRMF(factors=8, random_state=3, n_jobs=2).fit(train)
    monkeypatch.setattr(early_stopping, "holdout_scorer", lambda *a, **k: None)
    general = WRMF(factors=8, random_state=3, n_jobs=2).fit(train)
    key = [k for k in fast.history_[0] if k.startswith("val_precision")][0]
    assert [h.get(key) for h in fast.history_] == [h.get(key) for h in general.history_]
    assert fast.best_epoch_ == general.best_epoch_
    np.testing.assert_array_equal(fast.user_factors_, general.user_factors_)
    np.testing.assert_array_equal(fast.item_factors_, general.item_factors_)
