"""Records and fields of a delimited text file, as the table readers see them.

Shared by the readers of ratings files (:mod:`~mrec_warp.data.ratings`), feature files
(:mod:`~mrec_warp.data.features`) and recommendation files
(:mod:`~mrec_warp.evaluation.recs_file`): which lines are records and what their line numbers
are (a quoted field may span lines), how a record splits into fields, the guess of the
delimiter, and the parse of the whole table with pandas' C parser. The checks of the
columns in use are :mod:`~mrec_warp.data.field_checks`'.

Quoting follows RFC 4180 with every one-character delimiter (``,``, ``;``, tab, ``|``,
...): a field that starts with ``"`` is quoted, may hold the delimiter, line breaks and
doubled quotes (``""`` is one ``"``), and loses its quotes; any other field is kept as it
is, a quote inside it included (``O"Brien``). A whitespace-separated file (:data:`WHITESPACE`)
and a MovieLens ``::`` file have no quoting: quotes are characters of the id there.
"""
from __future__ import annotations

import csv
import re
import warnings
import zlib
from pathlib import Path
from typing import IO, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from ..errors import InputError
from .inputs import MAX_LINE_BYTES, detect_encoding, open_text

#: The ``sep`` meaning any run of whitespace: spaces and tabs, as pandas' C parser splits
#: (not a no-break space or other Unicode spaces, which stay part of an id).
WHITESPACE = r"\s+"

_SPACES = re.compile(r"[ \t]+")

# Python's csv module stops at fields over 128 KiB; a line may be up to MAX_LINE_BYTES
# (checked before any parsing), and pandas reads such fields, so the line readers must too.
csv.field_size_limit(max(csv.field_size_limit(), MAX_LINE_BYTES))


def quoted(sep: str) -> bool:
    """Whether fields separated by ``sep`` follow RFC 4180 quoting: every one-character
    delimiter; not :data:`WHITESPACE` runs nor MovieLens' ``::``."""
    return len(sep) == 1


def _is_blank(line: str, sep: str) -> bool:
    """Whether pandas' C parser skips ``line`` as blank.

    It skips lines made only of spaces and tabs, except that a line holding the delimiter
    itself (a tab in a TSV) is a row of empty fields. Only used to map rows to line numbers.
    """
    body = line.rstrip("\r\n")
    if sep == WHITESPACE:
        return body.strip(" \t") == ""
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


def data_lines(path: Path, sep: str, skip: int = 0, limit: Optional[int] = None,
                encoding: Optional[str] = None, quoting: Optional[bool] = None) -> Iterator[Tuple[int, str]]:
    """Yield ``(1-based line number, text)`` of the records after the first ``skip`` lines.

    Blank lines are left out. With quoting (by default when :func:`quoted` says so for
    ``sep``) a record is a whole RFC 4180 row (a quoted field may span lines) and its number
    is that of its first line.
    """
    with open_text(path, encoding) as fh:
        for _ in range(skip):
            if not fh.readline():
                return
        if quoted(sep) if quoting is None else quoting:
            tap, lineno = _LineTap(fh), skip + 1
            for _row in _csv_rows(tap, sep, path, lambda: lineno):  # noqa: B023 - the line now, when called
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


def _csv_rows(lines: Iterator[str], sep: str, path: Path, lineno) -> Iterator[List[str]]:
    """RFC 4180 rows of ``lines``; a field over the csv module's limit (only possible in a
    quoted field spanning lines) is an error naming the line it starts on (``lineno()``)."""
    rows = csv.reader(lines, delimiter=sep, doublequote=True, strict=False)
    while True:
        try:
            yield next(rows)
        except StopIteration:
            return
        except csv.Error as exc:
            raise InputError(f"cannot split the record ({exc})", path=str(path), line=lineno(),
                             hint="a quote opened here may never be closed; add the closing quote") from None


def first_lines(path: Path, n: int = 2, encoding: Optional[str] = None) -> List[Tuple[int, str]]:
    """The first ``n`` non-blank records, or an error for a file with none."""
    lines = list(data_lines(path, WHITESPACE, limit=n, encoding=encoding))
    if not lines:
        raise InputError("file has no data lines", path=str(path), hint="expected one interaction per line")
    return lines


def data_line(path: Path, row: int, sep: str, skip: int, encoding: Optional[str] = None) -> Tuple[int, str]:
    """Line number and text of the ``row``-th (0-based) data row the parser saw."""
    for i, (lineno, text) in enumerate(data_lines(path, sep, skip, encoding=encoding)):
        if i == row:
            return lineno, text
    return -1, ""  # pragma: no cover - rows always come from the file


