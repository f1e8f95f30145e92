"""Writing one split's folder (train.tsv, test.tsv, summary.json) so no reader sees a mixed split."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

import pandas as pd

from ..files import DIR_MODE, atomic_path, atomic_write, make_folders, owner_tag, record_finished, remove_stale_temps
from .tsv import write_interactions

#: What :func:`~mrec_warp.stages.prepare.prepare` writes into each split's folder; summary.json,
#: written last, says the folder is complete.
SPLIT_FILES = ("train.tsv", "test.tsv", "summary.json")


def write_split(folder: Path, train: pd.DataFrame, test: pd.DataFrame, summary: Dict[str, Any],
                encoding: str = "utf-8") -> None:
    """Write train.tsv, test.tsv and summary.json so that a reader never sees a mixed split.

    A new (or empty) folder is written whole as a hidden temporary folder beside it and
    renamed into place: it appears complete or not at all. An existing folder may hold other
    files (the input, the user's notes), so it is not replaced: each file goes to a
    temporary name, summary.json -- the "complete" marker -- is removed first, and the files
    are renamed train, test, then summary last. A run killed in between leaves no
    summary.json, so the folder never claims to hold a split it does not. Train and test
    are written in the input's encoding (see :func:`~mrec_warp.data.inputs.output_encoding`).
    """
    make_folders(folder.parent)
    if not folder.exists() or not any(folder.iterdir()):
        remove_stale_temps(folder.parent)  # what killed runs left beside it, for any output
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.{owner_tag()}", dir=str(folder.parent)))
        try:
            _write_split_files(tmp, train, test, summary, encoding)
            os.chmod(tmp, DIR_MODE)  # mkdtemp makes it private
            os.rename(tmp, folder)  # replaces an empty folder; fails if a full one appeared meanwhile
            record_finished(folder)
            return
        except OSError:
            if not (folder.is_dir() and any(folder.iterdir())):
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)  # gone already after the rename
        # another run filled the folder meanwhile: write into it like into any existing one
    with contextlib.ExitStack() as stack:
        # entered in reverse: the stack renames the last entered first
        summary_tmp = stack.enter_context(atomic_path(folder / "summary.json"))
        test_tmp = stack.enter_context(atomic_path(folder / "test.tsv"))
        train_tmp = stack.enter_context(atomic_path(folder / "train.tsv"))
        _write_split_files(None, train, test, summary, encoding, (train_tmp, test_tmp, summary_tmp))
        # the old marker goes before any file changes, so no moment pairs it with new files
        with contextlib.suppress(FileNotFoundError):
            os.unlink(folder / "summary.json")
    record_finished(folder)


def _write_split_files(folder: Optional[Path], train: pd.DataFrame, test: pd.DataFrame, summary: Dict[str, Any],
                       encoding: str, paths: Optional[Sequence[str]] = None) -> None:
    """The three files, into ``folder`` or to the given ``paths`` (train, test, summary)."""
    paths = paths or [str(folder / name) for name in SPLIT_FILES]
    for table, path in ((train, paths[0]), (test, paths[1])):
        table.attrs["encoding"] = encoding  # write_interactions writes in the input's encoding
        write_interactions(table, path)  # synced to disk, with the umask's mode
    if folder is None:
        with open(paths[2], "w", encoding="utf-8", newline="\n") as fh:
            fh.write(json.dumps(summary, indent=2) + "\n")
    else:
        with atomic_write(paths[2]) as fh:
            fh.write(json.dumps(summary, indent=2) + "\n")
