"""Reading a ratings file into the canonical interactions table: the one ratings reader.

A text file and a Parquet file give the same table by the same rules. For a text file the
reader guesses the delimiter and whether line 1 is a header (and why); for either it
chooses which columns are user, item, value and timestamp, parses values and timestamps
(:func:`parse_values`, :func:`parse_timestamps`) and refuses an empty, too long or
unwritable id. A Parquet file's bytes are read by :mod:`~mrec_warp.data.parquet`. Every
problem is an :class:`~mrec_warp.errors.InputError` naming the file and line (a Parquet
file's data row); what the reader found is recorded in ``attrs["reading"]``
(:func:`describe_reading` puts it in words).
"""
from __future__ import annotations

import functools
import inspect
import re
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from ..errors import PARAMETER, InputError, spell_parameters
from ..files import PathLike
from ..progress import plural
from . import inputs
from .arrow import one_array, pyarrow
from .delimited import (
    WHITESPACE, columns_hint, data_line, data_lines, detect_separator, first_lines, normalise_columns,
    parse_table, quoted, split_fields,
)
from .field_checks import check_fields
from .id_text import id_texts, is_text_type, number_values, text_rows
from .inputs import as_regular_file, check_readable, detect_encoding, input_path, is_pipe
from .interactions import CANONICAL_COLUMNS
from .parquet import is_parquet, read_columns
from .rows import DEFAULT_EMPTY_IDS, check_empty_ids, empty_ids_error
from .tsv import TSV_UNSAFE

FORMATS = ("auto", "tsv", "csv", "movielens", "parquet")
#: The reader options of :func:`read_ratings` (``reader_options`` says which a caller offers).
READER_OPTIONS = ("format", "sep", "header", "columns", "empty_ids")

#: Largest magnitude of a rating / value: beyond it sums and float32 casts lose the number.
MAX_ABS_VALUE = 1e15

#: Largest magnitude of a timestamp: integers above 2**53 are not exact as float64.
MAX_ABS_TIMESTAMP = 2 ** 53


def _offering_options(read):
    """``read_ratings`` with ``reader_options``: the reader options the caller offers its
    users. A refusal whose message or hint names another one (``try `sep=';'```, which
    ``recommend --train`` has no flag for) is worded without it (:func:`_without_options`)."""
    @functools.wraps(read)
    def wrapper(*args, reader_options: Sequence[str] = READER_OPTIONS, **kwargs):
        try:
            return read(*args, **kwargs)
        except InputError as exc:
            missing = set(exc.params) & (set(READER_OPTIONS) - set(reader_options))
            if not missing:
                raise
            raise _without_options(exc, missing) from None
    # functools.wraps copies read's signature, which lacks the keyword this wrapper adds:
    # help(), Sphinx and inspect would show a documented parameter missing from it
    signature = inspect.signature(read)
    extra = inspect.Parameter("reader_options", inspect.Parameter.KEYWORD_ONLY, default=READER_OPTIONS,
                              annotation="Sequence[str]")
    wrapper.__signature__ = signature.replace(parameters=[*signature.parameters.values(), extra])
    return wrapper


def _without_options(exc: InputError, missing) -> InputError:
    words = {"format": "the format", "sep": "as delimiter", "header": "a header line", "columns": "columns"}

    def spell(name: str, value: Optional[str]) -> Optional[str]:
        if name not in missing:
            return None
        return words[name] if value is None else (f"{value} {words[name]}" if name == "sep" else
                                                  f"{words[name]} {value}")

    # a clause that only names an option to use ("use `columns` to choose columns") is left
    # out: worded without the option it says nothing; one with a value keeps it in words
    clauses = [c for c in (exc.hint or "").split("; ") if c and not any(
        m.group(1) in missing and (m.group(2) is None or m.group(1) == "empty_ids") for m in PARAMETER.finditer(c))]
    tail = ("this command guesses the layout, so write user, item[, value] with tabs, commas or spaces between "
            "them: prepare reads any layout and writes that one" if missing - {"empty_ids"} else
            "prepare --empty-ids drop leaves those rows out and counts them")
    hint = "".join(f"{spell_parameters(c, spell)}; " for c in clauses) + tail
    return InputError(spell_parameters(exc.message, spell), path=exc.path, line=exc.line, hint=hint)


