"""What the stages read besides ratings: the interactions with their value column, a
parameters file (e.g. from ``tune``), the user / item feature files of a hybrid model, and
a model given as a file or an object.

Shared by the stages, so that each reads its inputs the same way and refuses the same
mistakes with the same words.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Union

import pandas as pd

from ..data.interactions import Interactions
from ..data.inputs import output_encoding
from ..data.ratings import READER_OPTIONS, read_ratings
from ..data.rows import DEFAULT_NEGATIVES
from ..errors import InputError
from ..models.families import model_classes
from .options import RowOptions

PathLike = Union[str, os.PathLike]


def load_interactions(path: PathLike, rows: Optional[RowOptions] = None, *, values: bool = False,
                      required: bool = True, reader_options: Sequence[str] = READER_OPTIONS,
                      own_layout: bool = False) -> Interactions:
    """Read a ratings file as ``rows`` says (its reader options and the row rules of
    :mod:`mrec_warp.data.rows`; by default a guessed layout, duplicates summed and negative
    values refused); with ``values`` the matrix holds the merged value column, else every
    kept pair is 1. A file without a value column is refused when ``required``, else read as
    ones (``has_values`` says which it was). The counts of the row rules are in
    ``row_counts``; ``reader_options`` are those the caller offers for this file
    (:func:`~mrec_warp.data.ratings.read_ratings`); ``own_layout``: the file is not the one
    the options describe (a validation file), so ``negatives`` applies only where it has values."""
    rows = rows or RowOptions()
    # ids as codes (a big file's memory: no string per row); from_dataframe takes them as they are
    df = read_ratings(path, **rows.reader, reader_options=reader_options, coded_ids=True)
    if values and required and "value" not in df:
        raise InputError("`confidence` needs a value column, and the file has only user and item", path=path,
                         hint="drop `confidence`, or give a file with a third column (count, hours, rating)")
    # a validation file (own_layout) may hold no values where TRAIN's have returns to net
    negatives = rows.negatives if "value" in df or not own_layout else DEFAULT_NEGATIVES
    data = Interactions.from_dataframe(df, value_col="value" if "value" in df else None,
                                       duplicates=rows.duplicates, negatives=negatives,
                                       min_value=rows.min_value, source=str(path), empty_ids=rows.empty_ids)
    if not (values and "value" in df):  # the value decided which pairs are kept; the model sees presence
        data.matrix.data[:] = 1.0
    data.has_values = values and "value" in df
    data.value_column = "value" in df
    data.id_encoding = df.attrs.get("encoding")  # so outputs write ids back as the same bytes
    return data


def load_validation(path: PathLike, train: Interactions, rows: Optional[RowOptions] = None) -> Interactions:
    """The validation file of ``train`` / ``tune``, every kept pair a 1.

    Read with its own layout guessed (:meth:`RowOptions.rules_only`): ``rows``' ``format``,
    ``sep``, ``header`` and ``columns`` describe TRAIN, often a raw export, while the validation
    file is usually ``prepare``'s test.tsv, whose layout differs (``columns=1,0,2`` would
    swap its users and items, a header would eat its first row). The row rules do apply
    (a return is no hit). A file that shares no (user, item) pair's user *and* item with
    ``train`` is refused: it would score every model 0 and early stopping would pick at random.
    """
    rows = rows or RowOptions()
    val = load_interactions(path, rows.rules_only(), reader_options=(),
                            own_layout=True)  # --sep & co. are TRAIN's: a hint must not suggest them
    known = val.reindex(train.user_ids, train.item_ids)
    if known.nnz == 0:
        users = int(pd.Index(val.user_ids).isin(train.user_ids).sum())
        items = int(pd.Index(val.item_ids).isin(train.item_ids).sum())
        raise InputError(f"no validation pair has a user and an item of the training data ({users:,} of "
                         f"{val.n_users:,} users and {items:,} of {val.n_items:,} items known)", path=path,
                         hint="give the test file of the same split; it is read with its own layout "
                              "(user, item[, value]), not TRAIN's `sep` / `columns`")
    return val


def keep_encoding(model, data: Interactions) -> None:
    """Record in the model that its ids came from a Latin-1 file: its outputs are then Latin-1 too."""
    if output_encoding(getattr(data, "id_encoding", None)) != "utf-8":
        model.id_encoding_ = output_encoding(data.id_encoding)


# -- parameters files ----------------------------------------------------------------------------
def load_params(path: Optional[PathLike]) -> Dict[str, Any]:
    """The parameters of a JSON file (``{}`` without one); tune's output nests them under "params"."""
    if not path:
        return {}
    params = _read_params_file(path)
    return params.get("params", params)


def params_model(path: Optional[PathLike]) -> Optional[str]:
    """The model family a parameters file names (tune's output does), if any."""
    model = _read_params_file(path).get("model") if path else None
    if model is not None and model not in model_classes():
        raise InputError(f"unknown model {model!r}", path=path, hint=f"one of {', '.join(model_classes())}")
    return model


def _read_params_file(path: PathLike) -> Dict[str, Any]:
    try:
        params = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg}", path=path, line=exc.lineno,
                         hint="expected an object such as {\"factors\": 64}") from None
    if not isinstance(params, dict):
        raise InputError("expected a JSON object of parameters", path=path, hint="e.g. {\"factors\": 64}")
    return params


