"""User and item feature files: reading them into feature tables, and writing them back.

A feature file has one row per (id, feature) pair, ``id<TAB>feature[<TAB>weight]``::

    1	genre:Comedy
    1	genre:Animation
    1	year:1995	1
    2	genre:Action	0.5

* ``id`` is a user or item id as it appears in the ratings file; ``feature`` is any text;
  ``weight`` is a finite number >= 0 (default 1). Rows repeating an (id, feature) pair are
  merged by adding their weights.
* The reader rules of ratings files apply (:func:`~mrec_warp.data.ratings.read_ratings`): UTF-8
  with or without a byte-order mark, Latin-1 when the file is not valid UTF-8; RFC 4180
  quoting with every one-character delimiter; ids and feature names never stripped; delimiter guessed
  from the first line or given, optional header, columns chosen by name or position.

How a hybrid model turns these tables into the rows it scores with (identities, weights,
normalisation) is :mod:`mrec_warp.models.hybrid`; feature tables of known datasets
(MovieLens, ``mrec-warp synth``) are made by :mod:`mrec_warp.data.side_features`.
"""
from __future__ import annotations

import csv
import os
from pathlib import Path
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from ..errors import InputError
from ..files import PathLike, atomic_write
from .delimited import (
    data_line, data_lines, detect_separator, first_lines, looks_numeric, normalise_columns, parse_table,
    quoted, split_fields,
)
from .field_checks import check_fields
from .inputs import check_readable, detect_encoding, output_encoding
from .tsv import check_tsv_ids, quote_leading_quotes

FeaturesLike = Union[PathLike, pd.DataFrame, None]

FEATURE_COLUMNS = ("id", "feature", "weight")
_HEADER_WORDS = frozenset(
    "id user item user_id item_id userid itemid movie movie_id feature features tag tags genre "
    "weight value name".split()
)
_HINT = "expected one id<TAB>feature[<TAB>weight] row per line"


# -- reading --------------------------------------------------------------------------------
def read_features(
    path: PathLike,
    kind: str = "item",
    format: str = "auto",
    sep: Optional[str] = None,
    header: Optional[bool] = None,
    columns: Optional[Union[str, Sequence]] = None,
) -> pd.DataFrame:
    """Read a feature file into a table of ``id``, ``feature`` (str) and ``weight`` (float32).

    Parameters
    ----------
    path : path-like
        Text file (``.gz`` works), read like ratings files: UTF-8 (a byte-order mark is
        dropped), or Latin-1 when it is not valid UTF-8 (``result.attrs["encoding"]``).
        Fields follow RFC 4180 with every one-character delimiter (``"Strategy, turn-based"``
        is one feature);
        ids and feature names are kept exactly as written, spaces included.
    kind : {"item", "user"}
        Only used in messages ("item feature file ...").
    format : {"auto", "tsv", "csv"}
        ``tsv`` / ``csv`` fix the delimiter; ``auto`` guesses it from the first line (tab,
        then comma, then whitespace).
    sep : str, optional
        Explicit delimiter (overrides ``format``).
    header : bool, optional
        Whether the first line names the columns; guessed when ``None`` (a known column
        name such as id, item, feature, tag, weight, or a non-numeric third field).
    columns : sequence or comma-separated str, optional
        Which fields are id, feature[, weight], by header name or 0-based position
        (default: the first two or three fields).

    Returns
    -------
    pandas.DataFrame
        One row per distinct (id, feature), weights of repeated pairs added.

    Raises
    ------
    InputError
        One line naming the file (and line): empty file, short or long line, empty id or
        feature, a weight that is not a finite number or is negative.
    """
    what = f"{kind} feature file"
    p = check_readable(path, what, empty_hint=_HINT)
    encoding = detect_encoding(p)  # UTF-8 (BOM or not), else Latin-1: as ratings files
    try:
        lines = first_lines(p, encoding=encoding)
    except InputError:
        raise InputError(f"{what} has no data lines", path=str(p), hint=_HINT) from None
    first_lineno, first = lines[0]
    if sep is None:
        sep = {"tsv": "\t", "csv": ","}.get(format) or detect_separator(first)
        if sep == "::":  # '::' only means something in MovieLens ratings files
            sep = "\t" if "\t" in first else r"\s+"
    if sep in ("\\t", "tab"):
        sep = "\t"
    if quoted(sep):  # a quoted field may hold a line break: take the first whole record
        first_lineno, first = next(data_lines(p, sep, limit=1, encoding=encoding))
    tokens = split_fields(first, sep)
    chosen = normalise_columns(columns)
    if header is None:
        header = any(t.strip().lower() in _HEADER_WORDS for t in tokens) or (
            len(tokens) >= 3 and chosen is None and tokens[2].strip() != "" and not looks_numeric(tokens[2]))
    n_fields = len(tokens)
    used = _resolve_feature_columns(chosen, tokens if header else None, n_fields, p, what)
    skip = first_lineno if header else 0
    raw = parse_table(p, sep, skip, n_fields, encoding=encoding)
    if len(raw) == 0:
        raise InputError(f"{what} has a header but no data lines", path=str(p), hint=_HINT)
    if chosen is None and len(used) == 3 and (raw[used[2]] == "").all():
        used = used[:2]  # a trailing separator on every line is not a weight column
    # ids and feature names are kept exactly as in the file (spaces included), as ratings ids are
    check_fields(raw, used, n_fields, p, sep, skip, encoding, roles=FEATURE_COLUMNS,
                  id_roles=FEATURE_COLUMNS[:2], hint=_HINT)
    ids = raw[used[0]].to_numpy(dtype=str)
    feats = raw[used[1]].to_numpy(dtype=str)
    if len(used) > 2:
        text = raw[used[2]].str.strip()
        weights = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        bad = ~np.isfinite(weights)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise InputError(f"weight {text.iloc[row]!r} is not a finite number", path=str(p),
                             line=data_line(p, row, sep, skip, encoding)[0],
                             hint="weights must be numbers >= 0; leave the column out for weight 1")
        neg = weights < 0
        if neg.any():
            row = int(np.flatnonzero(neg)[0])
            raise InputError(f"weight {text.iloc[row]} is negative", path=str(p),
                             line=data_line(p, row, sep, skip, encoding)[0], hint="weights must be >= 0")
    else:
        weights = np.ones(len(ids))
    table = pd.DataFrame({"id": ids, "feature": feats, "weight": weights})
    if table.duplicated(["id", "feature"]).any():
        table = table.groupby(["id", "feature"], sort=False, as_index=False)["weight"].sum()
    table["weight"] = table["weight"].astype(np.float32)
    table.attrs["encoding"] = encoding
    return table