@_offering_options
def read_ratings(
    path: PathLike,
    format: str = "auto",
    sep: Optional[str] = None,
    header: Optional[bool] = None,
    columns: Optional[Sequence] = None,
    empty_ids: str = DEFAULT_EMPTY_IDS,
    coded_ids: bool = False,
) -> pd.DataFrame:
    """Read a delimited ratings file into the canonical table.

    Blank lines are skipped. Any problem (a line with more fields than the first, a missing
    or empty id, a rating that is not a finite number or is too large, a bad timestamp)
    raises :class:`~mrec_warp.errors.InputError` naming the file and line.

    Parameters
    ----------
    path : path-like
        Text file (a pipe or FIFO, or ``-`` for standard input, is read once into a
        temporary file; a device, socket or folder is refused), optionally gzip-compressed
        (``.gz``), in UTF-8 (a byte-order mark is dropped) or, when it is not valid UTF-8,
        Latin-1. The encoding used is in ``result.attrs["encoding"]``. UTF-16/32, NUL
        bytes, a CR that does not end a line, lines over
        :data:`~mrec_warp.data.inputs.MAX_LINE_BYTES` and ids over
        :data:`~mrec_warp.data.inputs.MAX_ID_LENGTH` characters are refused with their line.
    format : {"auto", "tsv", "csv", "movielens", "parquet"}
        ``parquet`` reads a Parquet file with pyarrow (``pip install mrec-warp[parquet]``;
        :mod:`~mrec_warp.data.parquet`: ids byte for byte as a text file's, ``columns`` by
        name or position, errors naming the data row), which ``auto`` picks for a file
        starting with ``PAR1`` or named ``*.parquet``; ``tsv`` and ``csv`` fix the delimiter; ``movielens`` reads 100k ``u.data`` (tab) and
        1M/10M ``ratings.dat`` (``::``) with no header; ``auto`` sniffs the first lines:
        ``::``, then tab, then comma (when line 1 holds one), then ``;`` or ``|`` when they
        split the first five lines alike (quotes respected) and a comma does not, then runs
        of whitespace. With every one-character
        delimiter (comma, tab, ``;``, ``|``, ...) fields follow RFC 4180: a field starting
        with a quote loses its quotes and may hold the delimiter, line breaks and doubled
        quotes (``"Warhammer 40,000"``, ``"The ""Quoted"" Game"``); other fields are kept
        as they are, quotes included. Whitespace runs and ``::`` have no quoting.
    sep : str, optional
        Explicit delimiter (overrides ``format``); ``"\\s+"`` means any run of spaces and tabs.
    header : bool, optional
        Whether the first line names the columns; ``None`` guesses: a line with any field
        that is a number or a date is data; otherwise it is a header when a field is a known
        column name (user, item, rating, timestamp, ``user-id``, ``userId``, ...), a column
        holds a word there and a number on the next line, or it holds every name given in
        ``columns``. A text-only line with none of these is data. The choice and its reason
        are in ``result.attrs["reading"]``. Naming columns in ``columns`` needs a header.
    columns : sequence of str or int, or comma-separated str, optional
        Which fields are user, item[, value[, timestamp]], by header name or 0-based
        position (columns count from 0 in every message and in ``attrs["reading"]`` too), e.g. ``"userId,movieId,rating,timestamp"`` or ``[0, 1, 2]``. A whole number
        is always a position, never a header name (a column named ``3`` is chosen by its
        position). By default the first four fields, in that order (with a header, up to the
        first unnamed column; without one, a last column empty on every line is dropped).
        Only these columns must be present and non-empty; others may be empty or missing.
    empty_ids : {"refuse", "drop"}
        A line whose user or item field is empty (an anonymous row, e.g. an empty customer
        id) refuses the file by default, saying how many there are; with ``drop`` such rows
        are kept in the table as they are, for the row rules to leave out and count
        (``from_dataframe(empty_ids="drop")``, ``prepare``); a line too short to have the
        field is refused either way.
    reader_options : sequence of str, keyword-only
        For programs that read files for their own users, as the commands do: which of
        ``format``, ``sep``, ``header``, ``columns`` and ``empty_ids`` the caller offers its
        users (default: all); a refusal is worded without the others.
    coded_ids : bool
        For big files (the memory of ``prepare``, ``train``, ``evaluate`` and ``convert``):
        the user and item columns may come as pandas ``Categorical`` columns of the same
        texts, categories in order of first appearance (int32 codes and one table of
        distinct ids instead of a string per row). Only the fast reader (a UTF-8 file
        without quotes) codes them; the caller takes either form.

    Returns
    -------
    pandas.DataFrame
        Columns ``user`` and ``item`` (str, exactly as in the file: spaces are kept) and,
        when present, ``value`` (float64) and ``timestamp`` (int64 Unix seconds), one row per
        data line. ``attrs["reading"]`` says what was found: the delimiter, whether line 1
        is a header (guessed or given, and why), each role's 0-based ``position`` and header
        ``name``, the ``ignored_columns`` (an unnamed or all-empty trailing column),
        ``empty_trailing_lines`` (lines read without their empty extra fields) and
        ``empty_id_rows`` (rows kept for ``empty_ids="drop"``). ``attrs["source"]`` is the
        file, so that refusals of the row rules name its lines; the index labels are the
        data rows (0 for the first).
    """
    check_empty_ids(empty_ids)
    if format not in FORMATS:
        raise InputError(f"unknown format {format!r}", path=str(path), hint=f"use one of {', '.join(FORMATS)}")
    p = input_path(path)
    if is_pipe(p):  # a pipe (<(...), /dev/stdin, -): read it once; a device or folder is refused
        with as_regular_file(p) as copy:
            out = read_ratings(copy, format=format, sep=sep, header=header, columns=columns, empty_ids=empty_ids,
                               coded_ids=coded_ids)
        out.attrs["source"] = str(path)  # the pipe, read once: rows are named, not its lines
        return out
    p = check_readable(p)
    if is_parquet(p, format):
        return _read_parquet(p, sep=sep, header=header, columns=columns, empty_ids=empty_ids)
    encoding = detect_encoding(p)
    lines = first_lines(p, n=5, encoding=encoding)  # five: ';' and '|' are guessed when they split them alike
    first_lineno, first = lines[0]
    if sep is None:
        sep = {"tsv": "\t", "csv": ","}.get(format) or detect_separator(first, [text for _, text in lines[1:]])
    if sep in ("\\t", "tab"):  # what people type on a command line
        sep = "\t"
    if sep == "":
        raise InputError("`sep` is empty", path=str(p), hint=r"give a delimiter, e.g. `sep=','` or `sep='\t'`")
    if quoted(sep):  # a quoted field may hold a line break: take whole records
        lines = list(data_lines(p, sep, limit=2, encoding=encoding))
        first_lineno, first = lines[0]
    chosen = normalise_columns(columns)
    if format == "movielens":
        header = False
    tokens = split_fields(first, sep)
    if len(tokens) < 2:
        raise _too_few_columns(first, first_lineno, sep, p)
    named = [c for c in chosen or () if not c.isdigit()]
    guessed = header is None
    why = ("MovieLens files have none" if format == "movielens" else
           "set by --header" if header else "set by --no-header")
    if header is None:
        second = split_fields(lines[1][1], sep) if len(lines) > 1 else None
        header, why = guess_header(tokens, second)
        if named and not header and set(named) <= {t.strip() for t in tokens}:
            header, why = True, "the --columns names are on it"
        if named and not header:
            raise InputError(
                f"`columns` names columns, but the file has no header line (line {first_lineno}: {_cut(first, 60)}; {why})",
                path=str(p), hint="give 0-based positions, e.g. `columns=0,1,2`, or add `header`",
            )
    header_names = tokens if header else None
    n_fields = len(tokens)
    used = _resolve_columns(chosen, header_names, n_fields, p)

    # Data starts after the header line (and any blank lines before it).
    skip = first_lineno if header else 0
    trailing = 0
    if header and len(lines) > 1 and len(split_fields(lines[1][1], sep)) > n_fields:
        # pandas would cut the first data line down to the header's width without a word:
        # fine for empty trailing fields (a spreadsheet's), not for anything else
        extra = split_fields(lines[1][1], sep)
        if any(f.strip(" \t") for f in extra[n_fields:]):
            raise InputError(f"expected {n_fields} columns like the first line, found {len(extra)} (the extra ones "
                             "not empty)", path=str(p), line=lines[1][0], hint=columns_hint(sep))
        trailing = 1
    raw = _read_fast(p, sep, skip, n_fields, used, encoding, wide_first=bool(trailing), coded=used[:2] if coded_ids else ())
    if raw is None:  # some field is bad: read everything as text to say which line
        raw = parse_table(p, sep, skip, n_fields, encoding=encoding, wide_first=bool(trailing))
    if len(raw) == 0:
        raise InputError("file has a header but no data lines", path=str(p), hint="expected one interaction per line")
    # the parser's count, when it met such lines past the first, includes the first
    trailing = raw.attrs.get("empty_trailing_lines", trailing)
    ignored = []
    if columns is None and header:
        # the columns that would have been read but for an unnamed one, and every unnamed
        # column (a trailing separator gives one wherever it is, even past the fourth)
        ignored = [{"position": i, "why": "no name in the header" if i == len(used) or i >= 4
                    else "after an unnamed column"}
                   for i in range(len(used), n_fields) if i < 4 or not tokens[i].strip()]  # the header's names
    if columns is None and not header:
        # a trailing separator on every line (or an unused empty tail) is not a column
        while len(used) > 2 and raw[used[-1]].dtype != np.float64 and (raw[used[-1]] == "").all():
            ignored.insert(0, {"position": used[-1], "why": "empty on every line"})
            used = used[:-1]
    empty = _empty_ids(raw, used, n_fields, p, sep, skip, encoding, empty_ids)
    check_fields(raw, used, n_fields, p, sep, skip, encoding, roles=CANONICAL_COLUMNS, id_roles=CANONICAL_COLUMNS[:2],
                 allow_empty=empty)

    out = pd.DataFrame({name: raw[pos] for name, pos in zip(("user", "item"), used)})
    refuse = functools.partial(refuse_row, path=p, sep=sep, skip=skip, encoding=encoding)
    if len(used) > 2:
        out["value"] = parse_values(raw[used[2]], refuse)
        # which column the value came from, for prepare's summary: its header name or "column N"
        # (counted from 0, as `columns` counts)
        out.attrs["value_column"] = header_names[used[2]] if header_names else f"column {used[2]}"
    if len(used) > 3:
        out["timestamp"] = parse_timestamps(raw[used[3]], refuse, f"column {used[3]}" + (
            f" {header_names[used[3]]!r}" if header_names else ""))
    out.attrs["encoding"] = encoding
    out.attrs["reading"] = _reading_record(sep, header, guessed, why, first_lineno, first, header_names, used,
                                           ignored, n_fields)
    out.attrs["reading"]["rows"] = len(out)  # labels 0..rows-1 are data rows: the row rules name lines by them
    out.attrs["source"] = str(p)  # so the row rules name its lines without being told the file
    out.attrs["reading"]["empty_trailing_lines"] = int(trailing)
    out.attrs["reading"]["empty_id_rows"] = int(empty.sum()) if empty is not None else 0
    return out


