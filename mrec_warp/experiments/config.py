"""An experiment's TOML file: read, checked in full before any work, every fault named by its line.

The layout (docs/tutorials/experiments.rst lists every key and its default)::

    seed = 42                          # seeds the models, the permutation test and (by default) the splits
    output = "experiment-out"          # report folder, relative to this file

    [data]                             # prepare's reader and row options
    path = "ratings.tsv"               # relative to this file
    min_value = 4
    # or: fetch = "movielens-100k"     # downloaded once into the cache when path is absent

    [splits.random]                    # one table per split set, each its own report
    kind = "random"
    repeats = 5
    test_fraction = 0.2

    [models.popularity]                # one table per model: its name, family and parameters
    family = "popularity"
    [models.warp]
    family = "warp"
    factors = 64
    [models.ease]
    family = "ease"
    tune = 8                           # 8 random trials and the defaults, on each split

    [evaluate]
    k = [5, 10, 20]
    baseline = "popularity"

TOML gives no positions, so :func:`~mrec_warp.experiments.config_lines.line_of` finds a key's
line by scanning the text for its table header and ``key =``; a fault it cannot place names
the file only.
"""
from __future__ import annotations

import datetime
import difflib
import hashlib
import math
import os
import numbers
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..data.datasets import DATASETS, data_home, fetch as fetch_dataset
from ..data.ratings import FORMATS, read_ratings
from ..data.rows import DEFAULT_DUPLICATES, DEFAULT_NEGATIVES, DUPLICATES, NEGATIVES
from ..data.split import SPLITS, TIME_SPLITS, check_split_options, iter_splits
from ..errors import InputError, spell_parameters
from ..evaluation.beyond import GLOBAL_AT_K, PER_USER_AT_K
from ..evaluation.result import AT_K_METRICS
from ..evaluation.significance import CORRECTIONS, DEFAULT_CORRECTION, DEFAULT_TEST, TESTS
from ..models.declared import hyper_parameters
from ..models.families import FAMILIES, takes_features, tunable_families
from ..progress import SILENT, Progress
from ..seeds import DEFAULT_SEED
from ..stages.train import check_confidence
from .config_lines import Checker, check_duplicate_models

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

#: Keys of each table, with their defaults (``None``: not set).
TOP_KEYS = {"seed": DEFAULT_SEED, "output": None}
DATA_KEYS = {"path": None, "fetch": None, "format": "auto", "sep": None, "header": None, "columns": None,
             "duplicates": DEFAULT_DUPLICATES, "negatives": DEFAULT_NEGATIVES, "min_value": None,
             "min_user_items": 1}
SPLIT_KEYS = {"kind": "random", "repeats": 1, "test_fraction": None, "leave_out": None, "cutoff": None,
              "seed": DEFAULT_SEED}  # seed: the top-level seed when the file has one
EVALUATE_KEYS = {"k": [5, 10, 20], "metrics": None, "baseline": None, "paired_test": DEFAULT_TEST,
                 "correction": DEFAULT_CORRECTION, "beyond": True}
#: Keys of a model table besides the family's parameters.
MODEL_KEYS = ("family", "tune")
TABLES = ("data", "splits", "models", "evaluate")
#: Families an experiment can run (the hybrid needs feature files, which an experiment does not pass yet).
EXPERIMENT_FAMILIES = tuple(f for f in FAMILIES if not takes_features(FAMILIES[f].cls))
#: Split kinds an experiment can run: the per-user and global ones (a cold split leaves test
#: users or items the models never saw, which recommend cannot score).
EXPERIMENT_SPLITS = tuple(s for s in SPLITS if not s.startswith("cold"))
#: Metric names a ``metrics`` list may hold (each at every k, except ``mrr``).
ACCURACY_METRICS = tuple(AT_K_METRICS) + ("mrr", "coverage")
BEYOND_METRICS = tuple(PER_USER_AT_K) + tuple(GLOBAL_AT_K)
METRICS = ACCURACY_METRICS + BEYOND_METRICS
#: Parameters the experiment sets itself, as train does (``seed`` at the top sets random_state).
RESERVED_PARAMS = ("random_state", "n_jobs", "backend", "scheduler", "verbose")
#: A split set's name is the folder of its reports; the work folder's name is taken.
_FOLDER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
WORK_NAME = "work"


