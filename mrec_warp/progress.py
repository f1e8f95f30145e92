"""Progress feedback: log lines and bars on a terminal, silence in pipes or when asked."""
from __future__ import annotations

import sys
import time
from typing import Iterable, Iterator, Optional, TypeVar

from .errors import printable

T = TypeVar("T")


def plural(n: int, noun: str, nouns: Optional[str] = None) -> str:
    """``n`` and the noun that goes with it: ``"1 row"``, ``"2,345 rows"`` (``nouns``: an
    irregular plural, e.g. ``"entries"``)."""
    return f"{n:,} {noun if n == 1 else nouns or noun + 's'}"


class Progress:
    """Where long-running work reports what it is doing.

    Parameters
    ----------
    verbose : bool or None
        ``True`` prints log lines, ``False`` prints nothing, ``None`` (default) prints only
        when standard error is a terminal, so pipes and CI logs stay quiet.
    bars : bool or None
        Progress bars; by default only on a terminal, never when ``verbose`` is False.
    """

    def __init__(self, verbose: Optional[bool] = None, bars: Optional[bool] = None, stream=None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.verbose = tty if verbose is None else bool(verbose)
        self.bars = (tty if bars is None else bool(bars)) and self.verbose
        self._t0 = time.perf_counter()

    def log(self, message: str) -> None:
        """One line, prefixed with the elapsed time; control characters of echoed paths and
        ids are shown escaped (:func:`~mrec_warp.errors.printable`)."""
        if self.verbose:
            elapsed = time.perf_counter() - self._t0
            print(f"[{elapsed:7.1f}s] {printable(message)}", file=self.stream, flush=True)

    def iterate(self, items: Iterable[T], total: Optional[int] = None, desc: str = "", unit: str = "it") -> Iterator[T]:
        """Wrap an iterable in a progress bar when bars are on (tqdm if installed)."""
        if not self.bars:
            yield from items
            return
        try:
            from tqdm.auto import tqdm
        except ImportError:  # bars are a nicety; tqdm is optional
            yield from items
            return
        with tqdm(items, total=total, desc=desc, unit=unit, file=self.stream, leave=False) as bar:
            yield from bar


SILENT = Progress(verbose=False)
