"""``mrec-warp serve``: answer recommendation requests over HTTP (the ``[serve]`` extra)."""
from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile

import click

from ..errors import InputError
from ..models.ann import index_path
from ..models.fallback import refuse_without_training_data
from ..serving.holder import ModelHolder, read_model
from ..serving.limits import FOLDIN_THREADS, HEADER_TIMEOUT, MAX_CONNECTIONS, MAX_HISTORY, ConnectionLimits
from ..serving.requests import SERVED_UNKNOWN_USERS
from ._common import friendly_errors


#: Seconds a new worker has to load the model and start serving before uvicorn's SIGHUP
#: restart gives up on it and keeps the old worker (uvicorn's default, 5 s, was too short for
#: a large model or a loaded machine: the restart was abandoned).
WORKER_READY_SECONDS = 60


@click.command(epilog="""\b
Examples:
  mrec-warp serve model.npz                       # http://127.0.0.1:8000
  mrec-warp serve model.npz --port 9000 --reload  # pick up a new model.npz as it is written
  mrec-warp serve model.npz --workers 2           # behind a reverse proxy on this host
  mrec-warp index model.npz && mrec-warp serve model.npz --ann   # approximate top-k
  mrec-warp serve model.npz --unknown-users popular   # new users get the most popular items
  curl 'http://127.0.0.1:8000/recommend?user=196&k=5'
  curl 'http://127.0.0.1:8000/recommend?user=newcomer&k=5&unknown_users=popular'
  curl -d '{"items": ["50", "181"], "k": 5}' http://127.0.0.1:8000/recommend

\b
The server bounds what one process can: open connections (--max-connections), the time
a request's headers may take (--header-timeout), the body (--max-body), the history
(--max-history) and the fold-ins at once (--foldin-threads). It has no TLS, no
authentication and no per-client limits: to take requests from other machines, listen
on 127.0.0.1 behind a reverse proxy (nginx, Caddy, HAProxy) that adds TLS, access
control, per-client connection and request-rate limits and body timeouts
(docs/tutorials/serving.rst); --host 0.0.0.0 exposes it without any of them.
""")
@click.argument("model_file", metavar="MODEL", type=click.Path(dir_okay=False))
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Another than 127.0.0.1 takes requests from other machines directly: "
                   "put a reverse proxy in front instead (see below).")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="Port to listen on.")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="Worker processes; each loads its own copy of the model.")
@click.option("--reload", "reload_", is_flag=True,
              help="Load MODEL again when the file changes; a file that fails to load keeps the old model.")
@click.option("--max-k", type=click.IntRange(min=1), default=1000, show_default=True, help="Largest k a request may ask.")
@click.option("--max-body", type=click.IntRange(min=64), default=1 << 20, show_default=True,
              help="Largest request body, in bytes.")
@click.option("--max-history", type=click.IntRange(min=1), default=MAX_HISTORY, show_default=True,
              help="Most items of a POST /recommend history.")
@click.option("--foldin-threads", type=click.IntRange(min=1), default=FOLDIN_THREADS, show_default=True,
              help="POST /recommend histories folded in at once per worker, off the event loop; more wait.")
@click.option("--max-connections", type=click.IntRange(min=1), default=MAX_CONNECTIONS, show_default=True,
              help="Connections open at once per worker; over it, the one waiting longest for its request "
                   "headers is closed (or the newcomer gets 503). Lowered to fit the open-file limit.")
@click.option("--header-timeout", type=click.FloatRange(min=0.1), default=HEADER_TIMEOUT, show_default=True,
              help="Seconds a connection has to send a request's headers (408 and closed after).")
@click.option("--expose-path", is_flag=True,
              help="GET /model shows the model's absolute path and the worker's process id (default: the "
                   "file's name only, and no process id).")
