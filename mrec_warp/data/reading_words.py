"""What :func:`~mrec_warp.data.ratings.read_ratings` found in a file (its ``attrs["reading"]``:
the header line, which column is what), in the words the commands log."""
from __future__ import annotations

from typing import Any, Dict

from ..progress import plural


def cut(text: str, limit: int) -> str:
    """``text`` quoted as Python does, cut to ``limit`` characters with an ellipsis when longer."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."


def describe_reading(r: Dict[str, Any]) -> str:
    """Two lines from ``read_ratings``' ``attrs["reading"]``: what line 1 is, and which
    column became user, item, value and timestamp. Columns count from 0 here as in
    ``--columns`` (which the line repeats) and in every message."""
    if r.get("format") == "parquet":  # columns named in the file, no header line
        first = f"Parquet file of {plural(r['fields'], 'column')}, named in the file"
    elif r["header"]:
        line = r["header_line"]
        first = (f"line {line['line']} taken as a header: {cut(line['text'], 80)} "
                 f"({r['header_reason']}; use --no-header if it is data)" if r["header_guessed"] else
                 f"line {line['line']} is a header ({r['header_reason']})")
    else:
        first = "no header line" + (f" ({r['header_reason']}" + (
            "; use --header if line 1 names the columns)" if "no column name" in r["header_reason"] else ")"))
    roles = ", ".join(f"{role} = column {c['position']}" + (f" {c['name']!r}" if c["name"] is not None else "")
                      for role, c in r["columns"].items())
    ignored = "".join(f"; column {c['position']} ignored ({c['why']})" for c in r["ignored_columns"])
    if r.get("empty_trailing_lines"):
        ignored += (f"\n{plural(r['empty_trailing_lines'], 'line')} had empty trailing fields (beyond the "
                    f"{r['fields']} columns of the first line), ignored")
    again = ",".join(str(c["position"]) for c in r["columns"].values())
    return f"{first}\ncolumns (counted from 0): {roles} (--columns {again}){ignored}"


__all__ = ["cut", "describe_reading"]
