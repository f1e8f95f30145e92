"""Top-k ranking metrics, computed for every user at once.

The recommendation lists are held as flat arrays sorted by (user, position) rather than
a Python list per user, so 100k+ users cost a few sorts and ``bincount`` calls:

* every (user, item) pair becomes one int64 key ``user * n_items + item``;
* "is this recommended item in the user's test set / training set?" is a
  ``searchsorted`` of the recommendation keys into the sorted test / train keys;
* per-user sums (hits, DCG, average precision) are weighted ``bincount`` over the users.

Protocol (what :func:`evaluate_recommendations` measures)
--------------------------------------------------------
* Users and items are the union of those in train and test (recommendations naming any
  other id are an input error).
* A test (user, item) pair that is also in train is ignored: it can never be recommended
  by a recommender that excludes seen items, so it would only add noise.
* Items from the user's training set are removed from that user's recommendations before
  scoring and the list closes up (the next item moves up a rank), so a recommender that
  forgot to exclude seen items is scored on what it would show. Repeated items keep only
  their best rank.
* Evaluated users are the test users with at least one test item left; an evaluated user
  without recommendations scores 0 on every metric. Averages are over evaluated users.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from ..data.inputs import check_readable
from ..data.interactions import Interactions
from ..errors import InputError
from ..files import PathLike

#: Metrics that are averaged over users, each computed at every k (in this order).
AT_K_METRICS = ("precision", "recall", "ndcg", "map", "hit_rate")
#: z value of a two-sided 95% normal interval.
Z95 = 1.96

InteractionsLike = Union[Interactions, pd.DataFrame]


# ----------------------------------------------------------------------------------------
# reading recommendation files
# ----------------------------------------------------------------------------------------
RECS_COLUMNS = ("user", "item", "score", "rank")


def read_recs(path: PathLike) -> pd.DataFrame:
    """Read a recommendations file as written by ``mrec-warp recommend``.

    Parameters
    ----------
    path : path-like
        ``.tsv`` (or any other suffix): tab-separated ``user item [score [rank]]`` with no
        header (a ``user<TAB>item...`` header line is tolerated); ``.csv``: the same columns
        comma-separated, with or without such a header; ``.parquet``: columns named
        ``user``, ``item`` and optionally ``score``, ``rank``. ``.gz`` compression works.

    Returns
    -------
    pandas.DataFrame
        Columns ``user``, ``item`` (str), ``score`` (float, NaN when absent), ``rank``
        (float; when absent, derived from descending score, else from the file order) and
        ``line`` (1-based line of the row in the file, for error messages).
    """
    p = check_readable(path, "recommendations file")
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
    from ..data.delimited import data_lines as _data_lines, split_fields as _split_fields

    for lineno, line in _data_lines(p, sep, limit=1, encoding=encoding):  # a byte-order mark is dropped
        fields = [f.lower() for f in _split_fields(line, sep)]
        if fields[:2] == ["user", "item"]:
            return [f or f"col{i}" for i, f in enumerate(fields)], lineno
        if len(fields) > len(RECS_COLUMNS):
            raise InputError(
                f"expected at most 4 columns (user, item, score, rank), found {len(fields)}",
                path=str(p), line=lineno, hint="write recommendations as user<TAB>item<TAB>score<TAB>rank",
            )
        return list(RECS_COLUMNS[: len(fields)]), 0
    raise InputError("recommendations file has no data lines", path=str(p))


def _read_recs_text(p: Path, sep: str) -> Tuple[pd.DataFrame, np.ndarray]:
    from ..data.inputs import detect_encoding

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
        import re

        m = re.search(r"line (\d+), saw (\d+)", str(exc))
        line = int(m.group(1)) if m else None  # pandas counts the skipped lines too
        found = f", found {m.group(2)}" if m else ""
        raise InputError(
            f"every line needs the same number of columns as the first{found}", path=str(p), line=line,
            hint="expected user<TAB>item<TAB>score<TAB>rank",
        ) from None
    except pd.errors.EmptyDataError:
        raise InputError("recommendations file has no data lines", path=str(p)) from None
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
    out = pd.DataFrame({name: _as_str(raw[name].fillna("")) for name in ("user", "item")})
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


# ----------------------------------------------------------------------------------------
# index space: user/item ids -> integer codes, interactions -> sorted int64 keys
# ----------------------------------------------------------------------------------------
@dataclass
class _Space:
    """Users and items of train + test as codes, and the train/test pairs as sorted keys."""

    user_ids: pd.Index
    item_ids: pd.Index
    n_train_items: int  # train items are codes 0 .. n_train_items - 1
    train_keys: np.ndarray
    test_keys: np.ndarray  # train overlap removed
    n_test: np.ndarray  # test items per user, overlap removed
    n_test_in_train: int
    n_test_users_all_in_train: int  # had test rows, all of them also in train

    @property
    def n_items(self) -> int:
        return len(self.item_ids)

    @property
    def n_users(self) -> int:
        return len(self.user_ids)

    def keys(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        return users.astype(np.int64) * np.int64(self.n_items) + items.astype(np.int64)


def _pairs(data: InteractionsLike, what: str) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(row codes, col codes, user ids, item ids) of the stored positives of ``data``."""
    if isinstance(data, Interactions):
        csr = data.matrix
        rows = np.repeat(np.arange(csr.shape[0]), np.diff(csr.indptr))
        keep = csr.data != 0  # an explicit zero is not a positive
        return rows[keep], csr.indices[keep].astype(np.int64), data.user_ids.astype(str), data.item_ids.astype(str)
    if isinstance(data, pd.DataFrame):
        missing = [c for c in ("user", "item") if c not in data.columns]
        if missing:
            raise ValueError(f"{what} table needs columns 'user' and 'item'; missing {missing}")
        # factorize the column itself: converting millions of strings to numpy first is slow
        u_codes, u_ids = pd.factorize(_as_str(data["user"]), sort=False)
        i_codes, i_ids = pd.factorize(_as_str(data["item"]), sort=False)
        return u_codes.astype(np.int64), i_codes.astype(np.int64), np.asarray(u_ids, str), np.asarray(i_ids, str)
    raise TypeError(f"{what} must be an Interactions or a DataFrame with user/item columns, got {type(data).__name__}")