# -- a text file ------------------------------------------------------------------------------
def _empty_ids(raw: pd.DataFrame, used: List[int], n_fields: int, path: Path, sep: str, skip: int, encoding: str,
               empty_ids: str) -> Optional[np.ndarray]:
    """The rows with an empty user or item field, which ``empty_ids="drop"`` keeps for the
    row rules to drop (None when there are none); with ``refuse`` a refusal saying how many,
    naming the first line and the option. A line too short to have the field is refused
    as such, whichever the rule."""
    empty = np.zeros(len(raw), dtype=bool)
    roles = []  # the roles that have an empty id somewhere, for the count's words
    for role, pos in zip(CANONICAL_COLUMNS, used[:2]):
        blank = text_rows(raw[pos], lambda t: t.str.strip() == "")
        if blank.any():
            empty |= blank
            roles.append(role)
    if not empty.any():
        return None
    rows = set(np.flatnonzero(empty).tolist())
    first: Optional[Tuple[int, int, str, str]] = None
    for row, (lineno, text) in enumerate(data_lines(path, sep, skip, encoding=encoding)):
        if row not in rows:
            continue
        fields = split_fields(text, sep)
        if len(fields) <= max(used[:2]):  # no empty id: a line cut short
            raise InputError(f"expected {n_fields} columns like the first line, found {len(fields)}", path=str(path),
                             line=lineno, hint=columns_hint(sep))
        if first is None:
            pos = next((p for p in used[:2] if not fields[p].strip()), used[0])
            first = lineno, pos, CANONICAL_COLUMNS[used.index(pos)], "an empty" + (" (only spaces)" if fields[pos] else "")
            if empty_ids != "drop":
                break
        rows.discard(row)
        if not rows:
            break
    if empty_ids != "drop":
        assert first is not None  # the rows above hold an empty id: the loop met the first of them
        lineno, pos, role, what = first
        column = f"column {pos}" if len(roles) == 1 else f"columns {used[0]} and {used[1]}, here column {pos}"
        raise empty_ids_error(int(empty.sum()), " or ".join(roles), column, "on this line", path=str(path),
                              line=lineno, what=what)
    return empty


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
                    for role, pos in zip(CANONICAL_COLUMNS, used)},
        "ignored_columns": ignored,
    }


