"""Every code example in docs/ and README.rst runs here, so an example that drifts fails CI.

Two kinds of example, run in document order, one temporary folder per page:

* shell examples, ``.. code-block:: console`` blocks: each ``$ `` line (``\\`` continues it)
  runs in that folder and must exit 0: ``mrec-warp ...`` in-process through click's
  CliRunner, anything else in bash with the interpreter's bin folder first on PATH. Lines
  without ``$`` are shown output and are not compared;
* Python examples, ``>>>`` blocks: doctest, one namespace per page, output compared
  (ELLIPSIS and NORMALIZE_WHITESPACE on);
* files the examples read, a code-block with a ``:caption: NAME`` option (e.g. a ``toml``
  block captioned ``exp.toml``): written to NAME in the page's folder, where it stands.

The folder starts with small data the fixture makes (`_seed_folder`): ``ml-100k/`` a stand-in
for MovieLens 100k in its own format (``u.data``, ``u.item``, ``u.user``; 200 users, 200
items, so the ids the pages name -- user 196, items 50 and 181 -- exist), prepared into
``split/``, plus ``ratings.tsv`` and ``item_tags.tsv`` from ``mrec-warp synth``.

An example that needs a cluster, a server, the network, the shared MovieLens files or more
than seconds is preceded by a comment ``.. skip: REASON`` and is counted as skipped with its
reason. Any other literal block that holds a command or Python code fails
`test_no_untested_example`: write it as one of the two kinds, or as ``.. code-block:: text``
when it is a table or output.
"""
from __future__ import annotations

import doctest
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from mrec_warp.cli import main as cli_main

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted([ROOT / "README.rst", *(p for p in DOCS.rglob("*.rst") if "_build" not in p.parts
                                      and "generated" not in p.parts)])

SKIP = re.compile(r"^\.\. skip: (?P<reason>.+)$")
CODE_BLOCK = re.compile(r"^(?P<indent>\s*)\.\. code-block:: (?P<lang>\S+)\s*$")


@dataclass
class Example:
    page: Path
    line: int  # 1-based line of the block's first line of code
    kind: str  # "console", "python" or "file" (a block written to the file its caption names)
    text: str  # the block's code, dedented
    skip: str | None = None
    caption: str | None = None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


@dataclass
class Literal:
    """A literal block that is no example (``::`` or a code-block of another language)."""
    page: Path
    line: int
    text: str
    lang: str = ""


@dataclass
class Page:
    examples: list[Example] = field(default_factory=list)
    literals: list[Literal] = field(default_factory=list)


def _block(lines: list[str], start: int, indent: int) -> tuple[list[str], int]:
    """The indented block after line ``start`` (options and one blank line skipped)."""
    i = start + 1
    while i < len(lines) and re.match(r"^\s+:\w[\w-]*:", lines[i]):  # directive options
        i += 1
    body, first = [], None
    while i < len(lines):
        line = lines[i]
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        if line.strip() and first is None:
            first = i
        body.append(line)
        i += 1
    while body and not body[-1].strip():
        body.pop()
    while body and not body[0].strip():
        body.pop(0)
    width = min((len(b) - len(b.lstrip()) for b in body if b.strip()), default=0)
    return [b[width:] for b in body], (first if first is not None else start)


def parse(page: Path) -> Page:
    lines = page.read_text(encoding="utf-8").splitlines()
    out, skip, i = Page(), None, 0
    while i < len(lines):
        line = lines[i]
        m = SKIP.match(line.strip())
        if m:
            skip = m["reason"]
            i += 1
            continue
        cb = CODE_BLOCK.match(line)
        if cb:
            body, first = _block(lines, i, len(cb["indent"]))
            text = "\n".join(body) + "\n"
            caption = next((m[1] for o in lines[i + 1:first] if (m := re.match(r"\s+:caption: (\S+)\s*$", o))), None)
            if caption:
                out.examples.append(Example(page, first + 1, "file", text, skip, caption))
            elif cb["lang"] == "console":
                out.examples.append(Example(page, first + 1, "console", text, skip))
            elif cb["lang"] in ("pycon", "python") and ">>>" in text:
                out.examples.append(Example(page, first + 1, "python", text, skip))
            else:
                out.literals.append(Literal(page, first + 1, text, cb["lang"]))
            skip = None
            i = first + len(body)
            continue
        if line.lstrip().startswith(">>> "):  # a doctest block: a paragraph of >>> lines
            indent = len(line) - len(line.lstrip())
            start, body = i, []
            while i < len(lines) and lines[i].strip():
                body.append(lines[i][indent:])
                i += 1
            out.examples.append(Example(page, start + 1, "python", "\n".join(body) + "\n", skip))
            skip = None
            continue
        if line.rstrip().endswith("::") and not line.lstrip().startswith(".. "):
            indent = len(line) - len(line.lstrip())
            body, first = _block(lines, i, indent)
            if body:
                out.literals.append(Literal(page, first + 1, "\n".join(body) + "\n"))
                i = first + len(body)
                continue
        if line.strip() and not line.lstrip().startswith(".. "):
            skip = None  # a skip comment covers only the block right after it
        i += 1
    return out


