"""A job's work folder: its description, its part files, and the lock of the run using it.

:class:`WorkDir` is the ground of the job engine (:mod:`mrec_warp.jobs`): it checks that a
folder holds the job it is asked for (``job.json``), refuses a folder of someone else's
files, says which part files exist, locks the folder against a second run, and removes
the job's files -- and only those -- when it is done.
"""
from __future__ import annotations

import contextlib
import json
import os
import time
import weakref
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

from .files import (PathLike, atomic_write, host_name, is_temp_name, owner_tag, process_alive,
                    remove_stale_temps)
from . import strict_json
from .errors import InputError
from .progress import SILENT, Progress

JOB_FILE = "job.json"
LOCK_FILE = "lock"
#: The key of ``job.json`` that says whether the tool made the folder (then it also removes it).
CREATED_KEY = "folder_created"


def _own_before_job(name: str) -> bool:
    """Whether a file in a folder without ``job.json`` may be the tool's: the lock, or a
    temporary of ours (the lock's draft, a ``job.json`` being written)."""
    return name == LOCK_FILE or is_temp_name(name)


def _work_names(path: PathLike) -> Optional[List[str]]:
    """The names in a work folder besides ``job.json`` and the lock (``None`` if it cannot be
    listed)."""
    try:
        names = os.listdir(path)
    except OSError:
        return None
    return [name for name in names if name not in (JOB_FILE, LOCK_FILE)]


def holds_work(path: PathLike) -> bool:
    """Whether a work folder holds anything a rerun would reuse (a part, a staged input, a
    log): a file besides ``job.json``, the lock and temporaries."""
    return any(not is_temp_name(name) for name in _work_names(path) or [])


def _lock_holder(path: Path) -> Optional[Dict[str, Any]]:
    """The run recorded in a lock file, or ``None`` if there is none (or it is unreadable)."""
    try:
        holder = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}  # being written right now, or damaged: treat as held by an unknown run
    return holder if isinstance(holder, dict) else {}


def _describe_holder(holder: Dict[str, Any]) -> str:
    if not holder:
        return "an unknown run"
    try:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(holder.get("started"))))
    except (TypeError, ValueError, OverflowError, OSError):  # a damaged lock still names its holder
        started = "at an unknown time"
    return f"process {holder.get('pid')} on {holder.get('host')} (started {started})"


def _link_or_create(draft: Path, lock: Path, token: str) -> None:
    """Put the lock in place if nobody holds it, else raise ``FileExistsError``."""
    try:
        os.link(draft, lock)
    except FileExistsError:
        raise
    except OSError:  # a filesystem without hard links: an exclusive create does the same
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        with os.fdopen(fd, "w") as fh:
            fh.write(token)


