"""Micro-batching: the known-user requests that arrive together are ranked as one block.

One user's top-k on a large catalogue is one pass over the item matrix (100k items x 64
factors: 25 MB read for 6.4M multiply-adds), so 8 clients asking at once made 8 passes, one
after the other on the event loop. A :class:`Batcher` collects the requests whose handlers
run in the same turn of the event loop (those that arrived while the previous batch was
being ranked, or together), ranks them with one matrix product
(:func:`~mrec_warp.models.single_user.top_k_vectors`: the item matrix read once) and
answers each. Nothing waits for a timer: a lone request is ranked in the next turn of the
loop, so batching costs an idle server nothing, and a busy one gets bigger batches.

Each request's list is the one it gets alone (same items, same order, same scores: both
are settled by the exact scores, see :mod:`mrec_warp.models.single_user`). A fault while
ranking a batch ranks its requests again one by one, so a fault answers only the request
that causes it.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, List, Sequence

log = logging.getLogger("mrec_warp.serve")

#: Most requests ranked in one block (64 x 100k items of float32 scores is 25 MB).
MAX_BATCH = 32


class Batcher:
    """Run ``rank(jobs)`` over the jobs :meth:`submit`-ted in the same turn of the loop.

    Parameters
    ----------
    rank : callable
        ``rank(jobs) -> results``, one result per job, in order; a result that is an
        exception instance is raised to that job's caller only.
    max_batch : int
        Most jobs per call of ``rank``; more wait for the next turn.
    """

    def __init__(self, rank: Callable[[Sequence[Any]], List[Any]], max_batch: int = MAX_BATCH) -> None:
        self.rank = rank
        self.max_batch = int(max_batch)
        self._queue: List[tuple] = []
        self._scheduled = False
        self.requests = 0
        self.batches = 0
        self.largest = 0

    async def submit(self, job: Any) -> Any:
        """The result of ``job``, ranked with whatever else is submitted in this turn."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queue.append((job, future))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._run)  # after the handlers already due in this turn have queued theirs
        return await future

    def _run(self) -> None:
        batch, self._queue = self._queue[:self.max_batch], self._queue[self.max_batch:]
        if self._queue:
            asyncio.get_running_loop().call_soon(self._run)
        else:
            self._scheduled = False
        batch = [(job, future) for job, future in batch if not future.cancelled()]  # a client that left
        if not batch:
            return
        self.requests += len(batch)
        self.batches += 1
        self.largest = max(self.largest, len(batch))
        jobs = [job for job, _ in batch]
        try:
            results = self.rank(jobs)
        except Exception:  # noqa: BLE001 - ranked again one by one: the fault answers its own request only
            if len(jobs) == 1:
                results = [_caught(self.rank, jobs[0])]
            else:
                log.debug("a batch of %d failed; ranking its requests one by one", len(jobs), exc_info=True)
                results = [_caught(self.rank, job) for job in jobs]
        for (_, future), result in zip(batch, results):
            if future.cancelled():
                continue
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)

    def stats(self) -> dict:
        """Requests, batches and the largest batch so far (``GET /model``)."""
        return {"requests": self.requests, "batches": self.batches, "largest": self.largest,
                "max_batch": self.max_batch}


def _caught(rank: Callable[[Sequence[Any]], List[Any]], job: Any) -> Any:
    try:
        return rank([job])[0]
    except Exception as exc:  # noqa: BLE001 - handed to the job's own caller
        return exc
