"""Interactions: a users x items CSR matrix plus the maps to the user's own ids."""
from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Optional, Sequence, Union

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..errors import InputError
from .arrow import as_arrow_table, is_arrow_like
from .id_text import coded_id_texts, frame_of, id_text, series_id_texts
from .near_ids import did_you_mean
from ..progress import plural
from .rows import (
    DEFAULT_EMPTY_IDS, DEFAULT_NEGATIVES, Locate, drop_empty_ids, empty_id_rows, empty_ids_error, factorize_ids,
    merge_rows, nothing_left, shown, table_locator,
)

#: Column names of the canonical interactions table (what ratings files are read into).
CANONICAL_COLUMNS = ("user", "item", "value", "timestamp")


def as_csr(matrix) -> sp.csr_matrix:
    """Return ``matrix`` as users x items CSR with sorted indices, float32 data, no duplicates.

    Index arrays are int32 while they fit and int64 beyond, so 20M+ interaction sets work.
    """
    if isinstance(matrix, Interactions):
        return matrix.matrix
    if not sp.issparse(matrix) and (matrix is None or np.ndim(matrix) != 2):
        # scipy makes None or a number a 1 x 1 matrix: a fit on it would report "1 users x 1 items"
        got = "None" if matrix is None else f"{type(matrix).__name__} of {np.ndim(matrix)} dimensions"
        raise InputError(f"the interactions must be a users x items matrix (scipy sparse or 2-D array) or "
                         f"Interactions, got {got}", hint="e.g. Interactions.from_dataframe(df)")
    csr = sp.csr_matrix(matrix, dtype=np.float32)
    if not csr.has_canonical_format:
        if sp.issparse(matrix) and matrix.format == "csr":  # sorting and merging work in place: never on
            csr = csr.copy()                                   # the caller's arrays, which csr shares
        csr.sum_duplicates()  # also sorts indices; keeps stored zeros (they are interactions)
    return csr


def binary_csr(csr: sp.csr_matrix) -> sp.csr_matrix:
    """The positives of a CSR as ones: implicit feedback, presence is the signal.

    Every stored entry is a positive, also one whose value is 0 (a row the user kept; its
    value is a strength, the weakest one), so the result has ``csr``'s structure exactly.
    Only the index arrays are copied (the caller's matrix may change later); the caller's
    values are never duplicated, which keeps the peak memory of large fits down.

    Raises
    ------
    InputError
        A stored value is negative, not a number or infinite.
    """
    check_values(csr.data, csr.indptr)
    return sp.csr_matrix((np.ones(csr.nnz, dtype=np.float32), csr.indices.copy(), csr.indptr.copy()),
                         shape=csr.shape)


def check_values(data: np.ndarray, indptr: Optional[np.ndarray] = None) -> None:
    """Raise :class:`~mrec_warp.errors.InputError` when a stored value is negative, NaN or infinite.

    An interaction's value is a strength >= 0 (0 the weakest): no reading of implicit
    feedback makes a negative one a positive, and silently training on it as one would be
    a wrong model. ``indptr`` (of a CSR holding ``data``) lets the message name the row.
    """
    data = np.asarray(data)
    bad = ~(data >= 0) | np.isinf(data)  # an infinite strength weighs nothing else: no model learns from it
    if bad.any():
        where = ""
        if indptr is not None:
            where = f" (the first in row {int(np.searchsorted(indptr, int(np.argmax(bad)), side='right') - 1)})"
        n_bad = int(bad.sum())
        raise InputError(f"{plural(n_bad, 'stored value')} {'is' if n_bad == 1 else 'are'} negative or not a number, or infinite{where}; "
                         "a value is the strength of an interaction, >= 0 (0 is the weakest)",
                         hint="drop or net those rows first (e.g. returns against purchases)")


def _id_array(values: Iterable) -> np.ndarray:
    """Ids are kept as unicode strings so they save to .npz without pickle and round-trip."""
    arr = np.asarray(list(values) if not isinstance(values, (np.ndarray, pd.Index)) else values)
    return arr.astype(str)


