"""User and item features: reading feature files and turning them into weighted matrices.

A feature file has one row per (id, feature) pair, ``id<TAB>feature[<TAB>weight]``::

    1	genre:Comedy
    1	genre:Animation
    1	year:1995	1
    2	genre:Action	0.5

* ``id`` is a user or item id as it appears in the ratings file; ``feature`` is any text;
  ``weight`` is a finite number >= 0 (default 1). Rows repeating an (id, feature) pair are
  merged by adding their weights.
* The reader rules of ratings files apply (:func:`~mrec_warp.data.io.read_ratings`): UTF-8
  with or without a byte-order mark, Latin-1 when the file is not valid UTF-8; RFC 4180
  quoting in comma-separated files; ids and feature names never stripped; delimiter guessed
  from the first line or given, optional header, columns chosen by name or position.

How a model uses them (:func:`weighted_rows`): each id's row holds its content features and,
unless ``identity=False``, an identity feature of its own with weight 2 (``identity_weight``).
**Normalisation** (on by default) then scales every row to unit Euclidean length: an item
with its identity and two genres of weight 1 has weights ``2/sqrt(6)`` = 0.82 and
``1/sqrt(6)`` = 0.41 each; an id with no feature row has its identity only (weight 1). Ids
without an identity (new users or items, known by their features only) are normalised as
if their identity were there with a zero embedding, so they carry exactly the weights a
trained id with the same features has, and old and new ids can be ranked together.

Why this rule. Euclidean rather than sum-to-1 rows keep the information in *how many*
features an id has -- the total weight of its features grows with their number -- which
matters for new ids (on MovieLens, films with more genres are more popular; sum-to-1 rows
halve the precision on new films). The identity's weight of 2 keeps an id's own embedding
the larger part of its representation for up to four unit-weight features, so trained ids
still learn their own taste at a useful speed (with weight 1, a user with three
demographic features has only a quarter of each step go to their own embedding).
"""
from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..errors import InputError
from .io import (
    _check_fields, _data_line, _data_lines, _first_lines, _looks_numeric, _normalise_columns, _parse_table,
    _split_fields, atomic_write, check_readable, check_tsv_ids, detect_encoding, detect_separator, output_encoding,
)

PathLike = Union[str, os.PathLike]
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
        Comma-separated files follow RFC 4180 (``"Strategy, turn-based"`` is one feature);
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
        lines = _first_lines(p, encoding=encoding)
    except InputError:
        raise InputError(f"{what} has no data lines", path=str(p), hint=_HINT) from None
    first_lineno, first = lines[0]
    if sep is None:
        sep = {"tsv": "\t", "csv": ","}.get(format) or detect_separator(first)
        if sep == "::":  # '::' only means something in MovieLens ratings files
            sep = "\t" if "\t" in first else r"\s+"
    if sep in ("\\t", "tab"):
        sep = "\t"
    if sep == ",":  # a quoted field may hold a line break: take the first whole CSV record
        first_lineno, first = next(_data_lines(p, sep, limit=1, encoding=encoding))
    tokens = _split_fields(first, sep)
    chosen = _normalise_columns(columns)
    if header is None:
        header = any(t.strip().lower() in _HEADER_WORDS for t in tokens) or (
            len(tokens) >= 3 and chosen is None and tokens[2].strip() != "" and not _looks_numeric(tokens[2]))
    n_fields = len(tokens)
    used = _resolve_feature_columns(chosen, tokens if header else None, n_fields, p, what)
    skip = first_lineno if header else 0
    raw = _parse_table(p, sep, skip, n_fields, encoding=encoding)
    if len(raw) == 0:
        raise InputError(f"{what} has a header but no data lines", path=str(p), hint=_HINT)
    if chosen is None and len(used) == 3 and (raw[used[2]] == "").all():
        used = used[:2]  # a trailing separator on every line is not a weight column
    # ids and feature names are kept exactly as in the file (spaces included), as ratings ids are
    _check_fields(raw, used, n_fields, p, sep, skip, encoding, roles=FEATURE_COLUMNS,
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
                             line=_data_line(p, row, sep, skip, encoding)[0],
                             hint="weights must be numbers >= 0; leave the column out for weight 1")
        neg = weights < 0
        if neg.any():
            row = int(np.flatnonzero(neg)[0])
            raise InputError(f"weight {text.iloc[row]} is negative", path=str(p),
                             line=_data_line(p, row, sep, skip, encoding)[0], hint="weights must be >= 0")
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
        ex_file = ", ".join(repr(x) for x in pd.unique(table["id"])[:2])
        ex_model = ", ".join(repr(x) for x in model_ids[:2])
        raise InputError(
            f"none of the {len(known)} ids of the {kind} feature file are {kind} ids of the training data "
            f"(file: {ex_file}; training: {ex_model})", path=source,
            hint=f"the first column must hold the training file's {kind} ids; choose it with `feature_columns`",
        )


