"""Jobs made of independent work units, each with its own part file under a work folder.

A long job (top-k for every user, a sub-model fit, a tuning trial) is cut into units that
need nothing from each other. Each unit writes its result to ``WORKDIR/<part file>``
through a temporary name and a rename, so a part file either is complete or does not
exist. Then:

* **Retries are safe.** A unit that runs twice (Dask re-runs the calls of a worker that
  died) writes the same bytes to the same name: nothing is lost or duplicated.
* **Reruns resume.** ``WORKDIR/job.json`` records what the job is (a fingerprint of the
  model or data and every option that changes the output). A rerun of the same job skips
  the units whose part file exists; a different job in the same folder is refused.
* **The final output is atomic.** It is assembled from the parts, in order, into a
  temporary file renamed over the output; then the work folder's files are removed.

With the ``processes`` and ``dask`` backends the workers read their inputs (the model, the
training data) from files -- the model file the job was given, or copies saved once in the
work folder -- and keep them in a per-process cache, so a call ships only a few numbers.
On a multi-machine cluster the work folder (and the model file) must therefore be on a
filesystem every worker sees at the same path; :func:`check_workdir_visible` checks this
before any work starts.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np
import scipy.sparse as sp

from .data.io import (PathLike, atomic_path, atomic_write, host_name, output_encoding, owner_tag, process_alive,
                      remove_stale_temps)
from .data.npz import NpzArchive, check_csr, check_ids, read_arrays, write_npz
from .errors import InputError
from .context import context_for
from .workers import Workers, chunk_ranges
from .progress import SILENT, Progress
from .seeds import DEFAULT_SEED
from .recommend import _KernelExclusion, text_output

JOB_FILE = "job.json"
JOB_VERSION = 1

#: Users per part file when not given: small enough that an interrupted job loses little,
#: large enough that a 20M-interaction job has tens of parts, not thousands.
DEFAULT_PART_USERS = 20_000

#: Test hook, read on the workers: "kill:<part>" kills the worker process the first time
#: it starts that part, "raise:<part>" makes that part fail, "wait:<part>" holds that part
#: until a file ``.fault-go`` appears in the work folder (at most a minute) (a marker file
#: in the work folder makes each fire once). Only the test-suite sets it.
FAULT_ENV = "MREC_WARP_TEST_FAULT"


# ---------------------------------------------------------------------------------------------
# per-process cache of inputs read from files (workers load each file once)
# ---------------------------------------------------------------------------------------------
_CACHE: Dict[Tuple, Any] = {}
_CACHE_LOCK = threading.Lock()
_CACHE_MAX = 4  # a worker rarely needs more than a model and its exclusion matrix


def _cached(kind: str, path: PathLike, loader: Callable[[str], Any]) -> Any:
    """``loader(path)``, memoised per process on (path, size, mtime) so a changed file reloads."""
    st = os.stat(path)
    key = (kind, os.path.abspath(path), st.st_size, st.st_mtime_ns)
    with _CACHE_LOCK:
        if key in _CACHE:
            return _CACHE[key]
    value = loader(str(path))
    with _CACHE_LOCK:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = value
    return value


def cached_model(path: PathLike):
    """The model in ``path``, loaded once per process."""
    from .models import load

    return _cached("model", path, load)


def cached_users(path: PathLike, n_users: int) -> np.ndarray:
    """The user rows of a job saved by :func:`recommend_in_parts`, checked, loaded once per process."""
    def load(p):
        users = _read_npz(p, {"users": ("iu", (None,))})["users"]
        if len(users) and (users.min() < 0 or users.max() >= n_users):
            raise _damaged(p, f"user row {users.max() if users.max() >= n_users else users.min()}"
                              f" is outside 0..{n_users - 1}")
        return users.astype(np.int64, copy=False)

    return _cached("users", path, load)


def cached_exclusion(path: PathLike, n_items: int) -> _KernelExclusion:
    """An exclusion matrix saved by :func:`recommend_in_parts`, in the top-k kernel's index
    types, checked against the model's ``n_items`` and built once per process (not once per part)."""
    def load(p):
        z = _read_npz(p, {"shape": ("iu", (2,)), "indptr": ("iu", (None,)), "indices": ("iu", (None,))})
        n_rows, n_cols = (int(v) for v in z["shape"])
        indptr = z["indptr"].astype(np.int64, copy=False)
        try:
            if n_cols != n_items:
                raise ValueError(f"{n_cols} columns for a model of {n_items} items")
            check_csr(indptr, z["indices"], (n_rows, n_cols), "exclusion matrix")
        except ValueError as exc:
            raise _damaged(p, str(exc)) from None
        return _KernelExclusion(indptr, z["indices"].astype(np.int32, copy=False), n_rows)

    return _cached("exclusion", path, load)


