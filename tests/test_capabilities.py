"""The model contract's capabilities: every family declares each one, and stages act on them
(never on a family's name or class)."""
from __future__ import annotations

import inspect

import numpy as np
import pytest
import scipy.sparse as sp

import mrec_warp as mw
from mrec_warp.errors import InputError
from mrec_warp.models import WARP, WRMF, HybridWARP, Popularity
from mrec_warp.models.base import _REGISTRY, CAPABILITIES, Recommender
from mrec_warp.models.factor_model import FactorModel
from mrec_warp.models.families import FAMILIES, families_with, model_classes, named_families
from mrec_warp.stages.recommend_inputs import check_known_users, cold_start
from mrec_warp.progress import SILENT


def _small(n_users=12, n_items=8, seed=0) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    dense = (rng.random((n_users, n_items)) < 0.4).astype(np.float32)
    dense[np.arange(n_users), np.arange(n_users) % n_items] = 1.0  # every user has an item
    return sp.csr_matrix(dense)


@pytest.fixture
def registered():
    """Classes a test defines are registered by name (as every Recommender subclass is):
    take them out again so that no other test sees them."""
    before = dict(_REGISTRY)
    yield
    _REGISTRY.clear()
    _REGISTRY.update(before)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_family_declares_every_capability_as_a_bool(name):
    cls = model_classes()[name]
    caps = cls.capabilities()
    assert set(caps) == set(CAPABILITIES)
    assert all(type(value) is bool for value in caps.values()), caps


def test_every_registered_class_declares_every_capability_as_a_bool():
    for cls in set(_REGISTRY.values()):
        assert all(type(getattr(cls, name)) is bool for name in CAPABILITIES), cls


def test_what_a_family_must_provide_is_abstract():
    assert {"fit", "score_users", "get_arrays", "set_arrays", "array_spec"} <= Recommender.__abstractmethods__
    assert {"init_state", "train_epochs", "history_vector"} <= FactorModel.__abstractmethods__

    class Half(Recommender):  # a family that forgot its arrays
        def fit(self, X, **kwargs):
            return self

        def score_users(self, users, out=None):
            return np.zeros((len(users), 1), np.float32)

    try:
        with pytest.raises(TypeError, match="abstract"):
            Half()
    finally:
        _REGISTRY.pop("Half", None)


#: the families this package ships; a contributor's new family joins the registry without
#: editing these tests (they check the shipped ones, and rules every family keeps)
SHIPPED = ("warp", "itemknn", "slim", "ease", "wrmf", "popularity", "hybrid", "rp3beta")


def _shipped_with(capability):
    return [name for name in families_with(capability) if name in SHIPPED]


def test_the_capabilities_say_what_the_shipped_families_do():
    assert _shipped_with("uses_features") == ["hybrid"]
    assert _shipped_with("supports_sub_models") == ["warp"]
    assert set(_shipped_with("early_stopping")) == {"warp", "wrmf", "hybrid"}
    assert set(_shipped_with("has_factors")) == {"warp", "wrmf", "hybrid"}
    assert set(_shipped_with("fold_in_epochs")) == {"warp", "hybrid"}
    assert set(_shipped_with("supports_confidence")) == {"warp", "wrmf"}
    assert _shipped_with("appends_unknown_users") == ["popularity"]
    assert _shipped_with("explains") == ["wrmf"]
    assert "popularity" not in families_with("finds_similar_items")
    assert all(model_classes()[n].supports_fold_in for n in SHIPPED)
    # every family: folding in is optional, but a family that says it can has the method
    for cls in model_classes().values():
        assert not cls.supports_fold_in or callable(getattr(cls, "fold_in", None)), cls
    if set(families_with("supports_confidence")) == {"warp", "wrmf"}:
        assert named_families("supports_confidence") == "`model=warp` or wrmf"
    # a capability and the parameters agree: a seed where random numbers are drawn
    for cls in model_classes().values():
        assert cls.draws_random_numbers == ("random_state" in cls._param_names()), cls
        assert cls.supports_confidence == ("confidence" in cls._param_names()), cls


@pytest.mark.parametrize("cls", [WARP, WRMF, HybridWARP, Popularity])
def test_fold_in_has_one_signature(cls):
    params = inspect.signature(cls.fold_in).parameters
    assert list(params) == ["self", "history", "epochs", "user_features", "progress", "user_ids"]
    assert all(params[p].kind is inspect.Parameter.KEYWORD_ONLY for p in list(params)[2:])


@pytest.mark.parametrize("cls,params", [(WARP, {"factors": 4, "epochs": 1, "random_state": 0}),
                                        (WRMF, {"factors": 4, "epochs": 1, "random_state": 0}),
                                        (Popularity, {})])
