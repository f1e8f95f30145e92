"""Reading ratings files and writing outputs atomically.

Every reader error is an :class:`~mrec_warp.errors.InputError` naming the file and line.
Every writer goes through :func:`atomic_write`, so a crash or a bad input never leaves a
half-written file behind.
"""
from __future__ import annotations

import contextlib
import gzip
import io
import os
import tempfile
from pathlib import Path
from typing import IO, Iterator, List, Optional, Sequence, Union

import numpy as np
import pandas as pd

from ..errors import InputError

PathLike = Union[str, os.PathLike]

#: Column names of the canonical interactions table.
CANONICAL_COLUMNS = ("user", "item", "value", "timestamp")
FORMATS = ("auto", "tsv", "csv", "movielens")


@contextlib.contextmanager
def atomic_write(path: PathLike, mode: str = "w", encoding: Optional[str] = "utf-8") -> Iterator[IO]:
    """Open a temporary file beside ``path``; rename it over ``path`` only on success.

    On any exception the temporary file is removed and ``path`` is left as it was.
    """
    path = Path(path)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.parent or "."))
    try:
        binary = "b" in mode
        with os.fdopen(fd, mode, encoding=None if binary else encoding, newline=None if binary else "") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_path(path: PathLike) -> Iterator[str]:
    """Like :func:`atomic_write` for writers that want a file name (numpy, pyarrow, matplotlib).

    The temporary name keeps the final suffix so libraries that pick a format from it work.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=path.suffix, dir=str(path.parent))
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def check_readable(path: PathLike, what: str = "input file") -> Path:
    """Fail early, in one line, on a missing, unreadable or empty file."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{what} does not exist", path=str(p), hint="check the path")
    if p.is_dir():
        raise InputError(f"{what} is a directory, expected a file", path=str(p))
    if p.stat().st_size == 0:
        raise InputError(f"{what} is empty", path=str(p), hint="expected one interaction per line")
    return p


def _open_text(path: Path) -> IO[str]:
    # latin-1 never fails to decode, so odd bytes in MovieLens files cannot crash a reader;
    # ids made of ASCII (the usual case) are unaffected.
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="latin-1")
    return open(path, "r", encoding="latin-1")


def _first_data_line(path: Path) -> str:
    with _open_text(path) as fh:
        for line in fh:
            if line.strip():
                return line.rstrip("\r\n")
    raise InputError("file has no data lines", path=str(path), hint="expected one interaction per line")


def _data_line_number(path: Path, row: int, header: bool) -> int:
    """1-based file line of the ``row``-th data row (blank lines are skipped by the parser)."""
    seen = -1 if header else 0
    with _open_text(path) as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            if seen == row:
                return lineno
            seen += 1
    return -1


def detect_separator(line: str) -> str:
    """Guess the delimiter of a ratings line: ``::``, tab, comma, then whitespace."""
    if "::" in line:
        return "::"
    if "\t" in line:
        return "\t"
    if "," in line:
        return ","
    return r"\s+"


def _looks_numeric(token: str) -> bool:
    try:
        float(token)
        return True
    except ValueError:
        return False


def _resolve_columns(columns: Optional[Sequence], header_names: Optional[List[str]], path: Path) -> List:
    """Map the user's column choice (names or 0-based positions) onto the canonical names."""
    if columns is None:
        return list(range(4))
    chosen = []
    for c in columns:
        c = str(c).strip()
        if c.isdigit():
            chosen.append(int(c))
        elif header_names is not None and c in header_names:
            chosen.append(header_names.index(c))
        else:
            known = ", ".join(header_names) if header_names else "none (file has no header)"
            raise InputError(
                f"column {c!r} not found; header columns: {known}", path=str(path),
                hint="name header columns or give 0-based positions, e.g. --columns 0,1,2",
            )
    if len(chosen) < 2:
        raise InputError("need at least the user and item columns", path=str(path))
    return chosen


