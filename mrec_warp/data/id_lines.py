"""Files of one id per line, of two kinds, each with its reader.

* An **id list** names ids to look up (``recommend --users FILE``, ``similar --items-file
  FILE``, ``evaluate --items FILE``): :func:`read_id_list`. Blank lines are skipped, and
  repeats may be merged.
* **Row ids** name the rows or columns of a matrix (``OUT.users.txt`` beside a Matrix
  Market file, ``user_ids.txt`` beside a ``.npy`` of factors): line *n* is the id of row
  *n* (:func:`read_row_ids`, :func:`write_row_ids`). Nothing is skipped or merged: a blank
  line or a repeated id would shift or alias every later row, so both are refused in one
  line.

Either way an id is the whole line without its line ending, byte for byte (nothing split
off at spaces, tabs or commas, nothing stripped; only an id list given as a feature file
takes each line's first field); the file is read once (a pipe works), in UTF-8 (a
byte-order mark dropped), or Latin-1 when it is not valid UTF-8, as every reader of the
package, and :func:`write_row_ids` writes ids back as the same bytes.
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..errors import InputError
from ..files import PathLike, atomic_path
from .delimited import split_fields
from .inputs import check_readable, decode_input, output_encoding, read_list_bytes
from .npz import MAX_ID_CHARS, first_duplicate


def _id_file_lines(path: PathLike, what: str, hint: str) -> Tuple[Path, List[str], str]:
    """(the checked path, its lines without their line endings, the encoding): a file of ids
    read once (a pipe cannot be read again once the encoding is known), refused when empty."""
    p = check_readable(path, what, empty_hint=hint, stream_ok=True)
    data = read_list_bytes(p, what)
    if not data:
        raise InputError(f"{what} is empty", path=str(p), hint=hint)
    text, encoding = decode_input(data)
    with io.StringIO(text, newline="") as fh:
        # newline="" leaves "\r\n", "\n" or "\r" on each line: remove exactly that
        lines = [line[:-2] if line.endswith("\r\n") else line[:-1] if line.endswith(("\n", "\r")) else line
                 for line in fh]
    return p, lines, encoding


# -- id lists ---------------------------------------------------------------------------------
def read_id_list(path: PathLike, what: str = "user", unique: bool = False,
                 note: Optional[Callable[[str], None]] = None, first_column: bool = False) -> List[str]:
    """Ids from a file with one id per line (``--users FILE``, ``--items-file FILE``).

    The whole line is the id: nothing is split off at spaces, tabs or commas
    (``john smith`` and ``Papers, Please`` are one id each) and nothing is stripped but the
    line ending. A UTF-8 byte-order mark is dropped; a file that is not valid UTF-8 is read
    as Latin-1 (like ratings files). The file is read once, so a pipe or FIFO
    (``--users <(...)``, ``/dev/stdin``, ``-``) works; a device (``/dev/zero``) is refused
    before reading, and the limits of :func:`~mrec_warp.data.inputs.read_list_bytes` stop an
    endless pipe. Blank lines (empty or only spaces) are skipped.

    With ``unique`` repeated ids are kept once, in order of first appearance, and ``note``
    (when given) is called with one line saying how many repeats were dropped. With
    ``first_column`` (a feature file given as a list of items) the id is the line's first
    tab-separated field, or its first comma-separated field when it has no tab, with RFC 4180
    quoting as the feature reader reads them (``"Warhammer 40,000",x`` gives
    ``Warhammer 40,000``).
    """
    p, lines, _ = _id_file_lines(path, f"{what} list", f"expected one {what} id per line")
    ids: List[str] = []
    for body in lines:
        if first_column:
            body = _first_field(body)
        if body.strip():
            ids.append(body)
    if not ids:
        raise InputError(f"no {what} ids found", path=str(p), hint=f"one {what} id per line")
    if unique:
        kept = list(dict.fromkeys(ids))
        repeats = len(ids) - len(kept)
        if repeats and note is not None:
            seen: set = set()
            first = next(x for x in ids if x in seen or seen.add(x))
            note(f"{p}: {repeats:,} repeated {what} id(s) ignored, each is recommended for once "
                         f"(first repeat: {first!r})")
        ids = kept
    return ids


def _first_field(line: str) -> str:
    """The first field of a feature-file line, as the feature reader splits it: the first
    tab-separated field, else the first comma-separated one (RFC 4180 quoting in both, so
    an id that starts with a quote, which feature files write quoted, comes back whole)."""
    if "\t" in line:
        return split_fields(line, "\t")[0]
    if "," not in line and not line.startswith('"'):
        return line
    return split_fields(line, ",")[0]


# -- row ids ----------------------------------------------------------------------------------
def read_row_ids(path: PathLike, what: str = "user") -> Tuple[np.ndarray, str]:
    """The row ids of a ``what`` id file, one per line, and the encoding they were read in.

    Returns
    -------
    ids : numpy str array
        Line *n* (1-based) is the id of row *n - 1*.
    encoding : str
        ``"utf-8"`` (a leading byte-order mark dropped) or ``"latin-1"``.

    Raises
    ------
    InputError
        A missing or empty file, a blank line, an id over the readers' length limit, or an
        id that appears twice: each names the file and line.
    """
    hint = f"one {what} id per line, line n naming row n"
    p, lines, encoding = _id_file_lines(path, f"{what} id list", hint)
    ids: List[str] = []
    for lineno, body in enumerate(lines, start=1):
        if not body.strip():
            raise InputError(f"line {lineno} is blank: every line names one {what} (row {lineno})",
                             path=str(p), line=lineno, hint=f"remove the line, or give the {what} its id")
        if len(body) > MAX_ID_CHARS:
            raise InputError(f"{what} id of {len(body):,} characters (the limit is {MAX_ID_CHARS:,})",
                             path=str(p), line=lineno, hint="shorten the ids, e.g. map them to numbers")
        ids.append(body)
    arr = np.asarray(ids, dtype=str)
    check_unique(arr, what, str(p))
    return arr, "utf-8" if encoding == "utf-8-sig" else encoding


def check_unique(ids: np.ndarray, what: str, path: Optional[str]) -> None:
    """Refuse an id list in which an id names two rows (naming the first repeat and its line)."""
    dup = first_duplicate(ids) if len(ids) else None
    if dup is not None:
        lines = np.flatnonzero(ids == dup)[:2] + 1
        raise InputError(f"{what} id {dup[:80]!r} appears twice (lines {lines[0]} and {lines[1]})",
                         path=path, line=int(lines[1]), hint=f"each {what} must have one row: remove the repeat")


def read_matrix_ids(user_path: PathLike, item_path: PathLike) -> Tuple[np.ndarray, np.ndarray, str]:
    """The row and column ids of a matrix and the one encoding its outputs are written in
    (:func:`common_encoding`)."""
    (users, items), encoding = common_encoding([read_row_ids(user_path, "user"), read_row_ids(item_path, "item")])
    return users, items, encoding


def common_encoding(decoded: Sequence[Tuple[np.ndarray, str]]) -> Tuple[List[np.ndarray], str]:
    """Ids read from several files, each with its encoding, as ids of one encoding.

    When one file was Latin-1 and another valid UTF-8, the UTF-8 ids are re-read as Latin-1
    (their bytes are valid Latin-1 too), so that writing every id in Latin-1 gives each one
    back as the bytes it was read as.
    """
    if all(output_encoding(enc) == "utf-8" for _, enc in decoded):
        return [ids for ids, _ in decoded], "utf-8"
    return [ids if enc == "latin-1" else _as_latin1(ids) for ids, enc in decoded], "latin-1"


def _as_latin1(ids: np.ndarray) -> np.ndarray:
    """Ids read as UTF-8, as Latin-1 reads the same bytes."""
    return np.asarray([s.encode("utf-8").decode("latin-1") for s in ids.tolist()], dtype=str)


def write_row_ids(path: PathLike, ids: Union[Sequence[str], np.ndarray], encoding: str = "utf-8", what: str = "user",
                   tmp: Optional[PathLike] = None) -> None:
    """Write ``ids`` one per line (``\\n`` endings), each exactly as it is, atomically (or
    into ``tmp``, a temporary name the caller renames to ``path`` with the files written
    along with it).

    An id holding a line break, or an empty one, cannot be written (it would not read back
    as one row): refused in one line before anything is written.
    """
    check_writable_ids(ids, what, path)
    text = "".join(f"{s}\n" for s in np.asarray(ids, dtype=str).tolist())
    if tmp is not None:
        with open(tmp, "w", encoding=output_encoding(encoding), newline="") as fh:
            fh.write(text)
        return
    with atomic_path(path) as name:
        with open(name, "w", encoding=output_encoding(encoding), newline="") as fh:
            fh.write(text)


def check_writable_ids(ids: Union[Sequence[str], np.ndarray], what: str, path: PathLike) -> None:
    """Refuse ids an id list cannot hold: one with a line break, or an empty one."""
    arr = np.asarray(ids, dtype=str)
    for ch in ("\n", "\r"):
        hit = np.char.find(arr, ch) >= 0 if len(arr) else np.zeros(0, bool)
        if hit.any():
            bad = str(arr[int(np.flatnonzero(hit)[0])])
            raise InputError(f"{what} id {bad[:80]!r} holds a line break, which an id list cannot hold; nothing "
                             "was written", path=str(path), hint="write .npz instead, which keeps the ids in the archive")
    if len(arr) and (np.char.str_len(arr) == 0).any():
        raise InputError(f"a {what} id is empty, which an id list cannot hold; nothing was written", path=str(path),
                         hint="give every row a non-empty id")
