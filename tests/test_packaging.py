"""Packaging: one version, the sdist checker, and (under `make test-wheel`) the wheel's import."""
from __future__ import annotations

import importlib.metadata
import importlib.util
import io
import os
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

import mrec_warp
from mrec_warp.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[1]


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_version_is_written_once_and_reported_everywhere():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+; the package supports 3.10
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "mrec_warp._version.__version__"}
    assert importlib.metadata.version("mrec-warp") == mrec_warp.__version__
    result = CliRunner().invoke(cli_main, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"mrec-warp, version {mrec_warp.__version__}"


GOOD = {
    "PKG-INFO": "Metadata-Version: 2.4\n",
    "setup.cfg": "[egg_info]\n",
    "pyproject.toml": "[project]\n",
    "setup.py": "from setuptools import setup\n",
    "README.rst": "readme\n",
    "LICENSE": "BSD\n",
    "MANIFEST.in": "include LICENSE\n",
    "mrec_warp/__init__.py": "",
    "mrec_warp/kernels/warp.pyx": "# cython\n",
    "mrec_warp/kernels/mw_cpu.h": "/* C */\n",
    "mrec_warp.egg-info/SOURCES.txt": "setup.py\n",
}
TRACKED = {"mrec_warp/__init__.py", "mrec_warp/kernels/warp.pyx", "mrec_warp/kernels/mw_cpu.h"}


def write_sdist(path: Path, files: dict[str, str]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"mrec_warp-1.0/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_check_sdist_accepts_exactly_what_a_build_needs(tmp_path):
    check = load_script("check_sdist")
    files = check.sdist_files(write_sdist(tmp_path / "good.tar.gz", GOOD))
    assert set(files) == set(GOOD)
    assert check.problems(files, TRACKED) == []
    assert check.problems(files, None) == []  # no git checkout: the tracked-files check is skipped


@pytest.mark.parametrize("extra, said", [
    ("mrec_warp/kernels/warp.c", "a .c file in the package"),
    ("mrec_warp/kernels/warp.cpython-311-x86_64-linux-gnu.so", "a .so file in the package"),
    ("tests/test_warp.py", "outside the package (tests/"),
    ("data/ml-100k/u.data", "outside the package (data/"),
    ("demo-out.tsv", "demo-out.tsv: not needed by a source build"),
])
def test_check_sdist_names_each_file_a_build_does_not_need(tmp_path, extra, said):
    check = load_script("check_sdist")
    files = check.sdist_files(write_sdist(tmp_path / "extra.tar.gz", {**GOOD, extra: "x"}))
    found = check.problems(files, TRACKED)
    assert len(found) == 1 and said in found[0] and extra in found[0]


def test_check_sdist_names_a_tracked_file_left_out_and_exits_nonzero(tmp_path, capsys):
    check = load_script("check_sdist")
    sdist = write_sdist(tmp_path / "short.tar.gz", {k: v for k, v in GOOD.items() if k != "mrec_warp/kernels/mw_cpu.h"})
    files = check.sdist_files(sdist)
    assert check.problems(files, TRACKED) == [
        "mrec_warp/kernels/mw_cpu.h: tracked by git but missing from the sdist; add it to MANIFEST.in"]
    # the real checkout tracks far more than this toy sdist has: the command fails, one line each
    assert check.main([str(sdist), "--root", str(ROOT)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err and all(line.startswith("short.tar.gz: mrec_warp/") for line in err)


@pytest.mark.skipif(not os.environ.get("MW_TEST_INSTALLED"), reason="only under `make test-wheel`")
def test_suite_runs_on_the_installed_wheel_not_the_source_tree():
    from mrec_warp.kernels import warp

    for module in (mrec_warp, warp):
        where = Path(module.__file__).resolve()
        assert ROOT / "mrec_warp" not in where.parents, f"{module.__name__} imported from the checkout: {where}"
        assert "site-packages" in where.parts
