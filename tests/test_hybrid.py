"""HybridWARP: cold items from features, reduction to WARP, kernel rules, new ids, persistence."""
from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from mrec_warp import InputError
from mrec_warp.data.interactions import Interactions
from mrec_warp.models import WARP, HybridWARP, load
from mrec_warp.kernels import hybrid as _hybrid
from mrec_warp.kernels import rng as _rng
from mrec_warp.models.early_stopping import precision_at_k

from .conftest import step_settings


# -- a world whose preferences are driven by item features ---------------------------------------
def planted_features(n_users=500, n_items=400, n_feats=16, per_user=24, cold_fraction=0.2, seed=0):
    """Items carry 2 of ``n_feats`` features; each user likes 2 features and picks items
    mostly by how many of them they carry (times a per-item popularity). A fifth of the items
    never appear in training: every interaction with them is test data (cold items).

    Returns (train Interactions, test DataFrame, item feature table, cold item ids).
    """
    rng = np.random.default_rng(seed)
    item_feats = np.array([rng.choice(n_feats, 2, replace=False) for _ in range(n_items)])
    F = np.zeros((n_items, n_feats))
    np.put_along_axis(F, item_feats, 1.0, axis=1)
    likes = np.zeros((n_users, n_feats))
    np.put_along_axis(likes, np.array([rng.choice(n_feats, 2, replace=False) for _ in range(n_users)]), 1.0, axis=1)
    popularity = rng.lognormal(0, 0.5, n_items)
    weight = np.exp(2.5 * likes @ F.T) * popularity
    rows = []
    for u in range(n_users):
        items = rng.choice(n_items, per_user, replace=False, p=weight[u] / weight[u].sum())
        rows += [(f"u{u}", f"i{i}") for i in items]
    df = pd.DataFrame(rows, columns=["user", "item"])
    cold = {f"i{i}" for i in rng.choice(n_items, int(cold_fraction * n_items), replace=False)}
    is_cold = df["item"].isin(cold)
    features = pd.DataFrame({"id": [f"i{i}" for i in range(n_items) for _ in range(2)],
                             "feature": [f"f{g}" for g in item_feats.ravel()]})
    return Interactions.from_dataframe(df[~is_cold]), df[is_cold], features, np.array(sorted(cold))


@pytest.fixture(scope="module")
def world():
    return planted_features()


def cold_precision(model_items, recommend_items, test, users, k=10):
    """Mean precision@k over ``users`` of the lists ``recommend_items`` (ids) against ``test``."""
    truth = test.groupby("user")["item"].agg(set)
    hits = [len(set(recommend_items[u]) & truth.get(u, set())) for u in users]
    return float(np.mean(hits)) / k


def test_cold_items_far_better_than_random_and_popularity(world):
    train, test, features, cold = world
    model = HybridWARP(random_state=0, epochs=15).fit(train, item_features=features)
    assert sorted(model.new_item_ids) == sorted(cold)  # features of unseen items are kept
    new = model.with_new_items(only=True)
    assert set(new.item_ids) == set(cold) and new.n_users == train.n_users
    users = np.array(sorted(set(test["user"]) & set(train.user_ids)))
    items, _ = new.recommend(new.user_indices(users), k=10)
    hybrid = cold_precision(None, dict(zip(users, new.item_ids[items])), test, users)

    rng = np.random.default_rng(1)
    random = cold_precision(None, {u: rng.choice(cold, 10, replace=False) for u in users}, test, users)
    # the best a non-personal ranking of new items can do from training data: by the mean
    # popularity of the items sharing each of their features
    pop = pd.Series(np.asarray(train.matrix.sum(axis=0)).ravel(), index=train.item_ids)
    fpop = features.assign(pop=features["id"].map(pop)).groupby("feature")["pop"].mean()
    score = features[features["id"].isin(cold)].assign(s=lambda t: t["feature"].map(fpop)).groupby("id")["s"].sum()
    top = score.sort_values(ascending=False).index[:10].tolist()
    popularity = cold_precision(None, {u: top for u in users}, test, users)
    assert hybrid > 3 * random, (hybrid, random)
    assert hybrid > 2 * popularity, (hybrid, popularity)