@dataclass
class Interactions:
    """Implicit feedback as a users x items sparse matrix with id maps.

    Attributes
    ----------
    matrix : scipy.sparse.csr_matrix
        users x items, float32 values, sorted indices, no explicit duplicates. The values
        are the raw ones (counts, hours, ratings: ``from_dataframe(value_col="value")``) or
        1; models that learn from presence only take :func:`binary_csr` of it, models that
        use a confidence compute it from these values with
        :func:`mrec_warp.data.confidence.confidence`.
    user_ids, item_ids : numpy.ndarray of str
        The original id of each row and column.
    """

    matrix: sp.csr_matrix
    user_ids: np.ndarray
    item_ids: np.ndarray
    _user_index: Optional[Dict[str, int]] = field(default=None, repr=False, compare=False)
    _item_index: Optional[Dict[str, int]] = field(default=None, repr=False, compare=False)
    #: What the row rules did (:attr:`mrec_warp.data.rows.MergedRows.counts`, plus
    #: ``rows_outside_given_ids``) when built by :meth:`from_dataframe`; ``None`` otherwise.
    row_counts: Optional[Dict[str, int]] = field(default=None, repr=False, compare=False)
    #: The matrix holds a file's value column (the stages' reader sets it); ``False``: ones,
    #: or values given in Python (which a WRMF fit weighs as its ``use_values`` says).
    has_values: bool = field(default=False, repr=False, compare=False)
    #: The file read had a value column, used or not (the stages' reader sets it): what the
    #: training log says was ignored.
    value_column: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.matrix = as_csr(self.matrix)
        self.user_ids = _id_array(self.user_ids)
        self.item_ids = _id_array(self.item_ids)
        if self.matrix.shape != (len(self.user_ids), len(self.item_ids)):
            raise ValueError(
                f"matrix shape {self.matrix.shape} does not match "
                f"{len(self.user_ids)} user ids x {len(self.item_ids)} item ids"
            )
        for kind, ids in (("user", self.user_ids), ("item", self.item_ids)):
            index = pd.Index(ids)
            if not index.is_unique:  # two rows under one id: look-ups would silently pick one
                raise ValueError(f"{kind} id {index[index.duplicated()][0]!r} names more than one "
                                 f"{'row' if kind == 'user' else 'column'}; ids must be unique")

    # -- sizes ---------------------------------------------------------------------------
    @property
    def n_users(self) -> int:
        return self.matrix.shape[0]

    @property
    def n_items(self) -> int:
        return self.matrix.shape[1]

    @property
    def nnz(self) -> int:
        return int(self.matrix.nnz)

    # -- id maps -------------------------------------------------------------------------
    @property
    def user_index(self) -> Dict[str, int]:
        if self._user_index is None:
            self._user_index = {u: i for i, u in enumerate(self.user_ids.tolist())}
        return self._user_index

    @property
    def item_index(self) -> Dict[str, int]:
        if self._item_index is None:
            self._item_index = {u: i for i, u in enumerate(self.item_ids.tolist())}
        return self._item_index

    def user_indices(self, ids: Sequence, strict: bool = True, source: Optional[str] = None) -> np.ndarray:
        """Map user ids to row indices; unknown ids raise (``strict``) or map to -1.

        ``ids`` is one id (a str is always a single id) or a sequence; numbers are looked
        up as their text.
        """
        return lookup_ids(self.user_index, ids, "user", strict, source)

    def item_indices(self, ids: Sequence, strict: bool = True, source: Optional[str] = None) -> np.ndarray:
        """Map item ids to column indices; unknown ids raise (``strict``) or map to -1."""
        return lookup_ids(self.item_index, ids, "item", strict, source)

    # -- conversions ---------------------------------------------------------------------
    @classmethod
    def from_dataframe(
        cls,
        df: pd.DataFrame,
        user_col: str = "user",
        item_col: str = "item",
        value_col: Optional[str] = None,
        user_ids: Optional[Sequence] = None,
        item_ids: Optional[Sequence] = None,
        duplicates: Optional[str] = None,
        negatives: str = DEFAULT_NEGATIVES,
        min_value: Optional[float] = None,
        source: Optional[str] = None,
        empty_ids: str = DEFAULT_EMPTY_IDS,
    ) -> "Interactions":
        """Build from a table of (user, item[, value]) rows, by the same row rules as the CLI.

        Every row kept is an interaction; its value is a strength, and a 0 is kept (the
        lowest). The table is refused, as the CLI refuses a file, with an
        :class:`~mrec_warp.errors.InputError` (a ``ValueError``) naming the row: a missing
        column, an empty or missing (NA) id, a value that is not a finite number, a negative
        value unless ``negatives`` says what it means.

        Parameters
        ----------
        df : pandas.DataFrame, polars.DataFrame or pyarrow.Table
            One interaction per row. A polars DataFrame, a pyarrow Table or RecordBatch, or
            any table with the Arrow PyCapsule (``__arrow_c_stream__``) or interchange
            (``__dataframe__``) protocol is read through pyarrow (``pip install
            mrec-warp[parquet]``). Ids are taken as their text by one rule whatever the
            table (:mod:`mrec_warp.data.id_text`), the text a file of the same ids holds:
            strings as they are; integers as ``7``; whole-number floats as their integer
            (``3.0`` is ``3``, ``-0.0`` is ``0``: a pandas id column with a NaN is float64),
            other floats as their shortest text (``1.5``); categorical / dictionary columns
            (pandas ``category``, polars ``Categorical`` / ``Enum``, Arrow dictionaries) as
            their values. A null, NA or NaN id is a missing one (see ``empty_ids``).
            Refusals name the row as the CLI does: ``data row 1`` is the table's first row
            (by position; a pandas index other than 0, 1, 2... is shown beside it).
        user_col, item_col : str
            The columns holding the user and item ids (default ``"user"``, ``"item"``, the
            names :func:`~mrec_warp.data.ratings.read_ratings` gives).
        value_col : str, optional
            The column holding each row's value (count, hours, rating); without it every row
            is 1. It must exist.
        user_ids, item_ids : sequence, optional
            Fix the index space (rows with ids outside it are dropped); by default ids are
            taken in order of first appearance, those with a kept row only (an item whose
            every row was a return netted out is not in the data, as in ``prepare``'s files).
        duplicates : {"sum", "max", "first", "last", "count"}, optional
            How repeated (user, item) rows merge (default ``sum``, as ``prepare``):
            :mod:`mrec_warp.data.rows`. With ``min_value`` and repeated pairs it must be
            given (ratings: ``last`` or ``max``; counts: ``sum``).
        negatives : {"refuse", "drop", "net"}
            What negative values do (default ``refuse``, as ``prepare``; with a
            ``min_value`` >= 0 they are ratings below it).
        min_value : float, optional
            Drop merged pairs valued below this (``prepare --min-value``); needs
            ``value_col`` unless ``duplicates="count"``.
        source : str, optional
            The file ``df`` was read from, named in errors (with the line, when ``df`` came
            from :func:`~mrec_warp.data.ratings.read_ratings`, which also names its file
            without ``source``).
        empty_ids : {"refuse", "drop"}
            Rows whose user or item id is empty (only spaces) or NA (anonymous rows, e.g. an
            empty customer id): refused by default, naming how many and the first;
            ``drop`` leaves them out, counted in ``row_counts["empty_id_rows_dropped"]``
            (``prepare --empty-ids``).

        The counts of the row rules (rows read, merged, dropped, pairs kept) are in the
        result's ``row_counts``.
        """
        if is_arrow_like(df):
            table = as_arrow_table(df, source)
            _check_columns(pd.DataFrame(columns=table.column_names), user_col, item_col, value_col, source)
            df = frame_of(table, (user_col, item_col, value_col), value_col)
        _check_columns(df, user_col, item_col, value_col, source)
        if not len(df):  # as the CLI refuses an empty file: a model of nothing is never what was meant
            raise InputError("the table has no rows", path=source, hint="expected one interaction per row")
        n_rows = len(df)
        df = df.copy(deep=False)  # a new frame sharing the data: the caller's keeps its index and columns
        labels, numbered = None, df.attrs.get("reading") is None
        if numbered:  # not read_ratings' table: rows are named by position from 1, as the CLI names them
            labels = None if df.index.equals(pd.RangeIndex(n_rows)) else df.index
            df.index = pd.RangeIndex(n_rows)
        for col in dict.fromkeys((user_col, item_col)):  # one id text for every route: 3.0 is '3' here too
            df[col] = coded_id_texts(df[col])  # a Categorical stays codes: no string per row
        df, n_empty = drop_empty_ids(df, empty_ids, user_col, item_col)
        locate = table_locator(df, user_col, item_col, source, numbered=numbered, labels=labels)
        users = checked_ids(df, user_col, "user", locate)
        items = checked_ids(df, item_col, "item", locate)
        values = None
        if value_col is not None:
            column = df[value_col]
            if column.dtype == np.float64:  # the reader's: taken as it is (the row rules only read it)
                values = column.to_numpy()
            else:
                values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
            bad = ~np.isfinite(values)
            if bad.any():
                row = int(np.argmax(bad))
                path, line, words = locate(row)
                raise InputError(f"value {shown(df[value_col].iloc[row])} in column {value_col!r} is not a finite "
                                 f"number ({plural(int(bad.sum()), 'such row')}), the first in {words}",
                                 path=path, line=line, hint="values are counts, hours or ratings; fix or drop those rows")
        if user_ids is None:
            u_codes, u_uniques = factorize_ids(users)
            u_uniques = np.asarray(u_uniques, dtype=object)
        else:
            u_uniques = _given_ids(user_ids)
            u_codes = _codes_in(u_uniques, users)
        if item_ids is None:
            i_codes, i_uniques = factorize_ids(items)
            i_uniques = np.asarray(i_uniques, dtype=object)
        else:
            i_uniques = _given_ids(item_ids)
            i_codes = _codes_in(i_uniques, items)
        keep = (u_codes >= 0) & (i_codes >= 0)
        positions = None
        if not keep.all():  # rows outside the given ids: the codes skip them, messages still name df's rows
            positions = np.flatnonzero(keep)
            u_codes, i_codes = u_codes[keep], i_codes[keep]
            values = None if values is None else values[keep]
        rows = merge_rows(u_codes, i_codes, values, None, len(i_uniques), duplicates=duplicates,
                          negatives=negatives, min_value=min_value, source=source,
                          locate=table_locator(df, user_col, item_col, source, positions, numbered, labels))
        merged = rows.counts["rows_read"]  # 0 when every row is outside the given ids: an empty reindex
        rows.counts["rows_read"] = n_rows
        rows.counts["empty_id_rows_dropped"] = n_empty
        if (merged or n_empty) and not rows.counts["pairs_kept"]:  # as prepare
            raise nothing_left(rows.counts, source, **({} if merged else {
                "hint": "every row has an empty user or item id: check user_col and item_col"}))
        counts = {**rows.counts, "rows_outside_given_ids": int((~keep).sum())}
        del df, locate, users, items, values, u_codes, i_codes, keep, positions  # what the caller does not hold goes
        user, item = rows.user, rows.item
        if user_ids is None:  # an id whose every row the rules removed is not in the data (as in prepare)
            user, u_uniques = compact_codes(user, u_uniques)
        if item_ids is None:
            item, i_uniques = compact_codes(item, i_uniques)
        matrix = sorted_pairs_csr(user, item, rows.value, (len(u_uniques), len(i_uniques)))
        del rows, user, item
        out = cls(matrix, np.asarray(u_uniques), np.asarray(i_uniques))
        out.row_counts = counts
        return out

    def to_dataframe(self) -> pd.DataFrame:
        """Rows of (user, item, value) in user-then-item index order."""
        coo = self.matrix.tocoo()
        return pd.DataFrame(
            {
                "user": self.user_ids[coo.row],
                "item": self.item_ids[coo.col],
                "value": coo.data,
            }
        )

    def reindex(self, user_ids: Optional[Union[Sequence, np.ndarray]] = None,
                item_ids: Optional[Union[Sequence, np.ndarray]] = None) -> "Interactions":
        """Express the same interactions in another id space (unknown ids dropped, new ones empty).

        Only the id lists are looked up, once each; the stored pairs move by their codes.
        """
        new_users = self.user_ids if user_ids is None else _id_array(user_ids)
        new_items = self.item_ids if item_ids is None else _id_array(item_ids)
        coo = self.matrix.tocoo()
        rows = pd.Index(new_users).get_indexer(self.user_ids)[coo.row]
        cols = pd.Index(new_items).get_indexer(self.item_ids)[coo.col]
        keep = (rows >= 0) & (cols >= 0)
        matrix = sp.csr_matrix((coo.data[keep], (rows[keep], cols[keep])),
                               shape=(len(new_users), len(new_items)), dtype=np.float32)
        return Interactions(matrix, np.asarray(new_users), np.asarray(new_items))


