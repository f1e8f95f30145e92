"""The contract every model class keeps, as a test mixin (cf. implicit's RecommenderBaseTestMixin).

A model's test module subclasses :class:`ModelContract`, names the class and the parameters
to test it with, and gets the whole suite::

    class TestEASE(ModelContract):
        model_class = EASE
        params = {"l2": 10.0}

A family that is not built by ``fit`` (imported factors) overrides :meth:`ModelContract.build`.
A behaviour a family truly cannot have is skipped by name with a reason in ``skip_reasons``,
never silently. The data is a small planted-cluster set, so every test takes a fraction of a
second.
"""
from __future__ import annotations

import inspect
import io
import pickle
import re
import threading
from typing import Any, Dict, Optional

import numpy as np
import pytest
import scipy.sparse as sp

from mrec_warp.data.interactions import Interactions
from mrec_warp.errors import InputError
from mrec_warp.models import load

from .conftest import planted_low_rank

#: Ids a user could have in a file: emoji, spaces inside and around, commas, quotes, accents,
#: numbers with leading zeros. Every output must give them back byte for byte.
MESSY_USER_IDS = ["😀 user, 1", " lead", "trail ", 'quo"te', "tab\tinside", "007", "é-ü"]
MESSY_ITEM_IDS = ["item,1", "🎬 film", "a  b", "0042", "a;b", "naïve", "x y z "]


def _frozen(csr: sp.csr_matrix) -> sp.csr_matrix:
    """``csr`` with read-only arrays: any write to them in place raises."""
    for arr in (csr.data, csr.indices, csr.indptr):
        arr.flags.writeable = False
    return csr


def _csr_bytes(csr: sp.csr_matrix):
    return (csr.shape, csr.data.dtype.str, csr.data.tobytes(), csr.indices.tobytes(), csr.indptr.tobytes())


