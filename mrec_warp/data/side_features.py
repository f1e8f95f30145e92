"""Feature tables of known datasets, found beside their ratings file (``prepare --features``).

MovieLens 100k keeps item and user attributes in ``u.item`` / ``u.user`` beside ``u.data``:
genres and a release-year bucket per film, an age bucket, gender and occupation per user.
A folder written by ``mrec-warp synth`` keeps its items' tags in ``item_tags.tsv``.
:func:`side_features` turns whichever is there into feature tables
(:mod:`mrec_warp.data.features`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import pandas as pd

from ..errors import InputError
from ..files import PathLike
from .features import read_features

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
