"""The fit's training states a refit may start from (WARP's ``refit_reuse``).

After early stopping on an internal hold-out has chosen ``best`` epochs, the refit trains on
all the data. From scratch, its first epochs repeat what the fit's first epochs did on 90%
of the pairs. :class:`RefitStates` keeps copies of the whole training state (factors,
biases, the optimiser's accumulators, the sampler's state and the epoch count: the model's
:meth:`~mrec_warp.models.factor_model.FactorModel.train_state`) at some of the fit's epochs,
so that the refit can start at epoch ``k <= round(fraction * best)`` and train only the
``best - k`` epochs after it on all the data.

``best`` is known only when the fit stops, so states are kept on a geometric grid of
epochs (each at most :data:`GRID_RATIO` times the one before: 1, 2, ..., 8, 10, 12, 15,
18, 22, ...), and only those that can still be the start: the latest at or before the
current best epoch's target and the ones after it, at most :data:`MOST_STATES` (when there
are more, the one whose neighbours are closest by ratio goes, never the oldest or the
newest). The start is then the latest kept epoch at or before ``round(fraction * best)``:
never after the target, so the refit reuses at most the share the parameter says, and
usually within a grid step of it (on the selection suite at 0.25, the start was at 19-24%
of ``best``).
"""
from __future__ import annotations

import math
from typing import Any, Dict, Optional, Tuple

#: Successive grid epochs differ by at most this factor (and by at least 1).
GRID_RATIO = 1.25
#: Most training states kept at once (each: the factors and their accumulators).
MOST_STATES = 5


def grid_epochs(most: int):
    """The grid epochs up to ``most``: 1, 2, ..., then each ``floor(previous * GRID_RATIO)``."""
    e = 1
    while e <= most:
        yield e
        e = max(e + 1, int(math.floor(e * GRID_RATIO)))


class RefitStates:
    """Training states of a fit, kept where a refit reusing ``fraction`` of it may start.

    Parameters
    ----------
    fraction : float
        The refit starts at the latest kept epoch at or before ``round(fraction * best)``.
    every_epoch : bool
        Keep a state after every epoch that can still be the start (the exact target,
        whatever the memory): for measuring, not for fits.
    """

    def __init__(self, fraction: float, every_epoch: bool = False, most: int = MOST_STATES) -> None:
        self.fraction = float(fraction)
        self.every_epoch = every_epoch
        self.most = int(most)
        self.states: Dict[int, Any] = {}
        self._grid = set()
        self._grid_top = 0

    def target(self, best: int) -> int:
        """The epoch a refit after ``best`` epochs would ideally start from (before ``best``)."""
        return min(int(round(self.fraction * best)), best - 1)

    def _on_grid(self, epoch: int) -> bool:
        if self.every_epoch:
            return True
        if epoch > self._grid_top:  # extend the grid (epochs only grow)
            self._grid_top = 2 * epoch
            self._grid = set(grid_epochs(self._grid_top))
        return epoch in self._grid

    def after_epoch(self, model, epoch: int, best: int) -> None:
        """Called after each fit epoch ``epoch`` (1-based) with the best epoch so far."""
        if self._on_grid(epoch):
            self.states[epoch] = model.train_state()
        floor = self._start_epoch(max(best, 1))
        for e in [e for e in self.states if floor is not None and e < floor]:
            del self.states[e]  # the final best is no earlier than this one: never a start again
        if not self.every_epoch and len(self.states) > self.most:
            # thin where the kept epochs are densest (by ratio), never the start or the newest
            kept = sorted(self.states)
            i = min(range(1, len(kept) - 1), key=lambda j: kept[j + 1] / kept[j - 1])
            del self.states[kept[i]]

    def _start_epoch(self, best: int) -> Optional[int]:
        target = self.target(best)
        below = [e for e in self.states if e <= target]
        return max(below) if below else None

    def start(self, best: int) -> Optional[Tuple[int, Any]]:
        """``(k, state)``: the kept state a refit of ``best`` epochs starts from, or ``None``
        (none kept at or before the target: the refit starts from scratch)."""
        k = self._start_epoch(best)
        return None if k is None else (k, self.states[k])