def _read_fast(path: Path, sep: str, skip: int, n_fields: int, used: List[int],
               encoding: str, wide_first: bool = False, coded: Sequence[int] = ()) -> Optional[pd.DataFrame]:
    """Parse ratings and timestamps as numbers straight away (4x faster than text + convert).

    Returns ``None`` when any of them is not a finite number (or a timestamp is a date, or a
    field is missing), so the caller falls back to the text path, which finds the line or
    converts the dates. Only the ``used`` columns are read; the ``coded`` ones may come as
    a ``Categorical`` (:func:`~mrec_warp.data.delimited.parse_table`).
    """
    numeric = used[2:]
    if not numeric:
        return parse_table(path, sep, skip, n_fields, encoding=encoding, wide_first=wide_first, coded=coded,
                           wanted=used)
    try:
        raw = parse_table(path, sep, skip, n_fields, numeric, encoding=encoding, wide_first=wide_first, coded=coded,
                          wanted=used)
    except ValueError as exc:
        if isinstance(exc, InputError):
            raise
        return None
    for pos in numeric:
        if not np.isfinite(raw[pos].to_numpy()).all():
            return None
    return raw


#: Delimiters suggested when the one in use leaves a line in one piece, in order of preference.
_SEPARATORS = ((",", "','"), ("\t", "'\\t'"), (";", "';'"), ("|", "'|'"), (WHITESPACE, "'\\s+'"))


