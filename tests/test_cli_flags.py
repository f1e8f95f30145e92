"""Library messages name parameters; ``mrec-warp`` shows each as the flag its commands declare
for it, and a Python caller reads the library's own names."""
from __future__ import annotations

import io
import json
import threading
from pathlib import Path

import click
import pytest

import mrec_warp as mw
from mrec_warp.cli import main
from mrec_warp.cli._common import friendly_errors
from mrec_warp.cli._flags import FlagProgress, ParameterOption, as_flags, flags_of
from mrec_warp.errors import InputError, Reference

from .conftest import error_line, run

RATINGS = "".join(f"u{u}\ti{i}\t{1 + (u * i) % 5}\t{1000 + 10 * u + i}\n" for u in range(30) for i in range(u % 6, 12))


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("flags")
    (folder / "ratings.tsv").write_text(RATINGS)
    assert run("prepare", folder / "ratings.tsv", "-o", folder / "split", "-q").exit_code == 0
    assert run("train", folder / "split/train.tsv", "-o", folder / "pop.npz", "--model", "popularity",
               "-q").exit_code == 0
    assert run("recommend", folder / "pop.npz", "-o", folder / "recs.tsv", "-k", "3", "-q").exit_code == 0
    (folder / "float16.json").write_text(json.dumps({"dtype": "float16"}))
    (folder / "max_iter.json").write_text(json.dumps({"max_iter": 0}))
    return folder


@pytest.mark.parametrize("args, line", [
    (["train", "{f}/split/train.tsv", "-o", "{f}/m.npz", "--factors", "0"],
     "invalid parameter: --factors must be an integer >= 1, got 0"),
    # random_state is the models' name for the seed: train's --seed declares that it sets it
    (["train", "{f}/split/train.tsv", "-o", "{f}/m.npz", "--seed", "-1"],
     "invalid parameter: --seed must be an integer >= 0 and <= 9223372036854775807 or None, got -1"),
    # ease's dtype: the option's flag comes from the parameter's declaration
    (["train", "{f}/split/train.tsv", "-o", "{f}/m.npz", "--model", "ease", "--params", "{f}/float16.json"],
     "invalid parameter: dtype must be one of float32, float64, got 'float16' (set --ease-dtype)"),
    (["prepare", "{f}/ratings.tsv", "-o", "{f}/out", "--test-fraction", "2"],
     "test fraction must be at least 0 and below 1, got 2.0 (e.g. --test-fraction 0.2 puts 20% of each user's "
     "items in test; 0 puts all in train)"),
    (["prepare", "{f}/ratings.tsv", "-o", "{f}/out", "--min-rating", "99"],
     "{f}/ratings.tsv: no interactions left: 285 pairs below the minimum value (lower --min-value or "
     "--min-user-items)"),
    (["evaluate", "--train", "{f}/split/train.tsv", "--test", "{f}/split/test.tsv", "--recs", "{f}/split/train.tsv"],
     "--recs takes the output of mrec-warp recommend: were --recs and --test (or --train) swapped?"),
    # synth's --users and --items declare that they set n_users and n_items
    (["synth", "-o", "{f}/synth", "--users", "4000000000", "--items", "4000000000"],
     "4,000,000,000 users x 4,000,000,000 items are more pairs than 2**63 (lower --users or --items)"),
    (["recommend", "{f}/pop.npz", "-o", "{f}/r.tsv", "-k", "many"],
     "Invalid value for '-k': 'many' is not a valid integer range. (see 'mrec-warp recommend --help')"),
])
def test_a_bad_value_is_named_by_the_flag_that_gave_it(files, args, line):
    result = run(*[a.format(f=files) for a in args])
    assert result.exit_code == 2
    assert line.format(f=files) in result.stderr
    assert "`" not in result.stderr


def test_a_note_names_the_flag(files):
    result = run("recommend", files / "pop.npz", "-o", files / "r.tsv", "-k", "500")
    assert result.exit_code == 0
    assert result.stderr == "note: -k 500 is more than the 12 items there are; using -k 12\n"


def test_a_parameter_no_command_declares_stays_as_written(files):
    result = run("train", files / "split/train.tsv", "-o", files / "m.npz", "--model", "slim",
                 "--params", files / "max_iter.json")
    assert result.stderr == "Error: invalid parameter: `max_iter` must be an integer >= 1, got 0\n"


