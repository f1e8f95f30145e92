"""Opening inputs: plain files, ``.gz`` files and pipes, and the encoding their text is in.

Every reader of the package opens its file through here: a missing, empty or unreadable
file, a pipe read twice or a damaged ``.gz`` is an :class:`~mrec_warp.errors.InputError`
naming the file. Text is UTF-8 (a byte-order mark dropped), else Latin-1, and outputs are
written in the encoding their input was read in (:func:`output_encoding`), so every id
keeps its bytes.
"""
from __future__ import annotations

import codecs
import contextlib
import gzip
import io
import os
import tempfile
import zlib
from pathlib import Path
from typing import IO, Callable, Iterator, Optional, Tuple

from ..errors import InputError
from ..files import PathLike


def check_readable(path: PathLike, what: str = "input file",
                   empty_hint: str = "expected one interaction per line", stream_ok: bool = False) -> Path:
    """Fail early, in one line, on a missing, unreadable or empty file.

    A pipe, FIFO or device (``<(...)``, ``/dev/stdin``) has no size to check and can be
    read only once: with ``stream_ok`` the caller reads it once and checks emptiness
    itself; without, it is refused in one line rather than read twice (the second read
    would find it empty).
    """
    p = Path(path)
    if not p.exists():
        raise InputError(f"{what} does not exist", path=str(p), hint="check the path")
    if p.is_dir():
        raise InputError(f"{what} is a directory, expected a file", path=str(p))
    if not p.is_file():
        if stream_ok:
            return p
        raise InputError(f"{what} is a pipe or device, and this file is read more than once", path=str(p),
                         hint="write it to a regular file first and give that path")
    if p.stat().st_size == 0:
        raise InputError(f"{what} is empty", path=str(p), hint=empty_hint)
    return p


def read_all_bytes(path: Path) -> bytes:
    """Every byte of ``path`` (uncompressed when it ends in ``.gz``), read once: works on a
    pipe or FIFO as on a regular file."""
    try:
        with _open_binary(path) as fh:
            return fh.read()
    except (EOFError, OSError, zlib.error) as exc:
        raise InputError(f"cannot read the file ({exc})", path=str(path),
                         hint="the file is truncated or corrupt; re-create or re-download it") from None


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
def as_regular_file(path: Path) -> Iterator[Path]:
    """``path`` itself when it is a regular file; else (a pipe, FIFO, device) a temporary
    copy of its bytes, read once, so that readers which pass over a file several times
    (encoding, header sniffing, parsing) see it whole every time. The copy keeps the
    ``.gz`` suffix and is removed on exit; errors that name it are renamed to ``path``.
    """
    if path.is_file() or not path.exists() or path.is_dir():
        yield path
        return
    fd, tmp = tempfile.mkstemp(prefix="mrec-warp-input-", suffix=path.suffix)
    try:
        try:
            with os.fdopen(fd, "wb") as out, open(path, "rb") as src:
                while True:
                    chunk = src.read(1 << 22)
                    if not chunk:
                        break
                    out.write(chunk)
        except OSError as exc:
            raise InputError(f"cannot read the file ({exc})", path=str(path)) from None
        try:
            yield Path(tmp)
        except InputError as exc:
            if str(tmp) not in str(exc):
                raise
            name = str(path)
            raise InputError(exc.message.replace(tmp, name), path=name if exc.path == tmp else exc.path,
                             line=exc.line, hint=exc.hint and exc.hint.replace(tmp, name)) from None
    finally:
        os.unlink(tmp)


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


def detect_encoding(path: PathLike) -> str:
    """``"utf-8"``, ``"utf-8-sig"`` (UTF-8 starting with a byte-order mark) or ``"latin-1"``.

    The whole file is checked (a stray byte may sit on the last line); only a file that is
    not valid UTF-8 is read as Latin-1, where every byte is one character, so every byte
    sequence reads and writing the text back as Latin-1 gives the same bytes.
    """
    p = Path(path)
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        with _open_binary(p) as fh:
            head = fh.read(1 << 22)
            bom = head.startswith(codecs.BOM_UTF8)
            chunk = head
            while chunk:
                # ASCII is UTF-8: skip the decoder (10x slower) unless it holds a cut sequence
                if not (chunk.isascii() and not decoder.getstate()[0]):
                    decoder.decode(chunk)
                chunk = fh.read(1 << 22)
            decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return "latin-1"
    except (EOFError, OSError, zlib.error) as exc:
        raise InputError(f"cannot read the file ({exc})", path=str(p),
                         hint="the file is truncated or corrupt; re-create or re-download it") from None
    return "utf-8-sig" if bom else "utf-8"


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
