"""Log lines of units running on other processes or machines, shown on the driver's terminal.

A unit of a job (:mod:`mrec_warp.jobs`) that runs on a loky process or a Dask worker has
no terminal: what it logs (a sub-model's epochs, say) would be lost, and the user would
see nothing until the unit finishes. So the unit logs through :class:`FileLog`, which
appends each line to its own file in the job's work folder, and the driver runs a
:class:`LogRelay` while it waits: a thread that reads the lines added to those files and
logs them on the driver's :class:`~mrec_warp.progress.Progress` (so they follow ``-v`` /
``-q`` / pipes like every other line). Files work the same on every backend -- the work
folder is already on a filesystem every worker shares -- and need no connection back to
the driver.

On the driver the relayed lines are records of the ``mrec_warp`` logger like any other
(:meth:`~mrec_warp.progress.Progress.log`), so ``--log-file`` and an application's logging
configuration get them. Only a driver whose lines someone sees
(:attr:`~mrec_warp.progress.Progress.shown`) asks for them: a quiet run gives the units no file.

Why not Dask's ``Client.forward_logging()``: it registers a plugin on every worker of the
cluster and sends records on one event topic per logger name, so every client of a shared
cluster that forwards ``mrec_warp`` receives the records of the others' jobs too; the
workers' loggers would need their level set (more state left on a cluster we do not own);
the records travel as scheduler events, unordered with the task results, so a unit's epochs
could arrive after the line reporting it done (the relay reads the files first,
:meth:`LogRelay.drain`);
and loky processes have no equivalent, so the files stay for them anyway.
"""
from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Dict, Optional, Sequence

from .files import PathLike
from .progress import SILENT, Progress

#: Seconds between two looks at the log files.
POLL_SECONDS = 0.5


def log_name(part: str) -> str:
    """The log file of the unit whose part file is ``part`` (``submodel-003.npz`` -> ``submodel-003.log``)."""
    return f"{Path(part).stem}.log"


class FileLog(Progress):
    """The progress of one unit on a worker: each line appended to ``path``, after ``prefix``.

    No bars (nobody watches them) and no time stamp (the driver adds its own). Each line is
    one small append, so the driver never reads half a line of a finished write.
    """

    def __init__(self, path: PathLike, prefix: str = "") -> None:
        super().__init__(verbose=True, bars=False)
        self.path, self.prefix = str(path), prefix

    def log(self, message: str) -> None:
        # a line that cannot be written (the folder gone, a full disk) must not fail the unit
        with contextlib.suppress(OSError), open(self.path, "a", encoding="utf-8") as fh:
            fh.write(f"{self.prefix}{message}\n")


def unit_progress(path: Optional[PathLike], prefix: str = "") -> Progress:
    """What a unit logs to: a :class:`FileLog` when the driver asked for one, else nothing."""
    return SILENT if path is None else FileLog(path, prefix)


class LogRelay:
    """While in a ``with`` block, log the lines units append to ``paths`` on ``progress``.

    Lines already in a file when the relay starts (an earlier, interrupted run) are not
    shown again. :meth:`drain` shows what has arrived so far at once (the caller does so
    before reporting a finished unit, so its epochs come before its summary line).
    """

    def __init__(self, paths: Sequence[PathLike], progress: Progress, interval: float = POLL_SECONDS) -> None:
        self.progress = progress
        self.interval = interval
        self._offsets: Dict[Path, int] = {Path(p): _size(Path(p)) for p in paths}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def drain(self) -> None:
        """Log every complete line added since the last look."""
        with self._lock:
            for path, offset in self._offsets.items():
                try:
                    with open(path, "rb") as fh:
                        fh.seek(offset)
                        chunk = fh.read()
                except FileNotFoundError:
                    continue  # the unit has not logged yet
                complete = chunk[:chunk.rfind(b"\n") + 1]  # a line still being written waits
                self._offsets[path] = offset + len(complete)
                for line in complete.decode("utf-8", errors="replace").splitlines():
                    self.progress.log(line)

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            self.drain()

    def __enter__(self) -> "LogRelay":
        if self._offsets and self.progress.shown:
            self._thread = threading.Thread(target=self._watch, name="mrec-warp-log-relay", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self.drain()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