def _too_few_columns(text: str, lineno: int, sep: str, path: Path) -> InputError:
    """The error for a line that ``sep`` does not split, suggesting a delimiter that does.

    The one in use is never suggested; neither is one that leaves the line in one piece.
    """
    fits = [shown for cand, shown in _SEPARATORS if cand != sep and len(split_fields(text, cand)) >= 2]
    shown = dict(_SEPARATORS).get(sep, repr(sep))
    hint = (f"the delimiter is {shown}, which this line does not hold; try `sep={fits[0]}`" if fits else
            "put a delimiter (tab, comma, ...) between user and item, and give it with `sep`")
    return InputError(f"expected at least 2 columns (user, item), found 1: {_cut(text, 60)}",
                      path=str(path), line=lineno, hint=hint)


# -- which columns are user, item, value and timestamp ----------------------------------------
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
            known = (", ".join(h if h.strip() else f"column {i} (no name)" for i, h in enumerate(header_names))
                     if header_names else "none (file has no header)")
            raise InputError(
                f"column {c!r} not found; header columns: {known}", path=str(path),
                hint="name header columns or give 0-based positions, e.g. `columns=0,1,2`",
            )
        if pos in chosen:
            raise InputError(f"column {c!r} is chosen twice", path=str(path), hint="give each column once")
        chosen.append(pos)
    return chosen


# -- the header line --------------------------------------------------------------------------
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


def _is_data_value(token: str) -> bool:
    """Whether a field is a number or a date, which no column name is."""
    t = token.strip()
    return bool(_NUMBER.fullmatch(t) or _ISO_DATE.match(t))


def guess_header(first: List[str], second: Optional[List[str]]) -> Tuple[bool, str]:
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
        return False, f"column {numbers[0]} holds {first[numbers[0]]!r}, a number"
    words = [t for t in first if _NOT_ALNUM.sub("", t.lower()) in _HEADER_WORDS]
    if words:
        return True, f"{words[0]!r} is a column name and no field is a number"
    for i, (a, b) in enumerate(zip(first, second or [])):
        if a and _is_data_value(b):
            return True, f"column {i} holds the word {a!r} above the number {b.strip()!r}"
    return False, "no field is a number, but no column name was recognised either"


