"""The contract every model class keeps, as a test mixin (cf. implicit's RecommenderBaseTestMixin).

A model's test module subclasses :class:`ModelContract`, names the class and the parameters
to test it with, and gets the whole suite::

    class TestEASE(ModelContract):
        model_class = EASE
        params = {"l2": 10.0}

The data is a small planted-cluster set, so every test takes a fraction of a second.
"""
from __future__ import annotations

import inspect
import re
import io

import numpy as np
import pytest
import scipy.sparse as sp

from mrec_warp.errors import InputError
from mrec_warp.models import load

from .conftest import planted_low_rank


class ModelContract:
    """Save/load, recommend shapes and exclusion, determinism, bad input: for any model."""

    model_class: type = None  # set by subclasses
    params: dict = {}

    def make(self, **changes):
        return self.model_class(**{**self.params, **changes})

    @pytest.fixture(scope="class")
    @classmethod
    def data(cls):
        return planted_low_rank(n_users=120, n_items=60, rank=3, per_user=12, seed=5)

    @pytest.fixture(scope="class")
    @classmethod
    def fitted(cls, data):
        return cls.model_class(**cls.params).fit(data[0])

    # -- persistence ------------------------------------------------------------------------
    def test_save_load_round_trip_gives_identical_scores(self, fitted, tmp_path):
        path = tmp_path / "model.npz"
        fitted.save(path)
        back = load(path)
        assert type(back) is type(fitted) and back.get_params() == fitted.get_params()
        users = np.arange(fitted.n_users)
        np.testing.assert_array_equal(back.score_users(users), fitted.score_users(users))
        items, _ = fitted.recommend(k=5)
        np.testing.assert_array_equal(back.recommend(k=5)[0], items)
        buf = io.BytesIO()
        fitted.save(buf)
        buf.seek(0)
        np.testing.assert_array_equal(load(buf).score_users(users[:7]), fitted.score_users(users[:7]))

    def test_load_refuses_a_file_whose_arrays_do_not_match_its_ids(self, fitted, tmp_path):
        path = tmp_path / "model.npz"
        fitted.save(path)
        with np.load(path, allow_pickle=False) as z:
            files = {k: z[k] for k in z.files}
        arrays = sorted(k for k in files if k.startswith("arr_"))
        assert arrays, "a fitted model saves arrays of its own"
        for name in arrays:  # every array, cut short by one entry, is caught on load
            broken = dict(files)
            broken[name] = files[name].reshape(-1)[:-1] if files[name].size else np.zeros(1)
            bad = tmp_path / f"bad-{name}.npz"
            np.savez(bad, **broken)
            with pytest.raises(InputError, match="bad-"):
                load(bad)

    # -- recommending -----------------------------------------------------------------------
    def test_recommend_shapes_and_training_items_excluded(self, fitted, data):
        train = data[0]
        items, scores = fitted.recommend(k=7)
        assert items.shape == scores.shape == (fitted.n_users, 7)
        assert items.dtype == np.int64 and scores.dtype == np.float32
        for u in range(fitted.n_users):
            row = items[u][items[u] >= 0]
            assert len(set(row.tolist())) == len(row)
            assert not set(row.tolist()) & set(train[u].indices.tolist())
            assert np.all(np.diff(scores[u][items[u] >= 0]) <= 0)  # best first
        sub, _ = fitted.recommend(users=np.array([5, 2]), k=7)
        np.testing.assert_array_equal(sub, items[[5, 2]])

    def test_scores_are_a_float32_block_over_every_item(self, fitted):
        block = fitted.score_users(np.array([0, 3, 3]))
        assert block.shape == (3, fitted.n_items) and block.dtype == np.float32
        np.testing.assert_array_equal(block[1], block[2])

    def test_same_seed_same_model(self, data, fitted):
        again = self.make().fit(data[0])
        users = np.arange(fitted.n_users)
        np.testing.assert_array_equal(again.score_users(users), fitted.score_users(users))

    # -- bad input --------------------------------------------------------------------------
    @pytest.mark.parametrize("bad", [-1, 10**6])
    def test_out_of_range_users_are_refused(self, fitted, bad):
        with pytest.raises((InputError, IndexError)):
            fitted.recommend(users=np.array([0, bad]), k=3)

    def numeric_params(self):
        """The constructor's parameters annotated as numbers (``int``, ``Optional[float]``...)."""
        sig = inspect.signature(self.model_class.__init__)
        return [name for name, p in sig.parameters.items()
                if name != "self" and re.search(r"\b(int|float)\b", str(p.annotation))]

    @pytest.mark.parametrize("bad", ["a", True, float("nan"), float("inf")])
    def test_a_numeric_parameter_of_the_wrong_type_is_refused_by_name(self, data, bad):
        if not self.numeric_params():
            pytest.skip(f"{self.model_class.__name__} takes no numeric parameter")
        for name in self.numeric_params():  # bools and NaN/inf are refused as numbers too
            with pytest.raises(InputError) as caught:
                self.make(**{name: bad}).fit(data[0])
            assert name in caught.value.params, f"{name}={bad!r}: {caught.value}"
            assert "Traceback" not in str(caught.value) and "\n" not in str(caught.value)

    def test_unfitted_model_refuses_to_recommend(self):
        with pytest.raises(RuntimeError, match="not fitted"):
            self.make().recommend(k=3)

    def test_fit_accepts_any_sparse_format_alike(self, data, fitted):
        again = self.make().fit(sp.coo_matrix(data[0]))
        np.testing.assert_array_equal(again.score_users(np.arange(5)), fitted.score_users(np.arange(5)))
