"""An approximate-nearest-neighbour index of a factor model's items, for fast top-k on large
catalogues (the ``[ann]`` extra: faiss, HNSW graph).

A factor model scores ``p_u . q_i + b_i``: the inner product of ``x_i = [q_i, b_i]`` (the
bias as one more dimension; just ``q_i`` without a bias) and ``y_u = [p_u, 1]``. The index
holds ``[x_i, sqrt(R^2 - |x_i|^2)]`` (``R`` the longest ``x_i``) and a user asks with
``[y_u, 0]``: every item vector then has length ``R``, and the nearest item in L2 distance
is the one of largest score (the MIPS-to-L2 reduction of Bachrach et al., 2014). Measured
on a trained WARP model of 86k items (scripts/bench_ann.py), this graph reaches recall@10
0.999 at ``ef_search`` 64 where an inner-product graph of the same size stops at 0.98, and
answers faster. The graph proposes candidates; each is scored again exactly (float32, as
the model scores), so scores are the model's and only recall is approximate.

**Exclusions and filters hold.** A user's training items (or ``exclude``) and the items of
``item_mask`` are never returned: the search over-fetches ``k + e + m`` candidates (``e``
the user's excluded items, ``m`` the masked ones), rounded up to a power of two, which
leaves at least ``k`` after filtering whenever the catalogue has them; if fewer remain (the
graph returned fewer than asked) the fetch doubles. A user whose fetch would pass
:data:`EXACT_SHARE` of the catalogue (a heavy user, a short include-list) is scored exactly
instead, so the list never comes up short.

**Bound to its model.** :func:`save` writes ``MODEL.ann`` beside the model file with the
SHA-256 of the model file and of the indexed item vectors in its header, and of its own
payload. :func:`load` refuses, in one line, an index of another or older model file, one
whose items differ from the model's (cold-start items added since), or a damaged one: a
stale index is never used silently. The header alone proves nothing about the vectors the
graph holds (a crafted file can make header, graph and payload checksum agree), so
:func:`load` also hashes the vector block stored in the payload, as faiss reads it, and
compares it with the model's own vectors: an index whose stored vectors are not the
model's is refused. The check needs no field of the header, so indexes written before
it are verified the same way (22 MB of vectors, 86k items x 65, hash in about 15 ms).

**Read bounded.** Every header field is checked for its type and range, and the file's size
against the payload the header declares and the most an index of the model's items can take,
before a byte of the payload is read; then the payload's own counts (faiss' dimension, item
count and array lengths, which its reader allocates before it checks them) and its graph's
node ids are checked against the model's items before faiss reads a byte
(:mod:`~mrec_warp.models.hnsw_payload`): a crafted header, a padded or sparse file, or a
payload faiss cannot read is one line naming the ``.ann`` file, with nothing allocated for it.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional, Tuple

import numpy as np
import scipy.sparse as sp

from .. import strict_json
from ..data.inputs import check_readable
from ..errors import InputError
from ..files import PathLike, atomic_write, file_digest
from ..progress import SILENT
from ..topk import default_block_size, top_k_block
from .families import DEFAULT_FAMILY, family_name, model_classes
from .hnsw_payload import layout_problem
from .single_user import exclusion_row, recommend_few

log = logging.getLogger(__name__)

#: The index file of ``model.npz`` is ``model.npz.ann``.
SUFFIX = ".ann"
#: First line of an index file; the second is its JSON header, the rest faiss' bytes.
MAGIC = b"MREC-WARP-ANN 1\n"
#: HNSW links per node, and the candidate list while building: M 16 reached recall@10 0.999
#: on 20k and 86k items where M 32 gave 0.988 on 20k (scripts/bench_ann.py).
DEFAULT_M = 16
DEFAULT_EF_CONSTRUCTION = 200
#: Candidate list while searching (at least the fetch): the recall / speed knob (scripts/bench_ann.py).
DEFAULT_EF_SEARCH = 64
#: A user whose over-fetch passes this share of the catalogue is scored exactly.
EXACT_SHARE = 0.2
#: What installs the library, said in every refusal for want of it.
HINT = "pip install 'mrec-warp[ann]' (faiss-cpu)"


_FAISS: Any = None


def _faiss():
    global _FAISS
    if _FAISS is None:
        # faiss' loader logs at INFO which CPU build it tried (AVX512, AVX2, generic), tracebacks
        # included: noise for a command whose log level is INFO (serve)
        logging.getLogger("faiss.loader").setLevel(logging.WARNING)
        try:
            import faiss
        except ImportError:
            raise InputError("an ANN index needs faiss, which is not installed", hint=HINT) from None
        _FAISS = faiss
    return _FAISS


def check_indexable(family: Optional[str]) -> None:
    """Refuse ``train --ann`` before training: faiss missing, or a ``family`` without item
    vectors (``None``: the default family, WARP)."""
    _faiss()
    if not model_classes()[family or DEFAULT_FAMILY].has_factors:
        raise InputError(f"`ann` needs a factor model (warp, hybrid, wrmf); a {family} model has no item vectors",
                         hint="drop `ann`: exact top-k is the only way for this model")


def check_model(model) -> None:
    """Refuse ``recommend --ann`` / ``serve --ann`` for a model without item vectors, with
    :func:`check_indexable`'s message (``mrec-warp index`` refuses it: never "build it first")."""
    if not getattr(model, "has_factors", False):
        family = family_name(model)
        raise InputError(f"`ann` needs a factor model (warp, hybrid, wrmf); a {family} model has no item vectors",
                         hint="drop `ann`: exact top-k is the only way for this model")


