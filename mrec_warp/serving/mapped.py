"""A served model's arrays memory-mapped from its file, so worker processes share them.

mrec-warp writes the float arrays of model archives uncompressed (only ids and compact
index arrays are deflated): each such ``arr_NAME.npy`` member is a plain ``.npy`` file
stored whole inside the zip, at a known offset. After the usual load (every
check of :func:`~mrec_warp.models.base.load`), each dense numeric array of the model is
replaced by a read-only :class:`numpy.memmap` of its member, provided the mapped bytes
equal the array that was checked (a file replaced in between keeps the private copy). The
pages then live once in the operating system's cache, however many workers map them.

What is mapped is never the user's file, which may be overwritten in place (``cp`` keeps
the inode) and would change the numbers under a running server, or cut them short
(SIGBUS), but a private copy named by its SHA-256 (:func:`private_copy`), written once and
never changed; the workers of one model share it.

Each process that uses a copy holds a lease on it, an empty file ``SHA.npz.held-by-PID@HOST``:
:func:`remove_copy` removes a copy only when no live process holds one (two servers of one
model share the copy). Whatever a process leaves behind when it is killed (its leases, a
copy no live process holds, a ``.tmp`` it was writing) is swept by name and process id the
next time any server makes a copy (:func:`sweep_stale`). A copy that cannot be written
whole (a full disk) leaves nothing: its temporary file is removed on every failure path,
and the server keeps its arrays in memory instead.

Arrays a model converts on load (another dtype, a derived table) stay private; so does
every array of a file a zip tool recompressed.

A member's data sits wherever the zip put it, rarely on a multiple of its item size, and
numpy multiplies unaligned arrays without BLAS: 16 ms instead of 0.9 ms for 4 users x 100k
items x 64 factors. Such an array is mapped instead from a ``.npy`` file of its own beside
the private copy (``SHA.npz.NAME.npy``: its data 64-byte aligned), written once too.
"""
from __future__ import annotations

import contextlib
import glob
import logging
import os
import re
import struct
import tempfile
import zipfile
from typing import Dict, Optional

import numpy as np

from ..files import host_name, process_alive

log = logging.getLogger("mrec_warp.serve")

#: A copy, a file beside it (its aligned arrays ``.NAME.npy``), a lease, a temporary file.
_COPY = re.compile(r"(?P<sha>[0-9a-f]{64})\.npz")
_SIDE = re.compile(r"(?P<copy>[0-9a-f]{64}\.npz)\.[^/]+\.npy")
_LEASE = re.compile(r"(?P<copy>[0-9a-f]{64}\.npz)\.held-by-(?P<pid>\d+)@(?P<host>[A-Za-z0-9_-]+)")
_TEMP = re.compile(r"(?P<target>[0-9a-f]{64}\.npz(?:\.[^/]+\.npy)?)\.(?P<pid>\d+)\.tmp")


def _folder() -> str:
    return os.path.join(tempfile.gettempdir(), f"mrec-warp-serve-{os.getuid()}")


def _lease(path: str) -> str:
    return f"{path}.held-by-{os.getpid()}@{host_name()}"


def _held(path: str) -> bool:
    """Whether a live process (this one included) holds a lease on the copy ``path``."""
    for lease in glob.glob(glob.escape(path) + ".held-by-*"):
        m = _LEASE.fullmatch(os.path.basename(lease))
        if m is not None and process_alive(int(m.group("pid")), m.group("host")):
            return True
    return False


