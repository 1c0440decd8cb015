# make app: set up (once) and run the explorer; make test: set up (once) and run lint + tests.
VENV ?= .venv
PY := $(VENV)/bin/python

$(VENV)/.installed: requirements.txt requirements-dev.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@

.PHONY: app test
app: $(VENV)/.installed
	$(VENV)/bin/streamlit run app.py

test: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q