@dataclass
class SplitSet:
    """One ``[splits.NAME]`` table: how to cut the data, and how many times."""

    name: str
    kind: str
    repeats: int
    test_fraction: Optional[float]
    leave_out: Optional[int]
    cutoff: Any
    seed: int

    def prepare_options(self) -> Dict[str, Any]:
        """The split options of :func:`~mrec_warp.stages.prepare.prepare`."""
        return {"split": self.kind, "num_splits": self.repeats, "test_fraction": self.test_fraction,
                "leave_out": self.leave_out, "cutoff": self.cutoff, "seed": self.seed}


@dataclass
class ModelSpec:
    """One ``[models.NAME]`` table."""

    name: str
    family: str
    params: Dict[str, Any]
    tune: Optional[int] = None  # random trials per split (the other parameters held fixed)


@dataclass
class Config:
    """A checked experiment configuration.

    Attributes
    ----------
    path : Path
        The TOML file.
    text : bytes
        Its exact bytes (copied into the report for reproduction).
    data : dict
        ``path`` (resolved against the file's folder) and prepare's reader and row options.
    splits : list of SplitSet
    models : list of ModelSpec
        In file order, the baseline first.
    ks : list of int
    metrics : list of str
        Metric families shown and tested (``precision`` ... ``gini``).
    baseline, paired_test, correction : str
    beyond : bool
    seed : int
    output : Path or None
        The report folder the file names (resolved against its folder).
    """

    path: Path
    text: bytes
    data: Dict[str, Any]
    splits: List[SplitSet]
    models: List[ModelSpec]
    ks: List[int]
    metrics: List[str]
    baseline: str
    paired_test: str
    correction: str
    beyond: bool
    seed: int
    output: Optional[Path] = None
    raw: Dict[str, Any] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        """SHA-256 of the file's bytes."""
        return hashlib.sha256(self.text).hexdigest()

    def metric_columns(self, columns: Sequence[str]) -> List[str]:
        """The ones of a study's metric names (``ndcg@10``, ``mrr``) that :attr:`metrics` selects."""
        return [c for c in columns if c.split("@")[0] in self.metrics]


def read_config(path, progress: Progress = SILENT) -> Config:
    """Read and check an experiment file: every table, key, family, parameter, metric and
    the data file, before any work. A ``[data]`` ``fetch`` whose ``path`` is absent is
    downloaded here, once, into the cache (``progress`` logs it).

    Raises
    ------
    InputError
        One line naming the file and the line of the first fault, and how to fix it.
    """
    path = Path(path)
    try:
        raw_bytes = path.read_bytes()
    except FileNotFoundError:
        raise InputError("experiment file not found", path=str(path), hint="give the path of a TOML file") from None
    except IsADirectoryError:
        raise InputError("is a folder, not an experiment file", path=str(path), hint="give a TOML file") from None
    try:
        text = raw_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw_bytes[:exc.start].count(b"\n") + 1
        raise InputError("not UTF-8 text (TOML files are UTF-8)", path=str(path), line=line,
                         hint="save the file as UTF-8") from None
    check = Checker(path, text)
    check_duplicate_models(check, text)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        what = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc)) or "not valid TOML"
        raise InputError(f"not valid TOML: {what}", path=str(path), line=int(found.group(1)) if found else None,
                         hint="see toml.io for the syntax") from None
    check.unknown_keys(raw, list(TOP_KEYS) + list(TABLES), (), "the experiment file")
    seed = check.integer(raw.get("seed", DEFAULT_SEED), (), "seed", 0)
    output = raw.get("output")
    if output is not None and (not isinstance(output, str) or not output):
        check.fail(f"output must be a folder name, got {output!r}", (), "output")
    data = _read_data(check, check.table(raw, "data"), path.parent, progress)
    splits = _read_splits(check, check.table(raw, "splits"), data, seed)
    _check_data_file(check, data, splits)
    models = _read_models(check, check.table(raw, "models"))
    evaluation = _read_evaluate(check, check.table(raw, "evaluate"), models)
    baseline = evaluation["baseline"]
    models = sorted(models, key=lambda m: m.name != baseline)  # stable: the baseline first, then file order
    return Config(path=path, text=raw_bytes, data=data, splits=splits, models=models, ks=evaluation["k"],
                  metrics=evaluation["metrics"], baseline=baseline, paired_test=evaluation["paired_test"],
                  correction=evaluation["correction"], beyond=evaluation["beyond"], seed=seed,
                  output=None if output is None else Path(os.path.normpath(path.parent / output)), raw=raw)


