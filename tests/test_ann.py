"""The optional ANN index (:mod:`mrec_warp.models.ann`, the ``[ann]`` extra): bound to its model
file, never used stale, and its lists keep the exclusions and filters of the exact ones."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from mrec_warp.models import ann
from mrec_warp.errors import InputError
from mrec_warp.models import WARP, WRMF, ItemKNN
from mrec_warp.models.single_user import recommend_few

from .conftest import planted_low_rank
from .test_guards import one_line_error, run

pytest.importorskip("faiss")

#: Smallest mean recall@10 of the index against the exact lists on the planted set (measured
#: 1.0 there; scripts/bench_ann.py measures the real catalogues).
RECALL_FLOOR = 0.95


@pytest.fixture(scope="module")
def warp(tmp_path_factory):
    train, _ = planted_low_rank(n_users=300, n_items=400, per_user=30, seed=3)
    model = WARP(factors=16, epochs=5, random_state=1).fit(train)
    path = tmp_path_factory.mktemp("ann") / "warp.npz"
    model.save(path)
    return model, path


def _exact(model, users, k, exclude, mask=None):
    return recommend_few(model, np.asarray(users), k, exclude, mask, positions=np.asarray(users))


def test_index_round_trip_and_recall(warp, tmp_path):
    model, path = warp
    built = ann.build(model, model_sha256=ann.file_sha256(path))
    target = tmp_path / "warp.npz.ann"
    ann.save(built, target)
    loaded = ann.load(target, model, ann.file_sha256(path), path)
    assert loaded.header["items_sha256"] == built.header["items_sha256"] and loaded.index.ntotal == model.n_items
    assert loaded.header["dim"] == 18  # 16 factors, the item bias, the lift to equal lengths
    users = np.arange(model.n_users)
    got_items, got_scores = ann.top_k(loaded, model, users, 10, model.train_)
    want_items, want_scores = _exact(model, users, 10, model.train_)
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(got_items, want_items)])
    assert recall >= RECALL_FLOOR, recall
    same = (got_items == want_items).all(axis=1)  # where the lists agree, so do the scores (the model's own)
    np.testing.assert_allclose(got_scores[same], want_scores[same], rtol=1e-5, atol=1e-6)
    assert (np.diff(got_scores, axis=1) <= 0).all()  # best first


def test_wrmf_without_bias_is_indexed_on_its_factors(tmp_path):
    train, _ = planted_low_rank(n_users=200, n_items=150, per_user=20, seed=4)
    model = WRMF(factors=8, epochs=3, random_state=0).fit(train)
    built = ann.build(model, model_sha256="x")
    assert built.header["dim"] == 9 and not built.header["bias_dimension"]
    got, _ = ann.top_k(built, model, np.arange(50), 5, model.train_)
    want, _ = _exact(model, np.arange(50), 5, model.train_)
    assert np.mean([len(set(a) & set(b)) / 5 for a, b in zip(got, want)]) >= RECALL_FLOOR


def test_exclusions_and_filters_hold_under_over_fetch(warp):
    model, _ = warp
    built = ann.build(model, model_sha256="x")
    rng = np.random.default_rng(0)
    users = np.arange(model.n_users)
    mask = (rng.random(model.n_items) < 0.5).astype(np.uint8)  # half the catalogue filtered for everyone
    items, scores = ann.top_k(built, model, users, 10, model.train_, mask)
    for u, row in zip(users, items):
        assert (row >= 0).all()  # enough items are left for every user: the list is full
        assert not set(row) & set(model.train_[u].indices)
        assert not mask[row].any()
    allowed = rng.choice(model.n_items, 15, replace=False)  # a short include-list: scored exactly
    only = np.ones(model.n_items, np.uint8)
    only[allowed] = 0
    items, _ = ann.top_k(built, model, users, 10, model.train_, only)
    want, _ = _exact(model, users, 10, model.train_, only)
    assert (items == want).all()
    for u, row in zip(users, items):
        assert set(row[row >= 0]) == set(allowed) - set(model.train_[u].indices) or len(row[row >= 0]) == 10
    # no exclusion at all: the seen items may come back
    free, _ = ann.top_k(built, model, users[:20], 10, None)
    assert any(set(row) & set(model.train_[u].indices) for u, row in zip(users[:20], free))


def test_stale_damaged_or_missing_index_is_refused(warp, tmp_path):
    model, path = warp
    own = tmp_path / "m.npz"
    own.write_bytes(path.read_bytes())
    target = ann.index_path(own)
    with pytest.raises(InputError, match="no ANN index beside the model.*mrec-warp index"):
        ann.open_for(model, own)
    ann.save(ann.build(model, model_sha256=ann.file_sha256(own)), target)
    assert ann.open_for(model, own).index.ntotal == model.n_items
    good = target.read_bytes()
    target.write_bytes(good[:-100])
    with pytest.raises(InputError, match="damaged"):
        ann.open_for(model, own)
    flipped = bytearray(good)
    flipped[-50] ^= 0xFF
    target.write_bytes(bytes(flipped))
    with pytest.raises(InputError, match="damaged"):
        ann.open_for(model, own)
    target.write_bytes(b"not an index")
    with pytest.raises(InputError, match="not an ANN index"):
        ann.open_for(model, own)
    target.write_bytes(good)
    other = WARP(factors=16, epochs=1, random_state=2).fit(model.train_)
    other.save(own)  # the model file changed after the index was built
    with pytest.raises(InputError, match="stale.*rebuild it: mrec-warp index"):
        ann.open_for(other, own)
    with pytest.raises(InputError, match="other items than the model"):  # same file, other items in memory
        ann.load(target, other, ann.file_sha256(path), path)
    with pytest.raises(InputError, match="needs a factor model"):
        ann.build(ItemKNN().fit(model.train_))


def test_cli_index_then_recommend_ann_writes_the_same_format(warp, tmp_path):
    _, src = warp
    path = tmp_path / "model.npz"
    path.write_bytes(src.read_bytes())
    one_line_error(run("recommend", path, "-o", tmp_path / "r.tsv", "--ann"), "no ANN index", "mrec-warp index")
    result = run("index", path, "--ef-search", "64")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "model.npz.ann").exists()
    exact, approx = tmp_path / "exact.tsv", tmp_path / "approx.tsv"
    assert run("recommend", path, "-o", exact, "-k", "5").exit_code == 0
    assert run("recommend", path, "-o", approx, "-k", "5", "--ann").exit_code == 0
    names = ["user", "item", "score", "rank"]
    e = pd.read_csv(exact, sep="\t", header=None, names=names, dtype=str, keep_default_na=False)
    a = pd.read_csv(approx, sep="\t", header=None, names=names, dtype=str, keep_default_na=False)
    assert len(a) == len(e) and a["user"].tolist() == e["user"].tolist() and a["rank"].tolist() == e["rank"].tolist()
    overlap = np.mean([len(set(a.item[a.user == u]) & set(e.item[e.user == u])) / 5 for u in e.user.unique()])
    assert overlap >= RECALL_FLOOR
    one_line_error(run("recommend", path, "-o", tmp_path / "p.tsv", "--ann", "--backend", "processes"),
                   "does not run in part files")
    WARP(factors=16, epochs=1, random_state=5).fit(planted_low_rank(n_users=300, n_items=400, seed=3)[0]).save(path)
    one_line_error(run("recommend", path, "-o", tmp_path / "s.tsv", "--ann"), "stale", "mrec-warp index")
    assert not (tmp_path / "s.tsv").exists()
    knn = tmp_path / "knn.npz"
    ItemKNN().fit(planted_low_rank(n_users=50, n_items=80, per_user=10)[0]).save(knn)
    one_line_error(run("index", knn), "needs a factor model")


def test_the_package_imports_without_faiss_and_says_what_to_install(warp):
    _, path = warp
    code = ("import sys; sys.modules['faiss'] = None\n"
            "import mrec_warp.cli, mrec_warp.stages.recommend\n"
            "from mrec_warp.models import ann\nfrom mrec_warp import models\n"
            "from mrec_warp.errors import InputError\n"
            f"m = models.load({str(path)!r})\n"
            "try:\n    ann.build(m)\nexcept InputError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "needs faiss" in out and "mrec-warp[ann]" in out


def test_serve_with_ann_answers_every_endpoint(tmp_path):
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    from .test_serve import ODD_USERS, Server, _fit

    model = _fit()
    path = tmp_path / "model.npz"
    model.save(path)
    assert run("index", path, "-q").exit_code == 0
    recs = tmp_path / "recs.tsv"
    assert run("recommend", path, "-o", recs, "-k", "6", "--ann").exit_code == 0
    written = pd.read_csv(recs, sep="\t", header=None, names=["user", "item", "score", "rank"], dtype=str,
                          keep_default_na=False, quoting=3)
    server = Server(path, "--ann")
    try:
        for user in ODD_USERS[:4] + ["user7"]:
            status, answer = server.get("/recommend", user=user, k=6)
            assert status == 200, answer
            items = [entry["item"] for entry in answer["items"]]
            assert items == written.loc[written["user"] == user, "item"].tolist()
            assert not set(items) & set(model.item_ids[model.train_[model.user_indices(user)[0]].indices])
            _, filtered = server.get("/recommend", user=user, k=6, exclude=items[:2])
            assert not {entry["item"] for entry in filtered["items"]} & set(items[:2])
        status, described = server.get("/model")
        assert status == 200 and described["ann"]["library"] == "faiss"
        assert described["ann"]["model_sha256"] == described["sha256"]
        assert server.post("/recommend", {"items": ["item 0", "i+2"], "k": 3})[0] == 200
        assert server.get("/similar", item="i,1", k=3)[0] == 200
        assert server.get("/health")[0] == 200
        assert server.get("/recommend", user="nobody")[0] == 404
    finally:
        log = server.stop()
    assert "Traceback" not in log
    _fit(seed=1).save(path)  # a new model file and the old index: refused at start, in one line
    result = subprocess.run([sys.executable, "-m", "mrec_warp", "serve", str(path), "--ann", "--port", "0"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "stale" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_imported_factors_are_indexed_and_heavy_filters_fall_back_to_exact(warp):
    from mrec_warp.models.imported import Factors

    model, _ = warp
    users_f, items_f, bias = model.factor_parts()
    imported = Factors.from_arrays(users_f, items_f, model.user_ids, model.item_ids, item_bias=bias,
                                   train=model.train_)
    built = ann.build(imported, model_sha256="x")
    users = np.arange(40)
    got, _ = ann.top_k(built, imported, users, 10, imported.train_)
    want, _ = _exact(model, users, 10, model.train_)
    assert np.mean([len(set(a) & set(b)) / 10 for a, b in zip(got, want)]) >= RECALL_FLOOR
    mask = np.zeros(imported.n_items, np.uint8)
    mask[: imported.n_items * 3 // 4] = 1  # a fetch past a fifth of the catalogue: ranked exactly
    got, scores = ann.top_k(built, imported, users, 10, imported.train_, mask)
    for u, row in zip(users, got):
        expected, _ = imported.recommend(int(u), k=10, filter_items=np.flatnonzero(mask))
        assert row.tolist() == np.asarray(expected).tolist()


def test_serve_ann_reload_waits_for_the_new_index(tmp_path):
    """A new model file beside its old index is refused (the old model keeps serving, the
    reason in /model); once its index is rebuilt, the pair is picked up."""
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    from .test_serve import Server, _fit, _replace

    live, second = tmp_path / "live.npz", tmp_path / "second.npz"
    _fit(seed=0).save(live)
    _fit(seed=1).save(second)
    assert run("index", live, "-q").exit_code == 0
    (tmp_path / "first.npz").write_bytes(live.read_bytes())
    (tmp_path / "first.npz.ann").write_bytes(ann.index_path(live).read_bytes())
    server = Server(live, "--ann", "--reload")
    try:
        sha_first = server.get("/health")[1]["sha256"]
        _replace(live, second)
        server.wait_for(lambda: server.get("/model")[1]["reload_error"] is not None, "the refused reload")
        assert "stale" in server.get("/model")[1]["reload_error"]
        assert server.get("/health")[1]["sha256"] == sha_first
        assert server.get("/recommend", user="u 1", k=3)[0] == 200  # the old model and its index
        # an index bound to the new file by its header, holding the old model's vectors: refused too
        from mrec_warp.models import load

        old_index = ann.load(tmp_path / "first.npz.ann", load(tmp_path / "first.npz"),
                             ann.file_sha256(tmp_path / "first.npz")).index
        _forge(ann.index_path(live), ann.build(load(live), model_sha256=ann.file_sha256(live)), old_index)
        server.wait_for(lambda: "stored vectors" in (server.get("/model")[1]["reload_error"] or ""),
                        "the crafted index refused")
        assert server.get("/health")[1]["sha256"] == sha_first
        assert run("index", live, "-q").exit_code == 0
        sha_second = ann.file_sha256(live)
        server.wait_for(lambda: server.get("/health")[1]["sha256"] == sha_second, "the new model and index")
        assert server.get("/model")[1]["ann"]["model_sha256"] == sha_second
        assert server.get("/recommend", user="u 1", k=3)[0] == 200
    finally:
        log = server.stop()
    assert "Traceback" not in log


def test_train_ann_writes_the_index_beside_the_model(tmp_path):
    train, _ = planted_low_rank(n_users=60, n_items=80, per_user=10, seed=4)
    coo = train.tocoo()
    data = tmp_path / "train.tsv"
    data.write_text("".join(f"u{u}\ti{i}\n" for u, i in zip(coo.row, coo.col)))
    model = tmp_path / "model.npz"
    result = run("train", data, "-o", model, "--epochs", "2", "--factors", "8", "--ann")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "model.npz.ann").exists()
    # the index is bound to the file just written: recommend --ann takes it
    assert run("recommend", model, "-o", tmp_path / "r.tsv", "-k", "3", "--ann").exit_code == 0
    # a family without item vectors is refused before any training
    knn = tmp_path / "knn.npz"
    one_line_error(run("train", data, "-o", knn, "--model", "itemknn", "--ann"), "needs a factor model")
    assert not knn.exists()


def _forge(target, genuine: "ann.AnnIndex", payload_index, stored_field: str = "forged") -> None:
    """An index file whose header is the genuine one (model and item checksums), whose
    payload is ``payload_index``'s and whose payload checksum is made to agree: only the
    stored vectors betray it. ``stored_field``: the header's stored-vector checksum set to
    the genuine one ("forged"), or left out, as in files written before it ("absent")."""
    import hashlib
    import json

    faiss = ann._faiss()
    payload = faiss.serialize_index(payload_index).tobytes()
    header = dict(genuine.header)
    if stored_field == "absent":
        header.pop("stored_vectors_sha256", None)
    header.update(payload_bytes=len(payload), payload_sha256=hashlib.sha256(payload).hexdigest())
    target.write_bytes(ann.MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n" + payload)


@pytest.mark.parametrize("stored_field", ["forged", "absent"])
def test_an_index_whose_stored_vectors_are_not_the_models_is_refused(warp, tmp_path, stored_field):
    """Header, graph and payload checksum consistent, the vectors another model's: refused by
    load, recommend --ann and a serve reload alike (the stored block is hashed against the
    model's vectors, so an index written before the header field is checked the same way)."""
    model, src = warp
    path = tmp_path / "model.npz"
    path.write_bytes(src.read_bytes())
    genuine = ann.build(model, model_sha256=ann.file_sha256(path))
    other = WARP(factors=16, epochs=1, random_state=9).fit(model.train_)
    crafted = ann.build(other).index  # same shape, other vectors: recall against exact would collapse
    target = ann.index_path(path)
    _forge(target, genuine, crafted, stored_field)
    with pytest.raises(InputError, match="stored vectors are not the model's.*rebuild it: mrec-warp index"):
        ann.open_for(model, path)
    one_line_error(run("recommend", path, "-o", tmp_path / "r.tsv", "--ann"), "stored vectors are not the model's")
    assert not (tmp_path / "r.tsv").exists()
    _forge(target, genuine, genuine.index, stored_field)  # the genuine payload, even without the field, loads
    assert ann.open_for(model, path).index.ntotal == model.n_items


def _rewrite(target, header_text: bytes, payload: bytes) -> None:
    target.write_bytes(ann.MAGIC + header_text + b"\n" + payload)


@pytest.mark.parametrize("field, value", [("ef_search", "x"), ("ef_search", 10 ** 12), ("M", 0), ("n_items", None),
                                          ("payload_bytes", -1), ("payload_sha256", 7), ("dim", True)])
def test_an_index_header_field_of_wrong_type_or_range_is_one_line_naming_the_file(warp, tmp_path, field, value):
    """Every header field is checked when the index is loaded: `serve --ann` never starts on it,
    and no ValueError / OverflowError escapes as an unexpected error."""
    import hashlib
    import json

    model, src = warp
    path = tmp_path / "model.npz"
    path.write_bytes(src.read_bytes())
    genuine = ann.build(model, model_sha256=ann.file_sha256(path))
    payload = ann._faiss().serialize_index(genuine.index).tobytes()
    header = {**genuine.header, "payload_bytes": len(payload), "payload_sha256": hashlib.sha256(payload).hexdigest(),
              field: value}
    target = ann.index_path(path)
    _rewrite(target, json.dumps(header).encode(), payload)
    with pytest.raises(InputError, match=f"damaged or not this model.s index.*\"{field}\"") as caught:
        ann.open_for(model, path)
    assert str(target) in str(caught.value)
    one_line_error(run("recommend", path, "-o", tmp_path / "r.tsv", "--ann"), f"\"{field}\"")


def test_a_deeply_nested_or_huge_header_is_refused_without_recursion(warp, tmp_path):
    model, src = warp
    path = tmp_path / "model.npz"
    path.write_bytes(src.read_bytes())
    target = ann.index_path(path)
    _rewrite(target, b"[" * 100_000 + b"]" * 100_000, b"")
    with pytest.raises(InputError, match="header over"):
        ann.open_for(model, path)
    _rewrite(target, b"[" * 20_000 + b"]" * 20_000, b"")
    with pytest.raises(InputError, match="not JSON|not a JSON object"):
        ann.open_for(model, path)


def test_an_index_larger_than_its_header_or_its_model_allows_is_refused_before_reading(warp, tmp_path):
    """A sparse file padded far past its declared payload, or a header declaring a payload larger
    than any index of the model's items, is refused from its size, the payload never read."""
    import json

    model, src = warp
    path = tmp_path / "model.npz"
    path.write_bytes(src.read_bytes())
    genuine = ann.build(model, model_sha256=ann.file_sha256(path))
    target = ann.index_path(path)
    ann.save(genuine, target)
    with open(target, "r+b") as fh:  # sparse: 8 GiB on paper, nothing on disk
        fh.truncate(8 << 30)
    with pytest.raises(InputError, match="header declares.*truncated or altered"):
        ann.open_for(model, path)
    header = {**genuine.header, "payload_bytes": 8 << 30, "payload_sha256": "0" * 64}
    _rewrite(target, json.dumps(header).encode(), b"")
    with open(target, "r+b") as fh:
        fh.truncate(fh.seek(0, 2) + (8 << 30))
    with pytest.raises(InputError, match="more than an index of"):
        ann.open_for(model, path)


def test_a_crafted_payload_faiss_cannot_read_is_one_line_naming_the_file(warp, tmp_path, monkeypatch):
    """One byte of faiss' own header changed and the checksum recomputed: refused in one line
    naming the .ann before faiss reads a byte (faiss allocates what its counts say: gigabytes
    for these), and faiss' own failure (or its out-of-memory) is one line too."""
    import hashlib
    import json

    model, src = warp
    path = tmp_path / "model.npz"
    path.write_bytes(src.read_bytes())
    genuine = ann.build(model, model_sha256=ann.file_sha256(path))
    payload = bytearray(ann._faiss().serialize_index(genuine.index).tobytes())
    target = ann.index_path(path)
    levels = 4 + 4 + 8 + 16 + 1 + 4 + 8 + 8 * len(ann._faiss().vector_to_array(genuine.index.hnsw.assign_probas)) + 8
    neighbors = len(payload) - (4 + 4 + 8 + 16 + 1 + 4 + 8 + 4 * model.n_items * genuine.header["dim"]) - 20
    faiss_reads = []
    real_deserialize = ann._faiss().deserialize_index
    monkeypatch.setattr(ann._faiss(), "deserialize_index", lambda data: faiss_reads.append(1) or real_deserialize(data))
    # the dimension, the item count, the length of the level list, the last neighbour id (a graph
    # pointing outside the items: read out of bounds while searching)
    for offset, reason in ((5, "declares 400 x 32530"), (12, "declares 545460846992 x 18"),
                           (levels - 8, "count in it passes the end"), (neighbors - 1, "links to nodes outside")):
        crafted = bytearray(payload)
        crafted[offset] = 0x7F
        header = {**genuine.header, "payload_bytes": len(crafted),
                  "payload_sha256": hashlib.sha256(crafted).hexdigest()}
        _rewrite(target, json.dumps(header).encode(), bytes(crafted))
        with pytest.raises(InputError, match="damaged or not this model's index") as caught:
            ann.open_for(model, path)
        assert str(target) in str(caught.value) and "\n" not in str(caught.value)
        assert reason in str(caught.value)
    assert not faiss_reads
    ann.save(genuine, target)  # the genuine bytes pass the same walk
    assert ann.open_for(model, path).index.ntotal == model.n_items and faiss_reads == [1]
    monkeypatch.setattr(ann._faiss(), "deserialize_index", lambda data: (_ for _ in ()).throw(MemoryError()))
    ann.save(genuine, target)
    with pytest.raises(InputError, match="damaged or not this model's index.*out of memory.*mrec-warp index") as caught:
        ann.open_for(model, path)
    assert str(target) in str(caught.value)
