"""The package's floors: a module imports only from its own floor or the ones below it.

Ground floor: the tools every part uses (errors, files, progress, seeds, workers, top-k...).
Then data; then models and evaluation (side by side, neither importing the other); then the
job engine; the stages; experiments and serving; the CLI and the package's front door.
Read from the source (no import is run), so a new arrow up fails here with its module. No
import circle and no import of the package's own modules inside a function either, as
``scripts/check_structure.py`` measures them.
"""
from __future__ import annotations

import ast
import importlib.util
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


def _structure():
    spec = importlib.util.spec_from_file_location("check_structure", PACKAGE.parent / "scripts" / "check_structure.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_import_circle_and_no_own_import_inside_a_function():
    report = _structure().measure(PACKAGE)
    assert report["import_circles"] == []
    assert report["own_imports_in_functions"] == []  # (a module needing an optional library excepted)


def test_the_structure_check_sees_a_circle_and_an_import_inside_a_function(tmp_path):
    package = tmp_path / "mrec_warp"
    (package / "sub").mkdir(parents=True)
    for name, text in {"__init__.py": "", "sub/__init__.py": "", "a.py": "from .b import x\n",
                       "b.py": "from .sub import c\nx = 1\n",
                       "sub/c.py": "from .. import a\ndef f():\n    from ..b import x\n    import pyarrow\n"}.items():
        (package / name).write_text(text, encoding="utf-8")
    report = _structure().measure(package)
    assert [c["modules"] for c in report["import_circles"]] == [["mrec_warp.a", "mrec_warp.b", "mrec_warp.sub.c"]]
    assert [(i["module"], i["line"]) for i in report["own_imports_in_functions"]] == [("mrec_warp.sub.c", 3)]
    assert [i["imports"] for i in report["library_imports_in_functions"]] == ["pyarrow"]
