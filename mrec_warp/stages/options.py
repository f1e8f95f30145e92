"""What a command hands its stage besides paths: one options object per concern.

A command's flags come in groups that travel together from the command line to the work.
How a ratings file is read and what its rows become is :class:`RowOptions`, here; where a
table is written and in which format is :class:`~mrec_warp.tables.TableOutput`, beside its
writer; where the work runs is :class:`~mrec_warp.context.ExecutionContext`. The feature
files of a hybrid model travel as :class:`~mrec_warp.data.features.FeatureFiles`, a recommend
run's newcomers as :class:`~mrec_warp.stages.recommend_inputs.ColdStartOptions`.

The CLI builds these objects from its flags and calls a stage's ``run_*`` function with them;
the public functions (:func:`mrec_warp.train` ...) take the same settings as plain keywords
and build the objects themselves.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Union

from ..data.rows import DEFAULT_EMPTY_IDS, DEFAULT_NEGATIVES, check_empty_ids, check_row_options


@dataclass(frozen=True)
class RowOptions:
    """How a ratings file is read and what its rows become, as ``prepare`` reads one.

    Attributes
    ----------
    format, sep, header, columns
        The reader's options (:func:`~mrec_warp.data.ratings.read_ratings`): the file's
        format (``"auto"``: guessed), delimiter, header line and columns (guessed where ``None``).
    duplicates, negatives, min_value, empty_ids
        The row rules of :mod:`mrec_warp.data.rows`: how repeated (user, item) rows merge
        (``None``: sum, but not chosen -- see :func:`~mrec_warp.data.rows.merge_rows`), what
        negative values do, the least value a pair keeps, and rows without an id.

    Checked when made: an unknown rule, or rules that contradict each other, are refused.
    """

    format: str = "auto"
    sep: Optional[str] = None
    header: Optional[bool] = None
    columns: Optional[Union[str, Sequence]] = None
    duplicates: Optional[str] = None
    negatives: str = DEFAULT_NEGATIVES
    min_value: Optional[float] = None
    empty_ids: str = DEFAULT_EMPTY_IDS

    def __post_init__(self) -> None:
        check_row_options(self.duplicates, self.negatives, self.min_value)
        check_empty_ids(self.empty_ids)

    @property
    def reader(self) -> Dict[str, Any]:
        """The reader's keyword arguments (:data:`~mrec_warp.data.ratings.READER_OPTIONS`)."""
        return {"format": self.format, "sep": self.sep, "header": self.header, "columns": self.columns,
                "empty_ids": self.empty_ids}

    @property
    def given_layout(self) -> bool:
        """Whether any of ``format``, ``sep``, ``header`` and ``columns`` was given (not guessed)."""
        return self.format != "auto" or bool(self.sep) or self.header is not None or bool(self.columns)

    def rules_only(self) -> "RowOptions":
        """The same row rules for a file of its own layout (guessed): a validation file is
        usually ``prepare``'s test.tsv, whatever raw export ``sep`` and ``columns`` describe."""
        return dataclasses.replace(self, format="auto", sep=None, header=None, columns=None)
