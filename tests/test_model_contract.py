"""Every model class runs the shared contract suite (tests/model_contract.py)."""
from __future__ import annotations

from mrec_warp.models import EASE, SLIM, WARP, WRMF, HybridWARP, ItemKNN, Popularity

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


class TestWRMF(ModelContract):
    model_class = WRMF
    params = {"factors": 8, "epochs": 3, "random_state": 0}


class TestHybridWARP(ModelContract):
    model_class = HybridWARP
    params = {"factors": 8, "epochs": 3, "random_state": 0}