def detect_separator(line: str, others: Optional[Sequence[str]] = None) -> str:
    """Guess the delimiter of a ratings file from its first line (and the next ones, ``others``).

    ``::``, then tab, then comma when line 1 holds one; otherwise, or when commas do not
    split the lines into the same number (>= 2) of fields while ``;`` (then ``|``) does,
    quotes respected (the book-ratings layout ``"User-ID";"ISBN";"Book-Rating"``), that
    one; else runs of whitespace. Lines that no delimiter splits alike are left to the
    whitespace reading, whose error suggests one. Lines that whitespace splits alike, into
    more numbers (``u1 a;b 5``: ids holding ``;``), stay whitespace-separated. Without
    ``others`` (feature files, whose feature names may hold ``;``) only ``::``, tab, comma
    and whitespace are guessed.
    """
    if "::" in line:
        return "::"
    if "\t" in line:
        return "\t"
    lines = [line, *(others or ())]

    def splits(sep: str) -> bool:
        counts = {len(split_fields(text, sep)) for text in lines}
        return len(counts) == 1 and min(counts) >= 2

    def numbers(sep: str) -> int:
        return sum(looks_numeric(f.strip()) for text in lines for f in split_fields(text, sep))

    if "," in line and splits(","):
        return ","
    for sep in (";", "|") if others is not None else ():
        if sep in line and splits(sep):
            # a whitespace-separated file whose ids hold the character (u1 a;b 5) splits alike
            # on whitespace too, and into more numbers (its values): whitespace is its delimiter
            if not (splits(WHITESPACE) and numbers(WHITESPACE) > numbers(sep)):
                return sep
    if "," in line:
        return ","
    return WHITESPACE


def split_fields(line: str, sep: str, quoting: Optional[bool] = None) -> List[str]:
    """The fields of one record exactly as the table parser sees them (ids are not stripped).

    One-character delimiters follow RFC 4180 (a quoted field may hold the delimiter, line
    breaks and doubled quotes) unless ``quoting`` is False; whitespace runs and ``::`` take
    quotes as ordinary characters.
    """
    if sep == WHITESPACE:
        body = line.strip(" \t")
        return _SPACES.split(body) if body else []
    if quoted(sep) if quoting is None else quoting:
        return next(csv.reader([line], delimiter=sep, doublequote=True, strict=False), [""])
    return line.split(sep)


def looks_numeric(token: str) -> bool:
    try:
        float(token)
        return True
    except ValueError:
        return False


def normalise_columns(columns: Optional[Union[str, Sequence]]) -> Optional[List[str]]:
    if columns is None:
        return None
    if isinstance(columns, str):
        columns = columns.split(",")
    out = [str(c).strip() for c in columns]
    return [c for c in out if c] or None


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


def parse_table(path: Path, sep: str, skip: int, n_fields: int, numeric: Sequence[int] = (),
                 encoding: Optional[str] = None, wide_first: bool = False, coded: Sequence[int] = (),
                 wanted: Optional[Sequence[int]] = None) -> pd.DataFrame:
    """The fields of every data row, one column per field position.

    Fields at the ``numeric`` positions are parsed as float64 (a ``ValueError`` when one is
    not a number, which the caller answers by re-reading as strings to find the line); all
    others are strings, exactly as in the file. A line with more fields than ``n_fields`` is
    an error, except the first one read, which pandas silently cuts short: the caller checks
    that one itself. A shorter line has its missing fields empty.

    Lines whose fields beyond ``n_fields`` are all empty (``...,Country,,``: a spreadsheet's
    trailing empty columns) are read without them; how many there were is in
    ``result.attrs["empty_trailing_lines"]``. Extra fields holding anything refuse the file,
    naming the line. ``wide_first``: the caller found the first data line longer (with
    empty extra fields); pandas would take its width for every line, cutting longer ones
    short without a word, so the file is scanned for extra fields first.

    For big files: ``wanted`` (positions) lets the fast reader (:func:`_read_arrow`) leave
    out the other columns' text (every line is still split and checked whole), and a column
    at a ``coded`` position may come as a pandas ``Categorical`` of its distinct texts,
    categories in order of first appearance, instead of one string per row. Callers take
    either form: the other readers give every column, as text.
    """
    encoding = encoding or detect_encoding(path)
    found, line = n_fields, None
    if not wide_first:
        try:
            return _parse(path, sep, skip, n_fields, numeric, encoding, coded, wanted)
        except _TooManyFields as exc:
            found, line = exc.args
    n_lines, widest, bad = trailing_fields(path, sep, skip, n_fields, encoding)
    if bad is not None:
        raise InputError(f"expected {n_fields} columns like the first line, found {bad[1]} (the extra ones not "
                         "empty)", path=str(path), line=bad[0], hint=columns_hint(sep))
    if widest <= n_fields:  # pragma: no cover - the parser saw a longer line, the scan must too
        raise InputError(f"expected {n_fields} columns like the first line, found {found}", path=str(path),
                         line=line, hint=columns_hint(sep))
    raw = _parse(path, sep, skip, widest, numeric, encoding, coded, wanted)  # every extra field is empty: drop them
    raw = raw[[i for i in range(n_fields) if i in raw]]
    raw.attrs["empty_trailing_lines"] = n_lines
    return raw