# -- the model's view ----------------------------------------------------------------------
def feature_names(table: Optional[pd.DataFrame]) -> np.ndarray:
    """Content feature vocabulary, in order of first appearance."""
    if table is None or len(table) == 0:
        return np.zeros(0, dtype=str)
    return np.asarray(pd.unique(table["feature"].to_numpy()), dtype=str)


def raw_rows(ids: np.ndarray, table: Optional[pd.DataFrame], names: np.ndarray) -> Tuple[sp.csr_matrix, int]:
    """Raw content weights of ``ids`` over ``names``: (len(ids) x len(names)) CSR, float32.

    Table rows of other ids are ignored; rows naming a feature outside ``names`` are
    dropped and counted (the second value returned).
    """
    ids = np.asarray(ids, dtype=str)
    rows = cols = np.zeros(0, np.int64)
    vals = np.zeros(0, np.float32)
    n_unknown = 0
    if table is not None and len(table) and len(ids):
        r = pd.Index(ids).get_indexer(table["id"].to_numpy())
        c = pd.Index(names).get_indexer(table["feature"].to_numpy()) if len(names) else np.full(len(table), -1)
        n_unknown = int(((r >= 0) & (c < 0)).sum())
        ok = (r >= 0) & (c >= 0)
        rows, cols, vals = r[ok], c[ok], table["weight"].to_numpy(dtype=np.float32)[ok]
    matrix = sp.csr_matrix((vals, (rows, cols)), shape=(len(ids), len(names)), dtype=np.float32)
    matrix.sum_duplicates()
    matrix.sort_indices()
    return matrix, n_unknown


def weighted_rows(
    raw: sp.csr_matrix,
    identity: np.ndarray,
    n_columns: int,
    normalize: bool = True,
    identity_slot: bool = True,
    identity_weight: float = 2.0,
) -> sp.csr_matrix:
    """The rows a model scores with: raw content weights plus identities, normalised.

    Parameters
    ----------
    raw : csr_matrix (n, n_content)
        Content feature weights (columns ``0 .. n_content - 1``).
    identity : int array (n,)
        Column of each row's identity feature, -1 for none.
    n_columns : int
        Width of the result (content columns plus every identity column of the model).
    normalize : bool
        Scale each row to unit Euclidean length (identity included).
    identity_slot : bool
        When normalising a row without identity, count an identity of weight 1 anyway: the
        row gets the weights a trained id with the same features has (as if its identity
        embedding were zero), so new and trained ids are on one scale. Set for models whose
        ids have identities; a model without them normalises content alone.
    identity_weight : float
        Weight of the identity feature before normalisation (content features keep theirs).
    """
    identity = np.asarray(identity, dtype=np.int64)
    n = raw.shape[0]
    coo = raw.tocoo()
    have = identity >= 0
    rows = np.concatenate([coo.row.astype(np.int64), np.flatnonzero(have)])
    cols = np.concatenate([coo.col.astype(np.int64), identity[have]])
    vals = np.concatenate([coo.data.astype(np.float32), np.full(int(have.sum()), identity_weight, np.float32)])
    if normalize:
        squares = np.bincount(rows, weights=vals.astype(np.float64) ** 2, minlength=n).astype(np.float64)
        if identity_slot:
            squares = squares + (~have) * float(identity_weight) ** 2  # the missing identity
        scale = np.divide(1.0, np.sqrt(squares), out=np.zeros_like(squares), where=squares > 0)
        vals = (vals * scale[rows]).astype(np.float32)
    matrix = sp.csr_matrix((vals, (rows, cols)), shape=(n, int(n_columns)), dtype=np.float32)
    matrix.sum_duplicates()
    matrix.sort_indices()
    return matrix


# -- feature files for known datasets ------------------------------------------------------
#: MovieLens 100k genres, in u.item's flag order (u.genre, when present, is used instead).
ML100K_GENRES = ("unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime",
                 "Documentary", "Drama", "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery",
                 "Romance", "Sci-Fi", "Thriller", "War", "Western")
#: Age buckets of MovieLens 1M, reused for 100k's exact ages.
AGE_BUCKETS = ((18, "<18"), (25, "18-24"), (35, "25-34"), (45, "35-44"), (50, "45-49"), (56, "50-55"))


def year_bucket(year: int) -> str:
    """Release-year bucket: before 1950, then decades, then 1990-92, then single years
    from 1993 (most MovieLens 100k films are from 1993-1998, so finer buckets there)."""
    if year < 1950:
        return "<1950"
    if year < 1990:
        return f"{year // 10 * 10}s"
    if year < 1993:
        return "1990-92"
    return str(year)


