"""WARP fold-in gives the same vector, bit for bit, as before its fixed cost was cut.

The expected bits were computed with the code of main on 2026-11-26 (before the
single-user fold-in was reworked): same model, same seed, same history, same vector. One
vector's last bits were computed again when the kernels' dot product went to four SSE
accumulators (``kernels/mw_dot.h``), which sums in another order.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from mrec_warp.models import WARP

#: float32 bits of the folded-in vector, per (loss, history).
EXPECTED = {
    ("warp", (3, 7, 19)): [1040888855, 1037840922, 1020897235, 1041319281, 3146837130, 3189669929, 3176937147,
                           3185734792],
    ("warp", tuple(range(0, 40, 2))): [1018423448, 3189641379, 3191323058, 3184016504, 3154489640, 974724214,
                                       3205402695, 1025567556],
    ("bpr", (3, 7, 19)): [1034680950, 1031945017, 991176625, 1038124508, 991578388, 3183609707, 3174132396,
                          3181888553],
    ("bpr", tuple(range(0, 40, 2))): [1018150676, 3183686940, 3191181195, 3182511405, 3168126936, 3149650401,
                                      3203223487, 1015152194],
}


def _model(loss: str) -> WARP:
    """A fitted WARP whose factors are then set from a seeded generator (so the vector
    depends on nothing but the fold-in code)."""
    rng = np.random.default_rng(7)
    n_users, n_items, f = 30, 50, 8
    rows = np.repeat(np.arange(n_users), 6)
    cols = rng.integers(0, n_items, len(rows))
    X = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(n_users, n_items))
    X.sum_duplicates()
    X.data[:] = 1.0
    model = WARP(factors=f, epochs=1, loss=loss, random_state=11).fit(
        X, user_ids=[f"u{u}" for u in range(n_users)], item_ids=[f"i{i}" for i in range(n_items)])
    model.set_arrays(dict(model.get_arrays(),
                           user_factors=rng.normal(0, .3, (n_users, f)).astype(np.float32),
                           item_factors=rng.normal(0, .3, (n_items, f)).astype(np.float32),
                           item_bias=rng.normal(0, .1, n_items).astype(np.float32)))
    return model


@pytest.mark.parametrize("loss,history", sorted(EXPECTED))
def test_history_vector_is_unchanged(loss, history):
    model = _model(loss)
    for _ in range(2):  # the second call reads what the first one kept
        vector = model.history_vector(np.array(history, dtype=np.int32))
        assert vector.view(np.uint32).tolist() == EXPECTED[loss, history]


@pytest.mark.parametrize("loss", ["warp", "bpr"])
def test_fold_in_is_unchanged(loss):
    model = _model(loss)
    model.fold_in([("new", f"i{i}") for i in (3, 7, 19)])
    row = model.user_factors_[model.user_indices("new")[0]]
    assert row.view(np.uint32).tolist() == EXPECTED[loss, (3, 7, 19)]


def test_a_changed_seed_changes_the_vector():
    model = _model("warp")
    model.set_params(random_state=12)
    vector = model.history_vector(np.array([3, 7, 19], dtype=np.int32))
    assert vector.view(np.uint32).tolist() != EXPECTED["warp", (3, 7, 19)]
