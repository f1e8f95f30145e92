"""Model files: one ``.npz`` of plain arrays plus a JSON header; never pickle.

Layout of the archive:

``__meta__``
    0-d unicode array holding JSON: ``format`` ("mrec-warp-model"), ``format_version``
    (1; 2 when some array is float16: :data:`FORMAT_VERSION`),
    ``class`` (model class name), ``params`` (constructor parameters), ``attrs`` (small
    fitted scalars such as the chosen epoch count).
``user_ids``, ``item_ids``
    Unicode arrays: the original ids of each row / column.
``train_indptr``, ``train_indices``
    The training interactions the model was fitted on (CSR structure), used by default to
    exclude already-seen items when recommending. Written in the smallest unsigned types
    that hold the interaction and item counts (column indices uint16 below 65,536 items;
    earlier files of format 1 hold int64 and int32); any integer type loads.
``arr_<name>``
    The model's own arrays (factors, biases, popularity counts ...).

Members of text, unsigned integer or float16 type (ids, these indices, a model's compact
item-item weights) are deflated; the others (float32 factors) are stored as they are.
"""
from __future__ import annotations

import io
import json
import math
import os
from typing import IO, Any, Callable, Dict, Optional, Tuple, Union

import numpy as np
import scipy.sparse as sp

from .. import strict_json
from .._version import __version__
from ..files import atomic_path
from ..data.npz import MAX_ID_CHARS, NpzArchive, check_csr, check_ids, index_dtype, source_name, write_npz
from ..errors import InputError

FORMAT = "mrec-warp-model"
#: The newest version read here. Version 2 is version 1 with float16 arrays (EASE's compact
#: weights), which readers of version 1 cannot read: only files holding one say 2, so every
#: other file stays readable by them (they read the compact unsigned indices and deflated
#: members) and a version-1 reader refuses an EASE file with "upgrade mrec-warp".
FORMAT_VERSION = 2


def save_model(
    target: Union[str, os.PathLike, IO[bytes]],
    class_name: str,
    params: Dict[str, Any],
    attrs: Dict[str, Any],
    user_ids: np.ndarray,
    item_ids: np.ndarray,
    train: sp.csr_matrix,
    arrays: Dict[str, np.ndarray],
    verify: Optional[Callable[[Any], None]] = None,
) -> None:
    """Write a model archive to a path (atomically) or to a binary file object.

    What is written is what loads: ids longer than the loader accepts are refused before
    writing, and ``verify`` (given the written archive, a temporary file or an in-memory
    copy) runs the loader's checks on it before it replaces ``target`` or reaches the file
    object; an :class:`InputError` there leaves ``target`` as it was.
    """
    meta = {
        "format": FORMAT,
        "format_version": 2 if any(np.asarray(a).dtype == np.float16 for a in arrays.values()) else 1,
        "class": class_name,
        "params": params,
        "attrs": attrs,
        "trained_with": f"mrec-warp {__version__}",
    }
    if not train.has_canonical_format:  # the loader insists on sorted, unique indices per row
        train = train.copy()
        train.sum_duplicates()
    payload = {
        "__meta__": np.array(strict_json.dumps(meta, sort_keys=True)),
        "user_ids": _loadable_ids(user_ids, "user", target),
        "item_ids": _loadable_ids(item_ids, "item", target),
        "train_indptr": train.indptr.astype(index_dtype(train.nnz + 1), copy=False),
        "train_indices": train.indices.astype(index_dtype(train.shape[1]), copy=False),
    }
    for name, arr in arrays.items():
        payload[f"arr_{name}"] = np.ascontiguousarray(arr)
    deflate = [name for name, arr in payload.items() if _deflated(arr)]
    if hasattr(target, "write"):
        if verify is None:
            write_npz(target, payload, deflate)
            return
        buffer = io.BytesIO()
        write_npz(buffer, payload, deflate)
        _verified(verify, buffer, target)
        target.write(buffer.getbuffer())
        return
    with atomic_path(target, whole=True) as tmp:  # read back by verify: a file, also for a pipe
        with open(tmp, "wb") as fh:
            write_npz(fh, payload, deflate)
        if verify is not None:
            _verified(verify, tmp, target)


def _deflated(arr: np.ndarray) -> bool:
    """Whether a member is deflated: ids (UTF-32 text, mostly zero bytes, shrink 5-20x) and
    the compact arrays (unsigned column indices and index pointers shrink to about half,
    float16 weights by a sixth: scripts/ease_topk.py). Float32 factors, which barely
    shrink, are stored as they are and cost no compression time."""
    return arr.dtype.kind in "uU" or arr.dtype == np.float16


