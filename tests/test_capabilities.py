"""What a family can do decides what the stages do with it: the capability flags that divide
families, and the behaviours one family has (a method it overrides, or what its fit takes),
each checked by its outcome -- never by a family's name or class."""
from __future__ import annotations

import inspect

import numpy as np
import pytest
import scipy.sparse as sp

import mrec_warp as mw
from mrec_warp.errors import InputError
from mrec_warp.models import WARP, WRMF, HybridWARP, Popularity
from mrec_warp.models.base import CAPABILITIES, Recommender
from mrec_warp.models.factor_model import FactorModel
from mrec_warp.models.families import REGISTRY, families_with
from mrec_warp.stages.recommend_inputs import check_known_users, cold_start


def _small(n_users=12, n_items=8, seed=0) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    dense = (rng.random((n_users, n_items)) < 0.4).astype(np.float32)
    dense[np.arange(n_users), np.arange(n_users) % n_items] = 1.0  # every user has an item
    return sp.csr_matrix(dense)


def _train_file(tmp_path, values=True):
    path = tmp_path / "train.tsv"
    path.write_text("".join(f"u{u}\ti{(u + j) % 7}" + ("\t1" if values else "") + "\n"
                            for u in range(10) for j in range(3)))
    return path


def test_a_capability_flag_divides_the_families():
    # a flag true for exactly one family would be an isinstance in disguise: that family
    # overrides a method instead
    for capability in CAPABILITIES:
        assert len(families_with(capability)) != 1, capability


def test_what_a_family_must_provide_is_abstract():
    assert {"fit", "score_users", "get_arrays", "set_arrays", "array_spec"} <= Recommender.__abstractmethods__
    assert {"init_state", "train_epochs", "history_vector"} <= FactorModel.__abstractmethods__

    class Half(Recommender):  # a family that forgot its arrays
        def fit(self, X, **kwargs):
            return self

        def score_users(self, users, out=None):
            return np.zeros((len(users), 1), np.float32)

    with pytest.raises(TypeError, match="abstract"):
        Half()
    assert "Half" not in REGISTRY  # it named no family


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


def test_cold_start_refuses_a_history_for_a_family_that_cannot_fold_in(tmp_path):
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


def test_cold_start_asks_fold_in_epochs_not_the_class(tmp_path):
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


def test_feature_options_need_a_family_whose_fit_takes_features(tmp_path):
    features = tmp_path / "items.tsv"
    features.write_text("100\tred\n")
    with pytest.raises(InputError, match="`item_features` needs a hybrid model, this is a WARP"):
        cold_start(WARP(factors=4, epochs=1, random_state=0).fit(_small()), item_features=features)
    with pytest.raises(InputError, match="feature files need `model=hybrid`, not `model=warp`"):
        mw.train(_train_file(tmp_path), item_features=features)


def test_unknown_users_are_served_by_a_family_that_says_what_they_get():
    class Serving(WARP):  # a factor family that serves newcomers instead of refusing them
        def unknown_user_ranking(self):
            return "the item biases"

    refusing = WARP(factors=4, epochs=1, random_state=0).fit(_small())
    with pytest.raises(InputError, match="user 'stranger' is not in the model"):
        check_known_users(refusing, ["0", "stranger"], "users.txt", [])
    serving = Serving(factors=4, epochs=1, random_state=0).fit(_small())
    notes: list = []
    assert check_known_users(serving, ["0", "stranger"], "users.txt", notes)
    assert serving.user_ids[-1] == "stranger" and serving.user_factors_.shape[0] == 13
    assert notes == ["1 user of 2 is not in the model: it gets the item biases (give their history with `history` "
                     "to exclude what they have seen)"]
    popular = Popularity().fit(_small())
    assert check_known_users(popular, ["stranger"], "users.txt", []) and popular.n_users == 13


def test_only_a_family_that_explains_is_asked_to_explain(tmp_path):
    train = _train_file(tmp_path)
    wrmf = mw.train(train, model="wrmf", params={"factors": 4, "epochs": 2}).model
    assert len(mw.explain(wrmf, "u1", top=2).frame)
    popularity = mw.train(train, model="popularity").model
    with pytest.raises(InputError, match=r"a Popularity model cannot explain its scores \(train a wrmf model"):
        mw.explain(popularity, "u1")
    with pytest.raises(InputError, match="cannot explain its scores"):
        popularity.explain_frame("u1")  # the base's refusal, from the API too


def test_sub_models_are_for_a_family_that_merges_them(tmp_path):
    train = _train_file(tmp_path)
    with pytest.raises(InputError, match=r"`sub_models` needs `model=warp`, not `model=wrmf`"):
        mw.train(train, model="wrmf", sub_models=2)
    # the hybrid is WARP with feature weights, which do not add up over sub-models
    with pytest.raises(InputError, match=r"`sub_models` needs `model=warp`, not `model=hybrid`"):
        mw.train(train, model="hybrid", sub_models=2)
    with pytest.raises(InputError, match="cannot be fitted as sub-models"):
        HybridWARP().merge_sub_models([])
    merged = mw.train(train, params={"factors": 4, "epochs": 2}, sub_models=2).model
    assert merged.user_factors_.shape == (10, 4) and len(merged.sub_models_) == 2


def test_a_family_that_weighs_pairs_without_values_trains_without_a_value_column(tmp_path):
    bare = _train_file(tmp_path, values=False)
    wrmf = mw.train(bare, model="wrmf", params={"factors": 4, "epochs": 1})  # 1 + alpha per pair
    assert wrmf.model.n_users == 10
    with pytest.raises(InputError):  # WARP's confidence weighs rows by values it does not have
        mw.train(bare, params={"factors": 4, "epochs": 1, "confidence": "log"})
    # its confidence settings always matter, so they are taken without a confidence
    mw.train(bare, model="wrmf", params={"factors": 4, "epochs": 1, "confidence": "none", "alpha": 2.0})
    with pytest.raises(InputError, match="only matter with a confidence"):
        mw.train(bare, params={"factors": 4, "epochs": 1, "alpha": 2.0})


def test_train_refuses_what_a_family_cannot_take(tmp_path):
    train = _train_file(tmp_path)
    validation = tmp_path / "val.tsv"
    validation.write_text("u1\ti6\t1\n")
    # popularity has no early stopping: a validation file would be ignored, so it is refused
    with pytest.raises(InputError, match="`model=popularity` has no early stopping to validate") as caught:
        mw.train(train, model="popularity", validation=validation)
    assert caught.value.path == str(validation)


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


def test_the_hybrid_takes_warps_parameters_without_relisting_them():
    warp = set(WARP.param_names())
    hybrid = set(HybridWARP.param_names())
    assert hybrid == warp - {"confidence", "alpha", "eps", "confidence_use"} | {"identity", "identity_weight",
                                                                                "normalize"}
    model = HybridWARP(16, patience=3)  # positional and keyword, as an explicit list takes them
    assert (model.factors, model.patience, model.learning_rate, model.identity_weight) == (16, 3, None, 2.0)
    assert model.max_epochs == WARP().max_epochs  # WARP's defaults, not a copy of them
    assert type(model)(**model.get_params()).get_params() == model.get_params()  # clone
    with pytest.raises(TypeError, match="confidence"):
        HybridWARP(confidence="log")
    assert not HybridWARP.supports_confidence
