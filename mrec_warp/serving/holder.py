"""The model a server answers from: loaded and validated before use, swapped atomically.

A :class:`ModelHolder` keeps one :class:`Served` (the model, its file's checksum, its
description). Every request reads ``holder.current`` once and answers from that, so a
reload never mixes two models in one answer and never waits for one: the new file is
read, checked (:func:`~mrec_warp.models.base.load` validates every array, then
:func:`~mrec_warp.stages.recommend.check_rankable` refuses a model that ranks nothing) and
only then replaces the reference. A file that fails keeps the old model, and the reason is
logged and shown by ``GET /model``.

The model file is read once into memory and both hashed and loaded from those bytes, so
the checksum is the checksum of what is served even while the file is being replaced.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import io
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from stat import S_ISREG
from typing import Any, Callable, Dict, Optional, Tuple

from ..data.inputs import check_readable
from ..data.npz import check_layout
from ..errors import InputError
from ..models import ann
from ..models.base import Recommender, load
from ..models.families import family_name
from ..stages.recommend import check_rankable
from ..models.persistence import HINT as MODEL_HINT
from .mapped import map_arrays, private_copy, remove_copy

log = logging.getLogger("mrec_warp.serve")

#: Seconds between two looks at the model file with ``reload``.
POLL_SECONDS = 1.0


@dataclass(frozen=True)
class Served:
    """One loaded model and what ``/model`` and ``/health`` say about it."""

    model: Recommender
    sha256: str
    description: Dict[str, Any]
    loaded_at: str = field(default="")
    copy_file: Optional[str] = None  # the private copy of the file (arrays mapped from it)
    ann: Optional[Any] = None  # the model's checked ANN index (serve --ann), see mrec_warp.models.ann


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return str(value)


def _read_regular(path: str) -> Tuple[bytes, os.stat_result]:
    """The bytes of the model file at ``path`` and its status, read once.

    The path must name a regular file (:func:`~mrec_warp.data.inputs.check_readable`, the
    check of every model read), and so must what is opened: the file is opened without
    blocking and checked again, so a FIFO or device swapped in after the check can neither
    block the open (and with it the reload lock and shutdown) nor be read without end."""
    check_readable(path, "model file", empty_hint="a model file is written by training")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        stat = os.fstat(fd)
        if not S_ISREG(stat.st_mode):
            raise InputError("model file is not a regular file (it was replaced while being opened)", path=path,
                             hint="give a regular file")
        with os.fdopen(fd, "rb", closefd=True) as fh:
            fd = -1
            check_layout(fh, "an mrec-warp model file", MODEL_HINT, path)  # never read a file grown past its archive
            fh.seek(0)
            return fh.read(), stat
    finally:
        if fd >= 0:
            os.close(fd)


def read_model(path: str, ann_file: Optional[str] = None) -> Served:
    """Load and check the model at ``path``; an :class:`InputError` (one line) if unusable.

    ``ann_file``: also load its ANN index from there, checked against the bytes read (a
    stale, mismatched or damaged index makes the model unusable: it is never served silently)."""
    data, stat = _read_regular(path)
    sha = hashlib.sha256(data).hexdigest()
    source = io.BytesIO(data)
    source.name = path  # messages name the file, not "<file object>"
    model = load(source)
    check_rankable(model, path)
    index = None
    if ann_file is not None:
        index = ann.load(ann_file, model, sha, path)
    copy = private_copy(data, sha)  # also the last good model a new worker falls back to
    mapped = map_arrays(model, copy) if copy else {}  # shared by every worker through the page cache
    description = {
        "family": family_name(model),
        "class": type(model).__name__,
        "parameters": {k: _jsonable(v) for k, v in model.get_params().items()},
        "users": int(model.n_users),
        "items": int(model.n_items),
        "interactions": int(model.train_.nnz),
        "epochs": _jsonable(getattr(model, "epochs_done_", None)),
        # the file format stores no training date: the file's time is the nearest fact
        "trained": None,
        "file": os.path.abspath(path),
        "file_modified": _dt.datetime.fromtimestamp(stat.st_mtime, _dt.timezone.utc).isoformat(timespec="seconds"),
        "file_bytes": len(data),
        "sha256": sha,
        "memory_mapped": {name: size for name, size in sorted(mapped.items())},
        "ann": None if index is None else {key: index.header[key] for key in (
            "library", "library_version", "M", "ef_search", "dim", "model_sha256")},
    }
    return Served(model, sha, description, _now(), copy, index)


def failure_reason(exc: BaseException, path: str) -> str:
    """One line saying why loading ``path`` failed, never empty (a MemoryError has no text)."""
    if isinstance(exc, InputError):
        return exc.render()
    if isinstance(exc, MemoryError):
        return f"{path}: out of memory while loading the model"
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename or path}: {exc.strerror}"
    text = " ".join(str(exc).split())
    return f"{path}: {text or type(exc).__name__}"


class ModelHolder:
    """The served model and its replacement on a change of the file.

    Parameters
    ----------
    path : str
        The model file.
    served : Served, optional
        An already loaded model (the command loads it once to refuse a bad file at start).
    on_swap : callable, optional
        Called with the new :class:`Served` after each successful reload.
    ann_file : str, optional
        The model's ANN index (``serve --ann``): loaded with every model, and watched too.

    The private copy of a model that is replaced, and of the last one at :meth:`stop`, is
    released (:func:`~.mapped.remove_copy`): removed once no live process holds it, so the
    supervisor of several workers keeps the copy a new worker may still fall back to.
    """

    def __init__(self, path: str, served: Optional[Served] = None,
                 on_swap: Optional[Callable[[Served], None]] = None, ann_file: Optional[str] = None) -> None:
        self.path = path
        self.ann_file = ann_file
        self.on_swap = on_swap
        self.current: Served = served if served is not None else read_model(path, ann_file)
        self.last_error: Optional[str] = None
        self.last_reload_at = 0.0  # seconds since the epoch of the last reload, good or failed
        self._lock = threading.Lock()  # one reload at a time; requests never take it
        self._stat = self._file_state()
        self._stop = threading.Event()
        self._watcher: Optional[threading.Thread] = None

    def _file_state(self) -> Optional[Tuple[int, ...]]:
        state: Tuple[int, ...] = ()
        for path in (self.path, self.ann_file):  # a new index for the same model is a change too
            if path is None:
                continue
            try:
                st = os.stat(path)
            except OSError:
                return None
            state += (st.st_mtime_ns, st.st_size, st.st_ino)
        return state

    def reload(self, reason: str = "reload") -> bool:
        """Load the file again and swap it in if it is valid; return whether it was swapped.

        A file that fails (missing, damaged, of another kind) keeps the current model: the
        one-line reason is logged and kept in :attr:`last_error`.
        """
        with self._lock:
            self._stat = self._file_state()
            try:
                served = read_model(self.path, self.ann_file)
            except (InputError, OSError, ValueError, MemoryError) as exc:
                message = failure_reason(exc, self.path)
                self.last_error = f"{_now()} {reason}: {message}"
                self.last_reload_at = time.time()
                log.warning("%s: %s; still serving sha256 %s", reason, message, self.current.sha256[:12])
                return False
            old = self.current
            self.current = served  # one reference assignment: requests see the old or the new model
            self.last_error = None
            self.last_reload_at = time.time()
            if old.copy_file and old.copy_file != served.copy_file:
                remove_copy(old.copy_file)  # mappings outlive the names
            log.info("%s: now serving %s (sha256 %s, was %s)", reason, self.path, served.sha256[:12], old.sha256[:12])
        if self.on_swap is not None:
            self.on_swap(served)
        return True

    # -- watching the file ----------------------------------------------------------------------
    def watch(self, interval: float = POLL_SECONDS) -> None:
        """Reload whenever the file changes (polled every ``interval`` seconds), in a thread."""
        if self._watcher is not None:
            return
        self._stop.clear()
        self._watcher = threading.Thread(target=self._poll, args=(interval,), name="mrec-warp-reload", daemon=True)
        self._watcher.start()

    def _poll(self, interval: float) -> None:
        while not self._stop.wait(interval):
            state = self._file_state()
            if state is None or state == self._stat:
                continue
            # wait until the file stops changing: a writer that is not atomic is still writing
            if self._stop.wait(interval / 4) or self._file_state() != state:
                continue
            self.reload("file changed")

    def stop(self) -> None:
        """Stop watching and release the private copy (mappings outlive its name)."""
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(timeout=5)
            self._watcher = None
        if self.current.copy_file:
            remove_copy(self.current.copy_file)
