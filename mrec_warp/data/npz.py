"""Reading ``.npz`` archives that may be damaged or hostile (model files and work-folder
parts), and writing them (:func:`write_npz`).

``np.load`` decompresses whatever member is asked for, however large, and falls back to
pickle for files that are not archives. Here instead:

* only the members a caller names are ever read; unknown members are never decompressed;
* each member's sizes are checked before any of its data is decompressed: the zip
  directory's uncompressed size must equal the ``.npy`` header's shape x item size (plus the
  header), must not exceed :data:`MAX_RATIO` times its compressed size (a decompression
  bomb), and the caller checks the shape against what it expects;
* the archive must fill the file: its first member starts at the first byte, each member
  where the one before ends and the directory where the last ends (within
  :data:`LAYOUT_SLACK`), so a file grown by bytes before, between or after its members
  (gigabytes of zeros in front of a valid model) is refused before anything is read;
* object (pickled) arrays are refused: pickle is never loaded;
* every defect is a one-line :class:`~mrec_warp.errors.InputError` naming the file.

The checks of array *values* (CSR structure, ids, finite factors) are here too, as
functions raising :class:`ValueError` with a short description the caller completes.
"""
from __future__ import annotations

import math
import os
import tokenize
import zipfile
import zlib
from typing import IO, Collection, Dict, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..errors import InputError
from .inputs import MAX_ID_LENGTH

#: A member may decompress to at most this many times its compressed size (plus
#: :data:`RATIO_SLACK`). mrec-warp writes its archives uncompressed (ratio 1) but for the
#: ids and compact index and weight arrays of model files (deflated: ids 5-10x, indices
#: about 2x; never more than half this, :func:`write_npz`); a file recompressed with a zip
#: tool stays far below this too.
MAX_RATIO = 64
RATIO_SLACK = 1 << 20
#: Longest id accepted in an ids array, in characters: the readers' limit, so every id a
#: file gives a model loads back.
MAX_ID_CHARS = MAX_ID_LENGTH
#: Bytes a zip may hold between its members and around its directory beyond the fixed-size
#: records: local extra fields (zip64 sizes) and data descriptors take a few dozen.
LAYOUT_SLACK = 1024
#: Fixed part of a local file header, of a central directory entry, and the end records
#: (the zip64 end record and its locator included), in bytes.
_LOCAL_HEADER = 30
_CENTRAL_ENTRY = 46
_END_RECORDS = 22 + 56 + 20
#: Largest ``.npy`` header read (numpy's own default limit).
MAX_HEADER_BYTES = 10_000

Shape = Tuple[Optional[int], ...]
Source = Union[str, os.PathLike, IO[bytes]]

_READ_ERRORS = (ValueError, OSError, EOFError, RuntimeError, NotImplementedError, zipfile.BadZipFile, zlib.error)
#: What parsing a damaged ``.npy`` header raises besides: numpy evaluates the header as a Python
#: literal, and falls back to its tokenizer, whose ``TokenError`` is no ``ValueError``.
_HEADER_ERRORS = _READ_ERRORS + (SyntaxError, tokenize.TokenError, RecursionError, TypeError, KeyError)


