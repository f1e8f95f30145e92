"""Fold-in: users added from a short history, against fixed items, without refitting."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mrec_warp import InputError
from mrec_warp.data.interactions import Interactions
from mrec_warp.models import WARP, HybridWARP

N_HELD = 100


def frame(csr, users, user_ids, item_ids):
    coo = csr[users].tocoo()
    return pd.DataFrame({"user": user_ids[users][coo.row], "item": item_ids[coo.col]})


@pytest.fixture(scope="module")
def held_out(planted):
    """The planted low-rank data with its last 100 users held out of training."""
    train, test = planted
    n_users, n_items = train.shape
    user_ids = np.array([f"u{u}" for u in range(n_users)])
    item_ids = np.array([f"i{i}" for i in range(n_items)])
    kept = np.arange(n_users - N_HELD)
    held = np.arange(n_users - N_HELD, n_users)
    fit = Interactions.from_dataframe(frame(train, kept, user_ids, item_ids), user_ids=user_ids[kept], item_ids=item_ids)
    return fit, train, test, user_ids, item_ids, kept, held


def precision_of(model, users_ids, truth_csr, truth_rows, k=10):
    """P@k of ``users_ids`` (ids in ``model``) against rows ``truth_rows`` of ``truth_csr``."""
    idx = model.user_indices(users_ids)
    items, _ = model.recommend(idx, k=k)
    truth = truth_csr[truth_rows]
    hits = [np.isin(model.item_ids[row[row >= 0]], [f"i{c}" for c in truth[n].indices]).sum() for n, row in enumerate(items)]
    return float(np.sum(hits)) / (k * len(idx))


@pytest.mark.parametrize("cls", [WARP, HybridWARP])
def test_folded_in_users_do_about_as_well_as_trained_ones(held_out, cls):
    fit, train, test, user_ids, item_ids, kept, held = held_out
    model = cls(random_state=0, epochs=15).fit(fit)
    items_before = model.item_factors_.copy()
    users_before = model.user_factors_.copy()
    # each held-out user's training part is ~80% of their history; test is the rest
    model.fold_in(frame(train, held, user_ids, item_ids))
    assert model.n_users == len(kept) + N_HELD
    assert model.fold_in_summary_["new_users"] == N_HELD
    np.testing.assert_array_equal(model.item_factors_, items_before)  # items never move
    np.testing.assert_array_equal(model.user_factors_[:len(kept)], users_before)  # nor other users
    p_trained = precision_of(model, user_ids[kept], test, kept)
    p_folded = precision_of(model, user_ids[held], test, held)
    assert p_folded > 0.85 * p_trained, (p_folded, p_trained)
    # their history is excluded from their recommendations, like training items
    idx = model.user_indices(user_ids[held[:3]])
    np.testing.assert_array_equal(model.train_[idx].toarray(), (train[held[:3]].toarray() > 0).astype(np.float32))


def test_fold_in_is_reproducible_and_refines_known_users(held_out):
    fit, train, test, user_ids, item_ids, kept, held = held_out
    history = frame(train, held[:10], user_ids, item_ids)
    a = WARP(random_state=1, epochs=3).fit(fit).fold_in(history, epochs=5)
    b = WARP(random_state=1, epochs=3).fit(fit).fold_in(history, epochs=5)
    np.testing.assert_array_equal(a.user_factors_, b.user_factors_)
    # a known user with new items: vector refined, items added to their training row
    before = a.user_factors_[0].copy()
    n_before = a.train_[0].nnz
    extra = [i for i in item_ids if i not in set(item_ids[fit.matrix[0].indices])][:3]
    a.fold_in(pd.DataFrame({"user": ["u0"] * 3, "item": extra}), epochs=3)
    assert a.fold_in_summary_ == {"users": 1, "new_users": 0, "rows": 3, "rows_with_unknown_items": 0, "epochs": 3}
    assert a.train_[0].nnz == n_before + 3 and not np.array_equal(a.user_factors_[0], before)


def test_unknown_items_are_skipped_and_all_unknown_is_an_error(held_out, tmp_path):
    fit, *_ = held_out
    model = WARP(random_state=0, epochs=1).fit(fit)
    model.fold_in(pd.DataFrame({"user": ["new", "new"], "item": ["i1", "nope"]}), epochs=1)
    assert model.fold_in_summary_["rows_with_unknown_items"] == 1
    path = tmp_path / "history.tsv"
    path.write_text("x\tzzz\ny\tyyy\n")
    with pytest.raises(InputError) as exc:
        model.fold_in(path)
    assert str(exc.value).startswith(f"{path}: none of the 2 history rows names an item the model knows")


def test_hybrid_fold_in_keeps_features_and_adds_identity():
    rng = np.random.default_rng(0)
    rows = [(f"u{u}", f"i{i}") for u in range(120) for i in rng.choice(np.arange(u % 3, 60, 3), 8, replace=False)]
    train = Interactions.from_dataframe(pd.DataFrame(rows, columns=["user", "item"]))
    users = pd.DataFrame({"id": [f"u{u}" for u in range(121)], "feature": [f"g{u % 3}" for u in range(121)]})
    model = HybridWARP(random_state=0, epochs=5).fit(train, user_features=users)
    n_rows = model.user_embeddings_.shape[0]
    content = model.user_embeddings_[:3].copy()
    model.fold_in(pd.DataFrame({"user": ["u120"] * 3, "item": ["i0", "i3", "i6"]}), epochs=10)
    assert model.user_embeddings_.shape[0] == n_rows + 1  # one new identity row
    np.testing.assert_array_equal(model.user_embeddings_[:3], content)  # shared features fixed
    u = model.user_indices(["u120"])[0]
    assert model._uw[u].nnz == 2  # its group feature (kept from fit) and its new identity
    items, _ = model.recommend([u], k=10)
    assert np.mean([int(i[1:]) % 3 == 0 for i in model.item_ids[items[0]]]) > 0.8


def test_folded_in_users_respect_the_user_norm_limit(held_out):
    fit, train, test, user_ids, item_ids, kept, held = held_out
    model = WARP(factors=8, epochs=3, user_max_norm=0.3, random_state=0).fit(fit)
    model.fold_in(frame(train, held, user_ids, item_ids), epochs=20)
    assert np.linalg.norm(model.user_factors_, axis=1).max() <= 0.3 * (1 + 1e-5)
    model.set_params(user_max_norm=None)
    model.fold_in(frame(train, held, user_ids, item_ids), epochs=20)
    assert np.linalg.norm(model.user_factors_[model.user_indices(user_ids[held])], axis=1).max() > 0.3