PARSED = {page: parse(page) for page in PAGES}
EXAMPLES = [e for page in PAGES for e in PARSED[page].examples]


def _commands(text: str) -> list[str]:
    """The ``$`` lines of a console block, continuation lines joined."""
    commands, current = [], None
    for line in text.splitlines():
        if current is not None:
            current += " " + line.strip()
        elif line.startswith("$ "):
            current = line[2:].strip()
        else:
            continue  # output
        if current.endswith("\\"):
            current = current[:-1].rstrip()
        else:
            commands.append(current)
            current = None
    return commands


def _run_console(example: Example, folder: Path) -> None:
    for command in _commands(example.text):
        words = shlex.split(command, comments=True)
        if words and words[0] == "mrec-warp" and not set(command) & set("|<>;&"):
            result = CliRunner().invoke(cli_main, words[1:], catch_exceptions=False)
            assert result.exit_code == 0, f"{example.name}: `{command}` exited {result.exit_code}:\n{result.output}"
        else:
            env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
            proc = subprocess.run(["bash", "-c", command], cwd=folder, env=env, capture_output=True, text=True,
                                  timeout=120)
            assert proc.returncode == 0, f"{example.name}: `{command}` exited {proc.returncode}:\n{proc.stderr}"


def _run_python(example: Example, globs: dict) -> None:
    test = doctest.DocTestParser().get_doctest(example.text, globs, example.name, str(example.page), example.line - 1)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    runner.run(test, out=report.append, clear_globs=False)
    assert runner.failures == 0, f"{example.name}: doctest failed\n" + "".join(report)


# -- the data every page starts with -------------------------------------------------------------

GENRES = 19


def _movielens_standin(folder: Path, seed: int = 0) -> None:
    """MovieLens 100k's files in their own formats, small: 200 users, 200 items, two tastes.

    Items 191-200 are in ``u.item`` only (features, no ratings): new items for cold start.
    """
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    rows = []
    for user in range(1, 201):
        group = user % 2
        own = np.arange(1 + group, 191, 2)
        items = rng.choice(own, 18, replace=False).tolist() + rng.choice(np.arange(1, 191), 4, replace=False).tolist()
        for item in dict.fromkeys(items):
            rating = int(rng.integers(4, 6)) if (item - 1 - group) % 2 == 0 else int(rng.integers(1, 4))
            rows.append(f"{user}\t{item}\t{rating}\t{880000000 + int(rng.integers(0, 10_000_000))}\n")
    (folder / "u.data").write_text("".join(rows))
    item_lines = []
    for item in range(1, 201):
        flags = ["0"] * GENRES
        flags[1 + item % 2] = "1"
        flags[5 + item % 7] = "1"
        item_lines.append(f"{item}|Film {item} (199{item % 10})|01-Jan-199{item % 10}||http://x|" + "|".join(flags) + "\n")
    (folder / "u.item").write_text("".join(item_lines), encoding="latin-1")
    jobs = ["student", "engineer", "writer", "other"]
    (folder / "u.user").write_text("".join(f"{u}|{18 + u % 50}|{'MF'[u % 2]}|{jobs[u % 4]}|0{u:04d}\n"
                                           for u in range(1, 201)))


