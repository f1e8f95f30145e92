"""Print the requirements of one optional-dependency group of pyproject.toml, one a line.

    pip install $(python scripts/extra_requires.py docs)

`make docs` installs the ``docs`` extra this way: ``pip install -e '.[docs]'`` would rebuild
the editable package (and so compile the kernels) only to add Sphinx beside it.
"""
from __future__ import annotations

import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10: tomli is a dependency of the package there
    import tomli as tomllib


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: extra_requires.py EXTRA", file=sys.stderr)
        return 2
    project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())["project"]
    extras = project.get("optional-dependencies", {})
    if argv[0] not in extras:
        print(f"pyproject.toml has no extra {argv[0]!r} (it has: {', '.join(sorted(extras))})", file=sys.stderr)
        return 2
    print("\n".join(extras[argv[0]]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
