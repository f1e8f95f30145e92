"""Check that an sdist holds what a source build needs and nothing else; print its contents.

    python scripts/check_sdist.py dist/mrec_warp-0.1.0.tar.gz

Needed: the build files (pyproject.toml, setup.py), README.rst and LICENSE (the metadata
points at them), and every file git tracks under mrec_warp/ (so a new kernel header or
module that MANIFEST.in misses fails here, not in a user's build). Nothing else: no tests,
no data, no scripts, no Cython-generated .c, no compiled modules. Works offline (unlike
check-manifest, which builds its own sdist in an isolated environment); git is optional, the
tracked-files check is skipped without it.

Exit 0 and a summary, or exit 1 with one line per problem.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
from collections import Counter
from pathlib import Path, PurePosixPath

PACKAGE = "mrec_warp"
# Files at the top of the sdist: ours, plus the ones setuptools writes itself.
TOP_LEVEL = {"pyproject.toml", "setup.py", "README.rst", "LICENSE", "MANIFEST.in", "PKG-INFO", "setup.cfg"}
REQUIRED = {"pyproject.toml", "setup.py", "README.rst", "LICENSE", "PKG-INFO"}
PACKAGE_SUFFIXES = {".py", ".pyx", ".pxd", ".h"}


def sdist_files(path: Path) -> dict[str, int]:
    """Relative path -> size of every regular file, without the ``name-version/`` prefix."""
    with tarfile.open(path) as tar:
        files = {}
        for member in tar.getmembers():
            if member.isfile():
                parts = PurePosixPath(member.name).parts
                files[str(PurePosixPath(*parts[1:]))] = member.size
        return files


def tracked_package_files(root: Path) -> set[str] | None:
    """Files git tracks under the package, or None where there is no git checkout."""
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", PACKAGE], capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return {line for line in out.splitlines() if line}


def problems(files: dict[str, int], tracked: set[str] | None) -> list[str]:
    found = []
    for name in sorted(files):
        path = PurePosixPath(name)
        top = path.parts[0]
        if len(path.parts) == 1:
            if name not in TOP_LEVEL:
                found.append(f"{name}: not needed by a source build; drop it from MANIFEST.in")
        elif top == f"{PACKAGE}.egg-info":
            continue  # setuptools' own metadata
        elif top != PACKAGE:
            found.append(f"{name}: outside the package ({top}/ is not needed by a source build); "
                         f"drop it from MANIFEST.in")
        elif path.suffix not in PACKAGE_SUFFIXES:
            found.append(f"{name}: a {path.suffix or 'suffix-less'} file in the package "
                         f"(generated or stray?); exclude it in MANIFEST.in")
    for name in sorted(REQUIRED - set(files)):
        found.append(f"{name}: missing; a source build or the metadata needs it")
    for name in sorted((tracked or set()) - set(files)):
        found.append(f"{name}: tracked by git but missing from the sdist; add it to MANIFEST.in")
    return found


def summary(files: dict[str, int]) -> str:
    kinds = Counter(PurePosixPath(name).suffix or PurePosixPath(name).name for name in files)
    listed = ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items()))
    return f"{len(files)} files, {sum(files.values()) / 1024:.0f} KiB unpacked: {listed}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sdist", type=Path)
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1],
                        help="the source checkout whose git-tracked package files must all be in it")
    parser.add_argument("--list", action="store_true", help="print every file too")
    args = parser.parse_args(argv)
    files = sdist_files(args.sdist)
    if args.list:
        for name, size in sorted(files.items()):
            print(f"  {size:>9}  {name}")
    tracked = tracked_package_files(args.root)
    found = problems(files, tracked)
    for line in found:
        print(f"{args.sdist.name}: {line}", file=sys.stderr)
    note = "" if tracked is not None else " (no git checkout: tracked files not compared)"
    print(f"{args.sdist.name}: {summary(files)}{note}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
