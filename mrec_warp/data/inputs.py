"""Opening inputs: plain files, ``.gz`` files and pipes, the encoding their text is in, and
the limits every text input is checked against as its bytes arrive.

Every reader of the package opens its file through here: a missing, empty or unreadable
file, a device or socket, a pipe read twice or a damaged ``.gz`` is an
:class:`~mrec_warp.errors.InputError` naming the file. Text is UTF-8 (a byte-order mark
dropped), else Latin-1, and outputs are written in the encoding their input was read in
(:func:`output_encoding`), so every id keeps its bytes. What cannot be text of one record
per line is refused before it is parsed (:class:`TextScan`): UTF-16/32, NUL bytes, a line
longer than :data:`MAX_LINE_BYTES`, a carriage return that does not end a line.
"""
from __future__ import annotations

import codecs
import contextlib
import errno
import gzip
import io
import os
import re
import stat
import tempfile
import zlib
from pathlib import Path
from typing import IO, Callable, Iterator, List, Optional, Tuple

from ..errors import InputError
from ..files import PathLike, owner_tag, remove_stale_temps

#: Longest line of a text input, in bytes (after ``.gz`` decompression): checked as the
#: bytes arrive, so a file without line breaks (a binary file, ``/dev/zero`` through a pipe)
#: is refused after 1 MiB, not after filling memory. A record is 2-4 short fields; the
#: limit leaves room for long unused columns (review text).
MAX_LINE_BYTES = 1 << 20

#: Longest user, item or feature id, in characters. Model files hold ids of at most this
#: many characters (:data:`mrec_warp.data.npz.MAX_ID_CHARS`), so readers refuse longer ones
#: at once, naming the line, instead of training a model that does not load.
MAX_ID_LENGTH = 65_536

#: Most lines an id list (``--users FILE``) may hold, and its largest size in bytes: the
#: list is held in memory, so an endless pipe stops here instead of filling memory.
MAX_LIST_IDS = 10_000_000
MAX_LIST_BYTES = 1 << 30

#: Free space the temporary copy of a piped input leaves on its filesystem: the copy stops
#: with an error rather than fill the disk.
SPOOL_RESERVE_BYTES = 256 << 20

#: Prefix of the temporary copy of a piped input (in the temporary folder, with the
#: owner's PID, so a later run removes the copy a killed run left behind).
SPOOL_PREFIX = "mrec-warp-input-"

_CHUNK = 1 << 22
_STDIN = "-"


def input_path(path: PathLike) -> Path:
    """``path`` as a :class:`~pathlib.Path`; ``-`` is standard input (``/dev/stdin``)."""
    return Path("/dev/stdin") if str(path) == _STDIN else Path(path)


def is_pipe(path: PathLike, what: str = "input file", pipe_ok: bool = True) -> bool:
    """Whether ``path`` is a pipe or FIFO (``<(...)``, ``/dev/stdin`` fed by a pipe) rather
    than a regular file; anything else is refused in one line before any byte is read.

    A directory, a character or block device (``/dev/zero``, a terminal), a socket or a
    missing path is an :class:`~mrec_warp.errors.InputError`: a device may never end, and
    none of them holds a table. ``pipe_ok`` only words the hint (whether a pipe would do).
    """
    p = Path(path)
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        raise InputError(f"{what} does not exist", path=str(p), hint="check the path") from None
    except OSError as exc:
        raise InputError(f"cannot open the {what} ({exc.strerror or exc})", path=str(p),
                         hint="check the path and its permissions") from None
    if stat.S_ISREG(mode):
        return False
    if stat.S_ISFIFO(mode):
        return True
    if stat.S_ISDIR(mode):
        raise InputError(f"{what} is a directory, expected a file", path=str(p))
    kind = ("character device (a terminal, /dev/zero, ...)" if stat.S_ISCHR(mode) else
            "block device" if stat.S_ISBLK(mode) else "socket" if stat.S_ISSOCK(mode) else "special file")
    if not pipe_ok:
        raise InputError(f"{what} is a {kind}, not a regular file", path=str(p), hint="give a regular file")
    raise InputError(f"{what} is a {kind}, not a file or a pipe", path=str(p),
                     hint="give a regular file, a pipe (<(...)) or standard input fed by a pipe or file")


