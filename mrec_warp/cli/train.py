"""``mrec-warp train``: fit a model on a training file and save it."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Optional

import click

from ..data.confidence import CONFIDENCES, describe_confidence
from ..data.interactions import Interactions
from ..data.io import output_encoding, read_ratings
from ..errors import InputError
from ..parallel import check_backend
from ._common import check_outputs, friendly_errors, make_progress, quiet_option
from ._features import feature_file_options, pop_feature_options, read_feature_files
from ._parallel import N_JOBS, parallel_options

# Options that map one-to-one onto WARP parameters: (option name, parameter name).
_WARP_OPTIONS = {
    "factors": "factors", "loss": "loss", "learning_rate": "learning_rate",
    "learning_schedule": "learning_schedule", "user_reg": "user_reg", "item_reg": "item_reg",
    "max_sampled": "max_sampled", "item_bias": "item_bias", "epochs": "epochs",
    "user_max_norm": "user_max_norm", "item_max_norm": "item_max_norm", "kos_k": "kos_k", "kos_n": "kos_n",
    "max_epochs": "max_epochs", "patience": "patience", "eval_every": "eval_every",
    "validation_fraction": "validation_fraction", "refit": "refit",
    "min_improvement": "min_improvement", "warm_epochs": "warm_epochs",  # warp, hybrid
    "identity": "identity", "identity_weight": "identity_weight", "normalize": "normalize",  # hybrid only
    # item-similarity models (itemknn, slim, ease)
    "neighbours": "neighbours", "similarity": "similarity", "shrink": "shrink", "l1": "l1", "l2": "l2",
    "topk": "topk", "ease_dtype": "dtype", "max_items": "max_items", "memory_limit_mb": "memory_limit_mb",
    "confidence": "confidence", "alpha": "alpha", "eps": "eps", "confidence_use": "confidence_use",  # warp, wrmf
    "regularization": "regularization",  # wrmf only
}


def model_classes() -> Dict[str, Any]:
    """Models the CLI can train, by name."""
    from ..models.families import model_classes as registry

    return registry()


def load_interactions(path: str, fmt: str = "auto", values: bool = False, required: bool = True) -> Interactions:
    """Read a ratings file; with ``values`` the matrix holds the value column (summed over
    duplicate rows), else every row is 1. A file without a value column is refused when
    ``required``, else read as ones (``has_values`` says which it was)."""
    df = read_ratings(path, format=fmt)
    if values and required and "value" not in df:
        raise InputError("--confidence needs a value column, and the file has only user and item", path=path,
                         hint="drop --confidence, or give a file with a third column (count, hours, rating)")
    if values and "value" in df:
        bad = ~(df["value"].to_numpy() >= 0)  # negative or NaN: the models would refuse it without the file
        if bad.any():
            row = df[bad].iloc[0]
            raise InputError(f"{int(bad.sum()):,} value(s) cannot be a confidence (negative or not finite), e.g. "
                             f"{row['value']!r} for user {row['user']!r}, item {row['item']!r}", path=path,
                             hint="values are counts, hours or ratings >= 0; drop those rows or use --confidence none")
    data = Interactions.from_dataframe(df, value_col="value" if values and "value" in df else None)
    data.has_values = values and "value" in df
    data.id_encoding = df.attrs.get("encoding")  # so outputs write ids back as the same bytes
    return data


def describe_values(data: Interactions, kind: str, alpha: float, eps: float) -> str:
    """One log line: what the value column (TRAIN's third) became."""
    if kind == "none":
        return "value column (3rd) ignored: every row is a positive of weight 1 (--confidence log to weight by it)"
    zeros = int(data.nnz - (data.matrix.data != 0).sum())
    return (f"value column (3rd): {describe_confidence(kind, alpha, eps)}"
            + (f"; {zeros:,} rows of value 0 are not positives" if zeros else ""))


def _keep_encoding(model, data: Interactions) -> None:
    """Record in the model that its ids came from a Latin-1 file: its outputs are then Latin-1 too."""
    if output_encoding(getattr(data, "id_encoding", None)) != "utf-8":
        model.id_encoding_ = output_encoding(data.id_encoding)


def load_params(path: Optional[str]) -> Dict[str, Any]:
    if not path:
        return {}
    params = _read_params_file(path)
    return params.get("params", params)  # accept tune's output, which nests them


def params_model(path: Optional[str]) -> Optional[str]:
    """The model family a parameters file names (tune's output does), if any."""
    model = _read_params_file(path).get("model") if path else None
    if model is not None and model not in model_classes():
        raise InputError(f"unknown model {model!r}", path=path, hint=f"one of {', '.join(model_classes())}")
    return model


def _read_params_file(path: str) -> Dict[str, Any]:
    try:
        params = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg}", path=path, line=exc.lineno,
                         hint="expected an object such as {\"factors\": 64}") from None
    if not isinstance(params, dict):
        raise InputError("expected a JSON object of parameters", path=path, hint="e.g. {\"factors\": 64}")
    return params  # tune's output nests them under "params", beside "model"


