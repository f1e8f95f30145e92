"""The Starlette application of ``mrec-warp serve``: five endpoints, JSON in and out.

``GET /recommend?user=ID&k=N`` (``include``/``exclude`` item ids, repeatable;
``exclude_seen=false`` to keep the training items; ``unknown_users=popular`` to answer a
user the model does not know with its fallback list, marked ``"fallback": "popular"``,
instead of a 404 -- the server's default is ``unknown_users``), ``POST /recommend`` with
``{"items": [...], "k": N, "include": [...], "exclude": [...]}`` for an anonymous history,
``GET /similar?item=ID&k=N``, ``GET /health`` and ``GET /model``. Lists are
``{"items": [{"item": ID, "score": S}, ...]}``, best first: for a known user the list
``mrec-warp recommend`` writes (same items, same order; scores to float32 rounding).

Every refusal is a 4xx with ``{"error": "one line"}``; an unexpected fault is a 500 with
one line too (its traceback goes to the log, never to the client). A known-user or
similar-items request's work runs on the event loop itself, on one BLAS thread: a thread
pool and BLAS threads only added hand-offs and contention on 2 cores, and ``--workers``
gives parallelism. The known-user requests of one turn of the loop are ranked together
(:mod:`.batching`): one pass over the item matrix for all of them; a close call
(:mod:`~mrec_warp.models.single_user`) is scored on a thread. A posted history (its JSON,
its fold-in) is the one kind of request whose cost the client sets: it is parsed and
folded in off the loop, at most ``foldin_threads`` at once, and its length is capped
(``max_history``), so large histories neither stall ``/health`` nor the other requests.
Each request reads the served model once (:mod:`.holder`), so a reload never mixes two
models in an answer.

The connections themselves are bounded by :mod:`.connections` (a limit, a header timeout,
quiet accept errors). ``GET /model`` names the model file by its name only and no process
id, unless ``expose_path`` (``--expose-path``): a client learns nothing of the host's folders.
"""
from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from ..models.ann import one_thread as ann_one_thread
from ..models.ann import top_k as ann_top_k
from .. import strict_json
from ..errors import InputError
from ..models import single_user
from ..models.fallback import fallback_list, users_per_item
from ..tables import POPULAR
from ..workers import blas_controller
from .batching import MAX_BATCH, Batcher
from .connections import GuardedH11Protocol, quiet_accept_errors
from .json_response import JSONResponse
from .limits import FOLDIN_THREADS, MAX_HISTORY, ConnectionLimits
from .holder import ModelHolder, Served, failure_reason, read_model
from .requests import (DEFAULT_K, MAX_K, SERVED_UNKNOWN_USERS, BadRequest, id_list, item_mask, lookup, one,
                       parse_body, parse_flag, parse_k, parse_query, parse_unknown_users, same_user_spelled_otherwise)

log = logging.getLogger("mrec_warp.serve")

#: Largest request body, in bytes (a history of ~50k ids).
MAX_BODY = 1 << 20
#: Environment variable carrying the settings to worker processes (``--workers N``).
CONFIG_ENV = "MREC_WARP_SERVE_CONFIG"


def _answer(served: Served, items: np.ndarray, scores: np.ndarray, **extra: Any) -> JSONResponse:
    ids = served.model.item_ids
    listed = [{"item": str(ids[i]), "score": float(s)} for i, s in zip(items.tolist(), scores.tolist()) if i >= 0]
    return JSONResponse({"items": listed, **extra}, headers={"X-Model-SHA256": served.sha256})


def _error(status: int, message: str) -> JSONResponse:
    # encodable whatever it quotes (a path or id with a lone surrogate is shown escaped)
    return JSONResponse({"error": message.encode("utf-8", "backslashreplace").decode("utf-8")}, status_code=status)


#: Seconds a worker that is told to stop (SIGTERM: replaced after SIGHUP, or shut down) keeps
#: answering its open connections, each answer with ``Connection: close``, before it closes
#: the idle ones (see :func:`_drain_on_sigterm`).
DRAIN_SECONDS = 1.0


