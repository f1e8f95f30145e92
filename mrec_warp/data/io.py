"""Reading ratings files and writing outputs atomically.

Every reader error is an :class:`~mrec_warp.errors.InputError` naming the file and line.
Every writer goes through :func:`atomic_write`, so a crash or a bad input never leaves a
half-written file behind.
"""
from __future__ import annotations

import codecs
import contextlib
import csv
import gzip
import io
import os
import re
import tempfile
import zlib
from pathlib import Path
from typing import IO, Callable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from ..errors import InputError

PathLike = Union[str, os.PathLike]


def _umask_mode() -> int:
    """The mode a plain ``open()`` would give a new file (0666 less the umask).

    ``mkstemp`` creates private (0600) files; outputs should be as readable as any other.
    """
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


_FILE_MODE = _umask_mode()  # read once: changing the umask is not thread-safe

#: Column names of the canonical interactions table.
CANONICAL_COLUMNS = ("user", "item", "value", "timestamp")
FORMATS = ("auto", "tsv", "csv", "movielens")


# -- temporary names that say who owns them --------------------------------------------------
# A temporary file is named ``.<stem>.~<pid>@<host>~<random><suffix>`` beside its target, so
# that a later run writing the same target can tell a leftover of a killed run (its process
# is gone) from the file of a run still going, and remove only the former.
_TEMP_OWNER = re.compile(r"~(\d+)@([A-Za-z0-9_-]*)~")


def host_name() -> str:
    """This machine's short host name, reduced to characters safe in a file name."""
    import socket

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


def remove_stale_temps(folder: PathLike, prefix: str = ".") -> List[str]:
    """Remove the temporary files and folders in ``folder`` whose names start with ``prefix``
    and whose owner process (see :func:`owner_tag`) is dead on this machine.

    Returns the names removed. Names without an owner tag -- the user's own files -- and
    temporaries of live processes or of other machines are left alone.
    """
    import shutil

    removed = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        if not name.startswith(prefix):
            continue
        m = _TEMP_OWNER.search(name[len(prefix):])
        if m is None or process_alive(int(m.group(1)), m.group(2)):
            continue
        full = os.path.join(folder, name)
        with contextlib.suppress(OSError):
            if os.path.isdir(full) and not os.path.islink(full):
                shutil.rmtree(full)
            else:
                os.unlink(full)
            removed.append(name)
    return removed


@contextlib.contextmanager
def atomic_path(path: PathLike) -> Iterator[str]:
    """A temporary file name beside ``path``, renamed over ``path`` only on success.

    For writers that want a file name (numpy, pyarrow, matplotlib); the temporary name keeps
    the final suffix so libraries that pick a format from it work. The data is synced to disk
    before the rename, so a crash never leaves a renamed but incomplete file. On any exception
    the temporary file is removed and ``path`` is left as it was. The temporary name carries
    this process's id (:func:`owner_tag`): temporaries of ``path`` left by a killed run are
    removed here, those of a live run are not.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path.parent, prefix=f".{path.stem}.")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.{owner_tag()}", suffix=path.suffix, dir=str(path.parent))
    os.close(fd)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, _FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_write(path: PathLike, mode: str = "w", encoding: Optional[str] = "utf-8") -> Iterator[IO]:
    """:func:`atomic_path` for writers that want an open file."""
    binary = "b" in mode
    with atomic_path(path) as tmp, open(tmp, mode, encoding=None if binary else encoding,
                                        newline=None if binary else "") as fh:
        yield fh


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


# -- reading ---------------------------------------------------------------------------------
#: Header names that give a header away even when every column holds text ids; compared
#: lower-cased without ``-``, ``_``, spaces and dots (``user-id`` is ``userid``).
_HEADER_WORDS = frozenset(
    "user userid uid customer customerid clientid playerid memberid accountid visitorid "
    "item itemid iid movie movieid product productid gameid gametitle songid trackid artistid bookid "
    "isbn articleid "
    "rating ratings value score weight count counts hours playtime plays playcount quantity qty clicks "
    "timestamp ts time date datetime".split()
)
_NOT_ALNUM = re.compile(r"[-_ .]")
#: A number as a ratings file writes one (``nan`` / ``inf`` are words here, not numbers).
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
#: The start of an ISO date, as a timestamp column may hold.
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")

_WHITESPACE = r"\s+"

#: Largest magnitude of a rating / value: beyond it sums and float32 casts lose the number.
MAX_ABS_VALUE = 1e15
#: Largest magnitude of a timestamp: integers above 2**53 are not exact as float64.
MAX_ABS_TIMESTAMP = 2 ** 53


_BAD_ID_CHARS = re.compile(r"[\t\r\n]")


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


def _open_text(path: Path, encoding: Optional[str] = None) -> IO[str]:
    encoding = encoding or detect_encoding(path)
    return io.TextIOWrapper(_open_binary(path), encoding=encoding, newline="")


def _is_blank(line: str, sep: str) -> bool:
    """Whether pandas' C parser skips ``line`` as blank.

    It skips lines made only of spaces and tabs, except that a line holding the delimiter
    itself (a tab in a TSV) is a row of empty fields. Only used to map rows to line numbers.
    """
    body = line.rstrip("\r\n")
    if sep == _WHITESPACE:
        return body.strip() == ""
    return body.strip(" \t".replace(sep, "")) == ""


class _LineTap:
    """Iterates over a text file's lines and remembers the ones taken since the last ``take()``."""

    def __init__(self, fh: IO[str]) -> None:
        self._fh, self._taken = fh, []

    def __iter__(self) -> "_LineTap":
        return self

    def __next__(self) -> str:
        line = next(self._fh)
        self._taken.append(line)
        return line

    def take(self) -> List[str]:
        taken, self._taken = self._taken, []
        return taken