def _loadable_ids(ids, kind: str, target) -> np.ndarray:
    """``ids`` as the text array a model file holds, refused when the loader would refuse it
    (an id longer than :data:`~mrec_warp.data.npz.MAX_ID_CHARS` characters)."""
    text = np.asarray(ids).astype(str)
    if text.dtype.itemsize > 4 * MAX_ID_CHARS:
        longest = max(text.tolist(), key=len)
        raise InputError(f"{kind} id {longest[:40]!r}... is {len(longest):,} characters long: a model file holds "
                         f"ids of up to {MAX_ID_CHARS:,}, so the model would not load; nothing was written",
                         path=source_name(target), hint="shorten the ids, e.g. map them to numbers")
    return text


def _verified(verify: Callable[[Any], None], written, target) -> None:
    """``verify(written)``; its refusal said of ``target``, as a model that was not written."""
    if hasattr(written, "seek"):
        written.seek(0)
    try:
        verify(written)
    except InputError as exc:
        message = exc.message.replace("model file is invalid: ", "")
        hint = None if exc.hint == HINT else exc.hint
        raise InputError(f"the trained model would not load ({message}); nothing was written",
                         path=source_name(target), hint=hint or "change the parameter or the data it names") from None


def load_model(source, classes: Dict[str, type], expected: type) -> Tuple[type, Dict[str, Any], Dict[str, Any], np.ndarray, np.ndarray, sp.csr_matrix, Dict[str, np.ndarray]]:
    """Read and validate a model archive; every defect is a one-line :class:`InputError`.

    The JSON header is checked first (format, version, class, parameter and attribute
    types); then the ``.npy`` header of every array the class needs is checked against
    the ids and parameters (shape, type, size) before any array data is decompressed;
    then the values of the ids and of the training matrix. Members the format does not
    name are never read. The model's own arrays are checked by its ``set_arrays``.

    Parameters
    ----------
    source : path or binary file object
    classes : dict
        Model class of each class name.
    expected : type
        The file must hold this class or a subclass.

    Returns
    -------
    cls, params, attrs, user_ids, item_ids, train, arrays
    """
    with NpzArchive(source, "an mrec-warp model file", HINT) as archive:
        if "__meta__" not in archive:
            raise archive.error("not an mrec-warp model file (no metadata)")
        meta = _read_meta(archive)
        cls = _model_class(archive, meta, classes, expected)
        template = cls()  # its defaults give the type of each parameter and attribute
        # a parameter the file does not hold: the value its model was trained with, when the
        # class says (``PARAMS_BEFORE``: a parameter added later), else the default
        params = {**getattr(cls, "PARAMS_BEFORE", {}),
                  **_typed(archive, "params", meta.get("params", {}), template.get_params())}
        attrs = _typed(archive, "attrs", meta.get("attrs", {}), template.get_attrs())
        shapes = {
            "user_ids": ("U", (None,)), "item_ids": ("U", (None,)),
            "train_indptr": ("iu", (None,)), "train_indices": ("iu", (None,)),
        }
        for key, (kinds, shape) in shapes.items():
            archive.header(key, kinds, shape)
        n_users = archive.header("user_ids", "U", (None,))[0][0]
        n_items = archive.header("item_ids", "U", (None,))[0][0]
        archive.header("train_indptr", "iu", (n_users + 1,))
        wanted = {f"arr_{k}": v for k, v in cls.array_spec(params, n_users, n_items).items()}
        for key, (kinds, shape) in wanted.items():
            archive.header(key, kinds, shape)
        user_ids = archive.read("user_ids", "U", (n_users,))
        item_ids = archive.read("item_ids", "U", (n_items,))
        indptr = archive.read("train_indptr", "iu", (n_users + 1,)).astype(np.int64, copy=False)
        # widened before the checks: a narrow type's differences wrap around, a wide one's
        # values would wrap when narrowed. To int32 when that is exact (uint8/16, int8-32:
        # their differences fit too), else int64: half the transient memory on large files
        raw = archive.read("train_indices", "iu", (None,))
        exact32 = raw.dtype.itemsize < 4 or raw.dtype == np.int32
        indices = raw.astype(np.int32 if exact32 else np.int64, copy=False)
        del raw
        try:
            check_ids(user_ids, "user ids")
            check_ids(item_ids, "item ids")
            check_csr(indptr, indices, (n_users, n_items), "training matrix")
        except ValueError as exc:
            raise archive.error(str(exc)) from None
        arrays = {key[4:]: archive.read(key, kinds, shape) for key, (kinds, shape) in wanted.items()}
    train = sp.csr_matrix(
        (np.ones(len(indices), dtype=np.float32), indices.astype(np.int32, copy=False), indptr),
        shape=(n_users, n_items),
    )
    return cls, params, attrs, user_ids, item_ids, train, arrays


