"""The ``--model`` names of the registered families, for messages of model modules.

:mod:`.families` imports every family and fills :data:`FAMILY_NAMES` when it is imported;
a model module that names "the families that can do this" in a message reads it here,
without importing the registry (which imports that module: a cycle).
"""
from __future__ import annotations

from typing import Dict

#: ``--model`` name -> class of every registered family (filled by :mod:`.families`).
FAMILY_NAMES: Dict[str, type] = {}


def family_names(capability: str) -> str:
    """The registered families with ``capability``, as a message lists them ("warp, wrmf or
    rp3beta"); "a family that can" before the registry is imported."""
    names = [name for name, cls in FAMILY_NAMES.items() if getattr(cls, capability, False)]
    if not names:
        return "a family that can"
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
