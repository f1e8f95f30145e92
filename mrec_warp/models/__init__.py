"""Recommendation models sharing the :class:`~mrec_warp.models.base.Recommender` API."""
from .base import Recommender, load
from .popularity import Popularity
from .warp import WARP
from .hybrid import HybridWARP
from .wrmf import WRMF
from .itemknn import ItemKNN
from .slim import SLIM
from .ease import EASE
from .imported import Factors
from .families import FAMILIES  # noqa: F401  every registered family's class, so that load() knows it

__all__ = ["Recommender", "Popularity", "WARP", "HybridWARP", "WRMF", "ItemKNN", "SLIM", "EASE", "Factors", "load"]
