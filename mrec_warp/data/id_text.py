"""The text of an id, one rule for every route a table takes in (pandas, pyarrow, polars,
Parquet, a text file).

An id is what a text file of the same ids holds:

* a string as it is (spaces, commas, emoji, leading zeros);
* an integer as its decimal text (``7``);
* a float that is a whole number as the integer's text (``3.0`` is ``3``, ``-0.0`` is ``0``,
  ``1e20`` is ``100000000000000000000``): a column of integer ids that went through a NaN
  (pandas makes it float64) keeps the ids a text file written by the user says;
* any other float as its shortest round-trip text at its own precision (``1.5``; a float32
  ``0.1`` is ``0.1``);
* a categorical / dictionary column as its values, by these same rules;
* a null, NA or NaN as a missing id (``None``), refused or dropped as an empty field of a
  text file is (``empty_ids``).

:func:`float_id_texts` is the float rule; :func:`series_id_texts` applies the rules to a
pandas column, :func:`id_texts` to an Arrow one (a pyarrow or polars table's, a Parquet
file's), and :func:`frame_of` to the columns of an Arrow table; :func:`number_values`
reads an Arrow value column as a text file's value column is read.
"""
from __future__ import annotations

import numbers
from typing import Callable, Optional, Sequence

import numpy as np
import pandas as pd

from ..errors import InputError
from .arrow import one_array, pyarrow

#: Whole floats below this convert to int64 in one step; larger ones one by one as Python ints.
_INT64_LIMIT = 2.0 ** 63


