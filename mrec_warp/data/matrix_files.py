"""Interaction matrices in other tools' files: Matrix Market (``.mtx``) and scipy ``.npz``,
with their ids, read and written byte for byte (``mrec-warp convert``).

Formats, chosen by the file name (``.mtx``, ``.npz``, anything else is a ratings file):

``text``
    A ratings file (user, item[, value[, timestamp]]), read by
    :func:`~mrec_warp.data.ratings.read_ratings` and written as the package's headerless
    TSV (:func:`~mrec_warp.data.tsv.write_interactions`).
``mtx``
    Matrix Market coordinate ``real``, ``integer`` or ``pattern`` (values 1), ``general``,
    1-based (``scipy.io.mmread`` / ``mmwrite``); line *n* of ``NAME.users.txt`` /
    ``NAME.items.txt`` beside ``NAME.mtx`` is the id of row / column *n*.
``npz``
    One archive that ``scipy.sparse.load_npz`` reads (members ``format`` = ``csr``,
    ``shape``, ``indptr``, ``indices``, ``data``) and that also holds the ids
    (``user_ids``, ``item_ids``) and their encoding (``id_encoding``). A ``csr``, ``csc``
    or ``coo`` archive written by ``scipy.sparse.save_npz`` is read too, its ids then from
    ``NAME.users.txt`` / ``NAME.items.txt`` beside it.

Every input goes through the row rules (:func:`~mrec_warp.data.rows.merge_rows`): a
coordinate stored twice merges by ``duplicates`` as a repeated ratings row does, a negative
value is refused unless ``negatives`` says otherwise, and a stored 0 is an interaction like
any other (never dropped). Values stay float64 from reading to writing, so a value comes out
as it went in. Untrusted files are checked before use: the declared shape against the id
lists, indices in range, values finite; each defect is one :class:`InputError` line.
"""
from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import pandas as pd
import scipy.io
import scipy.sparse as sp

from ..errors import InputError
from ..files import PathLike, atomic_path
from .id_lines import check_unique, check_writable_ids, read_matrix_ids, write_row_ids
from .inputs import check_readable, output_encoding
from .interactions import checked_ids, compact_codes
from .npz import NpzArchive, check_finite, write_npz
from .ratings import MAX_ABS_VALUE, read_ratings
from .rows import (
    DEFAULT_DUPLICATES, DEFAULT_EMPTY_IDS, DEFAULT_NEGATIVES, drop_empty_ids, factorize_ids, merge_rows, nothing_left,
    table_locator,
)
from .tsv import check_tsv_ids, write_interactions

#: The formats :func:`read_matrix` and :func:`write_matrix` know.
MATRIX_FORMATS = ("text", "mtx", "npz")
_HINT_MTX = "write it with scipy.io.mmwrite, or check that the file is complete"
_HINT_NPZ = "write it with mrec-warp convert or scipy.sparse.save_npz"


@dataclass
class Matrix:
    """A users x items matrix of interactions with its ids.

    ``matrix`` is CSR, float64, sorted indices, no duplicates; a stored 0 is an interaction.
    ``encoding`` is the one the ids are written back in ("utf-8" or "latin-1"); ``counts``
    the row rules' counts (:func:`~mrec_warp.data.rows.merge_rows`); ``timestamps`` whether
    the input had a time column (the matrix formats hold none).
    """

    matrix: sp.csr_matrix
    user_ids: np.ndarray
    item_ids: np.ndarray
    encoding: str = "utf-8"
    counts: Dict[str, int] = field(default_factory=dict)
    timestamps: bool = False


def matrix_format(path: PathLike) -> str:
    """``mtx`` for a ``.mtx`` name, ``npz`` for ``.npz``, else ``text`` (a ratings file)."""
    name = str(path).lower()
    if name.endswith(".mtx"):
        return "mtx"
    if name.endswith(".npz"):
        return "npz"
    return "text"


def id_list_paths(path: PathLike) -> Tuple[Path, Path]:
    """``NAME.users.txt`` and ``NAME.items.txt`` beside ``NAME.mtx`` (or ``NAME.npz``)."""
    p = Path(path)
    stem = p.name[: -len(p.suffix)] if p.suffix.lower() in (".mtx", ".npz") else p.name
    return p.with_name(f"{stem}.users.txt"), p.with_name(f"{stem}.items.txt")