class ModelScorer:
    """A picklable ``score_fn`` for :func:`~mrec_warp.recommend.iter_top_k`: pickles as the
    model file's path, and loads the model once per worker process."""

    def __init__(self, path: PathLike) -> None:
        self.path = str(path)

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        return cached_model(self.path).score_users(rows)


# ---------------------------------------------------------------------------------------------
# the work folder: job description, part files, resume
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
                       model._get_arrays(), model.train_, model.user_ids, model.item_ids)


LOCK_FILE = "lock"


def _lock_holder(path: Path) -> Optional[Dict[str, Any]]:
    """The run recorded in a lock file, or ``None`` if there is none (or it is unreadable)."""
    try:
        holder = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}  # being written right now, or damaged: treat as held by an unknown run
    return holder if isinstance(holder, dict) else {}


def _describe_holder(holder: Dict[str, Any]) -> str:
    if not holder:
        return "an unknown run"
    try:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(holder.get("started"))))
    except (TypeError, ValueError, OverflowError, OSError):  # a damaged lock still names its holder
        started = "at an unknown time"
    return f"process {holder.get('pid')} on {holder.get('host')} (started {started})"


def _link_or_create(draft: Path, lock: Path, token: str) -> None:
    """Put the lock in place if nobody holds it, else raise ``FileExistsError``."""
    try:
        os.link(draft, lock)
    except FileExistsError:
        raise
    except OSError:  # a filesystem without hard links: an exclusive create does the same
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        with os.fdopen(fd, "w") as fh:
            fh.write(token)


