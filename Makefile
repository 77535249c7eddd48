# Two entry points for a fresh machine (see README):
#   make demo   set up the virtualenv, then run the whole pipeline on the embedded default
#   make test   set up the virtualenv, then run the test suite
VENV    ?= .venv
PYTHON  ?= python3
CORES   ?= all
TARGETS ?=
BIN     := $(VENV)/bin
# Rules run `python -m mscl ...`: put the virtualenv first on PATH for snakemake's jobs.
SNAKEMAKE := PATH="$(abspath $(BIN)):$$PATH" $(BIN)/snakemake

.PHONY: install demo test dry-run lint bench clean-results

$(BIN)/.installed: requirements.lock.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.lock.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $@

install: $(BIN)/.installed

demo: install
	$(SNAKEMAKE) --cores $(CORES) $(TARGETS)

dry-run: install
	$(SNAKEMAKE) --cores $(CORES) -n $(TARGETS)

lint: install
	$(SNAKEMAKE) --lint

test: install
	$(BIN)/python -m pytest

bench: install
	$(BIN)/python -m mscl bench losses
	$(BIN)/python -m mscl bench preprocess

clean-results:
	rm -rf results/tables results/figures results/logs results/benchmarks data/processed .snakemake