# -- reading -------------------------------------------------------------------------------------
def read_matrix(path: PathLike, fmt: Optional[str] = None, reader: Optional[Dict] = None,
                duplicates: str = DEFAULT_DUPLICATES, negatives: str = DEFAULT_NEGATIVES,
                min_value: Optional[float] = None) -> Matrix:
    """Read an interaction matrix in any of :data:`MATRIX_FORMATS` (``fmt``, default from
    the name); ``reader`` holds :func:`~mrec_warp.data.ratings.read_ratings`' options
    (``format``, ``sep``, ``header``, ``columns``, ``empty_ids``) for a ratings file. The row rules
    (``duplicates``, ``negatives``, ``min_value``) apply to every format."""
    fmt = fmt or matrix_format(path)
    rules = dict(duplicates=duplicates, negatives=negatives, min_value=min_value)
    if fmt == "text":
        return _read_text(path, reader or {}, rules)
    if fmt == "mtx":
        users, items, encoding = read_matrix_ids(*_id_lists_of(path))
        rows, cols, values = _read_mtx(path, len(users), len(items))
    elif fmt == "npz":
        users, items, encoding, (rows, cols, values) = _read_npz(path)
    else:
        raise ValueError(f"unknown matrix format {fmt!r}")
    return _merged(rows, cols, values, users, items, encoding, str(path), rules)


def _id_lists_of(path: PathLike) -> Tuple[Path, Path]:
    """The id lists beside ``path``, which must exist (as the matrix itself, checked first)."""
    check_readable(path, "matrix file", empty_hint=_HINT_MTX if matrix_format(path) == "mtx" else _HINT_NPZ)
    users, items = id_list_paths(path)
    for p, kind in ((users, "user"), (items, "item")):
        if not p.exists():
            raise InputError(f"no {kind} id list beside it ({p.name} is missing)", path=str(path),
                             hint=f"write one {kind} id per line to {p}, line n naming "
                                  f"{'row' if kind == 'user' else 'column'} n")
    return users, items


def _read_text(path: PathLike, reader: Dict, rules: Dict) -> Matrix:
    # ids as codes, as train reads them: a big file's memory holds no string per row
    df = read_ratings(path, format=reader.get("format", "auto"), sep=reader.get("sep"),
                      header=reader.get("header"), columns=reader.get("columns"),
                      empty_ids=reader.get("empty_ids", DEFAULT_EMPTY_IDS), coded_ids=True)
    source = str(path)
    n_rows = len(df)
    df, n_empty = drop_empty_ids(df, reader.get("empty_ids", DEFAULT_EMPTY_IDS))  # as prepare and train
    locate = table_locator(df, source=source)  # a missing id is named by its file line
    users = checked_ids(df, "user", "user", locate)
    items = checked_ids(df, "item", "item", locate)
    if rules["min_value"] is not None and "value" not in df:
        raise InputError("`min_value` needs a value column, and the file has only user and item", path=source,
                         hint="drop `min_value`, or name the value column with `columns`")
    u_codes, u_ids = factorize_ids(users)
    i_codes, i_ids = factorize_ids(items)
    values = df["value"].to_numpy(dtype=np.float64) if "value" in df else None
    merged = merge_rows(u_codes, i_codes, values, None, len(i_ids), locate=locate, **rules)
    merged.counts.update(rows_read=n_rows, empty_id_rows_dropped=n_empty)
    _check_left(merged.counts, source)
    user, u_ids = compact_codes(merged.user, np.asarray(u_ids, dtype=object))
    item, i_ids = compact_codes(merged.item, np.asarray(i_ids, dtype=object))
    csr = _csr(user, item, merged.value, (len(u_ids), len(i_ids)))
    return Matrix(csr, np.asarray(u_ids, dtype=str), np.asarray(i_ids, dtype=str),
                  output_encoding(df.attrs.get("encoding")), merged.counts, "timestamp" in df)


