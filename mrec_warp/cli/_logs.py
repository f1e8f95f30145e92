"""Where the CLI shows the library's log records: the handlers of the ``mrec_warp`` logger.

The library only emits records (:mod:`mrec_warp.progress`); a command decides what to show:

* standard error, as ``[    1.2s] message``: INFO records on a terminal, DEBUG ones too
  (the details: each setting a fit tried) with ``-v``, only warnings and errors in a pipe,
  nothing with ``-q``;
* the global ``--log-file PATH``: every record (DEBUG and up), time-stamped, whatever
  ``-q`` says, appended to ``PATH``; and the command's result lines (``wrote ...``,
  :func:`to_log_file`), also with ``-q``, which leaves them off the screen.

The handlers are removed and the logger's level restored when the command ends, so a
program that runs several commands in one process (the tests, a notebook calling ``main``)
does not pile them up.
"""
from __future__ import annotations

import logging
import sys
import time
from typing import List, Optional

import click

from ..errors import InputError
from ..files import check_output_place
from ..progress import LOGGER_NAME, elapsed_line, is_terminal, write_line
from ._output_paths import OutputPath

#: Where the root context keeps the global ``--log-file``.
LOG_FILE_KEY = "mrec_warp.log_file"


class ElapsedFormatter(logging.Formatter):
    """``[    1.2s] message``: the seconds since the command started, as the CLI always wrote."""

    def __init__(self, t0: float, stamp: bool = False) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s " if stamp else "")
        self.t0, self.stamp = t0, stamp

    def format(self, record: logging.LogRecord) -> str:
        line = elapsed_line(record.created - self.t0, record.getMessage())
        return super().format(record) + line if self.stamp else line


class StderrHandler(logging.Handler):
    """Lines on the standard error of the moment (a test runner swaps it per command), above
    any progress bar being drawn there. A failed write (a closed pipe) is the command's
    error, as it was when lines were printed, not logging's "--- Logging error ---"."""

    def emit(self, record: logging.LogRecord) -> None:
        write_line(self.format(record), sys.stderr)


def configure(quiet: bool, verbose: bool, log_file: Optional[str] = None) -> None:
    """Install the command's handlers on the ``mrec_warp`` logger (see the module docstring);
    they go when the current click context closes."""
    package = logging.getLogger(LOGGER_NAME)
    t0 = time.time()
    handlers: List[logging.Handler] = []
    if not quiet:
        stderr = StderrHandler(logging.DEBUG if verbose else logging.INFO if is_terminal(sys.stderr) else logging.WARNING)
        stderr.setFormatter(ElapsedFormatter(t0))
        handlers.append(stderr)
    if log_file:
        check_output_place("--log-file", log_file)
        try:
            to_file = logging.FileHandler(log_file, encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot write the log file: {exc.strerror or exc}", path=log_file,
                             hint="give --log-file a path in a folder you can write to") from None
        to_file.setLevel(logging.DEBUG)
        to_file.setFormatter(ElapsedFormatter(t0, stamp=True))
        handlers.append(to_file)
    _remove_ours(package)
    before = package.level
    for handler in handlers:
        handler._mrec_warp_cli = True  # type: ignore[attr-defined]
        package.addHandler(handler)
    package.setLevel(min((h.level for h in handlers), default=logging.WARNING))

    def restore() -> None:
        _remove_ours(package)
        package.setLevel(before)

    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.call_on_close(restore)


def _remove_ours(package: logging.Logger) -> None:
    for handler in [h for h in package.handlers if getattr(h, "_mrec_warp_cli", False)]:
        package.removeHandler(handler)
        handler.close()


def to_log_file(text: str) -> None:
    """A result line of the command (``wrote model.npz: ...``, printed on standard output or
    not at all with ``-q``) in the ``--log-file`` too, as an INFO record; not on standard
    error, where the command shows it itself."""
    package = logging.getLogger(LOGGER_NAME)
    files = [h for h in package.handlers if getattr(h, "_mrec_warp_cli", False) and isinstance(h, logging.FileHandler)]
    if not files:
        return
    record = package.makeRecord(package.name, logging.INFO, "(result)", 0, text, None, None)
    for handler in files:
        if record.levelno >= handler.level:
            handler.handle(record)


def log_file_option(func):
    """The global ``--log-file PATH`` of the ``mrec-warp`` group."""
    def remember(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> Optional[str]:
        ctx.meta[LOG_FILE_KEY] = value
        return value

    return click.option("--log-file", type=OutputPath(), metavar="PATH", callback=remember,
                        expose_value=False,
                        help="Also append every log line (all levels, time-stamped) to PATH, whatever -q says.")(func)


def start_log_file() -> None:
    """Open the global ``--log-file`` for the whole run, so that a command that shows no
    progress of its own still writes its records there (:func:`configure` again, from the
    command, adds standard error as ``-q`` / ``-v`` say)."""
    path = log_file()
    if path:
        configure(quiet=True, verbose=False, log_file=path)


def log_file() -> Optional[str]:
    """The ``--log-file`` given before the command, if any."""
    ctx = click.get_current_context(silent=True)
    return None if ctx is None else ctx.find_root().meta.get(LOG_FILE_KEY)
