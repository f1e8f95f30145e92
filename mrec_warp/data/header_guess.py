"""Whether the first line of a ratings file names its columns (a header) or holds data, and
why, in words the reading log repeats (:func:`~mrec_warp.data.ratings.read_ratings`)."""
from __future__ import annotations

import re
from typing import List, Optional, Tuple

#: Header names that give a header away even when every column holds text ids; compared
#: lower-cased without ``-``, ``_``, spaces and dots (``user-id`` is ``userid``).
_HEADER_WORDS = frozenset(
    "user userid uid customer customerid clientid playerid memberid accountid visitorid "
    "item itemid iid movie movieid product productid gameid gametitle songid trackid artistid bookid "
    "isbn articleid "
    "rating ratings value score weight count counts hours playtime plays playcount quantity qty clicks "
    "timestamp ts time date datetime".split()
)

_NOT_ALNUM = re.compile(r"[-_ .]")

#: A number as a ratings file writes one (``nan`` / ``inf`` are words here, not numbers).
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")

#: The start of an ISO date, as a timestamp column may hold.
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _is_data_value(token: str) -> bool:
    """Whether a field is a number or a date, which no column name is."""
    t = token.strip()
    return bool(_NUMBER.fullmatch(t) or _ISO_DATE.match(t))


def guess_header(first: List[str], second: Optional[List[str]]) -> Tuple[bool, str]:
    """Whether the first line names the columns rather than holding an interaction, and why.

    A line with any field that is a number or a date is data: column names are words, and
    a data line taken as a header would be lost and shift ``--columns`` names onto its
    values. Otherwise the line is a header when a field is a well-known column name (user,
    item, rating, timestamp, ...; ``user-id`` and ``userId`` too) or when a column holds
    text on the first line and a number on the second. A text-only line with neither is
    read as data: losing a line silently is worse than a clear error on a header's text.
    """
    first = [t.strip() for t in first]
    numbers = [i for i, t in enumerate(first) if _is_data_value(t)]
    if numbers:
        return False, f"column {numbers[0]} holds {first[numbers[0]]!r}, a number"
    words = [t for t in first if _NOT_ALNUM.sub("", t.lower()) in _HEADER_WORDS]
    if words:
        return True, f"{words[0]!r} is a column name and no field is a number"
    for i, (a, b) in enumerate(zip(first, second or [])):
        if a and _is_data_value(b):
            return True, f"column {i} holds the word {a!r} above the number {b.strip()!r}"
    return False, "no field is a number, but no column name was recognised either"


__all__ = ["guess_header"]