def sorted_pairs_csr(user: np.ndarray, item: np.ndarray, value: np.ndarray, shape) -> sp.csr_matrix:
    """The float32 CSR of distinct (user, item) pairs already in (user, item) order (what
    :func:`~mrec_warp.data.rows.merge_rows` returns), made from the codes as they are: no
    COO copy of the pairs and no sort. Index arrays are int32 while they fit, as scipy's."""
    index = np.int32 if max(len(item), *shape) < 2**31 else np.int64
    indptr = np.zeros(shape[0] + 1, dtype=index)
    np.cumsum(np.bincount(user, minlength=shape[0]), out=indptr[1:])
    matrix = sp.csr_matrix((value.astype(np.float32), item.astype(index), indptr), shape=shape)
    if not matrix.has_canonical_format:  # pragma: no cover - the merge sorts and merges the pairs
        raise AssertionError("merged pairs out of order")
    return matrix


def compact_codes(codes: np.ndarray, uniques: np.ndarray):
    """``codes`` renumbered over the ids they use, in the same order, and those ids."""
    used = np.zeros(len(uniques), dtype=bool)
    used[codes] = True
    if used.all():
        return codes, uniques
    return (np.cumsum(used) - 1)[codes], np.asarray(uniques)[used]


def _check_columns(df: pd.DataFrame, user_col: str, item_col: str, value_col: Optional[str],
                   source: Optional[str]) -> None:
    """Refuse a column name the table does not have (listing the ones it has), or has twice."""
    if not isinstance(df, pd.DataFrame):
        raise InputError(f"expected a pandas or polars DataFrame or a pyarrow Table, got {type(df).__name__}",
                         path=source)
    given: Dict[str, Any] = {}
    for role, col, param in (("user ids", user_col, "user_col"), ("item ids", item_col, "item_col"),
                             ("values", value_col, "value_col")):
        if col is None:
            continue
        if col in given:  # as the CLI refuses `--columns 0,0`: one column cannot hold two roles
            raise InputError(f"column {col!r} is chosen twice (`{given[col]}` and `{param}`)", path=source,
                             hint="give each column once")
        given[col] = param
        if col not in df.columns:
            have = ", ".join(repr(c) for c in df.columns) or "none"
            raise InputError(f"no column {col!r} for the {role}; the table has {have}", path=source,
                             hint="name the columns with user_col=, item_col= and value_col=")
        if int((df.columns == col).sum()) > 1:  # df[col] would be a table, not a column
            raise InputError(f"the table has {int((df.columns == col).sum())} columns named {col!r}, which "
                             f"{param} names", path=source,
                             hint="rename or drop the extra ones, e.g. `df.loc[:, ~df.columns.duplicated()]`")


