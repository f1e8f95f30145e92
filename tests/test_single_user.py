"""One user at a time: the matrix-vector path gives the batch path's lists, and anonymous
histories get the lists fold-in + recommend would give, without changing the model."""
from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest

from mrec_warp.data.interactions import Interactions
from mrec_warp.models import EASE, WARP, WRMF, HybridWARP, ItemKNN, Popularity
from mrec_warp.models import single_user
from mrec_warp.stages.recommend import write_recommendations


def _interactions(csr):
    user_ids = np.array([f"u{u}" for u in range(csr.shape[0])])
    item_ids = np.array([f"i{i}" for i in range(csr.shape[1])])
    coo = csr.tocoo()
    return Interactions.from_dataframe(pd.DataFrame({"user": user_ids[coo.row], "item": item_ids[coo.col]}),
                                       user_ids=user_ids, item_ids=item_ids)


@pytest.fixture(scope="module")
def data(planted):
    return _interactions(planted[0])


@pytest.fixture(scope="module")
def warp(data):
    return WARP(factors=16, epochs=3, random_state=0).fit(data)


@pytest.fixture(scope="module")
def wrmf(data):
    return WRMF(factors=16, epochs=2, random_state=0).fit(data)


def _one_by_one(model, k, **kwargs):
    pairs = [model.recommend(u, k=k, **kwargs) for u in range(model.n_users)]
    return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])


@pytest.mark.parametrize("name", ["warp", "wrmf"])
def test_one_user_gets_the_batch_list(name, request):
    model = request.getfixturevalue(name)
    batch_items, batch_scores = model.recommend(k=10)  # all users: the 256-row grid
    items, scores = _one_by_one(model, 10)
    np.testing.assert_array_equal(items, batch_items)
    np.testing.assert_allclose(scores, batch_scores, rtol=1e-5)
    side = single_user.item_side(model)
    assert side is not None and side.items is model.item_factors_  # the model's array, no copy


def test_one_user_matches_the_written_file(warp, tmp_path):
    out = tmp_path / "recs.tsv"
    write_recommendations(warp, out, k=5)
    written = pd.read_csv(out, sep="\t", header=None, names=["user", "item", "score", "rank"], dtype=str)
    for user in ("u0", "u17", "u599"):
        frame = warp.recommend_frame(user, k=5)
        assert frame["item"].tolist() == written.loc[written["user"] == user, "item"].tolist()


def test_filters_and_no_exclusion_match_the_batch(warp):
    banned = [3, 7, 11, 40]
    batch_items, _ = warp.recommend(k=8, exclude=None, filter_items=banned)
    items, _ = _one_by_one(warp, 8, exclude=None, filter_items=banned)
    np.testing.assert_array_equal(items, batch_items)
    assert not np.isin(items, banned).any()


def test_exact_ties_fall_back_to_the_batch_order(data):
    model = WARP(factors=8, epochs=2, random_state=1).fit(data)
    factors = model.item_factors_.copy()
    bias = model.item_bias_.copy()
    factors[1::2] = factors[0::2]  # every odd item ties with the even one before it
    bias[1::2] = bias[0::2]
    model.item_factors_, model.item_bias_ = factors, bias
    batch_items, _ = model.recommend(k=6)
    items, _ = _one_by_one(model, 6)
    np.testing.assert_array_equal(items, batch_items)
    # at the user's own row of the file's grid (the server's way) the lists are the same
    for user in range(0, model.n_users, 5):
        few_items, _ = single_user.recommend_few(model, np.array([user]), 6, model.train_, None, positions=[user])
        np.testing.assert_array_equal(few_items[0], batch_items[user])
    # a tie goes to the lower index, as in the batch kernel: an odd item leads a list only
    # when its even twin is one of the user's training items
    for user, first in enumerate(items[:, 0]):
        assert first % 2 == 0 or first - 1 in model.train_[user].indices


def test_cache_follows_training(data, planted):
    model = WARP(factors=8, epochs=1, random_state=2).fit(data)
    model.recommend(0, k=5)  # fills the cache
    before = single_user.item_side(model)
    model.partial_fit(data, epochs=1)  # item factors change in place
    assert single_user.item_side(model) is not before
    batch_items, _ = model.recommend(k=5)
    np.testing.assert_array_equal(model.recommend(3, k=5)[0], batch_items[3])


def test_short_catalogue_pads_like_the_batch(data):
    model = WARP(factors=4, epochs=1, random_state=0).fit(data)
    n = model.n_items
    keep_two = np.arange(n - 2)  # only two items left for anyone
    for user in (0, 5):
        items, scores = model.recommend(user, k=4, exclude=None, filter_items=keep_two)
        batch_items, batch_scores = model.recommend(np.arange(20), k=4, exclude=None, filter_items=keep_two)
        np.testing.assert_array_equal(items, batch_items[user])
        assert list(items[2:]) == [-1, -1] and np.isneginf(scores[2:]).all()


@pytest.mark.parametrize("make", [lambda d: WARP(factors=16, epochs=3, random_state=0).fit(d),
                                  lambda d: WRMF(factors=16, epochs=2, random_state=0).fit(d),
                                  lambda d: ItemKNN().fit(d), lambda d: EASE().fit(d),
                                  lambda d: Popularity().fit(d),
                                  lambda d: HybridWARP(factors=8, epochs=2, random_state=0).fit(d)],
                         ids=["warp", "wrmf", "itemknn", "ease", "popularity", "hybrid"])
def test_history_gets_the_fold_in_list(make, data):
    model = make(data)
    history = ["i4", "i9", "i9", "i120", "i33"]  # a repeat counts once
    n_users = model.n_users
    items, scores = model.recommend_history(model.item_indices(history), k=10)
    assert model.n_users == n_users  # the model is unchanged
    folded = copy.deepcopy(model).fold_in([("new", i) for i in history])
    expected, expected_scores = folded.recommend(folded.user_indices("new")[0], k=10)
    np.testing.assert_array_equal(items, expected)
    np.testing.assert_allclose(scores, expected_scores, rtol=1e-5)
    assert not np.isin(items, model.item_indices(history)).any()


def test_wrmf_fold_in_uses_one_cached_gram(wrmf):
    g1 = wrmf._fold_in_gram()
    assert wrmf._fold_in_gram() is g1
    np.testing.assert_allclose(g1, wrmf._gram(wrmf.item_factors_), rtol=1e-5)


def test_history_of_unknown_items_is_refused(data):
    from mrec_warp import InputError

    with pytest.raises(InputError, match="out of range"):
        WARP(factors=4, epochs=1, random_state=0).fit(data).recommend_history([10**6], k=3)


def test_hybrid_with_features_folds_in_an_anonymous_history(data):
    users = pd.DataFrame({"id": data.user_ids, "feature": [f"g{n % 3}" for n in range(data.n_users)]})
    items = pd.DataFrame({"id": data.item_ids, "feature": [f"t{n % 5}" for n in range(data.n_items)]})
    model = HybridWARP(factors=8, epochs=2, random_state=0).fit(data, user_features=users, item_features=items)
    history = ["i4", "i9", "i120"]
    items_out, scores = model.recommend_history(model.item_indices(history), k=8)
    folded = copy.deepcopy(model).fold_in([("someone new", i) for i in history])
    expected, expected_scores = folded.recommend(folded.user_indices("someone new")[0], k=8)
    np.testing.assert_array_equal(items_out, expected)
    np.testing.assert_allclose(scores, expected_scores, rtol=1e-5)