def one_thread() -> None:
    """Search on one OpenMP thread in this process (``serve``: a batch of queries would
    otherwise spread over threads, on cores the other workers use)."""
    _faiss().omp_set_num_threads(1)


@dataclass
class AnnIndex:
    """A built or loaded index and what binds it to its model."""

    index: Any                         # faiss.IndexHNSWFlat
    header: dict = field(default_factory=dict)
    _params: dict = field(default_factory=dict, repr=False)  # ef -> faiss search parameters, made once

    @property
    def ef_search(self) -> int:
        return int(self.header["ef_search"])


def index_path(model_file: PathLike) -> Path:
    """Where the index of ``model_file`` lives: the same name with ``.ann`` added."""
    return Path(f"{os.fspath(model_file)}{SUFFIX}")


def parts(model) -> Tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """(user vectors, item vectors, item biases or None) of a factor model; an
    :class:`InputError` for a model that scores otherwise (item similarities, popularity)."""
    if not getattr(model, "has_factors", False):
        raise InputError(f"an ANN index needs a factor model (warp, hybrid, wrmf, imported factors); this one is "
                         f"{type(model).__name__}, which has no item vectors",
                         hint="drop `ann`: exact top-k is the only way for this model")
    return model.factor_parts()


def augmented(model) -> Tuple[np.ndarray, np.ndarray]:
    """``(items, users)`` as the index sees them (see the module docstring): items
    ``[q_i, b_i, sqrt(R^2 - |x_i|^2)]``, users ``[p_u, 1, 0]`` (no bias dimension without a
    bias), float32, C-contiguous."""
    users, items, bias = parts(model)
    x = items if bias is None else np.hstack([items, bias[:, None]])
    norms = np.einsum("ij,ij->i", x, x, dtype=np.float64)
    lift = np.sqrt(np.maximum(norms.max(initial=0.0) - norms, 0.0))
    y = users if bias is None else np.hstack([users, np.ones((len(users), 1), users.dtype)])
    return (np.ascontiguousarray(np.hstack([x, lift[:, None]]), dtype=np.float32),
            np.ascontiguousarray(np.hstack([y, np.zeros((len(y), 1), y.dtype)]), dtype=np.float32))


def _items_sha256(items: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(items, dtype=np.float32).tobytes()).hexdigest()