def checked_ids(df: pd.DataFrame, col: str, role: str, locate: Locate) -> pd.Series:
    """The ids of a column as text (a ``Categorical`` of texts as it is: checked once per
    distinct id); a missing (NA) or empty id is refused, as the CLI refuses it
    (``empty_ids="drop"`` has removed those rows before)."""
    if isinstance(df[col].dtype, pd.CategoricalDtype):
        text = df[col]
        empty = empty_id_rows(df, [col])
    else:
        text = df[col].astype(str)  # once: the ids returned, and what the emptiness check strips
        empty = empty_id_rows(df, [col], {col: text})
    if empty.any():
        row = int(np.argmax(empty))
        path, line, words = locate(row)
        cell = df[col].iloc[row]
        what = "a missing (NA)" if pd.isna(cell) else "an empty" + (" (only spaces)" if str(cell) else "")
        raise empty_ids_error(int(empty.sum()), role, _column_words(df, col), f"in {words}", path=path, line=line,
                              what=what)
    return text  # a Series: factorising Arrow strings as they are is 3x faster than as Python objects


def _column_words(df: pd.DataFrame, col: str) -> str:
    """A column as messages name it: the file's own column (``column 0 'customer'``) for a
    table :func:`~mrec_warp.data.ratings.read_ratings` read, whose ``user`` / ``item`` were
    chosen from it (``--columns customer,...``), else ``column 'user'``."""
    chosen = ((df.attrs.get("reading") or {}).get("columns") or {}).get(col) if col in CANONICAL_COLUMNS else None
    if not chosen:
        return f"column {col!r}"
    name = chosen.get("name")
    return f"column {chosen.get('position')}" + (f" {name!r}" if name is not None else "")


