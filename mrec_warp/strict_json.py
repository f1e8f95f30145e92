"""JSON as the tool writes it: RFC 8259, where a number that is not finite is ``null``.

Python's :mod:`json` writes ``NaN``, ``Infinity`` and ``-Infinity`` by default, which strict
parsers (``jq``, JavaScript's ``JSON.parse``, most languages' libraries) refuse: a score
that could not be computed would make a whole file unreadable there. Every file and answer
the tool writes as JSON (``summary.json``, ``tune``'s ``best.json`` and trial rows, an
experiment's files, a work folder's ``job.json``, ``serve``'s answers, ``info --json``,
``evaluate``'s report, a model file's metadata) goes through :func:`dumps` or :func:`dump`.

A float that is NaN or infinite, anywhere in the value, is written ``null`` (what a reader
takes for "no number"); everything else is written exactly as :func:`json.dumps` writes it
with the same options, so a value without such a float keeps its bytes (a model file's
digest does not change).
"""
from __future__ import annotations

import json
import math
from typing import IO, Any


def finite_or_null(value: Any) -> Any:
    """``value`` with every NaN or infinite float (NumPy's ``float64`` included) replaced by
    ``None``, through dicts, lists and tuples; ``value`` itself when it holds none."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        cleaned = {key: finite_or_null(item) for key, item in value.items()}
        return value if all(cleaned[key] is item for key, item in value.items()) else cleaned
    if isinstance(value, (list, tuple)):
        items = [finite_or_null(item) for item in value]
        return value if all(new is old for new, old in zip(items, value)) else items
    return value


def dumps(value: Any, **options: Any) -> str:
    """:func:`json.dumps` of ``value`` as strict JSON (module docstring); ``options`` are
    :func:`json.dumps`' (``indent``, ``sort_keys``, ``default``, ...)."""
    return json.dumps(finite_or_null(value), allow_nan=False, **options)


def dump(value: Any, fh: IO[str], **options: Any) -> None:
    """:func:`dumps` written to the text file ``fh``."""
    fh.write(dumps(value, **options))


__all__ = ["dumps", "dump", "finite_or_null"]