def _as_str(column: pd.Series) -> pd.Series:
    return column if pd.api.types.is_string_dtype(column.dtype) else column.astype(str)


def _encode(column: pd.Series, index: pd.Index) -> np.ndarray:
    """Codes of ``column``'s ids in ``index`` (-1 if unknown), looking up each distinct id once."""
    codes, uniques = pd.factorize(_as_str(column), sort=False)
    return index.get_indexer(np.asarray(uniques, dtype=object))[codes].astype(np.int64)


def _extend(index: pd.Index, ids: np.ndarray) -> pd.Index:
    """``index`` followed by the ids it does not know yet, in order of first appearance."""
    known = index.get_indexer(ids) >= 0
    new = pd.unique(ids[~known])
    return index.append(pd.Index(new, dtype=object)) if len(new) else index


def _build_space(train: InteractionsLike, test: InteractionsLike, catalog: Optional[Sequence[str]] = None) -> _Space:
    tr_rows, tr_cols, tr_users, tr_items = _pairs(train, "train")
    te_rows, te_cols, te_users, te_items = _pairs(test, "test")
    user_ids = _extend(pd.Index(tr_users, dtype=object), te_users)
    item_ids = _extend(pd.Index(tr_items, dtype=object), te_items)
    if catalog is not None:  # items that may be recommended though in neither file (cold start)
        item_ids = _extend(item_ids, np.asarray(catalog, dtype=str).astype(object))
    n_items = len(item_ids)
    # train codes are already right (train ids come first); test codes need translating
    te_u = user_ids.get_indexer(te_users)[te_rows]
    te_i = item_ids.get_indexer(te_items)[te_cols]
    train_keys = _sorted_unique(tr_rows.astype(np.int64) * n_items + tr_cols)
    test_keys = _sorted_unique(te_u.astype(np.int64) * n_items + te_i)
    overlap = _member(train_keys, test_keys)
    n_raw = _count_per_user(test_keys, n_items, len(user_ids))
    test_keys = test_keys[~overlap]
    n_test = _count_per_user(test_keys, n_items, len(user_ids))
    all_in_train = int(((n_raw > 0) & (n_test == 0)).sum())
    return _Space(user_ids, item_ids, len(tr_items), train_keys, test_keys, n_test, int(overlap.sum()), all_in_train)