def _unlink(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def sweep_stale(folder: Optional[str] = None) -> None:
    """Remove what killed servers left in the private folder: the leases and ``.tmp`` files
    of dead processes (by the process id in their names), then the copies no live process
    holds and the aligned arrays of copies that are gone."""
    folder = folder or _folder()
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        m = _LEASE.fullmatch(name) or _TEMP.fullmatch(name)
        if m is not None and not process_alive(int(m.group("pid")), m.group("host") if "host" in m.groupdict()
                                               else host_name()):
            _unlink(os.path.join(folder, name))
    for name in names:
        if _COPY.fullmatch(name) and not _held(os.path.join(folder, name)):
            remove_copy(os.path.join(folder, name), lease=False)
        side = _SIDE.fullmatch(name)
        if side is not None and not os.path.exists(os.path.join(folder, side.group("copy"))):
            _unlink(os.path.join(folder, name))

_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")  # a zip local file header, 30 bytes


def private_copy(data: bytes, sha256: str) -> Optional[str]:
    """The path of an unchanging copy of a model file's bytes, ``<tmp>/mrec-warp-serve-UID/SHA.npz``,
    written (atomically) by the first process that needs it and leased by this process
    (released by :func:`remove_copy`); ``None`` where it cannot be, with nothing left behind."""
    folder = _folder()
    path = os.path.join(folder, f"{sha256}.npz")
    lease = _lease(path)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        if os.stat(folder).st_uid != os.getuid():  # someone else's folder: do not trust its files
            return None
        sweep_stale(folder)
        with open(lease, "w"):  # first: a sweep by another server never takes a copy in use
            pass
        if os.path.exists(path) and os.path.getsize(path) == len(data):
            return path  # (map_arrays compares every mapped array with the checked one)
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
        return path
    except OSError as exc:
        _unlink(tmp)  # a full disk: the partial copy would hold every free byte
        _unlink(lease)
        log.info("no private copy of the model to map (%s): each worker keeps its own arrays", exc)
        return None


def _member_map(path: str, zf: zipfile.ZipFile, name: str) -> Optional[np.memmap]:
    """``name`` (an ``.npy`` member) as a read-only memmap, or ``None`` if it is not stored plain."""
    try:
        info = zf.getinfo(name)
    except KeyError:
        return None
    if info.compress_type != zipfile.ZIP_STORED:
        return None
    with open(path, "rb") as fh:
        fh.seek(info.header_offset)
        header = _LOCAL_HEADER.unpack(fh.read(_LOCAL_HEADER.size))
        if header[0] != b"PK\x03\x04":
            return None
        fh.seek(header[9] + header[10], 1)  # the member's name and extra field
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
        else:
            return None
        offset = fh.tell()
    if dtype.hasobject or fortran or int(np.prod(shape)) == 0:
        return None
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape, order="C")


def _aligned(view: np.ndarray) -> bool:
    return view.ctypes.data % ALIGN == 0


#: Where mapped data starts, in bytes (a cache line; any BLAS needs at most this).
ALIGN = 64


def _aligned_map(path: str, name: str, value: np.ndarray) -> Optional[np.ndarray]:
    """``value`` as a read-only memmap of ``PATH.NAME.npy`` (written once, atomically), whose
    data ``np.save`` puts on a multiple of 64 bytes; ``None`` where it cannot be written."""
    side = f"{path}.{name}.npy"
    tmp = f"{side}.{os.getpid()}.tmp"
    try:
        if not os.path.exists(side):
            with open(tmp, "wb") as fh:
                np.save(fh, np.ascontiguousarray(value), allow_pickle=False)
            os.replace(tmp, side)
        view = np.load(side, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        _unlink(tmp)
        log.info("array %s not memory-mapped (%s): each worker keeps its own copy", name, exc)
        return None
    return view if _aligned(view) else None


def remove_copy(path: str, lease: bool = True) -> None:
    """Release this process's lease on a private copy (``lease``), then remove the copy and
    the aligned arrays beside it unless another live process holds it (mappings outlive
    the names)."""
    if lease:
        _unlink(_lease(path))
    if _held(path):
        return
    for name in [path] + glob.glob(glob.escape(path) + ".*.npy"):
        _unlink(name)


def map_arrays(model, path: str) -> Dict[str, int]:
    """Swap ``model``'s dense arrays for memmaps of ``path`` where they are byte-identical.

    Returns name -> bytes now mapped (empty when nothing could be). The model's own
    ``set_arrays`` takes the new arrays, so its checks run again on them.
    """
    arrays = model.get_arrays()
    mapped: Dict[str, np.ndarray] = {}
    try:
        with zipfile.ZipFile(path) as zf:
            for name, value in arrays.items():
                if not isinstance(value, np.ndarray) or value.dtype.kind not in "fiu" or value.size == 0:
                    continue
                view = _member_map(path, zf, f"arr_{name}.npy")
                if view is not None and not _aligned(view):
                    view = _aligned_map(path, name, value)
                if view is not None and view.dtype == value.dtype and view.shape == value.shape \
                        and np.array_equal(view, value):
                    mapped[name] = view
    except (OSError, zipfile.BadZipFile, ValueError) as exc:  # the file changed under us: keep the copies
        log.info("arrays not memory-mapped (%s): each worker keeps its own copy", exc)
        return {}
    if not mapped:
        return {}
    model.set_arrays({**arrays, **mapped})
    kept = model.get_arrays()  # (a model may convert what it is given: count what it kept mapped)
    return {name: int(view.nbytes) for name, view in mapped.items()
            if isinstance(kept.get(name), np.ndarray) and np.may_share_memory(kept[name], view)}