class _TooManyFields(Exception):
    """pandas' C parser met a line with more fields than expected: (fields found, line)."""


def trailing_fields(path: Path, sep: str, skip: int, n_fields: int, encoding: Optional[str] = None
                    ) -> Tuple[int, int, Optional[Tuple[int, int]]]:
    """``(lines with fields beyond n_fields, the most fields of a line, (line, fields) of
    the first line whose extra fields are not all empty, or None)``: one pass over the data
    rows, run only when the parser met a line with too many fields."""
    n_lines, widest = 0, n_fields
    for lineno, text in data_lines(path, sep, skip, encoding=encoding):
        fields = split_fields(text, sep)
        if len(fields) <= n_fields:
            continue
        if any(f.strip(" \t") for f in fields[n_fields:]):
            return n_lines, widest, (lineno, len(fields))
        n_lines, widest = n_lines + 1, max(widest, len(fields))
    return n_lines, widest, None


def _parse(path: Path, sep: str, skip: int, n_fields: int, numeric: Sequence[int], encoding: str,
           coded: Sequence[int] = (), wanted: Optional[Sequence[int]] = None) -> pd.DataFrame:
    text_sep, fh = sep, None
    source: Union[Path, _ReplacingReader] = path
    if sep == "::":
        fh = open_text(path, encoding)
        source, text_sep = _ReplacingReader(fh, "::", "\t"), "\t"
    # No usecols: with it pandas silently drops extra fields, and a line with an unquoted
    # separator in an id must be reported, not read with its columns shifted.
    names = list(range(n_fields))
    try:
        fast = _read_arrow(path, sep, skip, names, numeric, encoding, coded, wanted) if fh is None else None
        if fast is not None:
            return fast
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", pd.errors.ParserWarning)
            table = _read_csv(source, text_sep, skip, names, numeric, encoding, sep)
        for w in caught:
            # "names do not match the data": the first line read is longer, and pandas took its
            # width for every line, cutting each one short without a word: scan for the extra fields
            if issubclass(w.category, pd.errors.ParserWarning) and "names does not match" in str(w.message):
                raise _TooManyFields(n_fields + 1, None)
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)  # others as they were
        return table
    except pd.errors.ParserError as exc:
        opened = unclosed_quote(path, sep, skip, n_fields, encoding) if quoted(sep) else None
        if opened is not None:
            raise InputError("a quote opened here is never closed", path=str(path), line=opened,
                             hint="add the closing quote; a quote inside a quoted field is written twice, and "
                                  'an id that starts with a quote is written quoted ("""a" for the id "a)') from None
        m = re.search(r"line (\d+), saw (\d+)", str(exc))
        if not m:
            raise InputError(f"cannot parse: {exc}", path=str(path),
                             hint="check `sep` / `format`" + (" and that quotes are balanced" if quoted(sep) else "")) from None
        line = int(m.group(1))
        raise _TooManyFields(int(m.group(2)), _file_line(path, sep, line, encoding) if quoted(sep) else line) from None
    except (EOFError, OSError, zlib.error) as exc:
        raise InputError(f"cannot read the file ({exc})", path=str(path),
                         hint="the file is truncated or corrupt; re-create or re-download it") from None
    finally:
        if fh is not None:
            fh.close()


