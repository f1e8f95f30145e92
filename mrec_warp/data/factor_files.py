"""Factor matrices in other tools' files, read with their ids and written back
(``mrec-warp factors``).

Three inputs:

``.npy``
    One 2-D float array (a 1-D one for item biases), row *n* for the id on line *n* of an
    id list (:func:`~mrec_warp.data.id_lines.read_row_ids`). The ``.npy`` header is checked
    against the file's size before anything is loaded; pickled arrays are refused.
``.npz``
    One archive with ``user_factors``, ``item_factors``, optionally ``item_bias``, and the
    ids as ``user_ids`` / ``item_ids`` (or id lists given beside it).
text (any other name)
    One row per id, the format word2vec, fastText, gensim and most exports write:
    ``id<TAB>v1 v2 ...`` (the id is everything before the first tab, so it may hold
    spaces; the values are separated by spaces or tabs), or ``id,v1,v2,...`` when the first
    row has no tab (CSV: an id holding a comma is quoted, ``"Papers, Please",0.1,0.2``), or
    ``id v1 v2 ...`` when it has neither (the id is the first word). An optional
    word2vec header ``COUNT WIDTH`` on line 1 is recognised when it matches the rows that
    follow. Blank lines are skipped. Ids are the file's bytes (UTF-8, or Latin-1 when not
    valid UTF-8).

Every defect -- values that are not finite numbers, rows of different widths, a repeated or
empty id, a header that does not match -- is one :class:`InputError` line naming the file
and line.
"""
from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..errors import InputError
from ..files import PathLike, atomic_path
from .delimited import split_fields
from .id_lines import check_unique, write_row_ids
from .inputs import check_readable, decode_input, output_encoding, read_list_bytes
from .npz import MAX_HEADER_BYTES, NpzArchive, check_finite, write_npz

_HINT_TEXT = "one row per id: id<TAB>v1 v2 ... (or id,v1,v2,...), every row of the same width"
_HINT_NPY = "save it with numpy.save(path, array) (a float array, not an object array)"
_WORD2VEC_HEADER = re.compile(r"^\d+ \d+$")


class Loaded:
    """Rows read from a factor file: ``values`` (float64, n x d, or n for biases), ``ids``
    (str array, or None for a ``.npy``) and ``encoding`` of the ids."""

    def __init__(self, values: np.ndarray, ids: Optional[np.ndarray], encoding: str = "utf-8") -> None:
        self.values, self.ids, self.encoding = values, ids, encoding


def is_text(path: PathLike) -> bool:
    """Whether ``path`` is read as text vectors (neither ``.npy`` nor ``.npz``)."""
    return not str(path).lower().endswith((".npy", ".npz"))


