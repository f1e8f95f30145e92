"""The prepare stage: a ratings file in, train / test files (and feature files) out.

:func:`prepare` reads the file, splits it with :func:`mrec_warp.data.split.iter_splits`
(whose module docstring states the rules) and writes each split's folder; this module also
says what a caller needs to know before running it: the files it will write.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import pandas as pd

from ..data.features import write_features
from ..data.ratings import describe_reading, read_ratings
from ..data.rows import DEFAULT_DUPLICATES, DEFAULT_EMPTY_IDS, DEFAULT_NEGATIVES
from ..data.side_features import side_features
from ..data.split import SPLIT_FILES, check_num_splits, check_split_options, iter_splits, min_value_of, write_split
from ..errors import InputError
from ..progress import SILENT, Progress, plural
from ..seeds import DEFAULT_SEED
from .options import RowOptions

PathLike = Union[str, os.PathLike]

#: Feature files ``prepare(features=True)`` may write into the output folder.
FEATURE_FILES = ("item_features.tsv", "user_features.tsv")


def split_folders(outdir: PathLike, num_splits: int = 1) -> List[Path]:
    """The folder of each split: ``outdir`` itself, or ``outdir/split-0`` ... for several."""
    if num_splits == 1:
        return [Path(outdir)]
    return [Path(outdir) / f"split-{i}" for i in range(max(0, num_splits))]


def prepare_outputs(outdir: PathLike, num_splits: int = 1, features: bool = False) -> List[Path]:
    """Every file :func:`prepare` may write for these options (to check before any work
    that none of them is an input)."""
    check_num_splits(num_splits)  # before listing them: a million splits would take a while
    written = [folder / name for folder in split_folders(outdir, num_splits) for name in SPLIT_FILES]
    if features:
        written += [Path(outdir) / name for name in FEATURE_FILES]
    return written


def prepare(
    input: PathLike,
    outdir: PathLike,
    format: str = "auto",
    sep: Optional[str] = None,
    header: Optional[bool] = None,
    columns: Optional[Sequence] = None,
    min_rating: Optional[float] = None,
    min_user_items: int = 1,
    test_fraction: Optional[float] = None,
    leave_out: Optional[int] = None,
    split: str = "random",
    num_splits: int = 1,
    seed: int = DEFAULT_SEED,
    progress: Optional[Progress] = None,
    features: bool = False,
    duplicates: Optional[str] = None,
    negatives: str = DEFAULT_NEGATIVES,
    min_value: Optional[float] = None,
    cutoff: Any = None,
    empty_ids: str = DEFAULT_EMPTY_IDS,
) -> Dict[str, Any]:
    """Read a ratings file, merge / binarise / filter it and write train and test files.

    The rules are in :mod:`mrec_warp.data.split`'s docstring. Writes ``train.tsv``, ``test.tsv``
    (headerless ``user item value [timestamp]``) and ``summary.json`` into ``outdir``, or
    into ``outdir/split-0`` ... ``split-{N-1}`` when ``num_splits`` is N > 1. Each file is
    written to a temporary name and renamed when complete; all options are checked before
    anything is written.

    Parameters
    ----------
    input : path-like
        Ratings file; see :func:`~mrec_warp.data.ratings.read_ratings` for ``format``, ``sep``,
        ``header`` and ``columns``.
    outdir : path-like
        Output folder, created if needed.
    min_value, min_rating : float, optional
        Keep (merged) pairs with a value of at least this; ``None`` keeps all (a zero value
        is a positive with the lowest confidence). ``min_rating`` is the older name of
        ``min_value`` (as ``--min-rating`` is of ``--min-value``); give one of them.
    min_user_items : int
        Drop users with fewer positives than this (default 1: keep everyone).
    test_fraction : float, optional
        Share of each user's positives for test, in [0, 1); default 0.2 unless
        ``leave_out`` is given. Giving both is an error. 0 puts every row in train.tsv and
        writes an empty test.tsv: the whole export, merged and filtered, to train on.
    leave_out : int, optional
        Put this many of each user's positives in test instead (at most n - 1).
    split : {"random", "leave-out", "temporal", "global-time", "cold-items", "cold-users"}
        How test rows are chosen: at random, the latest of each user by timestamp, every
        row after one cut-off (``global-time``), or whole items / users. ``leave_out`` with
        ``split="random"`` means ``"leave-out"``.
    num_splits : int
        Number of independent random splits (not with ``temporal`` or ``global-time``).
    seed : int
        Seeds the random choices; the same seed gives byte-identical files.
    progress : Progress, optional
        Where to log what is happening; silent by default.
    features : bool
        Also write ``item_features.tsv`` / ``user_features.tsv`` into ``outdir`` from the
        side files found beside ``input`` (MovieLens 100k ``u.item`` / ``u.user``, or a
        ``mrec-warp synth`` folder's ``item_tags.tsv``); see
        :func:`~mrec_warp.data.side_features.side_features`. Features cover every id, also
        those only in test, so cold-start splits can use them.
    duplicates : {"sum", "max", "first", "last", "count"}
        How repeated (user, item) rows merge (default ``sum``); see :mod:`mrec_warp.data.rows`.
    negatives : {"refuse", "drop", "net"}
        What negative values do (default ``refuse`` the file); see :mod:`mrec_warp.data.rows`.
    cutoff : str or number, optional
        With ``split="global-time"``: rows later than this (an ISO date or date-time, UTC
        unless a zone is given, or a unix timestamp) go to test; instead of ``test_fraction``.
    empty_ids : {"refuse", "drop"}
        Rows whose user or item id is empty (anonymous rows): refused (default, saying how
        many) or dropped, counted as ``empty_id_rows_dropped``.

    Returns
    -------
    dict
        The summary written to ``summary.json`` (one split), or
        ``{"num_splits": N, "splits": [summary, ...]}``.

    Raises
    ------
    InputError
        Bad options, an unreadable or malformed file, or nothing left to split.
    """
    rows = RowOptions(format=format, sep=sep, header=header, columns=columns, duplicates=duplicates,
                      negatives=negatives, min_value=min_value_of(min_value, min_rating), empty_ids=empty_ids)
    return run_prepare(input, outdir, rows, min_user_items=min_user_items, test_fraction=test_fraction,
                       leave_out=leave_out, split=split, num_splits=num_splits, seed=seed, cutoff=cutoff,
                       features=features, progress=progress)


def run_prepare(
    input: PathLike,
    outdir: PathLike,
    rows: RowOptions,
    *,
    min_user_items: int = 1,
    test_fraction: Optional[float] = None,
    leave_out: Optional[int] = None,
    split: str = "random",
    num_splits: int = 1,
    seed: int = DEFAULT_SEED,
    cutoff: Any = None,
    features: bool = False,
    progress: Optional[Progress] = None,
) -> Dict[str, Any]:
    """:func:`prepare` with its reader options and row rules as one object (``rows``; its
    ``min_value`` is the least value a pair keeps), as ``mrec-warp prepare`` calls it. Every
    other argument is :func:`prepare`'s."""
    progress = progress or SILENT
    min_rating, duplicates, negatives, empty_ids = rows.min_value, rows.duplicates, rows.negatives, rows.empty_ids
    check_split_options(test_fraction, leave_out, split, num_splits, min_user_items, min_rating, seed, duplicates,
                   negatives, cutoff)
    side: Dict[str, pd.DataFrame] = {}
    if features:
        side = side_features(input)
        if not side:
            raise InputError("no feature source beside the input (looked for u.item / u.user and item_tags.tsv)",
                             path=str(input), hint="drop `features`, or keep MovieLens' u.item/u.user beside u.data")
    df = read_ratings(input, **rows.reader, coded_ids=True)  # ids as codes: a big file's memory
    encoding = df.attrs.get("encoding", "utf-8")
    progress.log(f"read {plural(len(df), 'row')} from {input} ({_ENCODING_NOTE.get(encoding, encoding)})")
    found = df.attrs.get("reading")
    if found is not None:  # what became of line 1 and which column is what, as read
        found = {**found, "description": describe_reading(found)}
        for line in found["description"].split("\n"):
            progress.log(line)
    outdir = Path(outdir)
    reading = {"format": rows.format, "sep": rows.sep, "header": rows.header,
               "columns": None if rows.columns is None else [str(c) for c in _as_list(rows.columns)]}
    summaries: List[Dict[str, Any]] = []
    splits = iter_splits(
        df, min_rating=min_rating, min_user_items=min_user_items, test_fraction=test_fraction,
        leave_out=leave_out, split=split, num_splits=num_splits, seed=seed, source=str(input),
        duplicates=duplicates, negatives=negatives, cutoff=cutoff, empty_ids=empty_ids, coded=True,
    )
    value_column = describe_value_column(df, rows.columns, min_rating, rows.header)
    value_column["duplicates"] = duplicates or DEFAULT_DUPLICATES
    del df  # the splits hold what they need as codes: the table goes with their first step
    for train, test, summary in splits:
        folder = outdir if num_splits == 1 else outdir / f"split-{summary['split']}"
        summary = {"input": str(input), "encoding": encoding, **({"reading": found} if found else {}), **summary}
        summary["parameters"] = {**reading, **summary["parameters"]}
        summary["value_column"] = {**value_column, "rows_below_min_rating": summary["rows_below_min_rating"]}
        summary["value_column"]["description"] = _value_words(summary["value_column"])
        if summary["split"] == 0:
            progress.log(summary["value_column"]["description"])
        if side:
            summary["feature_files"] = sorted(str(outdir / name) for name in side)
        write_split(folder, train, test, summary, encoding)
        progress.log(
            f"{folder}: train {plural(summary['train']['rows'], 'row')}, test {plural(summary['test']['rows'], 'row')} "
            f"({plural(summary['users']['kept'], 'user')}, {plural(summary['items']['kept'], 'item')})"
        )
        summaries.append(summary)
    for name, table in side.items():
        write_features(table, outdir / name)
        progress.log(f"{outdir / name}: {plural(len(table), 'row')}, {plural(table['feature'].nunique(), 'feature')}")
    return summaries[0] if num_splits == 1 else {"num_splits": num_splits, "splits": summaries}


def describe_value_column(df: pd.DataFrame, columns: Optional[Sequence], min_rating: Optional[float],
                          header: Optional[bool]) -> Dict[str, Any]:
    """Which input column is the value and what prepare made of it, for ``summary.json``.

    ``column`` is the value's header name, or ``"column 2"`` for the third field (columns
    count from 0, as ``columns`` does). ``use`` is ``"none"`` (no value column: every row a
    positive), ``"binarised"`` (rows below ``min_rating`` dropped) or ``"kept"`` (every row a positive; the value stays in
    the third column of train.tsv / test.tsv for ``train --confidence``).
    """
    if "value" not in df:
        return {"column": None, "use": "none", "min_rating": None}
    name = df.attrs.get("value_column")  # set by read_ratings: header name or "column N"
    if name is None:  # a table built by hand: --columns' third entry, else the third field
        given = None if columns is None else _as_list(columns)
        name = str(given[2]).strip() if given is not None and len(given) > 2 else "2"
        if name.isdigit():  # a 0-based position, as --columns takes it and every message counts
            name = f"column {name}"
    return {"column": name, "use": "kept" if min_rating is None else "binarised", "min_rating": min_rating}


def _value_words(v: Dict[str, Any]) -> str:
    """The ``value_column`` entry in one sentence, e.g. "binarised at >= 4: 12,345 pairs dropped" (pairs, as the row rules count them)."""
    if v["use"] == "none":
        return "no value column: every row is a positive"
    column = f"value {v['column']}" if v["column"].startswith("column ") else f"value column {v['column']!r}"
    if v["use"] == "binarised":
        return (f"{column}: binarised at >= {v['min_rating']:g}: {plural(v['rows_below_min_rating'], 'pair')} dropped "
                "(the values left stay in the third field of train.tsv / test.tsv)")
    return (f"{column}: kept as the third field of train.tsv / test.tsv ({_MERGED[v.get('duplicates', 'sum')]}); "
            "every row is a positive; training with `confidence=log` weighs rows by it")


#: What a merged pair's value is, by duplicates rule, for the summary's words.
_MERGED = {"sum": "repeated pairs summed", "max": "largest value of repeated pairs",
           "first": "first row of repeated pairs", "last": "last row of repeated pairs",
           "count": "number of rows of each pair"}


def _as_list(columns: Union[str, Sequence]) -> List:
    return columns.split(",") if isinstance(columns, str) else list(columns)


#: How the log names the encoding a ratings file was read in.
_ENCODING_NOTE = {
    "utf-8": "UTF-8", "utf-8-sig": "UTF-8 with a byte-order mark",
    "latin-1": "not valid UTF-8: read as Latin-1, outputs written in Latin-1 too",
}


__all__ = ["prepare", "run_prepare", "prepare_outputs", "split_folders", "describe_value_column", "FEATURE_FILES"]
