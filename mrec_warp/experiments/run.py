"""Running an experiment: every model on every split, through the pipeline's own stages.

:func:`experiment` reads and checks the whole configuration first (:mod:`.config`), then

1. **prepares** each split set with :func:`~mrec_warp.stages.prepare.prepare` into the work folder
   (a split folder that is already complete is kept: the same options give the same bytes);
2. runs one **unit** per (model, split) on the execution context's workers through the job
   engine (:mod:`mrec_warp.jobs`): :func:`~mrec_warp.stages.train.train` on one thread, then
   :func:`~mrec_warp.stages.recommend.recommend` of the largest cut-off; each finished unit
   leaves a part file, so a rerun after an interruption skips it;
3. **evaluates** each split set's recommendations with
   :func:`~mrec_warp.stages.evaluate.evaluate` (paired tests against the baseline, corrected),
4. writes the **report folder** (:mod:`.report`).

Every random choice has a seed in the file, every fit runs on one thread and BLAS on one
thread, so the same file gives byte-identical tables.
"""
from __future__ import annotations

import contextlib
import json
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

from .. import strict_json
from ..context import ExecutionContext, local_context
from ..stages.prepare import prepare
from ..data.split import SPLIT_FILES
from ..errors import InputError
from ..evaluation.report import Study
from ..files import PathLike, atomic_write, check_outputs, file_digest
from ..jobs import Job, job_manifest, unit_of_job
from ..models.families import FAMILIES
from ..progress import SILENT, Progress, plural
from ..stages.evaluate import evaluate
from ..stages.prepare import split_folders
from ..stages.recommend import recommend
from ..stages.candidates import MODEL, candidates
from ..stages.train import train
from ..stages.tune import tune as tune_stage
from ..workers import one_blas_thread
from .config import WORK_NAME, Config, read_config
from .report import claim_folder, experiment_digest, record_report, release_folder, report_files, write_report, \
    write_timing

#: Version of the work folder's layout, part of the job's description.
EXPERIMENT_VERSION = 2  # 2: split sets default to the top-level seed; parts record epochs
#: The report folder's work folder when the context names none.
WORK_FOLDER = WORK_NAME