def _data_lines(path: Path, sep: str, skip: int = 0, limit: Optional[int] = None,
                encoding: Optional[str] = None) -> Iterator[Tuple[int, str]]:
    """Yield ``(1-based line number, text)`` of the records after the first ``skip`` lines.

    Blank lines are left out. In a comma-separated file a record is a whole CSV row (a
    quoted field may span lines) and its number is that of its first line.
    """
    with _open_text(path, encoding) as fh:
        for _ in range(skip):
            if not fh.readline():
                return
        if sep == ",":
            tap, lineno = _LineTap(fh), skip + 1
            for _row in csv.reader(tap, strict=False):
                taken = tap.take()
                start, lineno = lineno, lineno + len(taken)
                text = "".join(taken)
                if _is_blank(text, sep):
                    continue
                yield start, text.rstrip("\r\n")
                if limit is not None:
                    limit -= 1
                    if limit <= 0:
                        return
            return
        for lineno, line in enumerate(fh, start=skip + 1):
            if _is_blank(line, sep):
                continue
            yield lineno, line.rstrip("\r\n")
            if limit is not None:
                limit -= 1
                if limit <= 0:
                    return


def _first_lines(path: Path, n: int = 2, encoding: Optional[str] = None) -> List[Tuple[int, str]]:
    """The first ``n`` non-blank records, or an error for a file with none."""
    lines = list(_data_lines(path, _WHITESPACE, limit=n, encoding=encoding))
    if not lines:
        raise InputError("file has no data lines", path=str(path), hint="expected one interaction per line")
    return lines


def _data_line(path: Path, row: int, sep: str, skip: int, encoding: Optional[str] = None) -> Tuple[int, str]:
    """Line number and text of the ``row``-th (0-based) data row the parser saw."""
    for i, (lineno, text) in enumerate(_data_lines(path, sep, skip, encoding=encoding)):
        if i == row:
            return lineno, text
    return -1, ""  # pragma: no cover - rows always come from the file


def detect_separator(line: str) -> str:
    """Guess the delimiter of a ratings line: ``::``, tab, comma, then whitespace."""
    if "::" in line:
        return "::"
    if "\t" in line:
        return "\t"
    if "," in line:
        return ","
    return _WHITESPACE


#: Delimiters suggested when the one in use leaves a line in one piece, in order of preference.
_SEPARATORS = ((",", "','"), ("\t", "'\\t'"), (";", "';'"), ("|", "'|'"), (_WHITESPACE, "'\\s+'"))


