"""The job engine: work cut into independent units, each with its own part file.

A long job (top-k for every user, sub-model fits, tuning trials) is cut into units that
need nothing from each other. Its four clients -- :mod:`~mrec_warp.stages.recommend`,
:mod:`~mrec_warp.stages.submodels`, :mod:`~mrec_warp.stages.tune` and the parallel
evaluation of :mod:`~mrec_warp.stages.evaluate` -- go through the same steps:

1. **fingerprint** what the job is (:func:`fingerprint`: the model or data and every
   option that changes the output);
2. open its **work folder** (:class:`~mrec_warp.workdir.WorkDir`): locked for this run, and
   refused when it holds another job or files the tool did not write;
3. list the **to-do**: units whose part file does not exist yet (a rerun **resumes**);
4. **stage** the inputs for workers in other processes: one ``inputs.npz`` per job, in one
   layout for sparse matrices and dense arrays (:func:`write_inputs`, :func:`read_inputs`);
5. check that every Dask worker **sees** the work folder and the input files;
6. **map** the units over the execution context's workers (as Dask tasks named after the
   job and the unit, e.g. ``fit-submodel-003``), showing the lines they log as they come
   (:mod:`~mrec_warp.unit_logs`);
7. **assemble** the parts (the client's job) and **clean up** the folder.

Each unit writes its part through a temporary name and a rename, so a part file either is
complete or does not exist: a unit that runs twice (Dask re-runs the calls of a worker that
died) writes the same bytes to the same name, and nothing is lost or duplicated.

Workers in other processes read their inputs from files -- the model file the job was
given, or the staged copies -- and keep them in a per-process cache
(:func:`~mrec_warp.worker_cache.cached`), so a call ships only a few numbers.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import scipy.sparse as sp

from .context import ExecutionContext
from .files import PathLike, atomic_path, owner_tag, remove_stale_temps, rename_guard, stop_atomic_writes
from .data.npz import NpzArchive, check_csr, read_arrays, write_npz
from .errors import InputError
from .progress import SILENT, Progress
from .unit_logs import LogRelay, log_name
from .workdir import JOB_FILE, WorkDir, holds_work
from .worker_cache import ModelScorer, cached, cached_model  # noqa: F401 - stages import them from here
from .workers import Workers, stop_process_workers

#: Version of the work-folder layout, part of every job's description.
JOB_VERSION = 1

#: The file holding a job's staged inputs (:func:`write_inputs`).
INPUTS_FILE = "inputs.npz"

#: How to repair a damaged work-folder file, appended to its error.
WORK_HINT = "the work folder is damaged; delete it (or this file) and run the command again"


def damaged(path: PathLike, what: str) -> InputError:
    """The one-line error of a damaged work-folder file."""
    return InputError(what, path=str(path), hint=WORK_HINT)


def read_work_arrays(path: PathLike, spec: Dict[str, Tuple[str, Tuple]]) -> Dict[str, np.ndarray]:
    """The arrays ``spec`` names (key -> (dtype kinds, shape)) of a work-folder ``.npz``,
    sizes and types checked before decompression (:mod:`mrec_warp.data.npz`)."""
    return read_arrays(path, spec, "a work-folder file", WORK_HINT)


# ---------------------------------------------------------------------------------------------
# staged inputs: one layout for sparse matrices and dense arrays
# ---------------------------------------------------------------------------------------------
def write_inputs(path: PathLike, matrices: Optional[Dict[str, sp.spmatrix]] = None,
                 arrays: Optional[Dict[str, np.ndarray]] = None, values: Sequence[str] = ()) -> None:
    """Save a job's inputs for its workers in one ``.npz``, atomically.

    A matrix ``m`` is stored as ``m.shape`` (int64), ``m.indptr`` (int64), ``m.indices``
    (int32) and, when its name is in ``values``, ``m.data`` (float32); otherwise only its
    structure (every stored entry a one). Arrays are stored under their own names.
    """
    out: Dict[str, np.ndarray] = {}
    for name, matrix in (matrices or {}).items():
        csr = sp.csr_matrix(matrix)
        out[f"{name}.shape"] = np.array(csr.shape, np.int64)
        out[f"{name}.indptr"] = csr.indptr.astype(np.int64)
        out[f"{name}.indices"] = csr.indices.astype(np.int32)
        if name in values:
            out[f"{name}.data"] = csr.data.astype(np.float32)
    out.update(arrays or {})
    with atomic_path(path) as tmp:
        write_npz(tmp, out)


def read_inputs(path: PathLike, matrices: Sequence[str] = (), arrays: Optional[Dict[str, Tuple[str, Tuple]]] = None,
                values: Sequence[str] = ()) -> Dict[str, Any]:
    """The inputs :func:`write_inputs` saved, every one checked before use.

    ``matrices`` are returned as float32 CSR matrices (ones unless named in ``values``,
    whose stored values must be >= 0); ``arrays`` maps each dense array to its (dtype kinds,
    shape). A file that does not hold what the job needs is a one-line :class:`InputError`
    naming it (:data:`WORK_HINT`).
    """
    spec: Dict[str, Tuple[str, Tuple]] = dict(arrays or {})
    for name in matrices:
        spec.update({f"{name}.shape": ("iu", (2,)), f"{name}.indptr": ("iu", (None,)),
                     f"{name}.indices": ("iu", (None,))})
        if name in values:
            spec[f"{name}.data"] = ("f", (None,))
    with NpzArchive(path, "a work-folder file", WORK_HINT) as z:
        for key, (kinds, shape) in spec.items():
            z.header(key, kinds, shape)
        a = {key: z.read(key, kinds, shape) for key, (kinds, shape) in spec.items()}
    out: Dict[str, Any] = {name: a[name] for name in (arrays or {})}
    try:
        for name in matrices:
            shape = tuple(int(v) for v in a[f"{name}.shape"])
            indptr = a[f"{name}.indptr"].astype(np.int64, copy=False)
            indices = a[f"{name}.indices"]
            check_csr(indptr, indices, shape, name)
            data = a.get(f"{name}.data")
            if data is not None and (len(data) != len(indices) or not (data >= 0).all()):
                raise ValueError(f"{name} values do not match its entries or are negative")
            out[name] = sp.csr_matrix((np.ones(len(indices), np.float32) if data is None
                                       else data.astype(np.float32, copy=False),
                                       indices.astype(np.int32, copy=False), indptr), shape=shape)
    except ValueError as exc:
        raise damaged(path, str(exc)) from None
    return out


# ---------------------------------------------------------------------------------------------
# fingerprints, visibility, faults
# ---------------------------------------------------------------------------------------------
def fingerprint(*objects: Any) -> str:
    """A content hash of arrays, sparse matrices and JSON-able values (joblib's hasher)."""
    import joblib

    def plain(x):
        if sp.issparse(x):
            x = x.tocsr()
            return ("csr", x.shape, np.asarray(x.indptr, np.int64), np.asarray(x.indices, np.int64))
        return x

    return joblib.hash([plain(o) for o in objects])


def model_fingerprint(model) -> str:
    """Hash of what a model's recommendations depend on (arrays, ids, training data, class)."""
    params = {k: v for k, v in model.get_params().items() if k not in ("n_jobs", "verbose")}
    return fingerprint(type(model).__name__, json.dumps(params, sort_keys=True, default=str),
                       model.get_arrays(), model.train_, model.user_ids, model.item_ids)


def _first_missing(paths: List[str]) -> Optional[str]:
    """The first of ``paths`` this process cannot see, or ``None``."""
    return next((p for p in paths if not os.path.exists(p)), None)


def check_workdir_visible(workers: Workers, workdir: Path, *inputs: PathLike) -> None:
    """Fail early, in one line, when a Dask worker cannot see the work folder or an input file.

    Every worker is asked (``Client.run``), not just whichever ones a task lands on.
    """
    if workers.is_local_memory or workers.name == "processes":
        return
    probes = [str((workdir / JOB_FILE).resolve())] + [str(Path(p).resolve()) for p in inputs]
    for worker, missing in sorted(workers.client.run(_first_missing, probes).items()):
        if missing is not None:
            raise InputError(f"Dask worker {worker} cannot see this file", path=missing,
                             hint="put `workdir` and the input files on a filesystem every worker shares")


#: Work folders that jobs of this process keep for a rerun to resume (not temporary ones).
_KEPT_FOLDERS: List[str] = []
#: The jobs of those folders, to settle them when the run is stopped (:func:`settle_stopped_jobs`).
_KEPT_JOBS: List["Job"] = []


def resumable_folders() -> List[str]:
    """The work folders this process's jobs have kept so far and that hold work a rerun
    reuses: what an interrupted command can resume from (empty when it ran no job, only
    jobs in temporary folders, or was stopped before any unit finished)."""
    return [folder for folder in _KEPT_FOLDERS if holds_work(folder)]


def remove_dead_units_temps() -> None:
    """Remove, from the work folders of this process's jobs, the part files that units of
    killed workers were writing (their temporaries; called once the workers are gone)."""
    for folder in _KEPT_FOLDERS:
        remove_stale_temps(folder)


def settle_stopped_jobs() -> List[str]:
    """What a run stopped by a signal leaves of its jobs; returns the folders a rerun resumes.

    Called once the worker processes are gone and the run is about to exit: part files
    being written -- by killed workers, and by this process's own threads, which the exit
    cuts short -- are removed (:func:`~mrec_warp.files.stop_atomic_writes` keeps the threads
    from starting new ones). A job with no finished unit has nothing to resume: its staged
    inputs, ``job.json`` and the folder (if the tool made it) go too, as at the end of a
    finished job. A job with finished units keeps its folder for a rerun.
    """
    stop_atomic_writes()
    kept = []
    for job in list(_KEPT_JOBS):
        remove_stale_temps(job.path, mine=True)
        if any(job.folder.done(name) for name in job.parts):
            kept.append(str(job.path))
        else:
            job.finish(force_cleanup=True)
    return kept


class StaleUnitError(RuntimeError):
    """A unit finished after its work folder stopped holding its job (deleted, or reused by
    another job); its part is dropped rather than mixed into the other job's parts."""


def job_manifest(workdir: PathLike) -> Optional[bytes]:
    """The bytes of the folder's ``job.json`` (``None`` without one)."""
    try:
        return (Path(workdir) / JOB_FILE).read_bytes()
    except OSError:
        return None


@contextlib.contextmanager
def unit_of_job(workdir: PathLike, started: Any = ...) -> Iterator[None]:
    """Run a unit's body so that it writes its part only into the job it started in.

    A task that was already running when its driver stopped (Ctrl-C on a remote Dask
    cluster cannot stop it) finishes later; by then the user may have deleted the folder or
    started another job in it. The folder's ``job.json`` is read when the unit starts and
    again just before its part is renamed into place: if it changed, the part is dropped.
    Units give ``started``, the :func:`job_manifest` they read before reading the job's
    inputs, so that a part computed from another job's inputs is dropped too.
    """
    folder = Path(workdir).resolve()
    started = job_manifest(folder) if started is ... else started

    def check(target: Path) -> None:
        if Path(target).resolve().parent == folder and job_manifest(folder) != started:
            raise StaleUnitError(f"{folder} no longer holds the job this unit started in; its part was dropped")

    with rename_guard(check):
        yield


# ---------------------------------------------------------------------------------------------
# the engine
# ---------------------------------------------------------------------------------------------
class Job:
    """One run of a resumable job on an execution context.

    Parameters
    ----------
    context : ExecutionContext
        Where the units run (entered by the caller) and whether to keep the parts.
    description : dict
        What the job is (JSON-able; :func:`fingerprint` its inputs): a work folder that
        holds another job is refused.
    parts : sequence of str
        The part file of each unit, in order.
    folder : path-like, optional
        The work folder. ``None``: a temporary one (prefix ``mrec-warp-KIND-``), removed
        however the job ends -- no resume then.
    progress : Progress

    Attributes
    ----------
    todo : list of int
        The units whose part file does not exist yet.
    """

    def __init__(self, context: ExecutionContext, description: Dict[str, Any], parts: Sequence[str],
                 folder: Optional[PathLike] = None, progress: Progress = SILENT) -> None:
        self.context = context
        self.progress = progress
        self.kind = str(description.get("kind", "job"))
        self.temporary: Optional[str] = None
        if folder is None:
            prefix = f"mrec-warp-{description.get('kind', 'job')}-"
            remove_stale_temps(tempfile.gettempdir(), prefix=prefix)  # of killed runs
            self.temporary = folder = tempfile.mkdtemp(prefix=f"{prefix}{owner_tag()}")
            # nothing in it can be resumed: it goes however the job ends (an error, a signal,
            # the interpreter exiting), not only through finish()
            weakref.finalize(self, shutil.rmtree, self.temporary, True)
        self.folder = WorkDir(folder, {**description, "version": description.get("version", JOB_VERSION)},
                              progress)
        if self.temporary is None:
            _KEPT_FOLDERS.append(str(self.folder.path))
            _KEPT_JOBS.append(self)
        self.parts = list(parts)
        self.todo = [i for i, name in enumerate(self.parts) if not self.folder.done(name)]
        self.inputs: List[str] = []  # files the workers read, checked for visibility before the run
        self._staged: List[str] = []  # files this job made in its folder (removed at the end)
        self._logs: List[Path] = []  # the log files of units that log (relayed by run())

    @property
    def path(self) -> Path:
        return self.folder.path

    @property
    def skipped(self) -> int:
        """Units an earlier run finished."""
        return len(self.parts) - len(self.todo)

    def part(self, index: int) -> Path:
        return self.folder.file(self.parts[index])

    @property
    def off_process(self) -> bool:
        """Whether the workers need their inputs as files (processes, Dask)."""
        return bool(self.todo) and not self.context.is_local_memory

    def stage(self, name: str, write: Callable[[Path], None]) -> str:
        """A staged input: ``write(path)`` once into the work folder (a rerun reuses it);
        returns the absolute path the workers read."""
        path = self.folder.file(name)
        if not self.folder.done(name):
            write(path)
        self._staged.append(name)
        return self.read_by_workers(path)

    def read_by_workers(self, path: PathLike) -> str:
        """Register a file the workers read (checked for visibility before the run)."""
        resolved = str(Path(path).resolve())
        self.inputs.append(resolved)
        return resolved

    def unit_log(self, index: int) -> Optional[str]:
        """The file unit ``index`` logs to (:func:`~mrec_warp.unit_logs.unit_progress`), or
        ``None`` when this run shows no log lines."""
        if not self.progress.verbose:
            return None
        path = self.folder.file(log_name(self.parts[index])).resolve()
        self._logs.append(path)
        return str(path)

    def run(self, func: Callable, tasks: Iterable[Tuple], desc: str = "parts", unit: str = "part",
            ordered: bool = False, lines: bool = True) -> Iterator[Any]:
        """``func(*task)`` for each task of the to-do (in its order) on the context's workers,
        as they finish, relaying what the units log meanwhile (a bar, or with ``lines`` a
        line per finished unit: :meth:`~mrec_warp.progress.Progress.iterate`)."""
        tasks = list(tasks)
        if not tasks:
            return
        if self.off_process:
            check_workdir_visible(self.context, self.path, *self.inputs)
        # task i is unit todo[i] (every client builds its tasks so): name it for the dashboard
        names = [f"{self.kind}-{Path(self.parts[i]).stem}" for i in self.todo] if len(tasks) == len(self.todo) \
            else None
        try:
            with LogRelay(self._logs, self.progress) as relay:  # only files some unit was given
                for result in self.progress.iterate(self.context.map(func, tasks, ordered=ordered, names=names),
                                                    total=len(tasks), desc=desc, unit=unit, lines=lines):
                    relay.drain()  # a unit's own lines before the caller reports it done
                    yield result
        except Exception:
            self._drop_unfinished()
            raise

    def _drop_unfinished(self) -> None:
        """After a unit failed: the parts the other units were writing go. Their worker
        processes were stopped mid-write (joblib ends the pool on the first error), so their
        temporaries would stay beside the finished parts; they are made sure to be gone
        first, then every temporary of a dead process in the folder is removed. A thread's
        unit removes its own on its way out; a Dask worker's are swept by a rerun."""
        if self.context.name == "processes":
            stop_process_workers()
        remove_stale_temps(self.path)

    def check_complete(self) -> None:
        missing = [name for name in self.parts if not self.folder.done(name)]
        if missing:  # pragma: no cover - every unit either writes its part or raises
            raise RuntimeError(f"{len(missing)} parts missing after the run, e.g. {missing[0]}")

    def finish(self, staged: Sequence[str] = (), force_cleanup: bool = False) -> None:
        """Remove the parts and staged inputs (kept with ``keep_parts``, except in a
        temporary folder), then the lock. ``staged`` names inputs an earlier run may have
        staged though this one (with nothing left to do) did not. The units' log files go
        in any case. ``force_cleanup``: remove the job's files even with ``keep_parts``
        (a stopped job that finished no unit)."""
        with contextlib.suppress(ValueError):
            _KEPT_JOBS.remove(self)
        # only units that log leave log files (sub-models): list them once, not one per part
        parts = {log_name(name) for name in self.parts}
        logs = [p.name for p in self.folder.path.glob("*.log") if p.name in parts]
        if force_cleanup or not self.context.keep_parts or self.temporary is not None:
            self.folder.cleanup(self.parts + self._staged + list(staged) + logs)
            with contextlib.suppress(ValueError):  # nothing left to resume
                _KEPT_FOLDERS.remove(str(self.folder.path))
        else:
            self.folder.remove(logs)
            self.folder.release()
        if self.temporary is not None:
            shutil.rmtree(self.temporary, ignore_errors=True)
