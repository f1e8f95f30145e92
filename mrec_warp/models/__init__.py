"""Recommendation models sharing the :class:`~mrec_warp.models.base.Recommender` API.

Every module of this package is imported with it, so every class that names itself in one
(``name = "..."``) is registered (:mod:`.families`) and exported here, and as
``mrec_warp.<Class>``: ``__all__`` is the base, the registry's classes in its order and
``load``. A new family is a new module here; nothing at run time lists it.
"""
import importlib
import pkgutil
from typing import TYPE_CHECKING

from .base import Recommender, load
from .families import REGISTRY

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
del _module

globals().update(REGISTRY)

if TYPE_CHECKING:
    # Type checkers do not run the loop above: they see the classes named here (a line here
    # gives a new family its precise type; nothing at run time reads this list).
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
else:
    __all__ = ["Recommender"] + list(REGISTRY) + ["load"]
