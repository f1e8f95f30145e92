"""The stages of the pipeline as plain functions: each takes paths or objects (and one
execution context where work can run in parallel), does the work of the CLI command of the
same name, and returns what that command reports. The CLI only parses options, calls one of
these and prints.

    ratings file --prepare--> train.tsv / test.tsv --train--> model.npz
    model.npz --similar--> similar items;  model.npz --explain--> why an item was recommended
"""
from .cold_start import ColdStart, cold_start
from .explain import Explanation, explain
from .prepare import prepare
from .similar import SimilarResult, similar
from .train import TrainResult, UnknownParameterError, train

__all__ = ["prepare", "train", "TrainResult", "UnknownParameterError", "cold_start", "ColdStart",
           "similar", "SimilarResult", "explain", "Explanation"]
