"""Recommendation models sharing the :class:`~mrec_warp.models.base.Recommender` API."""
from .base import Recommender, load
from .popularity import Popularity
from .warp import WARP

__all__ = ["Recommender", "Popularity", "WARP", "load"]