def read_ratings(
    path: PathLike,
    format: str = "auto",
    sep: Optional[str] = None,
    header: Optional[bool] = None,
    columns: Optional[Sequence] = None,
) -> pd.DataFrame:
    """Read a delimited ratings file into the canonical table.

    Parameters
    ----------
    path : path-like
        Text file, optionally gzip-compressed (``.gz``).
    format : {"auto", "tsv", "csv", "movielens"}
        ``tsv`` and ``csv`` fix the delimiter; ``movielens`` reads 100k ``u.data`` (tab) and
        1M ``ratings.dat`` (``::``) with no header; ``auto`` sniffs the first line.
    sep : str, optional
        Explicit delimiter (overrides ``format``); ``"\\s+"`` means any whitespace.
    header : bool, optional
        Whether the first line names the columns; ``None`` guesses (a non-numeric value in
        the third column, or in the second when there are two, means a header).
    columns : sequence of str or int, optional
        Which columns are user, item[, value[, timestamp]], by header name or 0-based position.

    Returns
    -------
    pandas.DataFrame
        Columns ``user`` and ``item`` (str) and, when present, ``value`` (float64) and
        ``timestamp`` (int64 seconds).
    """
    if format not in FORMATS:
        raise InputError(f"unknown format {format!r}", path=str(path), hint=f"use one of {', '.join(FORMATS)}")
    p = check_readable(path)
    first = _first_data_line(p)
    if sep is None:
        sep = {"tsv": "\t", "csv": ","}.get(format) or detect_separator(first)
    if format == "movielens":
        header = False
    tokens = [t for t in (first.split() if sep == r"\s+" else first.split(sep))]
    if header is None:
        probe = tokens[2] if len(tokens) > 2 else tokens[-1]
        header = not _looks_numeric(probe.strip())
    header_names = [t.strip() for t in tokens] if header else None
    col_pos = _resolve_columns(columns, header_names, p)
    n_fields = len(tokens)
    wanted = [c for c in col_pos if c < n_fields]
    if len(wanted) < 2:
        raise InputError(
            f"expected at least 2 columns (user, item), found {n_fields}", path=str(p), line=1,
            hint="check --sep / --format",
        )

    text_sep = sep
    source: Union[Path, io.StringIO] = p
    if sep == "::":  # a multi-char separator would force pandas' slow python engine
        with _open_text(p) as fh:
            source = io.StringIO(fh.read().replace("::", "\t"))
        text_sep = "\t"
    try:
        raw = pd.read_csv(
            source, sep=text_sep, header=None, skiprows=1 if header else 0, dtype=str,
            names=list(range(n_fields)), usecols=wanted, encoding="latin-1",
            engine="c", skip_blank_lines=True, keep_default_na=False, na_values=[],
            quoting=3 if text_sep != "," else 0,
        )
    except pd.errors.ParserError as exc:
        msg = str(exc)
        line = None
        import re

        m = re.search(r"line (\d+), saw (\d+)", msg)
        if m:
            line = int(m.group(1))
            msg = f"expected {n_fields} columns like the first line, found {m.group(2)}"
        raise InputError(msg, path=str(p), line=line, hint="every line needs the same columns; check --sep") from None
    except UnicodeDecodeError as exc:  # pragma: no cover - latin-1 decodes anything
        raise InputError(f"cannot decode file: {exc}", path=str(p)) from None

    names = CANONICAL_COLUMNS[: len(wanted)]
    out = pd.DataFrame({name: raw[pos] for name, pos in zip(names, wanted)})
    if len(out) == 0:
        raise InputError("file has a header but no data lines", path=str(p))
    for name in ("user", "item"):
        empty = (out[name].str.strip() == "").to_numpy()
        if empty.any():
            row = int(np.flatnonzero(empty)[0])
            raise InputError(
                f"missing {name} id (expected {max(col_pos) + 1} columns)", path=str(p),
                line=_data_line_number(p, row, bool(header)), hint="every line needs user and item columns",
            )
        out[name] = out[name].str.strip()
    if "value" in out:
        values = pd.to_numeric(out["value"].str.strip(), errors="coerce")
        bad = values.isna().to_numpy()
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise InputError(
                f"rating {out['value'].iloc[row]!r} is not a number", path=str(p),
                line=_data_line_number(p, row, bool(header)),
                hint="the third column must be a numeric rating; use --columns to choose columns",
            )
        out["value"] = values.astype(np.float64)
    if "timestamp" in out:
        ts = pd.to_numeric(out["timestamp"].str.strip(), errors="coerce")
        if ts.isna().any():
            parsed = pd.to_datetime(out["timestamp"].str.strip(), errors="coerce", utc=True)
            bad = parsed.isna().to_numpy()
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                raise InputError(
                    f"timestamp {out['timestamp'].iloc[row]!r} is neither a number nor a date",
                    path=str(p), line=_data_line_number(p, row, bool(header)),
                    hint="use Unix seconds or ISO dates in the fourth column",
                )
            ts = (parsed - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(seconds=1)
        out["timestamp"] = ts.astype(np.int64)
    return out


def write_interactions(df: pd.DataFrame, path: PathLike) -> None:
    """Write the canonical table as headerless TSV (what every reader's default expects)."""
    cols = [c for c in CANONICAL_COLUMNS if c in df.columns]
    frame = df[cols].copy()
    if "value" in frame:
        # integral ratings print as "4", not "4.0", so files stay byte-identical to the input's style
        v = frame["value"].to_numpy()
        if np.all(np.isfinite(v)) and np.all(v == np.round(v)):
            frame["value"] = v.astype(np.int64)
    with atomic_write(path) as fh:
        frame.to_csv(fh, sep="\t", header=False, index=False, lineterminator="\n")