def test_new_items_ranked_alongside_known_ones(world):
    train, test, features, cold = world
    model = HybridWARP(random_state=0, epochs=3).fit(train, item_features=features)
    both = model.with_new_items()
    assert both.n_items == model.n_items + len(cold)
    np.testing.assert_array_equal(both.item_ids[:model.n_items], model.item_ids)
    # known items score as before; training rows still excluded
    users = np.arange(5)
    np.testing.assert_allclose(both.score_users(users)[:, :model.n_items], model.score_users(users), rtol=1e-6)
    items, _ = both.recommend(users, k=both.n_items - 30)
    seen = model.train_[users].toarray() > 0
    for row, u in zip(items, users):
        assert not seen[u, row[row < model.n_items]].any()
    assert (items >= model.n_items).any()  # new items do make it into the lists
    # ... scored from their features exactly as the new-items-only model scores them
    np.testing.assert_allclose(both.score_users(users)[:, model.n_items:],
                               model.with_new_items(only=True).score_users(users), rtol=1e-5, atol=1e-6)


def test_without_feature_files_hybrid_is_plain_warp(planted):
    train, test = planted
    warp = WARP(random_state=3, epochs=4).fit(train)
    hybrid = HybridWARP(random_state=3, epochs=4).fit(train)
    # same initialisation, same sampling, same MF step: bit for bit on one thread
    np.testing.assert_array_equal(hybrid.user_factors_, warp.user_factors_)
    np.testing.assert_array_equal(hybrid.item_factors_, warp.item_factors_)
    np.testing.assert_array_equal(hybrid.item_bias_, warp.item_bias_)
    # and with the defaults (early stopping, refit) the results match within noise
    p_warp = precision_at_k(WARP(random_state=0).fit(train).score_users, train.shape[1], train, test)
    p_hyb = precision_at_k(HybridWARP(random_state=0).fit(train).score_users, train.shape[1], train, test)
    assert abs(p_warp - p_hyb) < 0.02


def test_content_features_help_warm_items(world):
    train, test, features, cold = world
    warm_test = Interactions.from_dataframe(test, user_ids=train.user_ids, item_ids=train.item_ids)
    # a warm split: hold out a random part of training for the test
    from mrec_warp.models.early_stopping import holdout_split

    fit, held = holdout_split(train.matrix, 0.2, np.random.default_rng(0))
    fit_i = Interactions(fit, train.user_ids, train.item_ids)
    plain = HybridWARP(random_state=0, epochs=10).fit(fit_i)
    rich = HybridWARP(random_state=0, epochs=10).fit(fit_i, item_features=features)
    p_plain = precision_at_k(plain.score_users, plain.n_items, fit, held)
    p_rich = precision_at_k(rich.score_users, rich.n_items, fit, held)
    assert p_rich > p_plain, (p_rich, p_plain)
    assert warm_test.nnz == 0  # the planted test holds cold items only


# -- the kernel --------------------------------------------------------------------------------
def csr_of(rows, n_cols):
    m = sp.csr_matrix(np.asarray(rows, dtype=np.float32).reshape(len(rows), n_cols))
    m.sort_indices()
    return m


def test_single_columns_marks_one_feature_of_weight_one():
    m = csr_of([[0, 1, 0], [0.5, 0.5, 0], [0, 0, 0.7], [0, 0, 0]], 3)
    np.testing.assert_array_equal(_hybrid.single_columns(m.indptr, m.indices, m.data), [1, -1, -1, -1])


def hybrid_step(UF, IF, d=4, seed=0, **kw):
    """One positive (user 0, item 0) against 3 items; returns arrays before/after."""
    rng = np.random.default_rng(seed)
    UE = rng.standard_normal((UF.shape[1], d)).astype(np.float32)
    IE = rng.standard_normal((IF.shape[1], d)).astype(np.float32)
    b = rng.standard_normal(IF.shape[1]).astype(np.float32)
    before = (UE.copy(), IE.copy(), b.copy())
    X = sp.csr_matrix(([1.0], ([0], [0])), shape=(1, IF.shape[0]), dtype=np.float32)
    res = _hybrid.fit_shard(
        UE, IE, b, np.ones_like(UE), np.ones_like(IE), np.ones_like(b),
        UF.indptr.astype(np.int64), UF.indices.astype(np.int32), UF.data, _hybrid.single_columns(UF.indptr, UF.indices, UF.data),
        IF.indptr.astype(np.int64), IF.indices.astype(np.int32), IF.data, np.zeros(0, np.float32),
        _hybrid.single_columns(IF.indptr, IF.indices, IF.data),
        X.indptr.astype(np.int64), X.indices.astype(np.int32), np.zeros(1, np.int32), np.zeros(1, np.int32), 0, 1,
        _rng.harmonic_table(IF.shape[0]), _rng.seed_state(seed), step_settings(**kw))
    return before, (UE, IE, b), res


