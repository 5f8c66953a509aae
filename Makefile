# jurist: one-command set-up, demo and tests.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: install demo test typecheck bench

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# The local extra is the offline judge (numpy, tokenizers, safetensors; no torch);
# the langgraph extra is for the gate's LangGraph helper, the ray extra for the
# Ray batch engine, the redis extra for limits shared through Redis; all are
# optional for users and needed by the tests.
install: $(PY)
	$(PY) -m pip install -q -e ".[local,langgraph,ray,redis,test]"

demo: install
	$(VENV)/bin/jurist demo

test:
	$(PY) -m pytest -q

typecheck:
	$(PY) -m mypy

bench:
	$(PY) benchmarks/rubric_throughput.py
	$(PY) benchmarks/rubric_throughput.py --memory 1000 10000
	$(PY) benchmarks/local_judge_accuracy.py
