"""The server's connections, bounded: how many may be open, how long a request's headers may take.

uvicorn (0.54+) accepts every connection and waits for its request headers without a
limit, so a few hundred clients that open connections and never finish their headers
(slowloris) held every file descriptor: ``/health`` timed out for as long as they were
held, and each failed ``accept()`` logged a traceback (hundreds of MB a minute).
:class:`GuardedH11Protocol` is uvicorn's h11 protocol with three bounds:

* **A connection limit** (:attr:`~.limits.ConnectionLimits.max_connections`, per process): a
  connection over it closes the connection that has waited longest for its request headers
  (an idle keep-alive connection, or a slow client); when every connection is busy with a
  request, the newcomer gets ``503`` and is closed. Clients that finish their headers at
  once keep getting answers through a flood of half-open connections.
* **A header timeout** (:attr:`~.limits.ConnectionLimits.header_timeout`): a connection must finish
  each request's headers within that many seconds of being ready for it (when opened, and
  after each answer on a keep-alive connection), else it gets ``408`` and is closed.
* **Quiet accept errors** (:func:`quiet_accept_errors`): asyncio's "socket.accept() out of
  system resource" is logged in one line, then counted and summed up once every
  :data:`ACCEPT_LOG_SECONDS`, instead of a traceback per attempt.

These bound one process; per-client limits, TLS, request rates and slow request bodies over
many connections are a reverse proxy's job (docs/tutorials/serving.rst).
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from typing import Any, ClassVar, Dict, Optional

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from .. import strict_json
from .limits import ConnectionLimits

log = logging.getLogger("mrec_warp.serve")

#: File descriptors kept free beside the connections (the model, its copy, logs, sockets).
RESERVED_DESCRIPTORS = 64
#: Seconds between two log lines about failed ``accept()`` calls.
ACCEPT_LOG_SECONDS = 10.0


def _raw_answer(status: int, reason: str, message: str) -> bytes:
    """A complete HTTP/1.1 answer with a JSON error, closing the connection: written before
    any request was read (h11 sends nothing until it has one), and the last thing sent."""
    body = strict_json.dumps({"error": message}).encode("utf-8")
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
            "connection: close\r\n\r\n").encode("ascii") + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a connection limit and a header timeout (module docstring).

    The limits are the process's (:meth:`configure`, called when the application is made,
    before uvicorn creates any connection): uvicorn creates the protocol from its class
    name, also in each worker process of ``--workers N``.
    """

    limits: ClassVar[ConnectionLimits] = ConnectionLimits()
    #: The connections of this process waiting for request headers, longest waiting first.
    waiting: ClassVar["OrderedDict[GuardedH11Protocol, None]"] = OrderedDict()
    #: Connections closed by each bound so far (``GET /model``).
    counts: ClassVar[Dict[str, int]] = {"evicted": 0, "refused": 0, "header_timeouts": 0}

    @classmethod
    def configure(cls, limits: ConnectionLimits) -> None:
        cls.limits = limits

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_deadline: Optional[asyncio.TimerHandle] = None
        self._answered = 0  # requests answered on this connection

    # -- asyncio protocol ------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            oldest = next(iter(self.waiting), None)
            if oldest is None:  # every other connection is in a request: this one waits outside
                self.counts["refused"] += 1
                self._close_with(503, "Service Unavailable",
                                 f"the server has {len(self.connections) - 1} connections open, its limit "
                                 "(--max-connections); try again shortly")
                return
            self.counts["evicted"] += 1
            oldest._close_with(408, "Request Timeout", "closed for a newer connection: the request headers "
                                                       "did not come in time")
        self._await_request()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self in self.waiting and self.conn.their_state is not h11.IDLE:
            self._request_started()

    def on_response_complete(self) -> None:
        self._answered += 1
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._await_request()  # keep-alive: the next request's headers have the same time

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self._request_started()
        super().connection_lost(exc)

    # -- the bounds --------------------------------------------------------------------------------
    def _await_request(self) -> None:
        self._request_started()
        self.waiting[self] = None
        self._header_deadline = self.loop.call_later(self.limits.header_timeout, self._header_timeout)

    def _request_started(self) -> None:
        self.waiting.pop(self, None)
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _header_timeout(self) -> None:
        self._header_deadline = None
        if self in self.waiting and not self.transport.is_closing():
            self.counts["header_timeouts"] += 1
            self._close_with(408, "Request Timeout",
                             f"the request headers did not come within {self.limits.header_timeout:g} s")

    def _close_with(self, status: int, reason: str, message: str) -> None:
        self._request_started()
        if self.transport.is_closing():
            return
        # an answer only where a client waits for one: a new connection, or one whose request
        # has begun; an idle keep-alive connection is closed silently (as its keep-alive timeout does)
        begun = bool(self.conn.trailing_data[0])
        if self.conn.their_state is h11.IDLE and self.conn.our_state is h11.IDLE and (begun or not self._answered):
            self.transport.write(_raw_answer(status, reason, message))
        self.transport.close()


class _AcceptErrors:
    """The loop's exception handler: failed ``accept()`` calls logged once, then summed up."""

    def __init__(self, loop: asyncio.AbstractEventLoop, every: float) -> None:
        self.loop = loop
        self.every = every
        self.last = -float("inf")
        self.suppressed = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: Dict[str, Any]) -> None:
        if not str(context.get("message", "")).startswith("socket.accept() out of system resource"):
            loop.default_exception_handler(context)
            return
        now = time.monotonic()
        if now - self.last < self.every:
            self.suppressed += 1
            return
        exc = context.get("exception")
        reason = getattr(exc, "strerror", None) or str(exc) or "no reason given"
        since = f" ({self.suppressed} more since the last line)" if self.suppressed else ""
        log.error("cannot accept connections: %s%s; lower --max-connections or raise the open-file limit "
                  "(ulimit -n); at most one such line every %g s", reason, since, self.every)
        self.last, self.suppressed = now, 0


def quiet_accept_errors(loop: asyncio.AbstractEventLoop, every: float = ACCEPT_LOG_SECONDS) -> None:
    """Log asyncio's failed ``accept()`` calls on ``loop`` in one line, at most once every
    ``every`` seconds (with the count of those in between); other errors as before."""
    loop.set_exception_handler(_AcceptErrors(loop, every))


def fit_descriptor_limit(max_connections: int) -> int:
    """``max_connections``, lowered if needed so that the connections and
    :data:`RESERVED_DESCRIPTORS` fit the open-file limit (raised to its hard limit first)."""
    try:
        import resource
    except ImportError:  # not POSIX: no limit to read
        return max_connections
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max_connections + RESERVED_DESCRIPTORS
    if soft != resource.RLIM_INFINITY and soft < wanted:
        raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError):
            pass
    if soft != resource.RLIM_INFINITY and soft < wanted:
        fitted = max(1, soft - RESERVED_DESCRIPTORS)
        log.warning("--max-connections %d lowered to %d: the open-file limit (ulimit -n) is %d", max_connections,
                    fitted, soft)
        return fitted
    return max_connections
