"""Seeds: the one named default, and the one way every seed is derived from another.

Every random stream of the package (a model's initial factors, each fitting thread's
sampler, a fold-in pass, each sub-model of a concatenated fit) gets its seed from
:func:`spawn_seeds`, which draws from numpy's ``default_rng`` -- a PCG64 seeded through
:class:`numpy.random.SeedSequence`, so nearby seeds (42, 43, or ``[seed, epoch]``) still
give unrelated streams.
"""
from __future__ import annotations

from typing import Sequence, Union

import numpy as np

#: The seed the command line and the stage functions use when none is given.
DEFAULT_SEED = 42

#: Seeds are drawn from ``[0, SEED_BOUND)``: non-negative int64, what the kernels' xoshiro
#: seeding and ``random_state`` both take.
SEED_BOUND = 2**63 - 1
#: The largest seed accepted from a user (``random_state``, ``--seed``): int64, what a model
#: file's header stores and every generator takes.
MAX_SEED = 2**63 - 1

RandomState = Union[None, int, Sequence[int], np.random.SeedSequence, np.random.Generator]


def spawn_seeds(random_state: RandomState, n: int) -> np.ndarray:
    """``n`` independent seeds (int64 in ``[0, SEED_BOUND)``) derived from ``random_state``.

    Parameters
    ----------
    random_state : None, int, sequence of ints, SeedSequence or Generator
        Where the seeds come from: an int or a sequence of ints (e.g. ``[seed, epoch]``)
        is entropy for a new ``default_rng``; a Generator is drawn from (and advanced);
        ``None`` gives fresh, unreproducible seeds.
    n : int

    Returns
    -------
    int64 array of ``n`` seeds. The first equals ``default_rng(random_state).integers(0,
    SEED_BOUND)``, and seed ``i`` does not depend on ``n``, so asking for more seeds later
    keeps the earlier ones.
    """
    rng = random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng(random_state)
    return rng.integers(0, SEED_BOUND, int(n))


def spawn_seed(random_state: RandomState) -> int:
    """One seed from ``random_state``: ``int(spawn_seeds(random_state, 1)[0])``."""
    return int(spawn_seeds(random_state, 1)[0])

