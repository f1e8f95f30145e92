"""mrec-warp: recommendations from implicit feedback.

The public API; everything else is an implementation detail.

>>> import mrec_warp as mw
>>> train = mw.Interactions.from_dataframe(mw.read_ratings("train.tsv"))   # doctest: +SKIP
>>> model = mw.WARP(random_state=0).fit(train)                              # doctest: +SKIP
>>> model.recommend_frame(["42"], k=10)                                     # doctest: +SKIP

Or stage by stage, as the CLI runs them:

>>> mw.prepare("ratings.tsv", "split/", min_value=4)                        # doctest: +SKIP
>>> mw.train("split/train.tsv", "model.npz", params={"factors": 32}).model  # doctest: +SKIP
>>> mw.recommend("model.npz", "recs.tsv", k=10).rows                        # doctest: +SKIP
"""
from ._version import __version__
from .signals import stop_early as _stop_early

_stop_early()  # the command: a signal during the imports below ends it with one line
from .errors import InputError, TrainingDivergedError  # noqa: E402
from .data.interactions import Interactions  # noqa: E402
from .data.ratings import read_ratings  # noqa: E402
from .data.tsv import write_interactions  # noqa: E402
from .data.features import read_features  # noqa: E402
from .data.synthetic import generate as generate_synthetic  # noqa: E402
from .data.datasets import fetch  # noqa: E402
from . import models as _models  # noqa: E402
from .models import *  # noqa: E402,F403 (every registered model class: models.__all__)
from .stages.recommend import write_recommendations  # noqa: E402
from .evaluation.metrics import evaluate_recommendations  # noqa: E402
from .progress import Progress  # noqa: E402
from .stages import evaluate, explain, prepare, recommend, similar, train, tune  # noqa: E402
from .experiments import experiment  # noqa: E402
# interoperability (mrec's mrec_convert / mrec_factors): other tools' matrices and factors
from .data.matrix_files import read_matrix, write_matrix  # noqa: E402
from .stages.factors import export_factors, import_factors  # noqa: E402

__all__ = [
    "__version__",
    "InputError",
    "TrainingDivergedError",
    "Interactions",
    "read_ratings",
    "write_interactions",
    "read_features",
    "generate_synthetic",
    "fetch",
]
# the models: the base, every registered class (imported factors among them) and load
__all__ += _models.__all__
__all__ += [
    "write_recommendations",
    "evaluate_recommendations",
    "Progress",
    # the pipeline's stages, one per command
    "prepare",
    "train",
    "recommend",
    "evaluate",
    "similar",
    "explain",
    "tune",
    "experiment",
    # interoperability
    "read_matrix",
    "write_matrix",
    "import_factors",
    "export_factors",
]