# -- .npy ----------------------------------------------------------------------------------------
def read_npy(path: PathLike, what: str, ndim: int = 2) -> np.ndarray:
    """A ``.npy`` array of ``ndim`` dimensions, its header checked against the file's size
    before its data is read (a header declaring more than the file holds is refused)."""
    source = str(path)
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{what} file does not exist" if not p.exists() else f"{what} is not a regular file",
                         path=source, hint="check the path")
    try:
        with open(p, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = reader(fh, max_header_size=MAX_HEADER_BYTES)
            offset = fh.tell()
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(f"not a .npy file ({' '.join(str(exc).split())[:120]})", path=source, hint=_HINT_NPY) from None
    if dtype.hasobject or dtype.kind not in "fiu" or dtype.fields is not None:
        raise InputError(f"{what} has type {dtype.str}, expected numbers", path=source, hint=_HINT_NPY)
    if len(shape) != ndim:
        raise InputError(f"{what} has shape {tuple(shape)}, expected {ndim} dimensions"
                         + (" (one row per id)" if ndim == 2 else " (one value per item)"), path=source, hint=_HINT_NPY)
    expected = offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if os.path.getsize(p) != expected:
        raise InputError(f"{what} declares shape {tuple(shape)} but the file holds {os.path.getsize(p) - offset:,} "
                         f"bytes of data", path=source, hint="the file is truncated or damaged: save it again")
    try:
        arr = np.load(p, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(f"unreadable .npy ({' '.join(str(exc).split())[:120]})", path=source, hint=_HINT_NPY) from None
    return _finite(np.asarray(arr, dtype=np.float64), what, source)


def _finite(values: np.ndarray, what: str, source: Optional[str]) -> np.ndarray:
    try:
        check_finite(values, what)
    except ValueError as exc:
        raise InputError(str(exc), path=source, hint="the tool that wrote them diverged: fix or refit it") from None
    return values


# -- .npz ----------------------------------------------------------------------------------------
def read_factors_npz(path: PathLike) -> Dict[str, Any]:
    """``user_factors``, ``item_factors``, ``item_bias`` (or None), ``user_ids``, ``item_ids``
    (or None) and ``id_encoding`` of a factors archive."""
    hint = "an .npz with user_factors, item_factors (2-D), optionally item_bias, user_ids, item_ids"
    source = str(path)
    check_readable(path, "factors .npz", empty_hint=hint)  # a zip is read by seeking: no device or pipe
    with NpzArchive(path, "a factors .npz", hint) as archive:
        out: Dict[str, object] = {}
        for key in ("user_factors", "item_factors"):
            archive.header(key, "fiu", (None, None))
        if "item_bias" in archive:
            archive.header("item_bias", "fiu", (None,))
        for key in ("user_factors", "item_factors"):
            out[key] = _finite(archive.read(key, "fiu", (None, None)).astype(np.float64), key.replace("_", " "), source)
        out["item_bias"] = (_finite(archive.read("item_bias", "fiu", (None,)).astype(np.float64), "item biases", source)
                            if "item_bias" in archive else None)
        for key in ("user_ids", "item_ids"):
            out[key] = archive.read(key, "U", (None,)) if key in archive else None
        out["id_encoding"] = str(archive.read("id_encoding", "U", ())) if "id_encoding" in archive else "utf-8"
        if out["id_encoding"] not in ("utf-8", "latin-1"):
            raise archive.error(f"id_encoding {str(out['id_encoding'])[:20]!r} is neither utf-8 nor latin-1")
    return out


# -- text vectors --------------------------------------------------------------------------------
def read_text_vectors(path: PathLike, what: str) -> Loaded:
    """Ids and vectors of a text factor file (module docstring); ``what`` names it in errors."""
    p = check_readable(path, f"{what} file", empty_hint=_HINT_TEXT, stream_ok=True)
    source = str(p)
    data = read_list_bytes(p, f"{what} file")
    text, encoding = decode_input(data)
    lines: List[Tuple[int, str]] = []
    with io.StringIO(text, newline="") as fh:
        for lineno, line in enumerate(fh, start=1):
            body = line[:-2] if line.endswith("\r\n") else line[:-1] if line.endswith(("\n", "\r")) else line
            if body.strip():
                lines.append((lineno, body))
    if not lines:
        raise InputError(f"{what} file holds no rows", path=source, hint=_HINT_TEXT)
    if _WORD2VEC_HEADER.match(lines[0][1]) and len(lines) > 1:
        count, width = (int(x) for x in lines[0][1].split())
        if count == len(lines) - 1 and len(_split(lines[1][1], _style(lines[1][1]))[1]) == width:
            lines = lines[1:]  # a word2vec header (count, width) that matches the rows
    style = _style(lines[0][1])
    ids: List[str] = []
    rows: List[List[str]] = []
    for lineno, body in lines:
        ident, values = _split(body, style)
        if not ident.strip():
            raise InputError(f"{what} file: the row has an empty id", path=source, line=lineno, hint=_HINT_TEXT)
        if rows and len(values) != len(rows[0]):
            raise InputError(f"{what} file: {len(values)} values where line {lines[0][0]} has {len(rows[0])}",
                             path=source, line=lineno, hint=_HINT_TEXT)
        if not values:
            raise InputError(f"{what} file: the row has an id and no values", path=source, line=lineno, hint=_HINT_TEXT)
        ids.append(ident)
        rows.append(values)
    try:
        matrix = np.array(rows, dtype=np.float64)
    except ValueError:
        for (lineno, _), values in zip(lines, rows):
            try:
                np.array(values, dtype=np.float64)
            except ValueError:
                bad = next(v for v in values if not _is_number(v))
                raise InputError(f"{what} file: {bad[:40]!r} is not a number", path=source, line=lineno,
                                 hint=_HINT_TEXT) from None
        raise
    bad_rows = ~np.isfinite(matrix).all(axis=1)
    if bad_rows.any():
        first = int(np.argmax(bad_rows))
        raise InputError(f"{what} file: a value is not finite (NaN or infinite; {int(bad_rows.sum()):,} such rows)",
                         path=source, line=lines[first][0], hint="the tool that wrote them diverged: fix or refit it")
    _finite(matrix, f"{what} file", source)
    arr = np.asarray(ids, dtype=str)
    check_unique(arr, what, source)  # names the n-th row (blank lines and a header not counted)
    return Loaded(matrix, arr, "utf-8" if encoding == "utf-8-sig" else encoding)


def _style(line: str) -> str:
    return "\t" if "\t" in line else "," if "," in line else " "


def _split(line: str, style: str) -> Tuple[str, List[str]]:
    """The id and the value fields of one row."""
    if style == "\t":
        ident, _, rest = line.partition("\t")
        return ident, rest.split()
    if style == ",":
        fields = split_fields(line, ",")
        return fields[0], [f.strip() for f in fields[1:]]
    ident, _, rest = line.strip(" ").partition(" ")
    return ident, rest.split()


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# -- writing ---------------------------------------------------------------------------------------
def write_text_vectors(path: PathLike, ids: np.ndarray, values: np.ndarray, encoding: str = "utf-8") -> None:
    """``id<TAB>v1 v2 ...`` rows, values with 9 significant digits (every float32 reads back
    exactly), ids as they are, written atomically; an id holding a tab or line break is
    refused first."""
    check_text_ids(ids, path)
    with atomic_path(path) as tmp:
        _text_vectors_into(tmp, ids, values, encoding)


def _text_vectors_into(name: PathLike, ids: np.ndarray, values: np.ndarray, encoding: str) -> None:
    matrix = np.asarray(values).reshape(len(ids), -1)
    body = io.StringIO()
    np.savetxt(body, matrix, fmt="%.9g", delimiter=" ")
    text = "".join(f"{i}\t{row}\n" for i, row in zip(np.asarray(ids, dtype=str).tolist(),
                                                      body.getvalue().splitlines()))
    with open(name, "w", encoding=output_encoding(encoding), newline="") as fh:
        fh.write(text)


def export_factors(outdir: PathLike, user_ids: np.ndarray, item_ids: np.ndarray, user_factors: np.ndarray,
                   item_factors: np.ndarray, item_bias: Optional[np.ndarray], encoding: str = "utf-8") -> List[str]:
    """Write a model's factors in every form :func:`read_factors_npz`, :func:`read_npy` and
    :func:`read_text_vectors` read back; returns the paths written.

    ``factors.npz`` (everything, ids inside); ``user_factors.npy``, ``item_factors.npy``,
    ``item_bias.npy`` with ``user_ids.txt`` / ``item_ids.txt``; ``user_factors.tsv``,
    ``item_factors.tsv``, ``item_bias.tsv`` (text). All are written or none: each goes to a
    temporary name, and all are renamed at the end. Ids that a text file cannot hold (a tab
    or line break) are refused before anything is written.
    """
    out = Path(outdir)
    for ids in (user_ids, item_ids):
        check_text_ids(ids, out)
    arrays = {"user_factors": user_factors, "item_factors": item_factors}
    if item_bias is not None:
        arrays["item_bias"] = item_bias
    side_ids = {"user_factors": user_ids, "item_factors": item_ids, "item_bias": item_ids}
    names = ["factors.npz", *(f"{k}.npy" for k in arrays), "user_ids.txt", "item_ids.txt", *(f"{k}.tsv" for k in arrays)]
    folder = next((out / n for n in names if (out / n).is_dir()), None)
    if folder is not None:  # found now, not by a rename after others were made
        raise InputError("is a folder, where the export writes a file; nothing was written", path=str(folder),
                         hint="export into another folder, or move that one away")
    with contextlib.ExitStack() as stack:
        tmp = {n: stack.enter_context(atomic_path(out / n)) for n in names}
        with open(tmp["factors.npz"], "wb") as fh:
            write_npz(fh, {**arrays, "user_ids": np.asarray(user_ids, dtype=str),
                           "item_ids": np.asarray(item_ids, dtype=str), "id_encoding": np.array(encoding)})
        for key, arr in arrays.items():
            with open(tmp[f"{key}.npy"], "wb") as fh:
                np.lib.format.write_array(fh, np.ascontiguousarray(arr), allow_pickle=False)
            _text_vectors_into(tmp[f"{key}.tsv"], side_ids[key], arr, encoding)
        for ids, kind in ((user_ids, "user"), (item_ids, "item")):
            write_row_ids(out / f"{kind}_ids.txt", ids, encoding, kind, tmp=tmp[f"{kind}_ids.txt"])
    return [str(out / n) for n in names]


def check_text_ids(ids: np.ndarray, where: PathLike) -> None:
    """Refuse ids the text files cannot hold, before the export writes anything."""
    ids = np.asarray(ids, dtype=str)
    for ch in ("\t", "\n", "\r"):
        hit = np.char.find(ids, ch) >= 0 if len(ids) else np.zeros(0, bool)
        if hit.any():
            bad = str(ids[int(np.flatnonzero(hit)[0])])
            raise InputError(f"id {bad[:80]!r} holds a tab or line break, which a text factor file or an id "
                             "list cannot hold; nothing was written", path=str(where),
                             hint="map the ids to ones without tabs and line breaks first")
