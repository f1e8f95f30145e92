"""Write the references generated from the registry of model families.

Usage: python scripts/write_parameter_table.py [OUTPUT] [--api API]

* OUTPUT (default: docs/reference/parameters.rst): every family's declared parameters as reST
  tables, from each model class's ``PARAMETERS`` (mrec_warp/models/declared.py);
* API (default: docs/reference/api.rst): the list of model classes in its "Models" section,
  rewritten in place from ``mrec_warp.models.__all__`` (the base and every registered class,
  in the registry's order) below the comment :data:`MARKER`; the rest of the file is kept.

tests/test_declared.py and tests/test_registry.py check that the committed files equal what
this writes.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import List

import mrec_warp.models
from mrec_warp.models.declared import parameter_tables
from mrec_warp.models.families import FAMILIES

DOCS = Path(__file__).resolve().parent.parent / "docs" / "reference"
#: Where the documentation expects the files, from the repository's root.
DEFAULT = DOCS / "parameters.rst"
API_DEFAULT = DOCS / "api.rst"
#: The comment in api.rst above the autosummary whose names this script writes.
MARKER = ".. The model classes below are written by scripts/write_parameter_table.py, from the registry."

_LISTING = re.compile(r"(?P<head>" + re.escape(MARKER) + r"\n\n\.\. autosummary::\n(?:   :.*\n)*\n)"
                      r"(?P<names>(?:   \w+\n)+)")


def model_classes() -> List[str]:
    """The model classes the API reference lists: ``mrec_warp.models.__all__`` without functions."""
    return [name for name in mrec_warp.models.__all__ if isinstance(getattr(mrec_warp.models, name), type)]


def api_reference(text: str) -> str:
    """``text`` (api.rst) with the names under :data:`MARKER` replaced by :func:`model_classes`."""
    found = _LISTING.search(text)
    if found is None:
        raise ValueError(f"api.rst has no autosummary below the comment {MARKER!r}")
    names = "".join(f"   {name}\n" for name in model_classes())
    return text[:found.start("names")] + names + text[found.end("names"):]


def main(argv) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", nargs="?", type=Path, default=DEFAULT, help="the parameter reference")
    parser.add_argument("--api", type=Path, default=API_DEFAULT, help="the API reference to update")
    args = parser.parse_args(argv[1:])
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(parameter_tables(FAMILIES), encoding="utf-8")
    print(f"wrote {args.output}")
    args.api.write_text(api_reference(args.api.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {args.api}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
