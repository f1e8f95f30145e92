"""The stages of the pipeline as plain functions: each takes paths or objects (and one
:class:`~mrec_warp.context.ExecutionContext` where work can run in parallel), does the work
of the CLI command of the same name, and returns what that command reports. The CLI only
parses options, calls one of these and prints: the ``run_*`` twin of a stage with many
options, which takes them as objects (:mod:`~mrec_warp.stages.options`) where the public
function takes plain keywords.

    ratings file --prepare--> train.tsv / test.tsv --train--> model.npz
    model.npz --recommend--> recs.tsv --evaluate--> report
    model.npz --similar--> similar items;  model.npz --explain--> why an item was recommended
    train.tsv --tune--> the best family and parameters
"""
from .evaluate import evaluate
from .explain import Explanation, explain
from .prepare import prepare
from .options import RowOptions
from .recommend_inputs import ColdStart, ColdStartOptions, cold_start
from .recommend import RecommendResult, recommend, recommend_in_parts, write_recommendations
from .similar import SimilarResult, similar
from .submodels import fit_submodels
from .train import TrainResult, UnknownParameterError, train
from .tune import TuneResult, tune

__all__ = ["RowOptions", "ColdStartOptions",
           "prepare", "train", "TrainResult", "UnknownParameterError", "cold_start", "ColdStart",
           "fit_submodels", "recommend", "RecommendResult", "write_recommendations", "recommend_in_parts", "evaluate", "tune", "TuneResult",
           "similar", "SimilarResult", "explain", "Explanation"]
