"""The one exception type users see for bad input, and how it is worded."""
from __future__ import annotations

from typing import Optional


class InputError(ValueError):
    """Bad input that the user can fix: names the file, the line, the problem and the fix.

    The CLI prints ``str(error)`` as a single line and exits with status 2.

    Parameters
    ----------
    message : str
        What is wrong.
    path : str, optional
        The offending file.
    line : int, optional
        1-based line number in ``path`` when one applies.
    hint : str, optional
        How to fix it.
    """

    def __init__(
        self,
        message: str,
        path: Optional[str] = None,
        line: Optional[int] = None,
        hint: Optional[str] = None,
    ) -> None:
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        self.hint = hint
        super().__init__(self._format())

    def _format(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path if self.line is None else f"{self.path}:{self.line}"
            where += ": "
        text = f"{where}{self.message}"
        if self.hint:
            text += f" ({self.hint})"
        return " ".join(text.split())  # always one line


class TrainingDivergedError(InputError):
    """Factors became NaN or infinite, or grew by orders of magnitude: the learning rate is too
    high for this data."""