def test_user_features_are_refused_by_a_family_without_features(cls, params):
    model = cls(**params).fit(_small())
    with pytest.raises(InputError, match="user features need a hybrid model"):
        model.fold_in([("new", "0")], user_features=[("new", "f1")])
    assert model.n_users == 12  # nothing was added


def test_cold_start_refuses_a_history_for_a_family_that_cannot_fold_in(registered, tmp_path):
    class Frozen(Popularity):
        supports_fold_in = False

        def fold_in(self, history, **kwargs):  # pragma: no cover - must not be reached
            raise AssertionError("cold start called fold_in on a family without fold-in")

    model = Frozen().fit(_small())
    history = tmp_path / "history.tsv"
    history.write_text("new\t1\n")
    with pytest.raises(InputError) as caught:
        cold_start(model, "frozen.npz", history=history)
    assert "`history` needs a model that folds users in, this is a Frozen, which cannot" in caught.value.message
    assert caught.value.path == "frozen.npz"
    assert model.n_users == 12


def test_cold_start_asks_fold_in_epochs_not_the_class(registered, tmp_path):
    class Iterating(Popularity):  # a family whose fold-in iterates: the epochs go through
        fold_in_epochs = True
        seen = []

        def fold_in(self, history, *, epochs=None, **kwargs):
            Iterating.seen.append(epochs)
            return super().fold_in(history, **kwargs)

    history = tmp_path / "history.tsv"
    history.write_text("new\t1\n")
    model = cold_start(Iterating().fit(_small()), history=history, fold_in_epochs=3).model
    assert Iterating.seen == [3] and model.n_users == 13
    with pytest.raises(InputError, match="`fold_in_epochs` does not apply to a Popularity"):
        cold_start(Popularity().fit(_small()), history=history, fold_in_epochs=3)


def test_feature_options_follow_uses_features(registered, tmp_path):
    features = tmp_path / "items.tsv"
    features.write_text("100\tred\n")
    with pytest.raises(InputError, match="`item_features` needs a hybrid model, this is a WARP"):
        cold_start(WARP(factors=4, epochs=1, random_state=0).fit(_small()), item_features=features)


def test_unknown_users_follow_appends_unknown_users(registered):
    class Serving(WARP):  # a factor family that serves newcomers instead of refusing them
        appends_unknown_users = True

    refusing = WARP(factors=4, epochs=1, random_state=0).fit(_small())
    with pytest.raises(InputError, match="user 'stranger' is not in the model"):
        check_known_users(refusing, ["0", "stranger"], "users.txt", SILENT)
    serving = Serving(factors=4, epochs=1, random_state=0).fit(_small())
    assert check_known_users(serving, ["0", "stranger"], "users.txt", SILENT)
    assert serving.user_ids[-1] == "stranger" and serving.user_factors_.shape[0] == 13


def test_train_refuses_what_a_family_cannot_take(tmp_path):
    train = tmp_path / "train.tsv"
    train.write_text("".join(f"u{u}\ti{(u + j) % 7}\t1\n" for u in range(10) for j in range(3)))
    validation = tmp_path / "val.tsv"
    validation.write_text("u1\ti6\t1\n")
    # popularity has no early stopping: a validation file would be ignored, so it is refused
    with pytest.raises(InputError, match="`model=popularity` has no early stopping to validate") as caught:
        mw.train(train, model="popularity", validation=validation)
    assert caught.value.path == str(validation)
    with pytest.raises(InputError, match=r"`sub_models` needs `model=warp`, not `model=wrmf`"):
        mw.train(train, model="wrmf", sub_models=2)


def test_the_recommend_path_is_a_straight_line():
    """stages.recommend calls its inputs step and then topk / tables; the inputs step calls
    no other stage module back (cold start is part of it; feature files are data's)."""
    import ast
    from pathlib import Path

    stages = Path(mw.__file__).parent / "stages"

    def stage_imports(name):
        tree = ast.parse((stages / f"{name}.py").read_text())
        return {node.module for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module}

    assert stage_imports("recommend") == {"recommend_inputs"}
    assert stage_imports("recommend_inputs") == set()
    assert not (stages / "cold_start.py").exists()


def test_the_hybrid_takes_warps_parameters_without_relisting_them():
    warp = set(WARP._param_names())
    hybrid = set(HybridWARP._param_names())
    assert hybrid == warp - {"confidence", "alpha", "eps", "confidence_use"} | {"identity", "identity_weight",
                                                                                "normalize"}
    model = HybridWARP(16, patience=3)  # positional and keyword, as an explicit list takes them
    assert (model.factors, model.patience, model.learning_rate, model.identity_weight) == (16, 3, None, 2.0)
    assert model.max_epochs == WARP().max_epochs  # WARP's defaults, not a copy of them
    assert type(model)(**model.get_params()).get_params() == model.get_params()  # clone
    with pytest.raises(TypeError, match="confidence"):
        HybridWARP(confidence="log")
    assert not HybridWARP.supports_confidence
