"""Write docs/reference/parameters.rst: every model family's declared parameters as reST tables.

Usage: python scripts/write_parameter_table.py [OUTPUT]   (default: docs/reference/parameters.rst)

The tables come from each model class's ``PARAMETERS`` (mrec_warp/models/declared.py);
tests/test_declared.py checks that the committed file equals what this writes.
"""
from __future__ import annotations

import sys
from pathlib import Path

from mrec_warp.models.declared import parameter_tables
from mrec_warp.models.families import FAMILIES

#: Where the documentation expects the file, from the repository's root.
DEFAULT = Path(__file__).resolve().parent.parent / "docs" / "reference" / "parameters.rst"


def main(argv) -> int:
    out = Path(argv[1]) if len(argv) > 1 else DEFAULT
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(parameter_tables(FAMILIES), encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
