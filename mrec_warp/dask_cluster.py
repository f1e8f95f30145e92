"""The Dask side of :mod:`mrec_warp.workers`: a client (to a running scheduler or a local
cluster), the pre-flight check of its workers, and the one-line error a cluster fails with.

Imported by :mod:`mrec_warp.workers` only; ``distributed`` itself is imported when a client
is made, as it is an optional extra.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

from ._version import __version__
from .errors import InputError


class ClusterError(InputError):
    """The Dask cluster failed the job: unreachable, lost mid-job, or its workers cannot run
    mrec-warp. Printed as one line by the CLI; finished part files stay, so rerunning the
    same command resumes."""


def require_dask() -> None:
    """Fail in one line when the optional ``dask[distributed]`` extra is missing."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise InputError("`backend=dask` needs dask.distributed, which is not installed",
                         hint="pip install 'mrec-warp[dask]'") from None


@contextlib.contextmanager
def dask_client(scheduler: Optional[str] = None, n_workers: int = 1):
    """A ``distributed.Client``: connected to ``scheduler``, or to a new local cluster.

    The local cluster has ``n_workers`` single-threaded worker processes (the caller counts
    them against the cores: :class:`~mrec_warp.workers.Workers`) listening on 127.0.0.1 only, its dashboard on a free port of 127.0.0.1 (a fixed
    port may be taken: Dask would warn), and is shut down on exit. A client to an
    existing scheduler is closed on exit; the cluster itself is left running.
    """
    require_dask()
    from distributed import Client, LocalCluster

    if scheduler:
        client = _connect(Client, scheduler)
        # A lost scheduler is reported once, as a ClusterError; the client's own reconnect
        # attempts would log it again as tracebacks, and its comms ("Batched Comm Closed",
        # at INFO with a traceback) would add theirs on the command's standard error.
        quieted = {"distributed.client": logging.CRITICAL, "distributed": logging.ERROR}
        levels = {name: logging.getLogger(name).level for name in quieted}
        for name, quiet in quieted.items():
            logger = logging.getLogger(name)
            logger.setLevel(max(quiet, logger.level))
        try:
            yield client
        finally:
            _close_quietly(client)
            for name, level in levels.items():
                logging.getLogger(name).setLevel(level)
        return
    n = max(1, int(n_workers))
    # Workers are processes with one thread each: the kernels already use a core fully, and
    # processes keep one worker's crash from taking the others down.
    cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
    client = Client(cluster)
    stopped = False
    try:
        yield client
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP (mrec_warp.signals): the user stops the run
        stopped = True
        _hush_workers(client)
        raise
    finally:
        _close_quietly(client)
        if stopped:
            # tearing down nannies whose workers are still busy logs a lost comm or a timed
            # out join as ERROR with a traceback; the one line of the stop says it all
            with _quiet_logs():
                cluster.close()
        else:
            cluster.close()


#: Seconds to reach a scheduler and hear it answer as one; an address that does not (a web
#: server waiting for a request, a closed port behind a firewall) is refused after them.
CONNECT_TIMEOUT = 20.0

#: Seconds the handshake may take beyond :data:`CONNECT_TIMEOUT`: connect's own retries end
#: first, so a closed port or an unknown host says so rather than "no answer".
HANDSHAKE_GRACE = 1.0

#: How to give a scheduler, said by every refusal of one.
SCHEDULER_HINT = ("give its address as tcp://HOST:PORT; start one with 'dask scheduler' and 'dask worker ADDRESS', "
                  "or omit `scheduler` for a local cluster")


def _connect(client_class, scheduler: str):
    """A client of the scheduler at ``scheduler``, or one :class:`ClusterError` within about
    :data:`CONNECT_TIMEOUT` seconds (twice at most: the handshake, then the client's own
    connection).

    distributed's connect reads the peer's first message with no deadline and sizes its
    buffers by the first bytes it gets: a service that says nothing would hang the command,
    one that writes other bytes ends in an out-of-memory or a decoding error. Its handshake is
    heard first, under a deadline, in a thread of its own (the caller may run an event loop);
    only then is the client made.
    """
    def refuse(why: str) -> ClusterError:
        return ClusterError(f"{scheduler} is not a reachable Dask scheduler ({why})", hint=SCHEDULER_HINT)

    timeout = CONNECT_TIMEOUT
    problem = _address_problem(scheduler)
    if problem is not None:
        raise refuse(f"not an address: {problem}")
    try:
        with ThreadPoolExecutor(1, thread_name_prefix="mrec-warp-dask-probe") as pool:
            pool.submit(asyncio.run, _handshake(scheduler, timeout)).result()
    except (asyncio.TimeoutError, TimeoutError):
        raise refuse(f"no answer as one in {timeout + HANDSHAKE_GRACE:g} s") from None
    except OSError as exc:
        raise refuse(" ".join(str(exc).split())[:160] or type(exc).__name__) from None
    except Exception:  # noqa: BLE001 - other bytes fail distributed's decoding in many ways (MemoryError too)
        raise refuse("it answered with bytes that are not Dask's") from None
    try:
        return client_class(scheduler, timeout=timeout)
    except (OSError, TimeoutError, asyncio.TimeoutError) as exc:
        raise refuse(" ".join(str(exc).split())[:160] or "timed out") from None
    except Exception:  # noqa: BLE001 - a Dask server that is not a scheduler (a worker) answers otherwise
        raise refuse("it answered as a Dask server, not as a scheduler") from None


