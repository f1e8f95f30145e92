"""The rows a hybrid model scores with: raw content weights, identities, normalisation."""
from __future__ import annotations

import numpy as np
import pandas as pd

from mrec_warp.models.hybrid import raw_rows, weighted_rows


def test_normalisation_rule():
    names = np.array(["g1", "g2", "g3"])
    table = pd.DataFrame({"id": ["a", "a", "b", "d"], "feature": ["g1", "g2", "g3", "g2"],
                          "weight": np.float32([1, 3, 2, 1])})
    raw, unknown = raw_rows(np.array(["a", "b", "c", "d"]), table, names)
    assert unknown == 0
    identity = np.array([3, 4, 5, -1])  # "d" is new: no identity of its own
    w = weighted_rows(raw, identity, 6).toarray()
    # the identity weighs 2, then every row has unit Euclidean length
    r14, r8, r5 = np.sqrt(14), np.sqrt(8), np.sqrt(5)
    np.testing.assert_allclose(w[0], [1 / r14, 3 / r14, 0, 2 / r14, 0, 0], rtol=1e-6)
    np.testing.assert_allclose(w[1], [0, 0, 2 / r8, 0, 2 / r8, 0], rtol=1e-6)
    np.testing.assert_allclose(w[2], [0, 0, 0, 0, 0, 1])  # identity only
    np.testing.assert_allclose(w[3], [0, 1 / r5, 0, 0, 0, 0], rtol=1e-6)  # new id: as if its identity were there
    np.testing.assert_allclose(weighted_rows(raw, identity, 6, identity_weight=1).toarray()[0],
                               np.array([1, 3, 0, 1, 0, 0]) / np.sqrt(11), rtol=1e-6)
    np.testing.assert_allclose(weighted_rows(raw, np.full(4, -1), 3, identity_slot=False).toarray()[0],
                               [1 / np.sqrt(10), 3 / np.sqrt(10), 0], rtol=1e-6)  # no identities: content alone
    np.testing.assert_allclose(weighted_rows(raw, identity, 6, normalize=False).toarray()[0], [1, 3, 0, 2, 0, 0])


def test_unknown_features_are_dropped_and_counted():
    table = pd.DataFrame({"id": ["a", "a", "z"], "feature": ["g1", "new", "g1"], "weight": np.float32([1, 1, 1])})
    raw, unknown = raw_rows(np.array(["a"]), table, np.array(["g1"]))
    assert unknown == 1 and raw.toarray().tolist() == [[1.0]]
