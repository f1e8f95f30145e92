"""The candidates of a search: grid files, grid points, random points, each family's defaults.

What :func:`mrec_warp.stages.tune.tune` tries: per model family, the points of its grid
(from a file, or built in), or random points around its defaults
(:data:`~mrec_warp.models.families.FAMILIES` holds each family's tunable parameters, space
and grid), and always the family's defaults first.
"""
from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ..files import PathLike
from ..errors import InputError
from ..models.families import DEFAULT_FAMILY, FAMILIES, tunable_families
from ..seeds import DEFAULT_SEED

#: The default family's parameters a search may vary, and what each must be (other
#: families: FAMILIES; the default family: :data:`~mrec_warp.models.families.DEFAULT_FAMILY`).
TUNABLE = FAMILIES[DEFAULT_FAMILY].tunable
#: Parameters whose value may also be ``null`` (None): no limit.
NULLABLE = FAMILIES[DEFAULT_FAMILY].nullable

#: Where ``--random N`` samples the default family when no grid file gives the values: around the defaults.
DEFAULT_SPACE: Dict[str, Any] = FAMILIES[DEFAULT_FAMILY].space
#: The column holding a trial's model family.
MODEL = "model"


def read_grid(path: PathLike, families: Sequence[str] = (DEFAULT_FAMILY,)) -> Dict[str, Dict[str, List[Any]]]:
    """Read a grid file into ``{family: grid}``.

    The file is a JSON object of parameter -> list of values (or one value), e.g.
    ``{"factors": [32, 64], "learning_rate": [0.02, 0.05], "max_sampled": 50}``, for a
    search of one family; or an object of family -> such a grid, e.g.
    ``{"slim": {"l1": [2, 5]}, "ease": {"l2": [100, 400]}}``. Errors are one line naming
    the file and what to fix.
    """
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise InputError("grid file does not exist", path=str(path), hint="check the path") from None
    try:
        grid = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg}", path=str(path), line=exc.lineno,
                         hint='expected e.g. {"factors": [32, 64], "learning_rate": [0.02, 0.05]}') from None
    if isinstance(grid, dict) and grid and all(k in FAMILIES for k in grid):
        for fam in grid:
            if fam not in families:
                raise InputError(f"the grid is for {fam!r}, which is not searched", path=str(path),
                                 hint=f"add it to `models` (searching: {', '.join(families)})")
        return {fam: check_grid(g, source=str(path), family=fam) for fam, g in grid.items()}
    if len(families) != 1:
        raise InputError("with several `models`, the grid names its family", path=str(path),
                         hint='e.g. {"slim": {"l1": [2, 5]}, "ease": {"l2": [100, 400]}}')
    return {families[0]: check_grid(grid, source=str(path), family=families[0])}


def check_grid(grid: Any, source: Optional[str] = None, family: str = DEFAULT_FAMILY) -> Dict[str, List[Any]]:
    """Validate a grid (dict of name -> list of values); scalars become one-value lists."""
    if not isinstance(grid, dict) or not grid:
        raise InputError("a grid is a JSON object of parameter -> list of values", path=source,
                         hint='e.g. {"factors": [32, 64], "learning_rate": [0.02, 0.05]}')
    tunable, nullable = FAMILIES[family].tunable, FAMILIES[family].nullable
    out: Dict[str, List[Any]] = {}
    for name, values in grid.items():
        if name not in tunable:
            extra = " (epochs come from early stopping)" if FAMILIES[family].cls.early_stopping else ""
            raise InputError(f"{name!r} cannot be tuned" + ("" if family == DEFAULT_FAMILY else f" for {family}"),
                             path=source, hint=f"tunable: {', '.join(tunable)}{extra}")
        values = values if isinstance(values, list) else [values]
        if not values:
            raise InputError(f"{name!r} has an empty list of values", path=source)
        kind = tunable[name]
        default = FAMILIES[family].defaults([name])[name]
        for v in values:
            if v is None and name in nullable:
                continue
            if isinstance(default, str) and kind is not str and v == default:  # alpha "auto"
                continue
            ok = isinstance(v, bool) if kind is bool else (
                isinstance(v, (int, float)) and not isinstance(v, bool) if kind is not str else isinstance(v, str))
            if not ok or (kind is int and float(v) != int(v)):
                raise InputError(f"{name!r}: {v!r} is not a valid {kind.__name__}", path=source)
        out[name] = [v if kind is bool or v is None or isinstance(v, str) else kind(v) for v in values]
    return out


