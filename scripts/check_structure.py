"""Measure the package's structure from its source: the figures issue 30 asks for.

* **import circles** among ``mrec_warp`` modules: the strongly connected groups of the graph
  of imports that run (every import but those under ``if TYPE_CHECKING:``; ``from . import
  name`` is an arrow to the module ``name`` when there is one, else to the package);
* **own-package imports inside functions** (an import of ``mrec_warp`` run when a function
  is called, usually to break a circle). Excepted, and counted apart: an import of a module
  that itself imports an optional dependency (one that is neither the standard library nor
  in ``pyproject.toml``'s ``dependencies``: ``serving.app`` needs Starlette), which is why
  it waits for the call, as the optional libraries themselves (dask, pyarrow, matplotlib)
  are imported inside the functions that use them;
* **reaches into a model's private members**: ``x._name`` where ``x`` is not ``self`` /
  ``cls`` (nor ``super()``, ``type(self)``), ``_name`` is defined on a model class (a method,
  a class attribute or an attribute a method assigns on ``self``) and the module reaching is
  not one that defines it;
* **private names imported across modules**: ``from .module import _name`` (a name, not a
  module), i.e. a helper used outside its module under a private name.

Nothing is imported or run: the package is read with :mod:`ast`. Prints a table and each
finding, writes every figure as JSON, and exits 1 when a circle or an own-package import
inside a function is found (the two figures that must be 0).

Usage::

    python scripts/check_structure.py [--json bench-out/structure.json]
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

PACKAGE = Path(__file__).resolve().parent.parent / "mrec_warp"
PYPROJECT = PACKAGE.parent / "pyproject.toml"

#: The class every model derives from, and the mixins it is made of (their private members
#: are a model's too).
MODEL_ROOT = "Recommender"


def required_libraries(pyproject: Path = PYPROJECT) -> Set[str]:
    """The import names of the package's required dependencies (``[project] dependencies``)."""
    text = pyproject.read_text(encoding="utf-8")
    block = re.search(r"^dependencies = \[(.*?)^\]", text, re.S | re.M)
    names = re.findall(r'^\s*"([A-Za-z0-9_.-]+)', block.group(1), re.M) if block else []
    return {n.lower().replace("-", "_") for n in names}


