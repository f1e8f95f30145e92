"""Declared parameters: each model class states its constructor parameters once.

A model class lists its parameters in ``PARAMETERS``, a tuple of :class:`Param`, in the order
of its ``__init__``. Everything else that needs to know them is generated from that one
declaration:

- the checks (:func:`check_declared`, run by ``Recommender.check_params``);
- ``train``'s options, each naming the parameter it sets, so that a message naming it shows
  its flag (:mod:`mrec_warp.cli._model_options`, :mod:`mrec_warp.cli._flags`);
- ``tune``'s search space (:class:`~mrec_warp.models.families.Family`);
- the parameter table of the documentation (:func:`parameter_table`).

*Placement* settings (threads, backends, logging) are declared too, with ``placement=True``:
they are checked, but they are not hyper-parameters, so no search varies them, the parameter
table leaves them out and ``train`` sets them from its own options (``--n-jobs``,
``--backend``).
"""
from __future__ import annotations

import dataclasses
import inspect
import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from ..seeds import MAX_SEED
from .params import check_choice, check_flag, check_number

#: Python types a parameter may have.
TYPES = (int, float, str, bool)


@dataclass(frozen=True)
class Param:
    """One constructor parameter of a model class.

    Parameters
    ----------
    name : str
        The ``__init__`` argument (and attribute) name.
    type : {int, float, str, bool}
        Its type; ``int`` means whole numbers only.
    default
        The ``__init__`` default (a test checks that the two agree).
    help : str
        One short sentence for ``train --help`` and the parameter table.
    low, high : float, optional
        Bounds, closed (``>=``, ``<=``) unless ``open``.
    open : bool
        The bounds themselves are refused (``> low``, ``< high``).
    choices : tuple of str
        The values a ``str`` parameter may take.
    nullable : bool
        ``None`` is allowed too.
    tune : optional
        Where a search varies it: a list or ``("log", lo, hi)``, ``("logint", lo, hi)``,
        ``("log0", lo, hi)`` where a random search draws it (see
        :mod:`mrec_warp.stages.candidates`); ``True``: only a grid of the user's varies it;
        ``None``: no search does, unless ``grid`` is given.
    grid : tuple, optional
        Its values in the family's small built-in grid.
    option : bool or str
        ``train``'s option for it: ``True`` is ``--`` + the name with dashes, a string the
        flag when it is spelled otherwise (``dtype``: ``"--ease-dtype"``); ``False``: set
        from ``--params`` files and the API only (``random_state`` is set from ``train``'s
        own ``--seed``).
    placement : bool
        Where and how the work runs, not what is learned (see the module docstring).
    hint : str, optional
        How to fix a refused value, when the bounds alone do not say.
    shown : str, optional
        The default as help shows it, when the value alone does not say (``None``: "all").
    check : bool
        Checked by its declaration (``False``: someone else checks it, e.g. the backend).
    """

    name: str
    type: type
    default: Any
    help: str
    low: Optional[float] = None
    high: Optional[float] = None
    open: bool = False
    choices: Tuple[str, ...] = ()
    nullable: bool = False
    tune: Any = None
    grid: Optional[Tuple[Any, ...]] = None
    option: Union[bool, str] = True
    placement: bool = False
    hint: Optional[str] = None
    shown: Optional[str] = None
    check: bool = True

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise TypeError(f"parameter {self.name!r}: type must be one of int, float, str, bool")
        if self.choices and self.type is not str:
            raise TypeError(f"parameter {self.name!r}: only a str parameter has choices")

    # -- checks ------------------------------------------------------------------------------
    def validate(self, value: Any) -> None:
        """Raise :class:`~mrec_warp.errors.InputError` unless ``value`` is allowed."""
        if not self.check or (self.nullable and value is None):
            return
        if value == "auto" and self.default == "auto":  # chosen by the fit (models.selection)
            return
        if self.type is bool:
            check_flag(value, self.name)
        elif self.type is str:
            if self.choices:
                check_choice(value, self.name, self.choices)
        else:
            low, high = self.low, self.high
            check_number(value, self.name, integer=self.type is int,
                         at_least=None if self.open else low, above=low if self.open else None,
                         at_most=None if self.open else high, below=high if self.open else None,
                         optional=self.nullable,
                         hint=self.hint or ("or auto, the default: chosen on the data's hold-out"
                                            if self.default == "auto" else None))

    # -- what users read ---------------------------------------------------------------------
    @property
    def searched(self) -> bool:
        """Whether a search may vary it (a grid of the user's, or the built-in space)."""
        return not self.placement and (self.tune is not None or self.grid is not None)

    @property
    def flag(self) -> Optional[str]:
        """``train``'s option for it (``--kos-k``, ``--ease-dtype``), or ``None``."""
        if self.option is False:
            return None
        return self.option if isinstance(self.option, str) else "--" + self.name.replace("_", "-")

    @property
    def type_name(self) -> str:
        return {int: "int", float: "float", str: "str", bool: "bool"}[self.type]

    def default_text(self) -> str:
        """The default as a user reads it: ``64``, ``on``, ``all``."""
        if self.shown is not None:
            return self.shown
        if self.type is bool:
            return "on" if self.default else "off"
        return _value(self.default)

    def range_text(self) -> str:
        """The allowed values: ``>= 1``, ``(0, 1)``, ``warp | bpr``, ``>= 0 or none``."""
        if self.type is bool:
            text = "on | off"
        elif self.choices:
            text = " | ".join(self.choices)
        elif self.type is str:
            text = "text"
        elif self.low is not None and self.high is not None:
            text = f"{'(' if self.open else '['}{_num(self.low)}, {_num(self.high)}{')' if self.open else ']'}"
        elif self.low is not None:
            text = f"{'>' if self.open else '>='} {_num(self.low)}"
        elif self.high is not None:
            text = f"{'<' if self.open else '<='} {_num(self.high)}"
        else:
            text = "any integer" if self.type is int else "any number"
        return text + (" or none" if self.nullable else "")

    def tune_text(self) -> str:
        """Where a search varies it: the space entry, the grid, or ``-``."""
        parts = []
        if isinstance(self.tune, tuple):
            kind, lo, hi = self.tune
            parts.append({"log": "log-uniform", "logint": "log-uniform integer",
                          "log0": "0 or log-uniform"}.get(kind, kind) + f" {_num(lo)}..{_num(hi)}")
        elif self.tune not in (None, True):
            parts.append("one of " + ", ".join(_value(v) for v in self.tune))
        if self.grid is not None:
            parts.append("grid " + ", ".join(_value(v) for v in self.grid))
        if not parts and self.searched:
            parts.append("your grid only")
        return "; ".join(parts) or "-"

    def replace(self, **changes: Any) -> "Param":
        """A copy with ``changes`` (a subclass's version of an inherited parameter)."""
        return dataclasses.replace(self, **changes)


