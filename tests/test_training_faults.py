"""Training faults: partial_fit keeps what the model has seen, divergence and 0 epochs are refused."""
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from mrec_warp import InputError, TrainingDivergedError
from mrec_warp.data.interactions import Interactions
from mrec_warp.models import WARP
from mrec_warp.models.hybrid import HybridWARP


def _unseen_pairs(train, n, seed=0):
    """``n`` (user, item) pairs that are not in ``train``, one per user from user 0."""
    rng = np.random.default_rng(seed)
    rows, cols = [], []
    for u in range(n):
        seen = set(train[u].indices.tolist())
        rows.append(u)
        cols.append(int(rng.choice([i for i in range(train.shape[1]) if i not in seen])))
    return sp.csr_matrix((np.ones(n, np.float32), (rows, cols)), shape=train.shape)


def _as_interactions(csr, user_ids, item_ids):
    coo = csr.tocoo()
    return Interactions.from_dataframe(pd.DataFrame({"user": user_ids[coo.row], "item": item_ids[coo.col]}))


@pytest.fixture
def fitted(planted):
    train, _ = planted
    return WARP(factors=8, epochs=3, random_state=0).fit(train), train


@pytest.mark.parametrize("cls", [WARP, HybridWARP])
def test_partial_fit_adds_new_pairs_to_what_the_model_has_seen(planted, cls):
    train, _ = planted
    model = cls(factors=8, epochs=3, random_state=0).fit(train)
    new = _unseen_pairs(train, 5)
    model.partial_fit(new, epochs=1)
    expected = (train + new).astype(bool)
    assert model.train_.nnz == train.nnz + 5, "the new pairs join the old ones, not replace them"
    assert (model.train_.astype(bool) != expected).nnz == 0
    items, _ = model.recommend(k=10)
    for u in range(train.shape[0]):
        assert not set(items[u].tolist()) & set(expected[u].indices.tolist()), f"user {u} is offered a seen item"
    assert model.partial_fit_summary_["new_pairs"] == 5


def test_partial_fit_of_a_loaded_model_keeps_its_training_pairs(fitted, tmp_path):
    from mrec_warp.models import load

    model, train = fitted
    model.save(tmp_path / "m.npz")
    loaded = load(tmp_path / "m.npz")
    loaded.partial_fit(_unseen_pairs(train, 3), epochs=1)
    assert loaded.train_.nnz == train.nnz + 3


def test_partial_fit_visits_only_the_new_pairs(fitted):
    model, train = fitted
    users_before, items_before = model.user_factors.copy(), model.item_factors.copy()
    model.partial_fit(_unseen_pairs(train, 1), epochs=1)
    # one positive, of user 0: only that user's row and the items of its one step may move
    # (an epoch over all 14k training pairs would move every user)
    moved_users = np.flatnonzero(np.any(model.user_factors != users_before, axis=1))
    moved_items = np.flatnonzero(np.any(model.item_factors != items_before, axis=1))
    assert model.history_[-1]["updates"] == 1.0, "the one positive was stepped on"
    assert moved_users.tolist() == [0] and len(moved_items) == 2  # the positive and its negative


def test_partial_fit_counts_and_warns_about_unknown_ids(planted):
    train, _ = planted
    users = np.array([f"u{i}" for i in range(train.shape[0])])
    items = np.array([f"i{i}" for i in range(train.shape[1])])
    model = WARP(factors=8, epochs=2, random_state=0).fit(_as_interactions(train, users, items))
    new = pd.DataFrame({"user": ["u0", "u1", "stranger", "stranger", "u2"],
                        "item": ["i5", "i6", "i5", "i7", "no-such-item"]})
    with pytest.warns(UserWarning, match="skipped 3 of 5 pairs naming 1 user and 1 item "):
        model.partial_fit(Interactions.from_dataframe(new), epochs=1)
    assert model.partial_fit_summary_ == {"pairs": 5, "skipped_pairs": 3, "unknown_users": 1,
                                          "unknown_items": 1, "new_pairs": model.partial_fit_summary_["new_pairs"]}
    assert model.n_users == train.shape[0] and "stranger" not in set(model.user_ids.tolist())


