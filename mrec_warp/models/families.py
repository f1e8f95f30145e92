"""The model families ``train --model`` and ``tune --models`` know: name -> class and search space.

One entry per family is all a new model needs to be trainable and tunable: its class, the
parameters a search may vary (with their types), where random candidates are drawn
(ranges that contain the class's defaults, so a search explores *around* the defaults),
and a small built-in grid for ``tune --models`` without ``--grid`` or ``--random``.

Space entries: a list (sampled uniformly), ``("log", lo, hi)`` (log-uniform float),
``("logint", lo, hi)`` (log-uniform, rounded to an int) or ``("log0", lo, hi)`` (0 a quarter
of the time, else log-uniform).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Dict, List, Type

from .base import Recommender
from .ease import EASE
from .hybrid import HybridWARP
from .itemknn import ItemKNN
from .popularity import Popularity
from .slim import SLIM
from .warp import WARP
from .wrmf import WRMF


@dataclass(frozen=True)
class Family:
    """A trainable model family."""

    cls: Type[Recommender]
    tunable: Dict[str, type] = field(default_factory=dict)
    space: Dict[str, Any] = field(default_factory=dict)
    grid: Dict[str, List[Any]] = field(default_factory=dict)
    nullable: frozenset = frozenset()

    def defaults(self, names) -> Dict[str, Any]:
        """The class's default value of each of ``names``."""
        sig = inspect.signature(self.cls.__init__).parameters
        return {n: sig[n].default for n in names}


FAMILIES: Dict[str, Family] = {
    "warp": Family(
        WARP,
        tunable={"factors": int, "learning_rate": float, "user_reg": float, "item_reg": float,
                 "max_sampled": int, "loss": str, "learning_schedule": str, "item_bias": bool,
                 "user_max_norm": float, "item_max_norm": float, "kos_k": int, "kos_n": int},
        space={"factors": [32, 64, 128], "learning_rate": ("log", 0.007, 0.06),
               "user_reg": ("log0", 1e-7, 1e-4), "item_reg": ("log0", 1e-7, 1e-4),
               "max_sampled": [20, 50, 100], "user_max_norm": [None, 1.0, 1.25, 1.5]},
        grid={"factors": [32, 128]},
        nullable=frozenset({"user_max_norm", "item_max_norm"}),
    ),
    "itemknn": Family(
        ItemKNN,
        tunable={"neighbours": int, "similarity": str, "shrink": float, "bm25_k1": float, "bm25_b": float},
        space={"neighbours": ("logint", 100, 1600), "similarity": ["cosine", "tfidf", "bm25"],
               "shrink": ("log0", 1.0, 100.0)},
        grid={"neighbours": [200, 800, 1600], "similarity": ["cosine", "tfidf", "bm25"]},
    ),
    "slim": Family(
        SLIM,
        tunable={"l1": float, "l2": float, "topk": int},
        space={"l1": ("log", 0.5, 10.0), "l2": ("log", 50.0, 800.0)},
        grid={"l1": [1.0, 2.0, 5.0], "l2": [100.0, 200.0, 500.0]},
    ),
    "ease": Family(
        EASE,
        tunable={"l2": float},
        space={"l2": ("log", 100.0, 1600.0)},
        grid={"l2": [100.0, 200.0, 400.0, 800.0, 1600.0]},
    ),
    "wrmf": Family(
        WRMF,
        tunable={"factors": int, "alpha": float, "regularization": float, "confidence": str, "cg_steps": int},
        # around the defaults (64 factors, alpha auto: 5 on a binary file, regularization 40)
        space={"factors": [32, 64, 128], "alpha": ("log", 0.3, 30.0), "regularization": ("log", 1.0, 200.0),
               "confidence": ["linear", "log"]},
        grid={"alpha": [1.0, 5.0, 20.0], "regularization": [10.0, 40.0, 160.0]},
    ),
    "popularity": Family(Popularity),
    "hybrid": Family(HybridWARP),
}

#: Families ``tune --models`` can search (the hybrid needs feature files, popularity has
#: nothing to tune).
TUNABLE_FAMILIES = ("warp", "itemknn", "slim", "ease", "wrmf")
#: Families whose trials early-stop on the validation split (the others fit once).
EPOCH_FAMILIES = ("warp", "wrmf")


def model_classes() -> Dict[str, Type[Recommender]]:
    """``--model`` name -> class."""
    return {name: fam.cls for name, fam in FAMILIES.items()}
