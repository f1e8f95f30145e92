"""The model families ``train --model`` and ``tune --models`` know: name -> class and search space.

One registry line per family is all a new model needs to be trainable and tunable: its
class declares its parameters (``PARAMETERS``, :mod:`.declared`), and from that declaration
come the parameters a search may vary (with their types), where random candidates are drawn
(ranges that contain the class's defaults, so a search explores *around* the defaults), and a
small built-in grid for ``tune --models`` without ``--grid`` or ``--random``.

Space entries: a list (sampled uniformly), ``("log", lo, hi)`` (log-uniform float),
``("logint", lo, hi)`` (log-uniform, rounded to an int) or ``("log0", lo, hi)`` (0 a quarter
of the time, else log-uniform).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Dict, List, Type

from .base import Recommender
from .declared import hyper_parameters
from .ease import EASE
from .family_names import FAMILY_NAMES
from .hybrid import HybridWARP
from .itemknn import ItemKNN
from .popularity import Popularity
from .rp3beta import RP3beta
from .slim import SLIM
from .warp import WARP
from .wrmf import WRMF


@dataclass(frozen=True)
class Family:
    """A trainable model family; :meth:`of` builds it from the class's declaration."""

    cls: Type[Recommender]
    tunable: Dict[str, type] = field(default_factory=dict)
    space: Dict[str, Any] = field(default_factory=dict)
    grid: Dict[str, List[Any]] = field(default_factory=dict)
    nullable: frozenset = frozenset()
    #: ``tune --models`` may search it (the hybrid needs feature files a search does not take).
    searchable: bool = True

    @classmethod
    def of(cls, model: Type[Recommender], searchable: bool = True) -> "Family":
        """The family of ``model`` as its ``PARAMETERS`` declare it."""
        searched = [p for p in hyper_parameters(model) if p.searched] if searchable else []
        return cls(model,
                   tunable={p.name: p.type for p in searched},
                   space={p.name: p.tune if isinstance(p.tune, tuple) else list(p.tune)
                          for p in searched if p.tune is not None},
                   grid={p.name: list(p.grid) for p in searched if p.grid is not None},
                   nullable=frozenset(p.name for p in searched if p.nullable),
                   searchable=searchable and bool(searched))

    def defaults(self, names) -> Dict[str, Any]:
        """The class's default value of each of ``names``."""
        sig = inspect.signature(self.cls.__init__).parameters
        return {n: sig[n].default for n in names}


FAMILIES: Dict[str, Family] = {
    "warp": Family.of(WARP),
    "itemknn": Family.of(ItemKNN),
    "slim": Family.of(SLIM),
    "ease": Family.of(EASE),
    "wrmf": Family.of(WRMF),
    "popularity": Family.of(Popularity),
    "hybrid": Family.of(HybridWARP, searchable=False),
    "rp3beta": Family.of(RP3beta),
}

#: Families ``tune --models`` can search (the hybrid needs feature files, popularity has
#: nothing to tune).
TUNABLE_FAMILIES = tuple(name for name, fam in FAMILIES.items() if fam.searchable)
#: Families whose trials early-stop on the validation split (the others fit once).
EPOCH_FAMILIES = tuple(name for name, fam in FAMILIES.items() if fam.searchable and fam.cls.early_stopping)
#: The family of everything that names none: ``train`` without ``--model``, a search
#: point without ``model``, a flat grid file (parameter -> values) and ``tune --random N``
#: alone (the one family before ``tune`` searched several). The only family a stage names.
DEFAULT_FAMILY = "warp"
#: The family of ``tune``'s reference row (its class sets ``tune_baseline``; never the pick).
BASELINE_FAMILY = next(name for name, fam in FAMILIES.items() if fam.cls.tune_baseline)
FAMILY_NAMES.update({name: fam.cls for name, fam in FAMILIES.items()})  # for model modules' messages


def model_classes() -> Dict[str, Type[Recommender]]:
    """``--model`` name -> class."""
    return {name: fam.cls for name, fam in FAMILIES.items()}


def families_with(capability: str) -> List[str]:
    """The ``--model`` names of the families that have ``capability`` (one of
    :data:`~mrec_warp.models.base.CAPABILITIES`), in registry order: what a stage names
    when it refuses an option a family cannot take."""
    return [name for name, cls in model_classes().items() if getattr(cls, capability)]


def named_families(capability: str) -> str:
    """``families_with(capability)`` as a message names them: "`model=warp` or wrmf"."""
    names = families_with(capability)
    return " or ".join([f"`model={names[0]}`"] + names[1:]) if names else "no family"
