"""``mrec-warp prepare``: a ratings file in, train / test files out."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import click

from ..data.rows import describe_counts
from ..data.split import SPLITS
from ..progress import plural
from ..seeds import DEFAULT_SEED
from ..stages.prepare import prepare_outputs, run_prepare, split_folders
from ..files import check_outputs
from ._flags import as_flags
from ._common import SEED, friendly_errors, make_progress, quiet_option, row_options, say
from ._output_paths import OutputPath


@click.command(short_help="Merge, filter and split a ratings file into train and test files.", epilog="""\b
Examples:
  mrec-warp prepare ratings.tsv -o split/ --min-rating 4
  mrec-warp prepare ml-1m/ratings.dat -o split/ --format movielens --min-rating 4 --leave-out 1
  mrec-warp prepare ratings.csv -o split/ --columns userId,movieId,rating,timestamp --split temporal
  mrec-warp prepare ratings.tsv -o cv/ --num-splits 5        # cv/split-0 ... cv/split-4
  mrec-warp prepare ml-100k/u.data -o future/ --min-rating 4 --split global-time --cutoff 1998-03-01
  mrec-warp prepare invoices.csv -o all/ --columns 6,1,3 --negatives net --empty-ids drop --test-fraction 0
  mrec-warp prepare ml-100k/u.data -o cold/ --min-rating 4 --split cold-items --test-fraction 0.2 --features

