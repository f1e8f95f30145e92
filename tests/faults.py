"""Faults injected into the units of the job engine, for the tests of resuming, killed workers
and signals (the package itself has no hook for them).

A :class:`Fault` is an action at one unit of a job: the first time unit ``unit`` starts,
``raise`` makes it fail (``RuntimeError: injected failure in part N``), ``kill`` kills the
process running it (SIGKILL) and ``wait`` holds it until :meth:`Fault.release` (at most a
minute). It fires once -- a marker file in the fault's own folder says it did -- so the rerun
of a job runs that unit.

The fault takes the place of the unit functions of the job engine's clients (recommend parts,
sub-model fits, tune trials, experiment runs): a picklable stand-in that fires, then calls the
real function. :meth:`Fault.install` puts it in this process (undone by ``monkeypatch``);
:meth:`Fault.argv` starts ``mrec-warp`` in a new process with it installed. A worker in another
process (processes, Dask) gets the stand-in with its task, so the fault fires where the unit runs;
:meth:`Fault.env` lets such workers, and the command, import this module.
"""
from __future__ import annotations

import functools
import importlib
import inspect
import json
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

#: The unit functions of the job engine's clients (module, name), and the argument that
#: numbers the unit.
UNITS: Dict[Tuple[str, str], str] = {
    ("mrec_warp.stages.recommend", "_recommend_part"): "part",
    ("mrec_warp.stages.submodels", "_fit_submodel"): "index",
    ("mrec_warp.stages.trials", "run_trial"): "trial",
    ("mrec_warp.experiments.run", "run_unit"): "index",
}
#: Modules that hand a unit function to the job engine under their own name for it.
IMPORTED_AS: Dict[Tuple[str, str], Tuple[str, str]] = {
    ("mrec_warp.stages.tune", "run_trial"): ("mrec_warp.stages.trials", "run_trial"),
}
#: The folder this suite is imported from: a command or worker started by a test imports
#: this module from it (the checkout, or the installed-wheel suite's folder of links).
SUITE_ROOT = Path(__file__).absolute().parents[1]

#: The real unit functions of this process, where a stand-in took their place.
_REAL: Dict[Tuple[str, str], Any] = {}

_BOOT = """
import json, sys
from tests.faults import Fault
Fault(**json.loads(sys.argv[1])).install()
from mrec_warp.cli import main
main(sys.argv[2:], prog_name="mrec-warp")
"""


@dataclass(frozen=True)
class Fault:
    """``action`` (``raise``, ``kill`` or ``wait``) the first time unit ``unit`` of a job
    starts; its markers go to ``folder``."""

    action: str
    unit: int
    folder: str

    @classmethod
    def at(cls, spec: str, folder: os.PathLike) -> "Fault":
        """The fault ``"ACTION:UNIT"`` (e.g. ``"raise:2"``), its markers in ``folder`` (made here)."""
        action, _, unit = spec.partition(":")
        assert action in ("raise", "kill", "wait") and unit.isdigit(), spec
        Path(folder).mkdir(parents=True, exist_ok=True)
        return cls(action, int(unit), str(folder))

    @property
    def fired(self) -> Path:
        """The marker that exists once the fault fired (a ``wait``: the unit is held)."""
        return Path(self.folder) / f"{self.action}-{self.unit}"

    def release(self) -> None:
        """Let a held unit go on (and any later ``wait`` of this fault pass at once)."""
        (Path(self.folder) / "go").touch()

    def install(self, monkeypatch: Any = None) -> "Fault":
        """Put the stand-ins in place of the unit functions of this process; undone by
        ``monkeypatch`` when given (a test), for good otherwise (a command started for it)."""
        places = [(place, place) for place in UNITS] + list(IMPORTED_AS.items())
        for (module_name, name), unit in places:
            module = importlib.import_module(module_name)
            _REAL.setdefault(unit, getattr(importlib.import_module(unit[0]), unit[1]))
            stand_in = functools.partial(_fault_then_unit, self, unit)
            if monkeypatch is not None:
                monkeypatch.setattr(module, name, stand_in)
            else:
                setattr(module, name, stand_in)
        if monkeypatch is not None:  # worker processes started from here import this module
            monkeypatch.setenv("PYTHONPATH", self.env()["PYTHONPATH"])
        return self

    def env(self, base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        """``base`` (default: this process's environment) with this suite importable."""
        env = dict(os.environ if base is None else base)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SUITE_ROOT), env.get("PYTHONPATH")) if p)
        return env

    def to_json(self) -> str:
        """The fault as text, for a new process (``Fault(**json.loads(text))``)."""
        return json.dumps(asdict(self))

    def argv(self, *args: Any) -> List[str]:
        """``mrec-warp ARGS`` in a new Python process, with this fault installed (start it with
        :meth:`env`)."""
        return [sys.executable, "-c", _BOOT, self.to_json(), *map(str, args)]


def _fault_then_unit(fault: Fault, unit: Tuple[str, str], *args: Any, **kwargs: Any) -> Any:
    """The stand-in of a unit function: fire ``fault`` if this is its unit, then run the unit."""
    # a worker in another process imported the package afresh: its module holds the real function
    real = _REAL.get(unit) or getattr(importlib.import_module(unit[0]), unit[1])
    number = inspect.signature(real).bind(*args, **kwargs).arguments[UNITS[unit]]
    if int(number) == fault.unit:
        _fire(fault)
    return real(*args, **kwargs)


def _fire(fault: Fault) -> None:
    try:
        fd = os.open(fault.fired, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return  # fired already: this is the rerun
    os.close(fd)
    if fault.action == "wait":
        go, deadline = Path(fault.folder) / "go", time.monotonic() + 60
        while not go.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return
    if fault.action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)  # the signal ends the process
    raise RuntimeError(f"injected failure in part {fault.unit}")
