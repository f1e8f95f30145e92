"""``mrec-warp serve``: a real server on a free port, every endpoint and every refusal."""
from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from mrec_warp.data.interactions import Interactions  # noqa: E402
from mrec_warp.models import WARP, WRMF, Factors, ItemKNN  # noqa: E402
from mrec_warp.stages.recommend import recommend, write_recommendations  # noqa: E402

#: Ids that break naive handling: spaces, a comma, '+', '&', '%', quotes, accents, a tab-free emoji.
ODD_USERS = ["u 1", "Zoë", "a,b", "x+y", "q&r=s", "50%", 'say "hi"', "\u00e9t\u00e9 \U0001F600"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ratings(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    users = ODD_USERS + [f"user{u}" for u in range(60)]
    items = ["item 0", "i,1", "i+2", "\u00e72", "i&4"] + [f"i{n}" for n in range(5, 80)]
    rows = [(u, items[i]) for u in users for i in rng.choice(len(items), 12, replace=False)]
    return pd.DataFrame(rows, columns=["user", "item"])


def _fit(cls=WARP, seed: int = 0, **params):
    model = cls(**params) if cls is not WARP else WARP(factors=8, epochs=4, random_state=seed)
    return model.fit(Interactions.from_dataframe(_ratings(seed)))


class Server:
    def __init__(self, model_path: Path, *args: str, tmpdir: Path = None) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = open(model_path.parent / f"server-{self.port}.log", "w+")
        # the server's private copies in a folder of the test's own, not the machine's temporary folder
        self.tmpdir = tmpdir or model_path.parent / f"tmp-{self.port}"
        self.tmpdir.mkdir(exist_ok=True)
        self.proc = subprocess.Popen([sys.executable, "-m", "mrec_warp", "serve", str(model_path), "--port",
                                      str(self.port), *args], stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "TMPDIR": str(self.tmpdir)})
        deadline = time.monotonic() + 120  # a start-up bound, not a timing assertion
        while True:
            try:
                if self.get("/health")[0] == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.log.seek(0)
                raise RuntimeError(f"server did not start: {self.log.read()}")
            time.sleep(0.2)

    def request(self, path: str, body=None, method=None, headers=None):
        req = urllib.request.Request(self.base + path, data=body, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.status, json.loads(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read().decode("utf-8"))

    def headers(self, path: str, body=None, method=None):
        """Status and headers of an answer, whatever its status."""
        req = urllib.request.Request(self.base + path, data=body, method=method)
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                resp.read()
                return resp.status, resp.headers
        except urllib.error.HTTPError as exc:
            exc.read()
            return exc.code, exc.headers

    def get(self, path: str, **params):
        query = urllib.parse.urlencode(params, doseq=True, quote_via=urllib.parse.quote)
        return self.request(path + (f"?{query}" if query else ""))

    def post(self, path: str, payload) -> tuple:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
        return self.request(path, body=body, method="POST", headers={"Content-Type": "application/json"})

    def wait_for(self, predicate, what: str, seconds: float = 60):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.2)
        raise AssertionError(f"waited {seconds} s for {what}")

    def stop_count(self) -> int:
        """How many workers have finished stopping so far (uvicorn's line in the log)."""
        self.log.flush()
        with open(self.log.name) as fh:
            return fh.read().count("Finished server process")

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.seek(0)
        text = self.log.read()
        self.log.close()
        return text


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("serve")
    model = _fit()
    path = folder / "model.npz"
    model.save(path)
    server = Server(path, "--max-k", "50", "--max-body", "4096")
    yield server, model, path
    log = server.stop()
    assert "Traceback" not in log


def _listed(answer):
    return [(entry["item"], entry["score"]) for entry in answer["items"]]


def test_known_users_get_the_written_lists(served, tmp_path):
    server, model, _ = served
    out = tmp_path / "recs.tsv"
    write_recommendations(model, out, k=7)
    written = pd.read_csv(out, sep="\t", header=None, names=["user", "item", "score", "rank"], dtype=str,
                          keep_default_na=False, quoting=3)
    for user in ODD_USERS + ["user0", "user59"]:
        status, answer = server.get("/recommend", user=user, k=7)
        assert status == 200, answer
        items = [item for item, _ in _listed(answer)]
        assert items == written.loc[written["user"] == user, "item"].tolist()
        scores = np.array([score for _, score in _listed(answer)])
        np.testing.assert_allclose(scores, written.loc[written["user"] == user, "score"].astype(float), rtol=1e-4)
        assert not set(items) & set(model.item_ids[model.train_[model.user_indices(user)[0]].indices])


def test_an_unknown_user_gets_the_fallback_list_when_asked(served, tmp_path):
    """The default answer stays a 404 (naming the way to ask for the fallback); with
    unknown_users=popular, the list recommend --unknown-users popular writes, marked."""
    server, model, path = served
    status, answer = server.get("/recommend", user="new é 😀", k=5)
    assert status == 404 and "ask with unknown_users=popular" in answer["error"]
    users = tmp_path / "users.txt"
    users.write_text("u 1\nnew é 😀\n", encoding="utf-8")
    out = tmp_path / "recs.tsv"
    recommend(path, out, k=5, users=users, unknown_users="popular")
    written = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]
    status, answer = server.get("/recommend", user="new é 😀", k=5, unknown_users="popular")
    assert status == 200 and answer["fallback"] == "popular", answer
    assert [(item, f"{score:.6g}") for item, score in _listed(answer)] == \
        [(row[1], row[2]) for row in written if row[0] == "new é 😀" and row[4] == "popular"]
    frame = model.recommend_frame(["new é 😀"], k=5, unknown_users="popular")
    assert [item for item, _ in _listed(answer)] == frame["item"].tolist()
    top = _listed(answer)[0][0]
    status, filtered = server.get("/recommend", user="other new", k=5, unknown_users="popular", exclude=top)
    assert status == 200 and top not in [item for item, _ in _listed(filtered)]
    status, known = server.get("/recommend", user="u 1", k=5, unknown_users="popular")
    assert status == 200 and "fallback" not in known and known == server.get("/recommend", user="u 1", k=5)[1]
    # a known id written otherwise is that user, never a newcomer; skip fits a batch, not one user
    status, answer = server.get("/recommend", user="u 1 ", k=5, unknown_users="popular")
    assert status == 404 and "did you mean 'u 1'" in answer["error"]
    status, answer = server.get("/recommend", user="nobody", unknown_users="skip")
    assert status == 400 and "unknown_users must be refuse or popular, got 'skip'" in answer["error"]