def _codes_in(ids: np.ndarray, column: pd.Series) -> np.ndarray:
    """Each row's position in ``ids`` (-1 when not there); a ``Categorical`` column's
    categories are looked up once each, not its rows."""
    index = pd.Index(ids)
    if isinstance(column.dtype, pd.CategoricalDtype):
        return np.append(index.get_indexer(column.cat.categories), -1)[column.cat.codes.to_numpy()]
    return index.get_indexer(column)


def _given_ids(ids) -> np.ndarray:
    """``user_ids`` / ``item_ids`` given to :meth:`Interactions.from_dataframe` as text by the
    rule the table's ids follow (a float ``3.0`` is ``3``, as in the column), so that the
    same ids in both match."""
    column = ids if isinstance(ids, pd.Series) else pd.Series(
        ids if isinstance(ids, (np.ndarray, pd.Index)) else _id_values(ids))
    return _id_array(series_id_texts(column).to_numpy(dtype=object))


def _id_values(ids) -> list:
    """Ids as a list, one id (a str, a number) as a list of one, never the characters of a string."""
    if isinstance(ids, (str, bytes, numbers.Number, np.generic)) or (isinstance(ids, np.ndarray) and ids.ndim == 0):
        return [ids.item() if isinstance(ids, np.ndarray) else ids]
    return list(ids)