def _resolve_feature_columns(chosen: Optional[List[str]], names: Optional[List[str]], n_fields: int,
                             path: Path, what: str) -> List[int]:
    if n_fields < 2:
        raise InputError(f"{what} needs at least 2 columns (id, feature), found 1", path=str(path),
                         hint="check the delimiter (`feature_sep`); " + _HINT)
    if chosen is None:
        return list(range(min(3, n_fields)))
    if not 2 <= len(chosen) <= 3:
        raise InputError(f"feature columns are id,feature[,weight], got {len(chosen)} names", path=str(path),
                         hint="e.g. `feature_columns=movieId,genre`")
    out = []
    for c in chosen:
        if c.isdigit() and int(c) < n_fields:
            pos = int(c)
        elif names is not None and c in names:
            pos = names.index(c)
        else:
            known = ", ".join(names) if names else f"positions 0-{n_fields - 1} (no header)"
            raise InputError(f"feature column {c!r} not found; columns: {known}", path=str(path),
                             hint="name header columns or give 0-based positions")
        if pos in out:
            raise InputError(f"feature column {c!r} is chosen twice", path=str(path))
        out.append(pos)
    return out


def as_feature_table(features: FeaturesLike, kind: str = "item", **read_options) -> Optional[pd.DataFrame]:
    """A feature table from a path (read with :func:`read_features`) or a DataFrame.

    DataFrames need columns ``id`` and ``feature`` (or their first two columns are taken),
    and optionally ``weight``; the same checks as for files apply, without line numbers.
    """
    if features is None:
        return None
    if isinstance(features, (str, os.PathLike)):
        return read_features(features, kind=kind, **read_options)
    if not isinstance(features, pd.DataFrame):
        raise TypeError(f"{kind} features must be a path or a DataFrame, got {type(features).__name__}")
    df = features
    if not {"id", "feature"} <= set(df.columns):
        if df.shape[1] < 2:
            raise InputError(f"{kind} feature table needs columns id and feature")
        df = df.rename(columns={df.columns[0]: "id", df.columns[1]: "feature",
                                **({df.columns[2]: "weight"} if df.shape[1] > 2 else {})})
    weights = df["weight"].to_numpy(dtype=np.float64) if "weight" in df else np.ones(len(df))
    if not np.isfinite(weights).all():
        raise InputError(f"{kind} feature table has a weight that is not a finite number", hint="weights must be >= 0")
    if (weights < 0).any():
        raise InputError(f"{kind} feature table has a negative weight", hint="weights must be >= 0")
    if len(df) == 0:
        raise InputError(f"{kind} feature table is empty", hint=_HINT)
    table = pd.DataFrame({"id": df["id"].astype(str).to_numpy(), "feature": df["feature"].astype(str).to_numpy(),
                          "weight": weights})
    table = table.groupby(["id", "feature"], sort=False, as_index=False)["weight"].sum()
    table["weight"] = table["weight"].astype(np.float32)
    return table