def check_readable(path: PathLike, what: str = "input file",
                   empty_hint: str = "expected one interaction per line", stream_ok: bool = False) -> Path:
    """Fail early, in one line, on a missing, unreadable or empty file, or one that is not
    a regular file or a pipe (see :func:`is_pipe`).

    A pipe or FIFO (``<(...)``, ``/dev/stdin``, ``-``) has no size to check and can be read
    only once: with ``stream_ok`` the caller reads it once and checks emptiness itself;
    without, it is refused in one line rather than read twice (the second read would find
    it empty).
    """
    p = input_path(path)
    if is_pipe(p, what, pipe_ok=stream_ok):
        if stream_ok:
            return p
        raise InputError(f"{what} is a pipe, and this file is read more than once", path=str(p),
                         hint="write it to a regular file first and give that path")
    if p.stat().st_size == 0:
        raise InputError(f"{what} is empty", path=str(p), hint=empty_hint)
    return p


def read_list_bytes(path: Path, what: str = "id list") -> bytes:
    """Every byte of an id list (uncompressed when it ends in ``.gz``), read once, so a pipe
    or FIFO works as a regular file does; checked by :class:`TextScan` (CR ends a line
    here) and against :data:`MAX_LIST_IDS` / :data:`MAX_LIST_BYTES` as the bytes arrive."""
    scan = TextScan(path, lone_cr_ok=True)
    parts: List[bytes] = []
    size = 0
    try:
        with _open_binary(path) as fh:
            for chunk in iter(lambda: fh.read(_CHUNK), b""):
                scan.feed(chunk)
                size += len(chunk)
                if size > MAX_LIST_BYTES or scan.line - 1 > MAX_LIST_IDS:  # lines ended so far
                    raise InputError(
                        f"{what} holds more than {MAX_LIST_IDS:,} lines or {MAX_LIST_BYTES >> 20:,} MiB (the limit)",
                        path=str(path), line=min(scan.line, MAX_LIST_IDS + 1),
                        hint="split the list into smaller ones, or leave it out to take every id of the model")
                parts.append(chunk)
    except (EOFError, OSError, zlib.error) as exc:
        raise InputError(f"cannot read the file ({exc})", path=str(path),
                         hint="the file is truncated or corrupt; re-create or re-download it") from None
    scan.finish()
    return b"".join(parts)


