"""Every model class runs the shared contract suite (tests/model_contract.py)."""
from __future__ import annotations

from mrec_warp.models import EASE, SLIM, WARP, WRMF, Factors, HybridWARP, ItemKNN, Popularity

from .model_contract import ModelContract


class TestPopularity(ModelContract):
    model_class = Popularity


class TestWARP(ModelContract):
    model_class = WARP
    params = {"factors": 8, "epochs": 3, "random_state": 0}


class TestItemKNN(ModelContract):
    model_class = ItemKNN
    params = {"neighbours": 10}


class TestItemKNNBM25(ModelContract):
    model_class = ItemKNN
    params = {"neighbours": 10, "similarity": "bm25"}


class TestSLIM(ModelContract):
    model_class = SLIM
    params = {"l1": 0.5, "l2": 5.0}


class TestEASE(ModelContract):
    model_class = EASE
    params = {"l2": 10.0}


class TestEASEPopularItems(ModelContract):
    model_class = EASE
    params = {"l2": 10.0, "max_items": 40}
    recommends_every_item = False  # only the 40 most popular items are scored


class TestWRMF(ModelContract):
    model_class = WRMF
    params = {"factors": 8, "epochs": 3, "random_state": 0}


class TestHybridWARP(ModelContract):
    model_class = HybridWARP
    params = {"factors": 8, "epochs": 3, "random_state": 0}


class TestFactors(ModelContract):
    """Imported factors: built from a WARP model's arrays by ``Factors.from_arrays``."""

    model_class = Factors
    params = {"regularization": 0.01}
    # fold-in is a least-squares projection on factors WARP's ranking loss learnt, the refit a
    # WARP fit: they agree less (0.47 on the contract's data)
    fold_in_correlation = 0.35
    skip_reasons = {"test_refitting_one_model_is_idempotent": "imported factors are never fitted here "
                                                              "(fit refuses, tested in test_interop)"}

    @classmethod
    def build(cls, X, params=None, **fit_kwargs):
        warp = WARP(factors=8, epochs=3, random_state=0).fit(X, **fit_kwargs)
        return Factors.from_arrays(warp.user_factors_, warp.item_factors_, warp.user_ids, warp.item_ids,
                                   item_bias=warp.item_bias_, train=warp.train_, **{**cls.params, **(params or {})})