@click.command(epilog="""\b
Examples:
  mrec-warp train split/train.tsv -o model.npz
  mrec-warp train split/train.tsv -o model.npz --factors 128 --n-jobs 2
  mrec-warp train split/train.tsv -o pop.npz --model popularity
  mrec-warp train split/train.tsv -o model.npz --epochs 20      # no early stopping
  mrec-warp train plays/train.tsv -o model.npz --confidence log # weigh rows by their play count
  mrec-warp train plays.tsv -o wrmf.npz --model wrmf --confidence log --alpha 2
  mrec-warp train split/train.tsv -o hybrid.npz --model hybrid \
      --item-features split/item_features.tsv --user-features split/user_features.tsv
  mrec-warp train split/train.tsv -o model.npz --backend dask --scheduler tcp://10.0.0.5:8786
""")
@click.argument("train", type=click.Path(dir_okay=False))
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False),
              help="Model file to write (.npz).")
@click.option("--model", "model_name", default=None,
              type=click.Choice(["warp", "hybrid", "popularity", "itemknn", "slim", "ease", "wrmf"]),
              help="Which model to train (hybrid: WARP with --item-features / --user-features; "
                   "itemknn, slim, ease: item-item models; wrmf: implicit ALS with confidence weights) "
                   "[the one --params names, else warp].")
@click.option("--format", "fmt", default="auto", show_default=True,
              type=click.Choice(["auto", "tsv", "csv", "movielens"]), help="Format of TRAIN.")
@click.option("--factors", type=int, help="Latent dimensions [64].")
@click.option("--loss", type=click.Choice(["warp", "bpr", "warp-kos"]), help="Ranking loss [warp].")
@click.option("--kos-k", type=int, help="warp-kos: step on the k-th best of the sampled positives [5].")
@click.option("--kos-n", type=int, help="warp-kos: positives sampled per step, at most 64 [10].")
@click.option("--learning-rate", type=float, help="Base step size [warp: 0.02; hybrid: 0.05 with features, else 0.02].")
@click.option("--learning-schedule", type=click.Choice(["adagrad", "sgd"]), help="Step rule [adagrad].")
@click.option("--user-reg", type=float, help="L2 penalty on user vectors [0].")
@click.option("--item-reg", type=float, help="L2 penalty on item vectors [0].")
@click.option("--max-sampled", type=int, help="Most negatives compared per positive [50].")
@click.option("--user-max-norm", type=click.FloatRange(min=0),
              help="Longest a user vector may grow; 0 = no limit [1.25].")
@click.option("--item-max-norm", type=click.FloatRange(min=0), help="Longest an item vector may grow; 0 = no limit [0].")
@click.option("--item-bias/--no-item-bias", default=None, help="Learn item biases [on].")
@click.option("--epochs", type=int, help="Train exactly N epochs, no early stopping.")
@click.option("--max-epochs", type=int, help="Upper bound for early stopping [200].")
@click.option("--patience", type=int,
              help="Stop at the first evaluation this many epochs after the last rise of the "
                   "validation score [warp: 6; wrmf: 3 iterations].")
@click.option("--eval-every", type=int, help="Epochs between validation evaluations [warp: 2; wrmf: 1].")
@click.option("--min-improvement", type=click.FloatRange(min=0),
              help="WARP: a rise resets the patience only when above the last one by more than "
                   "this fraction of it [0.002].")
@click.option("--validation-fraction", type=float, help="Share of each user's items held out for early stopping [0.1].")
@click.option("--validation", "validation_file", type=click.Path(dir_okay=False),
              help="Validation file instead of an internal hold-out (no refit then).")
@click.option("--refit/--no-refit", default=None,
              help="After early stopping, train on all data (WARP: see --warm-epochs; wrmf: "
                   "from scratch for the best count) [on].")
@click.option("--warm-epochs", type=click.IntRange(min=0),
              help="WARP refit: epochs on all data from the best epoch's factors, adagrad "
                   "restarted; 0 = retrain from scratch for the best epoch count [8].")
@click.option("--params", "params_file", type=click.Path(dir_okay=False),
              help="JSON of parameters (e.g. from 'mrec-warp tune'); explicit options win.")