class NpzArchive:
    """An ``.npz`` opened for reading named members, with sizes checked before decompression.

    Parameters
    ----------
    source : path or binary file object
    what : str
        What the file should be, for messages ("an mrec-warp model file").
    hint : str
        How to fix a damaged file, appended to every error.
    name : str, optional
        The file's path in messages (default: ``source``'s path or name).
    """

    def __init__(self, source: Source, what: str, hint: str, name: Optional[str] = None) -> None:
        self.name = name or source_name(source)
        self.what = what
        self.hint = hint
        try:
            self._zip = zipfile.ZipFile(source)
        except FileNotFoundError:
            raise InputError("file does not exist", path=self.name, hint="check the path") from None
        except IsADirectoryError:
            raise InputError(f"is a folder, not {what}", path=self.name, hint="check the path") from None
        except _READ_ERRORS as exc:
            raise InputError(f"not {what}, or truncated (no readable zip archive: {_short(exc)})", path=self.name,
                             hint=hint) from None
        problem = _layout_problem(self._zip)
        if problem is not None:
            self.close()
            raise InputError(f"not {what}: {problem}", path=self.name, hint=hint)
        self._members: Dict[str, zipfile.ZipInfo] = {}
        for info in self._zip.infolist():
            if not info.filename.endswith(".npy"):
                continue
            key = info.filename[:-4]
            if key in self._members:
                self.close()
                raise self.error(f"member {key!r} appears twice")
            self._members[key] = info
        self._headers: Dict[str, Tuple[Tuple[int, ...], np.dtype]] = {}

    def __enter__(self) -> "NpzArchive":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._zip.close()

    def __contains__(self, key: str) -> bool:
        return key in self._members

    def error(self, message: str) -> InputError:
        """A one-line error about this file."""
        return InputError(message, path=self.name, hint=self.hint)

    def header(self, key: str, kinds: str, shape: Shape, max_chars: int = MAX_ID_CHARS) -> Tuple[Tuple[int, ...], np.dtype]:
        """Shape and dtype of member ``key``, checked without decompressing its data.

        ``kinds`` lists the accepted dtype kinds (``"iu"``, ``"f"``, ``"U"``), or one kind and
        its item size (``"f4"``: float32 only, as factors are computed and stored); ``shape`` the
        expected shape, ``None`` for a dimension that may be anything; ``max_chars`` the
        longest string of a text array.
        """
        dims, dtype = self._header(key)
        if dtype.kind == "U" and dtype.itemsize > 4 * max_chars:
            raise self.error(f"array {key!r} holds strings of up to {dtype.itemsize // 4:,} characters"
                             f" (the limit is {max_chars:,})")
        size = int(kinds[1:]) if kinds[1:].isdigit() else None
        if size is not None:
            kinds = kinds[0]
        if dtype.kind not in kinds or dtype.fields is not None or dtype.subdtype is not None \
                or (size is not None and dtype.itemsize != size):
            expected = np.dtype(f"{kinds}{size}").name if size is not None else _kind_names(kinds)
            raise self.error(f"array {key!r} has type {dtype.str}, expected {expected}")
        if len(dims) != len(shape) or any(want is not None and got != want for got, want in zip(dims, shape)):
            expected = "(" + ", ".join("any" if s is None else str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
            raise self.error(f"array {key!r} has shape {tuple(dims)}, expected {expected}")
        return dims, dtype

    def _header(self, key: str) -> Tuple[Tuple[int, ...], np.dtype]:
        """The ``.npy`` header of a member, its sizes checked; read once."""
        if key in self._headers:
            return self._headers[key]
        info = self._members.get(key)
        if info is None:
            raise self.error(f"lacks the array {key!r}")
        if info.compress_type == zipfile.ZIP_STORED and info.file_size != info.compress_size:
            raise self.error(f"array {key!r} declares {info.file_size:,} bytes but stores {info.compress_size:,}")
        if info.file_size > MAX_RATIO * info.compress_size + RATIO_SLACK:
            raise self.error(f"array {key!r} would decompress from {info.compress_size:,} to {info.file_size:,} bytes;"
                             " refusing a possible decompression bomb")
        try:
            with self._zip.open(info) as fh:
                version = np.lib.format.read_magic(fh)
                if version == (1, 0):
                    dims, fortran, dtype = np.lib.format.read_array_header_1_0(fh, max_header_size=MAX_HEADER_BYTES)
                elif version == (2, 0):
                    dims, fortran, dtype = np.lib.format.read_array_header_2_0(fh, max_header_size=MAX_HEADER_BYTES)
                else:
                    raise ValueError(f"unsupported .npy version {version}")
                offset = fh.tell()
        except _HEADER_ERRORS as exc:
            raise self.error(f"array {key!r} is unreadable ({_short(exc)})") from None
        if dtype.hasobject:
            raise self.error(f"array {key!r} holds Python objects (pickled data), which mrec-warp never loads")
        nbytes = math.prod(dims) * dtype.itemsize
        if info.file_size != offset + nbytes:
            raise self.error(f"array {key!r} declares shape {tuple(dims)} ({nbytes:,} bytes)"
                             f" but its member holds {info.file_size - offset:,}")
        self._headers[key] = (tuple(dims), dtype)
        return self._headers[key]

    def read(self, key: str, kinds: str, shape: Shape, max_chars: int = MAX_ID_CHARS) -> np.ndarray:
        """Member ``key`` as a C-contiguous array, after :meth:`header` accepted it."""
        self.header(key, kinds, shape, max_chars)
        try:
            with self._zip.open(self._members[key]) as fh:
                arr = np.lib.format.read_array(fh, allow_pickle=False, max_header_size=MAX_HEADER_BYTES)
        except _HEADER_ERRORS as exc:  # (it parses the header again)
            raise self.error(f"array {key!r} is corrupt ({_short(exc)})") from None
        return arr if arr.flags.c_contiguous else arr.copy(order="C")  # (ascontiguousarray makes 0-d 1-d)


def _layout_problem(archive: zipfile.ZipFile) -> Optional[str]:
    """What makes ``archive`` hold more bytes than its members and directory add up to (bytes
    before the first member, between two, or around the directory), or ``None``."""
    infos = sorted(archive.infolist(), key=lambda info: info.header_offset)
    end = 0
    for info in infos:
        gap = info.header_offset - end
        if gap < 0 or gap > (0 if end == 0 else LAYOUT_SLACK):
            where = "before its first member" if end == 0 else f"before member {info.filename!r}"
            return f"{max(gap, 0)} bytes that belong to no zip member {where} (or overlapping members)"
        end = info.header_offset + _LOCAL_HEADER + len(info.filename.encode()) + info.compress_size
    start_dir = getattr(archive, "start_dir", end)
    if not 0 <= start_dir - end <= LAYOUT_SLACK:
        return f"{abs(start_dir - end)} bytes that belong to no zip member before its directory"
    fp = archive.fp
    size = fp.seek(0, os.SEEK_END) if fp is not None else start_dir
    directory = sum(_CENTRAL_ENTRY + len(info.filename.encode()) + len(info.extra) + len(info.comment)
                    for info in infos)
    tail = size - start_dir - directory - _END_RECORDS - len(archive.comment)
    if tail > LAYOUT_SLACK:
        return f"{tail} bytes that belong to no zip member after its directory"
    return None


def check_layout(source: Source, what: str, hint: str, name: Optional[str] = None) -> None:
    """Refuse, with :class:`NpzArchive`'s one-line errors, a file that is no zip archive or is
    larger than its members and directory (see the module docstring), reading only its
    directory: a caller about to read the whole file checks it first."""
    NpzArchive(source, what, hint, name).close()


def source_name(source: Source) -> str:
    """The path of a file given as a path or an open file (for messages)."""
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return str(getattr(source, "name", None) or "<file object>")


def read_arrays(source: Source, spec: Dict[str, Tuple[str, Shape]], what: str, hint: str) -> Dict[str, np.ndarray]:
    """The members ``spec`` names (key -> (kinds, shape)), every header checked before any data is read."""
    with NpzArchive(source, what, hint) as archive:
        for key, (kinds, shape) in spec.items():
            archive.header(key, kinds, shape)
        return {key: archive.read(key, kinds, shape) for key, (kinds, shape) in spec.items()}


def _short(exc: BaseException) -> str:
    text = str(exc).split("\n")[0][:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _kind_names(kinds: str) -> str:
    names = {"i": "integers", "u": "integers", "f": "floats", "U": "text", "S": "text", "b": "booleans"}
    return " or ".join(dict.fromkeys(names[k] for k in kinds))


# ---------------------------------------------------------------------------------------------
# value checks: each raises ValueError("<what> ...") and costs O(size), vectorised
# ---------------------------------------------------------------------------------------------
def check_csr(indptr: np.ndarray, indices: np.ndarray, shape: Tuple[int, int], what: str) -> None:
    """A CSR structure the kernels can trust: index pointers from 0 to ``len(indices)``, never
    decreasing; column indices in range, strictly increasing within each row."""
    n_rows, n_cols = shape
    if indptr.shape != (n_rows + 1,) or indices.ndim != 1:
        raise ValueError(f"{what}: index pointer has shape {indptr.shape}, expected ({n_rows + 1},)")
    if indptr[0] != 0 or indptr[-1] != len(indices):
        raise ValueError(f"{what}: index pointer runs from {indptr[0]} to {indptr[-1]},"
                         f" expected 0 to {len(indices)}")
    steps = np.diff(indptr)
    if len(steps) and steps.min() < 0:
        raise ValueError(f"{what}: index pointer decreases at row {int(np.argmax(steps < 0))}")
    if len(indices) == 0:
        return
    lo, hi = indices.min(), indices.max()
    if lo < 0 or hi >= n_cols:
        raise ValueError(f"{what}: column index {lo if lo < 0 else hi} is outside 0..{n_cols - 1}")
    ok = np.diff(indices) > 0
    # a step that crosses into the next row may go down; mark those steps as fine
    starts = indptr[1:-1]
    ok[starts[(starts > 0) & (starts < len(indices))] - 1] = True
    if not ok.all():
        pos = int(np.argmin(ok)) + 1
        row = int(np.searchsorted(indptr, pos, side="right")) - 1
        raise ValueError(f"{what}: column indices of row {row} are not sorted and unique")


def check_ids(ids: np.ndarray, what: str) -> None:
    """Ids are 1-D text and each one appears once."""
    if ids.ndim != 1 or ids.dtype.kind != "U":
        raise ValueError(f"{what}: expected a 1-D array of text")
    dup = first_duplicate(ids)
    if dup is not None:
        raise ValueError(f"{what}: id {dup[:80]!r} appears more than once")


def first_duplicate(ids: np.ndarray) -> Optional[str]:
    """A repeated id, or None. Hashes each id's code points in a few vectorised passes
    (one per character position) and compares exactly only the ids whose hashes collide:
    several times faster than building a pandas index or sorting the strings."""
    if len(ids) < 2:
        return None
    if ids.dtype.itemsize == 0:
        return ""
    codes = np.ascontiguousarray(ids).view(np.uint32).reshape(len(ids), -1)
    h = np.zeros(len(ids), np.uint64)
    for j in range(codes.shape[1]):
        h *= np.uint64(0x9E3779B97F4A7C15)  # odd: wraps modulo 2**64, a polynomial hash
        h += codes[:, j]
    ordered = np.sort(h)
    same = ordered[1:] == ordered[:-1]
    if not same.any():
        return None
    candidates = pd.Index(ids[np.isin(h, ordered[1:][same])])
    repeated = candidates[candidates.duplicated()]
    return str(repeated[0]) if len(repeated) else None


#: Largest magnitude accepted in factor arrays: beyond it, dot products overflow float32.
MAX_FACTOR = 1e15


def check_finite(arr: np.ndarray, what: str, limit: float = MAX_FACTOR) -> None:
    """Every value finite and at most ``limit`` in magnitude (NaN propagates through max/min,
    so two passes without a temporary copy cover NaN, infinity and overflow)."""
    if arr.size == 0:
        return
    hi, lo = arr.max(), arr.min()
    if not (hi <= limit and lo >= -limit):
        bad = "NaN" if np.isnan(hi) or np.isnan(lo) else "infinite" if np.isinf(hi) or np.isinf(lo) else "huge"
        raise ValueError(f"{what} holds {bad} values")


def check_counts(arr: np.ndarray, what: str) -> None:
    """Counts (of users per item): finite, below 2**63 and not negative. A negative count
    would rank its item last without any sign of damage, so it is refused like a NaN."""
    check_finite(arr, what, limit=float(2**63))
    if arr.size and arr.min() < 0:
        raise ValueError(f"{what} holds negative values")


def check_shape(arr: np.ndarray, shape: Sequence[int], what: str) -> None:
    if arr.shape != tuple(shape):
        raise ValueError(f"{what} has shape {arr.shape}, expected {tuple(shape)}")


#: The date stamped on every member of an archive we write: a fixed one, so that the same
#: arrays always give the same bytes (np.savez stamps the current time).
_MEMBER_DATE = (1980, 1, 1, 0, 0, 0)


def write_npz(target: Union[str, os.PathLike, IO[bytes]], arrays: Dict[str, np.ndarray],
              deflate: Collection[str] = ()) -> None:
    """Write ``arrays`` as an ``.npz`` (what ``np.load`` reads) to a path or a binary file
    object: members uncompressed, except those named in ``deflate``, which are deflated
    unless that would make :class:`NpzArchive` take them for a decompression bomb
    (:func:`_too_compressed`).

    Unlike ``np.savez`` under numpy 1.x, the archive is closed even when a write fails, so
    a full disk is one error, not also a traceback printed later by the archive's finaliser;
    and members carry a fixed date, so equal arrays give equal files. Object arrays are
    refused (they would need pickle).
    """
    deflated = set(deflate)
    seekable = not hasattr(target, "write") or (target.seekable() if hasattr(target, "seekable") else False)
    start = target.tell() if seekable and hasattr(target, "write") else 0
    if not seekable:  # no second try on a stream: every big member compressed once more first, to see
        deflated = {name for name in deflated if name in arrays and not _compresses_too_far(np.asanyarray(arrays[name]))}
    while True:
        bomb = _write_members(target, arrays, deflated, check=seekable)
        if bomb is None:
            return
        # deflating it was the one way to see: written again, that member stored (rare:
        # a member of identical rows)
        deflated.discard(bomb)
        if hasattr(target, "write"):
            target.seek(start)
            target.truncate()


def _write_members(target, arrays: Dict[str, np.ndarray], deflated: Collection[str], check: bool) -> Optional[str]:
    """Write the archive; with ``check``, stop at the first deflated member too compressed
    for the reader (:func:`_too_compressed`) and return its name, else ``None``."""
    with zipfile.ZipFile(target, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, arr in arrays.items():
            arr = np.asanyarray(arr)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_MEMBER_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED if name in deflated else zipfile.ZIP_STORED
            with archive.open(info, mode="w", force_zip64=True) as member:
                np.lib.format.write_array(member, arr, allow_pickle=False)
            if check and info.compress_type == zipfile.ZIP_DEFLATED and _too_compressed(info.file_size,
                                                                                        info.compress_size):
                return name
    return None


def _too_compressed(size: int, compressed: int) -> bool:
    """Whether a member of ``size`` bytes deflated to ``compressed`` is beyond half of
    :data:`MAX_RATIO` (a member of identical rows could compress a thousandfold, and its own
    reader would then refuse it); members under :data:`RATIO_SLACK` always pass that check."""
    return size > RATIO_SLACK and size > (MAX_RATIO // 2) * max(compressed, 1)


def _compresses_too_far(arr: np.ndarray) -> bool:
    """:func:`_too_compressed` for an array not yet written (compressed once here, at
    zipfile's level, to see)."""
    if arr.nbytes + MAX_HEADER_BYTES <= RATIO_SLACK:
        return False
    return _too_compressed(arr.nbytes + MAX_HEADER_BYTES,
                           len(zlib.compress(np.ascontiguousarray(arr).tobytes(), zlib.Z_DEFAULT_COMPRESSION)))


def csr_arrays(m: sp.csr_matrix) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(indptr, indices, data)`` of ``m`` as int64, int32, float32 contiguous arrays, to save."""
    return (np.ascontiguousarray(m.indptr, dtype=np.int64), np.ascontiguousarray(m.indices, dtype=np.int32),
            np.ascontiguousarray(m.data, dtype=np.float32))


def index_dtype(n: int) -> np.dtype:
    """The smallest unsigned integer type that holds every index ``0 .. n - 1`` (a model file's
    column indices: uint16 below 65,536 items, half the bytes of int32). Readers widen them
    (to int64 before checking: a narrow type's differences wrap around)."""
    for dtype in (np.uint8, np.uint16, np.uint32):
        if n - 1 <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.uint64)


#: The largest float16 (beyond it, overflow).
FLOAT16_MAX = float(np.finfo(np.float16).max)


def round_to_float16(values: np.ndarray) -> np.ndarray:
    """float32 ``values`` rounded to the nearest float16 (a relative 2^-11 at most), still
    float32: what a model file stores in half the bytes (:func:`compact_values`) and loads back
    bit for bit. Only when no value is beyond float16's largest (65,504); otherwise ``values``
    as they are (and the file keeps float32). Values below float16's normal range (6.1e-5)
    keep fewer significant bits, but their absolute error (at most 2^-25, 3e-8) is below that
    of any weight above 1.2e-4, and a score is a sum of weights: what counts is the absolute
    error."""
    values = np.asarray(values, dtype=np.float32)
    if values.size and float(np.abs(values).max()) > FLOAT16_MAX:
        return values
    return values.astype(np.float16).astype(np.float32)


def compact_values(values: np.ndarray) -> np.ndarray:
    """float32 ``values`` as float16 when every one converts exactly (they were rounded with
    :func:`round_to_float16`), else as float32: never a change of value."""
    values = np.ascontiguousarray(values, dtype=np.float32)
    with np.errstate(over="ignore"):
        half = values.astype(np.float16)
    return half if np.array_equal(half.astype(np.float32), values) else values


def compact_csr_arrays(m: sp.csr_matrix, half: bool = False) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(indptr, indices, data)`` of ``m`` to save in the fewest bytes that lose nothing: index
    pointers and column indices in the smallest unsigned types that hold them
    (:func:`index_dtype`), values as float16 when ``half``, there are some and that is exact
    (:func:`compact_values`): only arrays rounded to float16 on purpose, so that a file says
    format version 2 only when it holds such weights."""
    data = compact_values(m.data) if half and m.nnz else np.ascontiguousarray(m.data, dtype=np.float32)
    return (np.ascontiguousarray(m.indptr, dtype=index_dtype(m.nnz + 1)),
            np.ascontiguousarray(m.indices, dtype=index_dtype(m.shape[1])), data)


def read_csr(arrays: Dict[str, np.ndarray], prefix: str, shape: Tuple[int, int]) -> sp.csr_matrix:
    """The CSR matrix saved as ``{prefix}_indptr/_indices/_data`` in ``arrays``, its structure
    and weights checked (finite, not negative) before anything reads it."""
    indptr = np.ascontiguousarray(arrays[f"{prefix}_indptr"], dtype=np.int64)
    indices = np.ascontiguousarray(arrays[f"{prefix}_indices"], dtype=np.int64)
    data = np.ascontiguousarray(arrays[f"{prefix}_data"], dtype=np.float32)
    check_csr(indptr, indices, shape, prefix)
    if data.shape != indices.shape:
        raise ValueError(f"{prefix}: {len(data)} weights for {len(indices)} entries")
    check_finite(data, f"{prefix} weights")
    if len(data) and data.min() < 0:
        raise ValueError(f"{prefix} holds negative weights")
    return sp.csr_matrix((data, indices.astype(np.int32), indptr), shape=shape)