class WorkDir:
    """A job's folder of part files, locked for the duration of one run.

    Parameters
    ----------
    path : path-like
        Created if needed. Must be visible to every worker (a shared filesystem on a
        multi-machine cluster).
    job : dict
        What the job is (JSON-able). If the folder already holds a different job, a
        one-line :class:`InputError` says so instead of mixing parts of two jobs.
    progress : Progress, optional
        Where to say that a stale lock was taken over.

    Notes
    -----
    **Locking.** Only one run at a time may use a work folder: two runs of one job would
    write each part twice and race on the final file, and two different jobs would pass the
    job check together and mix their parts. A run writes its process id, host name and start
    time to a temporary file and hard-links it to ``WORKDIR/lock``: the link fails if the
    lock exists (like ``O_EXCL``, and unlike ``flock`` it also holds on NFS), and the lock is
    never seen half written. A second run is refused in one line naming the holder. The
    lock is removed when the run ends, also on an error. A lock left by a killed run is
    taken over, with a note, when its process is gone on this machine; a lock of another
    machine is never taken over (that run cannot be checked from here): remove the file by
    hand once sure that run is gone. One process holds a folder's lock for one job at a
    time: a later call in the same process (a retry after an error) takes it over.

    A work folder that holds no work when its run ends (for example the Dask cluster
    could not be reached) is removed again.
    """

    def __init__(self, path: PathLike, job: Dict[str, Any], progress: Progress = SILENT) -> None:
        self.path = Path(path)
        self.job = json.loads(json.dumps(job, sort_keys=True, default=str))
        created = not self.path.exists()
        self.path.mkdir(parents=True, exist_ok=True)
        self._token = self._lock(progress)
        # released when the run ends in any way: cleanup(), an exception unwinding the
        # caller, or the interpreter exiting
        self._finalizer = weakref.finalize(self, WorkDir._release, self.path, self._token, created)
        try:
            self._check_job()
            remove_stale_temps(self.path)  # parts being written by workers of a killed run
        except BaseException:
            self.release()
            raise

    # -- lock --------------------------------------------------------------------------------
    def _lock(self, progress: Progress) -> str:
        lock = self.path / LOCK_FILE
        remove_stale_temps(self.path, prefix=f".{LOCK_FILE}.")  # drafts of killed runs
        me = {"pid": os.getpid(), "host": host_name(), "started": time.time()}
        token = json.dumps(me, sort_keys=True)
        # The lock is written whole under a temporary name and linked into place: link, like
        # O_EXCL, fails if the name exists, and a reader never sees a half-written lock.
        draft = self.path / f".{LOCK_FILE}.{owner_tag()}draft"
        draft.write_text(token)
        try:
            return self._take(lock, draft, token, progress)
        finally:
            draft.unlink()

    def _take(self, lock: Path, draft: Path, token: str, progress: Progress) -> str:
        for _ in range(10):
            try:
                _link_or_create(draft, lock, token)
            except FileExistsError:
                holder = _lock_holder(lock)
                if holder is None:
                    continue  # released meanwhile: try again
                pid, host = holder.get("pid"), holder.get("host")
                mine = pid == os.getpid() and host == host_name()
                if not isinstance(pid, int) or not isinstance(host, str) or (
                        not mine and process_alive(pid, host)):
                    raise InputError(
                        f"work folder is in use by another run: {_describe_holder(holder)}",
                        path=str(self.path),
                        hint=f"wait for it to finish, or use another --workdir; if that run is gone, "
                             f"remove {lock}") from None
                if not mine:
                    progress.log(f"note: taking over the lock of {self.path} from "
                                 f"{_describe_holder(holder)}, which is no longer running")
                self._break(lock, holder)
                continue
            return token
        raise InputError("cannot take the work folder's lock (it keeps changing hands)", path=str(lock),
                         hint="another run is starting on this folder; use another --workdir")

    @staticmethod
    def _break(lock: Path, holder: Dict[str, Any]) -> None:
        """Remove a stale lock, unless another run replaced it since it was read."""
        aside = lock.with_name(f".{LOCK_FILE}.{owner_tag()}stale")
        try:
            os.rename(lock, aside)  # only one of several runs breaking the same lock gets it
        except FileNotFoundError:
            return
        if _lock_holder(aside) != holder:
            # a live run's fresh lock was moved, not the stale one: put it back (link never
            # replaces, so a lock taken meanwhile by a third run stays)
            with contextlib.suppress(OSError):
                os.link(aside, lock)
        with contextlib.suppress(FileNotFoundError):
            aside.unlink()

    @staticmethod
    def _release(path: Path, token: str, created: bool) -> None:
        lock = path / LOCK_FILE
        try:
            if lock.read_text() != token:
                return  # not ours (taken over meanwhile): nothing to release
        except OSError:
            return
        empty = False
        if created:  # a folder this run made and left without any work in it goes again
            with contextlib.suppress(OSError):
                if {p.name for p in path.iterdir()} <= {JOB_FILE, LOCK_FILE}:
                    (path / JOB_FILE).unlink(missing_ok=True)  # still under the lock
                    empty = True
        with contextlib.suppress(OSError):
            lock.unlink()
        if empty:
            with contextlib.suppress(OSError):
                path.rmdir()

    def release(self) -> None:
        """Give up the lock (also done when the object is garbage collected or the process exits)."""
        self._finalizer()

    def __enter__(self) -> "WorkDir":
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    # -- job ---------------------------------------------------------------------------------
    def _check_job(self) -> None:
        manifest = self.path / JOB_FILE
        if manifest.exists():
            try:
                found = json.loads(manifest.read_text())
            except (OSError, json.JSONDecodeError):
                found = None
            if found != self.job:
                changed = sorted(k for k in set(self.job) | set(found or {})
                                 if (found or {}).get(k) != self.job.get(k)) if isinstance(found, dict) else ["all"]
                raise InputError(
                    f"work folder holds parts of a different job (differs in: {', '.join(changed)})",
                    path=str(self.path),
                    hint="rerun the original command to resume it, or remove the folder / use another --workdir",
                )
        else:
            with atomic_write(manifest) as fh:
                json.dump(self.job, fh, indent=1, sort_keys=True)

    def file(self, name: str) -> Path:
        return self.path / name

    def done(self, name: str) -> bool:
        return (self.path / name).exists()

    def cleanup(self, names: Iterable[str]) -> None:
        """Remove the job's files (and the folder if nothing else is left in it), then the lock.

        Besides ``names``, temporary files of dead runs (a part being written when its worker
        was killed) are removed; files of other programs are left alone.
        """
        for name in list(names) + [JOB_FILE]:
            with contextlib.suppress(FileNotFoundError):
                (self.path / name).unlink()
        for marker in self.path.glob(".fault-*"):
            with contextlib.suppress(FileNotFoundError):
                marker.unlink()
        remove_stale_temps(self.path)
        self.release()
        with contextlib.suppress(OSError):
            self.path.rmdir()


def _first_missing(paths: List[str]) -> Optional[str]:
    """The first of ``paths`` this process cannot see, or ``None``."""
    return next((p for p in paths if not os.path.exists(p)), None)