def _too_few_columns(text: str, lineno: int, sep: str, path: Path) -> InputError:
    """The error for a line that ``sep`` does not split, suggesting a delimiter that does.

    The one in use is never suggested; neither is one that leaves the line in one piece.
    """
    fits = [shown for cand, shown in _SEPARATORS if cand != sep and len(_split_fields(text, cand)) >= 2]
    shown = dict(_SEPARATORS).get(sep, repr(sep))
    hint = (f"the delimiter is {shown}, which this line does not hold; try `sep={fits[0]}`" if fits else
            "put a delimiter (tab, comma, ...) between user and item, and give it with `sep`")
    return InputError(f"expected at least 2 columns (user, item), found 1: {text[:60]!r}",
                      path=str(path), line=lineno, hint=hint)


def _split_fields(line: str, sep: str) -> List[str]:
    """The fields of one record exactly as the table parser sees them (ids are not stripped).

    Commas follow RFC 4180 (a quoted field may hold commas, line breaks and doubled quotes);
    every other separator takes quotes as ordinary characters.
    """
    if sep == _WHITESPACE:
        return line.split()
    if sep == ",":
        return next(csv.reader([line], doublequote=True, strict=False), [""])
    return line.split(sep)


def _looks_numeric(token: str) -> bool:
    try:
        float(token)
        return True
    except ValueError:
        return False


def _is_data_value(token: str) -> bool:
    """Whether a field is a number or a date, which no column name is."""
    t = token.strip()
    return bool(_NUMBER.fullmatch(t) or _ISO_DATE.match(t))


def _guess_header(first: List[str], second: Optional[List[str]]) -> Tuple[bool, str]:
    """Whether the first line names the columns rather than holding an interaction, and why.

    A line with any field that is a number or a date is data: column names are words, and
    a data line taken as a header would be lost and shift ``--columns`` names onto its
    values. Otherwise the line is a header when a field is a well-known column name (user,
    item, rating, timestamp, ...; ``user-id`` and ``userId`` too) or when a column holds
    text on the first line and a number on the second. A text-only line with neither is
    read as data: losing a line silently is worse than a clear error on a header's text.
    """
    first = [t.strip() for t in first]
    numbers = [i for i, t in enumerate(first) if _is_data_value(t)]
    if numbers:
        return False, f"column #{numbers[0] + 1} holds {first[numbers[0]]!r}, a number"
    words = [t for t in first if _NOT_ALNUM.sub("", t.lower()) in _HEADER_WORDS]
    if words:
        return True, f"{words[0]!r} is a column name and no field is a number"
    for i, (a, b) in enumerate(zip(first, second or [])):
        if a and _is_data_value(b):
            return True, f"column #{i + 1} holds the word {a!r} above the number {b.strip()!r}"
    return False, "no field is a number, but no column name was recognised either"


def _normalise_columns(columns: Optional[Union[str, Sequence]]) -> Optional[List[str]]:
    if columns is None:
        return None
    if isinstance(columns, str):
        columns = columns.split(",")
    out = [str(c).strip() for c in columns]
    return [c for c in out if c] or None


_ROLES = ("user", "item", "value", "timestamp")


def _resolve_columns(
    columns: Optional[List[str]], header_names: Optional[List[str]], n_fields: int, path: Path
) -> List[int]:
    """Map the user's column choice (names or 0-based positions) onto field positions.

    A whole number is always a position, never a header name (a header column named ``3``
    is chosen by its position).

    Without a choice the first 2-4 fields are user, item[, value[, timestamp]]; with a
    header, a column without a name ends that list (a trailing separator is not a column).
    """
    if columns is None:
        used = list(range(min(4, n_fields)))
        if header_names is not None:
            named = [i for i in used if header_names[i].strip()]
            used = used[:next((k for k, i in enumerate(used) if i not in named), len(used))]
            if len(used) < 2:
                raise InputError("the header has no name for the user or item column", path=str(path), line=1,
                                 hint="name the columns in the header or choose them with `columns=0,1`")
        return used
    if not 2 <= len(columns) <= 4:
        raise InputError(
            f"`columns` takes 2 to 4 columns (user,item[,rating[,timestamp]]), got {len(columns)}",
            path=str(path), hint="e.g. `columns=userId,movieId,rating,timestamp`",
        )
    stripped = [h.strip() for h in header_names] if header_names is not None else None
    chosen = []
    for c in columns:
        if c.isdigit():  # always a position: a header named "0" would otherwise shadow column 0
            pos = int(c)
            if pos >= n_fields:
                raise InputError(
                    f"column {pos} is out of range: lines have {n_fields} columns (positions 0-{n_fields - 1})",
                    path=str(path), hint="positions are 0-based",
                )
        elif stripped is not None and c in stripped:
            pos = stripped.index(c)
        else:
            known = ", ".join(header_names) if header_names else "none (file has no header)"
            raise InputError(
                f"column {c!r} not found; header columns: {known}", path=str(path),
                hint="name header columns or give 0-based positions, e.g. `columns=0,1,2`",
            )
        if pos in chosen:
            raise InputError(f"column {c!r} is chosen twice", path=str(path), hint="give each column once")
        chosen.append(pos)
    return chosen