class WorkDir:
    """A job's folder of part files, locked for the duration of one run.

    Parameters
    ----------
    path : path-like
        Created if needed. Must be visible to every worker (a shared filesystem on a
        multi-machine cluster).
    job : dict
        What the job is (JSON-able). If the folder already holds a different job, a
        one-line :class:`InputError` says so instead of mixing parts of two jobs.
    progress : Progress, optional
        Where to say that a stale lock was taken over.

    Notes
    -----
    **Locking.** Only one run at a time may use a work folder: two runs of one job would
    write each part twice and race on the final file, and two different jobs would pass the
    job check together and mix their parts. A run writes its process id, host name and start
    time to a temporary file and hard-links it to ``WORKDIR/lock``: the link fails if the
    lock exists (like ``O_EXCL``, and unlike ``flock`` it also holds on NFS), and the lock is
    never seen half written. A second run is refused in one line naming the holder. The
    lock is removed when the run ends, also on an error. A lock left by a killed run is
    taken over, with a note, when its process is gone on this machine; a lock of another
    machine is never taken over (that run cannot be checked from here): remove the file by
    hand once sure that run is gone. One process holds a folder's lock for one job at a
    time: a later call in the same process (a retry after an error) takes it over.

    **Ownership.** The folder is the tool's once it holds ``job.json``, the job's
    description, written when a run first takes the folder -- which must then be new or
    empty. A folder that holds other files and no ``job.json`` (the user's data, another
    program's output) is refused in one line, before anything is read or written there:
    a user's ``part-00000.tsv`` must never pass for a finished part, nor be deleted as one.
    At the end only the files the job names (its parts, staged inputs and logs, ``job.json``,
    its own temporaries) are removed, then the folder if it is empty *and* the tool made it
    (``job.json`` records which, so a resumed run knows too); anything else stays.

    A work folder that holds no work when its run ends (for example the Dask cluster
    could not be reached) is removed again, if this run made it.
    """

    def __init__(self, path: PathLike, job: Dict[str, Any], progress: Progress = SILENT) -> None:
        self.path = Path(path)
        # as job.json holds it (strict JSON), so that a resumed run compares like with like
        self.job = json.loads(strict_json.dumps(job, sort_keys=True, default=str))
        try:
            self.path.mkdir(parents=True)
            self.created = True
        except FileExistsError:
            self.created = False  # the user's folder (or one an earlier run made: job.json says)
        if not self.path.is_dir():
            raise InputError("`workdir` is not a folder", path=str(self.path),
                             hint="give an empty or new folder as `workdir`")
        self._token = self._lock(progress)
        # released when the run ends in any way: cleanup(), an exception unwinding the
        # caller, or the interpreter exiting
        self._finalizer = weakref.finalize(self, WorkDir._release, self.path, self._token, self.created)
        try:
            self._check_job()
            remove_stale_temps(self.path)  # parts being written by workers of a killed run
        except BaseException:
            self.release()
            raise

    # -- lock --------------------------------------------------------------------------------
    def _lock(self, progress: Progress) -> str:
        lock = self.path / LOCK_FILE
        remove_stale_temps(self.path, prefix=f".{LOCK_FILE}.")  # drafts of killed runs
        me = {"pid": os.getpid(), "host": host_name(), "started": time.time()}
        token = strict_json.dumps(me, sort_keys=True)
        # The lock is written whole under a temporary name and linked into place: link, like
        # O_EXCL, fails if the name exists, and a reader never sees a half-written lock.
        draft = self.path / f".{LOCK_FILE}.{owner_tag()}draft"
        draft.write_text(token)
        try:
            return self._take(lock, draft, token, progress)
        finally:
            draft.unlink()

    def _take(self, lock: Path, draft: Path, token: str, progress: Progress) -> str:
        for _ in range(10):
            try:
                _link_or_create(draft, lock, token)
            except FileExistsError:
                holder = _lock_holder(lock)
                if holder is None:
                    continue  # released meanwhile: try again
                pid, host = holder.get("pid"), holder.get("host")
                mine = pid == os.getpid() and host == host_name()
                if not isinstance(pid, int) or not isinstance(host, str) or (
                        not mine and process_alive(pid, host)):
                    raise InputError(
                        f"work folder is in use by another run: {_describe_holder(holder)}",
                        path=str(self.path),
                        hint=f"wait for it to finish, or use another `workdir`; if that run is gone, "
                             f"remove {lock}") from None
                if not mine:
                    progress.note(f"note: taking over the lock of {self.path} from "
                                 f"{_describe_holder(holder)}, which is no longer running")
                self._break(lock, holder)
                continue
            return token
        raise InputError("cannot take the work folder's lock (it keeps changing hands)", path=str(lock),
                         hint="another run is starting on this folder; use another `workdir`")

    @staticmethod
    def _break(lock: Path, holder: Dict[str, Any]) -> None:
        """Remove a stale lock, unless another run replaced it since it was read."""
        aside = lock.with_name(f".{LOCK_FILE}.{owner_tag()}stale")
        try:
            os.rename(lock, aside)  # only one of several runs breaking the same lock gets it
        except FileNotFoundError:
            return
        if _lock_holder(aside) != holder:
            # a live run's fresh lock was moved, not the stale one: put it back (link never
            # replaces, so a lock taken meanwhile by a third run stays)
            with contextlib.suppress(OSError):
                os.link(aside, lock)
        with contextlib.suppress(FileNotFoundError):
            aside.unlink()

    @staticmethod
    def _release(path: Path, token: str, created: bool) -> None:
        lock = path / LOCK_FILE
        try:
            if lock.read_text() != token:
                return  # not ours (taken over meanwhile): nothing to release
        except OSError:
            return
        empty = False
        if created and _work_names(path) == []:  # a folder this run made and left without work goes again
            with contextlib.suppress(OSError):
                (path / JOB_FILE).unlink(missing_ok=True)  # still under the lock
                empty = True
        with contextlib.suppress(OSError):
            lock.unlink()
        if empty:
            with contextlib.suppress(OSError):
                path.rmdir()

    def release(self) -> None:
        """Give up the lock (also done when the object is garbage collected or the process exits)."""
        self._finalizer()

    def __enter__(self) -> "WorkDir":
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    # -- job ---------------------------------------------------------------------------------
    def _check_job(self) -> None:
        """Refuse a folder of another job, or of files the tool did not write; else record
        the job (and whether this run made the folder) in ``job.json``."""
        manifest = self.path / JOB_FILE
        if manifest.exists():
            try:
                found = json.loads(manifest.read_text())
            except (OSError, json.JSONDecodeError, UnicodeDecodeError):
                found = None
            created = found.pop(CREATED_KEY, False) if isinstance(found, dict) else False
            if found != self.job:
                changed = sorted(k for k in set(self.job) | set(found or {})
                                 if (found or {}).get(k) != self.job.get(k)) if isinstance(found, dict) else ["all"]
                raise InputError(
                    f"work folder holds parts of a different job (differs in: {', '.join(changed)})",
                    path=str(self.path),
                    hint="rerun the original command to resume it, or remove the folder / use another `workdir`",
                )
            self.created = created is True
            return
        foreign = sorted(name for name in os.listdir(self.path) if not _own_before_job(name))
        if foreign:
            more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
            raise InputError(
                f"work folder holds files mrec-warp did not write ({', '.join(foreign[:3])}{more}) "
                f"and no {JOB_FILE}; they are left as they are",
                path=str(self.path), hint="give an empty or new folder as `workdir`")
        with atomic_write(manifest) as fh:
            strict_json.dump({**self.job, CREATED_KEY: self.created}, fh, indent=1, sort_keys=True)

    def file(self, name: str) -> Path:
        return self.path / name

    def done(self, name: str) -> bool:
        return (self.path / name).exists()

    def remove(self, names: Iterable[str]) -> None:
        """Remove these files of the job, if they exist."""
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                (self.path / name).unlink()

    def cleanup(self, names: Iterable[str]) -> None:
        """Remove the job's files (and the folder if nothing else is left in it), then the lock.

        Besides ``names``, temporary files of dead runs (a part being written when its worker
        was killed) are removed; files of other programs are left alone. The folder itself
        goes only if empty and made by the tool.
        """
        self.remove(list(names) + [JOB_FILE])
        remove_stale_temps(self.path)
        self.release()
        if self.created:  # never a folder the user made, even one left empty
            with contextlib.suppress(OSError):
                self.path.rmdir()