def _stored_sha256(index) -> Optional[str]:
    """SHA-256 of the vector block the graph's flat storage holds (float32, row after row:
    the bytes :func:`_items_sha256` hashes when they are the model's), or ``None`` for an
    index without such a block (not a flat HNSW index: not one of ours)."""
    faiss = _faiss()
    storage = faiss.downcast_index(getattr(index, "storage", None)) if hasattr(index, "storage") else None
    if storage is None or not hasattr(storage, "codes"):
        return None
    return hashlib.sha256(faiss.vector_to_array(storage.codes).tobytes()).hexdigest()


def file_sha256(path: PathLike) -> str:
    """SHA-256 of the model file's bytes: what binds an index to it."""
    return file_digest(path)


def build(model, M: int = DEFAULT_M, ef_construction: int = DEFAULT_EF_CONSTRUCTION,
          ef_search: int = DEFAULT_EF_SEARCH, model_sha256: Optional[str] = None, threads: int = 1) -> AnnIndex:
    """The HNSW index of ``model``'s items (``model_sha256``: the checksum of its file, which
    :func:`save` writes and :func:`load` checks). One thread builds the same graph every time."""
    faiss = _faiss()
    for name, value in (("M", M), ("ef_construction", ef_construction), ("ef_search", ef_search)):
        if int(value) < 1:
            raise InputError(f"`{name}` must be a positive integer, got {value}")
    items, _ = augmented(model)
    if len(items) == 0:
        raise InputError("the model has no items to index")
    if not np.isfinite(items).all():
        raise InputError("the model's item vectors hold NaN or infinite numbers: nothing can be indexed",
                         hint="train it again with smaller parameters")
    faiss.omp_set_num_threads(max(1, int(threads)))
    index = faiss.IndexHNSWFlat(items.shape[1], int(M), faiss.METRIC_L2)
    index.hnsw.efConstruction = int(ef_construction)
    index.add(items)
    faiss.omp_set_num_threads(1)  # searches: one user at a time is faster without OpenMP's hand-offs
    header = {"library": "faiss", "library_version": faiss.__version__, "metric": "l2, inner product lifted",
              "n_items": int(items.shape[0]), "dim": int(items.shape[1]), "bias_dimension": bool(
                  parts(model)[2] is not None), "M": int(M), "ef_construction": int(ef_construction),
              "ef_search": int(ef_search), "model_sha256": model_sha256, "items_sha256": _items_sha256(items),
              "stored_vectors_sha256": _stored_sha256(index)}
    return AnnIndex(index, header)


def save(ann: AnnIndex, path: PathLike) -> None:
    """Write ``ann`` to ``path`` atomically (a temporary file renamed over it)."""
    payload = _faiss().serialize_index(ann.index).tobytes()
    header = {**ann.header, "payload_bytes": len(payload), "payload_sha256": hashlib.sha256(payload).hexdigest()}
    with atomic_write(path, mode="wb", encoding=None) as fh:
        fh.write(MAGIC + strict_json.dumps(header, sort_keys=True).encode() + b"\n" + payload)