class _ReplacingReader:
    """A read-only text stream that replaces ``old`` by ``new`` on the fly.

    Lets pandas' fast C parser read ``::``-separated MovieLens files (it only takes
    one-character delimiters) without holding the whole file in memory.
    """

    def __init__(self, fh: IO[str], old: str, new: str) -> None:
        self._fh, self._old, self._new = fh, old, new

    def read(self, size: int = -1) -> str:
        # Whole lines only, so a separator is never cut in two between reads.
        lines = self._fh.readlines(size if size and size > 0 else -1)
        return "".join(lines).replace(self._old, self._new)

    def __iter__(self):  # pandas checks for a file-like object with read() and __iter__
        return self


def _parse_table(path: Path, sep: str, skip: int, n_fields: int, numeric: Sequence[int] = (),
                 encoding: Optional[str] = None) -> pd.DataFrame:
    """The fields of every data row, one column per field position.

    Fields at the ``numeric`` positions are parsed as float64 (a ``ValueError`` when one is
    not a number, which the caller answers by re-reading as strings to find the line); all
    others are strings, exactly as in the file. A line with more fields than ``n_fields`` is
    an error, except the first one read, which pandas silently cuts short: the caller checks
    that one itself. A shorter line has its missing fields empty.
    """
    encoding = encoding or detect_encoding(path)
    text_sep, fh = sep, None
    source: Union[Path, _ReplacingReader] = path
    if sep == "::":
        fh = _open_text(path, encoding)
        source, text_sep = _ReplacingReader(fh, "::", "\t"), "\t"
    # No usecols: with it pandas silently drops extra fields, and a line with an unquoted
    # separator in an id must be reported, not read with its columns shifted.
    names = list(range(n_fields))
    try:
        return pd.read_csv(
            source, sep=text_sep, header=None, skiprows=skip, names=names,
            dtype={i: (np.float64 if i in numeric else str) for i in names},
            encoding=encoding, engine="c", index_col=False,
            skip_blank_lines=True, keep_default_na=False, na_values=[],
            # RFC 4180 quoting for commas only: in a TSV a quote is part of the id
            quoting=csv.QUOTE_NONE if text_sep != "," else csv.QUOTE_MINIMAL, doublequote=True,
        )
    except pd.errors.ParserError as exc:
        m = re.search(r"line (\d+), saw (\d+)", str(exc))
        if not m:
            raise InputError(f"cannot parse: {exc}", path=str(path),
                             hint="check `sep` / `format`" + (" and that quotes are balanced" if sep == "," else "")) from None
        raise InputError(
            f"expected {n_fields} columns like the first line, found {m.group(2)}",
            path=str(path), line=int(m.group(1)), hint=_columns_hint(sep),
        ) from None
    except (EOFError, OSError, zlib.error) as exc:
        raise InputError(f"cannot read the file ({exc})", path=str(path),
                         hint="the file is truncated or corrupt; re-create or re-download it") from None
    finally:
        if fh is not None:
            fh.close()


def _columns_hint(sep: str) -> str:
    if sep == ",":
        return 'every line needs the same columns; quote a field that holds a comma ("a, b")'
    return "every line needs the same columns; check `sep`"