def check_ids_match(table: pd.DataFrame, model_ids: np.ndarray, kind: str, source: Optional[str] = None) -> None:
    """A feature file none of whose ids are known is almost surely in another id format."""
    known = pd.Index(model_ids).get_indexer(pd.unique(table["id"].to_numpy())) >= 0
    if len(known) and not known.any():
        ex_file = ", ".join(repr(str(x)) for x in pd.unique(table["id"])[:2])
        ex_model = ", ".join(repr(str(x)) for x in model_ids[:2])
        raise InputError(
            f"none of the {len(known)} ids of the {kind} feature file are {kind} ids of the training data "
            f"(file: {ex_file}; training: {ex_model})", path=source,
            hint=f"the first column must hold the training file's {kind} ids; choose it with `feature_columns`",
        )


def write_features(table: pd.DataFrame, path: PathLike, encoding: Optional[str] = None) -> None:
    """Write headerless ``id<TAB>feature`` rows (plus weight when any is not 1), atomically.

    Ids and feature names are written as they are (one starting with a double quote as an
    RFC 4180 quoted field, which reads back as the same text), in ``encoding``, by
    default the one the table was read in (``table.attrs["encoding"]``, see
    :func:`~mrec_warp.data.inputs.output_encoding`): the same bytes as the input. One holding a
    tab or a line break is refused, as no TSV can hold it.
    """
    cols = ["id", "feature"] + (["weight"] if "weight" in table and not np.all(table["weight"] == 1) else [])
    check_tsv_ids(table["id"], table["feature"], path=path)
    frame = table[cols].copy()
    for c in ("id", "feature"):
        frame[c] = quote_leading_quotes(frame[c])
    with atomic_write(path, encoding=output_encoding(encoding or table.attrs.get("encoding"))) as fh:
        frame.to_csv(fh, sep="\t", header=False, index=False, lineterminator="\n", float_format="%.6g",
                           quoting=csv.QUOTE_NONE)


# -- a model's feature files, as the stages take them ---------------------------------------------
@dataclass(frozen=True)
class FeatureFiles:
    """The user and item feature files of a hybrid model and how to read them.

    Attributes
    ----------
    user, item : path-like, optional
        ``id<TAB>feature[<TAB>weight]`` rows; ``None`` where there is no file.
    sep, header, columns
        Delimiter, header line and columns, as :func:`~mrec_warp.data.features.read_features`
        takes them (guessed where ``None``).
    """

    user: Optional[PathLike] = None
    item: Optional[PathLike] = None
    sep: Optional[str] = None
    header: Optional[bool] = None
    columns: Optional[str] = None

    @property
    def given(self) -> bool:
        return self.user is not None or self.item is not None

    def read(self, id_encoding: Optional[str] = None) -> Tuple[Optional[pd.DataFrame], Optional[pd.DataFrame]]:
        """(user table, item table), ``None`` where no file was given.

        ``id_encoding`` is the encoding of the training data's ids; a feature file in another
        one is refused when it holds a character outside ASCII (see :func:`check_same_encoding`).
        """
        tables = []
        for kind, path in (("user", self.user), ("item", self.item)):
            table = read_features(path, kind=kind, sep=self.sep, header=self.header,
                                  columns=self.columns) if path else None
            if table is not None:
                check_same_encoding(table, id_encoding, kind, str(path))
            tables.append(table)
        return tables[0], tables[1]


def check_same_encoding(table: pd.DataFrame, id_encoding: Optional[str], kind: str, path: str) -> None:
    """Refuse a feature file whose non-ASCII text is in another encoding than the training data.

    Outputs are written in the training data's encoding, so an id ``Señor`` read from a
    UTF-8 feature file would come out as other bytes than it went in as (and an id matched
    across the two files would be two different byte strings). ASCII reads the same in both.
    """
    mine, theirs = output_encoding(table.attrs.get("encoding")), output_encoding(id_encoding)
    if mine == theirs:
        return
    text = pd.concat([table["id"], table["feature"]]).astype(str)
    if text.map(str.isascii).all():
        return
    names = {"utf-8": "UTF-8", "latin-1": "Latin-1 (it is not valid UTF-8)"}
    raise InputError(
        f"the {kind} feature file is {names[mine]} but the training data is {names[theirs].split(' (')[0]}: "
        "its ids and features would not come back as the same bytes", path=path,
        hint=f"convert one file, e.g. iconv -f {mine} -t {theirs} {path} > converted.tsv",
    )
