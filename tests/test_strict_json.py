"""Every JSON the tool writes is RFC 8259: ``null``, never ``NaN`` or ``Infinity`` (issue 33.5).

The commands run on small files the tests make, and every JSON file and answer they leave
is parsed by a strict parser (``json.loads`` whose ``parse_constant`` refuses); the cases
that hold a number that is not finite (a diverged tuning trial, a family's defaults that
ran only as short trials, a score a model could not compute) are made on purpose.
"""
from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mrec_warp import strict_json
from mrec_warp.stages.trials import read_trial_row
from mrec_warp.stages.tune import TuneResult
from mrec_warp.workdir import WorkDir

from .conftest import run_ok
from .test_experiment import CONFIG, write_ratings


def strict_loads(text: str):
    """``json.loads`` that refuses NaN, Infinity and -Infinity, as jq and browsers do."""
    def refuse(constant):
        raise ValueError(f"not RFC 8259 JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


def test_strict_parser_refuses_what_python_writes_by_default():
    with pytest.raises(ValueError, match="NaN"):
        strict_loads(json.dumps({"score": float("nan")}))


def test_non_finite_numbers_are_null_and_every_other_byte_is_json_dumps():
    value = {"a": float("nan"), "b": [1.5, float("inf"), (-float("inf"), 2)], "c": {"d": np.float64("nan")},
             "e": "NaN", "f": None, "g": True, "h": 3}
    text = strict_json.dumps(value, indent=2, sort_keys=True)
    assert strict_loads(text) == {"a": None, "b": [1.5, None, [None, 2]], "c": {"d": None}, "e": "NaN",
                                  "f": None, "g": True, "h": 3}
    finite = {"z": [0.1, 1e-300, 2.5e30], "params": {"alpha": None, "factors": 64}, "name": "Zoë"}
    for options in ({}, {"indent": 2}, {"sort_keys": True}, {"ensure_ascii": False, "separators": (",", ":")}):
        assert strict_json.dumps(finite, **options) == json.dumps(finite, **options)
    assert strict_json.finite_or_null(finite) is finite  # nothing to replace: the value itself


def _strict_files(folder: Path) -> dict:
    """Every ``*.json`` under ``folder`` (hidden ones too), parsed strictly, by relative path."""
    return {str(path.relative_to(folder)): strict_loads(path.read_text(encoding="utf-8"))
            for path in sorted(folder.rglob("*.json"))}


@pytest.fixture
def ratings(tmp_path) -> Path:
    path = tmp_path / "ratings.tsv"
    write_ratings(path)
    return path


def test_prepare_train_info_evaluate_and_tune_write_strict_json(ratings, tmp_path, monkeypatch):
    split = tmp_path / "split"
    run_ok("prepare", ratings, "-o", split, "--min-rating", 2, "--duplicates", "max", "--seed", 1)
    model = tmp_path / "model.npz"
    run_ok("train", split / "train.tsv", "-o", model, "--model", "warp", "--epochs", 2, "--factors", 4)
    with np.load(model) as archive:  # a model file's metadata, as written
        meta = strict_loads(str(archive["__meta__"]))
    assert meta["class"] == "WARP"
    info = strict_loads(run_ok("info", model, "--json").stdout)
    assert info["family"] == "warp"
    run_ok("recommend", model, "-o", tmp_path / "recs.tsv", "-k", 5)
    run_ok("evaluate", "--train", split / "train.tsv", "--test", split / "test.tsv", "--recs", tmp_path / "recs.tsv",
           "-k", 5, "--json", tmp_path / "report.json")

    # tune: one trial diverges (its score is NaN), the defaults' score is made NaN as after
    # a time budget whose defaults ran only as short trials, and the work folder is kept
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps({"warp": {"factors": [4], "learning_rate": [0.05, 1e30]}}))
    monkeypatch.setattr(TuneResult, "defaults_score", lambda self, family=None: float("nan"))
    monkeypatch.setattr(WorkDir, "cleanup", lambda self, names: self.release())
    run_ok("tune", split / "train.tsv", "--grid", grid, "--max-epochs", 2, "-o", tmp_path / "best.json",
           "--workdir", tmp_path / "tune-work")

    found = _strict_files(tmp_path)
    assert {"split/summary.json", "report.json", "best.json", "tune-work/job.json"} <= set(found), sorted(found)
    assert found["best.json"]["defaults_score"] is None and math.isfinite(found["best.json"]["score"])
    trials = {name: row for name, row in found.items() if name.startswith("tune-work/trial-")}
    diverged = [row for row in trials.values() if row.get("error")]
    assert len(diverged) == 1 and diverged[0]["precision@10"] is None
    # a resumed tune reads a stored null score back as NaN, as the trial returned it
    name = next(name for name, row in trials.items() if row.get("error"))
    again = read_trial_row(tmp_path / name)
    assert math.isnan(again["precision@10"]) and again["error"] == diverged[0]["error"]


