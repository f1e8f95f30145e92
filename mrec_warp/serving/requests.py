"""What a request asks, checked: query strings and JSON bodies into ids, indices and ``k``.

Every problem is a :class:`BadRequest` with an HTTP status and one line saying what is
wrong and how to fix it; the app turns it into ``{"error": ...}``. Ids are the model's ids
exactly: a query string is percent-decoded with the model's id encoding (UTF-8, or Latin-1
for a model trained from a Latin-1 file), a JSON string is taken as it is, and nothing is
stripped or case-folded (a near miss gets a "did you mean").
"""
from __future__ import annotations

import json
import re
import urllib.parse
from typing import Any, Dict, Iterable, List, Optional, Sequence

import numpy as np

from ..data.near_ids import did_you_mean, spelled_otherwise

#: Default and largest ``k``.
DEFAULT_K = 10
MAX_K = 1000
#: What ``GET /recommend`` can answer for a user the model does not know (``unknown_users``):
#: the choices of :data:`~mrec_warp.models.fallback.UNKNOWN_USERS` that fit one user (skipping
#: one user would be an empty answer that looks like a list).
SERVED_UNKNOWN_USERS = ("refuse", "popular")


class BadRequest(Exception):
    """A request the server refuses: HTTP ``status`` and a one-line ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        # one line, and always encodable: an id with a lone surrogate is shown escaped, never a 500
        self.message = " ".join(str(message).split("\n")).encode("utf-8", "backslashreplace").decode("utf-8")


_HIGH_BYTE = re.compile(rb"[\x80-\xff]")


def parse_query(raw: bytes, encoding: str, allowed: Sequence[str], repeatable: Sequence[str] = ()) -> Dict[str, List[str]]:
    """A query string's parameters (name -> values), decoded with the model's id encoding.

    Unknown names are refused (a typo such as ``kk=5`` would otherwise be ignored) and so is
    a second value of a parameter that takes one.
    """
    # bytes a client sent unescaped are escaped first, so that every byte decodes the same way
    text = _HIGH_BYTE.sub(lambda m: b"%%%02X" % m.group()[0], raw).decode("ascii", errors="replace")
    try:
        pairs = urllib.parse.parse_qsl(text, keep_blank_values=True, strict_parsing=False, encoding=encoding,
                                       errors="strict")
    except UnicodeDecodeError:
        raise BadRequest(400, f"the query string is not valid {encoding}: percent-encode ids as the bytes "
                              f"of the model's ids ({encoding})") from None
    out: Dict[str, List[str]] = {}
    for name, value in pairs:
        if name not in allowed:
            raise BadRequest(400, f"unknown parameter {name!r}; this endpoint takes {', '.join(allowed)}")
        out.setdefault(name, []).append(value)
        if len(out[name]) > 1 and name not in repeatable:
            raise BadRequest(400, f"parameter {name!r} is given {len(out[name])} times; give it once")
    return out


def parse_k(value: Any, max_k: int, n_items: int) -> int:
    """``k`` from a query value (text) or a JSON value: a whole number in ``1..max_k``,
    then capped at the catalogue (as ``recommend`` caps it)."""
    if isinstance(value, str):
        if not re.fullmatch(r"[0-9]{1,9}", value.strip()) or value.strip() != value:
            raise BadRequest(400, f"k must be a whole number from 1 to {max_k}, got {value!r}")
        value = int(value)
    elif isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(400, f"k must be a whole number from 1 to {max_k}, got {_shown(value)}")
    if not 1 <= value <= max_k:
        raise BadRequest(400, f"k must be from 1 to {max_k}, got {_shown(value)}")
    return min(value, n_items)


def one(params: Dict[str, List[str]], name: str, default: Optional[str] = None) -> Optional[str]:
    values = params.get(name)
    return values[0] if values else default


def parse_flag(value: Optional[str], name: str, default: bool) -> bool:
    if value is None:
        return default
    if value in ("true", "1"):
        return True
    if value in ("false", "0"):
        return False
    raise BadRequest(400, f"{name} must be true or false, got {value!r}")


def near_id(bad: str, index: Dict[str, int], scan: bool = True) -> str:
    """The "did you mean" for an id the model does not know, or ``""``: a known id written
    otherwise (:func:`~mrec_warp.data.near_ids.did_you_mean`; ``scan``: also another case,
    which looks at every id), or one whose ``+`` a query string turned into a space."""
    near = did_you_mean(bad, index, index.keys() if scan else None)
    if not near and " " in bad and bad.replace(" ", "+") in index:  # '+' in a query string means a space
        near = f"did you mean {bad.replace(' ', '+')!r}? write '+' as %2B in a query string"
    return near


def same_user_spelled_otherwise(user: str, index: Dict[str, int]) -> bool:
    """Whether an unknown ``user`` is a known one with surrounding spaces, written as a float
    (:func:`~mrec_warp.data.near_ids.spelled_otherwise`) or with a query string's ``+`` read
    as a space: not a new user to serve popular items (``0007`` beside ``007`` may be one)."""
    return spelled_otherwise(user, index) is not None or (" " in user and user.replace(" ", "+") in index)


def lookup(index: Dict[str, int], ids: Iterable[str], kind: str, status: int = 400, otherwise: str = "") -> np.ndarray:
    """Indices of ``ids`` in a model's id map; an unknown one is refused with a did-you-mean
    or, when there is none, with ``otherwise`` (what else the client can ask) after the reason."""
    ids = list(ids)
    out = np.fromiter((index.get(x, -1) for x in ids), dtype=np.int64, count=len(ids))
    if (out < 0).any():
        bad = ids[int(np.argmax(out < 0))]
        near = near_id(bad, index)
        raise BadRequest(status, f"unknown {kind} {json.dumps(bad, ensure_ascii=False)}"
                                 + (f" ({near})" if near else f": not an id of the model's {kind}s{otherwise}"))
    return out


def parse_unknown_users(value: str) -> str:
    """``unknown_users`` of a request: what an unknown user gets, ``refuse`` (a 404) or
    ``popular`` (the fallback list: :mod:`mrec_warp.models.fallback`)."""
    if value not in SERVED_UNKNOWN_USERS:
        why = "; skip is for a batch of users (recommend --users)" if value == "skip" else ""
        raise BadRequest(400, f"unknown_users must be {' or '.join(SERVED_UNKNOWN_USERS)}, got {value!r}{why}")
    return value


def item_mask(index: Dict[str, int], n_items: int, include: Optional[Sequence[str]],
              exclude: Optional[Sequence[str]]) -> Optional[np.ndarray]:
    """The uint8 mask of items never to show: all but ``include`` (when given) and ``exclude``.

    ``include`` is an allow-list: given empty (``"include": []``, a client's empty in-stock
    list) it allows nothing, and the answer is an empty list; only ``None`` (not given)
    means no allow-list."""
    if include is None and not exclude:
        return None
    mask = np.zeros(n_items, dtype=np.uint8)
    if include is not None:
        mask[:] = 1
        if len(include):
            mask[lookup(index, include, "item")] = 0
    if exclude:
        mask[lookup(index, exclude, "item")] = 1
    return mask


def _no_duplicate_keys(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise BadRequest(400, f"the JSON body gives {key!r} twice")
        out[key] = value
    return out


def parse_body(body: bytes, allowed: Sequence[str]) -> Dict[str, Any]:
    """A JSON object body, its keys among ``allowed``."""
    try:
        data = json.loads(body.decode("utf-8"), object_pairs_hook=_no_duplicate_keys)
    except UnicodeDecodeError:
        raise BadRequest(400, "the body is not UTF-8 JSON") from None
    except json.JSONDecodeError as exc:
        raise BadRequest(400, f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:  # [[[[... deeper than the parser's stack
        raise BadRequest(400, "the JSON body is nested too deeply; the body is a flat object like "
                              "{\"items\": [\"i1\", \"i2\"], \"k\": 10}") from None
    except ValueError as exc:  # a number too long for Python's int conversion (over 4,300 digits)
        raise BadRequest(400, f"the JSON body holds a value that cannot be read ({exc})") from None
    if not isinstance(data, dict):
        raise BadRequest(400, f"the body must be a JSON object like {{\"items\": [\"i1\", \"i2\"], \"k\": 10}}, "
                              f"got a JSON {type(data).__name__}")
    unknown = [key for key in data if key not in allowed]
    if unknown:
        raise BadRequest(400, f"unknown field {unknown[0]!r}; the body takes {', '.join(allowed)}")
    # a missing field means its default (no allow-list, k 10); null is refused rather than read as
    # missing: `"include": null` from a client whose in-stock list came out empty must not allow everything
    null = next((key for key, value in data.items() if value is None), None)
    if null is not None:
        raise BadRequest(400, f"{null!r} is null: leave the field out for its default, or give a value "
                              "(an empty list of ids allows nothing)")
    return data


def _shown(value: Any, limit: int = 60) -> str:
    """``value`` as JSON for a message, cut to ``limit`` characters (a body may hold anything)."""
    try:
        text = json.dumps(value)
    except ValueError:  # an int too long to print
        text = f"a {type(value).__name__} too large to show"
    return text if len(text) <= limit else text[:limit] + "..."


def id_list(data: Dict[str, Any], name: str, required: bool = False) -> Optional[List[str]]:
    """A list of string ids from a JSON body (numbers are refused: 17 and "17.0" are not "17")."""
    value = data.get(name)
    if value is None:
        if required:
            raise BadRequest(400, f"the body needs {name!r}: a list of item ids, e.g. {{\"{name}\": [\"i1\", \"i2\"]}}")
        return None
    if not isinstance(value, list):
        raise BadRequest(400, f"{name!r} must be a list of item ids, got a JSON {type(value).__name__}")
    for entry in value:
        if not isinstance(entry, str):
            shown = _shown(entry)
            hint = f"write \"{entry}\"" if isinstance(entry, (int, float)) and not isinstance(entry, bool) else \
                "one string per id"
            raise BadRequest(400, f"{name!r} holds {shown}: ids are strings, {hint}")
        try:
            entry.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (\ud800): no bytes to match a model id
            raise BadRequest(400, f"{name!r} holds {json.dumps(entry)}: item ids must be valid UTF-8 text "
                                  "(a lone surrogate escape is not a character)") from None
    if required and not value:
        raise BadRequest(400, f"{name!r} is empty: give at least one item id")
    return value
