"""Recommendation models sharing the :class:`~mrec_warp.models.base.Recommender` API.

Importing a family's module registers it (:mod:`.families`); the imports below are in the
registry's order, which is the order ``train --model`` lists the families, ``tune`` searches
them and the parameter reference shows them.
"""
from .base import Recommender, load
from .warp import WARP
from .itemknn import ItemKNN
from .slim import SLIM
from .ease import EASE
from .wrmf import WRMF
from .popularity import Popularity
from .hybrid import HybridWARP
from .rp3beta import RP3beta
from .imported import Factors

__all__ = ["Recommender", "WARP", "ItemKNN", "SLIM", "EASE", "WRMF", "Popularity", "HybridWARP", "RP3beta",
           "Factors", "load"]
