# Two entry points for a fresh machine (see README):
#   make demo   set up the virtualenv, then run the whole pipeline on the embedded default
#   make test   set up the virtualenv, then run the test suite
# and the claim check on real public data (docs/claim-check.md):
#   make claim  fetch its Debian sources (apt, as root) if missing, then run config/claim.yaml
VENV    ?= .venv
PYTHON  ?= python3
CORES   ?= all
TARGETS ?=
BIN     := $(VENV)/bin
# Rules run `python -m mscl ...`: put the virtualenv first on PATH for snakemake's jobs.
SNAKEMAKE := PATH="$(abspath $(BIN)):$$PATH" $(BIN)/snakemake

.PHONY: install demo test dry-run lint bench clean-results claim claim-data readme-results

$(BIN)/.installed: requirements.lock.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.lock.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $@

install: $(BIN)/.installed

demo: install
	$(SNAKEMAKE) --cores $(CORES) $(TARGETS)

# The claim check's Debian sources: Fashion-MNIST's idx files and apt's English description
# index (Translation-en; Debian's docker images switch it off, the -o flag turns it back on for
# this update). Each step runs only when its files are missing. Other systems: see
# docs/claim-check.md for the same files by URL with sha256.
FASHION_MNIST := /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
claim-data:
	@ls /var/lib/apt/lists/*_i18n_Translation-en* > /dev/null 2>&1 || apt-get -o Acquire::Languages=en update
	@test -f $(FASHION_MNIST) || apt-get install -y dataset-fashion-mnist

claim: install claim-data
	$(SNAKEMAKE) --cores $(CORES) --configfile config/claim.yaml $(TARGETS)

# The README's demo results block, generated from a finished `make demo` (docs/report.md, section 7):
# writes docs/results/demo_run.csv and the block between the README's markers. RERUN=path to the
# all_runs.csv of a rerun of the same commit under another setting (e.g. 2 threads per job) adds
# how far the numbers moved; RERUN_SETTING says how it was made.
RERUN ?=
RERUN_SETTING ?= 2 torch threads per job
readme-results: install
	$(BIN)/python -m mscl readme-results --runs results/metrics/all_runs.csv \
		$(if $(RERUN),--rerun $(RERUN) --rerun-setting "$(RERUN_SETTING)") --record docs/results/demo_run.csv --readme README.md

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