#: How to fix a model file that cannot be used (read alike from Python and from the command line).
HINT = "re-create it: train the model again and save it"
#: Largest saved attribute (an epoch count): a C int, as every count the kernels take.
MAX_ATTR = 2**31 - 1
#: Largest JSON header read, in characters.
MAX_META_CHARS = 1 << 20


def _read_meta(archive: NpzArchive) -> Dict[str, Any]:
    text = archive.read("__meta__", "U", (), max_chars=MAX_META_CHARS)
    try:
        meta = json.loads(str(text))
    except (ValueError, RecursionError):  # (ValueError: also an int of over 4,300 digits)
        raise archive.error("model metadata is not valid JSON") from None
    if not isinstance(meta, dict):
        raise archive.error(f"model metadata is a JSON {type(meta).__name__}, expected an object")
    if meta.get("format") != FORMAT:
        raise archive.error(f"not an mrec-warp model file (format {str(meta.get('format'))[:80]!r})")
    version = meta.get("format_version")
    if "format_version" not in meta:
        raise archive.error("model metadata lacks format_version")
    if not _is_int(version) or version < 1:
        raise archive.error(f"model format_version {str(version)[:40]!r} is not a version number (1, 2, ...)")
    if version > FORMAT_VERSION:
        raise InputError(f"model format version {version} is newer than this mrec-warp understands",
                         path=archive.name, hint="upgrade mrec-warp")
    for key in ("params", "attrs"):
        if not isinstance(meta.get(key, {}), dict):
            raise archive.error(f"model metadata's {key!r} is not an object")
    return meta


def _model_class(archive: NpzArchive, meta: Dict[str, Any], classes: Dict[str, type], expected: type) -> type:
    name = meta.get("class")
    cls = classes.get(name) if isinstance(name, str) else None
    if cls is None:
        raise InputError(f"unknown model class {str(name)[:80]!r}", path=archive.name,
                         hint=f"known: {', '.join(sorted(classes))}; upgrade mrec-warp if it is newer")
    if not issubclass(cls, expected):
        raise InputError(f"file holds a {cls.__name__}, expected a {expected.__name__}", path=archive.name)
    if not hasattr(cls, "array_spec"):
        raise archive.error(f"model class {name!r} cannot be loaded from a file")
    return cls


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _typed(archive: NpzArchive, section: str, values: Dict[str, Any], defaults: Dict[str, Any]) -> Dict[str, Any]:
    """The entries of ``values`` the class knows, each of the type of its default.

    Unknown names are dropped (a file from a newer version may have more), so a header can
    never set an attribute the class does not save; numbers must be finite, attributes
    (epoch counts) from 0 to :data:`MAX_ATTR`. Parameters are then checked by value by the
    class's ``check_params``, as training checks them.
    """
    out = {}
    for key, value in values.items():
        if key not in defaults:
            continue
        default = defaults[key]
        if default == "auto":  # chosen from the data at fit, or a value (a number, item-kNN's similarity)
            # whose kind and range the class's check_params then checks, as for any parameter
            ok = isinstance(value, str) or _is_int(value) or isinstance(value, float)
        elif isinstance(default, bool) or isinstance(default, str):
            ok = type(value) is type(default)
        elif _is_int(default):
            ok = _is_int(value)
        elif isinstance(default, float) or default is None:
            ok = value is None or _is_int(value) or isinstance(value, float)
        else:
            ok = False
        if ok and (_is_int(value) or isinstance(value, float)):
            # ranges are the class's own check (check_params); attributes are counts, and
            # non-negative reals (WRMF's alpha_, which is not a count: 3 / a binary file's tiny unit can be huge)
            # (an int is finite however large: math.isfinite would overflow converting it)
            ok = (_is_int(value) or math.isfinite(value)) and (
                section == "params" or (0 <= value <= MAX_ATTR if _is_int(value) else value >= 0))
        if not ok:
            raise archive.error(f"model {section[:-1]} {key!r} has the invalid value {str(value)[:40]!r}")
        out[key] = value
    return out


def read_header(source) -> Dict[str, Any]:
    """The checked JSON header of a model file (format, version, class, params, attrs and
    any provenance a newer writer added), without reading an array: what ``mrec-warp info``
    shows beside the loaded model."""
    with NpzArchive(source, "an mrec-warp model file", HINT) as archive:
        if "__meta__" not in archive:
            raise archive.error("not an mrec-warp model file (no metadata)")
        return _read_meta(archive)
