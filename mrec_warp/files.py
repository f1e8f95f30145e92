"""Writing files atomically, and temporary names that say which process owns them.

The ground floor: every writer of the package goes through :func:`atomic_write` or
:func:`atomic_path`, so a crash or a bad input never leaves a half-written file behind.
A temporary file is named ``.<stem>.~<pid>@<host>~<random><suffix>`` beside its target, so
that a later run writing into the same folder can tell a leftover of a killed run (its
process is gone) from the file of a run still going, and remove only the former; a name
that is not exactly of this form is never touched.
"""
from __future__ import annotations

import contextlib
import contextvars
import errno
import hashlib
import os
import re
import shutil
import socket
import stat
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Callable, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from .errors import InputError

PathLike = Union[str, os.PathLike]


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# read once, at import: changing the umask to read it is not thread-safe
_UMASK = _read_umask()
#: The mode a plain ``open()`` gives a new file (0666 less the umask). ``mkstemp`` creates
#: private (0600) files; outputs should be as readable as any other.
FILE_MODE = 0o666 & ~_UMASK
#: The mode a plain ``mkdir()`` gives a new folder (0777 less the umask); ``mkdtemp``'s are private.
DIR_MODE = 0o777 & ~_UMASK

#: What follows a temporary name's prefix: the owner tag (:func:`owner_tag`), then the eight
#: random characters of ``mkstemp``/``mkdtemp`` and an optional suffix (``.tsv``), or the
#: word a lock file's draft carries (:mod:`mrec_warp.workdir`).
_TEMP_TAIL = re.compile(r"~(?P<pid>\d+)@(?P<host>[A-Za-z0-9_-]+)~(?:[a-z0-9_]{8}(?P<suffix>\.[^./~]*)?|draft|stale)")
#: The whole name of an :func:`atomic_path` temporary (or of a temporary folder made beside
#: an output the same way): ``.<stem>.`` then :data:`_TEMP_TAIL`.
_ATOMIC_TEMP = re.compile(r"\.(?P<stem>[^/]*?)\." + _TEMP_TAIL.pattern)


def host_name() -> str:
    """This machine's short host name, reduced to characters safe in a file name."""
    return re.sub(r"[^A-Za-z0-9_-]", "", socket.gethostname().split(".")[0]) or "host"


def owner_tag() -> str:
    """``~<pid>@<host>~``: marks a temporary name as this process's."""
    return f"~{os.getpid()}@{host_name()}~"


def process_alive(pid: int, host: str) -> bool:
    """Whether process ``pid`` of machine ``host`` may still run.

    Only a process of this machine can be checked; one of another machine (a shared
    filesystem) is assumed alive, so its files are never touched.
    """
    if host != host_name():
        return True
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, but someone else's
        return True
    except OSError:
        return True
    return True


def _owner_is_dead(match: "Optional[re.Match[str]]") -> bool:
    return match is not None and not process_alive(int(match.group("pid")), match.group("host"))


def _remove(folder: PathLike, names: Iterable[str]) -> List[str]:
    removed = []
    for name in names:
        full = os.path.join(folder, name)
        with contextlib.suppress(OSError):
            if os.path.isdir(full) and not os.path.islink(full):
                shutil.rmtree(full)
            else:
                os.unlink(full)
            removed.append(name)
    return removed