def id_texts(ids) -> list:
    """Ids as a list of str: one id (a str, or a number given as such) is one id, never the
    characters of a string (``"196"`` is the id 196, not the ids 1, 9 and 6); a float by
    the rule of :mod:`~mrec_warp.data.id_text` (``3.0`` is ``'3'``)."""
    return [x.decode("utf-8") if isinstance(x, bytes) else id_text(x) if isinstance(x, (float, np.floating))
            else str(x) for x in _id_values(ids)]  # a float as the tables' ids: 3.0 is '3'


def lookup_ids(index: Dict[str, int], ids: Sequence, kind: str, strict: bool, source: Optional[str]) -> np.ndarray:
    """Indices of ``ids`` in an id map (-1 for unknown ones, or an :class:`InputError` with a
    did-you-mean when ``strict``)."""
    ids = id_texts(ids)
    out = np.fromiter((index.get(x, -1) for x in ids), dtype=np.int64, count=len(ids))
    if strict and (out < 0).any():
        bad = ids[int(np.flatnonzero(out < 0)[0])]
        n_bad = int((out < 0).sum())
        near = did_you_mean(bad, index, index.keys())
        raise InputError(
            f"{n_bad} {kind} id(s) not known to the model, e.g. {bad!r}" + (f" ({near})" if near else ""),
            path=source,
            hint=f"pass only {kind}s present in the training data",
        )
    return out
