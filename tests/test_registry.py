"""The one registry of model families: a class that names itself is registered, and every
list of families -- train's choices, tune's families, load(), the public API and its
reference -- reads it."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import mrec_warp as mw
import mrec_warp.models
from mrec_warp.cli.train import train as train_command
from mrec_warp.models import Popularity
from mrec_warp.models.families import FAMILIES, REGISTRY, model_classes, tunable_families

ROOT = Path(__file__).resolve().parent.parent
API_REFERENCE = ROOT / "docs" / "reference" / "api.rst"


@pytest.fixture
def registry():
    """The registry as it is; a family a test defines is gone again afterwards."""
    before = dict(REGISTRY)
    yield REGISTRY
    REGISTRY.clear()
    REGISTRY.update(before)


def documented_names(rst: str):
    """The names listed under the ``autosummary`` directives of a reST file."""
    names, listing = [], False
    for line in rst.splitlines():
        if line.startswith(".. autosummary::"):
            listing = True
        elif listing and re.fullmatch(r"   [A-Za-z_][A-Za-z0-9_]*", line):
            names.append(line.strip())
        elif listing and line and not line.startswith(" "):
            listing = False
    return names


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_registered_model_is_exported_and_documented(name):
    cls = REGISTRY[name]
    assert getattr(mw, name, None) is cls and name in mw.__all__, f"mw.{name} is not exported"
    assert getattr(mrec_warp.models, name, None) is cls and name in mrec_warp.models.__all__
    assert name in documented_names(API_REFERENCE.read_text(encoding="utf-8")), f"{name} is not in api.rst"


def test_the_api_reference_lists_the_model_classes_the_script_writes():
    spec = importlib.util.spec_from_file_location("write_parameter_table", ROOT / "scripts" / "write_parameter_table.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    committed = API_REFERENCE.read_text(encoding="utf-8")
    assert committed == script.api_reference(committed), "run: python scripts/write_parameter_table.py"
    assert script.model_classes() == ["Recommender", *REGISTRY]


def test_the_reference_parser_sees_the_listed_models():
    assert {"Recommender", "WARP", "EASE", "RP3beta", "Factors", "load"} <= set(documented_names(
        API_REFERENCE.read_text(encoding="utf-8")))


def test_the_families_keep_their_order_everywhere():
    shipped = ["warp", "itemknn", "slim", "ease", "wrmf", "popularity", "hybrid", "rp3beta"]
    assert list(model_classes())[:len(shipped)] == shipped
    assert list(FAMILIES) == list(model_classes())
    choices = next(p for p in train_command.params if p.name == "model_name").type.choices
    assert list(choices) == list(model_classes())
    assert tunable_families() == tuple(n for n in model_classes() if FAMILIES[n].searchable)
    assert set(model_classes().values()) | {mw.Factors} == set(REGISTRY.values())
    assert mw.Factors.name is None  # loaded from files, never trained by train


def test_a_class_is_registered_when_it_names_itself(registry, tmp_path):
    class Unnamed(Popularity):  # a subclass that names nothing stays out of every list
        pass

    assert "Unnamed" not in registry and model_classes()["popularity"] is Popularity

    class Trending(Popularity):
        name = "trending"

    assert model_classes()["trending"] is Trending and "trending" in FAMILIES
    assert "trending" not in tunable_families()  # nothing to tune
    # load() reads the same registry: the file names the class
    train = tmp_path / "t.tsv"
    train.write_text("u1\ti1\nu2\ti2\nu2\ti1\n")
    model = mw.train(train, tmp_path / "m.npz", model="trending").model
    assert type(model) is Trending and type(mw.load(tmp_path / "m.npz")) is Trending


def test_a_family_is_one_module_dropped_into_the_package(tmp_path):
    """Nothing lists a family but its module: in a copy of the package with one more module,
    the class is registered, exported, a choice of ``train --model`` and listed last."""
    package = Path(mrec_warp.__file__).resolve().parent
    shutil.copytree(package, tmp_path / "mrec_warp",
                    ignore=shutil.ignore_patterns("__pycache__", "*.c", "*.pyx", "*.pxd", "*.h", "build"))
    (tmp_path / "mrec_warp" / "models" / "trending.py").write_text(
        "from .popularity import Popularity\n\n\nclass Trending(Popularity):\n    name = 'trending'\n",
        encoding="utf-8")
    probe = ("import json, mrec_warp as mw, mrec_warp.models as models\n"
             "from mrec_warp.cli.train import train\n"
             "choices = next(p for p in train.params if p.name == 'model_name').type.choices\n"
             "print(json.dumps({'mw': mw.Trending.__module__, 'all': 'Trending' in mw.__all__,\n"
             "                  'models': models.__all__, 'choices': list(choices)}))\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)}, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["mw"] == "mrec_warp.models.trending" and found["all"]
    assert found["models"] == ["Recommender", *REGISTRY, "Trending", "load"]  # no order of its own: last
    assert found["choices"] == [*model_classes(), "trending"]
