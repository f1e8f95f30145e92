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
pandas column, :func:`mrec_warp.data.arrow.id_texts` to an Arrow one.
"""
from __future__ import annotations

import numbers

import numpy as np
import pandas as pd

#: Whole floats below this convert to int64 in one step; larger ones one by one as Python ints.
_INT64_LIMIT = 2.0 ** 63


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
        from .arrow import id_texts, pyarrow  # pyarrow is there: the column is made of Arrow arrays

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
