# Two entry points for a fresh machine (see README):
#   make demo   set up the virtualenv, then run the whole pipeline on the embedded default
#   make test   set up the virtualenv, then run the test suite
# the paper's whole grid at smoke scale, the first thing to run on a new cluster (README):
#   make paper-smoke  config/paper.yaml + config/paper_smoke.yaml: 234 training jobs, every table
#                     and figure, then a check that no cell or figure item lacks a result
# and the claim check on real public data (docs/claim-check.md):
#   make claim  fetch its Debian sources (apt, as root) if missing, then run config/claim.yaml
VENV    ?= .venv
PYTHON  ?= python3
CORES   ?= all
TARGETS ?=
BIN     := $(VENV)/bin
# Rules run `python -m mscl ...`: put the virtualenv first on PATH for snakemake's jobs.
SNAKEMAKE := PATH="$(abspath $(BIN)):$$PATH" $(BIN)/snakemake

.PHONY: install lock stale wheelhouse demo test dry-run lint bench clean-results claim claim-data claim-publish claim-quick paper-smoke readme-results watch progress

# Every distribution of the virtualenv comes from the two locks, at its exact version and with
# its sha256 checked (--require-hashes: a changed or substituted wheel is refused); pip itself
# and setuptools too. mscl is then installed from this checkout, built with the locked
# setuptools (no build isolation: nothing unpinned is fetched).
# WHEELHOUSE=folder installs from a folder `make wheelhouse` filled, with no network.
# The locked pip goes in first (its entry cut out of the dev lock, hashes and all): a new venv's
# own pip is whatever Python bundled (23.2 with 3.11.7), which installs the stack about 30% slower.
LOCKS := requirements.lock.txt requirements-dev.lock.txt
WHEELHOUSE ?=
FROM_WHEELHOUSE = $(if $(WHEELHOUSE),--no-index --find-links $(WHEELHOUSE))
$(BIN)/.installed: $(LOCKS) pyproject.toml
	$(PYTHON) -m venv $(VENV)
	awk '/^pip==/ {entry = 1} entry {print} entry && !/\\$$/ {exit}' requirements-dev.lock.txt > $(VENV)/pip.lock.txt
	$(BIN)/python -m pip install --quiet --require-hashes $(FROM_WHEELHOUSE) -r $(VENV)/pip.lock.txt
	$(BIN)/python -m pip install --quiet --require-hashes $(FROM_WHEELHOUSE) $(addprefix -r ,$(LOCKS))
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

install: $(BIN)/.installed

# An archive of the locked stack for this platform (docs/reproducibility.md): every wheel the
# locks name for this machine, hashes checked, in wheelhouse/ (about 3 GB on Linux x86_64), for
# when a package index no longer serves one: `make install WHEELHOUSE=wheelhouse`.
wheelhouse: install
	$(BIN)/python -m pip download --quiet --require-hashes --dest wheelhouse $(addprefix -r ,$(LOCKS))

# The locks, generated from pyproject.toml by the locked uv (docs/reproducibility.md): universal
# (one file for Linux and macOS, CPython 3.11 and newer; torch's CUDA wheels keep their platform
# markers), hashed, the pipeline's distributions in requirements.lock.txt and the tools only
# tests and CI need in requirements-dev.lock.txt (resolved together with the first, which it
# does not repeat). Pins already in a lock are kept unless pyproject.toml's ranges exclude them;
# UPGRADE=--upgrade (or UPGRADE="--upgrade-package torch") moves them.
UPGRADE ?=
UV_COMPILE = $(BIN)/uv pip compile pyproject.toml --universal --python-version 3.11 --generate-hashes \
	--custom-compile-command "make lock" --quiet $(UPGRADE)
lock: install
	$(UV_COMPILE) --extra slurm --extra demo -o requirements.lock.txt
	no_emit=$$($(BIN)/python -m mscl.provenance no-emit requirements.lock.txt) && \
		$(UV_COMPILE) --extra slurm --extra demo --extra test --extra lint --extra lock --constraint requirements.lock.txt \
		$$no_emit -o requirements-dev.lock.txt

demo: install
	$(SNAKEMAKE) --cores $(CORES) $(TARGETS)

# The paper's grid at smoke scale (config/paper_smoke.yaml: demo data in the real formats, the
# hub models as local stand-ins of the same class and width, one step per epoch), every table
# and figure, then `check_complete` (results/paper_smoke/complete.txt exists only if no table
# cell and no figure item lacks a result), then where the wall time went. Targets go before
# --configfile (it takes every word after it).
SMOKE_RESULTS := results/paper_smoke
paper-smoke: install
	$(SNAKEMAKE) --cores $(CORES) all $(SMOKE_RESULTS)/complete.txt --configfile config/paper.yaml config/paper_smoke.yaml
	$(BIN)/python -m mscl bench dag --log "$$(ls -t .snakemake/log/*.snakemake.log | head -1)" --results $(SMOKE_RESULTS)

