"""Id-list files: ``recommend --users FILE``, ``similar --items-file FILE``, ``evaluate --items``."""
from __future__ import annotations

import io
from typing import Callable, List, Optional

from ..errors import InputError
from ..files import PathLike
from .delimited import split_fields
from .inputs import check_readable, decode_input, read_list_bytes


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
    # read the bytes once: a pipe (<(...), /dev/stdin) cannot be read again after the
    # encoding is known
    empty_hint = f"expected one {what} id per line"
    p = check_readable(path, f"{what} list", empty_hint=empty_hint, stream_ok=True)
    data = read_list_bytes(p, f"{what} list")
    if not data:
        raise InputError(f"{what} list is empty", path=str(p), hint=empty_hint)
    text, _ = decode_input(data)
    ids: List[str] = []
    with io.StringIO(text, newline="") as fh:
        for line in fh:
            # newline="" leaves "\r\n", "\n" or "\r" on each line: remove exactly that
            body = line[:-2] if line.endswith("\r\n") else line[:-1] if line.endswith(("\n", "\r")) else line
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
