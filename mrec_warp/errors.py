"""The one exception type users see for bad input, and how it names parameters.

A message names the library's parameters, never a command's flags. The markup is the
structured reference: a parameter is written in backticks, alone (`` `factors` ``) or with
a value (`` `leave_out=1` ``), and an :class:`InputError` parses its message and hint once,
when it is made, into text and :class:`Reference` s (:attr:`InputError.references`). Python
callers read the text as written; the CLI spells each reference as the flag its command
declares for that parameter (``--factors``, ``--leave-out 1``) through
:meth:`InputError.render`. A double backtick is never a reference.
"""
from __future__ import annotations

import os
import re
from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple, Union

#: A parameter reference in a message: `name` or `name=value` (value without backticks; a
#: double backtick is never one).
PARAMETER = re.compile(r"(?<!`)`([a-z][a-z0-9_]*)(?:=([^`]*))?`(?!`)")


class Reference(NamedTuple):
    """A parameter a message names: its name, and the value when the message gives one."""

    name: str
    value: Optional[str] = None

    def __str__(self) -> str:
        """The reference as the message writes it (`` `name` `` or `` `name=value` ``)."""
        return f"`{self.name}`" if self.value is None else f"`{self.name}={self.value}`"


#: A message parsed: its plain text and the references between, in order.
Parts = Tuple[Union[str, Reference], ...]


#: What :func:`printable` escapes: C0 controls, DEL, C1 controls, the bidirectional overrides and
#: isolates (they reorder what a terminal shows), and lone surrogates (the undecodable bytes of
#: a file name, which a terminal cannot even be sent).
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: "re.Match[str]") -> str:
    code = ord(match.group(0))
    if 0xDC80 <= code <= 0xDCFF:  # a byte that did not decode (surrogateescape): show the byte
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` safe to show on a terminal: each control character written as ``repr`` does
    (``\\x1b``, ``\\x07``, ``\\u202e``), every other character, accents and emoji
    included, as it is.

    User text echoed in messages (a path, an id) may hold an escape sequence that rewrites
    the terminal's title or hides the rest of the line; the one-line error, the log lines
    and the notes all pass through here.
    """
    return _UNPRINTABLE.sub(_escape, text)


_LINE_BREAKS = re.compile(r"[ \t]*[\r\n]+\s*")


def one_line(text: str) -> str:
    """``text`` as one :func:`printable` line: each line break (with the blanks around it) one
    space; every other character kept, so an id quoted in the text shows its own runs of
    spaces, no-break spaces and all (``'item  01'`` is not ``'item 01'``)."""
    return printable(_LINE_BREAKS.sub(" ", text).strip(" \t"))


#: How a caller spells a parameter reference: (name, value or None) -> text, or None to keep it.
Speller = Callable[[str, Optional[str]], Optional[str]]


def parse_references(text: Optional[str]) -> Parts:
    """``text`` cut into its plain text and the parameter references it makes."""
    text = text or ""
    parts: List[Union[str, Reference]] = []
    end = 0
    for m in PARAMETER.finditer(text):
        if m.start() > end:
            parts.append(text[end:m.start()])
        parts.append(Reference(m.group(1), m.group(2)))
        end = m.end()
    if end < len(text):
        parts.append(text[end:])
    return tuple(parts)


def spell_parts(parts: Parts, spell: Optional[Speller]) -> str:
    """The text of ``parts`` with each reference written as ``spell(name, value)`` where that
    gives text, else as the message wrote it."""
    def shown(ref: Reference) -> str:
        return (spell(ref.name, ref.value) if spell is not None else None) or str(ref)
    return "".join(part if isinstance(part, str) else shown(part) for part in parts)


def parameters_in(text: Optional[str]) -> Tuple[str, ...]:
    """The parameter names ``text`` refers to, in order, without repeats."""
    return tuple(dict.fromkeys(part.name for part in parse_references(text) if isinstance(part, Reference)))


def spell_parameters(text: str, spell: Optional[Speller]) -> str:
    """``text`` with each parameter reference replaced by ``spell(name, value)`` (where not None)."""
    if spell is None:
        return text
    return spell_parts(parse_references(text), spell)


class InputError(ValueError):
    """Bad input that the user can fix: names the file, the line, the problem and the fix.

    The CLI prints the error as a single line and exits with status 2.

    Parameters
    ----------
    message : str
        What is wrong. Parameters are named in backticks (see the module docstring).
    path : str, optional
        The offending file.
    line : int, optional
        1-based line number in ``path`` when one applies.
    hint : str, optional
        How to fix it, its parameters named as in ``message``.
    params : sequence of str, optional
        Parameters the error is about that the text does not name in backticks.

    Attributes
    ----------
    references : tuple of Reference
        The parameter references of the message and the hint, in order, without repeats
        (then ``params``, each without a value).
    params : tuple of str
        The names of :attr:`references`: the parameters the error is about.
    """

    def __init__(
        self,
        message: str,
        path: Optional[Union[str, os.PathLike]] = None,
        line: Optional[int] = None,
        hint: Optional[str] = None,
        params: Sequence[str] = (),
    ) -> None:
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        self.hint = hint
        self._parts = parse_references(message)
        self._hint_parts = parse_references(hint)
        named = [p for p in (*self._parts, *self._hint_parts) if isinstance(p, Reference)]
        named += [Reference(name) for name in params if name not in {r.name for r in named}]
        self.references: Tuple[Reference, ...] = tuple(dict.fromkeys(named))
        self.params: Tuple[str, ...] = tuple(dict.fromkeys(r.name for r in self.references))
        super().__init__(self._format())

    def render(self, spell: Optional[Speller] = None) -> str:
        """The one-line message with each parameter reference spelled by ``spell(name, value)``.

        ``spell`` returns the text to show (e.g. ``"--leave-out 1"``), or ``None`` to leave
        the reference as written. The file name is never rewritten, only message and hint.
        """
        return self._format(spell)

    def _format(self, spell: Optional[Speller] = None) -> str:
        where = ""
        if self.path is not None:
            where = self.path if self.line is None else f"{self.path}:{self.line}"
            where += ": "
        text = f"{where}{spell_parts(self._parts, spell)}"
        if self.hint:
            text += f" ({spell_parts(self._hint_parts, spell)})"
        return one_line(text)


class ParameterError(InputError):
    """The call itself is wrong: parameters that are missing or exclude each other (e.g. both
    or neither of two alternatives). The CLI shows it as a usage error of the command."""


class TrainingDivergedError(InputError):
    """Factors became NaN or infinite, or grew by orders of magnitude: the learning rate is too
    high for this data."""