# -- values and timestamps --------------------------------------------------------------------
def refuse_row(kind: str, text: str, why: str, row: int, hint: str, path: Path, sep: str, skip: int,
               encoding: str) -> None:
    raise InputError(f"{kind} {text!r} {why}", path=str(path),
                     line=data_line(path, row, sep, skip, encoding)[0], hint=hint)


#: How the value and timestamp parsers refuse a row: (kind, text, why, row, hint) -> raises;
#: a text file names the row's line, a Parquet file its data row.
Refuse = Callable[[str, str, str, int, str], None]


def timestamp_hint(column: Optional[str] = None) -> str:
    """The hint of every refused timestamp, whatever the format: a 4th column taken by
    default (a note, a category) is the usual cause, so it names that column (``column``,
    e.g. ``column 3 'note'``) and the option that chooses the columns."""
    which = column or "that column"
    return (f"use Unix seconds or ISO dates (2024-01-31T12:00:00) in the timestamp column; if {which} is no "
            "timestamp (without `columns` the 4th column is taken as one), choose the columns with `columns`, "
            "e.g. `columns=0,1,2` for user, item and value")


def value_hint(row: int) -> str:
    """What to do about a value column entry that is not a number, at data row ``row``: the
    first row of a file read without a header is most likely its header."""
    if row == 0:
        return "the first line looks like a header: drop `--no-header` (or give `--header`), or use `columns` to choose columns"
    return "the rating column must be numeric; use `columns` to choose columns"


def parse_values(values: pd.Series, refuse: Refuse) -> np.ndarray:
    """The value column as finite float64 numbers of at most :data:`MAX_ABS_VALUE`."""
    if values.dtype == np.float64:  # already parsed and checked finite by _read_fast
        parsed, text = values.to_numpy(), values
    else:
        text = values.str.strip()
        parsed = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        bad = ~np.isfinite(parsed)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            refuse("rating", values.iloc[row], "is not a finite number", row, value_hint(row))
    big = np.abs(parsed) > MAX_ABS_VALUE
    if big.any():
        row = int(np.flatnonzero(big)[0])
        refuse("rating", str(text.iloc[row]), f"is too large (the limit is {MAX_ABS_VALUE:g})", row,
               "scale the values down, e.g. hours instead of milliseconds")
    return parsed


