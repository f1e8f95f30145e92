"""The checks of a parsed table's columns in use (empty fields, ids too long or holding a tab
or line break), each fault named by the line of its first bad field
(:mod:`~mrec_warp.data.delimited` parses the table)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from ..errors import InputError
from . import inputs
from .delimited import columns_hint, data_line, quoted, split_fields, text_after_quote
from .id_text import text_rows
from .tsv import TSV_UNSAFE


def check_fields(raw: pd.DataFrame, used: List[int], n_fields: int, path: Path, sep: str, skip: int,
                  encoding: str, roles: Sequence[str], id_roles: Sequence[str],
                  hint: Optional[str] = None, allow_empty: Optional[np.ndarray] = None) -> None:
    """Reject an empty user / item / value / timestamp (or a line too short to have one).

    Only the columns in use are checked: an unused column may be empty or missing. Ids are
    left exactly as they are, spaces included; an id holding a tab or a line break (possible
    only inside a quoted field) is refused, since no TSV output could hold it, and so is one
    longer than :data:`~mrec_warp.data.inputs.MAX_ID_LENGTH` characters, and so is a quoted
    field with text after its closing quote (:func:`~.delimited.text_after_quote`). ``roles``
    names the used columns in messages (a ratings file's are ``user, item, value,
    timestamp``, a feature file's ``id, feature, weight``) and ``id_roles`` the ones holding
    ids; ``hint`` replaces the column-count hint. Rows in ``allow_empty`` may have empty
    ids (``empty_ids="drop"``: the row rules drop them).
    """
    for role, pos in zip(roles, used):
        if raw[pos].dtype == np.float64:  # numbers, parsed and checked finite already
            continue
        col = raw[pos]
        empty = text_rows(col, _blank)  # checked stripped, kept as they are
        if allow_empty is not None and role in id_roles:
            empty = empty & ~allow_empty
        if empty.any():
            row = int(np.flatnonzero(empty)[0])
            lineno, text = data_line(path, row, sep, skip, encoding)
            found = len(split_fields(text, sep))
            if found <= pos:
                raise InputError(f"expected {n_fields} columns like the first line, found {found}", path=str(path),
                                 line=lineno, hint=hint or columns_hint(sep))
            raise InputError(f"column {pos} ({role}) is empty" + (" (only spaces)" if col.iloc[row] else ""),
                             path=str(path), line=lineno,
                             hint=f"fill in the {role} or remove the line")
        if role not in id_roles:
            continue
        # a Categorical (the fast reader's ids) is screened on its distinct texts
        longest, maybe_unsafe = _screen_ids(pd.Series(col.cat.categories) if isinstance(
            col.dtype, pd.CategoricalDtype) else col)
        limit = inputs.MAX_ID_LENGTH  # read here, so the one constant rules every reader
        if longest > limit:
            long = text_rows(col, lambda t, limit=limit: t.str.len() > limit)
            row = int(np.flatnonzero(long)[0])
            raise InputError(
                f"{role if role == 'feature' else role + ' id'} {col.iloc[row][:40]!r}... is "
                f"{len(col.iloc[row]):,} characters long; the limit is {limit:,}",
                path=str(path), line=data_line(path, row, sep, skip, encoding)[0],
                hint="a model cannot hold ids this long; check the delimiter and which columns are the ids")
        if quoted(sep) and maybe_unsafe:
            bad = text_rows(col, lambda t: t.str.contains(TSV_UNSAFE.pattern, regex=True))
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                value = col.iloc[row]
                broken = "\n" in value or "\r" in value  # most often a quote left open, not a real id
                raise InputError(
                    f"{role if role == 'feature' else role + ' id'} {value!r} holds a tab or line break, "
                    "which TSV outputs cannot hold",
                    path=str(path), line=data_line(path, row, sep, skip, encoding)[0],
                    hint=("if a quote opened on this line is never closed, add the closing quote; otherwise "
                          if broken else "") + "remove tabs and line breaks from ids",
                )
    # last: a quote left open (a field of several lines) is better named by the check above
    after = text_after_quote(path, sep, skip, used, encoding)
    if after is not None:
        lineno, pos, text = after
        role = dict(zip(used, roles))[pos]
        field = split_fields(text, sep)[pos] if pos < len(split_fields(text, sep)) else ""
        raise InputError(f"column {pos} ({role}) has text after its closing quote: a field that starts with a quote "
                         f"ends at the next single quote, and the parser would read {field!r}", path=str(path),
                         line=lineno, hint='quote the whole field with its inner quotes doubled ("""quoted"" start") '
                                           "or remove the quotes")


def _blank(texts: pd.Series) -> pd.Series:
    return texts.str.strip() == ""


def _screen_ids(col: pd.Series, block: int = 1 << 20) -> Tuple[int, bool]:
    """``(longest id in characters, whether some id may hold a tab or line break)``, fast:
    the rare columns that fail are then searched row by row to name the line.

    An Arrow-backed column (pandas' default strings with pyarrow) is screened on its byte
    buffer; others by joining the strings in blocks (to bound memory): both 5-20x faster
    than a regex or ``str.len`` per string.
    """
    if len(col) == 0:
        return 0, False
    if getattr(col.dtype, "storage", None) == "pyarrow":
        import pyarrow as pa
        import pyarrow.compute as pc

        array = pa.chunked_array(pa.array(col))
        data = b"".join(c.buffers()[2].to_pybytes() for c in array.chunks if c.buffers()[2] is not None)
        longest = pc.max(pc.utf8_length(array)).as_py() or 0
        return int(longest), any(ch in data for ch in (b"\t", b"\r", b"\n"))
    values = col.to_numpy()
    longest, unsafe = 0, False
    for start in range(0, len(values), block):
        part = values[start:start + block]
        longest = max(longest, max(map(len, part)))
        text = "\x00".join(part)
        unsafe = unsafe or "\t" in text or "\r" in text or "\n" in text
    return longest, unsafe


__all__ = ["check_fields"]