def test_an_experiment_writes_strict_json(tmp_path):
    write_ratings(tmp_path / "ratings.tsv")
    config = tmp_path / "exp.toml"
    config.write_text(CONFIG.replace('family = "warp"\nfactors = 4\nepochs = 3', 'family = "ease"\ntune = 2')
                      .replace("repeats = 2", "repeats = 1"))
    run_ok("experiment", config, "-o", tmp_path / "report", "--keep-work", "-q")
    found = _strict_files(tmp_path / "report")
    expected = {"reproduce.json", "tuned.json", "timing.json", ".mrec-warp-report.json", "random/report.json",
                "work/job.json"}
    assert expected <= set(found), sorted(found)
    assert any(name.startswith("work/run-") for name in found), sorted(found)


def test_serve_answers_are_strict_json_with_a_score_that_is_not_finite(tmp_path):
    pytest.importorskip("starlette")
    from starlette.requests import Request

    from mrec_warp.data.interactions import Interactions
    from mrec_warp.models import WARP
    from mrec_warp.serving.app import Service, status_text
    from mrec_warp.serving.holder import ModelHolder

    rows = [(f"u{u}", f"i{(u * 3 + j) % 20}") for u in range(30) for j in range(6)]
    path = tmp_path / "model.npz"
    data = Interactions.from_dataframe(pd.DataFrame(rows, columns=["user", "item"]))
    WARP(factors=4, epochs=2, random_state=0).fit(data).save(path)
    holder = ModelHolder(str(path))
    model = holder.current.model
    # a score the model could not compute, and one pushed to the floor
    model.recommend_history = lambda known, k, filter_items=None: (np.array([0, 1, 2]),
                                                                   np.array([np.nan, -np.inf, 0.5]))

    def request(method: str, target: str, body: bytes = b"") -> Request:
        async def receive():
            return {"type": "http.request", "body": body, "more_body": False}
        return Request({"type": "http", "method": method, "path": target, "query_string": b"",
                        "headers": [(b"content-length", str(len(body)).encode())]}, receive)

    async def answers():
        service = Service(holder)
        try:
            body = json.dumps({"items": ["i1", "i2"], "k": 3}).encode()
            return [await service.recommend_post(request("POST", "/recommend", body)),
                    await service.health(request("GET", "/health")),
                    await service.describe(request("GET", "/model"))]
        finally:
            service.foldins.shutdown(wait=True)

    loop = asyncio.new_event_loop()
    try:
        recommended, health, described = loop.run_until_complete(answers())
    finally:
        loop.close()
        holder.stop()
    listed = strict_loads(recommended.body.decode("utf-8"))["items"]
    assert [entry["score"] for entry in listed] == [None, None, 0.5]
    assert strict_loads(health.body.decode("utf-8"))["status"] == "ok"
    assert strict_loads(described.body.decode("utf-8"))
    assert strict_loads(status_text(None)) and strict_loads(status_text("a failed reload"))
