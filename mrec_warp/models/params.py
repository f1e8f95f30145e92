"""Type and range checks of a model's constructor parameters, with one message form.

Every model's ``check_params`` goes through these, so that a parameter of the wrong type
(``learning_rate='a'``, ``factors=True``, ``alpha=nan``) is refused with an
:class:`~mrec_warp.errors.InputError` naming it, never a ``TypeError`` from deep inside.
"""
from __future__ import annotations

import inspect
import math
import numbers
import re
from typing import Any, Optional

import numpy as np

from ..errors import InputError
from ..seeds import MAX_SEED

#: Largest whole-number parameter unless a check says otherwise: every count reaches the
#: kernels as a C ``int`` (int32), where a larger one would overflow (``max_sampled=1e12``).
MAX_INT = 2**31 - 1
#: Largest magnitude of a real-valued parameter: the kernels compute in float32, where a
#: larger value is infinite (``alpha=1e300``, ``l2=1e300``).
MAX_REAL = float(np.finfo(np.float32).max)


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


def _finite(value: numbers.Real) -> bool:
    """Finite, for any size of int too (``np.isfinite`` refuses an int beyond 64 bits)."""
    return isinstance(value, numbers.Integral) or math.isfinite(value)


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

    Without an upper bound, whole numbers stop at :data:`MAX_INT` (they reach the kernels as
    C ints) and real numbers at :data:`MAX_REAL` in magnitude (float32), so that no value
    overflows after the data is loaded; the message then states that limit.

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
    ok = is_number(value) and _finite(value) and (not integer or value == int(value))
    if ok:
        ok = ((at_least is None or value >= at_least) and (above is None or value > above)
              and (at_most is None or value <= at_most) and (below is None or value < below))
    if ok and at_most is None and below is None and abs(value) > (MAX_INT if integer else MAX_REAL):
        # no bound of its own: the limit of the type the kernels compute in, stated only here
        ok, at_most, hint = False, MAX_INT if integer else MAX_REAL, None
        if not integer and value < 0 and at_least is None and above is None:
            at_least = -MAX_REAL
    if not ok:
        kind = "an integer" if integer else "a number"
        bounds = _bounds(*(_limit(b) for b in (at_least, above, at_most, below)))
        wanted = f"{kind} {bounds}".strip() + (" or None" if optional else "")
        raise InputError(f"invalid parameter: `{name}` must be {wanted}, got {_shown(value)}", hint=hint)


def _limit(bound: Optional[float]) -> Optional[str]:
    """A bound as a user reads it: ``2147483647``, ``3.4e+38``, ``0.5``."""
    if bound is None:
        return None
    return f"{bound:.2g}" if isinstance(bound, float) and abs(bound) >= 1e16 else str(bound)


def check_seed(value: Any, name: str = "random_state") -> None:
    """A seed: a whole number from 0 to :data:`~mrec_warp.seeds.MAX_SEED` (int64, what a
    model file stores and the kernels' generators take), or ``None`` (a fresh one)."""
    check_number(value, name, integer=True, at_least=0, at_most=MAX_SEED, optional=True)


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
