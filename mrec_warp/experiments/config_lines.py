"""Where in an experiment's TOML file a key is, and the one-line errors that name that line.

TOML parsers give no positions, so :func:`line_of` finds a key's line by scanning the text
for its table header and ``key =``; :class:`Checker` raises the faults of
:func:`~mrec_warp.experiments.config.read_config` with it.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, List, NoReturn, Optional, Sequence, Tuple

from ..errors import InputError, spell_parameters

# ---------------------------------------------------------------------------------------------
# finding a key's line
# ---------------------------------------------------------------------------------------------
_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
_KEY = re.compile(r"^\s*(\"[^\"]*\"|'[^']*'|[A-Za-z0-9_.\-]+)\s*=")


def _header_parts(text: str) -> Tuple[str, ...]:
    """``models."my warp"`` -> ``("models", "my warp")`` (dotted, bare or quoted parts)."""
    parts = re.findall(r"\"([^\"]*)\"|'([^']*)'|([A-Za-z0-9_\-]+)", text)
    return tuple(a or b or c for a, b, c in parts)


def _key_name(raw: str) -> str:
    return raw[1:-1] if raw[:1] in "\"'" else raw


def header_lines(text: str) -> List[Tuple[int, Tuple[str, ...]]]:
    """(line number, table path) of every ``[table]`` header, in order."""
    return [(n, _header_parts(m.group(1))) for n, line in enumerate(text.splitlines(), 1)
            if (m := _HEADER.match(line))]


def line_of(text: str, table: Tuple[str, ...] = (), key: Optional[str] = None) -> Optional[int]:
    """The line of ``key`` in ``[table]`` (top level for ``()``), or of the table's header
    without ``key``; ``None`` when the scan does not find it."""
    current: Tuple[str, ...] = ()
    header = None if table else 0
    for n, line in enumerate(text.splitlines(), 1):
        m = _HEADER.match(line)
        if m:
            current = _header_parts(m.group(1))
            if current == tuple(table) and header is None:
                header = n
            continue
        if key is not None and current == tuple(table):
            k = _KEY.match(line)
            if k and _key_name(k.group(1)) == key:
                return n
    return header or None  # without key, or a key the scan cannot place (an inline table): the table's line


# ---------------------------------------------------------------------------------------------
# faults named by their line
# ---------------------------------------------------------------------------------------------
class Checker:
    """Raises one-line :class:`InputError` s that name the file and the line of the fault."""

    def __init__(self, path: Path, text: str) -> None:
        self.path, self.text = path, text

    def fail(self, message: str, table: Tuple[str, ...] = (), key: Optional[str] = None,
             hint: Optional[str] = None) -> NoReturn:
        # a config key is named as written in the file, never as a command's flag
        def plain(name, value):
            return name if value is None else f"{name} = {value}"
        line = line_of(self.text, table, key)
        if line is None and key is not None:  # not a key but a table: [evalute] (or [evalute.x])
            line = next((n for n, parts in header_lines(self.text) if parts[:len(table) + 1] == (*table, key)), None)
        raise InputError(spell_parameters(message, plain), path=str(self.path), line=line,
                         hint=None if hint is None else spell_parameters(hint, plain))

    def relay(self, exc: InputError, table: Tuple[str, ...], keys: Sequence[str],
              fallback: Optional[str] = None) -> None:
        """An error of a library check, placed on the line of the first key it names (else
        of ``fallback``, else of the table)."""
        named = [p for p in exc.params if p in keys]
        self.fail(exc.message, table, named[0] if named else fallback, exc.hint)

    def unknown_keys(self, found: Dict[str, Any], allowed: Sequence[str], table: Tuple[str, ...], what: str) -> None:
        for key in found:
            if key not in allowed:
                self.fail(f"unknown key {key!r} in {what}", table, key, f"allowed: {', '.join(allowed)}")

    def table(self, raw: Dict[str, Any], name: str) -> Dict[str, Any]:
        value = raw.get(name, {})
        if not isinstance(value, dict):
            self.fail(f"{name!r} must be a table, [{name}]", (), name)
        return value

    def integer(self, value: Any, table, key: str, at_least: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):  # a type fault: no range in it
            hint = f"write it without quotes: {key} = {value}" if isinstance(value, str) else None
            self.fail(f"{key} must be an integer, got {value!r}", table, key, hint)
        if value < at_least:
            self.fail(f"{key} must be an integer >= {at_least}, got {value!r}", table, key)
        return int(value)


def check_duplicate_models(check: Checker, text: str) -> None:
    """Two ``[models.NAME]`` tables of one name: TOML refuses them too, but says less."""
    first: Dict[str, int] = {}
    for n, parts in header_lines(text):
        if len(parts) == 2 and parts[0] == "models":
            if parts[1] in first:
                raise InputError(f"model {parts[1]!r} is defined twice (first at line {first[parts[1]]})",
                                 path=str(check.path), line=n, hint="give each model table its own name")
            first[parts[1]] = n


__all__ = ["Checker", "check_duplicate_models", "header_lines", "line_of"]