def age_bucket(age: int) -> str:
    for limit, name in AGE_BUCKETS:
        if age < limit:
            return name
    return "56+"


def _pipe_lines(path: Path) -> List[Tuple[int, List[str]]]:
    out = []
    with open(path, encoding="latin-1") as fh:
        for lineno, line in enumerate(fh, start=1):
            line = line.rstrip("\r\n")
            if line.strip():
                out.append((lineno, line.split("|")))
    return out


def movielens_item_features(path: PathLike) -> pd.DataFrame:
    """Item features from MovieLens 100k ``u.item``: ``genre:<name>`` for each genre flag and
    ``year:<bucket>`` of the release date (see :func:`year_bucket`)."""
    path = Path(path)
    genres = list(ML100K_GENRES)
    genre_file = path.with_name("u.genre")
    if genre_file.exists():
        pairs = [f for _, f in _pipe_lines(genre_file) if len(f) >= 2]
        genres = [name for name, _ in sorted(pairs, key=lambda f: int(f[1]))] or genres
    ids, feats = [], []
    for lineno, f in _pipe_lines(path):
        if len(f) < 5 + len(genres):
            raise InputError(f"expected {5 + len(genres)} '|'-separated fields, found {len(f)}", path=str(path),
                             line=lineno, hint="expected MovieLens 100k's u.item")
        flags = f[-len(genres):]
        for name, flag in zip(genres, flags):
            if flag.strip() == "1":
                ids.append(f[0])
                feats.append(f"genre:{name}")
        date = f[-len(genres) - 3].strip()  # id|title|release date|video date|url|flags...
        if len(date) >= 4 and date[-4:].isdigit():
            ids.append(f[0])
            feats.append(f"year:{year_bucket(int(date[-4:]))}")
    return pd.DataFrame({"id": ids, "feature": feats, "weight": np.ones(len(ids), np.float32)})


def movielens_user_features(path: PathLike) -> pd.DataFrame:
    """User features from MovieLens 100k ``u.user``: ``age:<bucket>``, ``gender:<M|F>``,
    ``occupation:<name>``."""
    path = Path(path)
    ids, feats = [], []
    for lineno, f in _pipe_lines(path):
        if len(f) < 4 or not f[1].strip().isdigit():
            raise InputError("expected id|age|gender|occupation|zip", path=str(path), line=lineno,
                             hint="expected MovieLens 100k's u.user")
        for feat in (f"age:{age_bucket(int(f[1]))}", f"gender:{f[2].strip()}", f"occupation:{f[3].strip()}"):
            ids.append(f[0])
            feats.append(feat)
    return pd.DataFrame({"id": ids, "feature": feats, "weight": np.ones(len(ids), np.float32)})


def side_features(ratings_path: PathLike) -> Dict[str, pd.DataFrame]:
    """Feature tables found beside a ratings file, by output name.

    MovieLens 100k (``u.item`` / ``u.user`` beside ``u.data``) gives item and user
    features; a folder written by ``mrec-warp synth`` (``item_tags.tsv`` beside
    ``ratings.tsv``) gives item features, one ``tag:<tag>`` per tag.
    """
    folder = Path(ratings_path).resolve().parent
    out: Dict[str, pd.DataFrame] = {}
    if (folder / "u.item").exists():
        out["item_features.tsv"] = movielens_item_features(folder / "u.item")
    if (folder / "u.user").exists():
        out["user_features.tsv"] = movielens_user_features(folder / "u.user")
    if not out and (folder / "item_tags.tsv").exists():
        tags = read_features(folder / "item_tags.tsv", kind="item", header=False)
        tags["feature"] = "tag:" + tags["feature"]
        out["item_features.tsv"] = tags
    return out


def write_features(table: pd.DataFrame, path: PathLike, encoding: Optional[str] = None) -> None:
    """Write headerless ``id<TAB>feature`` rows (plus weight when any is not 1), atomically.

    Ids and feature names are written as they are (never quoted), in ``encoding``, by
    default the one the table was read in (``table.attrs["encoding"]``, see
    :func:`~mrec_warp.data.io.output_encoding`): the same bytes as the input. One holding a
    tab or a line break is refused, as no TSV can hold it.
    """
    cols = ["id", "feature"] + (["weight"] if "weight" in table and not np.all(table["weight"] == 1) else [])
    check_tsv_ids(table["id"], table["feature"], path=path)
    with atomic_write(path, encoding=output_encoding(encoding or table.attrs.get("encoding"))) as fh:
        table[cols].to_csv(fh, sep="\t", header=False, index=False, lineterminator="\n", float_format="%.6g",
                           quoting=csv.QUOTE_NONE)
