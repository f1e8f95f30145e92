"""What tune asks a family (models/tuning.py's hooks): a family registered with its own
hooks is searched, costed, shortened and refused by them, with nothing in stages/."""
from __future__ import annotations

import pytest

from mrec_warp.models import WARP, WRMF, ItemKNN
from mrec_warp.models.ease import EASE
from mrec_warp.models.families import FAMILIES, REGISTRY
from mrec_warp.models.tuning import SHORT_VALIDATION_USERS
from mrec_warp.stages.tune import tune


@pytest.fixture
def registered():
    """Two item-kNN families with hooks of their own, registered as any family is (by naming
    themselves), and out of the registry again after the test."""
    before = dict(REGISTRY)

    class Hungry(ItemKNN):
        """Item-kNN that refuses more than 10 neighbours for its memory."""

        name = "hungry"

        @classmethod
        def memory_refusal(cls, fit, params):
            neighbours = params.get("neighbours", 200)
            neighbours = 800 if neighbours == "auto" else neighbours  # the default: chosen up to 1600
            if neighbours > 10:
                return f"needs {neighbours} neighbours of {fit.shape[1]} items (search fewer)"
            return None

    class Slow(ItemKNN):
        """Item-kNN whose own estimate is a day per trial."""

        name = "slow"

        @classmethod
        def fit_cost(cls, shape, params, epochs_cap=None):
            neighbours = params.get("neighbours", 200)
            return 86400.0 + (800 if neighbours == "auto" else neighbours)

    yield
    REGISTRY.clear()
    REGISTRY.update(before)


def test_a_new_family_is_costed_and_refused_by_its_own_hooks(planted, registered):
    train, _ = planted
    default = FAMILIES["itemknn"].defaults(["neighbours"])["neighbours"]  # each family's defaults are a trial
    default = 800 if default == "auto" else default  # (as Hungry counts "auto")
    points = [{"model": "hungry", "neighbours": 5}, {"model": "slow", "neighbours": 5},
              {"model": "itemknn", "neighbours": 5}]
    result = tune(train, points, time_budget=600)
    assert f"skipping hungry: needs {default} neighbours of" in "\n".join(result.notes)  # its defaults: refused
    assert any(n.startswith("skipping slow: its cheapest trial is estimated at 24.0 h") for n in result.notes)
    assert set(result.table["model"]) == {"itemknn"}
    # without a budget every trial runs, and the tie rule's cost column is the family's estimate
    table = tune(train, points).table
    assert sorted(table.loc[table["model"] == "slow", "cost"]) == sorted([86405.0, 86400.0 + default])
    assert set(table["model"]) == {"hungry", "slow", "itemknn"}


def test_ease_refuses_for_memory_through_its_hook(planted):
    train, _ = planted
    result = tune(train, [{"model": "ease", "memory_limit_mb": 1e-3}, {"model": "itemknn", "neighbours": 5}],
                  time_budget=600, with_defaults=False)
    assert any(n.startswith("skipping ease: needs about ") and n.endswith(
        "(raise `memory_limit_mb` or search `max_items`)") for n in result.notes)
    assert set(result.table["model"]) == {"itemknn"}


def test_trials_are_built_by_the_family():
    shared = {"max_epochs": 30, "patience": 4, "random_state": 7}
    warp = WARP.trial_params({"factors": 8}, shared, k=5, epochs_cap=3)
    assert warp == {**shared, "factors": 8, "epochs": None, "n_jobs": 1, "eval_k": 5, "max_epochs": 3,
                    "validation_users": SHORT_VALIDATION_USERS}
    wrmf = WRMF.trial_params({"factors": 8}, shared, k=5)  # the seed only: its own patience and iterations
    assert wrmf == {"random_state": 7, "validation_users": 10**9, "factors": 8, "epochs": None, "n_jobs": 1,
                    "eval_k": 5}
    assert EASE.trial_params({"l2": 50.0}, shared, k=5) == {"l2": 50.0}  # fits once: its values alone
    assert WARP.tune_rungs[-1] is None and WRMF.tune_rungs[-1] is None and ItemKNN.tune_rungs == ()
    assert ItemKNN.memory_refusal(None, {}) is None  # the default: a family never refuses