@click.option("--unknown-users", type=click.Choice(SERVED_UNKNOWN_USERS), default=SERVED_UNKNOWN_USERS[0],
              show_default=True,
              help="What GET /recommend answers for a user the model does not know: refuse (404) or popular (the "
                   "items most training users have, marked \"fallback\": \"popular\"). A request's "
                   "unknown_users=... chooses for itself.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True)
@click.option("--ann", is_flag=True,
              help="GET /recommend ranks with the model's approximate index MODEL.ann (mrec-warp index; the [ann] "
                   "extra), as recommend --ann; a stale index is refused, and a reload needs a matching one. [exact]")
@friendly_errors
def serve(model_file, host, port, workers, reload_, max_k, max_body, max_history, foldin_threads, max_connections,
          header_timeout, expose_path, unknown_users, log_level, ann):
    """Serve MODEL over HTTP: GET /recommend?user=ID&k=N, POST /recommend with a history,
    GET /similar?item=ID&k=N, GET /health and GET /model, answers in JSON.

    The model is loaded and checked before the server starts (a bad file is one line and
    exit status 2). SIGHUP or, with --reload, a change of the file loads it again: the new
    model replaces the old only once it loaded and checked, without dropping requests.
    """
    try:
        import uvicorn  # noqa: F401
        import starlette  # noqa: F401
    except ImportError:
        raise InputError("serving needs the [serve] extra (Starlette and uvicorn)",
                         hint="pip install 'mrec-warp[serve]'") from None
    from ..serving.app import CONFIG_ENV, create_app, status_text
    from ..serving.connections import fit_descriptor_limit

    logging.basicConfig(level=log_level.upper(), format="%(levelname)s: %(name)s: %(message)s")
    limits = ConnectionLimits(fit_descriptor_limit(max_connections), header_timeout)
    protocol = "mrec_warp.serving.connections:GuardedH11Protocol"  # by name: a worker process imports it
    ann_file = None
    if ann:
        ann_file = os.path.abspath(index_path(model_file))
    served = read_model(model_file, ann_file)  # refuse a bad file (or a stale index) before listening
    if unknown_users == "popular":
        refuse_without_training_data(served.model.train_, path=model_file)
    logging.getLogger("mrec_warp.serve").info(
        "serving %s: %s, %d users x %d items, sha256 %s", model_file, served.description["family"],
        served.description["users"], served.description["items"], served.sha256[:12])
    options = {"max_k": max_k, "max_body": max_body, "max_history": max_history, "foldin_threads": foldin_threads,
               "expose_path": expose_path, "unknown_users": unknown_users}
    if workers == 1:
        app = create_app(ModelHolder(model_file, served, ann_file=ann_file), reload=reload_, own_signals=True,
                         limits=limits, **options)
        uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=log_level == "debug", http=protocol)
        return
    # the supervisor's: it checks a new file before any worker does
    holder = ModelHolder(model_file, served, ann_file=ann_file)
    # the supervisor's last reload, which the workers' /model shows when it is their newest (they never load
    # a file the supervisor refused)
    status_dir = tempfile.mkdtemp(prefix="mrec-warp-serve-status-")
    status_file = os.path.join(status_dir, "reload_error")
    settings = {"model": os.path.abspath(model_file), "reload": reload_, **options, "poll": 1.0,
                "log_level": log_level, "ann_file": ann_file, "status_file": status_file,
                "max_connections": limits.max_connections, "header_timeout": limits.header_timeout}

    def publish(current) -> None:  # what a worker loads when the file is bad: the last good model
        os.environ[CONFIG_ENV] = json.dumps({**settings, "fallback": current.copy_file,
                                             "fallback_sha256": current.sha256})
        _write_status(status_file, status_text(None))  # a good reload (SIGHUP or --reload): no failure

    publish(served)
    holder.on_swap = publish
    if reload_:
        holder.watch()
    try:
        _run_workers(uvicorn.Config("mrec_warp.serving.app:app_from_environment", factory=True, host=host,
                                    port=port, workers=workers, log_level=log_level,
                                    access_log=log_level == "debug", http=protocol,
                                    timeout_worker_healthcheck=WORKER_READY_SECONDS), holder, status_file)
    finally:
        holder.stop()
        shutil.rmtree(status_dir, ignore_errors=True)


def _write_status(path: str, text: str) -> None:
    """Replace the status file atomically: a worker reads the old text or the new, never half."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8", errors="backslashreplace") as fh:
        fh.write(text)
    os.replace(tmp, path)


def _run_workers(config, holder, status_file: str) -> None:
    """uvicorn's supervisor over ``config.workers`` processes, on a socket made here.

    uvicorn makes its shared socket with protocol 0, so the workers' connections never get
    TCP_NODELAY (asyncio sets it only on sockets that say TCP), and every keep-alive answer
    waited for the client's delayed ACK: 44 ms instead of 2. A socket created as TCP fixes it.

    On SIGHUP the supervisor loads and checks the file first: a bad one is logged and the
    workers keep serving; a good one becomes the fallback, then uvicorn replaces the workers
    one at a time.
    """
    import socket

    from uvicorn.supervisors import Multiprocess

    from ..serving.app import status_text

    class Supervisor(Multiprocess):
        def handle_hup(self) -> None:
            swapped = holder.reload("SIGHUP")
            _write_status(status_file, status_text(holder.last_error))
            if swapped:
                super().handle_hup()

    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((config.host, config.port))
    except OSError as exc:
        raise InputError(f"cannot listen on {config.host}:{config.port}: {exc.strerror}",
                         hint="choose another --port, or stop what is using this one") from None
    sock.set_inheritable(True)
    logging.getLogger("mrec_warp.serve").info("listening on http://%s:%d with %d workers", config.host,
                                              sock.getsockname()[1], config.workers)
    Supervisor(config, sockets=[sock]).run()
