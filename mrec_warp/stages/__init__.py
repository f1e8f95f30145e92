"""The stages of the pipeline as plain functions: each takes paths or objects plus one
:class:`~mrec_warp.context.ExecutionContext` and returns what the command line reports."""
from .evaluate import evaluate
from .recommend import recommend_in_parts, write_recommendations
from .submodels import fit_submodels
from .tune import TuneResult, tune

__all__ = ["evaluate", "fit_submodels", "recommend_in_parts", "tune", "TuneResult", "write_recommendations"]