@pytest.fixture(scope="module")
def seed_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("docs-data")
    _movielens_standin(folder / "ml-100k")
    runner = CliRunner()
    for args in (["synth", "-o", str(folder), "--users", "150", "--items", "80", "--interactions", "2000",
                  "--topics", "4", "--seed", "1"],
                 ["prepare", str(folder / "ml-100k" / "u.data"), "-o", str(folder / "split"), "--format",
                  "movielens", "--min-rating", "4", "--test-fraction", "0.2", "--seed", "42", "--features"]):
        result = runner.invoke(cli_main, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
    return folder


@pytest.mark.parametrize("page", [p for p in PAGES if any(not e.skip for e in PARSED[p].examples)],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_page_examples_run(page, seed_folder, tmp_path, monkeypatch):
    folder = tmp_path / "work"
    shutil.copytree(seed_folder, folder)
    monkeypatch.chdir(folder)
    globs: dict = {"__name__": "__docs__"}
    # an example may configure logging (the Python API page does): restored afterwards
    root, ours = logging.getLogger(), logging.getLogger("mrec_warp")
    saved = root.handlers[:], root.level, ours.level
    try:
        _run_page(page, folder, globs)
    finally:
        root.handlers[:], ours.level = saved[0], saved[2]
        root.setLevel(saved[1])


def _run_page(page: Path, folder: Path, globs: dict) -> None:
    for example in PARSED[page].examples:
        if example.skip:
            continue
        if example.kind == "console":
            _run_console(example, folder)
        elif example.kind == "file":
            (folder / example.caption).write_text(example.text, encoding="utf-8")
        else:
            _run_python(example, globs)


@pytest.mark.parametrize("example", [e for e in EXAMPLES if e.skip], ids=lambda e: e.name)
def test_skipped_example(example):
    pytest.skip(example.skip)


CODE = re.compile(r"^(\$ |mrec-warp |python |pip |import |from \w+ import|>>> |\w+ = mw\.)", re.M)


def test_no_untested_example():
    untested = [f"{lit.page.relative_to(ROOT)}:{lit.line}" for page in PAGES for lit in PARSED[page].literals
                if lit.lang != "text" and CODE.search(lit.text)]
    assert not untested, ("literal blocks holding commands or code that no test runs (make them "
                          "`.. code-block:: console` / `>>>` examples, or mark them `.. skip: REASON`): "
                          + ", ".join(untested))


def test_examples_are_found():
    # the parser finding nothing would pass every test above; these pages have examples
    executed = [e for e in EXAMPLES if not e.skip]
    assert len(executed) >= 20, [e.name for e in executed]
    assert {e.kind for e in executed} >= {"console", "python"}
    assert any(e.page.name == "README.rst" for e in executed)


def test_parser_reads_both_kinds_and_skips(tmp_path):
    page = tmp_path / "page.rst"
    page.write_text("Title\n=====\n\nRun::\n\n    not an example\n\n.. code-block:: console\n\n"
                    "   $ mrec-warp --version \\\n       # continued\n   mrec-warp, version 1\n\n"
                    ".. skip: needs the network\n\n.. code-block:: console\n\n   $ mrec-warp fetch x\n\n"
                    ">>> 1 + 1\n2\n\nText.\n\n.. code-block:: text\n\n   $ shown only\n")
    parsed = parse(page)
    assert [(e.kind, e.line, e.skip) for e in parsed.examples] == [
        ("console", 10, None), ("console", 18, "needs the network"), ("python", 20, None)]
    assert _commands(parsed.examples[0].text) == ["mrec-warp --version # continued"]
    assert [(lit.line, lit.lang) for lit in parsed.literals] == [(6, ""), (27, "text")]


def test_python_versions_match_the_package_metadata():
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    oldest = re.fullmatch(r">=\s*(3\.\d+)", project["requires-python"]).group(1)
    listed = [c.rsplit(" :: ", 1)[1] for c in project["classifiers"]
              if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)]
    newest = max(listed, key=lambda v: int(v.split(".")[1]))
    assert min(listed, key=lambda v: int(v.split(".")[1])) == oldest
    readme = (ROOT / "README.rst").read_text()
    assert f"Python {oldest}+" in readme and f"CPython {oldest} to {newest}" in readme
    for page in PAGES:
        text = page.read_text()
        for found in re.findall(r"Python (3\.\d+)\+", text):
            assert found == oldest, f"{page.relative_to(ROOT)} says Python {found}+, the package requires {oldest}"
        for low, high in re.findall(r"CPython (3\.\d+) to (3\.\d+)", text):
            assert (low, high) == (oldest, newest), f"{page.relative_to(ROOT)} says CPython {low} to {high}"


def test_readme_renders_without_sphinx():
    # README.rst is the package's long description: PyPI and GitHub render it with plain
    # docutils, where a Sphinx role (:doc:, :ref:) or a broken link is an error
    docutils_core = pytest.importorskip("docutils.core")
    docutils_core.publish_doctree((ROOT / "README.rst").read_text(),
                                  settings_overrides={"halt_level": 2, "report_level": 5})
    links = re.findall(r"<(docs/[^>]+\.rst)>`_", (ROOT / "README.rst").read_text())
    assert links and all((ROOT / link).is_file() for link in links), [l for l in links if not (ROOT / l).is_file()]


def test_api_reference_lists_every_export():
    # the API reference is generated from what autosummary names: a new export must be named
    import mrec_warp

    listed = set(re.findall(r"^   (\w+)$", (DOCS / "reference" / "api.rst").read_text(), re.M))
    missing = sorted(set(mrec_warp.__all__) - {"__version__"} - listed)
    assert not missing, f"docs/reference/api.rst does not list {missing} (add them to an autosummary)"
    assert not listed - set(mrec_warp.__all__), "docs/reference/api.rst lists names mrec_warp does not export"
