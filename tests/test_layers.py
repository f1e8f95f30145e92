"""The package's floors: a module imports only from its own floor or the ones below it.

Ground floor: the tools every part uses (errors, files, progress, seeds, workers, top-k...).
Then data; then models and evaluation (side by side, neither importing the other); then the
job engine; the stages; experiments and serving; the CLI and the package's front door.
Read from the source (no import is run), so a new arrow up fails here with its module.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, Tuple

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mrec_warp"

#: floor of each top-level module or subpackage
FLOORS = {
    **dict.fromkeys(["_version", "errors", "files", "progress", "seeds", "signals", "memory", "tables", "strict_json",
                     "dask_cluster", "workers", "topk", "unit_logs", "workdir", "kernels"], 0),
    "data": 1,
    "models": 2, "evaluation": 2,
    "context": 3, "worker_cache": 3, "jobs": 3,
    "stages": 4,
    "experiments": 5, "serving": 5,
    "cli": 6, "__main__": 6, "__init__": 6,
}


def _part(module: str) -> str:
    """``mrec_warp.data.split`` -> ``data``; the package itself -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path) -> Iterator[Tuple[int, str]]:
    """(line, imported mrec_warp module) of every import in ``path``, functions' too."""
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    package = list(rel.parts[:-1])  # the package relative imports start from
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "mrec_warp":  # from .. import memory: the names are the modules
                for alias in node.names:
                    yield node.lineno, f"mrec_warp.{alias.name}"
            elif target.startswith("mrec_warp."):
                yield node.lineno, target
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("mrec_warp"):
                    yield node.lineno, alias.name


def _modules():
    return sorted(p for p in PACKAGE.rglob("*.py") if "build" not in p.parts)


def test_every_part_has_a_floor():
    parts = {_part(".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts)) for p in _modules()}
    assert parts <= set(FLOORS), f"give these a floor in FLOORS: {sorted(parts - set(FLOORS))}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_from_a_floor_above_its_own(path):
    own = _part(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts))
    up = [f"line {line}: {target} (floor {FLOORS[_part(target)]})" for line, target in _imports(path)
          if FLOORS.get(_part(target), 0) > FLOORS[own] or (FLOORS[own] == 2 and _part(target) != own
                                                             and FLOORS.get(_part(target)) == 2)]
    assert not up, f"{own} is on floor {FLOORS[own]}, but imports " + "; ".join(up)