@feature_file_options
@click.option("--identity/--no-identity", default=None,
              help="Hybrid: give every user and item its own identity feature [on].")
@click.option("--identity-weight", type=float,
              help="Hybrid: weight of each id's identity feature before normalisation [2].")
@click.option("--normalize/--no-normalize", default=None,
              help="Hybrid: scale each id's feature weights, identity included, to unit Euclidean length [on].")
@click.option("--neighbours", type=click.IntRange(min=1), help="itemknn: similar items kept per item [200].")
@click.option("--similarity", type=click.Choice(["cosine", "tfidf", "bm25"]), help="itemknn: weighting [tfidf].")
@click.option("--shrink", type=click.FloatRange(min=0), help="itemknn: cosine shrinkage [0].")
@click.option("--l1", type=click.FloatRange(min=0), help="slim: L1 penalty [2].")
@click.option("--l2", type=click.FloatRange(min=0), help="slim: L2 penalty [200]; ease: lambda [400].")
@click.option("--topk", type=click.IntRange(min=1), help="slim: largest weights kept per item [200].")
@click.option("--ease-dtype", type=click.Choice(["float64", "float32"]), help="ease: precision of the inverse [float32].")
@click.option("--max-items", type=click.IntRange(min=1), help="ease: only the N most popular items [all].")
@click.option("--memory-limit-mb", type=click.FloatRange(min=1),
              help="ease: most memory the fit may take [3/4 of the available memory].")
@click.option("--confidence", type=click.Choice(CONFIDENCES),
              help="Weigh each row by its value (3rd column: count, hours, rating): linear "
                   "c = 1 + alpha*value, log c = 1 + alpha*log1p(value/eps); none = every row counts 1 "
                   "[warp: none; wrmf: linear, and none = every row 1 + alpha].")
@click.option("--alpha", type=float, help="Confidence scale alpha [1].")
@click.option("--eps", type=float, help="Confidence log: the value that counts as one unit [1].")
@click.option("--confidence-use", type=click.Choice(["sample", "weight"]),
              help="WARP: scale each step by confidence (over its mean), or draw positives in proportion to it [weight].")
@click.option("--regularization", type=click.FloatRange(min=0), help="WRMF: L2 penalty on every vector [40].")
@click.option("--seed", type=int, default=42, show_default=True, help="Random seed.")
@click.option("--n-jobs", type=N_JOBS, default=1, show_default=True,
              help="Threads per epoch (hogwild; >1 is fast but not bitwise reproducible; -1: every core).")
@parallel_options(workdir_help="Folder for resumable sub-model part files [OUTPUT.parts].")
@click.option("--sub-models", "sub_models", type=click.IntRange(min=1),
              help="Fit K independent sub-models of FACTORS/K factors at once (one per worker) and "
                   "concatenate them [with --backend dask: one per Dask worker].")