def _num(value: float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return f"{value:g}" if isinstance(value, float) else str(value)


def _value(value: Any) -> str:
    return "none" if value is None else _num(value) if isinstance(value, (int, float)) else str(value)


# -- parameters many families share ------------------------------------------------------------
def n_jobs_param(help: str) -> Param:
    """``n_jobs`` (a placement setting): a whole number, negative counting back from the cores."""
    return Param("n_jobs", int, 1, help, nullable=True, placement=True, hint="-1: every core")


def verbose_param() -> Param:
    """``verbose`` (a placement setting; any truth value, as always)."""
    return Param("verbose", bool, False, "Log one line per epoch to standard error.", placement=True, check=False)


def seed_param() -> Param:
    """``random_state`` as the iterative models declare it (``train`` sets it from ``--seed``)."""
    return Param("random_state", int, None, "Seed of initialisation, shuffling and sampling (none: a fresh one).",
                 low=0, high=MAX_SEED, nullable=True, option=False)


# -- declarations of a class ------------------------------------------------------------------
def declared(cls: type) -> Tuple[Param, ...]:
    """The parameters ``cls`` declares (``PARAMETERS``), in ``__init__`` order."""
    return tuple(getattr(cls, "PARAMETERS", ()))


def declared_by_name(cls: type) -> Dict[str, Param]:
    return {p.name: p for p in declared(cls)}


def hyper_parameters(cls: type) -> Tuple[Param, ...]:
    """The declared parameters that are not placement settings."""
    return tuple(p for p in declared(cls) if not p.placement)


def with_params(params: Sequence[Param], *, drop: Iterable[str] = (), replace: Sequence[Param] = (),
                add: Sequence[Param] = ()) -> Tuple[Param, ...]:
    """An inherited declaration changed: ``drop`` names, ``replace`` some by name (in place),
    ``add`` new ones at the end."""
    new = {p.name: p for p in replace}
    gone = set(drop)
    return tuple(new.get(p.name, p) for p in params if p.name not in gone) + tuple(add)


def init_signature(params: Sequence[Param]) -> inspect.Signature:
    """The ``__init__`` signature a declaration stands for (``self``, then each parameter with
    its default, in order): a class that only declares its parameters, as the hybrid does with
    WARP's, gets its constructor's signature from it instead of re-listing them."""
    self = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return inspect.Signature([self] + [
        inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=p.default,
                          annotation=Optional[p.type] if p.nullable or p.default is None else p.type)
        for p in params], return_annotation=None)


