"""The info stage: what a model file holds, without writing Python or starting a server.

>>> info("model.npz").as_dict()["family"]       # doctest: +SKIP
'warp'
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Tuple, Union

import numpy as np

from ..models.base import load
from ..models.families import model_classes
from ..models.persistence import read_header
from ..data.inputs import check_readable
from ..files import file_digest

PathLike = Union[str, os.PathLike]


@dataclass
class ModelInfo:
    """What :func:`info` found in a model file.

    Attributes
    ----------
    path : str
        The file as given.
    size : int
        Its size in bytes.
    sha256 : str
        The SHA-256 of the whole file (the ``X-Model-SHA256`` that ``serve`` answers with).
    header : dict
        The file's checked JSON header: ``format_version``, ``class``, ``params`` (every
        constructor parameter as trained, ``"auto"`` included), ``attrs`` (fitted scalars,
        among them what ``auto`` chose, e.g. ``alpha_``, ``best_epoch_``), and the command
        that trained it (``trained_with``, ``mrec-warp VERSION``) when the writer recorded one.
    family : str
        The ``--model`` name of the file's class.
    n_users, n_items, n_interactions : int
        The shape of the training data the model holds.
    training_fingerprint : str
        SHA-256 of the training data's ids and pairs: two models trained on the same data
        (in any order of rows) share it.
    arrays : list of (name, shape, dtype)
        The model's own arrays.
    """

    path: str
    size: int
    sha256: str
    header: Dict[str, Any]
    family: str
    n_users: int
    n_items: int
    n_interactions: int
    training_fingerprint: str
    arrays: List[Tuple[str, Tuple[int, ...], str]]

    def as_dict(self) -> Dict[str, Any]:
        """Everything as plain JSON values (what ``mrec-warp info --json`` prints)."""
        return {
            "file": self.path,
            "size_bytes": self.size,
            "sha256": self.sha256,
            "family": self.family,
            "class": self.header["class"],
            "format_version": self.header["format_version"],
            "trained_with": trained_with(self.header),
            "parameters": self.header.get("params", {}),
            "fitted": self.header.get("attrs", {}),
            "training_data": {"users": self.n_users, "items": self.n_items,
                              "interactions": self.n_interactions,
                              "fingerprint": self.training_fingerprint},
            "arrays": {name: {"shape": list(shape), "dtype": dtype} for name, shape, dtype in self.arrays},
        }


def _training_fingerprint(model) -> str:
    """SHA-256 of the ids and of the training pairs in a fixed layout (UTF-8 ids, one per
    line, then int64 row pointers and column indices of the canonical CSR)."""
    digest = hashlib.sha256()
    for ids in (model.user_ids, model.item_ids):
        digest.update(len(ids).to_bytes(8, "little"))
        digest.update("\n".join(np.asarray(ids).astype(str).tolist()).encode("utf-8", "surrogatepass"))
    train = model.train_
    digest.update(np.ascontiguousarray(train.indptr, dtype=np.int64).tobytes())
    digest.update(np.ascontiguousarray(train.indices, dtype=np.int64).tobytes())
    return digest.hexdigest()


def info(model_file: PathLike) -> ModelInfo:
    """Describe a model file: family, every parameter (and what ``auto`` chose), the shape and
    fingerprint of its training data, its format version, size and digest.

    The file is loaded and checked as ``recommend`` would load it, so a file ``info``
    describes is one the other commands accept; a damaged one is the same one-line
    :class:`~mrec_warp.errors.InputError`.

    Parameters
    ----------
    model_file : path
        A model file written by ``train`` (or :meth:`Recommender.save`).

    Returns
    -------
    ModelInfo
    """
    check_readable(model_file, "model file", empty_hint="a model file is written by training")
    header = read_header(model_file)
    model = load(model_file)
    names = {cls: name for name, cls in model_classes().items()}
    family = names.get(type(model), type(model).__name__)
    arrays = [(name, tuple(int(n) for n in np.shape(arr)), str(np.asarray(arr).dtype))
              for name, arr in model.get_arrays().items()]
    return ModelInfo(path=str(model_file), size=os.path.getsize(model_file), sha256=file_digest(model_file),
                     header=header, family=family, n_users=int(model.n_users), n_items=int(model.n_items),
                     n_interactions=int(model.train_.nnz), training_fingerprint=_training_fingerprint(model),
                     arrays=arrays)


#: Longest ``trained_with`` text ``info`` shows (a model file is untrusted input).
TRAINED_WITH_CHARS = 200


def trained_with(header: Dict[str, Any]) -> Any:
    """The header's ``trained_with`` (``"mrec-warp 0.1.0"``) when it is a short printable
    text, else ``None`` (files from before it was written; a crafted one never prints
    control characters or pages of text)."""
    value = header.get("trained_with")
    if isinstance(value, str) and len(value) <= TRAINED_WITH_CHARS and value.isprintable():
        return value
    return None
