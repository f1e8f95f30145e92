"""What one server process takes at most, and their defaults (``mrec-warp serve`` options).

Kept apart from the modules that enforce them (:mod:`.connections`, :mod:`.app`), which
need Starlette and uvicorn: the command's ``--help`` shows these defaults without the
``[serve]`` extra. What a reverse proxy must still add is in docs/tutorials/serving.rst.
"""
from __future__ import annotations

from dataclasses import dataclass

#: Most connections open at once, per process.
MAX_CONNECTIONS = 256
#: Seconds a connection has to finish a request's headers.
HEADER_TIMEOUT = 10.0
#: Most items of a posted history (a fold-in of 10k items on 44k items x 64 factors: 0.15 s).
MAX_HISTORY = 10_000
#: Posted histories parsed and folded in at once, each on a thread off the event loop.
FOLDIN_THREADS = 2


@dataclass(frozen=True)
class ConnectionLimits:
    """How many connections one server process keeps open, and how long headers may take."""

    max_connections: int = MAX_CONNECTIONS
    header_timeout: float = HEADER_TIMEOUT