def check_declared(model: Any) -> None:
    """Check every declared parameter of ``model`` by its declaration, in declaration order."""
    for param in declared(type(model)):
        param.validate(getattr(model, param.name))


def signature_mismatches(cls: type) -> List[str]:
    """How ``cls.PARAMETERS`` and ``cls.__init__`` disagree (names, order, defaults); empty
    when they agree."""
    sig = [p for p in inspect.signature(cls.__init__).parameters.values()
           if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    params = declared(cls)
    problems = []
    names, want = [p.name for p in params], [p.name for p in sig]
    if names != want:
        problems.append(f"{cls.__name__}: declares {names}, __init__ takes {want}")
    by_name = {p.name: p for p in params}
    for p in sig:
        decl = by_name.get(p.name)
        if decl is not None and (decl.default != p.default or type(decl.default) is not type(p.default)):
            problems.append(f"{cls.__name__}.{p.name}: declared default {decl.default!r}, __init__ has {p.default!r}")
    for decl in params:
        if decl.default is None and not decl.nullable:
            problems.append(f"{cls.__name__}.{decl.name}: default None but not nullable")
    return problems


# -- the documentation's table ----------------------------------------------------------------
def _rst(text: str) -> str:
    """Help text as reST: `` `name` `` as literal ``name``, a lone ``*`` escaped."""
    return re.sub(r"`([^`]+)`", r"``\1``", text.replace("*", "\\*"))


def parameter_table(family: str, cls: type, searchable: bool = True) -> str:
    """The reST table of ``cls``'s hyper-parameters (placement settings left out); without
    ``searchable`` (a family ``tune`` does not search) the tuned column says ``-``."""
    title = f"``{family}`` ({cls.__name__})"
    params = hyper_parameters(cls)
    lines = [title, "~" * len(title), ""]
    if not params:
        return "\n".join(lines + ["No parameters.", ""])
    lines += [".. list-table::", "   :header-rows: 1", "   :widths: 18 8 12 16 20 40", "",
              "   * - Parameter", "     - Type", "     - Default", "     - Range", "     - Tuned", "     - Help"]
    for p in params:
        cells = [f"``{p.name}``", p.type_name, _rst(p.default_text()), _rst(p.range_text()),
                 _rst(p.tune_text()) if searchable else "-", _rst(p.help)]
        lines.append(f"   * - {cells[0]}")
        lines += [f"     - {cell}" for cell in cells[1:]]
    return "\n".join(lines + [""])


def parameter_tables(families: Mapping[str, Any]) -> str:
    """The whole ``docs/reference/parameters.rst``: one table per family (name -> an object
    with ``cls`` and ``searchable``, as :data:`~mrec_warp.models.families.FAMILIES` holds)."""
    head = ("Model parameters\n================\n\n"
            ".. This file is generated by scripts/write_parameter_table.py from each model's\n"
            "   declared parameters (PARAMETERS); edit the declarations, not this file.\n\n"
            "Each family's hyper-parameters: type, default, allowed range, where ``tune`` varies\n"
            "it (its random search, its built-in grid, or only a grid you give; ``-``: never), and\n"
            "what it does. ``train`` sets most with ``--name-with-dashes`` (``dtype``: ``--ease-dtype``);\n"
            "``--params`` files and the Python API use the names. Placement settings (threads,\n"
            "backends, logging) are left out: ``train`` takes them from ``--n-jobs``, ``--backend``\n"
            "and ``-v``.\n")
    return head + "".join("\n" + parameter_table(name, fam.cls, fam.searchable) for name, fam in families.items())
