"""``mrec-warp train``: fit a model on a training file and save it."""
from __future__ import annotations


import click

from ..errors import InputError
from ..files import descriptor_of, is_stream
from ..models.ann import check_indexable
from ..models.families import model_classes
from ..seeds import DEFAULT_SEED
from ..stages.train import run_train
from ..progress import plural
from ._common import friendly_errors, make_progress, quiet_option, row_options, say
from ._features import feature_file_options
from .index import index
from ._flags import ParameterOption, as_flags
from ._model_options import model_options, option_parameters
from ._parallel import parallel_options
from ._output_paths import OutputPath

# Options that set a model parameter: option name -> parameter name (--ease-dtype sets dtype).
_MODEL_OPTIONS = option_parameters()


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
  mrec-warp train big.tsv -o wrmf.npz --model wrmf --alpha 1 --backend dask --scheduler tcp://10.0.0.5:8786 \
      --partitions 16     # no worker holds the whole log
  mrec-warp train export.csv -o all.npz --sep ';' --columns 0,1,2 --negatives net   # a raw export, all of it
""")
@friendly_errors
@click.argument("train", type=click.Path(dir_okay=False))
@click.option("-o", "--output", "output", required=True, type=OutputPath(),
              help="Model file to write (.npz).")
@click.option("--model", "model_name", default=None, type=click.Choice(list(model_classes())),
              help="Which model to train (hybrid: WARP with --item-features / --user-features; "
                   "each model's options say which families take them) [the one --params names, else warp].")
@row_options("TRAIN")
@click.option("--validation", "validation_file", type=click.Path(dir_okay=False),
              help="Validation file instead of an internal hold-out (no refit then); its layout is "
                   "guessed (--sep/--columns describe TRAIN), the row rules apply.")
@click.option("--params", "params_file", type=click.Path(dir_okay=False),
              help="JSON of parameters (e.g. from 'mrec-warp tune'); explicit options win.")
@feature_file_options
@model_options
@click.option("--seed", type=int, show_default=str(DEFAULT_SEED),
              cls=ParameterOption, parameters=("random_state",),  # every model's seed; its checks name it so
              help="Random seed (models that draw no random numbers say so and ignore it).")
@parallel_options(n_jobs_default=1,
                  n_jobs_help="Threads per epoch (hogwild; >1 is fast but not bitwise reproducible; -1: every core).",
                  workdir_help="Folder for resumable sub-model part files [OUTPUT.parts].")
@click.option("--sub-models", "sub_models", type=click.IntRange(min=1),
              help="Fit K independent sub-models of FACTORS/K factors at once (one per worker) and "
                   "concatenate them; K is part of the model, never the cluster's size "
                   "[with --backend dask: 1, one model on one Dask worker].")
@click.option("--partitions", type=click.IntRange(min=1), metavar="P",
              help="WRMF on a Dask cluster (--backend dask): cut the interactions into P blocks of users and P of "
                   "items, each held by one worker, so that no worker holds the whole log; the local fit's model to "
                   "float32 round-off [off: every worker gets the whole matrix].")
@click.option("--ann", "ann_index", is_flag=True,
              help="Also build the model's ANN index, OUTPUT.ann, as mrec-warp index does (the [ann] extra).")
@quiet_option
def train(train, output, model_name, rows, validation_file, params_file, features, seed, context, sub_models,
          partitions, quiet, verbose, ann_index, **options):
    """Fit a model on TRAIN (user<TAB>item[<TAB>value...] rows, every row kept a positive).

    TRAIN may be prepare's train.tsv or a raw export, read with the same options as
    prepare (--sep, --columns, --header) and the same row rules (--duplicates,
    --negatives, --min-value): the whole file becomes the model's training data.

    The value column is ignored unless --confidence weighs rows by it (WARP), or, for
    --model wrmf, by default (every row weighs 1 + alpha when there is no value column).

    By default WARP picks its number of epochs itself: it holds out 10% of each user's
    items, evaluates precision@10 every epoch, stops 10 epochs after it last rose, and then
    retrains on all of TRAIN for the best number of epochs.
    """
    if ann_index:  # refused before training, not after it
        check_indexable(model_name)
        if descriptor_of(output) is not None or is_stream(output):
            raise InputError("--ann writes the index beside the model file (OUTPUT.ann): give -o a file, not "
                             "standard output or a stream", hint="drop --ann, or write the model to a file")
    progress = make_progress(quiet, verbose)
    params = {_MODEL_OPTIONS[k]: v for k, v in options.items() if v is not None}
    result = run_train(train, output, model=model_name, params=params, params_file=params_file,
                       validation=validation_file, sub_models=sub_models, partitions=partitions, seed=seed, rows=rows, features=features,
                       context=context, progress=progress)
    if ann_index:
        click.get_current_context().invoke(index, model_file=output, quiet=quiet, verbose=verbose)
    for note in [] if quiet else result.notes:
        click.echo("note: " + as_flags(note), err=True)
    if result.sub_models is not None:
        sizes = "+".join(str(m["factors"]) for m in result.sub_models)
        n = len(result.sub_models)
        say(f"wrote {output}: warp model of {result.n_users} users x {result.n_items} items, "
            f"{n} sub-model{'s' if n > 1 else ''} of {sizes} factors", quiet=quiet)
        return
    # WRMF's passes are alternating least-squares iterations, as its log and docs call them
    unit = "iteration" if result.model_name == "wrmf" else "epoch"
    extra = f", {plural(result.epochs, unit)}" if result.epochs is not None else ""
    warm = sum(h.get("phase") == "refit" for h in getattr(result.model, "history_", [])) \
        if getattr(result.model, "warm_epochs", 0) else 0
    extra += f" + {warm} warm on all the data" if warm else ""
    say(f"wrote {output}: {result.model_name} model of {result.n_users} users x {result.n_items} items{extra}",
        quiet=quiet)