def test_a_server_can_answer_every_unknown_user_with_the_fallback(tmp_path):
    path = tmp_path / "model.npz"
    model = _fit(seed=1)
    model.save(path)
    server = Server(path, "--unknown-users", "popular")
    try:
        status, answer = server.get("/recommend", user="newcomer", k=4)
        assert status == 200 and answer["fallback"] == "popular"
        expected = model.recommend_frame(["newcomer"], k=4, unknown_users="popular")["item"].tolist()
        assert [item for item, _ in _listed(answer)] == expected
        status, refused = server.get("/recommend", user="newcomer", k=4, unknown_users="refuse")
        assert status == 404 and "unknown user" in refused["error"]
        assert server.get("/model")[1]["unknown_users"] == "popular"
    finally:
        assert "Traceback" not in server.stop()


def test_filters_and_seen_items(served):
    server, model, _ = served
    user = ODD_USERS[0]
    _, full = server.get("/recommend", user=user, k=10)
    top = [item for item, _ in _listed(full)]
    _, without = server.get("/recommend", user=user, k=10, exclude=top[:2])
    assert [item for item, _ in _listed(without)][:8] == top[2:]
    allowed = ["i,1", "i+2", "i7", "i9"]
    _, only = server.get("/recommend", user=user, k=10, include=allowed)
    seen = set(model.item_ids[model.train_[model.user_indices(user)[0]].indices])
    assert {item for item, _ in _listed(only)} == set(allowed) - seen
    _, with_seen = server.get("/recommend", user=user, k=10, exclude_seen="false")
    expected, _ = model.recommend(model.user_indices(user)[0], k=10, exclude=None)
    assert [item for item, _ in _listed(with_seen)] == model.item_ids[expected].tolist()


def test_anonymous_history_is_folded_in(served):
    server, model, _ = served
    history = ["item 0", "i+2", "i40", "i40", "not an item"]
    status, answer = server.post("/recommend", {"items": history, "k": 6})
    assert status == 200, answer
    assert answer["unknown_items"] == 1
    folded = copy.deepcopy(model).fold_in([("new user", i) for i in history])
    expected, _ = folded.recommend(folded.user_indices("new user")[0], k=6)
    assert [item for item, _ in _listed(answer)] == folded.item_ids[expected].tolist()
    status, filtered = server.post("/recommend", {"items": history[:3], "k": 6, "exclude": ["i7"]})
    assert status == 200 and "i7" not in [item for item, _ in _listed(filtered)]


def test_an_empty_allow_list_allows_nothing(served):
    """"include": [] is a client's empty in-stock list: nothing is allowed, the list is empty
    (not the whole catalogue, as if no allow-list were given)."""
    server, _, _ = served
    status, answer = server.post("/recommend", {"items": ["item 0", "i+2"], "k": 6, "include": []})
    assert status == 200 and answer["items"] == [], answer
    status, answer = server.post("/recommend", {"items": ["item 0", "i+2"], "k": 6, "include": ["i7"]})
    assert status == 200 and [item for item, _ in _listed(answer)] == ["i7"]
    status, answer = server.post("/recommend", {"items": ["item 0"], "k": 6, "include": [], "exclude": ["i7"]})
    assert status == 200 and answer["items"] == []


