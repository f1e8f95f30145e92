"""WRMF fitted on partitions of a Dask cluster: the local fit's model, no worker holding the log.

Skipped when dask.distributed is not installed (the optional ``dask`` extra). The clusters
are small local ones: in-process workers for the equality tests, two worker processes for
the one that kills a worker.
"""
from __future__ import annotations

import logging
import os

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from mrec_warp.context import ExecutionContext  # noqa: E402
from mrec_warp.data.interactions import Interactions  # noqa: E402
from mrec_warp.errors import InputError  # noqa: E402
from mrec_warp.models import WRMF  # noqa: E402
from mrec_warp.models.partitioned_wrmf import block_bounds, fit_partitioned  # noqa: E402
from mrec_warp.progress import Progress  # noqa: E402
from mrec_warp.stages.info import info  # noqa: E402
from mrec_warp.stages.recommend import write_recommendations  # noqa: E402
from mrec_warp.workers import ClusterError  # noqa: E402

from .conftest import planted_low_rank  # noqa: E402
from .test_wrmf import _run, _values_matrix  # noqa: E402

PARAMS = dict(factors=8, alpha=0.5, regularization=3.0, random_state=4)


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None,
                                       silence_logs=logging.CRITICAL)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def plays():
    m = _values_matrix(planted_low_rank(n_users=300, n_items=120, per_user=15, seed=5))
    return Interactions(m, np.array([f"u{i}" for i in range(m.shape[0])]),
                        np.array([f"i{j}" for j in range(m.shape[1])]))


def _fit(client, data, partitions, **params):
    with ExecutionContext("dask", client=client) as context:
        return fit_partitioned(WRMF(**PARAMS, **params), data, context, partitions)


def _top10(model):
    items, _ = model.recommend(np.arange(model.n_users), k=10)
    return items


@pytest.mark.parametrize("partitions", [1, 2, 3])
def test_partitioned_fit_is_the_local_fit(client, plays, partitions):
    local = WRMF(**PARAMS, epochs=6).fit(plays)
    cluster = _fit(client, plays, partitions, epochs=6)
    diff = max(np.abs(cluster.user_factors_ - local.user_factors_).max(),
               np.abs(cluster.item_factors_ - local.item_factors_).max())
    scale = max(np.abs(local.user_factors_).max(), np.abs(local.item_factors_).max())
    if partitions == 1:  # one block: the Gram matrix is the local one, so is every bit
        assert diff == 0
    assert diff <= 1e-5 * scale  # float32 round-off (the Gram matrix summed in another order)
    same = (_top10(cluster) == _top10(local)).all(axis=1).mean()
    assert same >= 0.999
    assert cluster.epochs_done_ == local.epochs_done_ == 6
    assert cluster.train_.nnz == local.train_.nnz and np.array_equal(cluster.confidence_, local.confidence_)


@pytest.mark.parametrize("partitions", [2, 3])
def test_the_exact_gram_gives_the_local_bits(client, plays, partitions):
    local = WRMF(**PARAMS, epochs=4).fit(plays)
    with ExecutionContext("dask", client=client) as context:
        cluster = fit_partitioned(WRMF(**PARAMS, epochs=4), plays, context, partitions, exact_gram=True)
    assert np.array_equal(cluster.user_factors_, local.user_factors_)
    assert np.array_equal(cluster.item_factors_, local.item_factors_)


def test_early_stopping_and_refit_are_the_local_ones(client, plays):
    params = dict(max_epochs=8, patience=2, cg_steps=2)
    local = WRMF(**PARAMS, **params).fit(plays)
    cluster = _fit(client, plays, 3, **params)
    assert cluster.best_epoch_ == local.best_epoch_
    assert [h["phase"] for h in cluster.history_] == [h["phase"] for h in local.history_]
    np.testing.assert_allclose([h.get("val_precision@10", 0) for h in cluster.history_],
                               [h.get("val_precision@10", 0) for h in local.history_], atol=1e-3)
    np.testing.assert_allclose(cluster.user_factors_, local.user_factors_, atol=1e-4)
    assert (_top10(cluster) == _top10(local)).all(axis=1).mean() >= 0.999


def test_blocks_cover_every_row_once_and_are_never_empty():
    indptr = np.concatenate([[0], np.cumsum(np.r_[1000, np.ones(9, dtype=int)])])  # one heavy row
    for p in range(1, 11):
        b = block_bounds(indptr, p, 4)
        assert b[0] == 0 and b[-1] == 10 and (np.diff(b) > 0).all() and len(b) - 1 <= p


@pytest.mark.parametrize("partitions, match", [(0, "whole number >= 1"), (2.5, "whole number"),
                                               (121, "at most `partitions=120`")])
def test_a_bad_partition_count_is_one_line(client, plays, partitions, match):
    with pytest.raises(InputError, match=match):
        _fit(client, plays, partitions, epochs=1)