class ModelContract:
    """Persistence, recommending, exclusions, ids, determinism, thread safety, parameters and
    bad input: what every model class keeps (see the module docstring)."""

    model_class: type = None  # set by subclasses
    params: dict = {}
    #: test name -> why this family cannot have that behaviour (the test is skipped with it)
    skip_reasons: Dict[str, str] = {}
    #: fold-in vs refit on the same users: least mean Pearson correlation of their scores
    #: (measured on the contract's data: WARP and hybrid 0.78, WRMF 1.00, item-item 0.89-0.94,
    #: popularity 0.98)
    fold_in_correlation: float = 0.7
    #: whether every item can be recommended (False: the family scores only some of them)
    recommends_every_item: bool = True

    @classmethod
    def build(cls, X, params: Optional[Dict[str, Any]] = None, **fit_kwargs):
        """A fitted model of ``X`` (a sparse matrix or Interactions), ``params`` on top of
        the class's own; ``fit_kwargs`` go to ``fit`` (``user_ids``, ``item_ids``)."""
        return cls.model_class(**{**cls.params, **(params or {})}).fit(X, **fit_kwargs)

    def make(self, **changes):
        return self.model_class(**{**self.params, **changes})

    @pytest.fixture(autouse=True)
    def _declared_skips(self, request):
        reason = self.skip_reasons.get(request.function.__name__)
        if reason:
            pytest.skip(f"{self.model_class.__name__}: {reason}")

    @pytest.fixture(scope="class")
    @classmethod
    def data(cls):
        return planted_low_rank(n_users=120, n_items=60, rank=3, per_user=12, seed=5)

    @pytest.fixture(scope="class")
    @classmethod
    def fitted(cls, data):
        return cls.build(data[0])

    @pytest.fixture(scope="class")
    @classmethod
    def with_ids(cls):
        """A model fitted on messy ids (every one of :data:`MESSY_USER_IDS` /
        :data:`MESSY_ITEM_IDS` is a real user / item), with plain ids for the rest."""
        train, _ = planted_low_rank(n_users=40, n_items=30, rank=2, per_user=8, seed=3)
        users = MESSY_USER_IDS + [f"u{i}" for i in range(train.shape[0] - len(MESSY_USER_IDS))]
        items = MESSY_ITEM_IDS + [f"i{i}" for i in range(train.shape[1] - len(MESSY_ITEM_IDS))]
        return cls.build(Interactions(train, users, items))

    # -- persistence ------------------------------------------------------------------------
    def test_save_load_round_trip_gives_identical_scores(self, fitted, tmp_path):
        path = tmp_path / "model.npz"
        fitted.save(path)
        back = load(path)
        assert type(back) is type(fitted) and back.get_params() == fitted.get_params()
        users = np.arange(fitted.n_users)
        assert back.score_users(users).tobytes() == fitted.score_users(users).tobytes()
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

    @pytest.mark.parametrize("damage", ["truncated", "overwritten", "empty"])
    def test_load_refuses_a_truncated_or_corrupted_file_in_one_line(self, fitted, tmp_path, damage):
        path = tmp_path / "model.npz"
        fitted.save(path)
        raw = path.read_bytes()
        if damage == "truncated":
            raw = raw[:len(raw) // 2]
        elif damage == "overwritten":  # a block of the middle turned to noise: zip's CRCs see it
            mid = len(raw) // 2
            raw = raw[:mid] + bytes(np.random.default_rng(0).integers(0, 256, 64, dtype=np.uint8)) + raw[mid + 64:]
        else:
            raw = b""
        bad = tmp_path / f"{damage}.npz"
        bad.write_bytes(raw)
        with pytest.raises(InputError) as caught:
            load(bad)
        assert "\n" not in str(caught.value) and "Traceback" not in str(caught.value)

    def test_pickled_model_gives_identical_scores(self, fitted):
        back = pickle.loads(pickle.dumps(fitted))
        users = np.arange(fitted.n_users)
        assert back.score_users(users).tobytes() == fitted.score_users(users).tobytes()
        np.testing.assert_array_equal(back.recommend(k=5)[0], fitted.recommend(k=5)[0])

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

    def test_without_exclusion_the_list_is_the_top_of_the_scores(self, fitted, data):
        k = 8
        users = np.arange(0, fitted.n_users, 7)
        items, scores = fitted.recommend(users=users, k=k, exclude=None)
        full = fitted.score_users(users)
        assert (items >= 0).all()
        for row, u in enumerate(users):
            np.testing.assert_allclose(scores[row], -np.sort(-full[row])[:k], rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(full[row, items[row]], scores[row], rtol=1e-5, atol=1e-6)
        seen = sum(len(set(items[r].tolist()) & set(data[0][u].indices.tolist())) for r, u in enumerate(users))
        assert seen > 0, "without exclusion, some training items make the top of the list"

    def test_a_custom_exclude_matrix_replaces_the_training_items(self, fitted):
        rng = np.random.default_rng(1)
        mask = rng.random((fitted.n_users, fitted.n_items)) < 0.3
        exclude = sp.csr_matrix(mask.astype(np.float32))
        before = _csr_bytes(exclude)
        items, _ = fitted.recommend(k=10, exclude=exclude)
        free = fitted.recommend(k=fitted.n_items, exclude=None)[0]
        for u in range(fitted.n_users):
            row = items[u][items[u] >= 0]
            assert not mask[u, row].any()
            # the list is the unexcluded order with the excluded items taken out
            np.testing.assert_array_equal(row, [i for i in free[u] if not mask[u, i]][:len(row)])
        assert _csr_bytes(exclude) == before

    def test_filter_items_are_never_recommended_to_anyone(self, fitted):
        items, _ = fitted.recommend(k=10)
        banned = np.unique(items[:, :3])  # the items that were at the top of lists
        filtered, _ = fitted.recommend(k=10, filter_items=banned)
        assert not np.isin(filtered, banned).any()
        one, _ = fitted.recommend(users=4, k=10, filter_items=banned)
        np.testing.assert_array_equal(one, filtered[4])

    def test_k_larger_than_the_catalogue_is_capped_and_padded(self, fitted, data):
        items, scores = fitted.recommend(k=fitted.n_items + 50)
        assert items.shape == (fitted.n_users, fitted.n_items)
        for u in range(fitted.n_users):
            unseen = set(range(fitted.n_items)) - set(data[0][u].indices.tolist())
            n_left = int((items[u] >= 0).sum())  # a list, then only padding
            assert (items[u, n_left:] == -1).all() and np.isneginf(scores[u, n_left:]).all()
            assert np.isfinite(scores[u, :n_left]).all()
            if self.recommends_every_item:
                assert set(items[u, :n_left].tolist()) == unseen
            else:
                assert set(items[u, :n_left].tolist()) < unseen

    def test_one_user_gives_the_row_of_the_batch(self, fitted):
        items, scores = fitted.recommend(k=6)  # every user: the blocked path
        for u in (0, 17, fitted.n_users - 1):
            one_items, one_scores = fitted.recommend(users=u, k=6)  # the one-user path
            assert one_items.shape == (6,)
            np.testing.assert_array_equal(one_items, items[u])
            np.testing.assert_allclose(one_scores, scores[u], rtol=1e-5, atol=1e-6)

    def test_predict_agrees_with_score_users(self, fitted):
        rng = np.random.default_rng(2)
        users = rng.integers(0, fitted.n_users, 50)
        items = rng.integers(0, fitted.n_items, 50)
        full = fitted.score_users(np.arange(fitted.n_users))
        np.testing.assert_allclose(fitted.predict(users, items), full[users, items], rtol=1e-5, atol=1e-6)
        one = fitted.predict(3, 7)
        assert np.ndim(one) == 0 and np.isclose(one, full[3, 7], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(fitted.predict(3, [1, 2]), full[3, [1, 2]], rtol=1e-5, atol=1e-6)

    def test_recommending_is_thread_safe(self, fitted):
        chunks = [np.arange(s, min(s + 30, fitted.n_users)) for s in range(0, fitted.n_users, 30)]
        chunks += [np.array([u]) for u in range(0, fitted.n_users, 11)]  # one-user path too
        alone = [fitted.recommend(users=c, k=5) for c in chunks]
        results: Dict[int, Any] = {}
        errors = []

        def work(slot: int) -> None:
            try:
                for round_ in range(3):
                    for i in range(slot, len(chunks), 4):
                        results[(i, round_)] = fitted.recommend(users=chunks[i], k=5)
            except Exception as exc:  # pragma: no cover - what the assert reports
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        for (i, _round), (items, scores) in results.items():
            np.testing.assert_array_equal(items, alone[i][0])
            np.testing.assert_array_equal(scores, alone[i][1])

    def test_similar_items_exclude_the_item_and_come_best_first(self, fitted):
        try:
            items, sims = fitted.similar_items(np.array([0, 5]), k=4)
        except InputError as exc:  # a family without item vectors or weights says so in one line
            assert "\n" not in str(exc)
            pytest.skip(f"{self.model_class.__name__} has no similar items: {exc}")
        assert items.shape == sims.shape == (2, 4)
        for row, item in enumerate((0, 5)):
            valid = items[row][items[row] >= 0]
            assert item not in valid.tolist() and len(set(valid.tolist())) == len(valid)
            assert np.all(np.diff(sims[row][:len(valid)]) <= 1e-6)
        one, _ = fitted.similar_items(5, k=4)
        np.testing.assert_array_equal(one, items[1])

    # -- the data a model is given ------------------------------------------------------------
    def test_same_seed_same_model(self, data, fitted):
        again = self.build(data[0])
        users = np.arange(fitted.n_users)
        assert again.score_users(users).tobytes() == fitted.score_users(users).tobytes()

    def test_refitting_one_model_is_idempotent(self, data, fitted):
        model = self.build(data[0] + data[1])  # first fitted on more data ...
        refit = model.fit(data[0])  # ... then again on the training data alone: nothing is left over
        assert refit is model
        users = np.arange(fitted.n_users)
        assert refit.score_users(users).tobytes() == fitted.score_users(users).tobytes()
        np.testing.assert_array_equal(refit.recommend(k=5)[0], fitted.recommend(k=5)[0])

    def test_fit_accepts_any_sparse_format_alike(self, data, fitted):
        again = self.build(sp.coo_matrix(data[0]))
        np.testing.assert_array_equal(again.score_users(np.arange(5)), fitted.score_users(np.arange(5)))

    def test_read_only_inputs_are_used_and_never_changed(self, data):
        train = _frozen(data[0].copy())
        before = _csr_bytes(train)
        model = self.build(train)
        assert _csr_bytes(train) == before
        users = np.arange(10)
        users.flags.writeable = False
        exclude = _frozen(train[:10].tocsr())
        items, _ = model.recommend(users=users, k=5, exclude=exclude)
        assert (items >= 0).all()
        assert _csr_bytes(train) == before and users.tolist() == list(range(10))

    def test_stored_zeros_are_interactions_and_the_input_is_unchanged(self, data):
        train = data[0].copy()
        train.data = np.linspace(0.0, 5.0, train.nnz).astype(np.float32)  # some 0s, the rest strengths
        train.data[train.indptr[3]:train.indptr[4]] = 0.0  # user 3: every interaction of value 0
        before = _csr_bytes(train)
        model = self.build(train)
        assert _csr_bytes(train) == before
        np.testing.assert_array_equal(model.train_.indices, train.indices)  # no entry dropped
        items, _ = model.recommend(users=3, k=10)
        assert not set(items.tolist()) & set(train[3].indices.tolist())

    def test_a_user_without_history_gets_a_full_list(self, data):
        train = data[0].tolil()
        train[2, :] = 0  # user 2 keeps their row, empty
        train = train.tocsr()
        train.eliminate_zeros()
        assert train[2].nnz == 0
        model = self.build(train)
        items, scores = model.recommend(users=2, k=10)
        assert (items >= 0).all() and np.isfinite(scores).all()

    def test_ids_come_out_byte_identical(self, with_ids):
        frame = with_ids.recommend_frame(MESSY_USER_IDS, k=with_ids.n_items, exclude=None)  # every item
        assert set(frame["user"]) == set(MESSY_USER_IDS)
        assert set(MESSY_ITEM_IDS) <= set(frame["item"])
        known = {x.encode("utf-8") for x in MESSY_USER_IDS + list(with_ids.item_ids)}
        for value in frame["user"].tolist() + frame["item"].tolist():
            assert value.encode("utf-8") in known
        one = with_ids.recommend_frame(MESSY_USER_IDS[0], k=3)
        assert one["user"].tolist() == [MESSY_USER_IDS[0]] * len(one)

    def test_unknown_ids_are_one_line_with_a_did_you_mean(self, with_ids):
        for slip, meant in (("U12 ", "u12"), ("7", "007")):  # case and spaces; a number's spelling
            with pytest.raises(InputError) as caught:
                with_ids.recommend_frame(["u1", slip], k=3)
            message = str(caught.value)
            assert "\n" not in message and f"did you mean {meant!r}" in message, message
        with pytest.raises(InputError):
            with_ids.item_indices(["nope"])
        assert with_ids.item_indices(["nope", MESSY_ITEM_IDS[1]], strict=False).tolist() == [-1, 1]

    # -- determinism and fold-in --------------------------------------------------------------
    def test_recommending_twice_gives_the_same_lists(self, fitted):
        first = fitted.recommend(k=5, n_jobs=1)
        again = fitted.recommend(k=5, n_jobs=2, block_size=7)
        np.testing.assert_array_equal(first[0], again[0])
        np.testing.assert_array_equal(first[1], again[1])

    def test_fold_in_comes_close_to_refitting(self, data):
        if not self.model_class.supports_fold_in:
            pytest.skip(f"{self.model_class.__name__} does not fold users in")
        train = data[0]
        n_kept = train.shape[0] - 12
        users = [f"u{i}" for i in range(train.shape[0])]
        items = [f"i{i}" for i in range(train.shape[1])]
        refit = self.build(Interactions(train, users, items))
        model = self.build(Interactions(train[:n_kept], users[:n_kept], items))
        history = train[n_kept:]
        before = _csr_bytes(history)
        model.fold_in(history, user_ids=users[n_kept:])
        assert _csr_bytes(history) == before
        assert model.n_users == train.shape[0] and model.user_ids.tolist() == users
        new = np.arange(n_kept, train.shape[0])
        np.testing.assert_array_equal(model.train_[new].toarray() > 0, history.toarray() > 0)
        folded, refitted = model.score_users(new), refit.score_users(new)
        scored = np.isfinite(folded)  # a model may leave items unscored (-inf): the same ones
        np.testing.assert_array_equal(scored, np.isfinite(refitted))
        corr = np.mean([np.corrcoef(a[m], b[m])[0, 1] for a, b, m in zip(folded, refitted, scored)])
        assert corr >= self.fold_in_correlation, corr
        items_folded, _ = model.recommend(users=new, k=5)
        assert not any(set(items_folded[r].tolist()) & set(history[r].indices.tolist()) for r in range(len(new)))

    # -- parameters ---------------------------------------------------------------------------
    def test_get_params_and_set_params_round_trip(self, fitted):
        params = fitted.get_params()
        assert sorted(params) == sorted(n for n in inspect.signature(self.model_class.__init__).parameters
                                        if n != "self")
        fresh = self.make()
        assert fresh.set_params(**params) is fresh and fresh.get_params() == params
        with pytest.raises(ValueError, match="no parameter"):
            fresh.set_params(no_such_parameter=1)
        assert repr(fresh).startswith(self.model_class.__name__ + "(")

    def test_sklearn_clone_copies_the_parameters_not_the_fit(self, fitted):
        base = pytest.importorskip("sklearn.base", reason="sklearn.base.clone needs scikit-learn")
        params = fitted.get_params()
        clone = base.clone(fitted)
        assert type(clone) is type(fitted) and clone.get_params() == params
        assert getattr(clone, "train_", None) is None  # a clone is not fitted

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
                self.build(data[0], {name: bad})
            assert name in caught.value.params, f"{name}={bad!r}: {caught.value}"
            assert "Traceback" not in str(caught.value) and "\n" not in str(caught.value)

    def test_unfitted_model_refuses_to_recommend(self):
        with pytest.raises(RuntimeError, match="not fitted"):
            self.make().recommend(k=3)
