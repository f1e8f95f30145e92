"""Arrow tables in: pyarrow and polars tables (and anything speaking the Arrow PyCapsule or
dataframe interchange protocol) as one ``pyarrow.Table``, and its columns as plain arrays.

pyarrow is an optional dependency (``pip install mrec-warp[parquet]``), imported only
when such a table or a Parquet file is met, so the package imports without it
(:func:`pyarrow` says in one line what needs it). Dictionary-encoded (polars
``Categorical`` / ``Enum``), ``string_view`` and ``large_string`` columns read as their
values (:func:`one_array`). Their cells become ids and values by the one rule of
:mod:`mrec_warp.data.id_text`, which pandas columns and Parquet files follow too.
"""
from __future__ import annotations

from typing import Any, Optional

import pandas as pd

from ..errors import InputError

#: What installs the optional dependency, said in every refusal for want of it.
PYARROW_HINT = "pip install 'mrec-warp[parquet]' (or pip install pyarrow)"


def pyarrow(what: str, path: Optional[str] = None):
    """The ``pyarrow`` module, or a one-line :class:`InputError` saying ``what`` needs it."""
    try:
        import pyarrow as pa
        import pyarrow.compute  # noqa: F401 - used through pa.compute by the callers
    except ImportError:
        raise InputError(f"{what} needs pyarrow, which is not installed", path=path, hint=PYARROW_HINT) from None
    return pa


def is_arrow_like(obj: Any) -> bool:
    """Whether ``obj`` is a table other than pandas' that Arrow can take: a pyarrow Table or
    RecordBatch, or an object with ``__arrow_c_stream__`` (polars >= 1.?, pyarrow, duckdb)
    or ``__dataframe__`` (the interchange protocol: polars, modin, vaex, ...)."""
    if isinstance(obj, pd.DataFrame):
        return False
    return any(hasattr(obj, name) for name in ("__arrow_c_stream__", "__dataframe__", "to_arrow"))


def as_arrow_table(obj: Any, source: Optional[str] = None):
    """``obj`` as a ``pyarrow.Table`` (no copy where Arrow can share the buffers)."""
    pa = pyarrow(f"a {type(obj).__module__.split('.')[0]} {type(obj).__name__}", source)
    if isinstance(obj, pa.Table):
        return obj
    if isinstance(obj, pa.RecordBatch):
        return pa.Table.from_batches([obj])
    errors = []
    if hasattr(obj, "__arrow_c_stream__"):
        try:
            return pa.table(obj)
        except (TypeError, ValueError, pa.ArrowException) as exc:  # an older pyarrow: the next way
            errors.append(exc)
    if callable(getattr(obj, "to_arrow", None)):  # polars: also where the C stream is newer than pyarrow
        try:
            table = obj.to_arrow()
            if isinstance(table, pa.Table):
                return table
        except Exception as exc:  # noqa: BLE001 - tried in turn, reported together below
            errors.append(exc)
    if hasattr(obj, "__dataframe__"):
        try:
            return pa.interchange.from_dataframe(obj)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
    why = f" ({errors[-1]})" if errors else ""
    raise InputError(f"cannot read a {type(obj).__name__} as a table{why}", path=source,
                     hint="pass a pandas or polars DataFrame or a pyarrow Table")


def one_array(column):
    """An Arrow column (array or chunked array, dictionary-encoded or not) as one plain array
    (each chunk decoded on its own: chunks of a Parquet file may have their own dictionaries).

    View types (``string_view``, ``binary_view``: polars' strings, also inside the dictionary
    of a polars ``Categorical`` or ``Enum``) become ``large_string`` / ``large_binary``,
    which every pyarrow compute kernel takes (``take`` has no kernel for views)."""
    pa = pyarrow("an Arrow column")
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    if not chunks:
        kind = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
        return _plain_array(pa.array([], kind), pa)
    chunks = [_plain_array(c, pa) for c in chunks]
    if len(chunks) == 1:
        return chunks[0]
    return pa.concat_arrays(chunks)


def _plain_array(array, pa):
    """One Arrow array without dictionary encoding or view types (see :func:`one_array`)."""
    if pa.types.is_dictionary(array.type):  # decoded by hand: dictionary_decode fails on a view dictionary
        return _plain_array(array.dictionary, pa).take(array.indices)  # a null index gives a null
    kind = array.type
    if getattr(pa.types, "is_string_view", None) is not None and pa.types.is_string_view(kind):
        return pa.compute.cast(array, pa.large_string())
    if getattr(pa.types, "is_binary_view", None) is not None and pa.types.is_binary_view(kind):
        return pa.compute.cast(array, pa.large_binary())
    return array