def _address_problem(scheduler: str) -> Optional[str]:
    """Why ``scheduler`` is not an address distributed can connect to (an unknown scheme, no
    port), or ``None``."""
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.comm.registry import get_backend

    try:
        scheme, location = parse_address(scheduler)
        get_backend(scheme)
        if scheme in ("tcp", "tls", "ws", "wss"):
            parse_host_port(location)
    except ValueError as exc:
        return " ".join(str(exc).split())[:160]
    return None


async def _handshake(scheduler: str, timeout: float) -> None:
    """Connect to ``scheduler`` and hear its handshake, all within ``timeout`` seconds."""
    from distributed.comm import connect
    from distributed.security import Security

    comm = await asyncio.wait_for(connect(scheduler, timeout=timeout, **Security().get_connection_args("client")),
                                  timeout + HANDSHAKE_GRACE)
    await comm.close()


def _hush_worker() -> None:
    """Run on each worker process of a local cluster that a signal stops: nothing it says
    from now on reaches the command's standard error, which it inherited.

    Its task goes on running (a thread cannot be stopped) until its nanny closes it after a
    grace period or kills it; meanwhile the worker's close, its dying threads and its
    interpreter's exit print what they hit -- a lost connection, a work folder the driver
    removed -- as tracebacks after the command's one line.
    """
    import os

    logging.disable(logging.CRITICAL)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)  # the descriptor, not only sys.stderr: exit hooks and C code write there too
    finally:
        os.close(devnull)


#: Seconds to wait for the local workers to go quiet before the cluster is closed anyway.
HUSH_TIMEOUT = 5


def _hush_workers(client) -> None:
    """Silence the local cluster's worker processes before it is shut down (:func:`_hush_worker`);
    a worker too busy to answer in :data:`HUSH_TIMEOUT` seconds is closed as it is."""
    with _quiet_logs(), contextlib.suppress(Exception):  # noqa: BLE001 - best effort, the stop goes on
        client.run(_hush_worker, on_error="ignore", callback_timeout=HUSH_TIMEOUT)


@contextlib.contextmanager
def _quiet_logs():
    """Dask's loggers (and asyncio's, on which its comms run) at CRITICAL for the block."""
    names = ("distributed", "asyncio", "tornado")
    levels = {name: logging.getLogger(name).level for name in names}
    for name in names:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def _close_quietly(client) -> None:
    """Close a client; a scheduler that is already gone is no news (the error said so)."""
    dask_logger = logging.getLogger("distributed")
    level = dask_logger.level
    dask_logger.setLevel(logging.CRITICAL)  # else a lost scheduler logs its tracebacks at exit
    try:
        client.close(timeout=5)
    except Exception:  # noqa: BLE001 - closing a dead connection may fail in many ways
        pass
    finally:
        dask_logger.setLevel(level)


#: Seconds to wait for a scheduler's first worker before giving up.
WORKER_WAIT = 60


def _mrec_warp_version_probe():
    """A function that reports a worker's mrec-warp version, or ``None`` when it has none.

    Built inside a function so that it is shipped to the workers by value: a worker
    without mrec-warp cannot unpickle a function that lives in mrec-warp's modules.
    """
    def probe():
        # importlib, not an import statement: this runs on a remote worker, where whether
        # the package imports at all is the question (it is no dependency of this module)
        import importlib

        try:
            mrec_warp = importlib.import_module("mrec_warp")
        except Exception:  # noqa: BLE001 - not installed, or broken: either way unusable
            return None
        return str(getattr(mrec_warp, "__version__", "unknown"))

    return probe


def check_workers(client, scheduler: Optional[str] = None) -> None:
    """The pre-flight check of a Dask cluster: it has a worker, and every worker runs this
    mrec-warp version (a worker without it, or with another one, would fail each call with a
    long traceback, or compute something else)."""
    where = f" at {scheduler}" if scheduler else ""
    try:
        client.wait_for_workers(1, timeout=WORKER_WAIT)
        found = client.run(_mrec_warp_version_probe())
    except (OSError, TimeoutError) as exc:
        raise ClusterError(f"the Dask scheduler{where} has no worker that answers ({exc or 'timed out'})",
                           hint="start workers with 'dask worker ADDRESS'") from None
    for worker, version in sorted(found.items()):
        if version != __version__:
            has = "no mrec-warp" if version is None else f"mrec-warp {version}"
            raise ClusterError(f"Dask worker {worker} has {has}, this process has mrec-warp {__version__}",
                               hint=f"install the same mrec-warp version on every worker "
                                    f"(pip install mrec-warp=={__version__}) and restart the workers")


__all__ = ["ClusterError", "check_workers", "dask_client", "require_dask", "WORKER_WAIT"]