@quiet_option
@friendly_errors
def train(train, output, model_name, fmt, validation_file, params_file, seed, n_jobs, backend, scheduler, workdir,
          sub_models, quiet, verbose, **options):
    """Fit a model on TRAIN (user<TAB>item[<TAB>value...] rows, every row a positive).

    The value column is ignored unless --confidence weighs rows by it (WARP), or, for
    --model wrmf, by default (every row weighs 1 + alpha when there is no value column).

    By default WARP picks its number of epochs itself: it holds out 10% of each user's
    items, evaluates precision@10 every 2 epochs, stops 6 epochs after it last rose by more
    than 0.2%, and then trains the best epoch's model 8 more epochs on all of TRAIN.
    """
    progress = make_progress(quiet, verbose)
    check_outputs({"--output": output}, [train, validation_file, params_file, options.get("item_features"),
                                         options.get("user_features")])
    model_name = model_name or params_model(params_file) or "warp"
    cls = model_classes()[model_name]
    model = cls()
    params = dict(load_params(params_file))
    kind = options.get("confidence") or params.get("confidence") or getattr(model, "confidence", "none")
    if kind != "none" and "confidence" not in model._param_names():
        raise InputError(f"--confidence is used by --model warp or wrmf, not --model {model_name}",
                         hint="drop --confidence, or train --model warp")
    # WRMF weighs observed pairs 1 + alpha even without values, so its alpha always matters
    if kind == "none" and model_name != "wrmf" and any(options.get(k) is not None
                                                       for k in ("alpha", "eps", "confidence_use")):
        raise InputError("--alpha, --eps and --confidence-use only matter with a confidence",
                         hint="add --confidence log (or linear), or drop them")
    # WRMF's default confidence reads the value column when there is one, and is 1 + alpha without
    data = load_interactions(train, fmt, values=kind != "none", required=model_name != "wrmf")
    progress.log(f"read {data.nnz} interactions: {data.n_users} users x {data.n_items} items from {train}")
    feature_opts = pop_feature_options(options)
    params.update({_WARP_OPTIONS[k]: v for k, v in options.items() if v is not None})
    for name in ("user_max_norm", "item_max_norm"):
        if params.get(name) == 0:  # the options' spelling of "no limit"
            params[name] = None
    if "random_state" in model._param_names():
        params.update(random_state=seed, n_jobs=n_jobs)
    elif "n_jobs" in model._param_names():  # item-item models: deterministic, no seed
        params.update(n_jobs=n_jobs)
        if "backend" in model._param_names():
            params.update(backend=backend, scheduler=scheduler or "")
    foreign = [name for name in params if name not in model._param_names()]
    if foreign:  # name the option the user typed, and the ones this model takes
        flags = {param: "--" + option.replace("_", "-") for option, param in _WARP_OPTIONS.items()}
        own = sorted(flags[p] for p in model._param_names() if p in flags)
        given = [k for k, v in options.items() if v is not None and _WARP_OPTIONS.get(k) == foreign[0]]
        what = f"--{given[0].replace('_', '-')}" if given else f"{foreign[0]!r} (from {params_file})"
        raise InputError(f"{what} does not apply to --model {model_name}",
                         hint=(f"its options: {', '.join(own)}" if own else f"--model {model_name} takes no options")
                         + (f"; {params_file} may be for another model" if not given and params_file else ""))
    model.set_params(**params)
    check_backend(backend, scheduler)
    if sub_models and model_name != "warp":
        raise InputError(f"--sub-models needs --model warp, not --model {model_name}", hint="drop --sub-models")
    if model_name == "wrmf":
        progress.log("wrmf: confidence 1 + alpha * " + (f"f(value), {kind}, from the value column" if data.has_values
                                                        else "1 (values ignored or no value column)"))
    elif "confidence" in model._param_names():
        progress.log(describe_values(data, kind, model.alpha, model.eps)
                     + (f", used to {model.confidence_use} positives" if kind != "none" else ""))
    if model_name == "warp" and (sub_models or backend == "dask"):
        if kind != "none":
            raise InputError("--confidence does not combine with sub-models yet",
                             hint="drop --sub-models / --backend dask, or drop --confidence")
        if validation_file:
            raise InputError("--validation does not combine with sub-models", path=validation_file,
                             hint="each sub-model early-stops on its own hold-out; drop --validation")
        from ..distributed import fit_submodels

        model = fit_submodels(data, model.get_params(), n_models=sub_models, random_state=seed, backend=backend,
                              n_jobs=n_jobs, scheduler=scheduler, workdir=workdir or f"{output}.parts",
                              progress=progress)
        _keep_encoding(model, data)
        model.save(output)
        if not quiet:
            click.echo(f"wrote {output}: warp model of {data.n_users} users x {data.n_items} items, "
                       f"{len(model.sub_models_)} sub-models of {'+'.join(str(m['factors']) for m in model.sub_models_)} factors")
        return
    if backend == "processes" and model_name == "warp":
        # hogwild needs every worker to write the same factor arrays: threads share them for
        # free, processes cannot (short of shared memory plus locking), so fit on threads.
        progress.log(f"note: hogwild fitting runs on threads, not processes; fitting on {n_jobs} thread(s) "
                     "(use --sub-models K to fit independent sub-models on processes)")
    fit_kwargs: Dict[str, Any] = {}
    if model_name != "popularity":
        fit_kwargs["progress"] = progress
        if validation_file:
            fit_kwargs["validation"] = load_interactions(validation_file, fmt)
    if model_name == "wrmf":
        fit_kwargs["use_values"] = data.has_values
    user_table, item_table = read_feature_files(feature_opts, getattr(data, "id_encoding", None))
    if user_table is not None or item_table is not None:
        if model_name != "hybrid":
            raise InputError(f"feature files need --model hybrid, not --model {model_name}",
                             path=feature_opts["item_features"] or feature_opts["user_features"],
                             hint="add --model hybrid")
        fit_kwargs.update(user_features=user_table, item_features=item_table)
    model.fit(data, **fit_kwargs)
    _keep_encoding(model, data)
    model.save(output)
    extra = f", {model.best_epoch_} epochs" if hasattr(model, "best_epoch_") else ""
    if not quiet:
        click.echo(f"wrote {output}: {model_name} model of {data.n_users} users x {data.n_items} items{extra}")
