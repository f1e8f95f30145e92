"""Type and range checks of a model's constructor parameters, with one message form.

Every model's ``_check_params`` goes through these, so that a parameter of the wrong type
(``learning_rate='a'``, ``factors=True``, ``alpha=nan``) is refused with an
:class:`~mrec_warp.errors.InputError` naming it, never a ``TypeError`` from deep inside.
"""
from __future__ import annotations

import inspect
import numbers
import re
from typing import Any, Optional

import numpy as np

from ..errors import InputError


def _shown(value: Any) -> str:
    """``repr(value)``, cut short: a parameter may hold something large by mistake."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _bounds(at_least, above, at_most, below) -> str:
    parts = [f"{op} {bound}" for op, bound in ((">=", at_least), (">", above), ("<=", at_most), ("<", below))
             if bound is not None]
    return " and ".join(parts)


def is_number(value: Any) -> bool:
    """A real number that is not a bool (``True`` is an int to Python, never a count to a user)."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def check_number(
    value: Any,
    name: str,
    *,
    integer: bool = False,
    at_least: Optional[float] = None,
    above: Optional[float] = None,
    at_most: Optional[float] = None,
    below: Optional[float] = None,
    optional: bool = False,
    hint: Optional[str] = None,
) -> None:
    """Raise ``InputError`` unless ``value`` is a finite number within the bounds given.

    Parameters
    ----------
    value
        The parameter's value.
    name : str
        The parameter's name, shown in backticks (the CLI shows it as its flag).
    integer : bool
        Whole numbers only (an integral float such as ``6.0`` passes: a tuner's grid may
        produce one).
    at_least, above, at_most, below : float, optional
        Bounds: ``>=``, ``>``, ``<=``, ``<``.
    optional : bool
        ``None`` is allowed too.
    hint : str, optional
        How to fix it, when the bounds alone do not say.
    """
    if optional and value is None:
        return
    ok = is_number(value) and bool(np.isfinite(value)) and (not integer or float(value).is_integer())
    if ok:
        ok = ((at_least is None or value >= at_least) and (above is None or value > above)
              and (at_most is None or value <= at_most) and (below is None or value < below))
    if not ok:
        kind = "an integer" if integer else "a number"
        bounds = _bounds(at_least, above, at_most, below)
        wanted = f"{kind} {bounds}".strip() + (" or None" if optional else "")
        raise InputError(f"invalid parameter: `{name}` must be {wanted}, got {_shown(value)}", hint=hint)


def check_flag(value: Any, name: str) -> None:
    """Raise ``InputError`` unless ``value`` is ``True`` or ``False``."""
    if not isinstance(value, (bool, np.bool_)):
        raise InputError(f"invalid parameter: `{name}` must be True or False, got {_shown(value)}")


def check_choice(value: Any, name: str, choices) -> None:
    """Raise ``InputError`` unless ``value`` is one of the strings ``choices``."""
    if not (isinstance(value, str) and value in choices):
        raise InputError(f"invalid parameter: {name} must be one of {', '.join(map(str, choices))}, "
                         f"got {_shown(value)}", hint=f"set `{name}`")


def integer_params(cls: type) -> frozenset:
    """The constructor parameters of ``cls`` annotated as integers (``int``, ``Optional[int]``)."""
    sig = inspect.signature(cls.__init__)
    return frozenset(name for name, p in sig.parameters.items()
                     if re.search(r"\bint\b", str(p.annotation)) and "float" not in str(p.annotation))


def check_n_jobs(value: Any) -> None:
    """``n_jobs`` as every model takes it: a whole number, negative counting back from the
    cores, or ``None``."""
    check_number(value, "n_jobs", integer=True, optional=True, hint="-1: every core")