def module_name(path: Path, root: Path = PACKAGE) -> str:
    """``mrec_warp/models/warp.py`` -> ``mrec_warp.models.warp``; an ``__init__`` -> its package."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path = PACKAGE) -> Dict[str, Path]:
    """Every module of the package by its dotted name."""
    return {module_name(p, root): p for p in sorted(root.rglob("*.py")) if "build" not in p.parts}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class _Imports(ast.NodeVisitor):
    """Every import of a module with where it sits: in a function or not, under TYPE_CHECKING or not."""

    def __init__(self) -> None:
        self.found: List[Tuple[ast.stmt, bool, bool]] = []  # (node, in a function, type checking only)
        self._functions = 0
        self._type_checking = 0

    def visit_FunctionDef(self, node):
        self._functions += 1
        self.generic_visit(node)
        self._functions -= 1

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_Lambda = visit_FunctionDef

    def visit_If(self, node):
        if _is_type_checking(node.test):
            self._type_checking += 1
            for child in node.body:
                self.visit(child)
            self._type_checking -= 1
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node):
        self.found.append((node, self._functions > 0, self._type_checking > 0))

    visit_ImportFrom = visit_Import


def imported_modules(node: ast.stmt, here: str, is_package: bool, known: Set[str]) -> Iterator[Tuple[str, Optional[str]]]:
    """(module, imported name or None) of each ``mrec_warp`` module an import statement loads;
    a name that is itself a module (``from . import single_user``) gives that module."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name == "mrec_warp" or alias.name.startswith("mrec_warp."):
                yield alias.name, None
        return
    assert isinstance(node, ast.ImportFrom)
    if node.level:
        package = here.split(".") if is_package else here.split(".")[:-1]
        base = package[:len(package) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if not (target == "mrec_warp" or target.startswith("mrec_warp.")):
        return
    for alias in node.names:
        sub = f"{target}.{alias.name}"
        yield (sub, None) if sub in known else (target, alias.name)


def _library(node: ast.stmt) -> Optional[str]:
    """The top-level name of the library an absolute import loads (``None``: a relative one)."""
    if isinstance(node, ast.Import):
        return node.names[0].name.split(".")[0]
    assert isinstance(node, ast.ImportFrom)
    return None if node.level else (node.module or "").split(".")[0]


def import_graph(mods: Dict[str, Path], required: Set[str]):
    """The edges of the imports that run, the own-package imports inside functions (those
    of a module that needs an optional dependency apart), the other libraries imported
    there, and the private names imported across modules."""
    known = set(mods)
    found = {}
    for name, path in mods.items():
        visitor = _Imports()
        visitor.visit(ast.parse(path.read_text(encoding="utf-8")))
        found[name] = visitor.found
    optional_at_top = {  # modules that import an optional dependency when they are imported
        name for name, imports in found.items()
        if any(not in_function and not type_checking and (lib := _library(node)) and lib != "mrec_warp"
               and lib not in sys.stdlib_module_names and lib.lower() not in required
               for node, in_function, type_checking in imports)}
    edges: Dict[str, Set[str]] = defaultdict(set)
    where: Dict[Tuple[str, str], int] = {}
    in_functions, of_optional, libraries, private_names = [], [], [], []
    for name, path in mods.items():
        is_package = path.name == "__init__.py"
        for node, in_function, type_checking in found[name]:
            targets = list(imported_modules(node, name, is_package, known))
            if in_function and not type_checking:
                if targets:
                    target = targets[0][0]
                    (of_optional if target in optional_at_top else in_functions).append((name, node.lineno, target))
                elif _library(node):
                    lib = node.names[0].name if isinstance(node, ast.Import) else node.module
                    libraries.append((name, node.lineno, lib))
            for target, imported in targets:
                if imported and imported.startswith("_") and not imported.startswith("__") and target != name:
                    private_names.append((name, node.lineno, f"{target}.{imported}"))
                if type_checking or target == name:
                    continue
                edges[name].add(target)
                where.setdefault((name, target), node.lineno)
    return edges, where, in_functions, of_optional, libraries, private_names


def circles(edges: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    groups: List[List[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    sys.setrecursionlimit(10_000)
    for v in sorted(set(edges) | {w for ws in edges.values() for w in ws}):
        if v not in index:
            visit(v)
    return groups


# -- private members of model classes ------------------------------------------------------------
def _base_names(cls: ast.ClassDef) -> List[str]:
    out = []
    for base in cls.bases:
        if isinstance(base, ast.Name):
            out.append(base.id)
        elif isinstance(base, ast.Attribute):
            out.append(base.attr)
    return out


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined_private(cls: ast.ClassDef) -> Set[str]:
    """The private names a class defines: methods, class attributes, attributes set on ``self``."""
    names: Set[str] = set()
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(stmt.name):
            names.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name) and _private(t.id)}
    for node in ast.walk(cls):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and isinstance(
                node.value, ast.Name) and node.value.id == "self" and _private(node.attr):
            names.add(node.attr)
    return names


def model_private_members(trees: Dict[str, ast.Module]) -> Dict[str, Set[str]]:
    """Private member name -> the modules that define it on a model class (``Recommender``,
    its mixins and bases, and every class deriving from it)."""
    classes: Dict[str, List[Tuple[str, ast.ClassDef]]] = defaultdict(list)
    for mod, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                classes[node.name].append((mod, node))
    model: Set[str] = set()
    # the root and everything it is made of
    todo = [MODEL_ROOT]
    while todo:
        name = todo.pop()
        if name in model or name not in classes:
            continue
        model.add(name)
        for _, node in classes[name]:
            todo.extend(b for b in _base_names(node) if b not in ("ABC", "object", "Generic"))
    # and every class that derives from one of them
    grew = True
    while grew:
        grew = False
        for name, defs in classes.items():
            if name not in model and any(b in model for _, node in defs for b in _base_names(node)):
                model.add(name)
                grew = True
    members: Dict[str, Set[str]] = defaultdict(set)
    for name in model:
        for mod, node in classes[name]:
            for member in _defined_private(node):
                members[member].add(mod)
    return members


def _is_self(expr: ast.expr) -> bool:
    if isinstance(expr, ast.Name):
        return expr.id in ("self", "cls")
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name):
        return expr.func.id == "super" or (expr.func.id == "type" and len(expr.args) == 1 and _is_self(expr.args[0]))
    if isinstance(expr, ast.Attribute) and expr.attr == "__class__":
        return _is_self(expr.value)
    return False


class _Reaches(ast.NodeVisitor):
    """``x._name`` for a model's private ``_name``, in a module that does not define it;
    ``self`` and ``cls`` are the object itself only in a class's methods."""

    def __init__(self, module: str, members: Dict[str, Set[str]]) -> None:
        self.module, self.members = module, members
        self.found: List[Tuple[str, int, str]] = []
        self._classes = 0

    def visit_ClassDef(self, node):
        self._classes += 1
        self.generic_visit(node)
        self._classes -= 1

    def visit_Attribute(self, node):
        if (node.attr in self.members and self.module not in self.members[node.attr]
                and not (self._classes and _is_self(node.value))):
            self.found.append((self.module, node.lineno, f"{ast.unparse(node.value)}.{node.attr}"))
        self.generic_visit(node)


def private_reaches(trees: Dict[str, ast.Module], members: Dict[str, Set[str]]) -> List[Tuple[str, int, str]]:
    """(module, line, ``expr._name``) of every reach into a model's private member from a
    module that does not define it."""
    found = []
    for mod, tree in trees.items():
        visitor = _Reaches(mod, members)
        visitor.visit(tree)
        found += visitor.found
    return sorted(found)


def measure(root: Path = PACKAGE) -> Dict[str, object]:
    """Every figure, as the JSON holds them."""
    mods = modules(root)
    trees = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in mods.items()}
    edges, where, in_functions, of_optional, libraries, private_names = import_graph(mods, required_libraries())
    groups = circles(edges)
    reaches = private_reaches(trees, model_private_members(trees))

    def link(group):
        return [f"{a} -> {b} (line {where[a, b]})" for a in group for b in sorted(edges[a]) if b in group]

    return {
        "modules": len(mods),
        "import_circles": [{"modules": g, "imports": link(g)} for g in groups],
        "own_imports_in_functions": [{"module": m, "line": n, "imports": t} for m, n, t in in_functions],
        "optional_dependency_imports_in_functions": [{"module": m, "line": n, "imports": t}
                                                     for m, n, t in of_optional],
        "library_imports_in_functions": [{"module": m, "line": n, "imports": t} for m, n, t in libraries],
        "private_model_member_reaches": [{"module": m, "line": n, "reach": r} for m, n, r in reaches],
        "private_names_imported_across_modules": [{"module": m, "line": n, "imports": t}
                                                  for m, n, t in private_names],
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, default=Path("bench-out") / "structure.json",
                        help="where to write the figures (default: %(default)s)")
    args = parser.parse_args(argv)
    report = measure()
    rows = [
        ("import circles", len(report["import_circles"]), "0"),
        ("own-package imports inside functions", len(report["own_imports_in_functions"]), "0"),
        ("  of a module needing an optional dependency", len(report["optional_dependency_imports_in_functions"]),
         "excepted"),
        ("libraries imported inside functions", len(report["library_imports_in_functions"]), "allowed"),
        ("reaches into a model's private members", len(report["private_model_member_reaches"]), "a handful"),
        ("private names imported across modules", len(report["private_names_imported_across_modules"]), "-"),
    ]
    print(f"{report['modules']} modules in {PACKAGE.name}/\n")
    print(f"{'figure':<46} {'count':>5}  target")
    for label, count, target in rows:
        print(f"{label:<46} {count:>5}  {target}")
    for key, field in (("import_circles", "imports"), ("own_imports_in_functions", "imports"),
                       ("optional_dependency_imports_in_functions", "imports"),
                       ("library_imports_in_functions", "imports"),
                       ("private_model_member_reaches", "reach"),
                       ("private_names_imported_across_modules", "imports")):
        if report[key]:
            print(f"\n{key}:")
            for item in report[key]:
                if key == "import_circles":
                    print("  " + " <-> ".join(item["modules"]))
                    for line in item["imports"]:
                        print("      " + line)
                else:
                    print(f"  {item['module']}:{item['line']}  {item[field]}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(f"\nwrote {args.json}")
    return 1 if report["import_circles"] or report["own_imports_in_functions"] else 0


if __name__ == "__main__":
    sys.exit(main())