class ModelHeader:
    """ASGI middleware: every HTTP answer carries ``X-Model-SHA256``, refusals and faults
    included. An answer that set it (from the model it was computed with) keeps its own:
    across a reload that is the model the answer came from, not the newest one. While the
    worker drains (``draining[0]``), every answer also says ``Connection: close``."""

    def __init__(self, app, holder: ModelHolder, draining: List[bool]) -> None:
        self.app = app
        self.holder = holder
        self.draining = draining

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(name.lower() == b"x-model-sha256" for name, _ in headers):
                    headers.append((b"x-model-sha256", self.holder.current.sha256.encode("ascii")))
                if self.draining[0]:  # the client opens its next connection to a worker that stays
                    headers.append((b"connection", b"close"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, sending)


def _rank_users(jobs: Sequence[tuple]) -> List[Any]:
    """The lists of known-user requests ``(model, index, user, k, mask, exclude_seen)``,
    each the list ``mrec-warp recommend`` writes for that user: for a factor model from
    one matrix product per group of requests that share a model, k and filters (a close
    call scored at the user's row of the file's scoring grid), with an ANN ``index``
    (``--ann``) the list ``recommend --ann`` writes, the batch path for the others. A
    request's list does not depend on the others in its batch.

    Each result is ``(items, scores)`` or, for a close call, a function without arguments
    that returns them (slow: the caller runs it off the event loop)."""
    groups: Dict[tuple, List[int]] = {}
    for n, (model, index, _, k, mask, exclude_seen) in enumerate(jobs):
        groups.setdefault((id(model), id(index), k, id(mask), exclude_seen), []).append(n)
    out: List[Any] = [None] * len(jobs)
    for members in groups.values():
        model, index, _, k, mask, exclude_seen = jobs[members[0]]
        users = np.array([jobs[n][2] for n in members], dtype=np.int64)
        exclude = model.train_ if exclude_seen else None
        if index is not None:
            found = ann_top_k(index, model, users, k, exclude, mask, positions=users)
            for row, n in enumerate(members):
                out[n] = found[0][row], found[1][row]
            continue
        lists = single_user.settled_lists(model, users, k, exclude, mask)
        if lists is None:  # no factors: the model's own path, one user at a time
            filtered = None if mask is None else np.flatnonzero(mask)
            for n, user in zip(members, users.tolist()):
                out[n] = model.recommend(user, k=k, exclude="train" if exclude_seen else None, filter_items=filtered)
            continue
        for n, user, found in zip(members, users.tolist(), lists):
            # a close call is scored the batch way, off the loop (0.1-0.4 s on 100k items): the
            # rest of the batch is answered at once
            out[n] = found if found is not None else functools.partial(
                single_user.close_call, model, user, k, exclude, mask, user)
    return out


class Service:
    """The endpoints, over a :class:`ModelHolder`."""

    def __init__(self, holder: ModelHolder, max_k: int = MAX_K, max_body: int = MAX_BODY,
                 max_batch: int = MAX_BATCH, status_file: Optional[str] = None, max_history: int = MAX_HISTORY,
                 foldin_threads: int = FOLDIN_THREADS, expose_path: bool = False,
                 unknown_users: str = SERVED_UNKNOWN_USERS[0]) -> None:
        self.holder = holder
        self.unknown_users = parse_unknown_users(unknown_users)
        self._popularity: Tuple[str, Optional[np.ndarray]] = ("", None)  # (model sha256, its fallback scores)
        self.status_file = status_file  # the supervisor's last failed reload (--workers N)
        self.max_k = int(max_k)
        self.max_body = int(max_body)
        self.max_history = int(max_history)
        self.expose_path = bool(expose_path)
        self.batcher = Batcher(_rank_users, max_batch=max_batch)
        self.foldin_threads = max(1, int(foldin_threads))
        self.foldins = ThreadPoolExecutor(self.foldin_threads, thread_name_prefix="mrec-warp-foldin")
        self._foldin_slots: Optional[asyncio.Semaphore] = None  # made on the serving loop

    async def _off_loop(self, work: Callable[[], Any]) -> Any:
        """``work()`` on a fold-in thread, at most :attr:`foldin_threads` at once: the others
        wait here, off the loop, which keeps answering."""
        if self._foldin_slots is None:
            self._foldin_slots = asyncio.Semaphore(self.foldin_threads)
        async with self._foldin_slots:
            return await asyncio.get_running_loop().run_in_executor(self.foldins, work)

    def _shown(self, text: Optional[str]) -> Optional[str]:
        """``text`` with the folders of the model's paths removed, unless :attr:`expose_path`."""
        if text is None or self.expose_path:
            return text
        folders = {os.path.dirname(os.path.abspath(p)) for p in (self.holder.path, self.holder.ann_file) if p}
        folders |= {os.path.dirname(p) for p in (self.holder.path, self.holder.ann_file) if p}
        for folder in sorted((f for f in folders if f), key=len, reverse=True):
            text = text.replace(folder.rstrip(os.sep) + os.sep, "")
        return text

    def reload_error(self) -> Optional[str]:
        """The newest reload's failure, of this process or (``--workers N``) the supervisor's;
        ``None`` when the newest reload succeeded."""
        mine: Tuple[float, Optional[str]] = (self.holder.last_reload_at, self.holder.last_error)
        newest = max((mine, read_status(self.status_file)), key=lambda attempt: attempt[0])
        return self._shown(newest[1])

    def _encoding(self, served: Served) -> str:
        return str(getattr(served.model, "id_encoding_", "utf-8") or "utf-8")

    async def recommend_get(self, request: Request) -> JSONResponse:
        served = self.holder.current
        model = served.model
        params = parse_query(request.scope.get("query_string", b""), self._encoding(served),
                             ("user", "k", "include", "exclude", "exclude_seen", "unknown_users"),
                             repeatable=("include", "exclude"))
        user_id = one(params, "user")
        if user_id is None:
            raise BadRequest(400, "give the user: /recommend?user=ID&k=10 (or POST a history)")
        k = parse_k(one(params, "k", str(DEFAULT_K)), self.max_k, model.n_items)
        exclude_seen = parse_flag(one(params, "exclude_seen"), "exclude_seen", True)
        unknown_users = parse_unknown_users(one(params, "unknown_users", self.unknown_users))

        users = model.id_map("user")
        # a known id with surrounding spaces, written as a float or with a query string's '+' made
        # a space is that user, who has seen items: refused with its did-you-mean (by its
        # spellings: a case-blind scan of every id per new user would cost too much)
        if user_id not in users and unknown_users == POPULAR and not same_user_spelled_otherwise(user_id, users):
            mask = item_mask(model.id_map("item"), model.n_items, params.get("include"), params.get("exclude"))
            items, scores = fallback_list(await self._popular_scores(served, user_id), k, mask)
            return _answer(served, items, scores, fallback=POPULAR)
        user = int(lookup(users, [user_id], "user", status=404,
                          otherwise="; ask with unknown_users=popular for the model's most popular items")[0])
        mask = item_mask(model.id_map("item"), model.n_items, params.get("include"), params.get("exclude"))
        # ranked with the other requests of this turn of the loop (see .batching)
        found = await self.batcher.submit((model, served.ann, user, k, mask, exclude_seen))
        if callable(found):  # a close call (see _rank_users)
            found = await asyncio.get_running_loop().run_in_executor(None, found)
        items, scores = found
        return _answer(served, items, scores)

    async def _popular_scores(self, served: Served, user_id: str) -> np.ndarray:
        """The fallback scores of the served model (:func:`~mrec_warp.models.fallback.users_per_item`),
        counted off the loop once per model; a model without training interactions has none."""
        sha, scores = self._popularity
        if sha != served.sha256 or scores is None:
            if served.model.train_.nnz == 0:
                raise BadRequest(404, f"unknown user {json.dumps(user_id, ensure_ascii=False)}, and the model stores no "
                                      "training interactions to rank popular items by")
            scores = await asyncio.get_running_loop().run_in_executor(None, users_per_item, served.model.train_)
            self._popularity = (served.sha256, scores)
        return scores

    async def recommend_post(self, request: Request) -> JSONResponse:
        served = self.holder.current
        model = served.model
        body = await self._body(request)

        def work():  # off the loop (see the module docstring): parsing a large body takes time too
            data = parse_body(body, ("items", "k", "include", "exclude"))
            history = id_list(data, "items", required=True)
            if len(history) > self.max_history:
                raise BadRequest(413, f"the history has {len(history):,} items; the most this server takes is "
                                      f"{self.max_history:,} (--max-history)")
            include, exclude = id_list(data, "include"), id_list(data, "exclude")
            k = parse_k(data.get("k", DEFAULT_K), self.max_k, model.n_items)
            index = model.id_map("item")
            rows = np.fromiter((index.get(x, -1) for x in history), dtype=np.int64, count=len(history))
            known = rows[rows >= 0]
            if len(known) == 0:  # refused with the first id, and a did-you-mean where one fits
                try:
                    lookup(index, history[:1], "item")
                except BadRequest as exc:
                    raise BadRequest(400, f"none of the {len(history)} history item(s) is known to the model: "
                                          f"{exc.message}") from None
            mask = item_mask(index, model.n_items, include, exclude)
            filtered = None if mask is None else np.flatnonzero(mask)
            try:
                found = model.recommend_history(known, k=k, filter_items=filtered)
            except InputError as exc:
                raise BadRequest(400, exc.render()) from None
            return found, int((rows < 0).sum())

        (items, scores), unknown = await self._off_loop(work)
        return _answer(served, items, scores, unknown_items=unknown)

    async def similar(self, request: Request) -> JSONResponse:
        served = self.holder.current
        model = served.model
        params = parse_query(request.scope.get("query_string", b""), self._encoding(served), ("item", "k"))
        item_id = one(params, "item")
        if item_id is None:
            raise BadRequest(400, "give the item: /similar?item=ID&k=10")
        k = parse_k(one(params, "k", str(DEFAULT_K)), self.max_k, model.n_items)

        def work():
            item = int(lookup(model.id_map("item"), [item_id], "item", status=404)[0])
            others = min(k, model.n_items - 1)
            if others < 1:
                return np.zeros(0, np.int64), np.zeros(0, np.float32)
            try:
                frame = model.similar([model.item_ids[item]], k=others)
            except InputError as exc:
                raise BadRequest(400, exc.render()) from None
            return model.item_indices(frame["similar_item"].to_numpy()), frame["score"].to_numpy()

        items, scores = work()
        return _answer(served, items, scores)

    async def health(self, request: Request) -> JSONResponse:
        served = self.holder.current
        return JSONResponse({"status": "ok", "sha256": served.sha256, "loaded_at": served.loaded_at},
                            headers={"X-Model-SHA256": served.sha256})

    async def describe(self, request: Request) -> JSONResponse:
        served = self.holder.current
        described = {**served.description, "loaded_at": served.loaded_at, "reload_error": self.reload_error(),
                     "max_k": self.max_k, "max_history": self.max_history, "unknown_users": self.unknown_users,
                     "batching": self.batcher.stats(),
                     "connections": {"max": GuardedH11Protocol.limits.max_connections,
                                     "header_timeout": GuardedH11Protocol.limits.header_timeout,
                                     **GuardedH11Protocol.counts}}
        if self.expose_path:
            described["pid"] = os.getpid()
        else:
            described["file"] = os.path.basename(described["file"])
        return JSONResponse(described, headers={"X-Model-SHA256": served.sha256})

    async def _body(self, request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None:
            if not declared.isdigit():
                raise BadRequest(400, f"Content-Length is not a number: {declared!r}")
            if int(declared) > self.max_body:
                raise BadRequest(413, f"the body has {int(declared):,} bytes; the most this server takes is "
                                      f"{self.max_body:,} (--max-body)")
        chunks, size = [], 0
        async for chunk in request.stream():  # a chunked body has no length: count as it comes
            size += len(chunk)
            if size > self.max_body:
                raise BadRequest(413, f"the body is over {self.max_body:,} bytes, the most this server takes "
                                      "(--max-body)")
            chunks.append(chunk)
        return b"".join(chunks)


async def _bad_request(request: Request, exc: BadRequest) -> JSONResponse:
    return _error(exc.status, exc.message)


async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    if exc.status_code == 404:
        return _error(404, f"no endpoint {request.url.path}; there are /recommend, /similar, /health and /model")
    if exc.status_code == 405:
        return _error(405, f"{request.method} is not allowed on {request.url.path}")
    return _error(exc.status_code, str(exc.detail))


async def _input_error(request: Request, exc: InputError) -> JSONResponse:
    return _error(400, exc.render())


#: Seconds between two log lines about clients that left before their request body was complete.
DISCONNECT_LOG_SECONDS = 10.0


class _Disconnects:
    """Handler of a client that closed its connection before sending its whole body: no
    fault of the server, so no traceback and no 500, at most one line every ``every`` seconds
    (with the count of those in between), as failed ``accept()`` calls are logged."""

    def __init__(self, every: float = DISCONNECT_LOG_SECONDS) -> None:
        self.every = every
        self.last = -float("inf")
        self.suppressed = 0

    async def __call__(self, request: Request, exc: ClientDisconnect) -> Response:
        now = time.monotonic()
        if now - self.last >= self.every:
            since = f" ({self.suppressed} more since the last line)" if self.suppressed else ""
            log.info("a client closed its connection before its %s %s request was complete%s; at most one such "
                     "line every %g s", request.method, request.url.path, since, self.every)
            self.last, self.suppressed = now, 0
        else:
            self.suppressed += 1
        return Response(status_code=400)  # nobody reads it: the connection is gone


async def _internal(request: Request, exc: Exception) -> JSONResponse:
    log.exception("internal error on %s %s", request.method, request.url.path)
    return _error(500, f"internal error ({type(exc).__name__}); the server log has the details")


def _drain_on_sigterm(draining: List[bool], seconds: float) -> None:
    """Make SIGTERM drain this worker before uvicorn's shutdown (``--workers N``).

    uvicorn's shutdown closes every idle keep-alive connection at once, and a client that
    had just sent its next request on one gets a reset (3-4 in ~30k requests of keep-alive
    clients at each SIGHUP). Here SIGTERM first marks every answer ``Connection: close`` for
    ``seconds`` (the listening socket is still served, so nothing is refused), then starts
    uvicorn's shutdown. uvicorn's handler is called without recording the signal, so the
    worker ends normally (uvicorn logs "Finished server process") instead of raising SIGTERM
    again into the command's handler, which logged "Error: stopped by SIGTERM" for a normal swap.
    """
    uvicorn_handler = signal.getsignal(signal.SIGTERM)
    server = getattr(uvicorn_handler, "__self__", None)  # uvicorn.Server.handle_exit's server
    if server is None or not hasattr(server, "should_exit"):
        return  # not under uvicorn's Server: leave its signals alone
    loop = asyncio.get_running_loop()

    def stop() -> None:
        server.should_exit = True

    def on_sigterm(signum, frame) -> None:
        if draining[0]:  # a second SIGTERM: stop now
            stop()
            return
        draining[0] = True
        log.info("worker %d: stopping (SIGTERM); answering with 'Connection: close' for %.1f s first",
                 os.getpid(), seconds)
        loop.call_soon_threadsafe(loop.call_later, seconds, stop)

    signal.signal(signal.SIGTERM, on_sigterm)


def create_app(holder: ModelHolder, *, reload: bool = False, own_signals: bool = False, max_k: int = MAX_K,
               max_body: int = MAX_BODY, poll: float = 1.0, status_file: Optional[str] = None,
               drain: float = 0.0, max_history: int = MAX_HISTORY, foldin_threads: int = FOLDIN_THREADS,
               expose_path: bool = False, limits: Optional[ConnectionLimits] = None,
               unknown_users: str = SERVED_UNKNOWN_USERS[0]) -> Starlette:
    """The application over ``holder``.

    ``reload`` watches the model file; ``own_signals`` reloads on SIGHUP in this process
    (one process: with several workers, uvicorn's supervisor takes SIGHUP and replaces the
    workers one by one, each loading the file, and keeps an old worker whose replacement
    cannot load it). ``status_file``: where the supervisor of several workers writes its
    last reload (see :func:`read_status`), shown by ``/model``. ``drain``: seconds a
    worker keeps answering (``Connection: close``) after SIGTERM (:func:`_drain_on_sigterm`).
    ``max_history``, ``foldin_threads``, ``expose_path``, ``unknown_users``: see the module docstring;
    ``limits``: the connections' bounds of this process (:mod:`.connections`; they apply
    when uvicorn serves with :class:`~.connections.GuardedH11Protocol`).
    """
    draining = [False]
    GuardedH11Protocol.configure(limits or ConnectionLimits())
    service = Service(holder, max_k=max_k, max_body=max_body, status_file=status_file, max_history=max_history,
                      foldin_threads=foldin_threads, expose_path=expose_path, unknown_users=unknown_users)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        # one BLAS thread for the whole process: requests run side by side on the thread pool
        # (and workers side by side), and OpenBLAS threads spinning under each of them made
        # 8 concurrent clients 20 times slower than one
        blas = blas_controller().limit(limits=1, user_api="blas")
        if holder.current.ann is not None:  # a batch of queries would spread over OpenMP threads too
            ann_one_thread()
        if reload:
            holder.watch(poll)
        loop = asyncio.get_running_loop()
        quiet_accept_errors(loop)
        if own_signals and hasattr(signal, "SIGHUP"):
            loop.add_signal_handler(signal.SIGHUP, lambda: loop.run_in_executor(None, holder.reload, "SIGHUP"))
        if drain > 0 and hasattr(signal, "SIGTERM"):
            _drain_on_sigterm(draining, drain)
        try:
            yield
        finally:
            if own_signals and hasattr(signal, "SIGHUP"):
                loop.remove_signal_handler(signal.SIGHUP)
            holder.stop()
            service.foldins.shutdown(wait=False, cancel_futures=True)
            blas.restore_original_limits()

    routes = [
        Route("/recommend", service.recommend_get, methods=["GET"]),
        Route("/recommend", service.recommend_post, methods=["POST"]),
        Route("/similar", service.similar, methods=["GET"]),
        Route("/health", service.health, methods=["GET"]),
        Route("/model", service.describe, methods=["GET"]),
    ]
    async def internal(request: Request, exc: Exception) -> JSONResponse:
        # a fault is answered outside the middleware stack (Starlette's ServerErrorMiddleware): the header here
        answer = await _internal(request, exc)
        answer.headers["X-Model-SHA256"] = holder.current.sha256
        return answer

    handlers: Dict[Any, Callable] = {BadRequest: _bad_request, HTTPException: _http_error,
                                     InputError: _input_error, ClientDisconnect: _Disconnects(),
                                     Exception: internal}
    app = Starlette(routes=routes, exception_handlers=handlers, lifespan=lifespan,
                    middleware=[Middleware(ModelHeader, holder=holder, draining=draining)])
    # /recommend/ is no endpoint: a 404 in JSON, not a 307 with an empty body to /recommend
    app.router.redirect_slashes = False
    return app


def read_status(path: Optional[str]) -> Tuple[float, Optional[str]]:
    """The supervisor's last reload from its status file: ``(when, its failure or None)``,
    ``when`` in seconds since the epoch (0: no file, or none readable)."""
    if not path:
        return 0.0, None
    try:
        with open(path, encoding="utf-8") as fh:
            status = json.load(fh)
        return float(status["at"]), status.get("error") or None
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0, None


def status_text(error: Optional[str]) -> str:
    """What the supervisor writes to its status file after a reload (:func:`read_status`)."""
    return strict_json.dumps({"at": time.time(), "error": error})


def app_from_environment() -> Starlette:
    """The application of one worker process (``--workers N``), from :data:`CONFIG_ENV`.

    A worker loads the model file; when it cannot (the file was replaced by a bad one since
    the supervisor checked it), it serves the supervisor's last good model instead, from
    its private copy, and says so: a new or restarted worker never takes the server down.
    """
    config = json.loads(os.environ[CONFIG_ENV])
    # a worker is a new process of the serve command: its records need the command's handler
    # (the package logger only has a NullHandler, which also keeps Python's last-resort one away)
    logging.basicConfig(level=str(config.get("log_level", "info")).upper(),
                        format="%(levelname)s: %(name)s: %(message)s")
    ann_file = config.get("ann_file")
    try:
        served = read_model(config["model"], ann_file)
    except (InputError, OSError, MemoryError) as exc:
        message = failure_reason(exc, config["model"])
        if not config.get("fallback"):  # no private copy could be written: nothing good to fall back on
            log.error("worker %d not started: %s", os.getpid(), message)
            raise SystemExit(3) from None
        log.warning("worker %d: %s; serving the last good model (sha256 %s) instead", os.getpid(), message,
                    config["fallback_sha256"][:12])
        served = read_model(config["fallback"], ann_file)
    holder = ModelHolder(config["model"], served, ann_file=ann_file)
    return create_app(holder, reload=config["reload"], own_signals=False, max_k=config["max_k"],
                      max_body=config["max_body"], poll=config["poll"], status_file=config.get("status_file"),
                      drain=DRAIN_SECONDS, max_history=config["max_history"], foldin_threads=config["foldin_threads"],
                      expose_path=config["expose_path"],
                      limits=ConnectionLimits(config["max_connections"], config["header_timeout"]),
                      unknown_users=config.get("unknown_users", SERVED_UNKNOWN_USERS[0]))
