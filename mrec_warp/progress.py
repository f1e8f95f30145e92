"""Progress feedback: log records on the ``mrec_warp`` logger, and bars on a terminal.

The library never configures logging (the package logger has only a
:class:`logging.NullHandler`): what becomes of its records is the application's choice,
``logging.basicConfig(level=logging.INFO)`` shows them. The CLI installs its own handler
(:mod:`mrec_warp.cli._logs`). ``Progress(verbose=True)`` also prints each line itself, for
a script or a notebook that has not configured logging.
"""
from __future__ import annotations

import logging
import os
import sys
import time
from typing import Iterable, Iterator, Optional, TypeVar

from .errors import printable

T = TypeVar("T")

#: The package logger's name; modules may log on its children (``mrec_warp.workers``...).
LOGGER_NAME = "mrec_warp"


def plural(n: int, noun: str, nouns: Optional[str] = None) -> str:
    """``n`` and the noun that goes with it: ``"1 row"``, ``"2,345 rows"`` (``nouns``: an
    irregular plural, e.g. ``"entries"``)."""
    return f"{n:,} {noun if n == 1 else nouns or noun + 's'}"


def elapsed_line(elapsed: float, message: str) -> str:
    """A log line as the CLI and ``Progress(verbose=True)`` show it: ``[    1.2s] message``."""
    return f"[{elapsed:7.1f}s] {message}"


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (where :mod:`tqdm.auto` draws a widget)."""
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)() if ipython is not None else None
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def is_terminal(stream) -> bool:
    """Whether ``stream`` is a terminal (``False`` for one without ``isatty`` or closed)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class Progress:
    """Where long-running work reports what it is doing.

    Each line is a logging record (INFO) on the ``mrec_warp`` logger, or on ``logger``;
    whether it is shown is the application's logging configuration.

    Parameters
    ----------
    verbose : bool or None
        ``True`` also prints each line on ``stream`` (``[    1.2s] message``) whatever the
        logging configuration, as before the library logged through :mod:`logging`.
        ``None`` (default) and ``False`` leave showing lines to logging; ``False`` also
        turns bars off.
    bars : bool or None
        Progress bars (:mod:`tqdm.auto`: a widget in a notebook). By default on a terminal
        or in a notebook, when lines are shown at all (:attr:`shown`) and ``verbose`` is not
        ``False``. Without bars, :meth:`iterate` logs one line per finished unit.
    stream : file, optional
        Where printed lines and bars go [standard error].
    logger : logging.Logger, optional
        Where the records go [``logging.getLogger("mrec_warp")``].

    Attributes
    ----------
    prints : bool
        Whether :meth:`log` prints lines itself (``verbose=True``).
    """

    def __init__(self, verbose: Optional[bool] = None, bars: Optional[bool] = None, stream=None,
                 logger: Optional[logging.Logger] = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.logger = logger if logger is not None else logging.getLogger(LOGGER_NAME)
        self.prints = verbose is True
        self._bars = bars if bars is not None else (None if verbose is not False else False)
        self._t0 = time.perf_counter()

    @property
    def shown(self) -> bool:
        """Whether a line logged now reaches someone: printed (``verbose=True``), or a
        logging handler takes INFO records. Work that makes lines only to show them (the
        log files of units on workers, :mod:`mrec_warp.unit_logs`) asks first."""
        return self.prints or self.logger.isEnabledFor(logging.INFO)

    @property
    def verbose(self) -> bool:
        """Same as :attr:`shown` (what this attribute meant before the library logged through
        :mod:`logging`: whether lines are shown)."""
        return self.shown

    @property
    def bars(self) -> bool:
        """Whether :meth:`iterate` draws a bar."""
        if self._bars is not None:
            return bool(self._bars)
        return (is_terminal(self.stream) or in_notebook()) and self.shown

    def note(self, message: str) -> None:
        """A line the user should see even when progress lines are not shown (a stale lock
        taken over): a WARNING record, printed too with ``verbose=True``. Nothing with ``-q``."""
        text = printable(message)
        self.logger.warning(text)
        if self.prints:
            write_line(elapsed_line(time.perf_counter() - self._t0, text), self.stream)

    def log(self, message: str) -> None:
        """One line: a record on the logger, printed too with ``verbose=True``. Control characters
        of echoed paths and ids are shown escaped (:func:`~mrec_warp.errors.printable`)."""
        text = printable(message)
        self.logger.info(text)
        if self.prints:
            line = elapsed_line(time.perf_counter() - self._t0, text)
            write_line(line, self.stream)

    def detail(self, message: str) -> None:
        """A line of detail (each setting a fit tried): a DEBUG record, shown with ``-v`` and
        in a log file, printed too with ``verbose=True``."""
        text = printable(message)
        self.logger.debug(text)
        if self.prints:
            write_line(elapsed_line(time.perf_counter() - self._t0, text), self.stream)

    def iterate(self, items: Iterable[T], total: Optional[int] = None, desc: str = "", unit: str = "it",
                lines: bool = True) -> Iterator[T]:
        """``items``, shown as they finish: a bar when :attr:`bars` are on (the outermost bar
        stays on the screen when done, one line; bars inside it go); otherwise, with
        ``lines``, one log line per finished unit (``recommend: block 3 of 19 done``), which
        reaches a pipe only with ``-v`` (INFO records). ``lines=False`` for loops whose units
        log their own line (epochs, trials)."""
        if self.bars:
            from tqdm.auto import tqdm

            # leave=None: the outermost bar is kept (the record of what ran), nested ones erased
            with tqdm(items, total=total, desc=desc, unit=unit, file=self.stream, leave=None,
                      ncols=bar_width(self.stream)) as bar:
                yield from bar
            return
        if not lines or not self.shown:
            yield from items
            return
        of = "" if total is None else f" of {total:,}"
        for done, item in enumerate(items, 1):
            yield item
            self.log(f"{desc or 'progress'}: {unit} {done:,}{of} done")


def bar_width(stream) -> Optional[int]:
    """``None`` (tqdm asks the terminal) unless the terminal says it is 0 columns wide (a
    pseudo-terminal without a size: ``script``, some CI runners), where tqdm would draw an
    empty bar: then 80."""
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):  # no file descriptor (a notebook), or no terminal
        return None
    return None if columns > 0 else 80


def write_line(line: str, stream) -> None:
    """``line`` on ``stream`` above any bar being drawn there (:meth:`tqdm.tqdm.write`)."""
    from tqdm import tqdm

    tqdm.write(line, file=stream)
    stream.flush()


# the standard idiom of a library: records go nowhere until the application says where
# (and never to logging's "last resort" handler, which would print warnings on stderr)
logging.getLogger(LOGGER_NAME).addHandler(logging.NullHandler())

SILENT = Progress(verbose=False)
"""Progress that prints nothing and draws no bars; its records still go to the logger."""