def test_similar_items(served):
    server, model, _ = served
    status, answer = server.get("/similar", item="i,1", k=4)
    assert status == 200, answer
    frame = model.similar(["i,1"], k=4)
    assert [item for item, _ in _listed(answer)] == frame["similar_item"].tolist()


def test_health_and_model(served):
    server, model, path = served
    status, health = server.get("/health")
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    assert status == 200 and health["status"] == "ok" and health["sha256"] == sha
    status, described = server.get("/model")
    assert status == 200
    assert described["family"] == "warp" and described["items"] == model.n_items
    assert described["users"] == model.n_users and described["sha256"] == sha
    assert described["parameters"]["factors"] == 8 and described["reload_error"] is None
    assert described["trained"] is None  # the file format keeps no training date; nothing made up


@pytest.mark.parametrize("request_args, status, phrase", [
    (("/recommend", {"user": "zoë", "k": 5}), 404, "did you mean 'Zoë'"),
    (("/recommend", {"user": "nobody"}), 404, "unknown user"),
    (("/recommend", {"user": "u 1", "k": 0}), 400, "k must be from 1 to 50"),
    (("/recommend", {"user": "u 1", "k": 51}), 400, "k must be from 1 to 50"),
    (("/recommend", {"user": "u 1", "k": "ten"}), 400, "whole number"),
    (("/recommend", {"user": "u 1", "kk": 5}), 400, "unknown parameter 'kk'"),
    (("/recommend", {"user": ["u 1", "Zoë"]}), 400, "give it once"),
    (("/recommend", {"k": 5}), 400, "give the user"),
    (("/recommend", {"user": "u 1", "exclude": "I7"}), 400, "unknown item"),
    (("/recommend", {"user": "u 1", "exclude_seen": "maybe"}), 400, "true or false"),
    (("/similar", {"item": "i 1"}), 404, "unknown item"),
    (("/nowhere", {}), 404, "no endpoint"),
    (("/recommend/", {"user": "u 1"}), 404, "no endpoint /recommend/"),  # not a 307 with an empty body
    (("/recommend", {"user": "u  1"}), 404, "did you mean 'u 1'"),  # a doubled inner space
    (("/recommend", {"user": "ZOË "}), 404, "did you mean 'Zoë'"),
])
def test_bad_queries_get_one_json_line(served, request_args, status, phrase):
    server, _, _ = served
    got, answer = server.get(request_args[0], **request_args[1])
    assert got == status and set(answer) == {"error"}
    assert phrase in answer["error"] and "\n" not in answer["error"] and "Traceback" not in answer["error"]


@pytest.mark.parametrize("body, status, phrase", [
    (b'{"items": ["i7", ', 400, "malformed JSON"),
    (b'\xff\xfe{}', 400, "not UTF-8"),
    (b'["i7"]', 400, "must be a JSON object"),
    (b'{"items": []}', 400, "is empty"),
    (b'{"k": 3}', 400, "needs 'items'"),
    (b'{"items": [7]}', 400, 'ids are strings, write "7"'),
    (b'{"items": ["i7"], "k": 2.5}', 400, "whole number"),
    (b'{"items": ["i7"], "k": true}', 400, "whole number"),
    (b'{"items": ["i7"], "items": ["i8"]}', 400, "twice"),
    (b'{"items": ["i7"], "user": "u 1"}', 400, "unknown field 'user'"),
    (b'{"items": ["ITEM 0"]}', 400, "none of the 1 history item(s)"),
    (json.dumps({"items": ["i7"] * 2000}).encode(), 413, "most this server takes is 4,096"),
    # paths that once gave a 500: a lone surrogate, deep nesting, odd types, huge numbers
    (b'{"items": ["\\ud800"], "k": 2}', 400, "must be valid UTF-8 text"),
    (b'{"items": ["i7"], "exclude": ["\\udfff"], "k": 2}', 400, "'exclude' holds \"\\udfff\""),
    (b'{"items": ["i7"], "include": ["a\\ud800b"]}', 400, "must be valid UTF-8 text"),
    (b'{"items": ["i7"], "\\ud800": 1}', 400, "unknown field"),
    (b"[" * 1000, 400, "nested too deeply"),
    (b'{"items": ' + b"[" * 1000 + b"]" * 1000 + b"}", 400, "nested too deeply"),
    (b'"i7"', 400, "must be a JSON object"),
    (b'null', 400, "must be a JSON object"),
    (b'17', 400, "must be a JSON object"),
    (b'{"items": "i7"}', 400, "must be a list of item ids, got a JSON str"),
    (b'{"items": {"i7": 1}}', 400, "must be a list of item ids, got a JSON dict"),
    (b'{"items": [["i7"]]}', 400, "ids are strings, one string per id"),
    (b'{"items": [{"id": "i7"}]}', 400, "ids are strings, one string per id"),
    (b'{"items": [null]}', 400, "ids are strings"),
    (b'{"items": [' + b"9" * 400 + b']}', 400, "ids are strings"),
    (b'{"items": ["i7"], "k": ' + b"9" * 400 + b'}', 400, "k must be from 1 to 50"),
    (b'{"items": ["i7"], "k": 1e400}', 400, "whole number"),
    (b'{"items": ["i7"], "k": NaN}', 400, "whole number"),
    (b'{"items": ["i7"], "k": [3]}', 400, "whole number"),
    (b'{"items": ["i7"], "include": null}', 400, "'include' is null"),  # never "no allow-list"
    (b'{"items": ["i7"], "exclude": null}', 400, "'exclude' is null"),
    (b'{"items": ["i7"], "k": null}', 400, "'k' is null"),
    (b'{"items": null}', 400, "'items' is null"),
])
def test_bad_bodies_get_one_json_line(served, body, status, phrase):
    server, _, _ = served
    got, answer = server.post("/recommend", body)
    assert got == status and set(answer) == {"error"}
    assert phrase in answer["error"] and "\n" not in answer["error"]