def _count_per_user(keys: np.ndarray, n_items: int, n_users: int) -> np.ndarray:
    return np.bincount(keys // max(n_items, 1), minlength=n_users)


def _sorted_unique(keys: np.ndarray) -> np.ndarray:
    """Sorted distinct values (a plain sort + neighbour compare beats np.unique's hashing here)."""
    keys = np.sort(keys)
    keep = np.ones(len(keys), dtype=bool)
    keep[1:] = keys[1:] != keys[:-1]
    return keys[keep]


def _first_occurrence(values: np.ndarray) -> np.ndarray:
    """Mask of the first occurrence of every value, in array order."""
    order = np.argsort(values, kind="stable")  # stable: among equals, the earliest comes first
    ordered = values[order]
    first = np.ones(len(values), dtype=bool)
    first[order[1:][ordered[1:] == ordered[:-1]]] = False
    return first


def _member(sorted_keys: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``query[j] in sorted_keys`` for every j, by binary search (O(m log n), no Python loop)."""
    if len(sorted_keys) == 0:
        return np.zeros(len(query), dtype=bool)
    pos = np.searchsorted(sorted_keys, query)
    pos[pos == len(sorted_keys)] = 0
    return sorted_keys[pos] == query


# ----------------------------------------------------------------------------------------
# the evaluation proper
# ----------------------------------------------------------------------------------------
@dataclass
class Evaluation:
    """The result of scoring one recommendations table against one train/test split.

    Attributes
    ----------
    per_user : pandas.DataFrame
        One row per evaluated user (index: user id): ``n_test``, ``n_recs`` (after removing
        train items and repeats) and one column per metric (``precision@10``, ..., ``mrr``).
    summary : pandas.DataFrame
        One row per metric (the per-user metrics, then ``coverage@k``), columns ``mean``,
        ``sd``, ``n``, ``ci95`` (half-width ``1.96 * sd / sqrt(n)``), ``low``, ``high``.
        Coverage is one global number: its ``sd``/``ci95`` are NaN.
    ks : tuple of int
    info : dict
        Counts describing what was evaluated and cleaned (see :func:`evaluate_recommendations`).
    """

    per_user: pd.DataFrame
    summary: pd.DataFrame
    ks: Tuple[int, ...]
    info: Dict[str, int] = field(default_factory=dict)

    @property
    def metrics(self) -> List[str]:
        """Metric names, in report order."""
        return list(self.summary.index)

    def mean(self, metric: str) -> float:
        return float(self.summary.loc[metric, "mean"])


def metric_names(ks: Sequence[int]) -> List[str]:
    """Per-user metric column names in report order: each metric at every k, then ``mrr``."""
    return [f"{m}@{k}" for m in AT_K_METRICS for k in ks] + ["mrr"]


def evaluate_recommendations(
    train: InteractionsLike,
    test: InteractionsLike,
    recs: pd.DataFrame,
    ks: Sequence[int] = (5, 10, 20),
    source: Optional[str] = None,
    catalog: Optional[Sequence[str]] = None,
) -> Evaluation:
    """Score top-k recommendations against held-out positives.

    Parameters
    ----------
    train, test : Interactions or pandas.DataFrame
        Positives (every stored pair / every row); DataFrames need ``user`` and ``item``.
    recs : pandas.DataFrame
        Columns ``user``, ``item`` and ``rank`` (1 = best; when absent, descending
        ``score``, else the row order per user, is the ranking; ties keep row order). An
        optional ``line`` column is used in error messages (as produced by
        :func:`read_recs`).
    ks : sequence of int
        Cut-offs, each >= 1.
    source : str, optional
        Name of the recommendations file, for error messages.
    catalog : sequence of str, optional
        Item ids that may be recommended although they are in neither ``train`` nor
        ``test`` (with a cold-items split: the new items nobody liked); they count as misses.

    Returns
    -------
    Evaluation

    Raises
    ------
    InputError
        When a recommended user or item is in neither train nor test (the recommendations
        were probably made from another split), naming ``source`` and the line.

    Notes
    -----
    With ``hits@k`` the number of the user's test items among the first k recommendations
    (after train items are removed), ``T`` the user's test items and ``rank`` 1-based:

    * ``precision@k = hits@k / k`` (k even when the list is shorter)
    * ``recall@k = hits@k / |T|``
    * ``ndcg@k = sum_{hits at rank r <= k} 1/log2(r+1)  /  sum_{r=1}^{min(k,|T|)} 1/log2(r+1)``
    * ``map@k = sum_{hits at rank r <= k} (hits@r / r)  /  min(k, |T|)``
    * ``hit_rate@k = 1 if hits@k > 0 else 0``
    * ``mrr = 1 / rank of the first test item in the whole list, 0 if none``
    * ``coverage@k`` (global) = distinct train items in the evaluated users' top k /
      number of train items (for an Interactions, all of its item ids).

    The ``info`` counts: ``n_users_evaluated``, ``n_users_without_recs`` (evaluated users
    absent from ``recs``), ``n_users_short_list`` (evaluated users with fewer than max(ks)
    items after cleaning), ``n_rec_rows``, ``n_rec_rows_in_train`` and
    ``n_rec_rows_repeated`` (removed), ``n_test_pairs`` (scored), ``n_test_pairs_in_train``
    (ignored), ``n_test_users_all_in_train``, ``n_train_items``, ``n_items``.
    """
    return score_against(_build_space(train, test, catalog), recs, ks, source)


def score_against(space: _Space, recs: pd.DataFrame, ks: Sequence[int] = (5, 10, 20),
                  source: Optional[str] = None) -> Evaluation:
    """:func:`evaluate_recommendations` against a split already coded by ``_build_space``,
    so several recommendation files share that work."""
    ks = _check_ks(ks)
    users, items, info = _recs_codes(recs, space, source)
    users, items, pos, cleaning = _ranked_lists(users, items, recs, space)
    info.update(cleaning)

    evaluated = space.n_test > 0
    per_user = _per_user_metrics(users, items, pos, space, ks)
    frame = pd.DataFrame(per_user, index=pd.Index(space.user_ids, name="user"))
    n_recs = np.bincount(users, minlength=space.n_users)
    frame.insert(0, "n_recs", n_recs)
    frame.insert(0, "n_test", space.n_test)
    frame = frame.loc[evaluated]

    coverage = _coverage(users, items, pos, evaluated, space, ks)
    info.update(
        n_users_evaluated=int(evaluated.sum()),
        n_users_without_recs=int((evaluated & (info.pop("_users_in_recs") == 0)).sum()),
        n_users_short_list=int((evaluated & (n_recs < max(ks))).sum()),
        n_test_pairs=int(len(space.test_keys)),
        n_test_pairs_in_train=space.n_test_in_train,
        n_test_users_all_in_train=space.n_test_users_all_in_train,
        n_train_items=int(space.n_train_items),
        n_items=int(space.n_items),
    )
    summary = _summary_table(frame[metric_names(ks)], coverage)
    return Evaluation(per_user=frame, summary=summary, ks=ks, info=info)


def _check_ks(ks: Sequence[int]) -> Tuple[int, ...]:
    ks = tuple(int(k) for k in ks)
    if not ks or any(k < 1 for k in ks):
        raise ValueError(f"every k must be a positive integer, got {ks}")
    return tuple(sorted(set(ks)))


def _recs_codes(recs: pd.DataFrame, space: _Space, source: Optional[str]):
    """Map recommended ids to codes; unknown ids are an input error naming the line."""
    for name in ("user", "item"):
        if name not in recs.columns:
            raise ValueError(f"recommendations need columns 'user' and 'item'; missing {name!r}")
    users = _encode(recs["user"], space.user_ids)
    items = _encode(recs["item"], space.item_ids)
    for kind, codes, column in (("user", users, "user"), ("item", items, "item")):
        unknown = codes < 0
        if unknown.any():
            row = int(np.flatnonzero(unknown)[0])
            line = int(recs["line"].iloc[row]) if "line" in recs.columns else row + 1
            more = int(unknown.sum()) - 1
            also = f" ({more} more such rows)" if more else ""
            raise InputError(
                f"{kind} {recs[column].iloc[row]!r} is in neither the training nor the test data{also}",
                path=source or "recommendations", line=line,
                hint="were these recommendations made from this train/test split?",
            )
    users_in_recs = np.bincount(users, minlength=space.n_users)
    return users.astype(np.int64), items.astype(np.int64), {"_users_in_recs": users_in_recs, "n_rec_rows": len(recs)}


def _ranked_lists(users: np.ndarray, items: np.ndarray, recs: pd.DataFrame, space: _Space):
    """Sort by (user, rank), drop train items and repeats, return 0-based positions."""
    if "rank" in recs.columns:
        rank = recs["rank"].to_numpy(dtype=np.float64)
        if np.isnan(rank).any():
            raise ValueError("recommendations have missing ranks")
    elif "score" in recs.columns:
        rank = -recs["score"].to_numpy(dtype=np.float64)  # higher score = better rank
    else:
        rank = np.zeros(len(users))
    # file order breaks rank ties so the result never depends on the sort algorithm
    order = np.lexsort((np.arange(len(users)), rank, users))
    users, items = users[order], items[order]
    keys = space.keys(users, items)

    in_train = _member(space.train_keys, keys)
    first = _first_occurrence(keys)  # lists are sorted by rank: the first occurrence is the best
    keep = first & ~in_train
    users, items = users[keep], items[keep]
    # position within the user's list: index minus the index where the user's run starts
    pos = np.arange(len(users)) - np.searchsorted(users, users, side="left")
    cleaning = {"n_rec_rows_in_train": int(in_train.sum()), "n_rec_rows_repeated": int((~first & ~in_train).sum())}
    return users, items, pos, cleaning


def _discount_cumsum(n: int) -> np.ndarray:
    """``out[j] = sum_{p=0}^{j-1} 1/log2(p+2)``: the ideal DCG with j relevant items."""
    return np.concatenate([[0.0], np.cumsum(1.0 / np.log2(np.arange(n) + 2.0))])


def _per_user_metrics(users, items, pos, space: _Space, ks: Tuple[int, ...]) -> Dict[str, np.ndarray]:
    n_users = space.n_users
    n_test = space.n_test.astype(np.float64)
    safe_n_test = np.maximum(n_test, 1.0)  # non-evaluated users are dropped afterwards
    hit = _member(space.test_keys, space.keys(users, items))
    # running number of hits within each user's list, counting the current position
    c = np.concatenate([[0], np.cumsum(hit)])
    hits_so_far = c[1:] - c[np.searchsorted(users, users, side="left")]
    ideal = _discount_cumsum(max(ks))

    # only the hits matter from here on: take them, their discounts and AP terms once
    hit_users, hit_pos = users[hit], pos[hit]
    discount = 1.0 / np.log2(hit_pos + 2.0)
    ap_term = hits_so_far[hit] / (hit_pos + 1.0)
    out: Dict[str, np.ndarray] = {}
    for k in ks:
        sel = hit_pos < k
        u = hit_users[sel]
        hits = np.bincount(u, minlength=n_users).astype(np.float64)
        n_ideal = np.minimum(k, space.n_test)
        out[f"precision@{k}"] = hits / k
        out[f"recall@{k}"] = hits / safe_n_test
        out[f"ndcg@{k}"] = (np.bincount(u, weights=discount[sel], minlength=n_users)
                            / np.where(n_ideal > 0, ideal[n_ideal], 1.0))
        out[f"map@{k}"] = np.bincount(u, weights=ap_term[sel], minlength=n_users) / np.maximum(n_ideal, 1)
        out[f"hit_rate@{k}"] = (hits > 0).astype(np.float64)
    out = {name: out[name] for name in metric_names(ks) if name in out}  # metric-major order
    out["mrr"] = _reciprocal_rank(hit_users, hit_pos, n_users)
    return out


def _reciprocal_rank(hit_users: np.ndarray, hit_pos: np.ndarray, n_users: int) -> np.ndarray:
    rr = np.zeros(n_users)
    # hit arrays are sorted by (user, position): a user's first entry is the first hit
    first = np.ones(len(hit_users), dtype=bool)
    first[1:] = hit_users[1:] != hit_users[:-1]
    rr[hit_users[first]] = 1.0 / (hit_pos[first] + 1.0)
    return rr


def _coverage(users, items, pos, evaluated, space: _Space, ks) -> Dict[int, float]:
    out = {}
    counted = evaluated[users] & (items < space.n_train_items)  # the same for every k
    for k in ks:
        sel = counted & (pos < k)
        distinct = int(np.count_nonzero(np.bincount(items[sel], minlength=space.n_items)))
        out[k] = distinct / space.n_train_items if space.n_train_items else float("nan")
    return out


# ----------------------------------------------------------------------------------------
# statistics
# ----------------------------------------------------------------------------------------
SUMMARY_COLUMNS = ("mean", "sd", "n", "ci95", "low", "high")


def summarize(values: Union[np.ndarray, pd.Series]) -> Dict[str, float]:
    """Mean and normal-approximation 95% confidence interval of per-user values.

    ``ci95 = 1.96 * sd / sqrt(n)`` with the sample standard deviation (ddof=1); the
    interval is ``mean +- ci95``. With fewer than two values sd and ci95 are NaN.
    """
    v = np.asarray(values, dtype=np.float64)
    n = int(v.size)
    mean = float(v.mean()) if n else float("nan")
    sd = float(v.std(ddof=1)) if n > 1 else float("nan")
    half = Z95 * sd / np.sqrt(n) if n > 1 else float("nan")
    return {"mean": mean, "sd": sd, "n": n, "ci95": half, "low": mean - half, "high": mean + half}


def _summary_table(per_user: pd.DataFrame, coverage: Dict[int, float]) -> pd.DataFrame:
    rows = {m: summarize(per_user[m].to_numpy()) for m in per_user.columns}
    for k, value in coverage.items():
        rows[f"coverage@{k}"] = _global_number(value)
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(SUMMARY_COLUMNS))


def _global_number(value: float) -> Dict[str, float]:
    nan = float("nan")
    return {"mean": float(value), "sd": nan, "n": nan, "ci95": nan, "low": nan, "high": nan}


def paired_difference(base: Evaluation, other: Evaluation) -> pd.DataFrame:
    """Per-user paired difference ``other - base`` for every metric, with its 95% CI.

    Users are matched by id; only users evaluated in both count (with the same train and
    test files that is all of them). Pairing removes the between-user variance, so the
    interval is much tighter than comparing the two separate intervals. Coverage, a global
    number, gets the plain difference and no interval.

    Returns
    -------
    pandas.DataFrame
        Same layout as :attr:`Evaluation.summary`.
    """
    common = base.per_user.index.intersection(other.per_user.index)
    if len(common) == 0:
        raise ValueError("the two evaluations share no evaluated users; were they made on the same split?")
    rows = {}
    for metric in base.metrics:
        if metric in base.per_user.columns and metric in other.per_user.columns:
            diff = other.per_user.loc[common, metric].to_numpy() - base.per_user.loc[common, metric].to_numpy()
            rows[metric] = summarize(diff)
        elif metric in other.summary.index:
            rows[metric] = _global_number(other.mean(metric) - base.mean(metric))
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(SUMMARY_COLUMNS))


def across_splits(values: Sequence[float]) -> Dict[str, float]:
    """Mean and standard error of one number measured on several splits.

    ``se = sd(values, ddof=1) / sqrt(n_splits)``; NaN with a single split. The standard
    error (not a 1.96 interval) is reported because with a handful of splits a normal
    95% interval would be too narrow; read mean +- 2 se as a rough 95% interval.
    """
    v = np.asarray([x for x in values], dtype=np.float64)
    n = int(v.size)
    se = float(v.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    return {"mean": float(v.mean()) if n else float("nan"), "se": se, "n_splits": n, "values": v.tolist()}


# ----------------------------------------------------------------------------------------
# AUC from a scoring function
# ----------------------------------------------------------------------------------------
ScoreFn = Callable[[np.ndarray], np.ndarray]


@dataclass
class AUCResult:
    """Per-user ROC AUC and its average.

    Attributes
    ----------
    per_user : pandas.Series
        AUC of each evaluated user, indexed by user id.
    mean, ci95 : float
        Average over users and the half-width of its 95% CI (``1.96 * sd / sqrt(n)``).
    n_users : int
    n_test_pairs_skipped : int
        Test pairs whose user or item the model does not know (cannot be scored).
    """

    per_user: pd.Series
    mean: float
    ci95: float
    n_users: int
    n_test_pairs_skipped: int


def auc(
    score_fn: ScoreFn,
    train: Interactions,
    test: InteractionsLike,
    block_size: int = 1024,
    max_block_cells: int = 1 << 24,
) -> AUCResult:
    """Per-user AUC of test items against items the user has not interacted with.

    For each test user, AUC is the probability that a random test item scores higher than
    a random *negative* item (neither in the user's train nor test set), ties counting
    one half: the Mann-Whitney U statistic divided by ``n_pos * n_neg``. Users with no
    test item or no negative item are skipped. The result is averaged over users.

    Parameters
    ----------
    score_fn : callable
        ``score_fn(user_indices) -> array (len(user_indices), train.n_items)``: scores of
        the given training-row indices against every training item, e.g.
        ``model.score_users``. Higher means more relevant.
    train : Interactions
        The training data, in the model's index space.
    test : Interactions or pandas.DataFrame
        Held-out positives; users or items unknown to ``train`` cannot be scored and are
        skipped (counted in ``n_test_pairs_skipped``), pairs also in train are ignored.
    block_size : int
        Users scored per call; lowered so a block never exceeds ``max_block_cells`` scores.
    """
    if not isinstance(train, Interactions):
        raise TypeError("auc needs the training Interactions (the model's index space)")
    csr = train.matrix
    n_users, n_items = csr.shape
    te_rows, te_cols, te_users, te_items = _pairs(test, "test")
    u = pd.Index(train.user_ids, dtype=object).get_indexer(te_users)[te_rows]
    i = pd.Index(train.item_ids, dtype=object).get_indexer(te_items)[te_cols]
    known = (u >= 0) & (i >= 0)
    train_keys = _train_keys(csr)
    test_keys = _sorted_unique(u[known].astype(np.int64) * n_items + i[known])
    test_keys = test_keys[~_member(train_keys, test_keys)]
    test_csr = _keys_to_csr(test_keys, n_users, n_items)
    n_pos = np.diff(test_csr.indptr)
    n_train = np.diff(csr.indptr)
    n_neg = n_items - n_train - n_pos
    users = np.flatnonzero((n_pos > 0) & (n_neg > 0))

    step = max(1, min(int(block_size), max_block_cells // max(n_items, 1)))
    values = np.empty(len(users))
    for start in range(0, len(users), step):
        block = users[start:start + step]
        values[start:start + step] = _auc_block(score_fn, block, csr, test_csr, n_pos[block], n_neg[block])
    stats = summarize(values)
    return AUCResult(
        per_user=pd.Series(values, index=pd.Index(train.user_ids[users], name="user"), name="auc"),
        mean=stats["mean"], ci95=stats["ci95"], n_users=len(users),
        n_test_pairs_skipped=int((~known).sum()),
    )


def _train_keys(csr) -> np.ndarray:
    rows = np.repeat(np.arange(csr.shape[0], dtype=np.int64), np.diff(csr.indptr))
    keep = csr.data != 0
    return _sorted_unique(rows[keep] * csr.shape[1] + csr.indices[keep])


def _keys_to_csr(keys: np.ndarray, n_users: int, n_items: int):
    import scipy.sparse as sp

    rows, cols = keys // max(n_items, 1), keys % max(n_items, 1)
    return sp.csr_matrix((np.ones(len(keys), np.float32), (rows, cols)), shape=(n_users, n_items))


def _auc_block(score_fn: ScoreFn, block, csr, test_csr, n_pos, n_neg) -> np.ndarray:
    from scipy.stats import rankdata

    n_items = csr.shape[1]

    scores = np.array(score_fn(block), dtype=np.float64, copy=True)
    if scores.shape != (len(block), n_items):
        raise ValueError(f"score_fn returned shape {scores.shape}, expected {(len(block), n_items)}")
    if np.isnan(scores).any():
        raise ValueError("score_fn returned NaN scores")
    sub = csr[block]
    rows = np.repeat(np.arange(len(block)), np.diff(sub.indptr))
    # train items go to +inf: above every candidate, so the ascending rank of a candidate
    # counts only candidates (test or negative) scoring lower than it
    scores[rows, sub.indices] = np.inf
    ranks = rankdata(scores, axis=1, method="average")
    pos = test_csr[block]
    pos_rows = np.repeat(np.arange(len(block)), np.diff(pos.indptr))
    pos_cols = pos.indices
    rank_sum = np.bincount(pos_rows, weights=ranks[pos_rows, pos_cols], minlength=len(block))
    u_stat = rank_sum - n_pos * (n_pos + 1) / 2.0
    return u_stat / (n_pos * n_neg)
