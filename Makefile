# Every target does its own set-up on a fresh machine: it creates .venv and
# installs the project into it (once; again when pyproject.toml changes).
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-dev-embed-postgres-serve-mcp-langchain-llamaindex-tokens-http
BSTAMP := $(VENV)/.installed-bench

.PHONY: demo test test-fast lint bench clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,embed,postgres,serve,mcp,langchain,llamaindex,tokens,http]'
	touch $(STAMP)

$(BSTAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,embed,postgres,serve,mcp,langchain,llamaindex,tokens,http,bench]'
	touch $(BSTAMP)

demo: $(STAMP)
	$(BIN)/nautilus-ranking demo
	@echo
	@echo "nautilus is installed in $(VENV), which is not on your PATH: run $(BIN)/nautilus-ranking ..."
	@echo "or put it there for this shell first: . $(BIN)/activate"

lint: $(STAMP)
	$(BIN)/ruff check nautilus_ranking tests benchmarks tools
	$(BIN)/ruff format --check nautilus_ranking tests benchmarks tools
	$(BIN)/mypy nautilus_ranking

test: lint
	$(BIN)/pytest

# While working: every module exercised, without the real servers, PostgreSQL and the
# docs' examples (tests/conftest.py, SLOW_PATHS); `make test` and CI run everything.
test-fast: $(STAMP)
	$(BIN)/pytest -q -m "not slow"

bench: $(BSTAMP)
	$(BIN)/python -m benchmarks.report --out docs/benchmarks.md --plot docs/speed-scaling.png

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
