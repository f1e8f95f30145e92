"""The one exception type users see for bad input, and how it is worded.

Messages name the library's parameters, never a command's flags: a parameter is written in
backticks, alone (`` `factors` ``) or with a value (`` `leave_out=1` ``). Python callers read
them as written; the CLI renders each one as the flag the user typed (``--factors``,
``--leave-out 1``) through :meth:`InputError.render` and its one table of flag names.
"""
from __future__ import annotations

import os
import re
from typing import Callable, Optional, Tuple, Union

#: A parameter reference in a message: `name` or `name=value` (value without backticks; a
#: double backtick is never one).
PARAMETER = re.compile(r"(?<!`)`([a-z][a-z0-9_]*)(?:=([^`]*))?`(?!`)")


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


#: How a caller spells a parameter reference: (name, value or None) -> text, or None to keep it.
Speller = Callable[[str, Optional[str]], Optional[str]]


def parameters_in(text: Optional[str]) -> Tuple[str, ...]:
    """The parameter names ``text`` refers to, in order, without repeats."""
    return tuple(dict.fromkeys(m.group(1) for m in PARAMETER.finditer(text or "")))


def spell_parameters(text: str, spell: Optional[Speller]) -> str:
    """``text`` with each parameter reference replaced by ``spell(name, value)`` (where not None)."""
    if spell is None:
        return text
    return PARAMETER.sub(lambda m: spell(m.group(1), m.group(2)) or m.group(0), text)


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
        How to fix it.

    Attributes
    ----------
    params : tuple of str
        The parameters the message and hint name, for a caller that spells them otherwise.
    """

    def __init__(
        self,
        message: str,
        path: Optional[Union[str, os.PathLike]] = None,
        line: Optional[int] = None,
        hint: Optional[str] = None,
    ) -> None:
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        self.hint = hint
        super().__init__(self._format())

    @property
    def params(self) -> Tuple[str, ...]:
        return parameters_in(f"{self.message} {self.hint or ''}")

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
        text = f"{where}{spell_parameters(self.message, spell)}"
        if self.hint:
            text += f" ({spell_parameters(self.hint, spell)})"
        return printable(" ".join(text.split()))  # always one line, never a control character


class ParameterError(InputError):
    """The call itself is wrong: parameters that are missing or exclude each other (e.g. both
    or neither of two alternatives). The CLI shows it as a usage error of the command."""


class TrainingDivergedError(InputError):
    """Factors became NaN or infinite, or grew by orders of magnitude: the learning rate is too
    high for this data."""
