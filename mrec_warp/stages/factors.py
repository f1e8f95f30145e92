"""The ``factors`` stage: factors computed elsewhere in, as a model file; a model's factors out.

:func:`import_factors` reads the files :mod:`~mrec_warp.data.factor_files` describes, checks
that they agree (one row per id, one width, finite values, unique non-empty ids), attaches
the training interactions recommend excludes by default, and saves a
:class:`~mrec_warp.models.imported.Factors` model. :func:`export_factors` writes the factors
of any factor model (warp, hybrid, wrmf, imported) in the same files, so that an exported
model imported again recommends the same lists, byte for byte.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..data.factor_files import Loaded, export_factors as write_export, is_text, read_factors_npz, read_npy, \
    read_text_vectors
from ..data.id_lines import common_encoding, read_row_ids
from ..data.matrix_files import read_matrix
from ..data.rows import DEFAULT_DUPLICATES, DEFAULT_NEGATIVES
from ..errors import InputError, ParameterError
from ..files import check_outputs
from ..models.base import Recommender, load
from ..models.imported import Factors

PathLike = Union[str, os.PathLike]


def import_factors(
    output: PathLike,
    user_factors: Optional[PathLike] = None,
    item_factors: Optional[PathLike] = None,
    item_bias: Optional[PathLike] = None,
    user_ids: Optional[PathLike] = None,
    item_ids: Optional[PathLike] = None,
    npz: Optional[PathLike] = None,
    train: Optional[PathLike] = None,
    reader: Optional[Dict[str, Any]] = None,
    duplicates: str = DEFAULT_DUPLICATES,
    negatives: str = DEFAULT_NEGATIVES,
    min_value: Optional[float] = None,
    regularization: float = 0.01,
) -> Dict[str, Any]:
    """Build and save (atomically, to ``output``) a model of imported factors.

    Parameters
    ----------
    output : path
        The model file to write (``.npz``).
    user_factors, item_factors : path, optional
        ``.npy`` (with ``user_ids`` / ``item_ids`` id lists) or text vectors (ids inside).
    item_bias : path, optional
        ``.npy`` of one bias per item (in the item factors' order) or text rows ``id<TAB>b``.
    npz : path, optional
        Instead of the two factor files: one archive with ``user_factors``, ``item_factors``
        and optionally ``item_bias``, ``user_ids``, ``item_ids``.
    train : path, optional
        The interactions the factors were trained on (a ratings file read with ``reader`` and
        the row rules, or ``.mtx`` / ``.npz``): what recommend excludes by default. Without
        it nothing is excluded unless recommend is given ``train``. Every user and item it
        names must have factors.
    regularization : float
        Ridge penalty of the model's fold-in (:meth:`Factors.fold_in`).

    Returns
    -------
    dict
        ``users``, ``items``, ``factors`` (the width), ``item_bias`` (bool), ``train``
        (stored interactions, or None), ``encoding``.
    """
    if npz is not None and (user_factors or item_factors):
        raise ParameterError("give `npz` or `user_factors` and `item_factors`, not both")
    if npz is None and not (user_factors and item_factors):
        raise ParameterError("give `user_factors` and `item_factors` (or `npz`)")
    inputs = [npz, user_factors, item_factors, item_bias, user_ids, item_ids, train]
    check_outputs({"`output`": str(output)}, [str(p) for p in inputs if p])
    if npz is not None:
        arrays = read_factors_npz(npz)
        enc = str(arrays["id_encoding"])
        users = _side(arrays["user_factors"], arrays["user_ids"], enc, user_ids, "user", str(npz))
        items = _side(arrays["item_factors"], arrays["item_ids"], enc, item_ids, "item", str(npz))
        npz_bias = arrays["item_bias"]
    else:
        assert user_factors is not None and item_factors is not None  # checked above
        users = _factor_file(user_factors, user_ids, "user")
        items = _factor_file(item_factors, item_ids, "item")
        npz_bias = None
    bias_file = _bias_file(item_bias) if item_bias is not None else None
    sources: List[Tuple[Any, str]] = [(users.ids, users.encoding), (items.ids, items.encoding)]
    if bias_file is not None and bias_file.ids is not None:
        sources.append((bias_file.ids, bias_file.encoding))
    decoded, encoding = common_encoding(sources)
    user_id_arr, item_id_arr = decoded[0], decoded[1]
    if users.values.shape[1] != items.values.shape[1]:
        raise InputError(f"user factors have {users.values.shape[1]} columns and item factors "
                         f"{items.values.shape[1]}: both sides must have the same width",
                         hint="give the user and item factors of one model")
    bias = npz_bias
    if bias_file is not None:
        if npz_bias is not None:
            raise ParameterError("the `npz` holds item_bias already: drop `item_bias`")
        bias = _ordered_bias(bias_file, decoded[2] if bias_file.ids is not None else None, item_id_arr,
                             str(item_bias))
    elif bias is not None and bias.shape != (len(item_id_arr),):
        raise InputError(f"item_bias has {len(bias)} values for {len(item_id_arr)} items", path=str(npz),
                         hint="one bias per row of item_factors")
    stored = None
    if train is not None:
        stored = _train_matrix(train, user_id_arr, item_id_arr, reader or {}, duplicates, negatives, min_value)
    model = Factors.from_arrays(users.values, items.values, user_id_arr, item_id_arr, item_bias=bias, train=stored,
                                regularization=regularization)
    model.id_encoding_ = encoding
    model.save(output)
    return {"users": model.n_users, "items": model.n_items, "factors": int(model.user_factors_.shape[1]),
            "item_bias": bias is not None, "train": None if stored is None else int(stored.nnz),
            "encoding": encoding}


def _side(values: np.ndarray, ids: Optional[np.ndarray], encoding: str, ids_file: Optional[PathLike], kind: str,
          source: str) -> Loaded:
    """One side of an ``npz``: its ids from the archive or from ``ids_file``, not both."""
    if ids is not None and ids_file:
        raise ParameterError(f"the `npz` holds {kind}_ids already: drop `{kind}_ids`")
    if ids is None:
        if not ids_file:
            raise InputError(f"holds no {kind}_ids", path=source, hint=f"give the {kind} ids with `{kind}_ids`")
        ids, encoding = read_row_ids(ids_file, kind)
        source = str(ids_file)
    _rows_match(values, ids, kind, source)
    return Loaded(values, ids, encoding)


def _factor_file(path: PathLike, ids_file: Optional[PathLike], kind: str) -> Loaded:
    """A ``.npy`` with its id list, or a text file with its ids inside."""
    if is_text(path):
        if ids_file:
            raise ParameterError(f"`{kind}_factors` is a text file with its ids inside: drop `{kind}_ids`")
        return read_text_vectors(path, f"{kind} factors")
    if str(path).lower().endswith(".npz"):
        raise ParameterError(f"`{kind}_factors` is an .npz: give it as `npz`")
    if not ids_file:
        raise ParameterError(f"`{kind}_factors` is a .npy, which holds no ids: give `{kind}_ids` (one id per row)")
    values = read_npy(path, f"{kind} factors", ndim=2)
    ids, encoding = read_row_ids(ids_file, kind)
    _rows_match(values, ids, kind, str(ids_file))
    return Loaded(values, ids, encoding)


def _rows_match(values: np.ndarray, ids: np.ndarray, kind: str, source: str) -> None:
    if values.shape[0] != len(ids):
        raise InputError(f"{len(ids):,} {kind} ids for {values.shape[0]:,} rows of {kind} factors", path=source,
                         hint=f"one {kind} id per row, line n naming row n")
    if values.shape[1] == 0:
        raise InputError(f"{kind} factors have no columns", path=source, hint="give factors of at least one dimension")


def _bias_file(path: PathLike) -> Loaded:
    if is_text(path):
        loaded = read_text_vectors(path, "item bias")
        if loaded.values.shape[1] != 1:
            raise InputError(f"item bias rows hold {loaded.values.shape[1]} values, expected 1 (id<TAB>bias)",
                             path=str(path), hint="one row per item: id<TAB>bias")
        return Loaded(loaded.values[:, 0], loaded.ids, loaded.encoding)
    return Loaded(read_npy(path, "item bias", ndim=1), None)


def _ordered_bias(bias: Loaded, bias_ids: Optional[np.ndarray], item_ids: np.ndarray, source: str) -> np.ndarray:
    """Item biases in the item factors' order (a text file names its items; a ``.npy`` follows their order)."""
    if bias_ids is None:
        if len(bias.values) != len(item_ids):
            raise InputError(f"{len(bias.values):,} item biases for {len(item_ids):,} items", path=source,
                             hint="one bias per row of the item factors, in their order")
        return bias.values
    pos = pd.Index(bias_ids).get_indexer(item_ids)
    if (pos < 0).any():
        missing = item_ids[int(np.argmax(pos < 0))]
        raise InputError(f"no bias for item {missing!r} ({int((pos < 0).sum()):,} items without one)", path=source,
                         hint="give one bias per item of the item factors")
    if len(bias_ids) != len(item_ids):
        extra = next(i for i in bias_ids.tolist() if i not in set(item_ids.tolist()))
        raise InputError(f"bias for item {extra!r}, which has no factors", path=source,
                         hint="give biases of the item factors' items only")
    return bias.values[pos]


def _train_matrix(path: PathLike, user_ids: np.ndarray, item_ids: np.ndarray, reader: Dict[str, Any],
                  duplicates: str, negatives: str, min_value: Optional[float]) -> sp.csr_matrix:
    """The training interactions in the factors' id space; an id without factors is refused."""
    m = read_matrix(path, reader=reader, duplicates=duplicates, negatives=negatives, min_value=min_value)
    rows = pd.Index(user_ids).get_indexer(m.user_ids)
    cols = pd.Index(item_ids).get_indexer(m.item_ids)
    for idx, ids, kind in ((rows, m.user_ids, "user"), (cols, m.item_ids, "item")):
        if (idx < 0).any():
            first = ids[int(np.argmax(idx < 0))]
            raise InputError(f"`train` names {int((idx < 0).sum()):,} {kind}(s) without factors, e.g. {first!r}",
                             path=str(path), hint="give the interactions the factors were trained on (same ids)")
    coo = m.matrix.tocoo()
    csr = sp.csr_matrix((np.ones(coo.nnz, np.float32), (rows[coo.row], cols[coo.col])),
                        shape=(len(user_ids), len(item_ids)))
    csr.sort_indices()
    return csr


def export_factors(model: Union[PathLike, Recommender], outdir: PathLike, force: bool = False) -> List[str]:
    """Write the factors of a factor model (a file or a fitted model) into ``outdir`` (see
    :func:`mrec_warp.data.factor_files.export_factors`); returns the paths written.

    A folder that already holds files of an export (``factors.npz``, ``user_ids.txt``, ...)
    is refused before anything is read, unless ``force``: then the earlier export is
    replaced whole (its files this export does not write, an ``item_bias`` of a model with
    biases, are removed), so the folder never mixes two models' factors.
    """
    source = None if isinstance(model, Recommender) else str(model)
    if os.path.exists(outdir) and not os.path.isdir(outdir):
        raise InputError("the export folder is a file", path=str(outdir),
                         hint="give a folder (created if needed) for the exported files")
    if source is not None:
        check_outputs({"`outdir`": [os.path.join(str(outdir), n) for n in _EXPORTED]}, [source])
    # (a folder at a file's name is refused by the writer, which names it)
    present = [n for n in _EXPORTED if os.path.lexists(os.path.join(str(outdir), n))
               and not os.path.isdir(os.path.join(str(outdir), n))]
    if present and not force:
        more = f" and {len(present) - 3} more" if len(present) > 3 else ""
        raise InputError(f"the export folder already holds {', '.join(present[:3])}{more}; nothing was written",
                         path=str(outdir), hint="export into another folder, or --force (force=True) to replace them")
    m = model if isinstance(model, Recommender) else load(model)
    try:  # the arrays of a factor model, whatever its class
        uf, itf = getattr(m, "user_factors_"), getattr(m, "item_factors_")
    except AttributeError:
        raise InputError(f"a {type(m).__name__} model has no factors to export", path=source,
                         hint="export a warp, hybrid, wrmf or imported model") from None
    bias = getattr(m, "item_bias_") if getattr(m, "item_bias", False) else None
    written = write_export(outdir, m.user_ids, m.item_ids, uf, itf, bias, getattr(m, "id_encoding_", "utf-8"))
    for name in present:  # an earlier export's file this one did not write again
        stale = os.path.join(str(outdir), name)
        if stale not in written:
            os.unlink(stale)
    return written


#: The files an export writes (checked against the model file before anything is written).
_EXPORTED = ("factors.npz", "user_factors.npy", "item_factors.npy", "item_bias.npy", "user_ids.txt", "item_ids.txt",
             "user_factors.tsv", "item_factors.tsv", "item_bias.tsv")