def test_update_distributes_the_gradient_over_feature_rows():
    # user: 0.5 * e0 + 0.5 * e1; items: 0.5 F_g + 0.5 F_id over one shared content column g = 0
    UF = csr_of([[0.5, 0.5]], 2)
    IF = csr_of([[0.5, 0.5, 0, 0], [0.5, 0, 0.5, 0], [0.5, 0, 0, 0.5]], 4)
    (UE0, IE0, b0), (UE, IE, b), (n_updates, weight, _, _) = hybrid_step(
        UF, IF, learning_rate=0.1, adagrad=False, max_sampled=50, n_item_content=1)
    if n_updates == 0:
        pytest.skip("the positive was ranked first by chance")
    p = 0.5 * UE0[0] + 0.5 * UE0[1]
    qi = 0.5 * IE0[0] + 0.5 * IE0[1]
    moved_j = [j for j in (2, 3) if not np.allclose(IE[j], IE0[j])]
    assert len(moved_j) == 1
    qj = 0.5 * IE0[0] + 0.5 * IE0[moved_j[0]]
    lr = 0.1
    # plain SGD: every user row moves by lr * w_f * weight * (qi - qj)
    for f in (0, 1):
        np.testing.assert_allclose(UE[f], UE0[f] + lr * 0.5 * weight * (qi - qj), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(IE[1], IE0[1] + lr * 0.5 * weight * p, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(IE[moved_j[0]], IE0[moved_j[0]] - lr * 0.5 * weight * p, rtol=1e-5, atol=1e-6)
    # the shared content row gets both shares, which cancel
    np.testing.assert_allclose(IE[0], IE0[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b[1] - b0[1], lr * 0.5 * weight, rtol=1e-5)


def test_memoised_scores_match_direct_ones():
    # same sampling and updates whether content scores are memoised or not
    UF = csr_of([[1.0]], 1)
    rng = np.random.default_rng(0)
    dense = np.zeros((30, 5 + 30), np.float32)
    dense[np.arange(30), 5 + np.arange(30)] = 0.5
    dense[np.arange(30), rng.integers(0, 5, 30)] += 0.5
    IF = csr_of(dense, 35)
    _, a, ra = hybrid_step(UF, IF, d=8, n_item_content=5)
    _, b, rb = hybrid_step(UF, IF, d=8, n_item_content=0)
    assert ra == pytest.approx(rb)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


# -- API ---------------------------------------------------------------------------------------------
def test_params_threads_bpr_and_no_identity(world):
    train, test, features, cold = world
    model = HybridWARP(identity=False, loss="bpr", epochs=2, n_jobs=2, random_state=0)
    assert model.get_params()["identity"] is False and model.get_params()["normalize"] is True
    model.fit(train, item_features=features)
    assert np.isfinite(model.item_factors_).all()
    assert model.item_embeddings_.shape[0] == 16  # content features only, no identities
    with pytest.raises(ValueError, match="no parameter"):
        model.set_params(identities=True)


def test_feature_ids_that_match_nothing_are_an_error(world):
    train, _, features, _ = world
    bad = features.assign(id=features["id"].str.replace("i", "item_"))
    with pytest.raises(InputError, match="none of the .* ids of the item feature file are item ids"):
        HybridWARP(epochs=1).fit(train, item_features=bad)


def test_new_users_from_features_only():
    # users like the items of their group; a new user is known only by their group
    rng = np.random.default_rng(0)
    rows = [(f"u{u}", f"i{i}") for u in range(200) for i in rng.choice(np.arange(u % 4, 80, 4), 10, replace=False)]
    train = Interactions.from_dataframe(pd.DataFrame(rows, columns=["user", "item"]))
    users = pd.DataFrame({"id": [f"u{u}" for u in range(204)], "feature": [f"group{u % 4}" for u in range(204)]})
    model = HybridWARP(random_state=0, epochs=10).fit(train, user_features=users)
    assert list(model.new_user_ids) == ["u200", "u201", "u202", "u203"]
    extended = model.with_new_users()
    assert extended.n_users == 204 and model.n_users == 200
    assert list(model.new_user_ids) == ["u200", "u201", "u202", "u203"], "the original is untouched"
    assert list(extended.new_user_ids) == []
    items, _ = extended.recommend(extended.user_indices(["u200", "u201", "u202", "u203"]), k=10)
    groups = np.array([int(i[1:]) % 4 for i in extended.item_ids[items].ravel()]).reshape(4, 10)
    assert ((groups == np.arange(4)[:, None]).mean(axis=1) > 0.8).all(), groups


def test_save_load_round_trip_with_features_new_ids_and_fold_in(world, tmp_path):
    train, test, features, cold = world
    users = pd.DataFrame({"id": ["u1", "u2", "nobody"], "feature": ["x", "y", "x"], "weight": [1.0, 2.0, 1.0]})
    model = HybridWARP(random_state=0, epochs=2).fit(train, item_features=features, user_features=users)
    model.fold_in(pd.DataFrame({"user": ["fresh", "fresh", "nobody"], "item": ["i3", "i5", "i7"]}), epochs=2)
    path = tmp_path / "hybrid.npz"
    model.save(path)
    back = load(path)
    assert isinstance(back, HybridWARP) and back.get_params() == model.get_params()
    np.testing.assert_array_equal(back.user_ids, model.user_ids)
    np.testing.assert_array_equal(back.item_feature_names, model.item_feature_names)
    np.testing.assert_array_equal(back.new_item_ids, model.new_item_ids)
    users_idx = np.arange(back.n_users)
    np.testing.assert_allclose(back.score_users(users_idx), model.score_users(users_idx), rtol=1e-6)
    a = back.with_new_items(only=True)
    b = model.with_new_items(only=True)
    np.testing.assert_allclose(a.score_users(users_idx), b.score_users(users_idx), rtol=1e-6)
    # a view with new items saves and loads like any model
    buf = io.BytesIO()
    b.save(buf)
    buf.seek(0)
    c = load(buf)
    np.testing.assert_array_equal(c.item_ids, b.item_ids)
    np.testing.assert_allclose(c.score_users(users_idx[:5]), b.score_users(users_idx[:5]), rtol=1e-6)
    with np.load(path, allow_pickle=False) as archive:  # plain arrays only, no pickle
        assert archive["arr_item_feature_names"].dtype.kind == "U"


def test_norm_limits_hold_for_every_embedding_row(world):
    # item features send item steps down the general (non-identity) path as well
    train, _, features, _ = world
    model = HybridWARP(factors=8, epochs=3, user_max_norm=0.4, item_max_norm=0.6, random_state=0)
    model.fit(train, item_features=features)
    assert np.linalg.norm(model.user_embeddings_, axis=1).max() <= 0.4 * (1 + 1e-5)
    assert np.linalg.norm(model.item_embeddings_, axis=1).max() <= 0.6 * (1 + 1e-5)


def test_warp_kos_with_features_and_fold_in(world):
    from mrec_warp.models import Popularity
    from mrec_warp.models.early_stopping import holdout_split

    train, _, features, _ = world
    fit, held = holdout_split(train.matrix, 0.2, np.random.default_rng(0))
    fit_i = Interactions(fit, train.user_ids, train.item_ids)
    model = HybridWARP(loss="warp-kos", epochs=10, random_state=0).fit(fit_i, item_features=features)
    pop = Popularity().fit(fit_i)
    p_model = precision_at_k(model.score_users, model.n_items, fit, held)
    assert p_model > 1.3 * precision_at_k(pop.score_users, pop.n_items, fit, held), p_model
    history = pd.DataFrame({"user": ["newcomer"] * 3, "item": list(train.item_ids[:3])})
    model.fold_in(history)
    assert model.user_indices(["newcomer"])[0] == train.n_users
    assert np.isfinite(model.user_factors_).all()