def load(path: PathLike, model, model_sha256: str, model_file: Optional[PathLike] = None) -> AnnIndex:
    """The index at ``path``, checked against ``model`` and the checksum of its file.

    Raises
    ------
    InputError
        No index there, a damaged one, or one built for another model file or other items
        (one line, saying to rebuild it with ``mrec-warp index``).
    """
    check_model(model)  # before "build it first": `index` refuses such a model too
    where = str(path)
    rebuild = f"rebuild it: mrec-warp index {model_file if model_file is not None else 'MODEL'}"
    if os.path.exists(path):  # a FIFO would block the open, a device never end: a regular file only
        check_readable(path, "ANN index", empty_hint=rebuild)
    items, _ = augmented(model)
    try:
        with open(path, "rb") as fh:
            header, payload = _read_checked(fh, where, rebuild, items, model_sha256)
    except FileNotFoundError:
        raise InputError("no ANN index beside the model", path=where,
                         hint=f"build it first: mrec-warp index {model_file if model_file is not None else 'MODEL'}"
                         ) from None
    except OSError as exc:
        raise InputError(f"cannot read the ANN index ({exc.strerror or exc})", path=where) from None
    faiss = _faiss()
    try:
        index = faiss.deserialize_index(np.frombuffer(payload, dtype=np.uint8))
    except (RuntimeError, MemoryError, ValueError, OverflowError) as exc:  # faiss' own check of its bytes
        reason = "out of memory reading it" if isinstance(exc, MemoryError) else " ".join(str(exc).split())[:120]
        raise InputError(f"the ANN index is damaged or not this model's index ({reason})", path=where,
                         hint=rebuild) from None
    stored = _stored_sha256(index)
    if stored != _items_sha256(items) or header.get("stored_vectors_sha256", stored) != stored:
        raise InputError("the ANN index's stored vectors are not the model's item vectors (altered or crafted "
                         "payload): its answers would not be the model's", path=where, hint=rebuild)
    faiss.omp_set_num_threads(1)
    return AnnIndex(index, header)


#: Longest header line read: a real one is about 700 bytes.
MAX_HEADER_BYTES = 64 * 1024
#: Largest ``M`` and ``ef`` an index may declare (``mrec-warp index`` refuses more): faiss keeps
#: them in C ints and sizes its lists by them.
MAX_M = 1024
MAX_EF = 1_000_000
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _header_problem(header: Any) -> Optional[str]:
    """What is wrong with a parsed index header (a field missing, of the wrong type or out of
    range), or ``None``: every field the loader and the searches use is checked here, once."""
    if not isinstance(header, dict):
        return "the header is not a JSON object"
    ints = {"n_items": (1, None), "dim": (1, None), "M": (2, MAX_M), "ef_construction": (1, MAX_EF),
            "ef_search": (1, MAX_EF), "payload_bytes": (0, None)}
    for name, (low, high) in ints.items():
        value = header.get(name)
        if type(value) is not int or value < low or (high is not None and value > high):
            span = f"{low}..{high}" if high is not None else f"at least {low}"
            return f"header field \"{name}\" must be an integer, {span}, got {json.dumps(value)[:40]}"
    for name, optional in (("payload_sha256", False), ("items_sha256", False), ("model_sha256", True),
                           ("stored_vectors_sha256", True)):
        value = header.get(name)
        if not (isinstance(value, str) and _SHA256.fullmatch(value)) and not (optional and value is None):
            return f"header field \"{name}\" must be a SHA-256 in hex, got {json.dumps(value)[:40]}"
    if not isinstance(header.get("bias_dimension", False), bool):
        return "header field \"bias_dimension\" must be true or false"
    return None


def _payload_bound(n_items: int, dim: int, M: int) -> int:
    """Most bytes faiss' serialization of an HNSW flat index of ``n_items`` x ``dim`` with ``M``
    links can take: the float32 vectors, ``2M`` links a node on the bottom layer and about
    ``M / (M - 1)`` more layers of ``M`` (measured 4M(2 + 1/(M-1)) + 12 bytes a node), with room."""
    return n_items * (4 * dim + 12 * M + 64) + 64 * 1024