def test_a_number_too_long_to_read_is_a_400():
    """Over Python's 4,300-digit int limit (a body above this module's --max-body 4096)."""
    from mrec_warp.serving.requests import BadRequest, parse_body

    with pytest.raises(BadRequest, match="cannot be read") as caught:
        parse_body(b'{"items": ["i7"], "k": ' + b"9" * 5000 + b"}", ("items", "k"))
    assert caught.value.status == 400


def test_every_answer_carries_the_checksum(served):
    server, _, path = served
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    for request in [("/health",), ("/model",), ("/recommend?user=u+1&k=3",), ("/similar?item=i7&k=2",),
                    ("/recommend?user=nobody",), ("/recommend?k=0",), ("/nowhere",), ("/recommend/",),
                    ("/model", None, "DELETE"), ("/recommend", b'{"items": ["\\ud800"]}', "POST"),
                    ("/recommend", b"[" * 1000, "POST")]:
        status, headers = server.headers(*request)
        assert status < 500 and headers["X-Model-SHA256"] == sha, request


def test_plus_in_a_query_is_a_space(served):
    server, _, _ = served
    got, answer = server.request("/recommend?user=x+y")  # unescaped '+': form encoding reads a space
    assert got == 404 and "write '+' as %2B" in answer["error"]
    assert server.request("/recommend?user=x%2By")[0] == 200


def test_arrays_are_mapped_from_a_private_copy(tmp_path):
    path = tmp_path / "model.npz"
    model = _fit(seed=3)
    model.save(path)
    server = Server(path)
    try:
        described = server.get("/model")[1]
        assert set(described["memory_mapped"]) >= {"user_factors", "item_factors"}
        before = server.get("/recommend", user="Zoë", k=5)[1]
        with open(path, "r+b") as fh:  # overwritten in place (as cp does): the server must not see it
            fh.write(b"\0" * path.stat().st_size)
        assert server.get("/recommend", user="Zoë", k=5)[1] == before
        assert server.get("/similar", item="i7", k=3)[0] == 200
    finally:
        log = server.stop()
    assert "Traceback" not in log


def test_wrong_method(served):
    server, _, _ = served
    got, answer = server.request("/model", method="DELETE")
    assert got == 405 and "not allowed" in answer["error"]