def _merged(rows: np.ndarray, cols: np.ndarray, values: np.ndarray, users: np.ndarray, items: np.ndarray,
            encoding: str, source: str, rules: Dict) -> Matrix:
    """The coordinates of a matrix file through the row rules, every id kept (a row or
    column without entries is still part of the matrix)."""
    def locate(row: int):
        return source, None, f"entry {row + 1} (row {rows[row] + 1}, column {cols[row] + 1})"

    merged = merge_rows(rows, cols, values, None, len(items), locate=locate, **rules)
    _check_left(merged.counts, source)
    csr = _csr(merged.user, merged.item, merged.value, (len(users), len(items)))
    return Matrix(csr, users, items, encoding, merged.counts)


def _check_left(counts: Dict[str, int], source: str) -> None:
    """Refuse rules that removed every entry: an empty output is never what was meant (as ``prepare``)."""
    if counts["rows_read"] and not counts["pairs_kept"]:
        raise nothing_left(counts, source)  # the one wording, as prepare and from_dataframe


def _csr(user: np.ndarray, item: np.ndarray, value: np.ndarray, shape: Tuple[int, int]) -> sp.csr_matrix:
    """CSR from merged (unique) coordinates; a 0 value stays a stored entry."""
    csr = sp.csr_matrix((np.asarray(value, dtype=np.float64), (user, item)), shape=shape)
    csr.sort_indices()
    return csr


def _check_values(values: np.ndarray, source: str) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    try:
        check_finite(values, "the matrix", limit=MAX_ABS_VALUE)
    except ValueError as exc:
        raise InputError(f"{exc} (the limit is {MAX_ABS_VALUE:g} in magnitude)", path=source,
                         hint="a value is the strength of an interaction: fix those entries or drop them") from None
    return values


def _check_coordinates(rows: np.ndarray, cols: np.ndarray, shape: Tuple[int, int], source: str, base: int,
                       hint: str) -> None:
    """Every row and column index inside the matrix (``base``: how the file counts, 0 or 1)."""
    for idx, n, kind in ((rows, shape[0], "row"), (cols, shape[1], "column")):
        if len(idx) == 0:
            continue
        bad = (idx < 0) | (idx >= n)
        if bad.any():
            first = int(np.argmax(bad))
            raise InputError(f"entry {first + 1} has {kind} index {int(idx[first]) + base}, outside {base}.."
                             f"{n - 1 + base} ({int(bad.sum()):,} such entries)", path=source, hint=hint)


# -- Matrix Market ---------------------------------------------------------------------------------
def _mtx_header(path: PathLike) -> Tuple[str, Tuple[int, int, int], int]:
    """The field, the declared (rows, columns, entries) and the byte size of a ``.mtx``,
    checked before ``mmread`` allocates anything."""
    source = str(path)
    check_readable(path, "Matrix Market file", empty_hint=_HINT_MTX)  # a device or pipe never ends a line
    try:
        with open(path, "rb") as fh:
            first = fh.readline(4096)
            size_line = b""
            for line in iter(lambda: fh.readline(1 << 16), b""):
                if line.strip() and not line.startswith(b"%"):
                    size_line = line
                    break
        size = Path(path).stat().st_size
    except FileNotFoundError:
        raise InputError("file does not exist", path=source, hint="check the path") from None
    except IsADirectoryError:
        raise InputError("is a folder, not a Matrix Market file", path=source, hint="check the path") from None
    if first[:2] == b"\x1f\x8b":
        raise InputError("is gzip-compressed", path=source, hint="uncompress it first (gunzip), then convert")
    words = first.decode("latin-1").lower().split()
    if len(words) != 5 or words[0] != "%%matrixmarket" or words[1] != "matrix":
        raise InputError("not a Matrix Market file (line 1 is not '%%MatrixMarket matrix ...')", path=source,
                         line=1, hint=_HINT_MTX)
    _, _, layout, fld, symmetry = words
    if layout != "coordinate":
        raise InputError(f"a dense ('{layout}') Matrix Market file is not an interaction matrix", path=source, line=1,
                         hint="write the sparse matrix: scipy.io.mmwrite(path, scipy.sparse.coo_matrix(m))")
    if fld not in ("real", "integer", "pattern", "double"):
        raise InputError(f"field '{fld}' cannot hold interactions (expected real, integer or pattern)",
                         path=source, line=1, hint=_HINT_MTX)
    if symmetry != "general":
        raise InputError(f"symmetry '{symmetry}': a users x items matrix is 'general'", path=source, line=1,
                         hint="write it with mmwrite(..., symmetry='general')")
    parts = size_line.split()
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        dims = ()
    if len(dims) != 3 or min(dims) < 0:
        raise InputError("the size line is not 'ROWS COLUMNS ENTRIES' (three whole numbers)", path=source,
                         hint=_HINT_MTX)
    return fld, dims, size


