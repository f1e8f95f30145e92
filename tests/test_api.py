"""The Python API as LightFM and implicit users reach for it: single indices, range checks,
one str id, ids at fit time, predict on pairs, filter_items, neighbours, fold-in."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from mrec_warp import InputError, Interactions
from mrec_warp.models import WARP, Popularity, load
from mrec_warp.models import base

from .conftest import planted_low_rank


@pytest.fixture(scope="module")
def data():
    train, _ = planted_low_rank(n_users=300, n_items=120, per_user=20, seed=3)
    return train


@pytest.fixture(scope="module")
def named(data):
    """Users named "0".."299" as text: "196" is a user, and so are "1", "9" and "6"."""
    return Interactions(data, [str(u) for u in range(data.shape[0])], [f"i{i}" for i in range(data.shape[1])])


@pytest.fixture(scope="module")
def model(named):
    return WARP(factors=8, epochs=3, random_state=0).fit(named)


# -- indices ------------------------------------------------------------------------------------
def test_a_single_index_gives_one_dimensional_results(model):
    items, scores = model.recommend(0, k=5)
    many_items, many_scores = model.recommend([0], k=5)
    assert items.shape == (5,) and scores.shape == (5,)
    np.testing.assert_array_equal(items, many_items[0])
    nbrs, sims = model.similar_items(50, k=4)
    assert nbrs.shape == (4,) and 50 not in nbrs
    np.testing.assert_array_equal(nbrs, model.similar_items([50], k=4)[0][0])


@pytest.mark.parametrize("bad", [[5000], [-1], 300, [0, -2]])
def test_out_of_range_and_negative_indices_are_input_errors(model, bad):
    # [-1] used to return the last user's list; [5000] a raw numpy IndexError
    with pytest.raises(InputError, match="out of range"):
        model.recommend(bad, k=3)
    with pytest.raises(InputError, match="out of range"):
        model.similar_items(bad, k=3)


def test_ids_given_as_indices_are_refused(model):
    with pytest.raises(InputError, match="integers"):
        model.recommend(["196"], k=3)


# -- ids ----------------------------------------------------------------------------------------
def test_a_single_str_id_is_one_id_not_its_characters(model):
    assert model.user_indices("196").tolist() == [196]
    table = model.recommend_frame("196", k=3)
    assert table["user"].unique().tolist() == ["196"] and len(table) == 3
    assert model.item_indices("i7").tolist() == [7]


def test_fit_takes_the_ids_of_a_plain_matrix(data, tmp_path):
    users = [f"user-{u}" for u in range(data.shape[0])]
    items = [f"item {i}" for i in range(data.shape[1])]
    for cls in (WARP, Popularity):
        params = dict(factors=4, epochs=1, random_state=0) if cls is WARP else {}
        fitted = cls(**params).fit(data, user_ids=users, item_ids=items)
        assert fitted.user_ids.tolist() == users and fitted.item_ids.tolist() == items
        table = fitted.recommend_frame(["user-7"], k=2)
        assert table["user"].tolist() == ["user-7", "user-7"] and table["item"].str.startswith("item ").all()
        fitted.save(tmp_path / "m.npz")
        assert load(tmp_path / "m.npz").user_ids.tolist() == users
    with pytest.raises(InputError, match="user ids"):
        WARP(epochs=1).fit(data, user_ids=users[:-1], item_ids=items)


def test_integer_ids_in_a_model_with_generated_ids_say_so_once(data, tmp_path):
    fitted = Popularity().fit(data)  # no ids: rows are named "0".."n-1"
    with pytest.warns(base.GeneratedIdsWarning, match="row/column numbers"):
        table = fitted.recommend_frame([196], k=2)
    assert table["user"].unique().tolist() == ["196"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fitted.recommend_frame([5], k=2)  # once per model is enough
        fitted.recommend_frame(["5"], k=2)
    fitted.save(tmp_path / "g.npz")
    with pytest.warns(base.GeneratedIdsWarning):  # the saved model still knows its ids were generated
        load(tmp_path / "g.npz").user_indices(3)
    named_model = Popularity().fit(data, user_ids=np.arange(data.shape[0]), item_ids=np.arange(data.shape[1]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        named_model.user_indices([196])  # the user's own numeric ids: nothing to say


# -- predict ------------------------------------------------------------------------------------
def test_predict_broadcasts_users_and_items_like_lightfm(model):
    full = model.score_users(np.array([0, 4]))
    np.testing.assert_allclose(model.predict(0, [1, 2]), full[0, [1, 2]], rtol=1e-6)
    np.testing.assert_allclose(model.score(0, [1, 2]), full[0, [1, 2]], rtol=1e-6)
    np.testing.assert_allclose(model.predict([0, 4], 7), full[:, 7], rtol=1e-6)
    np.testing.assert_allclose(model.predict([0, 4], [3, 9]), [full[0, 3], full[1, 9]], rtol=1e-6)
    one = model.predict(4, 9)
    assert np.ndim(one) == 0 and one == pytest.approx(full[1, 9], rel=1e-6)
    with pytest.raises(InputError, match="pair up"):
        model.predict([0, 1, 2], [1, 2])
    with pytest.raises(InputError, match="out of range"):
        model.predict(0, 120)


# -- filter_items -------------------------------------------------------------------------------
def test_filter_items_are_never_recommended(model):
    users = np.arange(50)
    plain, _ = model.recommend(users, k=5)
    banned = np.unique(plain[:, :2])
    items, _ = model.recommend(users, k=5, filter_items=banned)
    assert not np.isin(items, banned).any()
    assert (items >= 0).all()  # the lists are refilled, not shortened
    for u in users:  # training items stay excluded too
        assert not set(items[u]) & set(model.train_[u].indices)
    table = model.recommend_frame(["0", "1"], k=5, filter_items=model.item_ids[banned])
    assert not table["item"].isin(model.item_ids[banned]).any()


# -- neighbours ---------------------------------------------------------------------------------
def test_similar_users_and_similar_by_id(model):
    nbrs, sims = model.similar_users([3, 10], k=5)
    assert nbrs.shape == (2, 5) and 3 not in nbrs[0] and 10 not in nbrs[1]
    assert (np.diff(sims, axis=1) <= 1e-6).all()
    unit = model.user_factors / np.linalg.norm(model.user_factors, axis=1, keepdims=True)
    np.testing.assert_allclose(sims[0], unit[nbrs[0]] @ unit[3], rtol=1e-5)
    table = model.similar(["i5", "i9"], k=3)
    assert list(table.columns) == ["item", "similar_item", "score", "rank"]
    assert table["item"].tolist() == ["i5"] * 3 + ["i9"] * 3 and table["rank"].tolist() == [1, 2, 3] * 2
    by_index, _ = model.similar_items(5, k=3)
    assert table["similar_item"].tolist()[:3] == model.item_ids[by_index].tolist()
    users = model.similar("196", k=2, kind="user")
    assert list(users.columns) == ["user", "similar_user", "score", "rank"] and len(users) == 2
    with pytest.raises(InputError, match="no item factors"):
        Popularity().fit(model.train_).similar_items(0)


# -- fold-in ------------------------------------------------------------------------------------
def test_fold_in_from_pairs_and_from_csr_rows(named):
    pairs = [("new-a", "i1"), ("new-a", "i2"), ("new-b", "i3")]
    m1 = WARP(factors=8, epochs=2, random_state=0).fit(named)
    m1.fold_in(pairs, epochs=3)
    assert m1.user_ids[-2:].tolist() == ["new-a", "new-b"]
    csr = sp.csr_matrix(([1.0, 1.0, 1.0], ([0, 0, 1], [1, 2, 3])), shape=(2, named.n_items))
    m2 = WARP(factors=8, epochs=2, random_state=0).fit(named)
    m2.fold_in(csr, epochs=3, user_ids=["new-a", "new-b"])
    np.testing.assert_array_equal(m1.user_factors, m2.user_factors)  # the same history either way
    items, _ = m2.recommend(m2.user_indices("new-a"), k=10)
    assert not {1, 2} & set(items[0].tolist())
    with pytest.raises(InputError, match="user_ids"):
        WARP(factors=8, epochs=1).fit(named).fold_in(csr)
    with pytest.raises(InputError, match="pairs"):
        m1.fold_in([("only-one-field",)])


def test_popularity_serves_new_users_from_their_history(named):
    pop = Popularity().fit(named)
    top = pop.recommend(0, k=named.n_items, exclude=None)[0]
    seen = [named.item_ids[top[0]], named.item_ids[top[2]]]
    pop.fold_in(pd.DataFrame({"user": ["newcomer", "newcomer"], "item": seen}))
    table = pop.recommend_frame("newcomer", k=3)
    expected = [named.item_ids[i] for i in top if named.item_ids[i] not in seen][:3]
    assert table["item"].tolist() == expected
    assert pop.fold_in_summary_["new_users"] == 1
    np.testing.assert_array_equal(pop.item_counts_, Popularity().fit(named).item_counts_)  # baseline unchanged


# -- what a new user tripped on ------------------------------------------------------------------
def test_repeated_ids_are_refused_at_fit_not_at_load(data):
    users = ["a"] * data.shape[0]  # every row named "a": look-ups would pick one row silently
    with pytest.raises(InputError, match="user id 'a' names more than one row"):
        WARP(factors=4, epochs=1).fit(data, user_ids=users, item_ids=[f"i{j}" for j in range(data.shape[1])])
    with pytest.raises(ValueError, match="item id 'x' names more than one column"):
        Interactions(data, [f"u{i}" for i in range(data.shape[0])], ["x"] * data.shape[1])


@pytest.mark.parametrize("bad", [-3.0, np.nan])
def test_negative_or_nan_values_are_not_positives(data, bad):
    X = data.copy().astype(np.float32)
    X.data[5] = bad
    with pytest.raises(InputError, match="1 stored value is negative or not a number"):
        Popularity().fit(X)


def test_k_beyond_the_catalogue_is_capped_not_padded(model):
    items, scores = model.recommend(0, k=10 * model.n_items)
    assert items.shape == (model.n_items,)  # capped at the catalogue
    seen = model.train_[0].nnz
    assert (items[:model.n_items - seen] >= 0).all() and (items[model.n_items - seen:] == -1).all()
    assert np.isneginf(scores[items == -1]).all()