def test_python_callers_read_the_library_s_names(files):
    with pytest.raises(InputError) as caught:
        mw.train(files / "split/train.tsv", params={"factors": 0, "random_state": -1})
    assert str(caught.value) == "invalid parameter: `factors` must be an integer >= 1, got 0"
    assert caught.value.references == (Reference("factors"),) and caught.value.params == ("factors",)
    with pytest.raises(InputError, match=r"e\.g\. `test_fraction=0\.2` puts"):
        mw.prepare(files / "ratings.tsv", files / "out", test_fraction=2)


def test_an_error_carries_the_parameters_it_names():
    exc = InputError("`leave_out=1` and `leave_out=1` exceed `k`", path="we`ird`.tsv", hint="lower `k`",
                     params=["seed", "k"])
    assert exc.references == (Reference("leave_out", "1"), Reference("k"), Reference("seed"))
    assert exc.params == ("leave_out", "k", "seed")
    assert str(exc) == exc.render() == "we`ird`.tsv: `leave_out=1` and `leave_out=1` exceed `k` (lower `k`)"
    assert exc.render(lambda name, value: name.upper()) == "we`ird`.tsv: LEAVE_OUT and LEAVE_OUT exceed K (lower K)"


@pytest.mark.parametrize("template, cli", [
    ("`leave_out=1`", "--leave-out 1"),
    ("use `dtype=float64`", "use --ease-dtype float64"),
    ("`k=5` is more", "-k 5 is more"),
    ("`min_rating=4` or `min_value=4`", "--min-rating 4 or --min-value 4"),  # each long spelling
    ("`outdir` and `random_state`", "--output and --seed"),
    ("`scheduler` tcp://x:1 needs `backend=dask`", "--scheduler tcp://x:1 needs --backend dask"),
    ("`decay` and `Factors` and ``factors``", "`decay` and `Factors` and ``factors``"),  # not parameters with flags
])
def test_the_cli_spells_references_as_flags(template, cli):
    assert as_flags(template, flags_of(main)) == cli
    exc = InputError(template, path="we`ird`.tsv", hint=template)
    assert error_line(exc) == f"we`ird`.tsv: {cli} ({cli})"  # the file name is never rewritten
    assert str(exc) == f"we`ird`.tsv: {template} ({template})"


# -- the flags come from the declarations, the running command's first ----------------------------
@click.group()
def tool():
    """Two commands that set the same library parameter with different flags."""


@tool.command()
@click.option("--seed", type=int, cls=ParameterOption, parameters=("random_state",))
@friendly_errors
def first(seed):
    raise InputError("`random_state` is too large", hint="lower `random_state`, or give `leave_out=1` or `margin`")


@tool.command()
@click.option("--model-seed", type=int, cls=ParameterOption, parameters=("random_state",))
@click.option("--leave-out", type=int)
@friendly_errors
def second(model_seed, leave_out):
    first.callback.__wrapped__(None)


@tool.command()
@friendly_errors
def third():
    progress = FlagProgress(verbose=True, stream=io.StringIO())
    thread = threading.Thread(target=progress.log, args=("`leave_out=2` from a worker thread",))
    thread.start()
    thread.join()
    click.echo(progress.stream.getvalue().split("] ", 1)[1], nl=False)


def test_a_command_spells_by_its_own_declarations_then_by_the_others():
    assert run("first", command=tool).stderr == ("Error: --seed is too large (lower --seed, or give --leave-out 1 "
                                                 "or `margin`)\n")
    assert run("second", command=tool).stderr == ("Error: --model-seed is too large (lower --model-seed, or give "
                                                  "--leave-out 1 or `margin`)\n")
    assert run("third", command=tool).stdout == "--leave-out 2 from a worker thread\n"


@pytest.mark.parametrize("command", [
    ["tune", "TRAIN", "--models", "itemknn", "-o", "OUT"],
    ["prepare", "TRAIN", "-o", "OUT"],
    ["synth", "-o", "OUT"],
])
def test_a_negative_seed_is_one_line_before_any_work(tmp_path, command):
    train = tmp_path / "train.tsv"
    train.write_text("u1\ti1\nu1\ti2\nu2\ti1\n")
    args = [str(train) if a == "TRAIN" else str(tmp_path / "out") if a == "OUT" else a for a in command]
    result = run(*args, "--seed", "-1")
    assert result.exit_code == 2, result.output
    assert "-1 is not a seed: give a whole number from 0 to" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