def _read_data(check: Checker, data: Dict[str, Any], folder: Path, progress: Progress = SILENT) -> Dict[str, Any]:
    table = ("data",)
    check.unknown_keys(data, list(DATA_KEYS), table, "[data]")
    if "path" not in data and "fetch" not in data:
        check.fail("[data] has no path", table, None, "add path = \"ratings.tsv\" (relative to this file), or "
                                                      f"fetch = \"{next(iter(DATASETS))}\" to download a public data set")
    out = {**DATA_KEYS, **data}
    if out["fetch"] is not None and out["fetch"] not in DATASETS:
        check.fail(f"unknown data set {out['fetch']!r}", table, "fetch", f"one of {', '.join(DATASETS)}")
    if out["path"] is not None and (not isinstance(out["path"], str) or not out["path"]):
        check.fail(f"path must be a file name, got {out['path']!r}", table, "path")
    resolved = None if out["path"] is None else folder / out["path"]
    out["fetched"] = None  # the data set read from the cache, when it was
    if resolved is not None and resolved.is_file():
        out["path"] = os.path.normpath(resolved)
    elif out["fetch"] is not None:  # the file is absent here: the data set from the cache, downloaded once
        out["path"] = str(_fetched(check, out["fetch"], resolved, progress))
        out["fetched"] = out["fetch"]
        if out["format"] == "auto":
            out["format"] = DATASETS[out["fetch"]].format
    else:
        check.fail(f"data file {str(resolved)!r} does not exist" if not resolved.exists()
                   else f"data file {str(resolved)!r} is not a file", table, "path",
                   "paths are relative to the experiment file's folder")
    if out["format"] not in FORMATS:
        check.fail(f"unknown format {out['format']!r}", table, "format", f"one of {', '.join(FORMATS)}")
    for key in ("sep",):
        if out[key] is not None and (not isinstance(out[key], str) or out[key] == ""):
            check.fail(f"sep must be a delimiter such as \",\" or \"\\t\", got {out[key]!r}", table, key)
    if out["header"] is not None and not isinstance(out["header"], bool):
        check.fail(f"header must be true or false, got {out['header']!r}", table, "header")
    columns = out["columns"]
    if columns is not None:
        if isinstance(columns, list) and all(isinstance(c, (str, int)) and not isinstance(c, bool) for c in columns):
            out["columns"] = ",".join(str(c) for c in columns)
        elif not isinstance(columns, str) or not columns:
            check.fail(f"columns must be a list such as [\"userId\", \"movieId\", \"rating\", \"timestamp\"] "
                       f"or [0, 1, 2, 3], got {columns!r}", table, "columns")
    if out["min_value"] is not None and (isinstance(out["min_value"], bool) or not isinstance(out["min_value"], numbers.Real)
                                         or not math.isfinite(out["min_value"])):
        check.fail(f"min_value must be a number, got {out['min_value']!r}", table, "min_value")
    check.integer(out["min_user_items"], table, "min_user_items", 1)
    for key, choices in (("duplicates", DUPLICATES), ("negatives", NEGATIVES)):
        if out[key] not in choices:
            check.fail(f"unknown {key} rule {out[key]!r}", table, key, f"one of {', '.join(choices)}")
    return out