def _read_checked(fh, where: str, rebuild: str, items: np.ndarray, model_sha256: str) -> Tuple[dict, bytes]:
    """The header and payload of the open index file ``fh``, every header field checked and the
    file's size checked against the payload it declares and the most a real index of the
    model's ``items`` (as :func:`augmented` gives them) can take before a byte of the payload
    is read."""
    def refuse(reason: str):
        return InputError(f"the ANN index is damaged or not this model's index ({reason})", path=where,
                          hint=rebuild)

    if fh.read(len(MAGIC)) != MAGIC:
        raise InputError("not an ANN index of mrec-warp (wrong first bytes)", path=where, hint=rebuild)
    line = fh.readline(MAX_HEADER_BYTES + 1)
    if not line.endswith(b"\n"):
        raise refuse("truncated" if len(line) <= MAX_HEADER_BYTES else f"header over {MAX_HEADER_BYTES} bytes")
    try:
        header = json.loads(line.decode())
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise refuse("its header is not JSON") from None
    problem = _header_problem(header)
    if problem is not None:
        raise refuse(problem)
    if header["model_sha256"] != model_sha256:
        raise InputError(f"the ANN index is stale: it was built for another version of the model file (sha256 "
                         f"{str(header.get('model_sha256'))[:12]}, the file now has {model_sha256[:12]})",
                         path=where, hint=rebuild)
    if (header["n_items"], header["dim"]) != items.shape or header["items_sha256"] != _items_sha256(items):
        raise InputError(f"the ANN index holds other items than the model ({header['n_items']} x "
                         f"{header['dim']} vs {items.shape[0]} x {items.shape[1]}, or other values): items "
                         "added by cold start are not in it", path=where,
                         hint="drop the cold-start items options, or drop `ann`")
    declared = header["payload_bytes"]
    size = os.fstat(fh.fileno()).st_size
    if size != fh.tell() + declared:
        raise refuse(f"{size} bytes where its header declares {fh.tell() + declared}: truncated or altered")
    if declared > _payload_bound(*items.shape, header["M"]):
        raise refuse(f"a payload of {declared} bytes, more than an index of {items.shape[0]} x {items.shape[1]} "
                     "takes")
    payload = fh.read(declared)
    if len(payload) != declared or hashlib.sha256(payload).hexdigest() != header["payload_sha256"]:
        raise refuse("truncated or altered")
    problem = layout_problem(payload, *items.shape)  # faiss sizes its arrays by the counts in these bytes
    if problem is not None:
        raise refuse(problem)
    return header, payload


def open_for(model, model_file: Optional[PathLike], context=None) -> AnnIndex:
    """The index beside ``model_file`` for ``recommend --ann``, checked (see :func:`load`);
    refused for a model given as an object (no file to bind to) or a job in part files."""
    if model_file is None:
        raise InputError("`ann` needs the model as a file: its index is bound to the file's checksum",
                         hint="save the model and pass its path")
    if context is not None and context.uses_parts:
        raise InputError("`ann` scores on local threads; it does not run in part files (processes, Dask or a "
                         "work folder)", hint="drop `backend` and `workdir`, or drop `ann`")
    return load(index_path(model_file), model, file_sha256(model_file), model_file)


def _search(ann: AnnIndex, queries: np.ndarray, n: int) -> np.ndarray:
    ef = max(ann.ef_search, n)
    params = ann._params.get(ef)
    if params is None:  # per call, not set on the index: requests on several threads may ask other ef
        params = _faiss().SearchParametersHNSW()
        params.efSearch = ef
        ann._params[ef] = params
    return ann.index.search(queries, n, params=params)[1]


def _outside(cands: np.ndarray, sorted_row: np.ndarray) -> np.ndarray:
    """Which of ``cands`` are not in ``sorted_row`` (a user's sorted excluded items)."""
    if len(sorted_row) == 0:
        return np.ones(len(cands), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_row, cands), len(sorted_row) - 1)
    return sorted_row[at] != cands