def text_rows(column: pd.Series, test: Callable[[pd.Series], pd.Series]) -> np.ndarray:
    """``test`` (a vectorised check of texts, e.g. ``lambda t: t.str.strip() == ""``) of each
    row of a text column, as a bool array. A ``Categorical`` column is tested once per
    distinct text and the answers spread to the rows by their codes: no string per row is
    made (a missing value, code -1, is False: callers check missing values themselves)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        flags = np.asarray(test(pd.Series(column.cat.categories)), dtype=bool)
        return np.append(flags, False)[column.cat.codes.to_numpy()]
    return np.asarray(test(column), dtype=bool)


def float_id_texts(values: np.ndarray) -> np.ndarray:
    """Float ids as an object array of str, ``None`` where the value is NaN (module docstring)."""
    values = np.asarray(values)
    if values.dtype.kind != "f":
        values = values.astype(np.float64)
    missing = np.isnan(values)
    whole = ~missing & np.isfinite(values) & (values == np.round(values))
    small = whole & (np.abs(values) < _INT64_LIMIT)
    out = np.empty(len(values), dtype=object)
    out[small] = [str(v) for v in values[small].astype(np.int64).tolist()]
    big = whole & ~small
    out[big] = [str(int(v)) for v in values[big].tolist()]
    rest = ~missing & ~whole
    out[rest] = [str(v) for v in values[rest]]  # numpy's str: the shortest text at the value's precision
    out[missing] = None
    return out


def id_text(value):
    """One cell of an object column as its id text (module docstring), ``None`` when missing."""
    if value is None or (isinstance(value, float) and value != value) or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, (float, np.floating)):
        return float_id_texts(np.array([value]))[0]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Number):
        return str(value)
    return str(value.item() if isinstance(value, np.generic) else value)


def series_id_texts(column: pd.Series) -> pd.Series:
    """A pandas id column as text by the module's rules, same index, missing ids as NA.

    Strings stay as they are (the same Series when it already holds text only); numbers,
    categories and Arrow-backed columns (``string_view``, dictionaries) become the text the
    Arrow route gives for the same values.
    """
    dtype = column.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        categories = series_id_texts(pd.Series(dtype.categories)).to_numpy(dtype=object)
        codes = column.cat.codes.to_numpy()
        out = categories[np.maximum(codes, 0)] if len(categories) else np.full(len(codes), None, dtype=object)
        out[codes < 0] = None
        return pd.Series(out, index=column.index, dtype=object)
    if isinstance(dtype, getattr(pd, "ArrowDtype", ())):
        return pd.Series(id_texts(pyarrow("an Arrow-backed column").array(column)), index=column.index,
                         dtype=object)
    if dtype.kind == "f":  # numpy floats and pandas' nullable Float64
        precision = dtype if isinstance(dtype, np.dtype) and dtype.itemsize <= 8 else np.float64
        values = column.to_numpy(dtype=precision, na_value=np.nan)
        return pd.Series(float_id_texts(values), index=column.index, dtype=object)
    if isinstance(dtype, np.dtype) and dtype.kind == "O" \
            and pd.api.types.infer_dtype(column, skipna=True) not in ("string", "empty"):
        return pd.Series([id_text(v) for v in column.tolist()], index=column.index, dtype=object)
    if dtype.kind in "OSU" or isinstance(dtype, pd.StringDtype):
        missing = column.isna()
        if not missing.any():
            return column if isinstance(dtype, pd.StringDtype) else column.astype(str)
        return column.astype(str).where(~missing, None)  # astype(str) would make a None the id 'None'
    return column.astype(str)  # integers (also nullable Int64: NA stays NA), booleans, dates


def coded_id_texts(column: pd.Series) -> pd.Series:
    """:func:`series_id_texts`, except that a ``Categorical`` column stays one, its
    categories made text, when their texts are distinct (``3`` and ``"3"`` are not: those
    go row by row): the same ids as codes, without a string per row (a big file's ids,
    :func:`~mrec_warp.data.ratings.read_ratings` with ``coded_ids``). A missing id is code -1."""
    dtype = column.dtype
    if not isinstance(dtype, pd.CategoricalDtype):
        return series_id_texts(column)
    categories = pd.Series(dtype.categories)
    if len(categories) and pd.api.types.infer_dtype(categories, skipna=False) == "string" \
            and not isinstance(dtype.categories.dtype, getattr(pd, "ArrowDtype", ())):
        return column  # text already: the fast reader's ids
    texts = series_id_texts(categories)
    if texts.isna().any() or not texts.is_unique:
        return series_id_texts(column)
    coded = pd.Categorical.from_codes(column.cat.codes.to_numpy(),
                                      dtype=pd.CategoricalDtype(pd.Index(texts.to_numpy(dtype=object))))
    return pd.Series(coded, index=column.index)


def id_texts(column) -> np.ndarray:
    """An Arrow id column as an object array of str, ``None`` where the id is null or NaN.

    The text is what a text file of the same ids holds, by this module's rule
    (which pandas columns go through too).
    """
    pa = pyarrow("an Arrow id column")
    pc = pa.compute
    column = one_array(column)
    kind = column.type
    if pa.types.is_floating(kind):
        values = column.to_numpy(zero_copy_only=False)  # a null is NaN, a missing id as NaN is
        return float_id_texts(values)
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind):
        try:
            column = pc.cast(column, pa.large_string())  # checks the bytes are UTF-8, as every id output is
        except pa.ArrowInvalid:
            raise InputError("an id column holds bytes that are not UTF-8 text",
                             hint="decode the ids to text first (e.g. from Latin-1)") from None
    elif not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        try:
            column = pc.cast(column, pa.large_string())  # integers as decimal text, booleans, dates, decimals
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise InputError(f"an id column of type {kind} cannot be read as text",
                             hint="ids are text or whole numbers; convert the column first") from None
    return np.asarray(column.to_pylist(), dtype=object)  # exact str objects; None for nulls


def is_text_type(kind) -> bool:
    """Whether the Arrow type ``kind`` is text or bytes (which a column of numbers or dates
    written as text has)."""
    types = pyarrow("an Arrow column").types
    return (types.is_string(kind) or types.is_large_string(kind) or types.is_binary(kind)
            or types.is_large_binary(kind) or types.is_fixed_size_binary(kind))


def number_values(column) -> np.ndarray:
    """An Arrow value column as float64, NaN where it is null; a text column is parsed as
    a text file's is (``pandas.to_numeric``), NaN where it is no number."""
    pa = pyarrow("an Arrow value column")
    column = one_array(column)
    kind = column.type
    types = pa.types
    if not (is_text_type(kind) or types.is_integer(kind) or types.is_floating(kind) or types.is_decimal(kind)
            or types.is_boolean(kind)):
        raise InputError(f"a column of type {kind} holds no numbers",
                         hint="values are counts, hours or ratings: numbers, or numbers as text; convert the "
                              "column first, or choose another with `columns`")
    if types.is_integer(kind) or types.is_floating(kind) or types.is_decimal(kind) or types.is_boolean(kind):
        values = pa.compute.cast(column, pa.float64(), safe=False)
        return values.to_numpy(zero_copy_only=False).astype(np.float64)  # nulls come out NaN
    text = pd.Series(id_texts(column), dtype=object)
    return pd.to_numeric(text.str.strip(), errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


def frame_of(table, columns: Sequence[Optional[str]], value_col: Optional[str] = None) -> pd.DataFrame:
    """The ``columns`` of a ``pyarrow.Table`` (:func:`~mrec_warp.data.arrow.as_arrow_table`)
    that :meth:`~mrec_warp.data.interactions.Interactions.from_dataframe` reads, as pandas:
    ids as text (None where null), ``value_col`` as float64; the rows keep their positions as
    labels (row 0 first)."""
    data = {}
    for col in dict.fromkeys(c for c in columns if c is not None):
        try:
            data[col] = number_values(table.column(col)) if col == value_col else id_texts(table.column(col))
        except InputError as exc:  # the Arrow rules know no column
            raise InputError(f"column {col!r}: {exc.message}", hint=exc.hint) from None
    return pd.DataFrame(data, index=pd.RangeIndex(table.num_rows))