\b
Rules, in order: rows with an empty user or item id are refused (--empty-ids drop leaves
them out); negative values are refused (--negatives drop|net to keep the file);
repeated (user, item) rows are merged by --duplicates (default: values summed, earliest
time); pairs valued below --min-value (alias --min-rating) are dropped, a 0 is kept;
users with fewer than --min-user-items rows left are dropped; then each user's rows are split (users with one row stay in train), and
test rows whose item never appears in train are dropped. summary.json counts each step, and
the lines printed add them up: rows read - each rule's drop = pairs kept = train + test.
The value column (rating, count, hours) stays in train.tsv / test.tsv either way: binarise
with --min-rating, or keep every row and let 'train --confidence log' weigh rows by it.
""")
@friendly_errors
@click.argument("input_file", metavar="INPUT", type=click.Path(dir_okay=False))
@click.option("-o", "--output", "outdir", required=True, type=OutputPath(folder=True),
              help="Folder for train.tsv, test.tsv and summary.json (created if needed).")
@row_options("INPUT")
@click.option("--min-user-items", type=int, default=1, show_default=True, metavar="N",
              help="Drop users with fewer than N interactions left.")
@click.option("--test-fraction", type=float, metavar="F",
              help="Share of each user's interactions put in test, rounded, at least 1 [0.2]; 0 puts "
                   "every row in train.tsv (test.tsv is empty): a model on all the data.")
@click.option("--leave-out", type=int, metavar="K",
              help="Put K interactions of each user in test instead of a fraction; 0 puts every row in "
                   "train.tsv, as --test-fraction 0.")
@click.option("--split", "split_kind", type=click.Choice(SPLITS), default="random", show_default=True,
              help="Choose test rows at random, the latest by timestamp (temporal), every row after one "
                   "cut-off (global-time: --cutoff, or --test-fraction of the rows by time), or hold out "
                   "whole items / users (cold-items, cold-users: --test-fraction of them, all their rows).")
@click.option("--cutoff", metavar="DATE", help="With --split global-time: rows later than this ISO 8601 date "
                                             "(2020-01-31, 2020-01-31T12:00:00, ...+02:00; UTC unless zoned) or unix "
                                             "timestamp go to test (01/06/2021 and other orders are refused); "
                                             "test rows whose user or item has no earlier row are dropped.")
@click.option("--num-splits", type=int, default=1, show_default=True, metavar="N",
              help="Write N independent random splits into OUTDIR/split-0 ... split-(N-1).")
@click.option("--seed", type=SEED, default=DEFAULT_SEED, show_default=True, help="Seed of the random choices.")
@click.option("--features", "features", is_flag=True,
              help="Also write item_features.tsv / user_features.tsv into OUTDIR from files beside INPUT: "
                   "MovieLens 100k u.item (genres, release-year bucket) and u.user (age bucket, gender, "
                   "occupation), or a synth folder's item_tags.tsv.")
@quiet_option
def prepare(input_file, outdir, rows, min_user_items, test_fraction, leave_out, split_kind, num_splits, seed, quiet,
            verbose, features=False, cutoff=None):
    """Merge, filter and split a ratings file into train and test files per user.

    INPUT has one interaction per line: user, item[, rating[, timestamp]] (any delimiter,
    optional header, optionally .gz); a regular file, a pipe, or - for standard input.
    Outputs are headerless TSV with the same columns,
    written atomically; the same input and --seed always give the same files.
    """
    progress = make_progress(quiet, verbose)
    check_outputs({"--output": prepare_outputs(outdir, num_splits, features)}, [input_file])
    result = run_prepare(input_file, outdir, rows, min_user_items=min_user_items, test_fraction=test_fraction,
                         leave_out=leave_out, split=split_kind, num_splits=num_splits, seed=seed, cutoff=cutoff,
                         features=features, progress=progress)
    summaries = [result] if num_splits == 1 else result["splits"]
    for path in summaries[0].get("feature_files", []):
        say(f"wrote {path}", quiet=quiet)
    for folder, summary in zip(split_folders(outdir, num_splits), summaries):
        say(_describe(folder, summary), quiet=quiet)


def _rows_line(s: Dict[str, Any]) -> str:
    """Rows read -> pairs kept by the row rules (the one wording with train's log) -> the
    rows of each split file, e.g. "1,000 rows read = 1,000 pairs - 300 below --min-value =
    700 pairs kept - 5 test rows with items unseen in train = 560 train + 135 test rows"."""
    rules = s["parameters"]
    return (describe_counts(s, rules["duplicates"], rules["negatives"], "--min-value")
            + _steps((s["rows_of_users_below_min_user_items"], "", "of users below --min-user-items"),
                     (s.get("test_rows_with_unknown_user", 0), "test row", "with users unseen in train"),
                     (s["test_rows_with_unknown_item"], "test row", "with items unseen in train"))
            + f" = {s['train']['rows']:,} train + {plural(s['test']['rows'], 'test row')}"
            + (f" (cut-off {s['cutoff']['date']})" if "cutoff" in s else ""))


def _ids_line(s: Dict[str, Any], side: str) -> str:
    """Users (items) read -> kept -> in train, e.g. "764 users read - 142 with no pair left =
    622 kept" or "140 items read - 2 only in dropped test rows = 138 in train". A user is
    kept while a pair of theirs is (``users.kept``); an item's count ends where
    ``items.kept`` does, at the items train holds. Train's count of users only when it differs."""
    ids = s[f"{side}s"]
    text = plural(ids["read"], side) + " read" + _steps(
        (ids["dropped_without_positives"], "", "with no pair left"),
        (ids.get("dropped_below_min_user_items", 0), "", "below --min-user-items"))
    # ids only in dropped test rows, or held out in test by a cold split
    to_train = _steps((ids.get("dropped_only_in_test", 0), "", "only in dropped test rows"),
                      (ids.get("cold_in_test", 0), "", "held out in test"))
    if side == "user":
        text += f" = {ids['kept']:,} kept"
        if not to_train:
            return text
    return f"{text}{to_train} = {s['train'][f'{side}s']:,} in train"


def _steps(*steps) -> str:
    """`` - N noun(s) words`` for each (N, noun, words) that removed something (an empty
    noun: the line's own unit, pairs or ids)."""
    return "".join(f" - {plural(n, noun) if noun else f'{n:,}'} {words}" for n, noun, words in steps if n)


def _describe(folder: Path, s: Dict[str, Any]) -> str:
    """What was written, then where the rows, users and items went (each line a sum that
    adds up, every number one of ``summary.json``'s), how the input was read (first split
    only) and what became of the value column."""
    return (
        f"wrote {folder / 'train.tsv'} ({plural(s['train']['rows'], 'row')}), {folder / 'test.tsv'} "
        f"({plural(s['test']['rows'], 'row')}) and {folder / 'summary.json'}\n"
        f"  {_rows_line(s)}\n  {_ids_line(s, 'user')}; {_ids_line(s, 'item')}"
        # how the input was read is the same for every split: said once
        + "".join(f"\n  {line}" for line in s["reading"]["description"].split("\n")
                  if "reading" in s and not s.get("split"))
        + (f"\n  {as_flags(s['value_column']['description'])}" if "value_column" in s else "")
        + ("\n  input is not valid UTF-8: read as Latin-1, and train.tsv / test.tsv are written in Latin-1"
           if s.get("encoding") == "latin-1" else "")
    )