def top_k(ann: AnnIndex, model, users: np.ndarray, k: int, exclude: Optional[sp.csr_matrix] = None,
          item_mask: Optional[np.ndarray] = None, positions: Optional[np.ndarray] = None,
          ) -> Tuple[np.ndarray, np.ndarray]:
    """Top ``k`` items of ``users`` (row indices), best first: ``(items, scores)`` of shape
    ``(len(users), k)``, padded with ``-1`` / ``-inf`` where fewer items are left.

    ``exclude`` (users x items CSR: the training items, or None) and ``item_mask`` (uint8
    per item, 1 = never) are never returned (see the module docstring for the over-fetch).
    Users scored exactly (their fetch passes :data:`EXACT_SHARE`) get the list of the
    exact path at ``positions`` (:func:`~mrec_warp.models.single_user.recommend_few`).
    """
    users = np.asarray(users, dtype=np.int64)
    user_vecs, items, bias = parts(model)
    n_items = items.shape[0]
    _, queries = augmented_users(model, users)
    masked = 0 if item_mask is None else int(np.count_nonzero(item_mask))
    out_items = np.full((len(users), k), -1, dtype=np.int64)
    out_scores = np.full((len(users), k), -np.inf, dtype=np.float32)
    rows = [exclusion_row(exclude, int(u)) for u in users]
    fetch = np.array([k + len(r) + masked for r in rows], dtype=np.int64)
    fetch = 1 << np.ceil(np.log2(fetch)).astype(np.int64)  # powers of two: few distinct searches
    cap = max(k, int(EXACT_SHARE * n_items))
    exact = []
    pending = np.arange(len(users))
    while len(pending):
        again = []
        for n in (fetch[pending[:1]] if len(pending) == 1 else np.unique(fetch[pending])):
            group = pending if len(pending) == 1 else pending[fetch[pending] == n]
            if n > cap:
                exact.extend(group.tolist())
                continue
            found = _search(ann, queries[group], int(min(n, n_items)))
            for row, cands in zip(group, found):
                cands = cands[cands >= 0]
                keep = _outside(cands, rows[row])
                if item_mask is not None:
                    keep &= item_mask[cands] == 0
                cands = cands[keep]
                if len(cands) < k and n < n_items:  # the graph gave fewer than asked: fetch more
                    fetch[row] = n * 2
                    again.append(row)
                    continue
                scores = items[cands] @ user_vecs[users[row]]
                if bias is not None:
                    scores += bias[cands]
                order = np.lexsort((cands, -scores))[:k]  # best first, ties by item index
                out_items[row, :len(order)] = cands[order]
                out_scores[row, :len(order)] = scores[order]
        pending = np.array(again, dtype=np.int64)
    if exact:
        exact = np.array(exact, dtype=np.int64)
        where = exact if positions is None else np.asarray(positions)[exact]
        got = recommend_few(model, users[exact], k, exclude, item_mask, positions=where)
        if got is None:  # imported factors: the batch path, one user at its own position
            got = tuple(np.vstack(part) for part in zip(*(
                top_k_block(model.score_users, users[[e]], k, exclude, int(w), item_mask)[1:]
                for e, w in zip(exact, where))))
        out_items[exact], out_scores[exact] = got
    return out_items, out_scores


def augmented_users(model, users: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """``(user vectors, queries)`` of ``users``: the queries are ``[p_u, 1, 0]`` (``[p_u, 0]``
    without a bias), as :func:`augmented`."""
    user_vecs, _, bias = parts(model)
    vecs = np.asarray(user_vecs[users], dtype=np.float32)
    queries = np.zeros((len(vecs), vecs.shape[1] + (1 if bias is None else 2)), dtype=np.float32)
    queries[:, :vecs.shape[1]] = vecs
    if bias is not None:
        queries[:, vecs.shape[1]] = 1.0
    return vecs, queries


def iter_top_k(ann: AnnIndex, model, users: np.ndarray, k: int, exclude: Optional[sp.csr_matrix] = None,
               item_mask: Optional[np.ndarray] = None, block_size: Optional[int] = None,
               progress=None) -> Iterator[Tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``(users, items, scores)`` per block, as :func:`mrec_warp.topk.iter_top_k` yields them,
    from the index (``recommend --ann``)."""
    users = np.asarray(users, dtype=np.int64)
    size = block_size or default_block_size(model.n_items)
    starts = range(0, len(users), size)
    blocks = ((users[s:s + size], *top_k(ann, model, users[s:s + size], k, exclude, item_mask,
                                         positions=users[s:s + size])) for s in starts)
    yield from (progress or SILENT).iterate(blocks, total=len(starts), desc="recommend (ANN)", unit="block")