def test_a_bad_model_file_is_refused_at_start(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a model")
    run = subprocess.run([sys.executable, "-m", "mrec_warp", "serve", str(bad), "--port", str(_free_port())],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "bad.npz" in lines[0] and "Traceback" not in run.stderr


def test_a_fallback_from_a_model_without_training_interactions_is_refused_at_start(tmp_path):
    path = tmp_path / "factors.npz"
    rng = np.random.default_rng(0)
    Factors.from_arrays(rng.normal(size=(3, 2)), rng.normal(size=(4, 2)), ["a", "b", "c"], list("wxyz")).save(path)
    run = subprocess.run([sys.executable, "-m", "mrec_warp", "serve", str(path), "--port", str(_free_port()),
                          "--unknown-users", "popular"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "stores no training interactions" in lines[0] and "--unknown-users refuse" in lines[0]


def _replace(path: Path, source: Path) -> None:
    """Write ``source``'s bytes over ``path`` atomically (as ``save`` writes a model)."""
    tmp = path.with_suffix(".tmp")
    shutil.copyfile(source, tmp)
    os.replace(tmp, path)


@pytest.mark.parametrize("how", ["reload", "sighup"])
def test_reload_keeps_the_old_model_on_a_bad_file(tmp_path, how):
    first, second = tmp_path / "first.npz", tmp_path / "second.npz"
    _fit(seed=0).save(first)
    _fit(WRMF, seed=1, factors=4, epochs=2, random_state=1).save(second)
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"PK\x03\x04 truncated")
    live = tmp_path / "live.npz"
    shutil.copyfile(first, live)
    server = Server(live, *(["--reload"] if how == "reload" else []))
    try:
        sha_first = server.get("/health")[1]["sha256"]

        def nudge():
            if how == "sighup":
                server.proc.send_signal(signal.SIGHUP)

        _replace(live, garbage)
        nudge()
        server.wait_for(lambda: server.get("/model")[1]["reload_error"] is not None, "the failed reload")
        assert server.get("/health")[1]["sha256"] == sha_first
        assert "live.npz" in server.get("/model")[1]["reload_error"]
        assert server.get("/recommend", user="u 1", k=3)[0] == 200  # still answering from the old model
        _replace(live, second)
        nudge()
        sha_second = hashlib.sha256(second.read_bytes()).hexdigest()
        server.wait_for(lambda: server.get("/health")[1]["sha256"] == sha_second, "the new model")
        assert server.get("/model")[1]["family"] == "wrmf"
    finally:
        log = server.stop()
    assert "still serving" in log and "Traceback" not in log


def test_workers_keep_serving_through_sighup_with_a_bad_file(tmp_path):
    first, second = tmp_path / "first.npz", tmp_path / "second.npz"
    _fit(seed=0).save(first)
    _fit(seed=5).save(second)
    live = tmp_path / "live.npz"
    shutil.copyfile(first, live)
    server = Server(live, "--workers", "2", "--expose-path")
    try:
        sha_first = server.get("/health")[1]["sha256"]
        garbage = tmp_path / "garbage.npz"
        garbage.write_bytes(b"junk")
        _replace(live, garbage)
        server.proc.send_signal(signal.SIGHUP)  # the supervisor checks the file first: junk restarts nothing
        for _ in range(20):
            status, health = server.get("/health")
            assert status == 200 and health["sha256"] == sha_first
            time.sleep(0.2)
        # every worker shows the supervisor's failed reload (the workers never loaded the junk)
        errors = {(d["pid"], d["reload_error"]) for d in (server.get("/model")[1] for _ in range(10))}
        assert all(error is not None and "live.npz" in error and "SIGHUP" in error for _, error in errors), errors
        _replace(live, second)
        server.proc.send_signal(signal.SIGHUP)
        sha_second = hashlib.sha256(second.read_bytes()).hexdigest()
        server.wait_for(lambda: all(server.get("/health")[1]["sha256"] == sha_second for _ in range(4)),
                        "every worker on the new model", seconds=120)
        assert all(server.get("/model")[1]["reload_error"] is None for _ in range(6))  # the good reload clears it
    finally:
        log = server.stop()
    assert "SIGHUP" in log and "still serving" in log and "Traceback" not in log


def test_a_worker_started_on_a_bad_file_serves_the_last_good_model(tmp_path):
    live, garbage = tmp_path / "live.npz", tmp_path / "garbage.npz"
    _fit(seed=0).save(live)
    garbage.write_bytes(b"junk")
    server = Server(live, "--workers", "2", "--expose-path")
    try:
        sha = server.get("/health")[1]["sha256"]
        first = server.get("/model")[1]["pid"]
        _replace(live, garbage)
        os.kill(first, signal.SIGKILL)  # uvicorn starts a replacement, which finds junk
        seen = set()

        def replaced():
            status, described = server.get("/model")
            assert status == 200 and described["sha256"] == sha
            seen.add(described["pid"])
            return len(seen - {first}) >= 2  # the other original worker and the replacement

        server.wait_for(replaced, "a replacement worker", seconds=120)
    finally:
        log = server.stop()
    assert "serving the last good model" in log and "Traceback" not in log


def test_several_workers_answer_alike(tmp_path):
    path = tmp_path / "model.npz"
    model = _fit(ItemKNN, seed=2)
    model.save(path)
    server = Server(path, "--workers", "2")
    try:
        answers = [server.get("/recommend", user="Zoë", k=5) for _ in range(6)]
        expected, _ = model.recommend(model.user_indices("Zoë")[0], k=5)
        for status, answer in answers:
            assert status == 200 and [item for item, _ in _listed(answer)] == model.item_ids[expected].tolist()
        assert server.post("/recommend", {"items": ["i7", "i9"], "k": 3})[0] == 200
    finally:
        log = server.stop()
    assert "Traceback" not in log


def test_ann_of_a_model_without_item_vectors_is_refused_up_front(tmp_path):
    """Not "build it first: mrec-warp index": index refuses such a model too (train --ann's message)."""
    from mrec_warp.models import ann
    from mrec_warp.models.popularity import Popularity

    path = tmp_path / "pop.npz"
    model = Popularity().fit(Interactions.from_dataframe(_ratings()))
    model.save(path)
    run = subprocess.run([sys.executable, "-m", "mrec_warp", "serve", str(path), "--ann", "--port", str(_free_port())],
                         capture_output=True, text=True, timeout=120)
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert run.returncode == 2 and len(lines) == 1, run.stderr
    assert "needs a factor model" in lines[0] and "popularity" in lines[0] and "build it first" not in lines[0]
    with pytest.raises(ValueError, match="needs a factor model"):  # recommend --ann's way in
        ann.open_for(model, path)


def test_keep_alive_clients_are_not_dropped_by_a_worker_swap(tmp_path):
    """SIGHUP replaces the workers one by one: an old worker answers its open connections
    with 'Connection: close' before it stops, so a keep-alive client moves to a new worker
    without a reset, and a normal swap logs no error."""
    import http.client
    import threading

    path = tmp_path / "model.npz"
    _fit(seed=0).save(path)
    server = Server(path, "--workers", "2", "--expose-path")
    errors, closes, answers = [], [], []
    stop = threading.Event()

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        while not stop.is_set():
            try:
                conn.request("GET", "/recommend?user=u+1&k=3")
                resp = conn.getresponse()
                resp.read()
                answers.append(resp.status)
                if resp.getheader("Connection", "").lower() == "close":
                    closes.append(1)  # http.client opens a new connection for the next request
            except (OSError, http.client.HTTPException) as exc:
                errors.append(repr(exc))
                conn.close()

    try:
        before = {server.get("/model")[1]["pid"] for _ in range(8)}
        threads = [threading.Thread(target=client) for _ in range(3)]
        for thread in threads:
            thread.start()
        server.proc.send_signal(signal.SIGHUP)
        server.wait_for(lambda: not ({server.get("/model")[1]["pid"] for _ in range(8)} & before),
                        "every worker replaced", seconds=120)
        server.wait_for(lambda: server.stop_count() >= 2, "both old workers stopped", seconds=60)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        log = server.stop()
    assert errors == [] and set(answers) == {200}
    assert closes, "no answer of a stopping worker said 'Connection: close'"
    assert "Error" not in log and "Traceback" not in log and log.count("stopping (SIGTERM)") >= 2


def _swap_link(path: Path, target) -> None:
    """Make ``path`` a symbolic link to ``target``, atomically (a reload sees the old or the new)."""
    tmp = path.with_name(path.name + ".link")
    tmp.symlink_to(target)
    os.replace(tmp, path)


def test_a_fifo_or_device_at_the_model_path_never_hangs_the_server(tmp_path):
    """serve refuses a FIFO or /dev/zero at start in one line; a reload (the watcher and
    SIGHUP) onto either names the reason and keeps serving, a good model after them still
    loads, and SIGTERM still ends the server."""
    good, second = tmp_path / "good.npz", tmp_path / "second.npz"
    _fit(seed=0).save(good)
    _fit(seed=4).save(second)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for bad, reason in ((fifo, "is a pipe"), (Path("/dev/zero"), "character device")):
        start = tmp_path / "start.npz"
        _swap_link(start, bad)
        run = subprocess.run([sys.executable, "-m", "mrec_warp", "serve", str(start), "--port", str(_free_port())],
                             capture_output=True, text=True, timeout=60)
        lines = [line for line in run.stderr.splitlines() if line.strip()]
        assert run.returncode == 2 and len(lines) == 1 and reason in lines[0], run.stderr
    live = tmp_path / "live.npz"
    shutil.copyfile(good, live)
    server = Server(live, "--reload")
    try:
        sha = server.get("/health")[1]["sha256"]
        for bad, reason in ((Path("/dev/zero"), "character device"), (fifo, "is a pipe")):
            _swap_link(live, bad)
            server.proc.send_signal(signal.SIGHUP)
            server.wait_for(lambda reason=reason: reason in (server.get("/model")[1]["reload_error"] or ""), f"refused: {reason}")
            assert server.get("/health")[1]["sha256"] == sha
            assert server.get("/recommend", user="u 1", k=3)[0] == 200
        _swap_link(live, second)
        sha_second = hashlib.sha256(second.read_bytes()).hexdigest()
        server.wait_for(lambda: server.get("/health")[1]["sha256"] == sha_second, "the good model after them")
        assert server.get("/model")[1]["reload_error"] is None
        started = time.monotonic()
        log = server.stop()
        assert server.proc.returncode == 0 and time.monotonic() - started < 20, log
    finally:
        if server.proc.poll() is None:
            server.stop()
    assert "Traceback" not in log


# -- bounds on what clients can hold: connections, headers, histories --------------------------------------
def _half_open(port: int, n: int) -> list:
    """``n`` connections that start a request and never finish its headers (slowloris)."""
    held = []
    for _ in range(n):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        held.append(sock)
    return held


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (EOF, possibly after its 408 answer)."""
    sock.settimeout(0.05)
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return True
    except socket.timeout:
        return False
    except OSError:  # reset
        return True


def test_slowloris_connections_are_bounded_and_timed_out(tmp_path):
    """300 half-open connections against a limit of 20: /health keeps answering at once (the
    longest-waiting half-open connection makes room), every held connection is closed by the
    header timeout, and the log stays a few lines."""
    path = tmp_path / "model.npz"
    _fit(seed=0).save(path)
    server = Server(path, "--max-connections", "20", "--header-timeout", "2")
    held = []
    try:
        held = _half_open(server.port, 300)
        for _ in range(5):
            started = time.monotonic()
            assert server.get("/health")[0] == 200
            assert time.monotonic() - started < 5
        described = server.get("/model")[1]
        assert described["connections"]["max"] == 20 and described["connections"]["evicted"] >= 250
        deadline = time.monotonic() + 30  # the header timeout (2 s) closes what eviction left open
        open_ones = held
        while open_ones and time.monotonic() < deadline:
            open_ones = [sock for sock in open_ones if not _closed_by_server(sock)]
            time.sleep(0.2)
        assert not open_ones, f"{len(open_ones)} half-open connections still open"
        late = _half_open(server.port, 1)[0]
        late.settimeout(10)
        answer = late.recv(4096)  # the header timeout answers a client that began a request
        assert answer.startswith(b"HTTP/1.1 408") and b"did not come within 2 s" in answer
        held.append(late)
        assert server.get("/health")[0] == 200
    finally:
        for sock in held:
            sock.close()
        log = server.stop()
    assert "Traceback" not in log and len(log) < 20_000, log[-2000:]


def test_failed_accepts_are_logged_once_then_summed_up(caplog):
    """EMFILE at accept() used to log a traceback per attempt (274 MB in 35 s): one line,
    then at most one line per interval with the count in between."""
    import asyncio
    import errno as errno_

    from mrec_warp.serving.connections import _AcceptErrors

    loop = asyncio.new_event_loop()
    try:
        handler = _AcceptErrors(loop, every=3600)
        error = OSError(errno_.EMFILE, os.strerror(errno_.EMFILE))
        with caplog.at_level("ERROR", logger="mrec_warp.serve"):
            for _ in range(10_000):
                handler(loop, {"message": "socket.accept() out of system resource", "exception": error})
        lines = [r for r in caplog.records if r.name == "mrec_warp.serve"]
        assert len(lines) == 1 and "Too many open files" in lines[0].getMessage()
        assert lines[0].exc_info is None and "--max-connections" in lines[0].getMessage()
        handler.last -= 7200  # an interval later: one line with the count
        with caplog.at_level("ERROR", logger="mrec_warp.serve"):
            handler(loop, {"message": "socket.accept() out of system resource", "exception": error})
        assert "9999 more since the last line" in caplog.records[-1].getMessage()
    finally:
        loop.close()


def test_posted_histories_fold_in_off_the_loop_a_few_at_once_and_are_capped(tmp_path):
    """Six slow fold-ins at once: /health answers meanwhile, at most --foldin-threads run at
    a time, each answer is the fold-in's; a history over --max-history is a 413."""
    import asyncio
    import threading

    from starlette.requests import Request

    from mrec_warp.serving.app import Service
    from mrec_warp.serving.holder import ModelHolder
    from mrec_warp.serving.requests import BadRequest

    path = tmp_path / "model.npz"
    _fit(seed=0).save(path)
    holder = ModelHolder(str(path))
    model = holder.current.model
    real, lock, running, peak = model.recommend_history, threading.Lock(), [0], [0]

    def slow(*args, **kwargs):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        try:
            time.sleep(0.3)
            return real(*args, **kwargs)
        finally:
            with lock:
                running[0] -= 1

    model.recommend_history = slow

    def request(body: bytes) -> Request:
        async def receive():
            return {"type": "http.request", "body": body, "more_body": False}
        return Request({"type": "http", "method": "POST", "path": "/recommend", "query_string": b"",
                        "headers": [(b"content-length", str(len(body)).encode())]}, receive)

    async def scenario():
        service = Service(holder, max_history=5, foldin_threads=2)
        body = json.dumps({"items": ["item 0", "i+2", "i7"], "k": 4}).encode()
        posts = [asyncio.ensure_future(service.recommend_post(request(body))) for _ in range(6)]
        await asyncio.sleep(0.05)
        started = time.monotonic()
        health = await service.health(request(b""))
        waited = time.monotonic() - started
        answers = await asyncio.gather(*posts)
        with pytest.raises(BadRequest) as info:
            await service.recommend_post(request(json.dumps({"items": [f"i{n}" for n in range(6)]}).encode()))
        service.foldins.shutdown()
        return health, waited, answers, info.value

    try:
        health, waited, answers, refused = asyncio.run(scenario())
    finally:
        holder.stop()
    assert health.status_code == 200 and waited < 0.2  # six fold-ins of 0.3 s were under way
    assert peak[0] == 2
    expected = [model.item_ids[i] for i in real(model.item_indices(["item 0", "i+2", "i7"]), k=4)[0]]
    assert all([e["item"] for e in json.loads(a.body)["items"]] == expected for a in answers)
    assert refused.status == 413 and "--max-history" in refused.message and "6 items" in refused.message


def test_model_description_shows_no_path_or_pid_unless_asked(served, tmp_path):
    server, _, path = served
    described = server.get("/model")[1]
    assert described["file"] == "model.npz" and "pid" not in described
    assert str(path.parent) not in json.dumps(described)
    exposed = tmp_path / "exposed.npz"
    _fit(seed=0).save(exposed)
    other = Server(exposed, "--expose-path")
    try:
        described = other.get("/model")[1]
        assert described["file"] == str(exposed.resolve()) and described["pid"] == other.proc.pid
    finally:
        other.stop()


def test_workers_show_the_newest_reload_error(tmp_path):
    """With --workers 2 --reload, each worker's own failed reload of a bad file is older than
    the supervisor's SIGHUP reload after it: /model shows the SIGHUP one, not the stale one,
    and no folder of the model path."""
    live, good = tmp_path / "live.npz", tmp_path / "good.npz"
    _fit(seed=0).save(good)
    shutil.copyfile(good, live)
    server = Server(live, "--workers", "2", "--reload")
    try:
        junk = tmp_path / "junk.npz"
        junk.write_bytes(b"junk")
        _replace(live, junk)
        server.wait_for(lambda: all("file changed" in (server.get("/model")[1]["reload_error"] or "")
                                    for _ in range(6)), "each worker's own failed reload", seconds=120)
        time.sleep(1.1)  # the SIGHUP reload's time is later, also at a second's resolution
        server.proc.send_signal(signal.SIGHUP)
        server.wait_for(lambda: all("SIGHUP" in (server.get("/model")[1]["reload_error"] or "")
                                    for _ in range(6)), "the supervisor's newer failure on every worker")
        error = server.get("/model")[1]["reload_error"]
        assert "live.npz" in error and str(tmp_path) not in error
    finally:
        log = server.stop()
    assert "Traceback" not in log


def test_private_copies_leave_nothing_on_a_full_disk(tmp_path):
    """The private copy of the model cannot be written (a small filesystem as the temporary
    folder): no partial .tmp is left holding the free space, and the server serves from memory."""
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(small)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a small filesystem here")
    try:
        path = tmp_path / "model.npz"
        _fit(seed=0).save(path)
        assert path.stat().st_size > 4096
        server = Server(path, tmpdir=small)
        try:
            assert server.get("/recommend", user="u 1", k=3)[0] == 200
            assert server.get("/model")[1]["memory_mapped"] == {}
            leftovers = [p.name for p in small.rglob("*") if p.is_file()]
            assert not [n for n in leftovers if n.endswith(".tmp") or n.endswith(".npz")], leftovers
        finally:
            log = server.stop()
        assert "Traceback" not in log
    finally:
        subprocess.run(["umount", str(small)], check=False)


def test_stale_private_copies_are_swept_by_name_and_pid(tmp_path, monkeypatch):
    """What killed servers left (a .tmp, a lease, a copy no live process holds, its aligned
    arrays) goes at the next copy; a copy a live process holds stays."""
    import tempfile

    from mrec_warp.files import host_name
    from mrec_warp.serving import mapped

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folder = Path(mapped._folder())
    folder.mkdir(mode=0o700)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale, held = "a" * 64 + ".npz", "b" * 64 + ".npz"
    names = {stale: b"x", f"{stale}.item_factors.npy": b"x", f"{stale}.{dead.pid}.tmp": b"x" * 1000,
             f"{stale}.held-by-{dead.pid}@{host_name()}": b"", held: b"y",
             f"{held}.held-by-{os.getpid()}@{host_name()}": b"", f"{held}.user_factors.npy.{dead.pid}.tmp": b"x",
             "notes.txt": b"not ours"}
    for name, data in names.items():
        (folder / name).write_bytes(data)
    copy = mapped.private_copy(b"model bytes", "c" * 64)
    assert copy is not None and Path(copy).read_bytes() == b"model bytes"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [held, f"{held}.held-by-{os.getpid()}@{host_name()}", "notes.txt", Path(copy).name,
         f"{Path(copy).name}.held-by-{os.getpid()}@{host_name()}"])
    mapped.remove_copy(copy)  # released, and no other process holds it: gone
    assert not Path(copy).exists() and not list(folder.glob(f"{Path(copy).name}.held-by-*"))


def test_a_client_that_leaves_mid_body_is_no_internal_error(tmp_path):
    """Headers and part of a POST body, then the connection closed: no traceback, no
    "internal error", at most one quiet line for many such clients; the server keeps answering."""
    path = tmp_path / "model.npz"
    _fit(seed=3).save(path)
    server = Server(path)
    try:
        for _ in range(20):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            sock.sendall(b"POST /recommend HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 1000\r\n\r\n{\"items\": [")
            time.sleep(0.05)
            sock.close()
        time.sleep(0.5)
        assert server.get("/health")[0] == 200
    finally:
        log = server.stop()
    assert "Traceback" not in log and "internal error" not in log, log
    assert log.count("closed its connection before") <= 1, log