def _fetched(check: Checker, name: str, absent: Optional[Path], progress: Progress) -> Path:
    """The ratings file of data set ``name`` (``fetch``), from the cache or downloaded into
    it; a failed download is one line saying how to get the data by hand."""
    try:
        return fetch_dataset(name, progress=progress)
    except InputError as exc:
        ds = DATASETS[name]
        missing = "" if absent is None else f"data file {os.path.normpath(absent)!r} does not exist, and "
        check.fail(f"{missing}{name} could not be downloaded ({exc.message})", ("data",), "fetch",
                   f"run 'mrec-warp fetch {name}' where there is a network, which unpacks it into "
                   f"{data_home() / ds.folder}; or set path to a copy of {ds.folder}/{ds.ratings}")


def _read_splits(check: Checker, splits: Dict[str, Any], data: Dict[str, Any], seed: int) -> List[SplitSet]:
    """The split sets; a set without its own ``seed`` takes the top-level one."""
    if not splits:
        check.fail("no [splits.NAME] table", (), None, "add e.g. [splits.random] with kind = \"random\", repeats = 5")
    out = []
    for name, spec in splits.items():
        table = ("splits", name)
        if not isinstance(spec, dict):
            check.fail(f"splits.{name} must be a table, [splits.{name}]", ("splits",), name)
        if not _FOLDER_NAME.match(name) or name == WORK_NAME:
            # the set's reports go to OUTPUT/NAME: a path or the work folder would write elsewhere
            check.fail(f"split set name {name!r} is not a plain folder name", table, None,
                       f"use letters, digits, '_', '-' and '.' (not {WORK_NAME!r})")
        check.unknown_keys(spec, list(SPLIT_KEYS), table, f"[splits.{name}]")
        values = {**SPLIT_KEYS, "seed": seed, **spec}
        if values["kind"] not in EXPERIMENT_SPLITS:
            check.fail(f"unknown split kind {values['kind']!r}", table, "kind", f"one of {', '.join(EXPERIMENT_SPLITS)}")
        if isinstance(values["cutoff"], (datetime.date, datetime.time)):
            values["cutoff"] = values["cutoff"].isoformat()  # a bare TOML date: prepare reads its ISO text
        repeats = check.integer(values["repeats"], table, "repeats", 1)
        seed = check.integer(values["seed"], table, "seed", 0)
        try:
            check_split_options(values["test_fraction"], values["leave_out"], values["kind"], repeats,
                                data["min_user_items"], data["min_value"], seed, data["duplicates"], data["negatives"],
                                values["cutoff"])
        except InputError as exc:
            spelled = InputError(spell_parameters(exc.message, _split_key), hint=spell_parameters(exc.hint or "", _split_key)
                                 or None)
            check.relay(spelled, table, list(SPLIT_KEYS))
        out.append(SplitSet(name=name, kind=values["kind"], repeats=repeats, test_fraction=values["test_fraction"],
                            leave_out=values["leave_out"], cutoff=values["cutoff"], seed=seed))
    return out


def _check_data_file(check: Checker, data: Dict[str, Any], splits: List[SplitSet]) -> None:
    """Read the data file as prepare will, and make each split set's first split in memory:
    a column name not in the header, a time split of a file without timestamps, a cut-off
    outside the data or nothing left to split fail here, on the line of the config key at
    fault, before the work folder exists (the file is read once more by the run)."""
    source = data["path"]
    try:
        df = read_ratings(source, format=data["format"], sep=data["sep"], header=data["header"],
                          columns=data["columns"])
    except InputError as exc:
        check.relay(_about_data(exc, source), ("data",), ["columns", "sep", "header", "format"], fallback="path")
    for split_set in splits:
        table = ("splits", split_set.name)
        try:
            next(iter_splits(df, min_value=data["min_value"], min_user_items=data["min_user_items"],
                             duplicates=data["duplicates"], negatives=data["negatives"], source=source,
                             split=split_set.kind, num_splits=split_set.repeats,
                             test_fraction=split_set.test_fraction, leave_out=split_set.leave_out,
                             cutoff=split_set.cutoff, seed=split_set.seed))
        except InputError as exc:
            exc = _about_data(exc, source)
            named = [p for p in exc.params if p in SPLIT_KEYS or p in ("split", "num_splits")]
            if named:
                spelled = InputError(spell_parameters(exc.message, _split_key),
                                     hint=spell_parameters(exc.hint or "", _split_key) or None)
                check.relay(spelled, table, list(SPLIT_KEYS), fallback="kind")
            if split_set.kind in TIME_SPLITS and "timestamp" in exc.message:
                check.fail(exc.message, table, "kind", exc.hint)  # the kind asks for what the file lacks
            data_keys = [p for p in exc.params if p in DATA_KEYS]
            if data_keys:
                check.relay(exc, ("data",), list(DATA_KEYS))
            check.fail(exc.message, table, None, exc.hint)


