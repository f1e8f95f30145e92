"""``mrec-warp experiment``: one TOML file runs every model on every split and writes one report.

:mod:`.config` reads and checks the file (every fault named by its line, before any work),
:mod:`.run` runs the pipeline's stages as resumable units, :mod:`.report` writes the folder.
"""
from .config import Config, read_config
from .run import ExperimentResult, experiment

__all__ = ["experiment", "ExperimentResult", "read_config", "Config"]
