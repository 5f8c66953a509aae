# jurist: one-command set-up, demo and tests.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: install demo test typecheck bench

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# The local extra is the offline judge (numpy, tokenizers, safetensors; no torch);
# the analysis extra is statistics and charts (scipy, krippendorff, plotly: jurist
# calibrate, the pattern analysis, prompt A/B tests, the dashboard's charts); the
# langgraph extra is for the gate's LangGraph helper, the ray extra for the Ray
# batch engine, the redis extra for limits shared through Redis. `all` is every
# one of them; all are optional for users and needed by the tests. The test extra holds
# llama-cpp-python[server], built from source: the first build takes minutes
# (about 8 CPU minutes; 15 on a busy 2-core machine), after that pip takes the
# wheel from its cache (~/.cache/pip) in seconds, so keep that cache between runs.
# The stamp makes a second `make install` (and `make test` after `make demo`) a no-op
# until pyproject.toml changes.
install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e ".[all,test]"
	touch $@

demo: install
	$(VENV)/bin/jurist demo

# Every test, the real model server's included; locally: make test PYTEST_ARGS='-m "not realserver"'.
# It installs first (quick when .venv is up to date), so it works on a fresh clone.
test: install
	$(PY) -m pytest -q $(PYTEST_ARGS)

typecheck: install
	$(PY) -m mypy

bench:
	$(PY) benchmarks/rubric_throughput.py
	$(PY) benchmarks/rubric_throughput.py --memory 1000 10000
	$(PY) benchmarks/local_judge_accuracy.py
	$(PY) benchmarks/real_server.py