def _about_data(exc: InputError, source: str) -> InputError:
    """A data file's error with the file (and its line) in the message: the error itself
    names the config file's line."""
    where = Path(source).name if exc.path is None or exc.path == source else exc.path
    where += "" if exc.line is None else f" line {exc.line}"
    return InputError(f"{exc.message} (data file {where})", hint=exc.hint)


def _split_key(name: str, value: Optional[str]) -> Optional[str]:
    """prepare's parameter names as an experiment's split table spells them."""
    key = {"split": "kind", "num_splits": "repeats"}.get(name, name)
    return f"`{key}`" if value is None else f"`{key}={value}`"


def _read_models(check: Checker, models: Dict[str, Any]) -> List[ModelSpec]:
    if not models:
        check.fail("no [models.NAME] table", (), None, "add e.g. [models.popularity] with family = \"popularity\"")
    out = []
    for name, spec in models.items():
        table = ("models", name)
        if not isinstance(spec, dict):
            check.fail(f"models.{name} must be a table, [models.{name}]", ("models",), name)
        if not name.strip() or any(ord(c) < 32 for c in name):
            check.fail(f"model name {name!r} is empty or holds control characters", table)
        if "family" not in spec:
            # a misspelt family key is the likely cause: name it, on its line
            near = [k for k in spec if difflib.get_close_matches(k, ["family"], n=1, cutoff=0.7)]
            if near:
                check.fail(f"[models.{name}] has no family: unknown key {near[0]!r}", table, near[0],
                           f"did you mean family? family = one of {', '.join(EXPERIMENT_FAMILIES)}")
            check.fail(f"[models.{name}] has no family", table, None, f"add family = one of {', '.join(EXPERIMENT_FAMILIES)}")
        family = spec["family"]
        if family not in EXPERIMENT_FAMILIES:
            hint = (f"the {family} family needs feature files, which an experiment does not pass yet"
                    if family in FAMILIES and takes_features(FAMILIES[family].cls)
                    else f"one of {', '.join(EXPERIMENT_FAMILIES)}")
            check.fail(f"unknown model family {family!r}", table, "family", hint)
        params = {k: v for k, v in spec.items() if k not in MODEL_KEYS}
        cls = FAMILIES[family].cls
        own = [p for p in cls.param_names() if p not in RESERVED_PARAMS]
        for key in params:
            if key in RESERVED_PARAMS:
                check.fail(f"{key!r} is set by the experiment", table, key,
                           "the top-level seed seeds every model; models fit on one thread each")
            if key not in own:
                check.fail(f"{key!r} is not a parameter of the {family} family", table, key,
                           f"its parameters: {', '.join(own)}" if own else f"the {family} family takes none")
        _check_model_params(check, family, params, table)
        tune = spec.get("tune")
        if tune is not None:
            check.integer(tune, table, "tune", 1)
            if family not in tunable_families():
                check.fail(f"the {family} family cannot be tuned", table, "tune",
                           f"tunable: {', '.join(tunable_families())}")
        out.append(ModelSpec(name=name, family=family, params=params, tune=tune))
    return out


