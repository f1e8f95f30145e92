""""Did you mean": the known id an unknown one most likely stands for.

Ids are the user's bytes and are matched exactly; when one is not known, the usual slips
are the same number written another way (``17850`` vs ``17850.0``, as pandas writes ids of
a column with gaps), surrounding or doubled spaces, and case. One helper for every message that
reports an unknown user or item id (``recommend``, ``similar``, the Python API's look-ups).
"""
from __future__ import annotations

import math
from typing import Container, Iterable, List, Optional


def _number(text: str) -> Optional[float]:
    """The finite number ``text`` spells, or None."""
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _numeric_forms(text: str) -> List[str]:
    """Other spellings of the number ``text`` is, if it is one (``17850.0`` -> ``17850``)."""
    try:
        number = float(text)
    except ValueError:
        return []
    if not math.isfinite(number):
        return []
    forms = [repr(number), f"{number:g}"]
    if number.is_integer():
        forms = [str(int(number)), f"{int(number)}.0"] + forms
    return [f for f in dict.fromkeys(forms) if f != text]


def close_id(bad: str, known: Container[str], candidates: Optional[Iterable[str]] = None) -> Optional[str]:
    """A known id that ``bad`` differs from only by surrounding spaces, runs of inner
    whitespace (``user  003`` for ``user 003``), its numeric spelling (``17850.0``,
    leading zeros: ``7`` for ``007``), or case; ``None`` when there
    is none. Only a suggestion: ids are still matched byte for byte.

    ``known`` answers ``x in known`` (a dict or set of ids); ``candidates`` lists them for
    the case-insensitive match (scanned once, only on this error path).
    """
    bad = str(bad)
    tries = [bad.strip()] if bad.strip() != bad else []
    tries += _numeric_forms(bad.strip())
    for form in tries:
        if form and form != bad and form in known:
            return form
    if candidates is not None:
        # runs of whitespace count as one space ('user  003' for 'user 003'), ends trimmed, case folded
        folded = " ".join(bad.split()).casefold()
        number = _number(bad.strip())
        for candidate in candidates:
            if candidate != bad and " ".join(candidate.split()).casefold() == folded:
                return candidate
        if number is not None:  # the same number with leading zeros (7 for 007), which no spelling above gives
            for candidate in candidates:
                if candidate != bad and candidate[:1].isdigit() and _number(candidate.strip()) == number:
                    return candidate
    return None


def did_you_mean(bad: str, known: Container[str], candidates: Optional[Iterable[str]] = None) -> str:
    """``"did you mean '17850'?"`` for :func:`close_id`'s match, or ``""``."""
    match = close_id(bad, known, candidates)
    return "" if match is None else f"did you mean {match!r}?"


def spelled_otherwise(bad: str, known: Container[str]) -> Optional[str]:
    """The known id that ``bad`` is with surrounding spaces added, or written as a float
    (``17850.0`` for ``17850``, as pandas writes the ids of a column with gaps): the same
    user, whom a fallback list must not serve as a new one; ``None`` otherwise. Leading
    zeros, case and inner spaces are not such slips for this (``0007`` may be a new
    customer beside ``007`` and ``7``): they only get :func:`did_you_mean` in an error."""
    bad = str(bad)
    stripped = bad.strip()
    if stripped != bad and stripped in known:
        return stripped
    if any(c in stripped for c in ".eE"):
        for form in _numeric_forms(stripped):
            if form in known:
                return form
    return None
