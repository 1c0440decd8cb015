# make app: set up (once) and run the explorer; make test: set up (once) and run lint + tests.
# Installs the versions in constraints.txt; the CUDA wheels (requirements-gpu.txt) only where nvidia-smi runs.
VENV ?= .venv
PY := $(VENV)/bin/python
INSTALL := $(PY) -m pip install -q -c constraints.txt
GPU := $(shell nvidia-smi >/dev/null 2>&1 && echo gpu || echo cpu)
STAMP := $(VENV)/.installed-$(GPU)

$(STAMP): requirements.txt requirements-dev.txt requirements-gpu.txt constraints.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(INSTALL) -r requirements-dev.txt
	$(if $(filter gpu,$(GPU)),$(INSTALL) -r requirements-gpu.txt)
	touch $@

.PHONY: app test test-fast test-gpu lint constraints
app: $(STAMP)
	$(VENV)/bin/streamlit run app.py

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# one worker per core (at most 4: each browser test module starts its own server and chromium per worker);
# worksteal: idle workers take tests from busy ones, so the long browser tests do not end the run alone
PARALLEL := -n auto --maxprocesses 4 --dist worksteal

test: lint
	$(PY) -m pytest -q $(PARALLEL)

test-fast: lint  # everything but the browser tests
	$(PY) -m pytest -q $(PARALLEL) -m "not browser"

test-gpu: $(STAMP)  # the GPU tests only (they skip without a GPU)
	$(PY) -m pytest -q -m gpu

constraints:  # re-pin: the newest versions requirements*.txt allow, resolved in a scratch venv
	rm -rf .venv-pin && python3 -m venv .venv-pin
	.venv-pin/bin/python -m pip install -q -r requirements-dev.txt -r requirements-gpu.txt
	(sed -n '1,2p' constraints.txt; .venv-pin/bin/python -m pip freeze --exclude-editable) > constraints.new
	mv constraints.new constraints.txt && rm -rf .venv-pin
