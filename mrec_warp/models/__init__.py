"""Recommendation models sharing the :class:`~mrec_warp.models.base.Recommender` API."""
from .base import Recommender, load
from .popularity import Popularity
from .warp import WARP
from .hybrid import HybridWARP
from .wrmf import WRMF

__all__ = ["Recommender", "Popularity", "WARP", "HybridWARP", "WRMF", "load"]