def _read_mtx(path: PathLike, n_users: int, n_items: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The 0-based coordinates and values of a coordinate ``.mtx`` whose ids are known."""
    source = str(path)
    fld, (n_rows, n_cols, nnz), size = _mtx_header(path)
    if (n_rows, n_cols) != (n_users, n_items):
        raise InputError(f"declares {n_rows:,} x {n_cols:,} but its id lists name {n_users:,} users and "
                         f"{n_items:,} items", path=source,
                         hint="give the id lists written with this matrix (one id per row / column)")
    if nnz * 4 > size:  # each entry takes at least "1 1\n": a count the file cannot hold
        raise InputError(f"declares {nnz:,} entries but holds only {size:,} bytes", path=source,
                         hint="the file is truncated: write it again")
    try:
        coo = scipy.io.mmread(source)
    except (ValueError, OverflowError, IndexError, TypeError, RuntimeError, EOFError) as exc:
        what = " ".join(str(exc).split())[:200] or type(exc).__name__
        at = re.match(r"Line (\d+): (.*)", what)  # fast_matrix_market names the line
        raise InputError(f"unreadable Matrix Market data ({at.group(2) if at else what})", path=source,
                         line=int(at.group(1)) if at else None, hint=_HINT_MTX) from None
    if not sp.issparse(coo):
        raise InputError("not a sparse (coordinate) Matrix Market file", path=source, hint=_HINT_MTX)
    coo = coo.tocoo()
    if coo.shape != (n_rows, n_cols) or coo.nnz != nnz:
        raise InputError(f"holds {coo.nnz:,} entries of a {coo.shape[0]:,} x {coo.shape[1]:,} matrix, "
                         f"its header declares {nnz:,} of {n_rows:,} x {n_cols:,}", path=source, hint=_HINT_MTX)
    rows, cols = np.asarray(coo.row, np.int64), np.asarray(coo.col, np.int64)
    _check_coordinates(rows, cols, (n_rows, n_cols), source, 1, _HINT_MTX)
    values = np.ones(nnz) if fld == "pattern" else _check_values(coo.data, source)
    return rows, cols, values


def _write_mtx(m: Matrix, path: PathLike) -> List[str]:
    """The matrix and its two id lists, all written or none (renamed together at the end)."""
    users_path, items_path = id_list_paths(path)
    for ids, what, where in ((m.user_ids, "user", users_path), (m.item_ids, "item", items_path)):
        check_writable_ids(ids, what, where)
    with contextlib.ExitStack() as stack:
        tmp = {p: stack.enter_context(atomic_path(p)) for p in (users_path, items_path, Path(path))}
        write_row_ids(users_path, m.user_ids, m.encoding, "user", tmp=tmp[users_path])
        write_row_ids(items_path, m.item_ids, m.encoding, "item", tmp=tmp[items_path])
        with open(tmp[Path(path)], "wb") as fh:  # a file object: mmwrite would add .mtx to a name
            # tocoo keeps stored zeros: each is an interaction
            scipy.io.mmwrite(fh, m.matrix.tocoo(), field="real", symmetry="general",
                             comment="mrec-warp interactions: ids of rows and columns in NAME.users.txt / "
                                     "NAME.items.txt")
    return [str(path), str(users_path), str(items_path)]


# -- npz -----------------------------------------------------------------------------------------
def _read_npz(path: PathLike):
    """Ids, encoding and 0-based coordinates of a scipy sparse ``.npz`` (with or without ids)."""
    source = str(path)
    check_readable(path, "sparse matrix .npz", empty_hint=_HINT_NPZ)  # a zip is read by seeking: no device or pipe
    with NpzArchive(path, "a sparse matrix .npz", _HINT_NPZ) as archive:
        if "format" not in archive or "shape" not in archive:
            raise archive.error("not a scipy sparse matrix archive (no 'format' or 'shape' member)")
        kind = archive.read("format", "US", ()).item()
        kind = kind.decode("ascii", "replace") if isinstance(kind, bytes) else str(kind)
        if kind not in ("csr", "csc", "coo"):
            raise archive.error(f"sparse format {kind[:20]!r} is not read here (csr, csc or coo)")
        shape = archive.read("shape", "iu", (2,))
        if "user_ids" in archive or "item_ids" in archive:
            users = archive.read("user_ids", "U", (None,))
            items = archive.read("item_ids", "U", (None,))
            encoding = str(archive.read("id_encoding", "U", ())) if "id_encoding" in archive else "utf-8"
            if encoding not in ("utf-8", "latin-1"):
                raise archive.error(f"id_encoding {encoding[:20]!r} is neither utf-8 nor latin-1")
            for ids, what in ((users, "user"), (items, "item")):
                check_unique(ids, what, source)
                if len(ids) and (np.char.str_len(np.char.strip(ids)) == 0).any():
                    raise archive.error(f"an {what} id is empty")
        else:
            users, items, encoding = read_matrix_ids(*_id_lists_of(path))
        if tuple(int(s) for s in shape) != (len(users), len(items)):
            raise archive.error(f"has shape {tuple(int(s) for s in shape)} but names {len(users):,} users and "
                                f"{len(items):,} items")
        n_rows, n_cols = len(users), len(items)
        data = archive.read("data", "fiub", (None,))
        if kind == "coo":
            names = ("row", "col") if "row" in archive else ("coords_0", "coords_1")  # scipy < / >= 1.13... both
            rows = archive.read(names[0], "iu", (len(data),)).astype(np.int64)
            cols = archive.read(names[1], "iu", (len(data),)).astype(np.int64)
        else:
            n_major = n_rows if kind == "csr" else n_cols
            indptr = archive.read("indptr", "iu", (n_major + 1,)).astype(np.int64)
            minor = archive.read("indices", "iu", (len(data),)).astype(np.int64)
            steps = np.diff(indptr)
            if indptr[0] != 0 or indptr[-1] != len(data) or (len(steps) and steps.min() < 0):
                raise archive.error(f"index pointer runs from {indptr[0]} to {indptr[-1]} (expected 0 to "
                                    f"{len(data)}, never decreasing)")
            major = np.repeat(np.arange(n_major, dtype=np.int64), steps)
            rows, cols = (major, minor) if kind == "csr" else (minor, major)
    _check_coordinates(rows, cols, (n_rows, n_cols), source, 0, _HINT_NPZ)
    return users, items, encoding, (rows, cols, _check_values(data, source))


def _write_npz(m: Matrix, path: PathLike) -> None:
    csr = m.matrix
    arrays = {
        "format": np.array("csr"), "shape": np.array(csr.shape, dtype=np.int64),
        "indptr": np.ascontiguousarray(csr.indptr, dtype=np.int64),
        "indices": np.ascontiguousarray(csr.indices, dtype=np.int32),
        "data": np.ascontiguousarray(csr.data, dtype=np.float64),
        "user_ids": np.asarray(m.user_ids, dtype=str), "item_ids": np.asarray(m.item_ids, dtype=str),
        "id_encoding": np.array(m.encoding),
    }
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            write_npz(fh, arrays)


# -- writing -------------------------------------------------------------------------------------
def write_matrix(m: Matrix, path: PathLike, fmt: Optional[str] = None) -> List[str]:
    """Write ``m`` as ``fmt`` (default from the name); returns the paths written.

    ``text`` is the package's headerless TSV ``user<TAB>item<TAB>value``; ``mtx`` writes the
    id lists beside the matrix (:func:`id_list_paths`); ``npz`` is one archive with the ids.
    Each file is written atomically; the id lists are checked before anything is written.
    """
    fmt = fmt or matrix_format(path)
    if fmt == "text":
        coo = m.matrix.tocoo()
        check_tsv_ids(m.user_ids, m.item_ids, path=path)
        frame = pd.DataFrame({"user": m.user_ids[coo.row], "item": m.item_ids[coo.col], "value": coo.data})
        write_interactions(frame, path, encoding=m.encoding)
        return [str(path)]
    if fmt == "mtx":
        return _write_mtx(m, path)
    if fmt == "npz":
        _write_npz(m, path)
        return [str(path)]
    raise ValueError(f"unknown matrix format {fmt!r}")