def decode_input(data: bytes) -> Tuple[str, str]:
    """``(text, encoding)`` of an input's bytes by the rules of :func:`detect_encoding`:
    UTF-8 (a leading byte-order mark dropped), else Latin-1."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1"), "latin-1"
    if text.startswith("\ufeff"):
        return text[1:], "utf-8-sig"
    return text, "utf-8"


@contextlib.contextmanager
def as_regular_file(path: PathLike, what: str = "input file") -> Iterator[Path]:
    """``path`` itself when it is a regular file; a pipe or FIFO is copied once into a
    temporary file, so that readers which pass over a file several times (encoding, header
    sniffing, parsing) see it whole every time.

    The copy is checked by :class:`TextScan` as the bytes arrive (a pipe with no line
    breaks stops after :data:`MAX_LINE_BYTES`), stops before the temporary folder's free
    space drops below :data:`SPOOL_RESERVE_BYTES`, keeps the ``.gz`` suffix and is removed
    on every way out (errors, Ctrl-C, a signal turned into an exception); a copy left by a
    killed run is removed by the next one. Errors that name the copy are renamed to ``path``.
    Anything else (a device, a directory) is refused by :func:`is_pipe`.
    """
    path = input_path(path)
    if not is_pipe(path, what):
        yield path
        return
    folder = tempfile.gettempdir()
    remove_stale_temps(folder, prefix=SPOOL_PREFIX)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f"{SPOOL_PREFIX}{owner_tag()}", suffix=path.suffix, dir=folder)
        _spool(path, fd, folder)
        try:
            yield Path(tmp)
        except InputError as exc:
            if str(tmp) not in str(exc):
                raise
            name = str(path)
            raise InputError(exc.message.replace(tmp, name), path=name if exc.path == tmp else exc.path,
                             line=exc.line, hint=exc.hint and exc.hint.replace(tmp, name)) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def _spool(path: Path, fd: int, folder: str) -> None:
    """Copy the pipe ``path`` into the open temporary file ``fd``, checking as bytes arrive."""
    # a .gz pipe is copied as it is (its text is checked when read); others are checked now
    scan = None if path.suffix == ".gz" else TextScan(path)
    try:
        with os.fdopen(fd, "wb") as out, open(path, "rb") as src:
            for n, chunk in enumerate(iter(lambda: src.read(_CHUNK), b"")):
                if scan is not None:
                    scan.feed(chunk)
                if n % 16 == 15 and _free_bytes(folder) < SPOOL_RESERVE_BYTES + len(chunk):
                    raise InputError(
                        f"the input is larger than the free space of the temporary folder {folder} "
                        f"(a pipe is copied there to be read; {SPOOL_RESERVE_BYTES >> 20} MiB are left free)",
                        path=str(path), hint="write it to a file first, or set TMPDIR to a folder with more room")
                out.write(chunk)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
            raise InputError(f"the temporary folder {folder} is full (a pipe is copied there to be read)",
                             path=str(path),
                             hint="write it to a file first, or set TMPDIR to a folder with more room") from None
        raise InputError(f"cannot read the file ({exc.strerror or exc})", path=str(path)) from None
    if scan is not None:
        scan.finish()


def _free_bytes(folder: str) -> int:
    try:
        st = os.statvfs(folder)
    except (OSError, AttributeError):  # no statvfs (Windows): ENOSPC still stops the copy
        return 1 << 62
    return st.f_bavail * st.f_frsize


class _GzipInput(gzip.GzipFile):
    """A ``.gz`` input whose damage is an :class:`InputError` naming it, not a bare ``EOFError``."""

    def _checked(self, read: Callable[[int], bytes], size: int) -> bytes:
        try:
            return read(size)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise InputError(f"truncated or corrupt gzip file ({exc})", path=str(self.name),
                             hint="check it with `gzip -t`, then re-create or download it again") from exc

    def read(self, size: int = -1) -> bytes:
        return self._checked(super().read, size)

    def read1(self, size: int = -1) -> bytes:
        return self._checked(super().read1, size)


def _open_binary(path: Path) -> IO[bytes]:
    return _GzipInput(path, "rb") if path.suffix == ".gz" else open(path, "rb")


#: A carriage return that does not end a line (old Mac line ends, or a CR inside an id).
_LONE_CR = re.compile(rb"\r(?!\n)")

#: What the first bytes of a file that is not text give away: (prefix, what it is, hint).
_MAGIC = (
    (codecs.BOM_UTF32_LE, "UTF-32", "save it as UTF-8"),
    (codecs.BOM_UTF32_BE, "UTF-32", "save it as UTF-8"),
    (codecs.BOM_UTF16_LE, "UTF-16", "save it as UTF-8"),
    (codecs.BOM_UTF16_BE, "UTF-16", "save it as UTF-8"),
    (b"\x1f\x8b", "gzip-compressed, but its name does not end in .gz", "name it *.gz, or decompress it"),
    (b"PK\x03\x04", "a zip archive (an .xlsx workbook?)", "export the sheet as CSV (UTF-8), or unzip it"),
)

_TO_UTF8 = "e.g. `iconv -f UTF-16 -t UTF-8 in.csv > out.csv`, or 'CSV UTF-8' in a spreadsheet's Save As"


class TextScan:
    """The checks every text input passes, fed its bytes as they arrive, and its encoding.

    Refuses, in one line naming the file and line: UTF-16 or UTF-32 text (with or without
    a byte-order mark), a gzip or zip file under another name, a NUL byte (no text file
    holds one), a line longer than :data:`MAX_LINE_BYTES`, and (unless ``lone_cr_ok``) a
    carriage return that does not end a line: ids are bytes, a CR cannot be part of one
    (no TSV output could hold it), and a file with old Mac line ends would otherwise be read
    as one line or with shifted columns. Lines are counted at ``\\n``, as editors count them.

    Parameters
    ----------
    path : path
        Named in messages.
    lone_cr_ok : bool
        Take a lone CR as a line end (id lists, which cut lines themselves) instead of
        refusing it.
    """

    def __init__(self, path: PathLike, lone_cr_ok: bool = False) -> None:
        self.path, self.lone_cr_ok = str(path), lone_cr_ok
        self.line = 1  # the line the next byte is on
        self._run = 0  # bytes of that line seen so far
        self._first, self._cr_pending, self._bom = True, False, False
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._utf8 = True

    def _refuse(self, message: str, line: Optional[int], hint: str) -> None:
        raise InputError(message, path=self.path, line=line, hint=hint)

    def _line_at(self, chunk: bytes, pos: int) -> int:
        return self.line + chunk.count(b"\n", 0, pos)

    def feed(self, chunk: bytes) -> None:
        """Check the next bytes of the input (any size, in order)."""
        if not chunk:
            return
        if self._first:
            self._first = False
            self._check_head(chunk)
        nul = chunk.find(b"\x00")
        if nul >= 0:
            self._refuse("line holds a NUL byte, which no text file has", self._line_at(chunk, nul),
                         "is it a binary file (a spreadsheet, Parquet, a model)? give the text export")
        if not self.lone_cr_ok:
            self._check_cr(chunk)
        self._check_lines(chunk)
        if self._utf8 and not (chunk.isascii() and not self._decoder.getstate()[0]):
            # ASCII is UTF-8: the decoder (10x slower) only runs on other bytes or a cut sequence
            try:
                self._decoder.decode(chunk)
            except UnicodeDecodeError:
                self._utf8 = False

    def finish(self) -> str:
        """The encoding, once every byte was fed: ``"utf-8"``, ``"utf-8-sig"`` or ``"latin-1"``."""
        if self._cr_pending:
            self._lone_cr(self.line)
        if self._utf8:
            try:
                self._decoder.decode(b"", final=True)
            except UnicodeDecodeError:
                self._utf8 = False
        if not self._utf8:
            return "latin-1"
        return "utf-8-sig" if self._bom else "utf-8"

    def _check_head(self, head: bytes) -> None:
        for magic, what, hint in _MAGIC:
            if head.startswith(magic):
                self._refuse(f"file is {what}", None, hint + ("; " + _TO_UTF8 if "UTF" in what else ""))
        self._bom = head.startswith(codecs.BOM_UTF8)
        sample = head[:4096]
        # UTF-16 without a byte-order mark: ASCII characters give a NUL every other byte
        even, odd = sample[0::2].count(0), sample[1::2].count(0)
        if len(sample) >= 4 and max(even, odd) > len(sample) // 4 and min(even, odd) <= len(sample) // 40:
            self._refuse("file is UTF-16 (every other byte is NUL)", None, "save it as UTF-8; " + _TO_UTF8)

    def _lone_cr(self, line: int) -> None:
        self._refuse("line holds a carriage return (CR, \\r) that is not part of a CRLF line end", line,
                     "old Mac line ends? convert them: tr '\\r' '\\n' < in > out; otherwise remove the CR "
                     "from the id: ids cannot hold line breaks")

    def _check_cr(self, chunk: bytes) -> None:
        if self._cr_pending and not chunk.startswith(b"\n"):
            self._lone_cr(self.line)
        self._cr_pending = False
        crs = chunk.count(b"\r")
        if crs and crs != chunk.count(b"\r\n"):
            m = _LONE_CR.search(chunk)
            if m.start() == len(chunk) - 1:  # a CR cut from its LF by the chunk's end
                self._cr_pending = True
            else:
                self._lone_cr(self._line_at(chunk, m.start()))

    def _check_lines(self, chunk: bytes) -> None:
        limit, n = MAX_LINE_BYTES, len(chunk)
        first = chunk.find(b"\n")
        if first < 0:
            if self._run + n > limit:
                self._too_long(self.line)
            self._run += n
            return
        if self._run + first > limit:
            self._too_long(self.line)
        start = first + 1
        while n - start > limit:  # the next line break must come within `limit` bytes
            last = chunk.rfind(b"\n", start, start + limit + 1)
            if last < 0:
                self._too_long(self._line_at(chunk, start))
            start = last + 1
        self._run = n - 1 - chunk.rfind(b"\n")  # the tail after the last line break
        self.line += chunk.count(b"\n")

    def _too_long(self, line: int) -> None:
        self._refuse(f"line is longer than {MAX_LINE_BYTES:,} bytes (the limit)", line,
                     "is this the right file, with one record per line? a binary file or a file "
                     "without line breaks cannot be read")


def detect_encoding(path: PathLike) -> str:
    """``"utf-8"``, ``"utf-8-sig"`` (UTF-8 starting with a byte-order mark) or ``"latin-1"``,
    after the checks of :class:`TextScan` (which refuses what is not text of short lines).

    The whole file is checked (a stray byte may sit on the last line); only a file that is
    not valid UTF-8 is read as Latin-1, where every byte is one character, so every byte
    sequence reads and writing the text back as Latin-1 gives the same bytes.
    """
    p = Path(path)
    scan = TextScan(p)
    try:
        with _open_binary(p) as fh:
            for chunk in iter(lambda: fh.read(_CHUNK), b""):
                scan.feed(chunk)
    except (EOFError, OSError, zlib.error) as exc:
        raise InputError(f"cannot read the file ({exc})", path=str(p),
                         hint="the file is truncated or corrupt; re-create or re-download it") from None
    return scan.finish()


def output_encoding(encoding: Optional[str]) -> str:
    """The encoding outputs of an input read as ``encoding`` are written in.

    UTF-8 input gives UTF-8 output (without a byte-order mark); a Latin-1 input gives
    Latin-1 output, so every id comes back as the same bytes it went in as.
    """
    return "latin-1" if encoding == "latin-1" else "utf-8"


def open_text(path: Path, encoding: Optional[str] = None) -> IO[str]:
    """The file's text (``.gz`` uncompressed) in ``encoding``, by default the detected one;
    line ends are left as they are."""
    encoding = encoding or detect_encoding(path)
    return io.TextIOWrapper(_open_binary(path), encoding=encoding, newline="")
