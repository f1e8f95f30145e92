"""The cut-off of a ``global-time`` split: a unix timestamp or an ISO 8601 date, read the
one way it can be read (:func:`parse_cutoff`), and shown as both (:func:`iso_time`)."""
from __future__ import annotations

import math
import numbers
import re
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError

#: The only date forms a cut-off takes: ISO 8601 ``YYYY-MM-DD[THH:MM[:SS[.f]]][Z|+hh:mm]`` (a space
#: may stand for the ``T``). Anything else (``01/06/2021``: 6 January or 1 June?) is refused
#: rather than read in one locale's order.
_ISO_CUTOFF = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$")
#: What a cut-off that is not one of them is told.
CUTOFF_FORMS = "an ISO 8601 date YYYY-MM-DD[THH:MM[:SS]][Z|+hh:mm] or a unix timestamp"


def parse_cutoff(cutoff: Any) -> int:
    """A cut-off as a unix timestamp in seconds: a number (or its text), or an ISO 8601 date
    or date-time (``2020-01-31``, ``2020-01-31T12:00:00``, ``2020-01-31T12:00+02:00``; UTC
    unless it names a zone). Other date forms (``01/06/2021``, ``31 Jan 2020``) are refused:
    their day and month order is a guess.

    A fractional timestamp is rounded down: timestamps are whole seconds, and a row at
    second ``t`` is later than a cut-off ``t - 0.5`` as it is than ``t - 1``.
    """
    if isinstance(cutoff, bool):
        cutoff = str(cutoff)
    if isinstance(cutoff, numbers.Real):
        value = float(cutoff)
    else:
        text = str(cutoff).strip()
        try:
            value = float(text)
        except ValueError:
            stamp = None
            if _ISO_CUTOFF.match(text):
                try:
                    stamp = pd.Timestamp(text)
                except (ValueError, TypeError):  # 2020-13-45: the form, not a date
                    stamp = None
            if stamp is None or stamp is pd.NaT:
                raise InputError(f"cut-off {cutoff!r} is not {CUTOFF_FORMS}",
                                 hint="e.g. `cutoff=2020-01-31`, `cutoff=2020-01-31T12:00:00` or `cutoff=1580428800`") from None
            stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp
            return int(np.floor(stamp.timestamp()))
    if not math.isfinite(value):
        raise InputError(f"cut-off {cutoff!r} is not a finite number", hint="e.g. `cutoff=2020-01-31`")
    return int(np.floor(value))


def iso_time(seconds: int) -> str:
    """A unix timestamp as an ISO date-time in UTC (and the number, which is what the data holds)."""
    try:
        return f"{pd.Timestamp(seconds, unit='s', tz='UTC').strftime('%Y-%m-%dT%H:%M:%SZ')}, unix {seconds}"
    except (OverflowError, ValueError):  # timestamps that are not seconds since 1970
        return str(seconds)


__all__ = ["CUTOFF_FORMS", "iso_time", "parse_cutoff"]