def test_partial_fit_with_nothing_the_model_knows_is_refused(planted):
    train, _ = planted
    model = WARP(factors=8, epochs=1, random_state=0).fit(
        _as_interactions(train, np.arange(train.shape[0]).astype(str), np.arange(train.shape[1]).astype(str)))
    new = Interactions.from_dataframe(pd.DataFrame({"user": ["x", "y"], "item": ["0", "1"]}))
    with pytest.raises(InputError, match="no pairs to train on: 2 of 2"):
        model.partial_fit(new)


def test_partial_fit_after_fold_in_keeps_the_history_excluded(planted):
    train, _ = planted
    users = np.arange(train.shape[0]).astype(str)
    items = np.arange(train.shape[1]).astype(str)
    model = WARP(factors=16, epochs=8, random_state=0).fit(_as_interactions(train, users, items))
    # the newcomer has user 0's training items: its best-scored items are among them
    history = pd.DataFrame({"user": "newcomer", "item": items[train[0].indices]})
    model.fold_in(history)
    unfiltered = model.recommend_frame(["newcomer"], k=10, exclude=None)
    assert set(unfiltered["item"]) & set(history["item"]), "the test needs history items to compete"
    new = _as_interactions(_unseen_pairs(train, 5), users, items)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing skipped: no warning
        model.partial_fit(new, epochs=1)
    recs = model.recommend_frame(["newcomer"], k=10)
    assert not set(recs["item"]) & set(history["item"]), "folded-in history items came back"


def test_epochs_zero_is_refused(planted):
    train, _ = planted
    with pytest.raises(InputError, match="epochs must be >= 1"):
        WARP(epochs=0).fit(train)
    with pytest.raises(InputError, match="epochs >= 1"):
        WARP(factors=4, epochs=1, random_state=0).fit(train).partial_fit(train, epochs=0)


@pytest.mark.parametrize("cls, kwargs", [(WARP, {"epochs": 3}), (WARP, {"max_epochs": 3}),
                                         (HybridWARP, {"epochs": 2})])
def test_a_blown_up_learning_rate_is_reported(planted, cls, kwargs):
    train, _ = planted
    with pytest.raises(TrainingDivergedError, match=r"diverged at epoch 1: factor lengths grew to .*lower the "
                                                    r"learning rate from 1e\+06 to 100000"):
        cls(factors=8, learning_rate=1e6, random_state=0, **kwargs).fit(train)


def test_nan_factors_are_still_reported():
    from mrec_warp.models.warp import check_divergence

    with pytest.raises(TrainingDivergedError, match="no longer finite"):
        check_divergence([np.array([[1.0, np.nan]], np.float32)], 0.1, 0.02, "training diverged")


def _typical_lengths(model, logs):
    logs["typical"] = max(float(np.sqrt((a.astype(np.float64) ** 2).sum() / a.shape[0]))
                          for a in model._learned_arrays() if a.size)


def test_default_training_stays_far_from_the_divergence_limit(planted, ml100k_dir):
    # a guard against false alarms: defaults on planted data and MovieLens 100k (early
    # stopping) must stay two orders of magnitude below the limit
    from mrec_warp.data.ratings import read_ratings
    from mrec_warp.models.warp import DIVERGENCE_GROWTH

    df = read_ratings(ml100k_dir / "u.data", format="movielens")
    ml = Interactions.from_dataframe(df[df.value >= 4]).matrix
    limit = DIVERGENCE_GROWTH * 0.1
    # (no refit on MovieLens: early stopping runs more epochs than the refit, which repeats them)
    for cls, data, refit in ((WARP, planted[0], True), (HybridWARP, planted[0], True), (WARP, ml, False)):
        model = cls(random_state=0, refit=refit).fit(data, callbacks=[_typical_lengths])
        assert max(h["typical"] for h in model.history_) < limit / 100, cls.__name__
