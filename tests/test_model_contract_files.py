"""Model files keep their format across the model contract (public get_arrays/set_arrays,
the factor-model base): the members and header a factor model writes are those of
format version 1, and an archive laid out by hand as version 1 files are loads."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest
import scipy.sparse as sp

from mrec_warp.models import WARP, WRMF, HybridWARP, load

#: The members of each family's model file (format version 1), as files written before the
#: contract hold them; besides these every file has the ids, the training matrix and __meta__.
V1_ARRAYS = {
    "WARP": {"user_factors", "item_factors", "item_bias"},
    "WRMF": {"user_factors", "item_factors", "confidence"},
    "HybridWARP": {"user_embeddings", "item_embeddings", "item_feature_bias"} | {
        f"{prefix}{part}" for kind in ("user", "item")
        for prefix in (f"{kind}_raw_", f"new_{kind}_raw_") for part in ("indptr", "indices", "data")
    } | {f"{kind}_{what}" for kind in ("user", "item") for what in ("feature_names", "identity")}
      | {"new_user_ids", "new_item_ids"},
}
V1_ATTRS = {"best_epoch_", "epochs_done_", "id_encoding_", "ids_generated_"}
#: attributes a family adds to format 1 (a file without them still loads: see the next test)
EXTRA_ATTRS = {"WRMF": {"alpha_", "factors_", "regularization_"}}  # what "auto" became (alpha, and the chosen settings)


def _data() -> sp.csr_matrix:
    rng = np.random.default_rng(4)
    dense = (rng.random((30, 12)) < 0.3).astype(np.float32) * rng.integers(1, 4, (30, 12))
    dense[np.arange(30), np.arange(30) % 12] = 2.0
    return sp.csr_matrix(dense)


def _fitted(cls):
    model = cls(factors=4, epochs=2, random_state=3)
    if cls is HybridWARP:
        import pandas as pd
        return model.fit(_data(), item_features=pd.DataFrame({"id": ["0", "1", "5"], "feature": ["a", "b", "a"]}))
    return model.fit(_data())


@pytest.mark.parametrize("cls", [WARP, WRMF, HybridWARP])
def test_a_factor_model_writes_the_members_and_header_of_format_1(cls):
    model = _fitted(cls)
    buffer = io.BytesIO()
    model.save(buffer)
    buffer.seek(0)
    with np.load(buffer) as archive:
        members = set(archive.files)
        meta = json.loads(str(archive["__meta__"]))
    assert members == {"__meta__", "user_ids", "item_ids", "train_indptr", "train_indices"} | {
        f"arr_{name}" for name in V1_ARRAYS[cls.__name__]}
    assert meta["format"] == "mrec-warp-model" and meta["format_version"] == 1
    assert meta["class"] == cls.__name__ and set(meta["attrs"]) == V1_ATTRS | EXTRA_ATTRS.get(cls.__name__, set())


@pytest.mark.parametrize("cls", [WARP, WRMF, HybridWARP])
def test_an_archive_laid_out_as_format_1_loads_with_the_same_scores(cls, tmp_path):
    model = _fitted(cls)
    arrays = model.get_arrays()
    assert set(arrays) == V1_ARRAYS[cls.__name__]
    meta = {"format": "mrec-warp-model", "format_version": 1, "class": cls.__name__,
            "params": model.get_params(), "attrs": {"epochs_done_": 2, "best_epoch_": 2, "ids_generated_": True,
                                                    "id_encoding_": "utf-8"}}
    path = tmp_path / "v1.npz"
    np.savez(path, __meta__=np.array(json.dumps(meta)), user_ids=model.user_ids.astype(str),
             item_ids=model.item_ids.astype(str), train_indptr=model.train_.indptr.astype(np.int64),
             train_indices=model.train_.indices.astype(np.int32),
             **{f"arr_{name}": np.ascontiguousarray(a) for name, a in arrays.items()})
    loaded = load(path)
    assert type(loaded) is cls and loaded.epochs_done_ == 2
    users = np.arange(model.n_users)
    assert np.array_equal(loaded.score_users(users), model.score_users(users))