def check_workdir_visible(backend: Workers, workdir: Path, *inputs: PathLike) -> None:
    """Fail early, in one line, when a Dask worker cannot see the work folder or an input file.

    Every worker is asked (``Client.run``), not just whichever ones a task lands on.
    """
    if backend.is_local_memory or backend.name == "processes":
        return
    probes = [str((workdir / JOB_FILE).resolve())] + [str(Path(p).resolve()) for p in inputs]
    for worker, missing in sorted(backend.client.run(_first_missing, probes).items()):
        if missing is not None:
            raise InputError(f"Dask worker {worker} cannot see this file", path=missing,
                             hint="put --workdir and the input files on a filesystem every worker shares")


def maybe_inject_fault(workdir: PathLike, part: int) -> None:
    """The test-suite's fault hook (see :data:`FAULT_ENV`); does nothing otherwise."""
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    action, _, which = spec.partition(":")
    if not which or int(which) != part:
        return
    marker = Path(workdir) / f".fault-{action}-{part}"
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return  # fired already: this is the retry
    os.close(fd)
    if action == "wait":
        go = Path(workdir) / ".fault-go"
        deadline = time.monotonic() + 60
        while not go.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)  # pragma: no cover - the signal ends the process
    raise RuntimeError(f"injected failure in part {part}")


# ---------------------------------------------------------------------------------------------
# recommend: user ranges -> part files -> one output file
# ---------------------------------------------------------------------------------------------
_PART_SUFFIX = {"tsv": ".tsv", "csv": ".csv", "parquet": ".parquet"}


def _part_name(i: int, fmt: str) -> str:
    return f"part-{i:05d}{_PART_SUFFIX[fmt]}"


def _recommend_part(model_src, workdir: str, part: int, start: int, stop: int, users_src,
                    exclude_src, k: int, fmt: str, block_size: Optional[int]) -> int:
    """One unit: top-k for the users at positions ``[start, stop)`` of the job, written to its part file.

    ``model_src`` is a fitted model (threads) or a model file path (other backends);
    ``users_src`` is ``None`` (all users, in order), the job's user array (threads) or an
    ``.npz`` path of it; ``exclude_src`` is ``"train"``, ``None``, a CSR matrix or an
    ``.npz`` path of one, with rows by user index. Users are scored at their positions in
    the job (:func:`~mrec_warp.recommend.grid_scores`), so parts give the same bits as one
    stream. Returns the number of rows written (0 if the part existed already).
    """
    from .recommend import block_to_frame, default_block_size, text_format, top_k_block

    path = Path(workdir) / _part_name(part, fmt)
    if path.exists():
        return 0
    maybe_inject_fault(workdir, part)
    model = cached_model(model_src) if isinstance(model_src, (str, os.PathLike)) else model_src
    if users_src is None:
        users = np.arange(start, stop, dtype=np.int64)
    elif isinstance(users_src, np.ndarray):
        users = users_src[start:stop]
    else:
        users = cached_users(users_src, model.n_users)[start:stop]
    if isinstance(exclude_src, str) and exclude_src == "train":
        exclude = model.train_
    elif isinstance(exclude_src, (str, os.PathLike)):
        exclude = cached_exclusion(exclude_src, model.n_items)
    else:
        exclude = exclude_src
    if exclude is not None:
        exclude = _KernelExclusion.of(exclude)  # once per part, not once per block (no-op if cached)
    bs = block_size or default_block_size(model.n_items)
    n_rows = 0
    frames = (block_to_frame(model, *top_k_block(model.score_users, users[s:e], k, exclude, start + s))
              for s, e in chunk_ranges(len(users), bs))
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        with atomic_path(path) as tmp:
            writer = None
            try:
                for frame in frames:
                    table = pa.Table.from_pandas(frame, preserve_index=False)
                    writer = writer or pq.ParquetWriter(tmp, table.schema)
                    writer.write_table(table)
                    n_rows += len(frame)
            finally:
                if writer is not None:
                    writer.close()
        return n_rows
    with atomic_write(path, encoding=output_encoding(getattr(model, "id_encoding_", None))) as fh:
        for frame in frames:
            frame.to_csv(fh, header=False, index=False, float_format="%.6g", lineterminator="\n",
                         **text_format(fmt))
            n_rows += len(frame)
    return n_rows


def _assemble(parts: Sequence[Path], output: PathLike, fmt: str) -> int:
    """Concatenate part files, in order, into ``output`` atomically; return the rows."""
    n_rows = 0
    if fmt == "parquet":
        import pyarrow.parquet as pq

        with atomic_path(output) as tmp:
            writer = None
            try:
                for p in parts:
                    table = pq.read_table(p)
                    writer = writer or pq.ParquetWriter(tmp, table.schema)
                    writer.write_table(table)
                    n_rows += table.num_rows
                if writer is None:
                    import pyarrow as pa

                    pq.write_table(pa.table({"user": [], "item": [], "score": [], "rank": []}), tmp)
            finally:
                if writer is not None:
                    writer.close()
        return n_rows
    # a .gz output gets one gzip stream of the whole text, compressed as it is assembled
    with text_output(output, binary=True) as out:
        if fmt == "csv":
            out.write(b"user,item,score,rank\n")
        for p in parts:
            with open(p, "rb") as fh:
                while True:
                    chunk = fh.read(1 << 22)
                    if not chunk:
                        break
                    n_rows += chunk.count(b"\n")
                    out.write(chunk)
    return n_rows


