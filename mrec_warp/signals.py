"""One policy for the signals that ask a run to stop: SIGINT, SIGTERM and SIGHUP.

Ctrl-C raises ``KeyboardInterrupt`` in the main thread, so every ``finally`` and ``with``
on the way out runs: temporary files are removed (:func:`~mrec_warp.files.atomic_path`),
locks released, pools shut down. SIGTERM (what ``timeout``, schedulers and container
stops send) and SIGHUP (a closed terminal) would end the process on the spot instead,
leaving half-written files and worker processes behind. Within :func:`stop_on_signals`
all three raise :class:`Stopped` -- a ``KeyboardInterrupt`` that knows its signal -- so
they end a run exactly as Ctrl-C does, and the caller exits with ``128 + signal`` as a
shell reports a command a signal ended.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Iterator, Tuple

#: The signals that ask a run to stop (those a platform lacks are left out).
STOP_SIGNALS: Tuple[int, ...] = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                                      if hasattr(signal, name))


class Stopped(KeyboardInterrupt):
    """A run stopped by a signal. A ``KeyboardInterrupt``, so code that cleans up after
    Ctrl-C (and only ``except BaseException``, never ``except Exception``) sees it too.

    Attributes
    ----------
    signum : int
        The signal's number.
    """

    def __init__(self, signum: int) -> None:
        self.signum = int(signum)
        super().__init__(f"stopped by {self.name}")

    @property
    def name(self) -> str:
        """The signal's name, e.g. ``SIGTERM``."""
        try:
            return signal.Signals(self.signum).name
        except ValueError:
            return f"signal {self.signum}"

    @property
    def exit_status(self) -> int:
        """What a shell reports for a command this signal ended: ``128 + signum``."""
        return 128 + self.signum


def signal_of(exc: BaseException) -> int:
    """The signal that raised ``exc``: its own for :class:`Stopped`, SIGINT for a plain
    ``KeyboardInterrupt`` (Python's Ctrl-C)."""
    return exc.signum if isinstance(exc, Stopped) else int(signal.SIGINT)


def _stop_at_start(signum: int, frame) -> None:
    """The handler while the command starts (imports, option parsing): nothing is written
    yet, so there is nothing to clean up -- one line and ``128 + signal``, at once."""
    what = "interrupted" if signum == signal.SIGINT else f"stopped by {Stopped(signum).name}"
    with contextlib.suppress(OSError):
        os.write(2, f"Error: {what}\n".encode())
    os._exit(128 + signum)


def _is_command() -> bool:
    """Whether this process runs the ``mrec-warp`` command (its console script, or
    ``python -m mrec_warp``: ``-m`` while the package is imported to find ``__main__``)."""
    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0).removesuffix(".exe") == "mrec-warp":
        return True
    # ``python -m X`` imports X's package with argv[0] == "-m": it must be this package, not
    # another program whose package happens to import mrec_warp
    orig = list(getattr(sys, "orig_argv", []))
    if argv0 != "-m" or "-m" not in orig or orig.index("-m") + 1 >= len(orig):
        return False
    return orig[orig.index("-m") + 1].split(".")[0] == __name__.split(".")[0]


def stop_early() -> None:
    """When this process is the ``mrec-warp`` command, make SIGINT, SIGTERM and SIGHUP end
    it with one line from the first moment the package is imported (a second of imports
    before the command's own handlers, :func:`stop_on_signals`, take over). A signal
    ignored (``nohup``) or handled by the program stays so; a library import changes nothing."""
    if not _is_command() or threading.current_thread() is not threading.main_thread():
        return
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) in (signal.SIG_DFL, signal.default_int_handler):
            signal.signal(signum, _stop_at_start)


_STOPPING = threading.Event()  # set by the first signal; a second one then ends the process


def _raise_stopped(signum: int, frame) -> None:
    if _STOPPING.is_set():
        # a second signal while the first one's clean-up runs: the user insists, so end now,
        # by the signal itself (a later run removes what this one leaves, by its process id)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    _STOPPING.set()
    raise Stopped(signum)


@contextlib.contextmanager
def stop_on_signals(signals: Tuple[int, ...] = STOP_SIGNALS) -> Iterator[None]:
    """Within the block, each of ``signals`` raises :class:`Stopped` in the main thread.

    A signal ignored when the block starts stays ignored (``nohup`` ignores SIGHUP, a
    shell's background job SIGINT), and one that already has a handler of the program's
    own keeps it. A second signal during the clean-up of the first ends the process at once.
    Outside the main thread (where Python runs no signal handler) and in a nested block,
    nothing changes. The previous handlers come back when the block ends.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for signum in signals:
        current = signal.getsignal(signum)
        if current in (signal.SIG_DFL, signal.default_int_handler, _stop_at_start):
            previous[signum] = signal.signal(signum, _raise_stopped)
    if previous:
        _STOPPING.clear()
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
