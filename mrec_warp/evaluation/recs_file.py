"""Reading a recommendations file (TSV, CSV or Parquet) into a table the metrics can score.

The file's rows keep their line numbers, so every problem (a missing id, a rank that is
not a whole number >= 1, a ragged line) is an :class:`~mrec_warp.errors.InputError`
naming the file and line. Text files are read by the rules of every reader of the package
(:mod:`mrec_warp.data.inputs`): UTF-8 with or without a byte-order mark, else Latin-1;
ids are kept exactly as written.
"""
from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import List, Tuple

import numpy as np
import pandas as pd

from ..data.delimited import data_lines, split_fields
from ..data.inputs import check_readable, detect_encoding
from ..errors import InputError
from ..files import PathLike
from ..tables import PERSONAL, POPULAR, SOURCE_COLUMN, restore_cells
from .space import as_str


RECS_COLUMNS = ("user", "item", "score", "rank")


def read_recs(path: PathLike) -> pd.DataFrame:
    """Read a recommendations file as written by ``mrec-warp recommend``.

    Parameters
    ----------
    path : path-like
        ``.tsv`` (or any other suffix): tab-separated ``user item [score [rank]]`` with no
        header (or ``user item score rank source``, as ``recommend --unknown-users popular``
        writes it: the source is not used) (a ``user<TAB>item...`` header line is tolerated); ``.csv``: the same columns
        comma-separated, with or without such a header; ``.parquet``: columns named
        ``user``, ``item`` and optionally ``score``, ``rank``. ``.gz`` compression works.

    Returns
    -------
    pandas.DataFrame
        Columns ``user``, ``item`` (str), ``score`` (float, NaN when absent), ``rank``
        (float; when absent, derived from descending score, else from the file order) and
        ``line`` (1-based line of the row in the file, for error messages).
    """
    p = check_readable(path, "recommendations file",
                       empty_hint="one user, item, score, rank row per recommendation, as recommend writes")
    suffixes = [s.lower() for s in p.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    kind = suffixes[-1] if suffixes else ""
    if kind in (".parquet", ".pq"):
        raw, lines = _read_recs_parquet(p)
    else:
        raw, lines = _read_recs_text(p, sep="," if kind == ".csv" else "\t")
    return _clean_recs(raw, lines, str(p))


def _recs_layout(p: Path, sep: str, encoding: str) -> Tuple[List[str], int]:
    """Column names and the number of lines before the data (a header, blank lines)."""
    # recommend's TSV is never quoted (an id may start with a quote); its CSV is RFC 4180
    quoting = sep != "\t"
    for lineno, line in data_lines(p, sep, limit=1, encoding=encoding, quoting=quoting):  # a byte-order mark is dropped
        fields = [f.lower() for f in split_fields(line, sep, quoting=quoting)]
        if fields[:2] == ["user", "item"]:
            return [f or f"col{i}" for i, f in enumerate(fields)], lineno
        if len(fields) == len(RECS_COLUMNS) + 1 and fields[-1] in (PERSONAL, POPULAR):
            return [*RECS_COLUMNS, SOURCE_COLUMN], 0  # recommend --unknown-users popular's source column
        if len(fields) > len(RECS_COLUMNS):
            raise InputError(
                f"expected at most 4 columns (user, item, score, rank), found {len(fields)}",
                path=str(p), line=lineno, hint="write recommendations as user<TAB>item<TAB>score<TAB>rank",
            )
        return list(RECS_COLUMNS[: len(fields)]), 0
    raise InputError("recommendations file has no data lines", path=str(p))


def _read_recs_text(p: Path, sep: str) -> Tuple[pd.DataFrame, np.ndarray]:
    encoding = detect_encoding(p)  # UTF-8 (with or without a byte-order mark), else Latin-1
    names, skip = _recs_layout(p, sep, encoding)
    numeric = [c for c in ("score", "rank") if c in names]
    options = dict(
        sep=sep, header=None, names=names, skiprows=skip, keep_default_na=False,
        na_values={c: [""] for c in numeric}, index_col=False, engine="c", encoding=encoding,
        # blank lines are kept (as empty rows) so that row i is file line skip + i + 1
        skip_blank_lines=False, quoting=csv.QUOTE_NONE if sep == "\t" else csv.QUOTE_MINIMAL,
    )
    try:
        try:
            # fast path: the C parser reads the numbers itself
            raw = pd.read_csv(p, dtype={c: (np.float64 if c in numeric else str) for c in names}, **options)
        except pd.errors.ParserError:
            raise
        except ValueError:
            # a score or rank that is not a number: read text so the bad line can be named
            raw = pd.read_csv(p, dtype=str, **options)
    except pd.errors.ParserError as exc:
        m = re.search(r"line (\d+), saw (\d+)", str(exc))
        line = int(m.group(1)) if m else None  # pandas counts the skipped lines too
        found = f", found {m.group(2)}" if m else ""
        raise InputError(
            f"every line needs the same number of columns as the first{found}", path=str(p), line=line,
            hint="expected user<TAB>item<TAB>score<TAB>rank",
        ) from None
    except pd.errors.EmptyDataError:
        raise InputError("recommendations file has no data lines", path=str(p)) from None
    if sep == ",":  # ids written with a leading ' so that a spreadsheet does not run them
        for c in ("user", "item"):
            if c in raw.columns:
                raw[c] = restore_cells(raw[c])
    lines = np.arange(skip + 1, skip + len(raw) + 1, dtype=np.int64)
    blank = np.ones(len(raw), dtype=bool)
    for c in names:
        col = raw[c]
        blank &= (col.isna() | (col == "")).to_numpy() if col.dtype != np.float64 else col.isna().to_numpy()
    return raw.loc[~blank], lines[~blank]


def _read_recs_parquet(p: Path) -> Tuple[pd.DataFrame, np.ndarray]:
    try:
        raw = pd.read_parquet(p)
    except ImportError:
        raise InputError(
            "reading parquet needs pyarrow", path=str(p), hint="pip install mrec-warp[parquet]"
        ) from None
    except Exception as exc:  # a corrupt parquet file raises library-specific errors
        raise InputError(f"cannot read parquet file: {exc}", path=str(p)) from None
    raw.columns = [str(c).lower() for c in raw.columns]
    raw = raw.astype({c: str for c in ("user", "item") if c in raw.columns})
    # parquet has no lines; "line" is then the 1-based row number
    return raw, np.arange(1, len(raw) + 1, dtype=np.int64)


def _clean_recs(raw: pd.DataFrame, lines: np.ndarray, source: str) -> pd.DataFrame:
    for name in ("user", "item"):
        if name not in raw.columns:
            raise InputError(f"no {name!r} column", path=source, hint="columns must be user, item[, score, rank]")
    if len(raw) == 0:
        raise InputError("recommendations file has no data lines", path=source)
    # ids stay a pandas string column: converting millions of them to numpy objects is slow
    # ids exactly as written: 'a ' and 'a' are two ids, as in the ratings reader
    out = pd.DataFrame({name: as_str(raw[name].fillna("")) for name in ("user", "item")})
    out.index = pd.RangeIndex(len(out))
    for name in ("user", "item"):
        empty = (out[name].str.strip() == "").to_numpy()
        if empty.any():
            raise InputError(f"missing {name} id", path=source, line=int(lines[np.flatnonzero(empty)[0]]),
                             hint="every line needs user<TAB>item<TAB>score<TAB>rank")
    for name in ("score", "rank"):
        if name in raw.columns:
            out[name] = _numeric_column(raw[name], name, lines, source)
        else:
            out[name] = np.nan
    out["line"] = lines
    out = _fill_rank(out)
    # whether the ranks were in the file: derived ones cannot tell a ranked list from a log
    out.attrs["rank_column"] = "rank" in raw.columns
    return out


def _numeric_column(column: pd.Series, name: str, lines: np.ndarray, source: str) -> np.ndarray:
    """Floats; a rank must be present, and neither may be text that is not a number."""
    if column.dtype == np.float64:
        values = column.to_numpy()
        text = None
    else:
        text = column.fillna("").astype(str).str.strip()
        values = pd.to_numeric(text.where(text != "", "nan"), errors="coerce").to_numpy(dtype=np.float64)
    missing = np.isnan(values) if text is None else (text == "").to_numpy()
    bad = np.zeros(len(values), bool) if text is None else np.isnan(values) & ~missing & (text.str.lower() != "nan").to_numpy()
    if name == "rank":
        bad |= missing
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        what = f"missing {name}" if missing[row] else f"{name} {text.iloc[row]!r} is not a number"
        raise InputError(what, path=source, line=int(lines[row]), hint="expected user<TAB>item<TAB>score<TAB>rank")
    if name == "rank":
        with np.errstate(invalid="ignore"):
            wrong = ~np.isnan(values) & ((values < 1) | (values != np.floor(values)))
        if wrong.any():
            row = int(np.flatnonzero(wrong)[0])
            raise InputError(f"rank {values[row]:g} is not a whole number >= 1", path=source, line=int(lines[row]),
                             hint="ranks count from 1 (the best item) in each user's list")
    return values


def _fill_rank(recs: pd.DataFrame) -> pd.DataFrame:
    """Give every row a rank: its own, else by descending score, else by file order."""
    if recs["rank"].notna().all():
        return recs
    recs = recs.copy()
    if recs["score"].notna().all():
        # stable sort: equal scores keep their file order
        order = np.lexsort((np.arange(len(recs)), -recs["score"].to_numpy(), recs["user"].to_numpy()))
        ranked = recs.iloc[order]
        rank = ranked.groupby("user", sort=False).cumcount().to_numpy() + 1
        recs.loc[ranked.index, "rank"] = rank
    else:
        recs["rank"] = recs.groupby("user", sort=False).cumcount().to_numpy() + 1
    return recs