# The claim check's Debian sources: Fashion-MNIST's idx files and apt's English description
# index (Translation-en; Debian's docker images switch it off, the -o flag turns it back on for
# this update). Each step runs only when its files are missing. Other systems: see
# docs/claim-check.md for the same files by URL with sha256.
FASHION_MNIST := /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
claim-data:
	@ls /var/lib/apt/lists/*_i18n_Translation-en* > /dev/null 2>&1 || apt-get -o Acquire::Languages=en update
	@test -f $(FASHION_MNIST) || apt-get install -y dataset-fashion-mnist

# The claim check (docs/claim-check.md): the DAG, then its data, statistics and figures
# published into docs/ (docs/claim/*.csv, docs/figures/claim_*, the generated blocks of
# docs/claim-check.md and README.md). claim-quick: one seed, short schedules, results apart,
# nothing published.
CLAIM_DATA := results/claim/claim_check/data
claim: install claim-data
	$(SNAKEMAKE) --cores $(CORES) --configfile config/claim.yaml $(TARGETS)
	$(MAKE) claim-publish

# A stopped and resumed run has one Snakemake log per segment: pass them all, in order, as
# CLAIM_LOGS="..." (bench dag then sums the segments). Default: the latest log.
CLAIM_LOGS ?= $$(ls -t .snakemake/log/*.snakemake.log | head -1)
# The published data the outcome is compared with (runs reproduced, verdicts changed): the
# record of the publication Amendment 6's run replaced. Empty: no comparison.
CLAIM_PREVIOUS ?= docs/claim/run_5e5c5b6
claim-publish:
	mkdir -p docs/claim
	rm -f docs/claim/*.csv  # a file this run does not make (e.g. schedule.csv) must not outlive it
	cp $(CLAIM_DATA)/*.csv docs/claim/
	$(BIN)/python -m mscl bench dag --log $(CLAIM_LOGS) --results results/claim > docs/claim/dag_cost.txt
	$(BIN)/python tools/claim_budget_options.py --results results/claim --config config/claim.yaml > docs/claim/budget_options.txt
	$(BIN)/python -m mscl claim-report --data-dir docs/claim --out-dir docs/claim --figures-dir docs/figures --docs docs/claim-check.md README.md \
		$(if $(CLAIM_PREVIOUS),--previous $(CLAIM_PREVIOUS))

claim-quick: install claim-data
	$(SNAKEMAKE) --cores $(CORES) --configfile config/claim.yaml config/claim_quick.yaml $(TARGETS)

# The README's demo results block, generated from a finished `make demo` (docs/report.md, section 7):
# writes docs/results/demo_run.csv and the block between the README's markers. RERUN=path to the
# all_runs.csv of a rerun of the same commit under another setting (e.g. 2 threads per job) adds
# how far the numbers moved; RERUN_SETTING says how it was made.
RERUN ?=
RERUN_SETTING ?= 2 torch threads per job
readme-results: install
	$(BIN)/python -m mscl readme-results --runs results/metrics/all_runs.csv \
		$(if $(RERUN),--rerun $(RERUN) --rerun-setting "$(RERUN_SETTING)") --record docs/results/demo_run.csv --readme README.md

# The finished runs that today's code, packages or plugins would not make the same way
# (docs/reproducibility.md): CONFIGFILE="config/paper.yaml ..." as given to snakemake's
# --configfile. Exit status 1 when some are stale.
CONFIGFILE ?=
stale: install
	$(BIN)/python -m mscl stale $(if $(CONFIGFILE),--configfile $(CONFIGFILE))

# Watching a long grid (docs/watching.md): every job's live TensorBoard curves on
# http://localhost:$(PORT) (from a laptop: an SSH tunnel), and where the grid stands: jobs done,
# running, failed and to go, device hours spent and left. CONFIGFILE: the --configfile
# arguments snakemake runs with (default: config.yaml), as for `make stale`.
LOGDIR      ?= results/runs
PORT        ?= 6006
watch: install
	$(BIN)/tensorboard --logdir $(LOGDIR) --port $(PORT)

progress: install
	$(BIN)/python -m mscl progress $(if $(CONFIGFILE),--configfile $(CONFIGFILE))

dry-run: install
	$(SNAKEMAKE) --cores $(CORES) -n $(TARGETS)

# The workflow's conventions: Snakemake's own linter, and snakefmt's formatting of every workflow
# file (pyproject.toml [tool.snakefmt]; `$(BIN)/snakefmt .` applies it). .ci/run runs this.
lint: install
	$(SNAKEMAKE) --lint
	$(BIN)/snakefmt --check .

test: install
	$(BIN)/python -m pytest

bench: install
	$(BIN)/python -m mscl bench losses
	$(BIN)/python -m mscl bench preprocess

clean-results:
	rm -rf results/tables results/figures results/logs results/benchmarks data/processed .snakemake