def parse_timestamps(stamps: pd.Series, refuse: Refuse, column: Optional[str] = None) -> np.ndarray:
    """Unix seconds, or dates (ISO 8601) converted to Unix seconds (``column``: the column's
    words for a refusal's hint, e.g. ``column 3 'note'``)."""
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
        refuse("timestamp", str(stamps.iloc[row]), "is too large for a time in seconds", row, timestamp_hint(column))
    if is_number.all():
        return numeric.astype(np.int64)
    try:
        parsed = pd.to_datetime(text, errors="coerce", utc=True, format="ISO8601")
    except (TypeError, ValueError):  # pandas < 2 has no format="ISO8601"
        parsed = pd.to_datetime(text, errors="coerce", utc=True)
    bad = parsed.isna().to_numpy() & ~is_number
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        refuse("timestamp", stamps.iloc[row], "is neither a number nor a date", row, timestamp_hint(column))
    seconds = ((parsed - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(seconds=1)).to_numpy(dtype=np.float64, na_value=0)
    return np.where(is_number, numeric, seconds).astype(np.int64)


# -- a Parquet file ---------------------------------------------------------------------------
#: Unix seconds per unit of an Arrow timestamp.
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def _read_parquet(path: Path, sep: Optional[str] = None, header: Optional[bool] = None,
                  columns: Optional[Sequence] = None, empty_ids: str = "refuse") -> pd.DataFrame:
    """The canonical table of a Parquet file (see :func:`read_ratings`).

    ``columns`` chooses user, item[, value[, timestamp]] by name or 0-based position among
    the file's columns (a stored pandas index is not one); by default the first four.
    ``sep`` and ``header`` do not apply (Parquet names its columns) and are refused.
    """
    check_empty_ids(empty_ids)
    path = Path(path)
    if sep is not None or header is not None:
        given = "`sep`" if sep is not None else "`header`"
        raise InputError(f"{given} does not apply to a Parquet file, whose columns are named in the file",
                         path=str(path), hint="leave it out; choose columns with `columns`")

    def choose(names: List[str]) -> List[int]:
        if len(names) < 2:
            raise InputError(f"expected at least 2 columns (user, item), the file has {len(names)}",
                             path=str(path), hint="write the user and item ids as two columns")
        return _resolve_columns(normalise_columns(columns), names, len(names), path)

    read = read_columns(path, choose)
    names, used, cols = read.names, read.chosen, read.columns
    if read.num_rows == 0:
        raise InputError("the Parquet file has no rows", path=str(path), hint="expected one interaction per row")
    pa = pyarrow("reading a Parquet file", str(path))

    def refuse(kind: str, text, why: str, row: int, hint: str) -> None:
        raise InputError(f"{kind} {text!r} in data row {row + 1} {why}", path=str(path), hint=hint)

    ids = {}
    for role, col, pos in zip(CANONICAL_COLUMNS[:2], cols, used):
        try:
            ids[role] = id_texts(col)
        except InputError as exc:  # the Arrow rule knows neither the file nor the column
            raise InputError(f"{role} id column {pos} {names[pos]!r}: {exc.message}", path=str(path),
                             hint=exc.hint) from None
    out = pd.DataFrame(ids)
    empty = _check_parquet_ids(out, used, names, path, empty_ids)
    if len(used) > 2:
        try:
            values = number_values(cols[2])
        except InputError as exc:  # the Arrow rule knows neither the file nor the column
            raise InputError(f"value column {used[2]} {names[used[2]]!r}: {exc.message}", path=str(path),
                             hint=exc.hint) from None
        bad = ~np.isfinite(values)
        if bad.any():
            row = int(np.argmax(bad))
            refuse("rating", cols[2][row].as_py(), "is not a finite number", row, value_hint(row))
        out["value"] = parse_values(pd.Series(values), refuse)  # the size limit
        out.attrs["value_column"] = names[used[2]]
    if len(used) > 3:
        column = f"column {used[3]} {names[used[3]]!r}"
        out["timestamp"] = parse_timestamps(_parquet_timestamps(cols[3], pa, refuse, column, str(path)), refuse, column)
    out.attrs["encoding"] = "utf-8"  # Arrow strings are UTF-8
    out.attrs["reading"] = {
        "format": "parquet", "sep": None, "header": True, "header_guessed": False,
        "header_reason": "a Parquet file names its columns", "header_line": None, "fields": len(names),
        "columns": {role: {"position": pos, "name": names[pos]} for role, pos in zip(CANONICAL_COLUMNS, used)},
        "ignored_columns": [], "rows": len(out), "empty_trailing_lines": 0,
        "empty_id_rows": int(empty.sum()),
    }
    out.attrs["source"] = str(path)
    return out


def _check_parquet_ids(out: pd.DataFrame, used: List[int], names: List[str], path: Path, empty_ids: str) -> np.ndarray:
    """The rows with an empty or null user or item id (kept for ``empty_ids="drop"``, else
    refused as a text file's empty fields are), after refusing ids a text output cannot
    hold: a tab or line break, or more than :data:`~mrec_warp.data.inputs.MAX_ID_LENGTH`
    characters."""
    empty = np.zeros(len(out), dtype=bool)
    roles, first = [], None
    for role, pos in zip(CANONICAL_COLUMNS[:2], used[:2]):
        ids = out[role]
        missing = ids.isna().to_numpy(dtype=bool)
        text = ids.fillna("")
        blank = missing | (text.str.strip() == "").to_numpy(dtype=bool)
        if blank.any():
            row = int(np.argmax(blank))
            if first is None or row < first[0]:
                first = row, pos, "a missing (null)" if missing[row] else (
                    "an empty" + (" (only spaces)" if text.iloc[row] else ""))
            empty |= blank
            roles.append(role)
        long = (text.str.len() > inputs.MAX_ID_LENGTH).to_numpy(dtype=bool)
        if long.any():
            row = int(np.argmax(long))
            raise InputError(f"{role} id {text.iloc[row][:40]!r}... in data row {row + 1} is "
                             f"{len(text.iloc[row]):,} characters long; the limit is {inputs.MAX_ID_LENGTH:,}",
                             path=str(path), hint="a model cannot hold ids this long; check which columns are the ids")
        unsafe = text.str.contains(TSV_UNSAFE.pattern, regex=True).to_numpy(dtype=bool)
        if unsafe.any():
            row = int(np.argmax(unsafe))
            raise InputError(f"{role} id {text.iloc[row]!r} in data row {row + 1} holds a tab or line break, "
                             "which TSV outputs cannot hold", path=str(path),
                             hint="remove tabs and line breaks from ids")
    if first is not None and empty_ids != "drop":
        row, pos, what = first
        column = f"column {pos} {names[pos]!r}"
        raise empty_ids_error(int(empty.sum()), " or ".join(roles), column, f"in data row {row + 1}",
                              path=str(path), what=what)
    return empty


def _parquet_timestamps(column, pa, refuse, words: Optional[str] = None, source: Optional[str] = None) -> pd.Series:
    """A Parquet timestamp column as :func:`parse_timestamps` takes it: float64 seconds for numbers,
    dates and Arrow timestamps, text for text; a null, or a column of another type (a list, a
    struct), is refused (``words`` names the column, ``source`` the file)."""
    column = one_array(column)
    if column.null_count:
        row = int(np.argmax(column.is_null().to_numpy(zero_copy_only=False)))
        refuse("timestamp", None, "is empty", row, timestamp_hint(words))
    kind = column.type
    if pa.types.is_date(kind):
        column = pa.compute.cast(column, pa.timestamp("s"))
        kind = column.type
    if pa.types.is_timestamp(kind):
        ticks = pa.compute.cast(column, pa.int64()).to_numpy(zero_copy_only=False)
        return pd.Series(np.floor_divide(ticks, _PER_SECOND[kind.unit]).astype(np.float64))
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        seconds = pa.compute.cast(column, pa.float64(), safe=False).to_numpy(zero_copy_only=False)
        bad = ~np.isfinite(seconds)
        if bad.any():
            row = int(np.argmax(bad))
            refuse("timestamp", float(seconds[row]), "is neither a number nor a date", row, timestamp_hint(words))
        return pd.Series(seconds)
    if not is_text_type(kind):
        raise InputError(f"timestamp {words or 'column'} is of type {kind}, which holds neither dates nor numbers",
                         path=source, hint=timestamp_hint(words))
    return pd.Series(id_texts(column), dtype=object)


# -- what the reader found, in words ----------------------------------------------------------
def _cut(text: str, limit: int) -> str:
    """``text`` quoted as Python does, cut to ``limit`` characters with an ellipsis when longer."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."


def describe_reading(r: Dict[str, Any]) -> str:
    """Two lines from ``read_ratings``' ``attrs["reading"]``: what line 1 is, and which
    column became user, item, value and timestamp. Columns count from 0 here as in
    ``--columns`` (which the line repeats) and in every message."""
    if r.get("format") == "parquet":  # columns named in the file, no header line
        first = f"Parquet file of {plural(r['fields'], 'column')}, named in the file"
    elif r["header"]:
        line = r["header_line"]
        first = (f"line {line['line']} taken as a header: {_cut(line['text'], 80)} "
                 f"({r['header_reason']}; use --no-header if it is data)" if r["header_guessed"] else
                 f"line {line['line']} is a header ({r['header_reason']})")
    else:
        first = "no header line" + (f" ({r['header_reason']}" + (
            "; use --header if line 1 names the columns)" if "no column name" in r["header_reason"] else ")"))
    roles = ", ".join(f"{role} = column {c['position']}" + (f" {c['name']!r}" if c["name"] is not None else "")
                      for role, c in r["columns"].items())
    ignored = "".join(f"; column {c['position']} ignored ({c['why']})" for c in r["ignored_columns"])
    if r.get("empty_trailing_lines"):
        ignored += (f"\n{plural(r['empty_trailing_lines'], 'line')} had empty trailing fields (beyond the "
                    f"{r['fields']} columns of the first line), ignored")
    again = ",".join(str(c["position"]) for c in r["columns"].values())
    return f"{first}\ncolumns (counted from 0): {roles} (--columns {again}){ignored}"
