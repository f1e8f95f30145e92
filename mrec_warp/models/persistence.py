"""Model files: one ``.npz`` of plain arrays plus a JSON header; never pickle.

Layout of the archive:

``__meta__``
    0-d unicode array holding JSON: ``format`` ("mrec-warp-model"), ``format_version``,
    ``class`` (model class name), ``params`` (constructor parameters), ``attrs`` (small
    fitted scalars such as the chosen epoch count).
``user_ids``, ``item_ids``
    Unicode arrays: the original ids of each row / column.
``train_indptr``, ``train_indices``
    The training interactions the model was fitted on (CSR structure), used by default to
    exclude already-seen items when recommending.
``arr_<name>``
    The model's own arrays (factors, biases, popularity counts ...).
"""
from __future__ import annotations

import json
import os
import zipfile
from typing import IO, Any, Dict, Tuple, Union

import numpy as np
import scipy.sparse as sp

from ..data.io import atomic_path
from ..errors import InputError

FORMAT = "mrec-warp-model"
FORMAT_VERSION = 1


def save_model(
    target: Union[str, os.PathLike, IO[bytes]],
    class_name: str,
    params: Dict[str, Any],
    attrs: Dict[str, Any],
    user_ids: np.ndarray,
    item_ids: np.ndarray,
    train: sp.csr_matrix,
    arrays: Dict[str, np.ndarray],
) -> None:
    """Write a model archive to a path (atomically) or to a binary file object."""
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "class": class_name,
        "params": params,
        "attrs": attrs,
    }
    payload = {
        "__meta__": np.array(json.dumps(meta, sort_keys=True)),
        "user_ids": np.asarray(user_ids).astype(str),
        "item_ids": np.asarray(item_ids).astype(str),
        "train_indptr": train.indptr.astype(np.int64, copy=False),
        "train_indices": train.indices.astype(np.int32, copy=False),
    }
    for name, arr in arrays.items():
        payload[f"arr_{name}"] = np.ascontiguousarray(arr)
    if hasattr(target, "write"):
        np.savez(target, **payload)
        return
    with atomic_path(target) as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, **payload)


def load_model(source) -> Tuple[Dict[str, Any], np.ndarray, np.ndarray, sp.csr_matrix, Dict[str, np.ndarray]]:
    """Read and validate a model archive; every defect is a one-line :class:`InputError`.

    Returns
    -------
    meta, user_ids, item_ids, train, arrays
    """
    name = getattr(source, "name", None) or str(source)
    hint = "re-create it with 'mrec-warp train'"
    try:
        with np.load(source, allow_pickle=False) as archive:
            files = {k: archive[k] for k in archive.files}
    except FileNotFoundError:
        raise InputError("model file does not exist", path=name, hint="check the path") from None
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        raise InputError(f"not a readable mrec-warp model file ({type(exc).__name__}: {exc})",
                         path=name, hint="the file is truncated or of another format; " + hint) from None
    if "__meta__" not in files:
        raise InputError("not an mrec-warp model file (no metadata)", path=name, hint=hint)
    try:
        meta = json.loads(str(files.pop("__meta__")))
    except json.JSONDecodeError:
        raise InputError("model metadata is corrupt", path=name, hint=hint) from None
    if meta.get("format") != FORMAT:
        raise InputError(f"not an mrec-warp model file (format {meta.get('format')!r})", path=name, hint=hint)
    if int(meta.get("format_version", -1)) > FORMAT_VERSION:
        raise InputError(
            f"model format version {meta['format_version']} is newer than this mrec-warp understands",
            path=name, hint="upgrade mrec-warp",
        )
    for key in ("user_ids", "item_ids", "train_indptr", "train_indices"):
        if key not in files:
            raise InputError(f"model file lacks {key!r}", path=name, hint=hint)
    user_ids, item_ids = files.pop("user_ids"), files.pop("item_ids")
    indptr, indices = files.pop("train_indptr"), files.pop("train_indices")
    n_users, n_items = len(user_ids), len(item_ids)
    if len(indptr) != n_users + 1 or indptr[-1] != len(indices) or (len(indices) and indices.max() >= n_items):
        raise InputError("model file's training matrix does not match its ids", path=name, hint=hint)
    train = sp.csr_matrix(
        (np.ones(len(indices), dtype=np.float32), indices, indptr), shape=(n_users, n_items)
    )
    arrays = {k[4:]: v for k, v in files.items() if k.startswith("arr_")}
    return meta, user_ids, item_ids, train, arrays
