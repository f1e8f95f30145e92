# Two commands do all the set-up on a fresh machine:
#   make demo   install into .venv, then prepare -> train -> recommend -> evaluate the shipped sample
#   make test   install with the test extras, then run the suite
#   make experiment   every family against popularity on MovieLens 100k (data/experiment-ml100k.toml)
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
MW     := $(VENV)/bin/mrec-warp
OUT    ?= demo-out
SAMPLE := data/sample/ratings.tsv
SOURCES := setup.py pyproject.toml $(wildcard mrec_warp/kernels/*.pyx mrec_warp/kernels/*.pxd mrec_warp/kernels/*.h)

.PHONY: install demo test experiment bench clean

install: $(VENV)/.installed

$(VENV)/.installed: $(SOURCES)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,plot]'
	touch $@

demo: install
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

# reads ../shared/data/ml-100k/u.data; the report goes to experiment-ml100k/ (README "Experiments")
EXPERIMENT ?= data/experiment-ml100k.toml
experiment: install
	$(MW) experiment $(EXPERIMENT) --n-jobs 2 --verbose

# Peers (LightFM, implicit) live only in the benchmark's own environment, never in .venv.
BENCH_VENV ?= .venv-bench
bench:
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -e '.[dask]' lightfm-next implicit
	$(BENCH_VENV)/bin/python scripts/bench_warp.py
	$(BENCH_VENV)/bin/python scripts/bench_hybrid.py
	$(BENCH_VENV)/bin/python scripts/bench_scale.py

clean:
	rm -rf build dist *.egg-info $(OUT) experiment-ml100k .pytest_cache
	find mrec_warp -name '*.so' -delete -o -name '*.c' -delete -o -name __pycache__ -prune -exec rm -rf {} +