def _check_fields(raw: pd.DataFrame, used: List[int], n_fields: int, path: Path, sep: str, skip: int,
                  encoding: str, roles: Sequence[str] = _ROLES, id_roles: Sequence[str] = ("user", "item"),
                  hint: Optional[str] = None) -> None:
    """Reject an empty user / item / value / timestamp (or a line too short to have one).

    Only the columns in use are checked: an unused column may be empty or missing. Ids are
    left exactly as they are, spaces included; an id holding a tab or a line break (possible
    only inside a quoted CSV field) is refused, since no TSV output could hold it. ``roles``
    names the used columns in messages and ``id_roles`` the ones holding ids (feature files
    pass ``("id", "feature", "weight")``); ``hint`` replaces the column-count hint.
    """
    for role, pos in zip(roles, used):
        if raw[pos].dtype == np.float64:  # numbers, checked finite by _read_fast
            continue
        col = raw[pos]
        empty = (col.str.strip() == "").to_numpy()  # checked stripped, kept as they are
        if empty.any():
            row = int(np.flatnonzero(empty)[0])
            lineno, text = _data_line(path, row, sep, skip, encoding)
            found = len(_split_fields(text, sep))
            if found <= pos:
                raise InputError(f"expected {n_fields} columns like the first line, found {found}", path=str(path),
                                 line=lineno, hint=hint or _columns_hint(sep))
            raise InputError(f"column {pos} ({role}) is empty" + (" (only spaces)" if col.iloc[row] else ""),
                             path=str(path), line=lineno,
                             hint=f"fill in the {role} or remove the line")
        if role in id_roles and sep == ",":
            bad = col.str.contains(_BAD_ID_CHARS.pattern, regex=True).to_numpy()
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                raise InputError(
                    f"{role if role == 'feature' else role + ' id'} {col.iloc[row]!r} holds a tab or line break, "
                    "which TSV outputs cannot hold",
                    path=str(path), line=_data_line(path, row, sep, skip, encoding)[0],
                    hint="remove tabs and line breaks from ids",
                )


def _refuse_row(kind: str, text: str, why: str, row: int, path: Path, sep: str, skip: int,
                encoding: str, hint: str) -> None:
    raise InputError(f"{kind} {text!r} {why}", path=str(path),
                     line=_data_line(path, row, sep, skip, encoding)[0], hint=hint)


def _parse_values(values: pd.Series, path: Path, sep: str, skip: int, encoding: str) -> np.ndarray:
    hint = "the rating column must be numeric; use `columns` to choose columns"
    if values.dtype == np.float64:  # already parsed and checked finite by _read_fast
        parsed, text = values.to_numpy(), values
    else:
        text = values.str.strip()
        parsed = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        bad = ~np.isfinite(parsed)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            _refuse_row("rating", values.iloc[row], "is not a finite number", row, path, sep, skip, encoding, hint)
    big = np.abs(parsed) > MAX_ABS_VALUE
    if big.any():
        row = int(np.flatnonzero(big)[0])
        _refuse_row("rating", str(text.iloc[row]), f"is too large (the limit is {MAX_ABS_VALUE:g})", row, path,
                    sep, skip, encoding, "scale the values down, e.g. hours instead of milliseconds")
    return parsed


