"""``mrec-warp train``: fit a model on a training file and save it."""
from __future__ import annotations


import click

from ..context import ExecutionContext
from ..data.confidence import CONFIDENCES
from ..seeds import DEFAULT_SEED
from ..stages.train import train as train_model
from ..progress import plural
from ._common import friendly_errors, make_progress, quiet_option, reader_options, row_options, say
from ._features import feature_file_options, pop_feature_options
from ._flags import MODEL_OPTIONS, as_flags, option_name
from ._parallel import N_JOBS, parallel_options

# Options that set a model parameter: option name -> parameter name (--ease-dtype sets dtype).
_MODEL_OPTIONS = {option_name(param): param for param in MODEL_OPTIONS}


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
  mrec-warp train export.csv -o all.npz --sep ';' --columns 0,1,2 --negatives net   # a raw export, all of it
""")
@click.argument("train", type=click.Path(dir_okay=False))
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False),
              help="Model file to write (.npz).")
@click.option("--model", "model_name", default=None,
              type=click.Choice(["warp", "hybrid", "popularity", "itemknn", "slim", "ease", "wrmf"]),
              help="Which model to train (hybrid: WARP with --item-features / --user-features; "
                   "itemknn, slim, ease: item-item models; wrmf: implicit ALS with confidence weights) "
                   "[the one --params names, else warp].")
@reader_options("TRAIN")
@row_options
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
                   "validation score [warp: 10; wrmf: 3 iterations].")
@click.option("--eval-every", type=int, help="Epochs between validation evaluations [1].")
@click.option("--min-improvement", type=click.FloatRange(min=0),
              help="WARP: a rise resets the patience only when above the last one by more than "
                   "this fraction of it [0].")
@click.option("--validation-fraction", type=float, help="Share of each user's items held out for early stopping [0.1].")
@click.option("--validation", "validation_file", type=click.Path(dir_okay=False),
              help="Validation file instead of an internal hold-out (no refit then); its layout is "
                   "guessed (--sep/--columns describe TRAIN), the row rules apply.")
@click.option("--refit/--no-refit", default=None,
              help="After early stopping, train on all data (WARP: see --warm-epochs; wrmf: "
                   "from scratch for the best count) [on].")
@click.option("--warm-epochs", type=click.IntRange(min=0),
              help="WARP refit: continue N epochs on all data from the best epoch's factors "
                   "(about half the time, up to 2% lower P@10 on long-tail data); "
                   "0 = retrain from scratch for the best epoch count [0].")
@click.option("--params", "params_file", type=click.Path(dir_okay=False),
              help="JSON of parameters (e.g. from 'mrec-warp tune'); explicit options win.")
@feature_file_options
@click.option("--identity/--no-identity", default=None,
              help="Hybrid: give every user and item its own identity feature [on].")
@click.option("--identity-weight", type=float,
              help="Hybrid: weight of each id's identity feature before normalisation [2].")
@click.option("--normalize/--no-normalize", default=None,
              help="Hybrid: scale each id's feature weights, identity included, to unit Euclidean length [on].")
@click.option("--neighbours", type=click.IntRange(min=1), help="itemknn: similar items kept per item [800].")
@click.option("--similarity", type=click.Choice(["cosine", "tfidf", "bm25"]), help="itemknn: weighting [tfidf].")
@click.option("--shrink", type=click.FloatRange(min=0), help="itemknn: cosine shrinkage [0].")
@click.option("--l1", type=click.FloatRange(min=0), help="slim: L1 penalty [1].")
@click.option("--l2", type=click.FloatRange(min=0), help="slim: L2 penalty [100]; ease: lambda [200].")
@click.option("--topk", type=click.IntRange(min=1), help="slim: largest weights kept per item [200].")
@click.option("--ease-dtype", type=click.Choice(["float64", "float32"]), help="ease: precision of the inverse [float32].")
@click.option("--max-items", type=click.IntRange(min=1), help="ease: only the N most popular items [all].")
@click.option("--memory-limit-mb", type=click.FloatRange(min=1),
              help="ease: most memory the fit may take [3/4 of the available memory].")
@click.option("--confidence", type=click.Choice(CONFIDENCES),
              help="Weigh each row by its value (3rd column: count, hours, rating): linear "
                   "c = 1 + alpha*value, log c = 1 + alpha*log1p(value/eps); none = every row counts 1 "
                   "[warp: none; wrmf: linear, and none = every row 1 + alpha].")
@click.option("--alpha", type=float, help="Confidence scale alpha [warp: 1; wrmf: auto, 3 on a binary file, "
                                          "else 5 / the mean value (the mean row weighs 1 + 5)].")
@click.option("--eps", type=float, help="Confidence log: the value that counts as one unit [1].")
@click.option("--confidence-use", type=click.Choice(["sample", "weight"]),
              help="WARP: scale each step by confidence (over its mean), or draw positives in proportion to it [weight].")
@click.option("--regularization", type=click.FloatRange(min=0), help="WRMF: L2 penalty on every vector [40].")
@click.option("--seed", type=int, show_default=str(DEFAULT_SEED),
              help="Random seed (models that draw no random numbers say so and ignore it).")
@click.option("--n-jobs", type=N_JOBS, default=1, show_default=True,
              help="Threads per epoch (hogwild; >1 is fast but not bitwise reproducible; -1: every core).")
@parallel_options(workdir_help="Folder for resumable sub-model part files [OUTPUT.parts].")
@click.option("--sub-models", "sub_models", type=click.IntRange(min=1),
              help="Fit K independent sub-models of FACTORS/K factors at once (one per worker) and "
                   "concatenate them; K is part of the model, never the cluster's size "
                   "[with --backend dask: 1, one model on one Dask worker].")
@quiet_option
@friendly_errors
def train(train, output, model_name, fmt, sep, header, columns, duplicates, negatives, min_value, empty_ids, validation_file,
          params_file, seed, n_jobs, backend, scheduler, workdir, sub_models, quiet, verbose, **options):
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
    progress = make_progress(quiet, verbose)
    features = pop_feature_options(options)
    params = {_MODEL_OPTIONS[k]: v for k, v in options.items() if v is not None}
    context = ExecutionContext(backend, n_jobs=n_jobs, scheduler=scheduler, workdir=workdir)
    result = train_model(train, output, model=model_name, params=params, params_file=params_file, format=fmt,
                         validation=validation_file, sub_models=sub_models, seed=seed, context=context,
                         progress=progress, sep=sep, header=header, columns=columns, duplicates=duplicates,
                         negatives=negatives, min_value=min_value, empty_ids=empty_ids, **features)
    if quiet:
        return
    for note in result.notes:
        click.echo("note: " + as_flags(note), err=True)
    if result.sub_models is not None:
        sizes = "+".join(str(m["factors"]) for m in result.sub_models)
        n = len(result.sub_models)
        say(f"wrote {output}: warp model of {result.n_users} users x {result.n_items} items, "
                   f"{n} sub-model{'s' if n > 1 else ''} of {sizes} factors")
        return
    extra = f", {plural(result.epochs, 'epoch')}" if result.epochs is not None else ""
    warm = sum(h.get("phase") == "refit" for h in getattr(result.model, "history_", [])) \
        if getattr(result.model, "warm_epochs", 0) else 0
    extra += f" + {warm} warm on all the data" if warm else ""
    say(f"wrote {output}: {result.model_name} model of {result.n_users} users x {result.n_items} items{extra}")