def test_partitions_need_dask(plays):
    with pytest.raises(InputError, match="Dask cluster"):
        fit_partitioned(WRMF(**PARAMS), plays, ExecutionContext("threads"), 2)


def test_settings_left_at_auto_take_the_fixed_defaults_with_a_note(client, plays, caplog):
    # choosing on a hold-out is a local fit's: on partitions, auto is the fixed defaults, said once
    params = {**PARAMS, "regularization": "auto", "epochs": 2}
    with caplog.at_level(logging.WARNING, logger="mrec_warp"), ExecutionContext("dask", client=client) as context:
        model = fit_partitioned(WRMF(**params), plays, context, 2)
    assert model.regularization_ == WRMF.FIXED["regularization"] and model.factors_ == 8
    assert any("regularization left at auto take the fixed defaults" in r.getMessage() for r in caplog.records)
    fixed = WRMF(**{**params, "regularization": WRMF.FIXED["regularization"]}).fit(plays)
    np.testing.assert_allclose(model.item_factors_, fixed.item_factors_, atol=1e-4)


def test_a_partitioned_fit_records_that_it_chose_nothing(client, plays, tmp_path):
    """`info` of a partitioned fit with settings left at auto: `select` false (no choice was made
    on a hold-out), the fixed values as the fitted ones; its parameters fit the same model locally."""
    params = {**PARAMS, "factors": "auto", "regularization": "auto", "epochs": 2}
    with ExecutionContext("dask", client=client) as context:
        model = fit_partitioned(WRMF(**params), plays, context, 2)
    model.save(tmp_path / "m.npz")
    shown = info(tmp_path / "m.npz").as_dict()
    assert shown["parameters"]["select"] is False
    assert shown["parameters"]["regularization"] == shown["parameters"]["factors"] == "auto"
    assert shown["fitted"]["factors_"] == WRMF.FIXED["factors"]
    assert shown["fitted"]["regularization_"] == WRMF.FIXED["regularization"]
    local = WRMF(**model.get_params()).fit(plays)  # no search: the fixed values, as on the cluster
    assert local.factors_ == model.factors_ and local.regularization_ == model.regularization_
    np.testing.assert_allclose(model.item_factors_, local.item_factors_, atol=1e-4)


def test_recommend_by_user_blocks_writes_the_local_bytes(client, plays, tmp_path):
    model = WRMF(**PARAMS, epochs=3).fit(plays)
    ref = tmp_path / "ref.tsv"
    write_recommendations(model, ref, k=5)
    for partitions in (1, 3):
        out = tmp_path / f"p{partitions}.tsv"
        with ExecutionContext("dask", client=client) as context:
            rows = write_recommendations(model, out, k=5, context=context, partitions=partitions, block_size=64)
        assert rows == 300 * 5 and out.read_bytes() == ref.read_bytes()
        assert not (tmp_path / f"p{partitions}.tsv.parts").exists()  # the parts went with the job
    with pytest.raises(InputError, match="does not combine with a list of users"):
        write_recommendations(model, tmp_path / "x.tsv", user_ids=["u1"], context=ExecutionContext("dask"),
                              partitions=2)


def test_cli_refuses_partitions_it_cannot_honour(tmp_path, plays):
    coo = plays.matrix.tocoo()
    (tmp_path / "plays.tsv").write_text("".join(f"u{r}\ti{c}\t{int(v)}\n" for r, c, v in zip(coo.row, coo.col,
                                                                                            coo.data)))
    args = ["train", "plays.tsv", "-o", "m.npz", "--partitions", "2"]
    for extra, said in ((["--model", "wrmf"], "needs --backend dask"),
                        (["--model", "warp", "--backend", "dask"], "--partitions is for --model wrmf")):
        result = _run(*args, *extra, cwd=tmp_path)
        assert result.returncode == 2 and said in result.stderr and "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


class _KillsAWorker(Progress):
    """Kills one worker process when the fit logs its second iteration."""

    def __init__(self, client) -> None:
        super().__init__()
        self.client, self.killed = client, False

    def log(self, message, *args, **kwargs) -> None:
        if "iteration   2" in message and not self.killed:
            self.killed = True
            victim = sorted(self.client.scheduler_info()["workers"])[-1]
            self.client.run(os._exit, 1, workers=[victim], on_error="ignore")


def test_a_worker_lost_mid_fit_stops_it_in_one_line(plays):
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                       dashboard_address="127.0.0.1:0", silence_logs=logging.CRITICAL)
    client = distributed.Client(cluster)
    try:
        progress = _KillsAWorker(client)
        with ExecutionContext("dask", client=client) as context, \
                pytest.raises(ClusterError, match="lost a Dask worker in the middle of the fit") as err:
            fit_partitioned(WRMF(**PARAMS, epochs=8), plays, context, 2, progress=progress)
        assert progress.killed and "\n" not in str(err.value)
    finally:
        client.close()
        cluster.close()
