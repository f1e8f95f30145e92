"""Micro-batching in ``mrec-warp serve`` and the one-user path under it: a request's list
does not depend on the others ranked with it, and a fault answers only its own request."""
from __future__ import annotations

import asyncio
import copy
import concurrent.futures
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from mrec_warp.models import WARP, ItemKNN, single_user  # noqa: E402
from mrec_warp.serving.app import _rank_users  # noqa: E402
from mrec_warp.serving.batching import Batcher  # noqa: E402
from mrec_warp.stages.recommend import write_recommendations  # noqa: E402
from mrec_warp.topk import top_k_block  # noqa: E402

from .test_serve import Server  # noqa: E402
from .test_single_user import data, warp  # noqa: E402,F401  (fixtures: the planted set, a WARP fitted on it)


@pytest.fixture(scope="module")
def tied(data):
    """Every odd item ties with the even one before it: every list is a close call."""
    model = WARP(factors=8, epochs=2, random_state=1).fit(data)
    factors, bias = model.item_factors_.copy(), model.item_bias_.copy()
    factors[1::2] = factors[0::2]
    bias[1::2] = bias[0::2]
    model.item_factors_, model.item_bias_ = factors, bias
    return model


# -- the batcher --------------------------------------------------------------------------------
def _gather(batcher, jobs):
    async def run():
        return await asyncio.gather(*(batcher.submit(j) for j in jobs), return_exceptions=True)
    return asyncio.run(run())


def test_requests_of_one_turn_are_ranked_together():
    calls = []

    def rank(jobs):
        calls.append(list(jobs))
        return [j * 10 for j in jobs]

    batcher = Batcher(rank, max_batch=5)
    assert _gather(batcher, range(12)) == [j * 10 for j in range(12)]
    assert [len(c) for c in calls] == [5, 5, 2]  # in order, never more than max_batch
    assert batcher.stats() == {"requests": 12, "batches": 3, "largest": 5, "max_batch": 5}


def test_a_fault_answers_only_its_own_request():
    def rank(jobs):
        if "bad" in jobs:
            raise ValueError("bad job")
        return [j.upper() for j in jobs]

    results = _gather(Batcher(rank), ["a", "bad", "c"])
    assert results[0] == "A" and results[2] == "C"
    assert isinstance(results[1], ValueError) and str(results[1]) == "bad job"
    # a result that is an exception goes to its own request only, without a retry
    results = _gather(Batcher(lambda jobs: [KeyError(j) if j == 2 else j for j in jobs]), [1, 2, 3])
    assert results[0] == 1 and results[2] == 3 and isinstance(results[1], KeyError)


# -- the lists --------------------------------------------------------------------------------------
def _one_by_one(jobs):
    out = []
    for job in jobs:
        found = _rank_users([job])[0]
        out.append(found() if callable(found) else found)
    return out


def _together(jobs):
    return [found() if callable(found) else found for found in _rank_users(jobs)]


@pytest.mark.parametrize("name", ["warp", "tied"])
def test_a_batch_gives_each_request_its_own_list(name, request):
    model = request.getfixturevalue(name)
    mask = np.zeros(model.n_items, np.uint8)
    mask[[0, 5, 9]] = 1
    rng = np.random.default_rng(0)
    jobs = [(model, None, int(u), int(rng.choice([3, 10])), mask if rng.random() < 0.3 else None,
             bool(rng.random() < 0.8)) for u in rng.integers(0, model.n_users, 40)]
    jobs.append(jobs[0])  # the same request twice in a batch
    for (items, scores), (alone_items, alone_scores), job in zip(_together(jobs), _one_by_one(jobs), jobs):
        np.testing.assert_array_equal(items, alone_items)
        np.testing.assert_array_equal(scores, alone_scores)  # the same bits, not only close
        _, batch_items, _ = top_k_block(model.score_users, np.array([job[2]]), job[3],
                                        model.train_ if job[5] else None, position=job[2], item_mask=job[4])
        np.testing.assert_array_equal(items, batch_items[0])  # the written file's list


def test_a_model_without_factors_is_ranked_its_own_way(data):
    model = ItemKNN().fit(data)
    jobs = [(model, None, u, 5, None, True) for u in (0, 3, 7)]
    for (items, _), u in zip(_together(jobs), (0, 3, 7)):
        np.testing.assert_array_equal(items, model.recommend(u, k=5)[0])


def test_close_calls_read_the_kept_grid_lists(tied):
    """Every user of the tied model is a close call: the first one scores its grid call and
    keeps its users' lists; the others, with or without filters, read them."""
    tied = copy.copy(tied)  # none kept yet: a copy keeps no derived data
    assert len(tied.grid_lists()) == 0
    mask = np.zeros(tied.n_items, np.uint8)
    mask[::3] = 1
    for k, exclude, item_mask in ((6, tied.train_, None), (6, None, mask), (single_user.GRID_KEEP + 5, None, None)):
        for user in range(0, tied.n_users, 7):
            items, scores = single_user.close_call(tied, user, k, exclude, item_mask, position=user)
            _, want_items, want_scores = top_k_block(tied.score_users, np.array([user]), k, exclude, position=user,
                                                     item_mask=item_mask)
            np.testing.assert_array_equal(items, want_items[0])
            np.testing.assert_array_equal(scores, want_scores[0])
    assert len(tied.grid_lists()) == -(-tied.n_users // 256)  # one grid call per block of users


# -- a real server under concurrent clients --------------------------------------------------------
def test_concurrent_clients_get_the_written_lists(warp, tmp_path):
    path = tmp_path / "model.npz"
    warp.save(path)
    out = tmp_path / "recs.tsv"
    write_recommendations(warp, out, k=5)
    written = pd.read_csv(out, sep="\t", header=None, names=["user", "item", "score", "rank"], dtype=str)
    expected = {u: g["item"].tolist() for u, g in written.groupby("user")}
    server = Server(path)
    try:
        users = [f"u{u}" for u in range(0, warp.n_users, 3)] + ["nobody"]
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(lambda u: server.get("/recommend", user=u, k=5), users * 2))
        for user, (status, answer) in zip(users * 2, answers):
            if user == "nobody":  # a bad request among good ones: refused alone
                assert status == 404 and set(answer) == {"error"}
                continue
            assert status == 200, answer
            assert [e["item"] for e in answer["items"]] == expected[user]
        status, described = server.get("/model")
        assert described["batching"]["requests"] == 2 * (len(users) - 1)
    finally:
        log = server.stop()
    assert "Traceback" not in log


def test_mapped_arrays_are_aligned_for_blas(warp, tmp_path):
    """numpy multiplies an unaligned array without BLAS (many times slower): an array the
    zip stores unaligned is mapped from an aligned .npy beside the private copy, and both
    go when the copy is removed."""
    from mrec_warp.serving.holder import read_model
    from mrec_warp.serving.mapped import remove_copy

    path = tmp_path / "model.npz"
    warp.save(path)
    served = read_model(str(path))
    try:
        assert set(served.description["memory_mapped"]) >= {"user_factors", "item_factors"}
        for name in ("user_factors", "item_factors", "item_bias"):
            array = getattr(served.model, f"{name}_")
            assert array.ctypes.data % 64 == 0 and not array.flags.writeable, name
            np.testing.assert_array_equal(array, getattr(warp, f"{name}_"))
        np.testing.assert_array_equal(served.model.recommend(np.arange(5), k=4)[0],
                                      warp.recommend(np.arange(5), k=4)[0])
    finally:
        remove_copy(served.copy_file)
    assert not list(Path(served.copy_file).parent.glob(Path(served.copy_file).name + "*"))