def _listdir(folder: PathLike) -> List[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def remove_stale_temps(folder: PathLike, prefix: str = ".", mine: bool = False) -> List[str]:
    """Remove the temporary files and folders in ``folder`` named ``prefix`` followed by an
    owner tag (see :func:`owner_tag`) whose process is dead on this machine.

    With the default prefix ``"."``, every :func:`atomic_path` temporary of the folder is
    meant, whatever its target (:func:`is_temp_name`). Returns the names removed. Names not
    exactly of this form -- the user's own files -- and temporaries of live processes or of
    other machines are left alone. ``mine``: this process's own temporaries go too (a run
    that is stopping: its threads' writes are cut short by the exit).
    """
    me = owner_tag()

    def gone(match: "Optional[re.Match[str]]", name: str) -> bool:
        return _owner_is_dead(match) or (mine and match is not None and me in name)

    if prefix == ".":
        stale = [n for n in _listdir(folder) if gone(_ATOMIC_TEMP.fullmatch(n), n)]
    else:
        stale = [n for n in _listdir(folder)
                 if n.startswith(prefix) and gone(_TEMP_TAIL.fullmatch(n, len(prefix)), n)]
    return _remove(folder, stale)


#: Set when the run is stopping on a signal (:func:`stop_atomic_writes`).
_STOPPING_WRITES = threading.Event()


def stop_atomic_writes() -> None:
    """From now on, :func:`atomic_path` starts no new temporary file and renames none into
    place: a run stopped by a signal removes its threads' temporaries, and the threads,
    still running until the process exits, must not make new ones nor publish half a job."""
    _STOPPING_WRITES.set()


def is_temp_name(name: str) -> bool:
    """Whether ``name`` is exactly the name of a temporary of :func:`atomic_path` (of any
    process), i.e. a file this package writes and renames or removes."""
    return _ATOMIC_TEMP.fullmatch(name) is not None


#: A check run just before :func:`atomic_path` renames a finished file into place (set by
#: :func:`rename_guard`); raising aborts the write and leaves the target as it was.
_RENAME_GUARD: contextvars.ContextVar[Optional[Callable[[Path], None]]] = contextvars.ContextVar(
    "mrec_warp_rename_guard", default=None)


@contextlib.contextmanager
def rename_guard(check: Callable[[Path], None]) -> Iterator[None]:
    """Within the block, every :func:`atomic_path` of this thread calls ``check(target)``
    before its rename; an exception from ``check`` discards the file instead."""
    token = _RENAME_GUARD.set(check)
    try:
        yield
    finally:
        _RENAME_GUARD.reset(token)


_DESCRIPTOR_PATH = re.compile(r"/dev/fd/(\d+)|/proc/self/fd/(\d+)")
_STANDARD_STREAMS = {"/dev/stdout": 1, "/dev/stderr": 2}


def descriptor_of(path: PathLike) -> Optional[int]:
    """The file descriptor ``path`` names (``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N``,
    ``/proc/self/fd/N``), or ``None`` for an ordinary path."""
    text = os.path.normpath(os.fspath(path))
    if text in _STANDARD_STREAMS:
        return _STANDARD_STREAMS[text]
    m = _DESCRIPTOR_PATH.fullmatch(text)
    return None if m is None else int(m.group(1) or m.group(2))


def _is_regular_descriptor(fd: int) -> bool:
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        return False


def is_stream(path: PathLike) -> bool:
    """Whether ``path`` exists and is neither a regular file nor a folder: a character device
    (``/dev/stdout``, ``/dev/null``), a FIFO or a socket, which is written in place."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


#: The name of standard output among a command's outputs (``-o -``).
STDOUT_NAME = "-"


def output_path(path: PathLike) -> PathLike:
    """``path``, or ``/dev/stdout`` for ``-``: an output named ``-`` is standard output,
    never a file of that name."""
    return "/dev/stdout" if os.fspath(path) == STDOUT_NAME else path


@contextlib.contextmanager
def atomic_path(path: PathLike, whole: bool = False) -> Iterator[str]:
    """A temporary file name beside ``path``, renamed over ``path`` only on success.

    For writers that want a file name (numpy, pyarrow, matplotlib); the temporary name keeps
    the final suffix so libraries that pick a format from it work. The data is synced to disk
    before the rename, so a crash never leaves a renamed but incomplete file. On any exception
    the temporary file is removed and ``path`` is left as it was (an interrupt also records
    ``path`` for :func:`take_discarded` if something was written). The temporary name
    carries this process's id (:func:`owner_tag`): temporaries in ``path``'s folder left by
    a killed run are removed here, those of a live run are not.

    A symbolic link is followed: the file it points to is replaced and the link stays. A
    path naming a descriptor (:func:`descriptor_of`: ``/dev/stdout``) that is a file gets
    the whole output at the end, written into the descriptor as the shell opened it
    (appending after ``>>``); a stream (:func:`is_stream`: a pipe, a terminal, a FIFO) is
    written in place, as it comes, unless ``whole``: a writer that seeks or reads its file
    back (a zip archive checked after writing, Parquet) writes a private temporary file,
    copied into the stream at the end. ``-`` is standard output (:func:`output_path`).
    """
    path = output_path(path)
    fd = descriptor_of(path)
    if (fd is not None and _is_regular_descriptor(fd)) or (whole and is_stream(path)):
        # /dev/stdout and friends name a descriptor the shell already opened; when that is a
        # file (``>`` or ``>>``), opening the path again would truncate a ``>>`` file and
        # renaming over it would replace the user's file: write a private temporary file,
        # then copy it into the descriptor, whole, at the end. A pipe or a terminal is a
        # stream (below): written in place, as the data comes.
        remove_stale_temps(tempfile.gettempdir(), prefix=".mrec-warp")  # of killed runs
        with tempfile.TemporaryDirectory(prefix=f".mrec-warp{owner_tag()}") as folder:
            tmp = os.path.join(folder, "output" + Path(path).suffix)
            yield tmp
            for stream in (sys.stdout, sys.stderr):  # what the command printed comes first
                with contextlib.suppress(Exception):
                    stream.flush()
            with open(tmp, "rb") as src, (os.fdopen(os.dup(fd), "wb") if fd is not None
                                          else open(path, "wb")) as dst:
                shutil.copyfileobj(src, dst)
        return
    path = Path(path)
    if is_stream(path):
        # /dev/stdout, a FIFO, a socket: a stream cannot be swapped in whole, and renaming a
        # regular file over it would destroy it, so the data goes straight through
        yield str(path)
        return
    if path.is_symlink():
        # replace the file the link points to, not the link (a user's ``latest.tsv -> v3.tsv``)
        path = Path(os.path.realpath(path))
    if _STOPPING_WRITES.is_set():
        raise RuntimeError(f"not writing {path}: the run is stopping")
    make_folders(path.parent)
    remove_stale_temps(path.parent)  # what killed runs left beside any output of this folder
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.{owner_tag()}", suffix=path.suffix, dir=str(path.parent))
    os.close(fd)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, FILE_MODE)
        if _STOPPING_WRITES.is_set():
            raise RuntimeError(f"not writing {path}: the run is stopping")
        guard = _RENAME_GUARD.get()
        if guard is not None:
            guard(path)
        os.replace(tmp, path)
        record_finished(path)
    except BaseException as exc:
        # Ctrl-C or a signal: the CLI names the outputs dropped half written (not those
        # whose writing had not begun)
        with contextlib.suppress(OSError):
            if not isinstance(exc, Exception) and os.path.getsize(tmp) > 0:
                _DISCARDED.append(str(path))
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None and exc.errno in _DISK_FULL:
            # a write() or fsync() error names no file: say which output the full disk stopped
            raise OSError(exc.errno, exc.strerror or os.strerror(exc.errno), str(path)) from exc
        raise


#: Errors only writing raises: a full disk or quota, a file over the size limit.
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
#: Targets of :func:`atomic_path` whose write an interrupt cut short (see :func:`take_discarded`).
_DISCARDED: List[str] = []


def meant_path(path: str) -> str:
    """The file or folder the user asked for, for a path inside a temporary folder made
    beside it (``out/.split.~1@h~x1y2z3w4/train.tsv`` -> ``out/split``)."""
    parts = Path(path).parts
    for i, part in enumerate(parts):
        m = _ATOMIC_TEMP.fullmatch(part)
        if m is not None:
            return str(Path(*parts[:i], m.group("stem") + (m.group("suffix") or "")))
    return path


#: Folders this process made for its outputs, in order (:func:`make_folders`).
_MADE_FOLDERS: List[Path] = []
#: Outputs this process put in place whole (:func:`record_finished`).
_FINISHED: List[str] = []


def make_folders(folder: PathLike) -> None:
    """``folder`` and its missing parents, created and remembered: a run stopped before its
    output appears removes them again if they are still empty (:func:`remove_made_folders`).
    ``-`` is refused: it names standard output, which holds no folder."""
    if os.fspath(folder) == STDOUT_NAME:
        raise InputError("'-' means standard output, which cannot hold a folder", path=STDOUT_NAME,
                         hint="give a folder path")
    folder = Path(folder)
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for made in reversed(missing):
        try:
            made.mkdir()
        except FileExistsError:  # made meanwhile by another writer: not ours to remove
            continue
        _MADE_FOLDERS.append(made)


def forget_outputs() -> None:
    """Start a new run's account of made folders and finished outputs (a program that runs
    several commands in one process)."""
    _MADE_FOLDERS.clear()
    _FINISHED.clear()


def remove_made_folders() -> List[str]:
    """Remove the folders :func:`make_folders` created that are empty now, deepest first
    (called when a run stops on a signal); returns them."""
    removed = []
    for folder in reversed(_MADE_FOLDERS):
        try:
            folder.rmdir()
        except OSError:  # holds something (a finished output, someone's file): it stays
            continue
        removed.append(str(folder))
    _MADE_FOLDERS.clear()
    return removed


def record_finished(path: PathLike) -> None:
    """Remember that ``path`` (a file or a folder) was put in place whole; one written
    inside a temporary folder is not finished until that folder is renamed."""
    if meant_path(str(path)) == str(path):
        _FINISHED.append(str(path))


def take_finished() -> List[str]:
    """The outputs put in place whole since the last call, in order, without repeats."""
    found = list(dict.fromkeys(_FINISHED))
    _FINISHED.clear()
    return found


def take_discarded() -> List[str]:
    """The outputs whose partial file an interrupt (Ctrl-C, a signal) removed since the last
    call, in order, without repeats (a file written inside a temporary folder counts as the
    folder it was to become); the list starts again empty."""
    found = list(dict.fromkeys(meant_path(p) for p in _DISCARDED))
    _DISCARDED.clear()
    return found


@contextlib.contextmanager
def atomic_write(path: PathLike, mode: str = "w", encoding: Optional[str] = "utf-8",
                 whole: bool = False) -> Iterator[IO]:
    """:func:`atomic_path` for writers that want an open file."""
    binary = "b" in mode
    with atomic_path(path, whole=whole) as tmp, open(tmp, mode, encoding=None if binary else encoding,
                                        newline=None if binary else "") as fh:
        yield fh


#: Spellings of standard input among the inputs of a command.
_STDIN_NAMES = ("-", "/dev/stdin")


def file_identity(path: PathLike, reading: bool = False) -> Optional[Tuple[int, int]]:
    """``(st_dev, st_ino)`` of the regular file ``path`` names, or ``None`` (missing, or not
    a regular file: a terminal, a pipe, ``/dev/null`` cannot be replaced).

    The file itself, not its name: symbolic links are followed, and a path naming a
    descriptor (``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``, see
    :func:`descriptor_of`) gives the file the shell opened there (``>> t.tsv``). With
    ``reading``, ``-`` names standard input, as it does for the commands' input files.
    """
    text = os.fspath(path)
    fd = 0 if reading and text in _STDIN_NAMES else descriptor_of(text)
    try:
        st = os.fstat(fd) if fd is not None else os.stat(text)
    except (OSError, ValueError):  # missing, a dangling link, a closed descriptor, a NUL in the name
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None


def same_file(a: str, b: str) -> bool:
    """Whether two paths name one file: the same regular file (:func:`file_identity`: device
    and inode, through symlinks, hard links, bind mounts and ``/dev/fd/N``), or, when
    neither exists yet, the same resolved path."""
    ia, ib = file_identity(a), file_identity(b)
    if ia is not None or ib is not None:
        return ia == ib
    return descriptor_of(a) is None and descriptor_of(b) is None and os.path.realpath(a) == os.path.realpath(b)


def check_outputs(outputs: Mapping[str, Union[None, PathLike, Sequence[PathLike]]],
                  inputs: Iterable[Optional[PathLike]]) -> None:
    """Refuse, in one line and before any work, an output that would replace an input or
    another output.

    Every command and stage that writes files calls this with what it will write and what
    it reads, so that ``train x.tsv -o x.tsv`` or ``recommend model.npz -o ./model.npz``
    never replaces its own input. Files are compared by device and inode
    (:func:`file_identity`), not by name: ``-o /dev/stdout >> x.tsv`` writes into ``x.tsv``
    as surely as ``-o x.tsv`` does, and an input read from standard input (``-``) is the
    file the shell opened. What is not a regular file (a terminal, a pipe, ``/dev/null``)
    is written in place, never replaced, so it cannot clash. Several outputs naming one
    descriptor (``--report /dev/stdout --json /dev/stdout``) append one after the other; ``-``
    asks for standard output to itself, and is refused beside another output there.

    Parameters
    ----------
    outputs : mapping
        Option or parameter name (for the message) -> the path it writes, or the list of files it writes
        (a folder option such as ``prepare -o`` names each file it would create there).
    inputs : iterable of paths
        Files the command reads; ``None`` entries are skipped.
    """
    ins = [(str(p), file_identity(p, reading=True)) for p in inputs if p]
    for option, paths in outputs.items():  # a folder where a file goes first: no other refusal fits it
        for path in [] if not paths else [paths] if isinstance(paths, (str, os.PathLike)) else paths:
            check_output_place(option, path)
    written: List[Tuple[str, str]] = []  # (path, option) of the outputs checked so far
    standard: List[Tuple[str, bool]] = []  # (option, given as "-") of the outputs to standard output
    for option, paths in outputs.items():
        if not paths:
            continue
        for path in [paths] if isinstance(paths, (str, os.PathLike)) else paths:
            path = str(path)
            dash = path == STDOUT_NAME
            if dash or descriptor_of(path) == 1:
                # "-" asks for an output of its own on standard output: another one there would run
                # into it unmarked (two JSON documents, a table and a CSV); /dev/stdout named
                # several times is the documented way to append them on purpose
                other = next((o for o, d in standard if d or dash), None)
                if other is not None:
                    raise InputError(f"{option} and {other} both write standard output: their outputs would run "
                                     "together", path=STDOUT_NAME, hint="give '-' to one output at most, files to "
                                     "the others")
                standard.append((option, dash))
            identity = file_identity(path)
            if identity is None and (is_stream(path) or descriptor_of(path) is not None):
                continue  # a terminal, a pipe, /dev/null: written in place
            clash = next((name for name, i in ins if identity is not None and i == identity
                          or (i is None and same_file(path, name))), None)
            if clash is not None:
                via = f": the shell opened it as {path}" if descriptor_of(path) is not None else ""
                clash = "standard input" if clash == "-" else clash
                raise InputError(f"{option} would overwrite an input file ({clash}{via})", path=path,
                                 hint="write the output somewhere else")
            fd = descriptor_of(path)
            other = next((o for p, o in written if same_file(path, p)
                          and not (fd is not None and descriptor_of(p) == fd)), None)
            if other is not None:
                raise InputError(f"{option} and {other} both write this file", path=path,
                                 hint="give each output its own path")
            written.append((path, option))


def check_output_place(option: str, path: PathLike, folder: bool = False) -> None:
    """Refuse, in one line naming the path, an output that cannot be written there: a file
    output naming a folder (``-o out/``, which no write replaces), or a file or folder
    output (``folder``) inside an existing file (``-o notes.txt/model.npz``, or a folder
    option given a file). ``option`` names the output for the message; standard output and
    ``-`` pass."""
    path = str(path)
    if path == STDOUT_NAME or descriptor_of(path) is not None:
        return
    if not folder and os.path.isdir(path):
        raise InputError(f"{option} writes a file, and this is a folder", path=path,
                         hint=f"name a file, e.g. {os.path.join(path, 'out')}; a folder is never replaced")
    place = Path(os.path.abspath(path))
    if not folder:
        place = place.parent
    while not place.exists() and place != place.parent:  # the nearest that exists
        place = place.parent
    if not place.is_dir():
        shown = str(place) if os.path.isabs(path) else os.path.relpath(place)  # as the user wrote it
        itself = str(place) == os.path.abspath(path)  # a folder option given a file
        raise InputError(f"{option} writes {'into' if itself else 'inside'} this as a folder, and it is a file",
                         path=shown, hint=f"{'name a folder' if itself else 'give a path in a folder'}, or move "
                                          "that file away")


def file_digest(path: PathLike) -> str:
    """SHA-256 of a file's bytes (the data file is part of the job's identity)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