def _read_csv(source, text_sep: str, skip: int, names: List[int], numeric: Sequence[int], encoding: str,
              sep: str) -> pd.DataFrame:
    return pd.read_csv(
        source, sep=text_sep, header=None, skiprows=skip, names=names,
        dtype={i: (np.float64 if i in numeric else str) for i in names},
        encoding=encoding, engine="c", index_col=False,
        skip_blank_lines=True, keep_default_na=False, na_values=[],
        # RFC 4180 quoting for one-character delimiters (see quoted()); "::" is read as a
        # tab here, but has no quoting
        quoting=csv.QUOTE_MINIMAL if quoted(sep) else csv.QUOTE_NONE, doublequote=True,
    )


#: The dtype pandas' C parser gives a column read as text (``str`` from pandas 3, else object).
_TEXT_DTYPE = pd.Series([""], dtype=str).dtype


def _read_arrow(path: Path, sep: str, skip: int, names: List[int], numeric: Sequence[int],
                encoding: str, coded: Sequence[int] = (), wanted: Optional[Sequence[int]] = None
                ) -> Optional[pd.DataFrame]:
    """The table as :func:`_read_csv` reads it, by pyarrow's multi-threaded CSV reader (about
    10x faster on 10M rows), or ``None`` whenever the two could differ: pyarrow missing, a
    compressed or non-UTF-8 file, a header below line 1, a delimiter of several characters,
    a double quote anywhere in the file, any line pyarrow cannot split into exactly
    ``len(names)`` fields (a short, long or blank-looking line) or a number it cannot
    parse. Without quotes there is no quoting, so the file reads as the C parser reads
    it, field for field; a file with quotes goes to the C parser, which applies the quoting
    rules, and so does every fault, which it names by line.

    Only the ``wanted`` columns (default all) are converted; the ``coded`` ones come as a
    pandas ``Categorical`` (:func:`_categorical`): the ids of 10M rows as int32 codes and
    one table of distinct texts, not 10M strings with their offsets."""
    if encoding != "utf-8" or not quoted(sep) or sep in '"\r\n' or skip > 1 or path.suffix == ".gz":
        return None
    try:
        import pyarrow as pa
        from pyarrow import csv as pa_csv
    except ImportError:
        return None
    with open(path, "rb") as fh:
        if fh.read(2) == b"\x1f\x8b":  # gzip under another name: the C parser's message names it
            return None
        fh.seek(0)
        if any(b'"' in block for block in iter(lambda: fh.read(1 << 22), b"")):  # GB/s
            return None
    keys = [str(i) for i in names]
    kept = [(i, k) for i, k in zip(names, keys) if wanted is None or i in wanted]
    coding = pa.dictionary(pa.int32(), pa.string())
    try:
        table = pa_csv.read_csv(
            str(path),
            read_options=pa_csv.ReadOptions(column_names=keys, skip_rows=skip),
            parse_options=pa_csv.ParseOptions(delimiter=sep, quote_char=False, escape_char=False,
                                              newlines_in_values=False, ignore_empty_lines=True),
            convert_options=pa_csv.ConvertOptions(
                column_types={k: pa.float64() if i in numeric else coding if i in coded else pa.string()
                              for i, k in kept},
                include_columns=[k for _, k in kept],
                null_values=[], strings_can_be_null=False, quoted_strings_can_be_null=False, check_utf8=True),
        )
    except (pa.ArrowException, OSError, ValueError):
        return None
    out = {}
    for i, k in kept:
        # each column leaves the Arrow table as it is converted: no moment holds both whole
        column = table.column(k)
        table = table.drop_columns([k])
        if i in numeric:
            if column.null_count:
                return None
            out[i] = column.to_numpy()
        elif i in coded:
            out[i] = _categorical(column)
        else:
            text = column.to_pandas()
            out[i] = text if text.dtype == _TEXT_DTYPE else text.astype(_TEXT_DTYPE)
        del column
    pa.default_memory_pool().release_unused()  # the parser's blocks, kept by the allocator otherwise
    return pd.DataFrame(out, columns=[i for i, _ in kept])


def _categorical(column) -> pd.Series:
    """An Arrow dictionary column (one dictionary per block read) as one pandas
    ``Categorical``: the blocks' dictionaries unified in block order, so the categories are
    the distinct texts in order of first appearance (as ``pandas.factorize`` numbers them)
    and every category is used."""
    chunks = column.unify_dictionaries().chunks if column.num_chunks > 1 else column.chunks
    if not chunks:
        categories = pd.Index([], dtype=_TEXT_DTYPE)
        codes = np.zeros(0, dtype=np.int32)
    else:
        categories = pd.Index(chunks[0].dictionary.to_pandas()).astype(_TEXT_DTYPE)
        codes = np.concatenate([chunk.indices.to_numpy(zero_copy_only=False) for chunk in chunks])
    return pd.Series(pd.Categorical.from_codes(codes.astype(np.int32, copy=False),
                                               dtype=pd.CategoricalDtype(categories), validate=False))