@dataclass
class ExperimentResult:
    """What :func:`experiment` did.

    Attributes
    ----------
    config : Config
    output : Path
        The report folder.
    studies : dict
        Split set name -> :class:`~mrec_warp.evaluation.report.Study` (baseline first).
    runs, skipped : int
        (model, split) runs in all, and those an earlier, interrupted run had finished.
    files : list of str
        Report files written.
    notes : list of str
        What the caller should hear about (e.g. the plot skipped without matplotlib).
    seconds : float
        Wall time of this call.
    tuned : list of dict
        For each run of a model with ``tune``: ``model``, ``split_set``, ``split`` and the
        ``params`` tuning chose.
    run_rows : list of dict
        For each run: ``model``, ``split_set``, ``split``, training ``users`` and ``items``,
        and for iterative families ``best_epoch``, ``epochs_trained``, ``max_epochs``
        (:func:`epochs_of`; ``runs.csv``).
    """

    config: Config
    output: Path
    studies: Dict[str, Study]
    runs: int
    skipped: int
    files: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    seconds: float = 0.0
    tuned: List[Dict[str, Any]] = field(default_factory=list)
    run_rows: List[Dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class _Split:
    """One split of a split set: its label (``None`` when the set has one split) and folder."""

    set_index: int
    label: Optional[str]
    folder: Path


def run_unit(workdir: str, index: int, train_file: str, recs_file: str, family: str, params: Dict[str, Any],
             seed: int, k: int, trials: Optional[int] = None) -> Dict[str, Any]:
    """One (model, split) run: fit on one thread (after ``trials`` random tuning trials on a
    hold-out of the training file, when given), write the top ``k`` of every training user,
    then the part file ``run-NNNN.json`` that marks it done (returned as a dict)."""
    started = job_manifest(workdir)  # the part is kept only if the folder still holds this job
    t0 = time.perf_counter()
    seeded = FAMILIES[family].cls.draws_random_numbers
    with one_blas_thread():  # a product's bits depend on BLAS's thread count: one, always
        if trials:
            params = tuned_params(train_file, family, params, trials, seed)
        fitted = train(train_file, None, model=family, params=params, seed=seed if seeded else None,
                       context=local_context(1))
        written = recommend(fitted.model, recs_file, k=k, context=local_context(1))
    row: Dict[str, Any] = {"index": index, "rows": written.rows, "users": written.users, "n_users": fitted.n_users,
           "n_items": fitted.n_items, "seconds": round(time.perf_counter() - t0, 3)}
    row.update(epochs_of(fitted.model))
    if trials:
        row["params"] = params
    with unit_of_job(workdir, started), atomic_write(Path(workdir) / part_name(index)) as fh:
        strict_json.dump(row, fh)
    return row


def epochs_of(model) -> Dict[str, Any]:
    """How long an iterative model trained, so that a reader sees an early stop (a WARP that
    stopped at epoch 2 on small data is close to popularity): ``best_epoch`` (the epochs
    kept), ``epochs_trained`` (the passes before stopping, without the refit) and
    ``max_epochs`` (``None``: ``epochs`` was fixed). Empty for families without epochs."""
    best = getattr(model, "best_epoch_", None)
    if best is None:
        return {}
    history = getattr(model, "history_", None) or []
    trained = sum(1 for h in history if h.get("phase") == "fit") or int(best)
    fixed = getattr(model, "epochs", None) is not None
    return {"best_epoch": int(best), "epochs_trained": int(trained),
            "max_epochs": None if fixed else int(getattr(model, "max_epochs", 0) or 0) or None}


def tuned_params(train_file: str, family: str, fixed: Dict[str, Any], trials: int, seed: int) -> Dict[str, Any]:
    """The best of the family's defaults and ``trials`` random points around them (the
    ``fixed`` parameters in every one), by validation precision@10 on a hold-out of the
    training file (:func:`~mrec_warp.stages.tune.tune`, one thread)."""
    drawn = [{**p, **fixed} for p in candidates([family], None, trials, seed=seed)]
    varied = sorted({n for p in drawn for n in p if n != MODEL})
    # the defaults first, named in full so that the table says what they are when they win
    points = [{MODEL: family, **FAMILIES[family].defaults(varied), **fixed}] + drawn
    found = tune_stage(train_file, points, seed=seed, context=local_context(1), with_defaults=False)
    return {**found.best_params, **fixed}


def part_name(index: int) -> str:
    return f"run-{index:04d}.json"


def experiment(
    config: Union[PathLike, Config],
    output: Optional[PathLike] = None,
    *,
    context: Optional[ExecutionContext] = None,
    progress: Progress = SILENT,
    force: bool = False,
) -> ExperimentResult:
    """Run every model of an experiment file on every split and write its report folder.

    Parameters
    ----------
    config : path-like or Config
        The TOML file (:mod:`mrec_warp.experiments.config`), checked in full before any work.
    output : path-like, optional
        The report folder; default: the file's ``output`` key.
    context : ExecutionContext, optional
        Where the runs go (each fits on one thread; J workers run J fits at once) and the
        work folder (default ``OUTPUT/work``): a rerun resumes from it, skipping finished
        runs. It is removed after a complete run unless ``keep_parts``. Default: one thread.
    progress : Progress
        One line per finished run, and what each stage does.
    force : bool
        Write into a folder that holds other files or another experiment's report (see
        :mod:`.report`): the earlier report is replaced whole. Without it such a folder is
        refused before any work.

    Returns
    -------
    ExperimentResult

    Raises
    ------
    InputError
        A bad configuration (naming the file and its line) or data, or a report folder that
        is not this experiment's (without ``force``), before any training.
    """
    t0 = time.perf_counter()
    cfg = config if isinstance(config, Config) else read_config(config, progress)
    given = output if output is not None else cfg.output
    if given is None:
        raise InputError("no report folder given", path=str(cfg.path),
                         hint="add output = \"FOLDER\" at the top of the file, or give `output`")
    output = Path(given)
    if output.exists() and not output.is_dir():
        raise InputError("the report folder is a file", path=str(output), hint="give a folder")
    # the folder may be the data's or the file's: never replace either
    check_outputs({"`output`": report_files(cfg, output)}, [str(cfg.path), cfg.data["path"]])
    context = context if context is not None else local_context()
    made_output = not output.exists()  # removed again if the job fails before any run finished
    digest = experiment_digest(cfg)
    claimed = claim_folder(output, digest, force=force, work=WORK_FOLDER)
    workdir = context.folder(output / WORK_FOLDER)
    description = {"kind": "experiment", "version": EXPERIMENT_VERSION, "data": file_digest(cfg.data["path"]),
                   "config": {key: value for key, value in cfg.raw.items() if key != "output"}}
    splits: List[List[_Split]] = []
    for s, split_set in enumerate(cfg.splits):
        folders = split_folders(workdir / "splits" / f"s{s}", split_set.repeats)
        splits.append([_Split(s, None if split_set.repeats == 1 else folder.name, folder) for folder in folders])
    units = [(m, sp) for sps in splits for sp in sps for m in range(len(cfg.models))]
    k = max(cfg.ks)
    with context:
        try:
            job = Job(context, description, [part_name(i) for i in range(len(units))], folder=workdir,
                      progress=progress)
        except BaseException:
            release_folder(output, claimed)  # refused (another job in the work folder, or one running)
            if made_output:
                with contextlib.suppress(OSError):
                    output.rmdir()
            raise
        try:
            _prepare_splits(cfg, splits, progress)
            _run_units(cfg, job, splits, units, workdir, k, context, progress)
        except BaseException:
            if not any(job.folder.done(name) for name in job.parts):
                release_folder(output, claimed)
                _forget(job, output if made_output else None)  # nothing to resume: the fixed file must run
            raise
        job.check_complete()
        tuned = []  # the parameters tuning chose, this run's and an earlier one's alike
        runs = []  # what each run did, but its time (the same on every rerun)
        for i, (m, sp) in enumerate(units):
            row = json.loads(job.part(i).read_text())
            where = {"model": cfg.models[m].name, "split_set": cfg.splits[sp.set_index].name, "split": sp.label}
            runs.append({**where, "users": row["n_users"], "items": row["n_items"],
                         **{key: row.get(key) for key in ("best_epoch", "epochs_trained", "max_epochs")}})
            if cfg.models[m].tune:
                tuned.append({**where, "params": row.get("params")})
        studies = {}
        for s, split_set in enumerate(cfg.splits):
            studies[split_set.name] = _evaluate_set(cfg, s, splits[s], workdir, context, progress)
        result = ExperimentResult(config=cfg, output=output, studies=studies, runs=len(units), skipped=job.skipped,
                                  tuned=tuned, run_rows=runs)
        result.files = write_report(result, notes=result.notes)
        if not context.keep_parts:
            for sub in ("recs", "splits"):
                shutil.rmtree(job.path / sub, ignore_errors=True)
        job.finish()
    result.seconds = time.perf_counter() - t0
    result.files.append(write_timing(result))
    record_report(output, digest, result.files)
    return result


def _run_units(cfg: Config, job: Job, splits: List[List[_Split]], units: List[Tuple[int, _Split]], workdir: Path,
               k: int, context: ExecutionContext, progress: Progress) -> None:
    """Every (model, split) unit of the to-do on the context's workers, one log line each."""
    progress.log(f"experiment: {plural(len(cfg.models), 'model')} x {plural(len(units) // len(cfg.models), 'split')}"
                 f" = {plural(len(units), 'run')} ({job.skipped} already done) on {context.describe()}")
    for sp in {split for sps in splits for split in sps}:
        job.read_by_workers(sp.folder / "train.tsv")
    tasks = []
    for i in job.todo:
        m, sp = units[i]
        recs = _recs_file(workdir, sp, m)
        recs.parent.mkdir(parents=True, exist_ok=True)
        tasks.append((str(job.path.resolve()), i, str((sp.folder / "train.tsv").resolve()), str(recs.resolve()),
                      cfg.models[m].family, dict(cfg.models[m].params), cfg.seed, k, cfg.models[m].tune))
    done = job.skipped
    for row in job.run(run_unit, tasks, desc="runs", unit="run", lines=False):  # each run logs its line
        done += 1
        m, sp = units[row["index"]]
        where = cfg.splits[sp.set_index].name + ("" if sp.label is None else f" {sp.label}")
        chosen = (" with " + ", ".join(f"{n}={v}" for n, v in sorted(row["params"].items()))
                  if "params" in row else "")
        progress.log(f"run {done}/{len(units)}: {cfg.models[m].name} on {where}: "
                     f"{plural(row['users'], 'user')}, {row['seconds']:.1f}s{chosen}")


def _forget(job: Job, made_output: Optional[Path]) -> None:
    """Remove what a job that failed before any run finished left: its split folders and
    recommendations (the lock's release then removes the work folder it made), and the
    report folder this call made, if empty. Nothing in them could be resumed, and a
    corrected file would otherwise be refused as a different job."""
    for sub in ("recs", "splits"):
        shutil.rmtree(job.path / sub, ignore_errors=True)
    job.folder.cleanup([])
    if made_output is not None:
        with contextlib.suppress(OSError):
            made_output.rmdir()


def _prepare_splits(cfg: Config, splits: List[List[_Split]], progress: Progress) -> None:
    """Each split set's folders, unless an earlier run wrote them whole (summary.json last)."""
    data = cfg.data
    for s, split_set in enumerate(cfg.splits):
        if all((sp.folder / SPLIT_FILES[-1]).exists() for sp in splits[s]):
            continue
        progress.log(f"preparing split set {split_set.name!r}: {split_set.kind}, "
                     f"{plural(split_set.repeats, 'split')}")
        prepare(data["path"], splits[s][0].folder if split_set.repeats == 1 else splits[s][0].folder.parent,
                format=data["format"], sep=data["sep"], header=data["header"], columns=data["columns"],
                min_rating=data["min_value"], min_user_items=data["min_user_items"], duplicates=data["duplicates"],
                negatives=data["negatives"], **split_set.prepare_options())


def _recs_file(workdir: Path, sp: _Split, model: int) -> Path:
    return workdir / "recs" / f"s{sp.set_index}" / f"m{model}" / f"{sp.label or 'all'}.tsv"


def _evaluate_set(cfg: Config, s: int, splits: List[_Split], workdir: Path, context: ExecutionContext,
                  progress: Progress) -> Study:
    """The study of one split set: every model's recommendations on each of its splits."""
    many = splits[0].label is not None
    base = workdir / "splits" / f"s{s}"
    folder = base / "{split}" if many else base
    recs = [workdir / "recs" / f"s{s}" / f"m{m}" / ("{split}.tsv" if many else "all.tsv")
            for m in range(len(cfg.models))]
    progress.log(f"evaluating split set {cfg.splits[s].name!r}")
    study = evaluate(str(folder / "train.tsv"), str(folder / "test.tsv"), [str(r) for r in recs],
                     names=[m.name for m in cfg.models], ks=cfg.ks,
                     splits=[str(sp.label) for sp in splits] if many else None,  # many: every split has one context=context, progress=progress,
                     beyond=cfg.beyond, paired_test=cfg.paired_test, correction=cfg.correction, seed=cfg.seed)
    return _selected(study, cfg)


def _selected(study: Study, cfg: Config) -> Study:
    """The study with only the configuration's metrics: the table's rows, and the family of
    tests its correction covers. Paths are shown relative to the work folder's split sets."""
    keep = cfg.metric_columns(study.metrics)
    evaluations = []
    for row in study.evaluations:
        evaluations.append([_select_evaluation(ev, keep, study.metrics) for ev in row])
    each = "of each split" if study.splits else "of the split"
    return replace(study, evaluations=evaluations, train=f"train.tsv {each}", test=f"test.tsv {each}",
                   sources=[f"model {n}" for n in study.names], _dict=None)


def _select_evaluation(ev, keep: List[str], metrics: List[str]):
    dropped = [m for m in metrics if m not in keep]
    per_user = ev.per_user.drop(columns=[c for c in dropped if c in ev.per_user.columns])
    return replace(ev, per_user=per_user, summary=ev.summary.loc[[m for m in ev.summary.index if m in keep]],
                   groups={})
