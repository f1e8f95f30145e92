"""The prepare stage: a ratings file in, train / test files (and feature files) out.

The work is :func:`mrec_warp.data.split.prepare`'s (its module docstring states the rules);
this stage adds what a caller needs to know before running it: the files it will write.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import List, Union

from ..data.split import check_num_splits, prepare
from ..data.split_folder import SPLIT_FILES

PathLike = Union[str, os.PathLike]

#: Feature files ``prepare(features=True)`` may write into the output folder.
FEATURE_FILES = ("item_features.tsv", "user_features.tsv")


def split_folders(outdir: PathLike, num_splits: int = 1) -> List[Path]:
    """The folder of each split: ``outdir`` itself, or ``outdir/split-0`` ... for several."""
    if num_splits == 1:
        return [Path(outdir)]
    return [Path(outdir) / f"split-{i}" for i in range(max(0, num_splits))]


def prepare_outputs(outdir: PathLike, num_splits: int = 1, features: bool = False) -> List[Path]:
    """Every file :func:`prepare` may write for these options (to check before any work
    that none of them is an input)."""
    check_num_splits(num_splits)  # before listing them: a million splits would take a while
    written = [folder / name for folder in split_folders(outdir, num_splits) for name in SPLIT_FILES]
    if features:
        written += [Path(outdir) / name for name in FEATURE_FILES]
    return written


__all__ = ["prepare", "prepare_outputs", "split_folders", "FEATURE_FILES"]
