"""`python -m mscl <command> ...`: the command-line entry point the Snakemake rules call.

Each command lives in its own module exposing `main(argv) -> int`; modules are imported only
when their command runs, so a preprocessing job never pays for importing torch. The arguments
are parsed first, by the command's parser in the light `mscl.cli`: `--help` and usage errors
answer before the command's module (and torch, pandas, ...) is imported. Training commands
then run in a worker of the run's job server when the workflow started one (mscl.jobserver).
"""

from __future__ import annotations

import atexit
import importlib
import os
import sys
import threading
from typing import NoReturn

from mscl import jobserver
from mscl.cli import commands, parse_args
from mscl.errors import InputError
from mscl.interrupt import stop_when_owner_ends
from mscl.train import gpu_locks, launch

COMMANDS: dict[str, tuple[str, str]] = {
    "fetch-mimic-splits": ("mscl.data.mimic_splits", "copy or download the MIMIC split/top-50 lists and verify sha256"),
    "prepare-mimic": ("mscl.data.mimic", "MIMIC-III/IV raw CSVs -> cleaned manifests (full and 50)"),
    "prepare-coco": ("mscl.data.coco", "MS-COCO 2014 (or 2017) instances JSON -> manifest"),
    "prepare-voc": ("mscl.data.voc", "PASCAL VOC 2007 XML + ImageSets -> manifest"),
    "prepare-nuswide": ("mscl.data.nuswide", "NUS-WIDE image lists + AllLabels or TrainTestLabels -> manifest"),
    "prepare-aapd": ("mscl.data.aapd", "AAPD text_*/label_* -> manifest"),
    "prepare-yeast": ("mscl.data.yeast", "MULAN yeast (river's yeast.csv.gz) -> features manifest, MULAN split"),
    "prepare-debtags": ("mscl.data.debtags", "apt Packages (Tag:) + Translation-en -> debtags text manifest"),
    "prepare-fashion-mnist": ("mscl.data.fashion_mnist", "Fashion-MNIST idx files -> multi-label canvas PNGs + manifest"),
    "prepare-csv": ("mscl.data.csv_source", "one CSV/TSV file of one's own (text or image paths, labels, split) -> manifest"),
    "prepare-manifest": ("mscl.data.manifest_source", "a folder already in the manifest format -> checked, recomputed stats, processed folder"),
    "embed-text": ("mscl.data.embed", "text manifest -> manifest of frozen sentence embeddings (features), e.g. debtags on MiniLM"),
    "image-pixels": ("mscl.data.pixels", "image manifest -> manifest of grey pixel vectors (features), e.g. Fashion-MNIST canvases for an MLP"),
    "make-demo": ("mscl.demo", "generate an embedded demo dataset in a real raw format"),
    "stats-table": ("mscl.data.stats_table", "dataset statistics table (tex/csv/md/html) from manifests"),
    "make-synthetic": ("mscl.demo.synthetic", "a prepared dataset at the paper's sizes x S (synthetic content), for measuring scale"),
    "make-tiny-models": ("mscl.demo.tiny_models", "write tiny local Hugging Face models + tokenizer (offline default)"),
    "cache-prefix": ("mscl.train.prefix", "run an hf or plm_icd encoder's frozen embeddings + lower layers once per split and cache them (trainable_layers)"),
    "launch": ("mscl.train.launch", "run a training job on its own GPUs of this machine, under torchrun for several (the workflow's rules)"),
    "pretrain": ("mscl.train.pretrain", "contrastive pretraining of encoder + projection head"),
    "probe": ("mscl.train.probe", "linear probe on the frozen encoder; test scores and metrics"),
    "select-setting": ("mscl.tuning", "choose a method's tuned setting on val from its tuning runs (mean over tuning seeds)"),
    "chance": ("mscl.report.chance", "label-prior reference run: train label frequencies as test scores, probe-format outputs"),
    "stale": ("mscl.stale", "the finished runs that today's code, packages or plugins would not make the same way, and how to rerun them"),
    "progress": ("mscl.progress", "where a grid stands: jobs done, running, failed and to go per dataset x encoder, device hours spent and left"),
    "collect": ("mscl.report.collect", "gather every run's metrics into one tidy CSV"),
    "table": ("mscl.report.tables", "one paper table (tex/csv/md/html) from the tidy results"),
    "figure": ("mscl.report.figures", "one paper figure (pdf/png/html) from the tidy results"),
    "loss-curves": ("mscl.report.loss_curves", "the report's convergence figure: every pretraining's loss per epoch, a panel per dataset x encoder, a line per loss"),
    "benchmark": ("mscl.report.benchmark", "the benchmark table (csv/md/html) and figure of every dataset x encoder x method x batch size that ran"),
    "check-complete": ("mscl.report.complete", "every paper table cell and figure item has a result (after a full-grid run)"),
    "claim-export": ("mscl.report.claim_data", "claim check: the runs' data files (runs.csv, batch_size.csv, buckets.csv, convergence.csv, tuning.csv)"),
    "readme-results": ("mscl.report.readme", "write (or --check) the README's demo results block from a run's all_runs.csv"),
    "claim-report": ("mscl.report.claim", "claim check: paired-seed tests of Sim-Dissim vs each method (tables, figure, outcome)"),
    "eq12": ("mscl.eq12", "show that the paper's Eq. 12 as printed has exactly ANY's gradients"),
    "bench": ("mscl.bench", "benchmarks that print figures (losses, preprocessing)"),
    "job-server": ("mscl.jobserver", "fork server the workflow starts: training jobs skip importing torch (mscl.jobserver)"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: python -m mscl <command> [options]", "", "commands:"]
    lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in {"-h", "--help"}:
        print(usage())
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"mscl: unknown command {command!r}\n\n{usage()}", file=sys.stderr)
        return 2
    if command in commands():  # all but `bench`, whose light module parses its benchmark's arguments
        parse_args(command, rest)  # exits on --help or a usage error; main(rest) parses again
    if command == "job-server":  # it watches its owner itself, must stay single-threaded, and its
        return jobserver.main(rest, run)  # workers run their jobs' commands with `run`, as a job would
    if command == "launch":  # holds the job's GPUs, then runs an mscl command here (no second interpreter)
        return launch.main(rest, in_this_process=main)
    try:
        gpu_locks.adopt()  # a process torchrun started for a launched job holds the job's GPU locks too
    except gpu_locks.LockError as error:
        print(f"mscl {command}: error: {error}", file=sys.stderr)
        return 1
    stop_when_owner_ends()
    if command in jobserver.SERVED_COMMANDS and (code := jobserver.delegate(argv)) is not None:
        return code
    return run(argv)


def run(argv: list[str]) -> int:
    """Run a command whose arguments `main` has checked, in this process."""
    command, rest = argv[0], argv[1:]
    # The command itself, however it was started (through `launch` or a job server's worker,
    # which set their own): what a job's versions.json records as its command (mscl.provenance).
    sys.argv = [sys.argv[0], *argv]
    module = importlib.import_module(COMMANDS[command][0])
    try:
        return int(module.main(rest) or 0)
    except InputError as error:
        print(f"mscl {command}: error: {error}", file=sys.stderr)
        return 1


def leave(code: int) -> NoReturn:
    """End the process with `code` once a command has returned: non-daemon threads are joined,
    the atexit handlers run and stdout/stderr are flushed, in that order, as at a normal exit,
    but the interpreter does not tear down every module it imported. With torch, pandas and
    pyarrow loaded that teardown costs 0.6-1.2 CPU s a job (docs/records/fast_exit.txt), over
    a thousand jobs in the claim DAG. By then the command has closed its files (every write
    goes through a `with` block)."""
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`| head`): nothing left to deliver
            pass
    os._exit(code)


if __name__ == "__main__":
    # An exception still leaves the usual way (traceback, exit status 1).
    leave(main())
