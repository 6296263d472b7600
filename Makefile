# Everything installs itself into .venv, so a fresh clone needs only `make test` or `make demo`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test e2e bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: install
	$(BIN)/trajcomp compress data_samples -c configs/demo.yaml -o data_samples_compressed

test: install
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) data_samples_compressed .pytest_cache .hypothesis
