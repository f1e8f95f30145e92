"""The one registry of model families, and what is derived from it.

A model class names itself once, with the class attribute ``name`` (``name = "warp"``), and
is registered when its class is defined (:meth:`Recommender.__init_subclass__
<mrec_warp.models.base.Recommender.__init_subclass__>` calls :func:`register`). Everything
that lists families reads this registry: ``train --model``'s choices and options, ``tune``'s
families and search spaces, ``load()`` (a model file names its class), the parameter
reference, and the messages that say which families can do something. The registry is kept
in the families' ``order`` (a class attribute; those without one last, as they are defined):
the order of the choices, of ``tune``'s families and of the references. :mod:`mrec_warp.models`
imports every module of its package, so a class in any of them is registered and exported.

From each family's declared parameters (``PARAMETERS``, :mod:`.declared`) come the parameters
a search may vary (with their types), where random candidates are drawn (ranges that contain
the class's defaults, so a search explores *around* the defaults), and a small built-in grid
for ``tune --models`` without ``--grid`` or ``--random`` (:class:`Family`).

Space entries: a list (sampled uniformly), ``("log", lo, hi)`` (log-uniform float),
``("logint", lo, hi)`` (log-uniform, rounded to an int) or ``("log0", lo, hi)`` (0 a quarter
of the time, else log-uniform).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Tuple, Type, Union

from .declared import hyper_parameters

if TYPE_CHECKING:  # (annotations only: the base registers its subclasses here)
    from .base import Recommender

#: Every registered model class by its class name (what a model file names), in the families'
#: ``order``. A family's ``name`` is its ``--model`` name; a class whose ``name`` is ``None`` is
#: loaded from files but is no family of ``train`` (imported factors).
REGISTRY: Dict[str, Type[Recommender]] = {}

#: The family of everything that names none: ``train`` without ``--model``, a search point
#: without ``model``, a flat grid file (parameter -> values) and ``tune --random N`` alone
#: (the one family before ``tune`` searched several). The only family a stage names.
DEFAULT_FAMILY = "warp"


def register(cls: Type[Recommender]) -> None:
    """Add ``cls`` to the registry (a class that sets ``name`` in its body; a later class of
    the same class name replaces the earlier one), in its place by ``order``."""
    REGISTRY[cls.__name__] = cls
    ordered = sorted(REGISTRY.items(), key=lambda item: _place(item[1]))  # stable: ties as defined
    REGISTRY.clear()
    REGISTRY.update(ordered)


def _place(cls: Type[Recommender]) -> Tuple[int, int]:
    """The sort key of a class in the registry: its own ``order`` (not one it inherits), else last."""
    order = vars(cls).get("order")
    return (0, order) if order is not None else (1, 0)


def model_classes() -> Dict[str, Type[Recommender]]:
    """``--model`` name -> class of every family, in registry order."""
    return {cls.name: cls for cls in REGISTRY.values() if cls.name is not None}


def family_name(model: Any) -> str:
    """The family name of a model (or model class): its ``--model`` name, else its class name."""
    cls = model if isinstance(model, type) else type(model)
    return getattr(cls, "name", None) or cls.__name__


# -- what a family can do ------------------------------------------------------------------------
def fit_takes(model: Any, keyword: str) -> bool:
    """Whether the ``fit`` of ``model`` (a model or class) takes ``keyword`` by name, as
    scikit-learn's ``has_fit_parameter`` asks: ``item_features`` (a family that learns from
    features), ``workers`` (one that spreads its fit over workers), ``use_values`` (one that
    weighs observed pairs with or without a value column)."""
    cls = model if isinstance(model, type) else type(model)
    return keyword in inspect.signature(cls.fit).parameters


def takes_features(model: Any) -> bool:
    """Whether the family of ``model`` (a model or class) learns from user and item features:
    its ``fit`` takes them, and it adds users and items by their features (the hybrid)."""
    return fit_takes(model, "item_features")


#: What :func:`families_with` takes: a capability's name (a class attribute) or a test of a class.
Capability = Union[str, Callable[[Any], bool]]


def families_with(capability: Capability) -> List[str]:
    """The ``--model`` names of the families that have ``capability`` (one of
    :data:`~mrec_warp.models.base.CAPABILITIES`, or a test of the class such as
    ``lambda cls: provides(cls, "explain_frame")``), in registry order: what a message names
    when it refuses an option a family cannot take."""
    test = capability if callable(capability) else (lambda cls: getattr(cls, capability, False))
    return [name for name, cls in model_classes().items() if test(cls)]


def named_families(capability: Capability) -> str:
    """``families_with(capability)`` as an option's message names them: "`model=warp` or wrmf"."""
    names = families_with(capability)
    return " or ".join([f"`model={names[0]}`"] + names[1:]) if names else "no family"


def family_names(capability: Capability) -> str:
    """``families_with(capability)`` as a sentence lists them: "warp, wrmf or rp3beta"."""
    names = families_with(capability)
    if not names:
        return "a family that can"
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


# -- what tune derives from a family's declaration -----------------------------------------------
@dataclass(frozen=True)
class Family:
    """A trainable model family as ``tune`` sees it; :meth:`of` derives it from the class's declaration."""

    cls: Type[Recommender]
    tunable: Dict[str, type] = field(default_factory=dict)
    space: Dict[str, Any] = field(default_factory=dict)
    grid: Dict[str, List[Any]] = field(default_factory=dict)
    nullable: frozenset = frozenset()
    #: ``tune --models`` may search it: it declares parameters a search varies, and its fit
    #: needs no feature files (a search passes none; the hybrid would be WARP without them).
    searchable: bool = True

    @classmethod
    def of(cls, model: Type[Recommender]) -> "Family":
        """The family of ``model`` as its ``PARAMETERS`` declare it."""
        searchable = not takes_features(model)
        searched = [p for p in hyper_parameters(model) if p.searched] if searchable else []
        return cls(model,
                   tunable={p.name: p.type for p in searched},
                   space={p.name: p.tune if isinstance(p.tune, tuple) else list(p.tune)
                          for p in searched if p.tune not in (None, True)},
                   grid={p.name: list(p.grid) for p in searched if p.grid is not None},
                   nullable=frozenset(p.name for p in searched if p.nullable),
                   searchable=bool(searched))

    def defaults(self, names) -> Dict[str, Any]:
        """The class's default value of each of ``names``."""
        sig = inspect.signature(self.cls.__init__).parameters
        return {n: sig[n].default for n in names}


class _Families(Mapping):
    """``--model`` name -> :class:`Family`, derived from the registry at each look-up."""

    def __getitem__(self, name: str) -> Family:
        return Family.of(model_classes()[name])

    def __iter__(self) -> Iterator[str]:
        return iter(model_classes())

    def __len__(self) -> int:
        return len(model_classes())


#: Every family as ``tune`` sees it (a view of the registry, never a copy of it).
FAMILIES: Mapping[str, Family] = _Families()


def tunable_families() -> Tuple[str, ...]:
    """Families ``tune --models`` can search (the hybrid needs feature files, popularity has
    nothing to tune)."""
    return tuple(name for name, fam in FAMILIES.items() if fam.searchable)


def epoch_families() -> Tuple[str, ...]:
    """Searchable families whose trials early-stop on the validation split (the others fit once)."""
    return tuple(name for name, fam in FAMILIES.items() if fam.searchable and fam.cls.early_stopping)


def baseline_family() -> str:
    """The family of ``tune``'s reference row (its class sets ``tune_baseline``; never the pick)."""
    return next(name for name, cls in model_classes().items() if cls.tune_baseline)
