"""The training stage: a ratings file (and its side files) in, a fitted model (and model file) out.

:func:`train` picks the model family, merges the parameters of a parameters file with the
ones given, checks that every one applies to the family, reads the interactions (with their
value column when a confidence weighs rows by it), the validation and feature files, fits,
and saves. Warp models can also be fitted as independent sub-models on a backend's workers.
``mrec-warp train`` runs :func:`run_train`, the same stage with its reader options, row rules
and feature files as objects (:mod:`~mrec_warp.stages.options`).

>>> result = train("split/train.tsv", "model.npz", params={"factors": 32})   # doctest: +SKIP
>>> result.model.recommend_frame(["196"], k=5)                              # doctest: +SKIP
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union, cast

from ..data.confidence import describe_confidence
from ..data.delimited import normalise_columns
from ..data.interactions import Interactions
from ..files import check_outputs
from ..errors import InputError
from ..models.base import Recommender, provides
from ..models.families import DEFAULT_FAMILY, families_with, fit_takes, model_classes, named_families, takes_features
from ..context import ExecutionContext, local_context
from ..seeds import DEFAULT_SEED
from ..workers import check_backend
from ..progress import SILENT, Progress, plural
from .submodels import fit_submodels
from ..models.partitioned_wrmf import fit_partitioned, fits_on_partitions
from ..models.wrmf import WRMF
from ..data.rows import DEFAULT_EMPTY_IDS, DEFAULT_NEGATIVES, describe_counts
from ..data.features import FeatureFiles
from ._inputs import keep_encoding, load_interactions, load_params, load_validation, params_model
from .options import RowOptions

PathLike = Union[str, os.PathLike]

#: Parameters the stage sets itself (from ``seed`` and the execution context): they are not
#: options of a model family, so they are neither checked nor listed as such.
EXECUTION_PARAMS = ("random_state", "n_jobs", "backend", "scheduler", "verbose")
#: Parameters that only matter when a confidence weighs the rows (WRMF's always does).
CONFIDENCE_PARAMS = ("alpha", "eps", "confidence_use")
#: Parameters whose value 0 means "no limit" (``None`` to the models).
ZERO_IS_UNLIMITED = ("user_max_norm", "item_max_norm")


class UnknownParameterError(InputError):
    """A parameter that the model family does not take.

    Attributes
    ----------
    parameter : str
        The parameter given.
    model : str
        The family it was given for.
    accepted : tuple of str
        The family's own parameters (those the stage does not set itself), in order.
    source : str or None
        The parameters file it came from; ``None`` when it was given directly.
    switched_off : bool
        The value given was ``False`` (a command line says ``--no-select``, not ``--select``).
    """

    def __init__(self, parameter: str, model: str, accepted: Sequence[str], source: Optional[PathLike] = None,
                 switched_off: bool = False) -> None:
        self.parameter, self.model, self.accepted = parameter, model, tuple(accepted)
        self.source = None if source is None else str(source)
        self.switched_off = bool(switched_off)
        what = f"`{parameter}`" if source is None else f"{parameter!r} (from {source})"
        own = ", ".join(f"`{p}`" for p in self.accepted)
        hint = (f"its options: {own}" if own else f"`model={model}` takes no options") \
            + (f"; {source} may be for another model" if source else "")
        super().__init__(f"{what} does not apply to `model={model}`", hint=hint)

    def __reduce__(self):  # pickled (e.g. back from a worker) with its fields, not its text
        return type(self), (self.parameter, self.model, self.accepted, self.source, self.switched_off)

    def with_accepted(self, accepted: Sequence[str]) -> "UnknownParameterError":
        """The same error listing only ``accepted`` (a caller that cannot set every parameter)."""
        return UnknownParameterError(self.parameter, self.model, accepted, self.source, self.switched_off)


@dataclass
class TrainResult:
    """What :func:`train` did.

    Attributes
    ----------
    model : Recommender
        The fitted model (saved to ``output`` when one was given).
    model_name : str
        Its family, as ``model`` names it (``"warp"``, ``"wrmf"``, ...).
    n_users, n_items : int
        Size of the training data.
    output : str or None
        The model file written.
    notes : list of str
        Remarks for the user that are not errors (e.g. a seed the model has no use for).
    """

    model: Recommender
    model_name: str
    n_users: int
    n_items: int
    output: Optional[str] = None
    notes: List[str] = field(default_factory=list)

    @property
    def sub_models(self) -> Optional[List[Dict[str, Any]]]:
        """Factors and epochs of each sub-model, when the model was fitted as sub-models."""
        return getattr(self.model, "sub_models_", None)

    @property
    def epochs(self) -> Optional[int]:
        """Epochs the model was trained for, when it picked them itself (early stopping)."""
        return getattr(self.model, "best_epoch_", None)


def train(
    train: PathLike,
    output: Optional[PathLike] = None,
    *,
    model: Optional[str] = None,
    params: Optional[Mapping[str, Any]] = None,
    params_file: Optional[PathLike] = None,
    format: str = "auto",
    validation: Optional[PathLike] = None,
    item_features: Optional[PathLike] = None,
    user_features: Optional[PathLike] = None,
    feature_sep: Optional[str] = None,
    feature_header: Optional[bool] = None,
    feature_columns: Optional[str] = None,
    sub_models: Optional[int] = None,
    partitions: Optional[int] = None,
    seed: Optional[int] = None,
    context: Optional[ExecutionContext] = None,
    progress: Optional[Progress] = None,
    sep: Optional[str] = None,
    header: Optional[bool] = None,
    columns: Optional[Union[str, Sequence]] = None,
    duplicates: Optional[str] = None,
    negatives: str = DEFAULT_NEGATIVES,
    min_value: Optional[float] = None,
    empty_ids: str = DEFAULT_EMPTY_IDS,
) -> TrainResult:
    """Fit a model on a ratings file and save it.

    Parameters
    ----------
    train : path-like
        ``user item [value ...]`` rows, every row kept a positive: ``prepare``'s train.tsv,
        or a raw export read with ``sep``, ``header`` and ``columns`` as ``prepare`` reads
        it (see :func:`~mrec_warp.data.ratings.read_ratings` for these and ``format``).
    output : path-like, optional
        Model file to write (``.npz``); nothing is written without it.
    model : str, optional
        Family (``warp``, ``hybrid``, ``popularity``, ``itemknn``, ``slim``, ``ease``,
        ``wrmf``); default: the one ``params_file`` names, else ``warp``.
    params : mapping, optional
        Parameters of the family (e.g. ``{"factors": 128}``); they win over ``params_file``.
        ``user_max_norm`` / ``item_max_norm`` of 0 mean no limit.
    params_file : path-like, optional
        JSON object of parameters, e.g. the output of ``tune`` (which nests them under
        ``"params"`` beside ``"model"``).
    validation : path-like, optional
        Ratings to early-stop on instead of an internal hold-out.
    item_features, user_features : path-like, optional
        Feature files of a hybrid model; ``feature_sep``, ``feature_header`` and
        ``feature_columns`` say how to read them.
    sub_models : int, optional
        Fit a warp model as this many independent sub-models of ``factors / sub_models``
        factors on the context's workers, and concatenate them. With ``backend="dask"`` a
        warp model is always fitted so, by default as
        :data:`~mrec_warp.stages.submodels.DEFAULT_SUB_MODELS` sub-model(s) whatever the
        cluster's size: the same call gives the same model, and resumes, on any cluster.
    partitions : int, optional
        Fit a wrmf model on a Dask cluster (``backend="dask"``) with its interactions cut into
        this many blocks of users and of items, each held by one worker, so that no worker
        holds the whole log (:mod:`~mrec_warp.models.partitioned_wrmf`): the same model as a
        local fit, to float32 round-off.
    seed : int, optional
        Seeds the model (and the sub-models' seeds); default :data:`~mrec_warp.seeds.DEFAULT_SEED`.
        A model that draws no random numbers ignores it and says so in ``notes``.
    context : ExecutionContext, optional
        Where work runs: its ``backend``, ``n_jobs``, ``scheduler`` and ``workdir`` (the
        folder of resumable sub-model part files; default ``OUTPUT.parts``). Default: one
        thread.
    progress : Progress, optional
        Where to log what happens; silent by default.
    duplicates, negatives, min_value, empty_ids
        The row rules of :mod:`mrec_warp.data.rows`, as ``prepare`` applies them: repeated
        (user, item) rows merge by ``duplicates`` (default ``sum``; with ``min_value`` and
        repeated pairs it must be chosen), negative values are refused unless ``negatives``
        is ``drop`` or ``net`` (or ``min_value`` >= 0 makes them ratings below it), pairs
        below ``min_value`` are dropped, rows with an empty id are refused unless
        ``empty_ids="drop"``. ``validation`` is read by the same row rules but
        with its own layout (``format``, ``sep``, ``header``, ``columns`` describe TRAIN).

    Returns
    -------
    TrainResult

    Raises
    ------
    InputError
        Bad files, or parameters that do not apply (the message names the parameter);
        :class:`UnknownParameterError` for a parameter the family does not take.
    """
    return run_train(train, output, model=model, params=params, params_file=params_file, validation=validation,
                     sub_models=sub_models, partitions=partitions, seed=seed,
                     rows=RowOptions(format=format, sep=sep, header=header, columns=columns, duplicates=duplicates,
                                     negatives=negatives, min_value=min_value, empty_ids=empty_ids),
                     features=FeatureFiles(user=user_features, item=item_features, sep=feature_sep,
                                           header=feature_header, columns=feature_columns),
                     context=context, progress=progress)


def run_train(
    train: PathLike,
    output: Optional[PathLike] = None,
    *,
    model: Optional[str] = None,
    params: Optional[Mapping[str, Any]] = None,
    params_file: Optional[PathLike] = None,
    validation: Optional[PathLike] = None,
    sub_models: Optional[int] = None,
    partitions: Optional[int] = None,
    seed: Optional[int] = None,
    rows: Optional[RowOptions] = None,
    features: Optional[FeatureFiles] = None,
    context: Optional[ExecutionContext] = None,
    progress: Optional[Progress] = None,
) -> TrainResult:
    """:func:`train` with its options as objects, as ``mrec-warp train`` calls it.

    ``rows`` says how TRAIN is read and what its rows become (``validation`` is read by
    the same row rules, with its own layout: :meth:`~mrec_warp.stages.options.RowOptions.rules_only`);
    ``features`` are the feature files of a hybrid model. Every other argument is
    :func:`train`'s.
    """
    progress = progress or SILENT
    rows = rows or RowOptions()
    features = features or FeatureFiles()
    check_outputs({"`output`": output}, [train, validation, params_file, features.item, features.user])
    context = context or local_context()
    backend, n_jobs, scheduler = context.backend, context.n_jobs, context.scheduler
    notes: List[str] = []
    given = dict(params or {})
    model_name = model or params_model(params_file) or DEFAULT_FAMILY
    if model_name not in model_classes():
        raise InputError(f"unknown `model={model_name}`", hint=f"one of {', '.join(model_classes())}")
    estimator = model_classes()[model_name]()
    merged = dict(load_params(params_file))
    kind: str = str(given.get("confidence") or merged.get("confidence") or getattr(estimator, "confidence", "none"))
    check_confidence(estimator, model_name, kind, given)
    merged.update(given)
    for name in ZERO_IS_UNLIMITED:
        if merged.get(name) == 0:
            merged[name] = None
    names = estimator.param_names()
    if not estimator.draws_random_numbers and seed is not None:
        # popularity and the item-item models are deterministic: accept the seed (scripts
        # pass it to every model alike) but say that it does nothing here
        notes.append(f"`model={model_name}` draws no random numbers: `seed={seed}` changes nothing")
    seed = DEFAULT_SEED if seed is None else seed
    if estimator.draws_random_numbers:
        merged.update(random_state=seed, n_jobs=n_jobs)
    elif "n_jobs" in names:  # item-item models: deterministic, no seed
        merged.update(n_jobs=n_jobs)
        if "backend" in names:
            merged.update(backend=backend, scheduler=scheduler or "")
    foreign = [name for name in merged if name not in names]
    if foreign:
        accepted = [p for p in names if p not in EXECUTION_PARAMS]
        raise UnknownParameterError(foreign[0], model_name, accepted, None if foreign[0] in given else params_file,
                                    switched_off=merged[foreign[0]] is False)
    estimator.set_params(**merged)
    estimator.check_params()  # before reading the data: a bad value costs no wait
    check_backend(backend, scheduler)
    if sub_models and not fits_sub_models(estimator):
        raise InputError(f"`sub_models` needs {named_families(fits_sub_models)}, not `model={model_name}`",
                         hint="drop `sub_models`")
    if partitions is not None:
        check_partitioned(model_name, estimator, backend, sub_models, features)
    # WRMF's default confidence reads the value column when there is one, and is 1 + alpha without
    data = load_interactions(train, rows, values=kind != "none", required=not weighs_without_values(estimator))
    # the row rules' counts in prepare's words (a file read always has them), then the matrix they made
    counts = describe_counts(data.row_counts, rows.duplicates, rows.negatives) + ": " \
        if data.row_counts is not None else ""
    progress.log(f"{train}: {counts}{plural(data.n_users, 'user')} x {plural(data.n_items, 'item')}")
    _log_values(estimator, model_name, kind, data, progress)
    chosen = normalise_columns(rows.columns)
    if chosen and len(chosen) >= 3 and data.value_column and not (data.has_values and kind != "none"):
        # a value column the user named is worth a note, not only a log line: it changes nothing
        notes.append(f"the 3rd column of `columns` ({chosen[2]}) is ignored: every row is a positive of "
                     "weight 1" + (" (`confidence=log` to weight by it)" if estimator.supports_confidence else ""))
    if fits_sub_models(estimator) and (sub_models or backend == "dask"):
        if kind != "none":
            raise InputError("`confidence` does not combine with sub-models yet",
                             hint="drop `sub_models` / `backend=dask`, or drop `confidence`")
        if validation:
            raise InputError("`validation` does not combine with sub-models", path=validation,
                             hint="each sub-model early-stops on its own hold-out; drop `validation`")
        if context.workdir is None and output is not None:
            context = ExecutionContext(backend, n_jobs=n_jobs, scheduler=scheduler, workdir=f"{output}.parts",
                                       keep_parts=context.keep_parts, client=context.client)
        if not sub_models:
            _note_default_sub_models(progress)
        estimator = fit_submodels(data, estimator.get_params(), context, n_models=sub_models, random_state=seed,
                                  progress=progress)
    elif partitions is not None:  # a WRMF: check_partitioned refused the other families
        fit_partitioned(cast(WRMF, estimator), data, context, partitions, progress=progress, use_values=data.has_values,
                        validation=load_validation(validation, data, rows) if validation else None)
    else:
        _fit(estimator, model_name, data, context, validation, rows, features, progress)
    keep_encoding(estimator, data)
    if output is not None:
        estimator.save(output)
    return TrainResult(estimator, model_name, data.n_users, data.n_items, None if output is None else str(output),
                       notes)


def check_partitioned(model_name: str, estimator: Recommender, backend: str, sub_models: Optional[int],
                      features: FeatureFiles) -> None:
    """A fit on partitions: a family that has one, on Dask, alone (before the data is read)."""
    if not fits_on_partitions(estimator):
        raise InputError(f"`partitions` is for `model=wrmf`, not `model={model_name}`",
                         hint="drop `partitions` (`sub_models` spreads a warp fit over a cluster)")
    if backend != "dask":
        raise InputError("`partitions` cuts the interactions across a Dask cluster: it needs `backend=dask`",
                         hint="add `backend=dask` (and `scheduler=tcp://HOST:PORT` for a running cluster)")
    if sub_models:
        raise InputError("`partitions` and `sub_models` do not combine", hint="drop one of them")
    if features.item or features.user:
        raise InputError("feature files do not combine with `partitions`", path=features.item or features.user,
                         hint="drop the feature files")


def _note_default_sub_models(progress: Progress) -> None:
    """Say what a cluster does for a fit that did not choose its sub-models."""
    # the default is one sub-model (stages.submodels.DEFAULT_SUB_MODELS): the note describes it
    progress.log("note: `backend=dask` fits one model of all the factors, on one worker (the same model as "
                 "on any cluster; `sub_models=K` fits K smaller models on K workers at once, usually less "
                 "precise); the cluster's other workers serve recommend, evaluate and tune")


def fits_sub_models(family: Any) -> bool:
    """Whether a family (model or class) can be fitted as sub-models and merged: it merges them
    (:meth:`~mrec_warp.models.base.Recommender.merge_sub_models`)."""
    return provides(family, "merge_sub_models")


def weighs_without_values(family: Any) -> bool:
    """Whether a family (model or class) weighs observed pairs with or without a value column:
    its fit is told which (it takes ``use_values``), so its confidence settings always matter."""
    return fit_takes(family, "use_values")


def check_confidence(estimator: Recommender, model_name: str, kind: str, given: Mapping[str, Any]) -> None:
    """A confidence only for families that weigh rows, and its settings only with one."""
    if kind != "none" and not estimator.supports_confidence:
        raise InputError(f"`confidence` is used by {named_families('supports_confidence')}, not `model={model_name}`",
                         hint=f"drop `confidence`, or train `model={families_with('supports_confidence')[0]}`")
    # WRMF weighs observed pairs 1 + alpha even without values, so its alpha always matters
    # (a family without a confidence may have parameters of these names of its own: rp3beta's alpha)
    if kind == "none" and not weighs_without_values(estimator) and estimator.supports_confidence \
            and any(given.get(k) is not None for k in CONFIDENCE_PARAMS):
        raise InputError("`alpha`, `eps` and `confidence_use` only matter with a confidence",
                         hint="add `confidence=log` (or linear), or drop them")


def _log_values(estimator: Recommender, model_name: str, kind: str, data: Interactions, progress: Progress) -> None:
    """One log line on what the value column became."""
    if weighs_without_values(estimator):
        weighs = data.has_values and kind != "none"
        progress.log(f"{model_name}: confidence 1 + alpha * " + (f"f(value), {kind}, from the value column" if weighs
                                                        else "1 (values ignored)" if data.value_column else "1 (no value column)")
                     + (zeros_note(data) if weighs else ""))
    elif estimator.supports_confidence:
        params = estimator.get_params()  # a confidence's settings: alpha, eps and how it is used
        progress.log(describe_values(data, kind, params["alpha"], params["eps"])
                     + (f", used to {params['confidence_use']} positives{zeros_note(data)}" if kind != "none" else ""))


def describe_values(data: Interactions, kind: str, alpha: float, eps: float) -> str:
    """One log line: what the value column (TRAIN's third) became."""
    if kind == "none" and not data.value_column:
        return "no value column: every row is a positive of weight 1"
    if kind == "none":
        return "value column (3rd) ignored: every row is a positive of weight 1 (`confidence=log` to weight by it)"
    return f"value column (3rd): {describe_confidence(kind, alpha, eps)}"


def zeros_note(data: Interactions) -> str:
    """``"; N pairs of value 0 ..."`` when some are: they stay positives, of the lowest confidence."""
    zeros = int(data.nnz - (data.matrix.data != 0).sum())
    return (f"; {plural(zeros, 'pair')} of value 0 {'is a positive' if zeros == 1 else 'are positives'} "
            "of the lowest confidence, 1" if zeros else "")


def _fit(estimator: Recommender, model_name: str, data: Interactions, context: ExecutionContext,
         validation: Optional[PathLike], rows: RowOptions, features: FeatureFiles, progress: Progress) -> None:
    """Fit one model in this process (WRMF: its blocks on the context's workers), with its
    validation and feature files."""
    backend, n_jobs = context.backend, context.n_jobs
    if backend == "processes" and estimator.hogwild:
        # hogwild needs every worker to write the same factor arrays: threads share them for
        # free, processes cannot (short of shared memory plus locking), so fit on threads.
        progress.log(f"note: hogwild fitting runs on threads, not processes; fitting on {n_jobs} thread(s) "
                     "(use `sub_models=K` to fit independent sub-models on processes)")
    fit_kwargs: Dict[str, Any] = {"progress": progress}
    if validation:
        if not estimator.early_stopping:
            raise InputError(f"`model={model_name}` has no early stopping to validate", path=validation,
                             hint=f"drop `validation` (it is for {', '.join(families_with('early_stopping'))})")
        fit_kwargs["validation"] = load_validation(validation, data, rows)
    if fit_takes(estimator, "workers"):
        fit_kwargs.update(use_values=data.has_values, workers=context)
    user_table, item_table = features.read(getattr(data, "id_encoding", None))
    if user_table is not None or item_table is not None:
        if not takes_features(estimator):
            first = families_with(takes_features)[0]
            raise InputError(f"feature files need {named_families(takes_features)}, not `model={model_name}`",
                             path=features.item or features.user, hint=f"add `model={first}`")
        fit_kwargs.update(user_features=user_table, item_features=item_table)
    estimator.fit(data, **fit_kwargs)