def _parse_timestamps(stamps: pd.Series, path: Path, sep: str, skip: int, encoding: str) -> np.ndarray:
    """Unix seconds, or dates (ISO 8601) converted to Unix seconds."""
    if stamps.dtype == np.float64:  # already parsed and checked finite by _read_fast
        numeric = stamps.to_numpy()
        is_number = np.ones(len(numeric), dtype=bool)
    else:
        text = stamps.str.strip()
        numeric = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        is_number = np.isfinite(numeric)
    big = is_number & (np.abs(np.where(is_number, numeric, 0)) >= MAX_ABS_TIMESTAMP)
    if big.any():
        row = int(np.flatnonzero(big)[0])
        _refuse_row("timestamp", str(stamps.iloc[row]), "is too large for a time in seconds", row, path, sep,
                    skip, encoding, "use Unix seconds or ISO dates (2024-01-31T12:00:00)")
    if is_number.all():
        return numeric.astype(np.int64)
    try:
        parsed = pd.to_datetime(text, errors="coerce", utc=True, format="ISO8601")
    except (TypeError, ValueError):  # pandas < 2 has no format="ISO8601"
        parsed = pd.to_datetime(text, errors="coerce", utc=True)
    bad = parsed.isna().to_numpy() & ~is_number
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        _refuse_row("timestamp", stamps.iloc[row], "is neither a number nor a date", row, path, sep, skip,
                    encoding, "use Unix seconds or ISO dates (2024-01-31T12:00:00) in the timestamp column")
    seconds = ((parsed - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(seconds=1)).to_numpy(dtype=np.float64, na_value=0)
    return np.where(is_number, numeric, seconds).astype(np.int64)


def read_ratings(
    path: PathLike,
    format: str = "auto",
    sep: Optional[str] = None,
    header: Optional[bool] = None,
    columns: Optional[Sequence] = None,
) -> pd.DataFrame:
    """Read a delimited ratings file into the canonical table.

    Blank lines are skipped. Any problem (a line with more fields than the first, a missing
    or empty id, a rating that is not a finite number or is too large, a bad timestamp)
    raises :class:`~mrec_warp.errors.InputError` naming the file and line.

    Parameters
    ----------
    path : path-like
        Text file (a pipe or FIFO is read once into a temporary file), optionally
        gzip-compressed (``.gz``), in UTF-8 (a byte-order mark is
        dropped) or, when it is not valid UTF-8, Latin-1. The encoding used is in
        ``result.attrs["encoding"]``.
    format : {"auto", "tsv", "csv", "movielens"}
        ``tsv`` and ``csv`` fix the delimiter; ``movielens`` reads 100k ``u.data`` (tab) and
        1M/10M ``ratings.dat`` (``::``) with no header; ``auto`` sniffs the first line:
        ``::``, then tab, then comma, then runs of whitespace. Comma-separated files follow
        RFC 4180 (``"Warhammer 40,000"``, ``"The ""Quoted"" Game"``); with any other
        delimiter quotes are ordinary characters of the id.
    sep : str, optional
        Explicit delimiter (overrides ``format``); ``"\\s+"`` means any run of whitespace.
    header : bool, optional
        Whether the first line names the columns; ``None`` guesses: a line with any field
        that is a number or a date is data; otherwise it is a header when a field is a known
        column name (user, item, rating, timestamp, ``user-id``, ``userId``, ...), a column
        holds a word there and a number on the next line, or it holds every name given in
        ``columns``. A text-only line with none of these is data. The choice and its reason
        are in ``result.attrs["reading"]``. Naming columns in ``columns`` needs a header.
    columns : sequence of str or int, or comma-separated str, optional
        Which fields are user, item[, value[, timestamp]], by header name or 0-based
        position, e.g. ``"userId,movieId,rating,timestamp"`` or ``[0, 1, 2]``. A whole number
        is always a position, never a header name (a column named ``3`` is chosen by its
        position). By default the first four fields, in that order (with a header, up to the
        first unnamed column; without one, a last column empty on every line is dropped).
        Only these columns must be present and non-empty; others may be empty or missing.

    Returns
    -------
    pandas.DataFrame
        Columns ``user`` and ``item`` (str, exactly as in the file: spaces are kept) and,
        when present, ``value`` (float64) and ``timestamp`` (int64 Unix seconds), one row per
        data line. ``attrs["reading"]`` says what was found: the delimiter, whether line 1
        is a header (guessed or given, and why), each role's 0-based ``position`` and header
        ``name``, and the ``ignored_columns`` (an unnamed or all-empty trailing column).
    """
    if format not in FORMATS:
        raise InputError(f"unknown format {format!r}", path=str(path), hint=f"use one of {', '.join(FORMATS)}")
    p = Path(path)
    if p.exists() and not p.is_file() and not p.is_dir():  # a pipe (<(...), /dev/stdin): read it once
        with as_regular_file(p) as copy:
            return read_ratings(copy, format=format, sep=sep, header=header, columns=columns)
    p = check_readable(path)
    encoding = detect_encoding(p)
    lines = _first_lines(p, encoding=encoding)
    first_lineno, first = lines[0]
    if sep is None:
        sep = {"tsv": "\t", "csv": ","}.get(format) or detect_separator(first)
    if sep in ("\\t", "tab"):  # what people type on a command line
        sep = "\t"
    if sep == "":
        raise InputError("`sep` is empty", path=str(p), hint=r"give a delimiter, e.g. `sep=','` or `sep='\t'`")
    if sep == ",":  # a quoted field may hold a line break: take whole CSV records
        lines = list(_data_lines(p, sep, limit=2, encoding=encoding))
        first_lineno, first = lines[0]
    chosen = _normalise_columns(columns)
    if format == "movielens":
        header = False
    tokens = _split_fields(first, sep)
    if len(tokens) < 2:
        raise _too_few_columns(first, first_lineno, sep, p)
    named = [c for c in chosen or () if not c.isdigit()]
    guessed = header is None
    why = ("MovieLens files have none" if format == "movielens" else
           "set by --header" if header else "set by --no-header")
    if header is None:
        second = _split_fields(lines[1][1], sep) if len(lines) > 1 else None
        header, why = _guess_header(tokens, second)
        if named and not header and set(named) <= {t.strip() for t in tokens}:
            header, why = True, "the --columns names are on it"
        if named and not header:
            raise InputError(
                f"`columns` names columns, but the file has no header line (line {first_lineno}: {first[:60]!r}; {why})",
                path=str(p), hint="give 0-based positions, e.g. `columns=0,1,2`, or add `header`",
            )
    header_names = tokens if header else None
    n_fields = len(tokens)
    used = _resolve_columns(chosen, header_names, n_fields, p)

    # Data starts after the header line (and any blank lines before it).
    skip = first_lineno if header else 0
    if header and len(lines) > 1 and len(_split_fields(lines[1][1], sep)) > n_fields:
        # pandas would cut the first data line down to the header's width without a word
        raise InputError(f"expected {n_fields} columns like the first line, found "
                         f"{len(_split_fields(lines[1][1], sep))}", path=str(p), line=lines[1][0],
                         hint=_columns_hint(sep))
    raw = _read_fast(p, sep, skip, n_fields, used, encoding)
    if raw is None:  # some field is bad: read everything as text to say which line
        raw = _parse_table(p, sep, skip, n_fields, encoding=encoding)
    if len(raw) == 0:
        raise InputError("file has a header but no data lines", path=str(p), hint="expected one interaction per line")
    ignored = []
    if columns is None and header:
        ignored = [{"position": i, "why": "no name in the header" if i == len(used) else "after an unnamed column"}
                   for i in range(len(used), min(4, n_fields))]
    if columns is None and not header:
        # a trailing separator on every line (or an unused empty tail) is not a column
        while len(used) > 2 and raw[used[-1]].dtype != np.float64 and (raw[used[-1]] == "").all():
            ignored.insert(0, {"position": used[-1], "why": "empty on every line"})
            used = used[:-1]
    _check_fields(raw, used, n_fields, p, sep, skip, encoding)

    out = pd.DataFrame({name: raw[pos] for name, pos in zip(("user", "item"), used)})
    if len(used) > 2:
        out["value"] = _parse_values(raw[used[2]], p, sep, skip, encoding)
        # which column the value came from, for prepare's summary: its header name or "#N" (1-based)
        out.attrs["value_column"] = header_names[used[2]] if header_names else f"#{used[2] + 1}"
    if len(used) > 3:
        out["timestamp"] = _parse_timestamps(raw[used[3]], p, sep, skip, encoding)
    out.attrs["encoding"] = encoding
    out.attrs["reading"] = _reading_record(sep, header, guessed, why, first_lineno, first, header_names, used,
                                           ignored, n_fields)
    return out


def _reading_record(sep: str, header: bool, guessed: bool, why: str, lineno: int, first: str,
                    header_names: Optional[List[str]], used: List[int], ignored: List[dict],
                    n_fields: int) -> dict:
    """What the reader found and used, for ``summary.json`` and the log (plain JSON types).

    Positions are 0-based, as ``--columns`` takes them; ``name`` is the column's header
    name, or ``None`` without a header.
    """
    return {
        "sep": sep,
        "header": bool(header),
        "header_guessed": guessed,
        "header_reason": why,
        "header_line": {"line": lineno, "text": first} if header else None,
        "fields": n_fields,
        "columns": {role: {"position": pos, "name": header_names[pos] if header_names else None}
                    for role, pos in zip(_ROLES, used)},
        "ignored_columns": ignored,
    }


def _read_fast(path: Path, sep: str, skip: int, n_fields: int, used: List[int],
               encoding: str) -> Optional[pd.DataFrame]:
    """Parse ratings and timestamps as numbers straight away (4x faster than text + convert).

    Returns ``None`` when any of them is not a finite number (or a timestamp is a date, or a
    field is missing), so the caller falls back to the text path, which finds the line or
    converts the dates.
    """
    numeric = used[2:]
    if not numeric:
        return _parse_table(path, sep, skip, n_fields, encoding=encoding)
    try:
        raw = _parse_table(path, sep, skip, n_fields, numeric, encoding=encoding)
    except ValueError as exc:
        if isinstance(exc, InputError):
            raise
        return None
    for pos in numeric:
        if not np.isfinite(raw[pos].to_numpy()).all():
            return None
    return raw


# -- writing ---------------------------------------------------------------------------------

def write_interactions(df: pd.DataFrame, path: PathLike, encoding: Optional[str] = None) -> None:
    """Write the canonical table as headerless TSV (what every reader's default expects).

    Ids are written exactly as they are (no quoting). ``encoding`` defaults to the one the
    table was read in (``df.attrs["encoding"]``, see :func:`output_encoding`), so a Latin-1
    input gives Latin-1 output with the same bytes; otherwise UTF-8.
    """
    cols = [c for c in CANONICAL_COLUMNS if c in df.columns]
    frame = df[cols].copy()
    if "value" in frame:
        # integral ratings print as "4", not "4.0", so files stay byte-identical to the input's style
        v = frame["value"].to_numpy()
        if np.all(np.isfinite(v)) and np.all(v == np.round(v)) and np.all(np.abs(v) < 2 ** 62):
            frame["value"] = v.astype(np.int64)
    try:
        with atomic_path(path) as tmp:
            with open(tmp, "w", encoding=output_encoding(encoding or df.attrs.get("encoding")), newline="") as fh:
                frame.to_csv(fh, sep="\t", header=False, index=False, lineterminator="\n",
                             quoting=csv.QUOTE_NONE, escapechar=None)
            if file_holds(tmp, b"\r"):  # the csv module lets a lone "\r" through unescaped
                check_tsv_ids(df["user"], df["item"], path=path)
    except csv.Error:
        # an id with a tab or a line break (the reader refuses those; a table built in Python
        # may hold one): checked only now, as a check of every row up front costs seconds
        check_tsv_ids(df["user"], df["item"], path=path)
        raise


def file_holds(path: PathLike, needle: bytes) -> bool:
    """Whether the file's bytes contain ``needle`` (one byte; read in chunks, GB/s)."""
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            if needle in chunk:
                return True
    return False


# -- ids a TSV cannot hold --------------------------------------------------------------

def has_tsv_unsafe(ids) -> Optional[str]:
    """The first id holding a tab or a line break (which no TSV output can hold), or ``None``."""
    if isinstance(ids, np.ndarray) and ids.dtype.kind == "U":  # a model's ids: numpy is fastest
        for ch in ("\t", "\n", "\r"):
            hit = np.char.find(ids, ch) >= 0
            if hit.any():
                return str(ids[int(np.flatnonzero(hit)[0])])
        return None
    text = pd.Series(ids).astype(str)
    hit = text.str.contains(_BAD_ID_CHARS.pattern, regex=True).to_numpy(dtype=bool)
    return str(text.iloc[int(np.flatnonzero(hit)[0])]) if hit.any() else None


def check_tsv_ids(*id_arrays, path: Optional[PathLike] = None) -> None:
    """Refuse to write TSV when an id holds a tab or line break (it would not read back)."""
    for ids in id_arrays:
        bad = has_tsv_unsafe(ids)
        if bad is not None:
            raise InputError(f"id {bad!r} holds a tab or line break, which a TSV file cannot hold",
                             path=None if path is None else str(path),
                             hint="write CSV or Parquet instead (-o out.csv), or remove tabs and line breaks from ids")