def _file_line(path: Path, sep: str, parser_line: int, encoding: str) -> int:
    """The file's line number of what pandas' C parser calls line ``parser_line``: it counts
    every line, blank ones too, but not the line breaks inside quoted fields."""
    with open_text(path, encoding) as fh:
        tap, count, line = _LineTap(fh), 0, 1
        for _row in _csv_rows(tap, sep, path, lambda: line):  # noqa: B023 - the line now, when called
            count += 1
            if count == parser_line:
                return line
            line += len(tap.take())
    return parser_line  # pragma: no cover - the parser's line is always in the file


def unclosed_quote(path: Path, sep: str, skip: int, n_fields: int, encoding: Optional[str] = None) -> Optional[int]:
    """The line of a quoted file (see :func:`quoted`) where a quote opens that is never closed, or None.

    A quote left open swallows the line breaks after it, up to the next quote in the file
    or to its end: the record then spans several lines and has the wrong number of fields
    (a field that rightly holds a line break leaves its record with the right number), or,
    on the last line, the record ends with an odd number of quotes.
    """
    last = None
    for lineno, text in data_lines(path, sep, skip, encoding=encoding):
        if "\n" in text and len(split_fields(text, sep)) != n_fields:
            return lineno
        last = lineno, text
    if last is not None and last[1].count('"') % 2:
        return last[0]
    return None


def _field_after_quote(record: str, sep: str) -> Optional[int]:
    """The index of the first field of ``record`` that is quoted and has text after its
    closing quote (``"quoted" start``), or ``None``. A field that does not start with a quote
    is text as it is (``O"Brien``); a quote left open is :func:`unclosed_quote`'s concern."""
    i, field, n = 0, 0, len(record)
    while True:
        if i < n and record[i] == '"':
            j = i + 1
            while True:
                k = record.find('"', j)
                if k < 0:
                    return None
                if record.startswith('""', k):
                    j = k + 2
                    continue
                break
            if k + 1 < n and record[k + 1] not in (sep, "\r", "\n"):
                return field
            i = k + 1
        k = record.find(sep, i)
        if k < 0:
            return None
        i, field = k + 1, field + 1


def text_after_quote(path: Path, sep: str, skip: int, columns: Sequence[int],
                     encoding: Optional[str] = None) -> Optional[Tuple[int, int, str]]:
    """``(line, column, record)`` of the first record of a quoted file (see :func:`quoted`)
    whose field in one of ``columns`` has text after its closing quote, or ``None``.

    RFC 4180 ends a quoted field at its closing quote; pandas' parser (like the csv module
    when not strict) glues what follows onto the field, so ``"quoted" start`` would become the
    id ``quoted start``, which the file does not say. The file is screened in large blocks
    for a quote followed by something other than a delimiter, a line end or another quote
    (a file without quotes costs one read); only then are its records split exactly."""
    if not quoted(sep):
        return None
    s = re.escape(sep)
    suspect = re.compile(rf'(?:^|{s})"(?:[^"]|"")*"[^{s}"\r\n]', re.M)
    found, tail = False, ""
    with open_text(path, encoding) as fh:
        for block in iter(lambda: fh.read(1 << 22), ""):
            block = tail + block
            cut = block.rfind("\n") + 1
            block, tail = (block[:cut], block[cut:]) if cut else ("", block)
            if '"' in block and suspect.search(block):
                found = True
                break
        found = found or ('"' in tail and bool(suspect.search(tail)))
    if not found:
        return None
    wanted = set(columns)
    for lineno, text in data_lines(path, sep, skip, encoding=encoding):
        if '"' not in text:
            continue
        field = _field_after_quote(text, sep)
        if field is not None and field in wanted:
            return lineno, field, text
    return None


def columns_hint(sep: str) -> str:
    if sep == ",":
        return 'every line needs the same columns; quote a field that holds a comma ("a, b")'
    if quoted(sep):
        return (f"every line needs the same columns; check `sep` ({sep!r}), and quote a field that "
                f'holds it ("a{sep}b")')
    return "every line needs the same columns; check `sep`"