def recommend_in_parts(
    model,
    output: PathLike,
    k: int = 10,
    users: Optional[np.ndarray] = None,
    exclude: Union[str, None, sp.csr_matrix] = "train",
    fmt: str = "tsv",
    backend: Union[str, Workers] = "threads",
    n_jobs: int = 1,
    scheduler: Optional[str] = None,
    workdir: Optional[PathLike] = None,
    part_size: Optional[int] = None,
    block_size: Optional[int] = None,
    model_file: Optional[PathLike] = None,
    keep_parts: bool = False,
    progress: Progress = SILENT,
) -> Dict[str, int]:
    """Top-k lists for many users as resumable part files, assembled into ``output``.

    Parameters
    ----------
    model : Recommender
        A fitted model.
    output : path-like
        Final file; appears only when every part is done.
    k : int
    users : int array, optional
        Row indices to recommend for (default: all users), in output order.
    exclude : "train", None or CSR matrix
        As :func:`~mrec_warp.recommend.write_recommendations`.
    fmt : {"tsv", "csv", "parquet"}
    backend, n_jobs, scheduler
        Where the parts run (see :class:`~mrec_warp.parallel.Backend`).
    workdir : path-like, optional
        Folder for the parts (default ``OUTPUT.parts``). Rerunning the same job with the
        same folder skips the finished parts.
    part_size : int, optional
        Users per part (default :data:`DEFAULT_PART_USERS`, or one block if larger).
    block_size : int, optional
        Users scored at once inside a part (bounds each worker's memory).
    model_file : path-like, optional
        The file ``model`` was loaded from: workers of process/Dask backends load it rather
        than a copy saved in the work folder.
    keep_parts : bool
        Keep the work folder after assembling (default: remove it).

    Returns
    -------
    dict
        ``rows`` written, ``parts`` in the job, ``parts_skipped`` (already done by an
        earlier run), ``parts_run``.
    """
    from .recommend import default_block_size

    users = np.arange(model.n_users, dtype=np.int64) if users is None else np.asarray(users, dtype=np.int64)
    n = len(users)
    bs = block_size or default_block_size(model.n_items)
    size = int(part_size) if part_size else max(bs, DEFAULT_PART_USERS)
    if size < 1:
        raise InputError(f"--part-size must be a positive number of users, got {part_size}")
    ranges = chunk_ranges(n, size)
    all_users = users is None or (n == model.n_users and np.array_equal(users, np.arange(n)))
    if isinstance(exclude, str):
        if exclude != "train":
            raise ValueError("exclude must be 'train', None or a sparse matrix")
        exclude_kind = "train"
    else:
        exclude_kind = "none" if exclude is None else "matrix"
    job = {
        "kind": "recommend", "version": JOB_VERSION, "model": model_fingerprint(model), "k": int(k),
        "format": fmt, "users": "all" if all_users else fingerprint(users), "n_users": n, "part_size": size,
        "exclude": exclude_kind if exclude_kind != "matrix" else fingerprint(exclude),
    }
    wd = WorkDir(workdir or f"{output}.parts", job, progress)
    names = [_part_name(i, fmt) for i in range(len(ranges))]
    todo = [i for i, name in enumerate(names) if not wd.done(name)]
    progress.log(f"recommend: {len(ranges)} parts of up to {size:,} users in {wd.path}"
                 + (f"; {len(ranges) - len(todo)} already done" if len(todo) < len(ranges) else ""))
    extra = ["model.npz", "users.npz", "exclude.npz"]  # inputs copied for workers, if any
    with context_for(backend, n_jobs, scheduler) as be:
        if todo:
            model_src: Any = model
            users_file: Optional[str] = None
            exclude_src: Any = "train" if exclude_kind == "train" else exclude
            exclude_csr = sp.csr_matrix(exclude) if exclude_kind == "matrix" else None
            if not be.is_local_memory:
                # workers read inputs from files: the model file, or copies made once here
                if model_file is None:
                    model_file = wd.file("model.npz")
                    if not model_file.exists():
                        model.save(model_file)
                model_src = str(Path(model_file).resolve())
                if not all_users:
                    users_file = str(wd.file("users.npz").resolve())
                    if not wd.done("users.npz"):
                        with atomic_path(users_file) as tmp:
                            write_npz(tmp, dict(users=users))
                if exclude_csr is not None:
                    csr = exclude_csr
                    exclude_src = str(wd.file("exclude.npz").resolve())
                    if not wd.done("exclude.npz"):
                        with atomic_path(exclude_src) as tmp:
                            write_npz(tmp, dict(indptr=csr.indptr.astype(np.int64),
                                                indices=csr.indices.astype(np.int32), shape=np.array(csr.shape, np.int64)))
                check_workdir_visible(be, wd.path, model_src)
            progress.log(f"running {len(todo)} parts on {be.describe()}")
            users_src: Any = users_file if users_file is not None else (None if all_users else users)
            tasks = [(model_src, str(wd.path), i, *ranges[i], users_src, exclude_src, k, fmt, block_size)
                     for i in todo]
            for _ in progress.iterate(be.map(_recommend_part, tasks, ordered=False), total=len(todo),
                                      desc="parts", unit="part"):
                pass
    missing = [name for name in names if not wd.done(name)]
    if missing:  # pragma: no cover - every unit either writes its part or raises
        raise RuntimeError(f"{len(missing)} parts missing after the run, e.g. {missing[0]}")
    n_rows = _assemble([wd.file(name) for name in names], output, fmt)
    if not keep_parts:
        wd.cleanup(names + extra)
    return {"rows": n_rows, "parts": len(ranges), "parts_skipped": len(ranges) - len(todo), "parts_run": len(todo)}