def _check_model_params(check: Checker, family: str, params: Dict[str, Any], table: Tuple[str, ...]) -> None:
    """The family's own checks (:mod:`mrec_warp.models.params`) and train's, before any training."""
    cls = FAMILIES[family].cls
    defaults = cls().get_params() if hasattr(cls, "get_params") else {}
    kinds = {p.name: p.type for p in hyper_parameters(cls)}
    for name, value in params.items():
        # a quoted number is a type fault: say so alone, without the range the family's check adds
        # (a number parameter whose default is the word "auto" takes that word, no other text)
        default = defaults.get(name)
        numeric = kinds.get(name) in (int, float) or (isinstance(default, numbers.Real) and not isinstance(default, bool))
        if isinstance(value, str) and numeric and value != default:
            check.fail(f"{name} must be a number, got the text {value!r}", table, name,
                       f"write it without quotes: {name} = {value}")
        if isinstance(default, bool) and not isinstance(value, bool):
            check.fail(f"{name} must be true or false, got {value!r}", table, name)
    for name in ("user_max_norm", "item_max_norm"):  # train's rule: 0 means no limit
        if params.get(name) == 0:
            params[name] = None
    try:
        model = cls(**params)
        model.check_params()
        kind = params.get("confidence") or getattr(model, "confidence", "none")
        check_confidence(model, family, kind, params)  # train's rule: confidence settings need a confidence
    except InputError as exc:
        check.relay(exc, table, list(params))
    except (TypeError, ValueError) as exc:
        check.fail(f"invalid parameters: {exc}", table)


def _read_evaluate(check: Checker, spec: Dict[str, Any], models: List[ModelSpec]) -> Dict[str, Any]:
    table = ("evaluate",)
    check.unknown_keys(spec, list(EVALUATE_KEYS), table, "[evaluate]")
    out = {**EVALUATE_KEYS, **spec}
    ks = out["k"]
    if isinstance(ks, int) and not isinstance(ks, bool):
        ks = [ks]
    if (not isinstance(ks, list) or not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks)
            or len(set(ks)) != len(ks)):
        check.fail(f"k must be a list of distinct positive integers, got {out['k']!r}", table, "k", "e.g. k = [5, 10, 20]")
    out["k"] = sorted(ks)
    if not isinstance(out["beyond"], bool):
        check.fail(f"beyond must be true or false, got {out['beyond']!r}", table, "beyond")
    metrics = out["metrics"]
    default = list(ACCURACY_METRICS) + ([m for m in BEYOND_METRICS] if out["beyond"] else [])
    if metrics is None:
        metrics = default
    if not isinstance(metrics, list) or not metrics or not all(isinstance(m, str) for m in metrics):
        check.fail(f"metrics must be a list of names, got {metrics!r}", table, "metrics", f"from {', '.join(METRICS)}")
    for m in metrics:
        if m not in METRICS:
            wanted = m.split("@")[0]
            hint = (f"name it without a cut-off ({wanted!r}): k sets the cut-offs" if wanted in METRICS
                    else f"one of {', '.join(METRICS)}")
            check.fail(f"unknown metric {m!r}", table, "metrics", hint)
        if m in BEYOND_METRICS and not out["beyond"]:
            check.fail(f"metric {m!r} needs beyond = true", table, "metrics")
    out["metrics"] = list(dict.fromkeys(metrics))
    names = [m.name for m in models]
    if out["baseline"] is None:
        out["baseline"] = names[0]
    elif out["baseline"] not in names:
        check.fail(f"baseline {out['baseline']!r} is not a model of this file", table, "baseline",
                   f"one of {', '.join(names)}")
    if out["paired_test"] not in TESTS:
        check.fail(f"unknown paired test {out['paired_test']!r}", table, "paired_test", f"one of {', '.join(TESTS)}")
    if out["correction"] not in CORRECTIONS:
        check.fail(f"unknown correction {out['correction']!r}", table, "correction", f"one of {', '.join(CORRECTIONS)}")
    return out