#: Most candidates one search tries (each is a model fit, and a result file in the work
#: folder): checked before any is made, so that ``random=1e12`` or a grid of a dozen long
#: lists is one line, not hours of building a list.
MAX_TRIALS = 10_000


def _check_trials(n: int, what: str, hint: str) -> None:
    if n > MAX_TRIALS:
        raise InputError(f"{what}: {n:,} candidates, more than the {MAX_TRIALS:,} a search tries", hint=hint)


def grid_points(grid: Dict[str, List[Any]]) -> List[Dict[str, Any]]:
    """Every combination of a grid, in a stable order (at most :data:`MAX_TRIALS`)."""
    names = sorted(grid)
    _check_trials(math.prod(len(grid[n]) for n in names), "the grid", "give fewer values, or sample "
                  "the grid with `random`")
    return [dict(zip(names, combo)) for combo in itertools.product(*(grid[n] for n in names))]


def random_points(n: int, space: Optional[Dict[str, Any]] = None, seed: int = DEFAULT_SEED,
                  family: str = DEFAULT_FAMILY) -> List[Dict[str, Any]]:
    """``n`` random points: lists are sampled uniformly, ``("log", lo, hi)`` log-uniformly,
    ``("logint", lo, hi)`` log-uniformly rounded to an int, ``("log0", lo, hi)`` is 0 a
    quarter of the time and log-uniform otherwise. The default space is the family's
    (:data:`~mrec_warp.models.families.FAMILIES`), which contains its defaults."""
    _check_trials(int(n), f"`random={n}`", f"use `random` <= {MAX_TRIALS:,}")
    rng = np.random.default_rng(seed)
    space = space or FAMILIES[family].space
    points = []
    for _ in range(int(n)):
        point: Dict[str, Any] = {}
        for name in sorted(space):
            spec = space[name]
            if isinstance(spec, tuple):
                kind, lo, hi = spec
                value = float(math.exp(rng.uniform(math.log(lo), math.log(hi))))
                if kind == "log0" and rng.random() < 0.25:
                    value = 0.0
                point[name] = int(round(value)) if kind == "logint" else float(f"{value:.3g}")
            else:
                v = spec[int(rng.integers(len(spec)))]
                point[name] = v.item() if hasattr(v, "item") else v
        points.append(point)
    return points


def candidates(families: Sequence[str], grids: Optional[Dict[str, Dict[str, List[Any]]]] = None,
               n_random: Optional[int] = None, seed: int = DEFAULT_SEED) -> List[Dict[str, Any]]:
    """The points of a multi-family search, each with its ``model``: per family, its grid's
    points, ``n_random`` random points (from the grid's values when there is a grid, else
    around the defaults), or its built-in grid when neither is given. :func:`~mrec_warp.stages.tune.tune` adds
    each family's defaults."""
    points: List[Dict[str, Any]] = []
    for fam in families:
        if fam not in tunable_families():
            raise InputError(f"cannot tune `models={fam}`", hint=f"choose among {', '.join(tunable_families())}")
        grid = (grids or {}).get(fam)
        if n_random:
            found = random_points(n_random, grid, seed=seed, family=fam)
        elif grid:
            found = grid_points(grid)
        elif grids:
            found = []  # a grid file that leaves this family out: its defaults only
        else:
            found = grid_points(FAMILIES[fam].grid)
        points.extend({MODEL: fam, **p} for p in found)
    return points


def with_defaults(points: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """``points`` with each family's defaults first (over the parameters its points vary),
    and without repeats: every search has the not-searching answer as a trial."""
    families = list(dict.fromkeys(p.get(MODEL, DEFAULT_FAMILY) for p in points))
    out: List[Dict[str, Any]] = []
    for fam in families:
        names = sorted({n for p in points if p.get(MODEL, DEFAULT_FAMILY) == fam for n in p if n != MODEL})
        out.append({MODEL: fam, **FAMILIES[fam].defaults(names)})
    seen = {json.dumps(p, sort_keys=True) for p in out}
    for p in points:
        p = {MODEL: p.get(MODEL, DEFAULT_FAMILY), **{k: v for k, v in p.items() if k != MODEL}}
        key = json.dumps(p, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out
