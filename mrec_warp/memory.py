"""Memory a size implies, checked before allocating: one estimate, one limit, one message.

An option such as ``factors``, ``k``, ``n_items`` or ``num_splits`` fixes the size of
arrays long before they are allocated. :func:`check_memory` compares such an estimate with
what this process may still use (:func:`available_bytes`: the system's available memory,
a container's memory limit, and ``ulimit -v``, whichever is smallest) and refuses with one
line naming the parameter to change and the estimate, instead of a ``MemoryError`` (or the
kernel's out-of-memory killer) after minutes of work.

Estimates count the largest arrays only (a lower bound), so a refusal is never wrong; an
estimate just under the limit can still run out of memory later.
"""
from __future__ import annotations

import os
import resource
from typing import Optional

from .errors import InputError

#: Bytes assumed when no limit can be read (not Linux, no ``sysconf``).
FALLBACK_BYTES = 8 * 2**30


def _meminfo_available() -> Optional[int]:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):  # pragma: no cover - non-POSIX
        return None


def _cgroup_available() -> Optional[int]:
    """What a container's memory limit (cgroup v2, else v1) leaves, or None without one."""
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            with open(limit_file) as fh:
                text = fh.read().strip()
            if text == "max":
                return None
            limit = int(text)
            with open(usage_file) as fh:
                used = int(fh.read().strip())
        except (OSError, ValueError):
            continue
        if limit >= 2**60:  # cgroup v1 says "no limit" with a huge number
            return None
        return max(limit - used, 0)
    return None


def _address_space_left() -> Optional[int]:
    """What ``ulimit -v`` (RLIMIT_AS) leaves this process, or None when it is unlimited."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ValueError, OSError):  # pragma: no cover
        return None
    if soft == resource.RLIM_INFINITY:
        return None
    used = 0
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    used = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    return max(soft - used, 0)


def available_bytes() -> int:
    """Bytes this process can still allocate: the smallest of the system's available memory
    (``MemAvailable``), what a container's memory limit leaves, and what ``ulimit -v``
    leaves of the address space."""
    found = [b for b in (_meminfo_available(), _cgroup_available(), _address_space_left()) if b is not None]
    return min(found) if found else FALLBACK_BYTES


def limited_by_address_space() -> bool:
    """Whether ``ulimit -v`` is what limits allocations (a ``MemoryError`` then says so)."""
    left = _address_space_left()
    return left is not None and left <= available_bytes()


def format_bytes(n: float) -> str:
    """``3.4 TiB``, ``950 MiB``, ``12 KiB``: binary units, three significant figures or so."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            value = n / size
            return f"{value:,.1f} {unit}" if value < 100 else f"{value:,.0f} {unit}"
    return f"{int(n)} bytes"


def check_memory(nbytes: float, what: str, param: str, hint: Optional[str] = None) -> None:
    """Raise :class:`InputError` when ``nbytes`` exceeds :func:`available_bytes`.

    Parameters
    ----------
    nbytes : float
        The estimate (a float: products of large options do not overflow it).
    what : str
        What needs it, e.g. ``"factors of 943 users and 1,682 items"``.
    param : str
        The parameter that sets the size, named in the message (the CLI shows its flag).
    hint : str, optional
        How to fix it; default: lower the parameter.
    """
    limit = available_bytes()
    if nbytes > limit:
        raise InputError(f"{what} need about {format_bytes(nbytes)} of memory, more than the "
                         f"{format_bytes(limit)} available", hint=hint or f"lower `{param}`")