# ---------------------------------------------------------------------------------------------
# fit: K independent sub-models of d/K factors, concatenated
# ---------------------------------------------------------------------------------------------
def split_factors(factors: int, n_models: int) -> List[int]:
    """``factors`` spread over ``n_models`` sub-models as evenly as possible."""
    if n_models < 1 or factors < n_models:
        raise InputError(f"cannot split {factors} factors into {n_models} sub-models",
                         hint="use at most as many --sub-models as --factors")
    return [factors // n_models + (1 if i < factors % n_models else 0) for i in range(n_models)]


def _save_interactions(data, path: Path) -> None:
    csr = data.matrix
    with atomic_path(path) as tmp:
        write_npz(tmp, dict(indptr=csr.indptr.astype(np.int64), indices=csr.indices.astype(np.int32),
                            shape=np.array(csr.shape, np.int64), user_ids=data.user_ids, item_ids=data.item_ids))


def load_interactions_npz(path: PathLike):
    """Interactions saved by the work-folder helpers (checked), cached per process."""
    from .data.interactions import Interactions

    def load(p):
        with NpzArchive(p, "a work-folder file", WORK_HINT) as z:
            spec = {"shape": ("iu", (2,)), "user_ids": ("U", (None,)), "item_ids": ("U", (None,)),
                    "indptr": ("iu", (None,)), "indices": ("iu", (None,))}
            for key, (kinds, shape) in spec.items():
                z.header(key, kinds, shape)
            a = {key: z.read(key, kinds, shape) for key, (kinds, shape) in spec.items()}
        shape = (len(a["user_ids"]), len(a["item_ids"]))
        indptr = a["indptr"].astype(np.int64, copy=False)
        try:
            if tuple(int(v) for v in a["shape"]) != shape:
                raise ValueError(f"shape {tuple(a['shape'])} does not match {shape[0]} users and {shape[1]} items")
            check_ids(a["user_ids"], "user ids")
            check_ids(a["item_ids"], "item ids")
            check_csr(indptr, a["indices"], shape, "interactions")
        except ValueError as exc:
            raise _damaged(p, str(exc)) from None
        csr = sp.csr_matrix((np.ones(len(a["indices"]), np.float32), a["indices"].astype(np.int32, copy=False),
                             indptr), shape=shape)
        return Interactions(csr, a["user_ids"], a["item_ids"])

    return _cached("interactions", path, load)


def _fit_submodel(data_src, workdir: str, index: int, params: Dict[str, Any]) -> Dict[str, Any]:
    """One unit: fit sub-model ``index`` and save its arrays to its part file."""
    from .models import WARP

    path = Path(workdir) / f"submodel-{index:03d}.npz"
    if path.exists():
        return {"index": index, "skipped": True}
    maybe_inject_fault(workdir, index)
    data = load_interactions_npz(data_src) if isinstance(data_src, (str, os.PathLike)) else data_src
    t0 = time.perf_counter()
    model = WARP(**params).fit(data)
    with atomic_path(path) as tmp:
        write_npz(tmp, dict(user_factors=model.user_factors_, item_factors=model.item_factors_,
                            item_bias=model.item_bias_, best_epoch=np.int64(model.best_epoch_)))
    return {"index": index, "skipped": False, "seconds": time.perf_counter() - t0, "epochs": int(model.best_epoch_)}


def fit_submodels(
    data,
    params: Optional[Dict[str, Any]] = None,
    n_models: Optional[int] = None,
    random_state: int = DEFAULT_SEED,
    backend: Union[str, Workers] = "threads",
    n_jobs: int = 1,
    scheduler: Optional[str] = None,
    workdir: Optional[PathLike] = None,
    keep_parts: bool = False,
    progress: Progress = SILENT,
):
    """Fit ``n_models`` independent WARP sub-models at once and concatenate them (as mrec did).

    Sub-model ``m`` has ``d_m`` of the ``factors`` (``sum d_m = factors``), its own seed,
    and sees all the data; each is fitted single-threaded (so each is bit-for-bit
    reproducible), early-stopped on its own hold-out unless ``epochs`` is given. The
    result is one WARP model whose user and item factors are the sub-models' side by side
    and whose item bias is their sum, so its score is the sum of the sub-models' scores.

    Parameters
    ----------
    data : Interactions
    params : dict
        WARP parameters (``factors`` is the total).
    n_models : int, optional
        Sub-models (default: one per worker of the backend).
    random_state : int
        Seeds of the sub-models are spawned from it.
    backend, n_jobs, scheduler
        Where the sub-models run (:class:`~mrec_warp.parallel.Backend`).
    workdir : path-like, optional
        Folder for the sub-model part files; a rerun skips finished sub-models. Default: a
        temporary folder (no resume).

    Returns
    -------
    WARP
        Fitted; ``sub_models_`` holds each sub-model's factor count and epochs.
    """
    from .models import WARP

    params = dict(params or {})
    params.pop("n_jobs", None)
    params.pop("random_state", None)
    params.pop("verbose", None)
    if params.get("confidence") not in (None, "none"):
        # the work folder keeps only which pairs are positive, so sub-models would silently
        # train on binary data: refuse rather than hand back a model that ignored the values
        raise InputError("sub-models do not use confidence weights yet",
                         hint="fit one model (no sub-models) to use confidence, or drop confidence")
    total = int(params.get("factors", WARP().factors))
    tmp_dir = None
    with context_for(backend, n_jobs, scheduler) as be:
        K = int(n_models or be.workers)
        sizes = split_factors(total, K)
        seeds = [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(random_state).spawn(K)]
        job = {"kind": "fit", "version": JOB_VERSION, "data": fingerprint(data.matrix, data.user_ids, data.item_ids),
               "params": params, "sub_models": sizes, "random_state": random_state}
        if workdir is None:
            remove_stale_temps(tempfile.gettempdir(), prefix="mrec-warp-fit-")  # of killed fits
            tmp_dir = tempfile.mkdtemp(prefix=f"mrec-warp-fit-{owner_tag()}")
            workdir = tmp_dir
        wd = WorkDir(workdir, job, progress)
        names = [f"submodel-{i:03d}.npz" for i in range(K)]
        todo = [i for i in range(K) if not wd.done(names[i])]
        progress.log(f"fit: {K} sub-models of {', '.join(map(str, sizes))} factors in {wd.path}"
                     + (f"; {K - len(todo)} already done" if len(todo) < K else ""))
        data_src: Any = data
        if todo and not be.is_local_memory:
            data_src = str(wd.file("train.npz").resolve())
            if not wd.done("train.npz"):
                _save_interactions(data, wd.file("train.npz"))
            check_workdir_visible(be, wd.path, data_src)
        tasks = [(data_src, str(wd.path), i, {**params, "factors": sizes[i], "random_state": seeds[i], "n_jobs": 1})
                 for i in todo]
        if todo:
            progress.log(f"running {len(todo)} sub-models on {be.describe()}")
        for info in be.map(_fit_submodel, tasks, ordered=False):
            if not info.get("skipped"):
                progress.log(f"sub-model {info['index']}: {info['epochs']} epochs, {info['seconds']:.1f}s")
    n_users, n_items = data.matrix.shape
    parts = [_read_submodel(wd.file(n), n_users, n_items, d) for n, d in zip(names, sizes)]
    model = WARP(**{**params, "factors": total, "random_state": random_state})
    model._set_training_data(data)
    model._set_arrays({
        "user_factors": np.hstack([p["user_factors"] for p in parts]),
        "item_factors": np.hstack([p["item_factors"] for p in parts]),
        "item_bias": np.sum([p["item_bias"] for p in parts], axis=0),
    })
    model.best_epoch_ = int(max(int(p["best_epoch"]) for p in parts))
    model.epochs_done_ = model.best_epoch_
    model.sub_models_ = [{"factors": s, "epochs": int(p["best_epoch"]), "seed": sd}
                         for s, p, sd in zip(sizes, parts, seeds)]
    if not keep_parts or tmp_dir is not None:
        wd.cleanup(names + ["train.npz"])
    if tmp_dir is not None:
        shutil.rmtree(tmp_dir, ignore_errors=True)
    return model


#: How to repair a damaged work-folder file, appended to its error.
WORK_HINT = "the work folder is damaged; delete it (or this file) and run the command again"


def _damaged(path: PathLike, what: str) -> InputError:
    return InputError(what, path=str(path), hint=WORK_HINT)


def _read_npz(path: PathLike, spec: Dict[str, Tuple[str, Tuple]]) -> Dict[str, np.ndarray]:
    """The arrays ``spec`` names (key -> (dtype kinds, shape)) of a work-folder ``.npz``,
    sizes and types checked before decompression (:mod:`mrec_warp.data.npz`)."""
    return read_arrays(path, spec, "a work-folder file", WORK_HINT)


def _read_submodel(path: Path, n_users: int, n_items: int, factors: int) -> Dict[str, np.ndarray]:
    """A sub-model part file, every array checked against the job (shapes, finite values)."""
    from .data.npz import check_finite

    z = _read_npz(path, {"user_factors": ("f", (n_users, factors)), "item_factors": ("f", (n_items, factors)),
                         "item_bias": ("f", (n_items,)), "best_epoch": ("iu", ())})
    try:
        for key in ("user_factors", "item_factors", "item_bias"):
            check_finite(z[key], key.replace("_", " "))
        if int(z["best_epoch"]) < 0:
            raise ValueError(f"best_epoch is {int(z['best_epoch'])}")
    except ValueError as exc:
        raise _damaged(path, str(exc)) from None
    return z


# ---------------------------------------------------------------------------------------------
# evaluate: one unit per (split, recommendations file)
# ---------------------------------------------------------------------------------------------
def _evaluate_unit(train, test, recs, name: str, ks: Sequence[int], catalog=None):
    from .evaluation.report import evaluate

    return evaluate(train, test, [recs], names=[name], ks=ks, catalog=catalog).evaluations[0][0]


def evaluate_parallel(
    train,
    test,
    recs: Sequence[Any],
    names: Optional[Sequence[str]] = None,
    ks: Sequence[int] = (5, 10, 20),
    splits: Optional[Sequence[str]] = None,
    backend: Union[str, Workers] = "threads",
    n_jobs: int = 1,
    scheduler: Optional[str] = None,
    progress: Progress = SILENT,
    catalog: Optional[Sequence[str]] = None,
):
    """:func:`mrec_warp.evaluation.report.evaluate` with its (split, recommendations file)
    pairs scored at once on a backend's workers; the same :class:`Study` comes back.

    Each unit reads its own train/test/recs files (the metrics themselves are vectorised
    over all users of a file), so one split with one file gains nothing; several splits or
    files gain up to one worker each. File paths must be visible to the workers.
    """
    from .evaluation.report import Study, _describe, default_names, evaluate, resolve_split

    recs = list(recs)
    names = list(names) if names else default_names(recs)
    if len(names) != len(recs):  # zip below would drop files silently
        raise ValueError(f"{len(names)} names for {len(recs)} recommendation files")
    labels: List[Optional[str]] = [str(s) for s in splits] if splits else [None]
    units = [(resolve_split(train, l), resolve_split(test, l), resolve_split(r, l), n, tuple(ks), catalog)
             for l in labels for r, n in zip(recs, names)]
    if len(units) == 1 or (isinstance(backend, str) and backend == "threads" and (n_jobs or 1) == 1):
        return evaluate(train, test, recs, names=names, ks=ks, splits=splits, progress=progress, catalog=catalog)
    with context_for(backend, n_jobs, scheduler) as be:
        progress.log(f"evaluating {len(units)} (split, recs) pairs on {be.describe()}")
        flat = list(be.map(_evaluate_unit, units))
    evaluations = [flat[i * len(recs):(i + 1) * len(recs)] for i in range(len(labels))]
    return Study(names=names, sources=[_describe(r) for r in recs], splits=[l for l in labels if l is not None],
                 evaluations=evaluations, ks=evaluations[0][0].ks, train=_describe(train), test=_describe(test))
