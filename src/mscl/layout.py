"""Where the workflow, the command line and the code agree: a run's place in the results tree
and the names of what the pipeline makes.

Standard library only, and nothing of mscl, so that every side reads the same values: the
workflow (workflow/rules/common.smk imports it from the checkout's src/, whatever environment
Snakemake runs in), the light parsers of `mscl.cli` (whose --help must not import torch) and
the modules that do the work (`mscl.report.cost` finds a run's benchmark files here).
"""

from __future__ import annotations

from pathlib import Path

# ------------------------------------------------------------------- a run's place

# One run: a path component per experimental axis. Its folder, its jobs' logs and its jobs'
# benchmark files all carry it.
RUN_NAME = "{dataset}/{encoder}/{loss}/bs{batch}/seed{seed}"
# A tuning run (mscl.tuning, docs/claim-check.md): its setting is one more component, and its
# folder, logs and benchmarks live under tuning/, apart from the runs the report reads.
TUNE_RUN_NAME = "{dataset}/{encoder}/{loss}/bs{batch}/{setting}/seed{seed}"
# A run's training jobs, each writing into the run folder's subfolder of the same name.
STAGES = ("pretrain", "probe")
# Folders under `paths.results` of every job's log and Snakemake `benchmark:` file.
LOGS = "logs"
BENCHMARKS = "benchmarks"


def run_name(dataset: str, encoder: str, loss: str, batch: int, seed: int) -> str:
    """RUN_NAME of one run."""
    return RUN_NAME.format(dataset=dataset, encoder=encoder, loss=loss, batch=batch, seed=seed)


def run_dir(results: str, name: str = RUN_NAME) -> str:
    """The folder of run `name` (the workflow passes the RUN_NAME pattern itself)."""
    return f"{results}/runs/{name}"


def results_of_run(folder: Path, name: str) -> Path | None:
    """The results folder holding run `name` whose folder is `folder` (the inverse of
    `run_dir`), or None when `folder` is not where `run_dir` puts that run."""
    suffix = ("runs", *Path(name).parts)
    if folder.parts[-len(suffix) :] != suffix:
        return None
    return Path(*folder.parts[: -len(suffix)])


def tuning_dir(results: str, name: str = TUNE_RUN_NAME) -> str:
    """The folder of tuning run `name`."""
    return f"{results}/tuning/{name}"


def job_log(results: str, stage: str, name: str = RUN_NAME, tuning: bool = False) -> str:
    """The log of run `name`'s `stage` job (a tuning run's when `tuning`)."""
    return _job_file(results, LOGS, stage, name, tuning) + ".log"


def job_benchmark(results: str, stage: str, name: str = RUN_NAME, tuning: bool = False) -> str:
    """The Snakemake benchmark file of run `name`'s `stage` job (a tuning run's when `tuning`)."""
    return _job_file(results, BENCHMARKS, stage, name, tuning) + ".tsv"


def _job_file(results: str, folder: str, stage: str, name: str, tuning: bool) -> str:
    return f"{results}/{folder}/{'tuning/' if tuning else ''}{stage}/{name}"


def benchmark_of_log(results: Path, log: Path) -> Path | None:
    """The benchmark file of the job whose log is `log`: every job's log and benchmark share
    their place under logs/ and benchmarks/. None for a log outside `results`/logs/."""
    if not log.is_relative_to(results / LOGS):
        return None
    return (results / BENCHMARKS / log.relative_to(results / LOGS)).with_suffix(".tsv")


# ------------------------------------------------------------- what the pipeline makes

# Every built-in dataset setting (the {dataset} values the workflow knows without a source of
# one's own) -> its family (mscl.metrics.FAMILY_MACRO_F1: what its macro_f1 means). A csv or
# manifest source adds a setting by config alone, with the family it declares.
DATASET_FAMILIES = {
    "coco": "image",
    "voc": "image",
    "nuswide": "image",
    "fashion_mnist": "image",  # claim check: canvases of Fashion-MNIST images
    "aapd": "text",
    "debtags": "text",  # claim check: Debian package descriptions
    "yeast": "tabular",  # claim check: MULAN yeast, MulSupCon's benchmark
    **{f"{family}_{space}": "mimic" for family in ("mimic3", "mimic4_icd9", "mimic4_icd10") for space in ("full", "50")},
}
# The paper's ten dataset settings (its Table "Statistics of datasets"; `make-synthetic` makes
# any of them at its shape). mscl.report.names.PAPER_DATASETS names the same, in this order.
PAPER_DATASETS = ("coco", "voc", "nuswide", "aapd", "mimic3_full", "mimic3_50", "mimic4_icd9_full", "mimic4_icd9_50", "mimic4_icd10_full", "mimic4_icd10_50")

# `python -m mscl table NAME` (mscl.report.tables); `cost` is built from the runs' benchmarks.
TABLE_NAMES = ("image", "aapd", "mimic_full", "mimic_50", "sota", "ablation", "paper_vs_run", "cost")
# `python -m mscl figure NAME` (mscl.report.figures: the keys of FIGURES).
FIGURE_NAMES = ("improvement", "std", "text_encoders", "mimic_dotplot", "mimic_heatstrip", "frequency_buckets", "batch_size", "relations")
# The report's convergence figure (`python -m mscl loss-curves`, mscl.report.loss_curves): every
# pretraining's loss per epoch, from the runs' folders rather than from all_runs.csv alone.
LOSS_CURVES_FIGURE = "loss_curves"
# The claim check's data files (`claim-export`, mscl.report.claim_data) and figures
# (`claim-report`, mscl.report.claim).
CLAIM_DATA_FILES = ("runs.csv", "batch_size.csv", "buckets.csv", "convergence.csv", "tuning.csv", "probes.csv", "schedule.csv", "schedule_convergence.csv")
CLAIM_FIGURE_NAMES = ("claim_differences", "claim_convergence", "claim_batch_size", "claim_long_tail", "claim_schedule")
# Dataset families: each decides which macro-F1 definition a dataset's `macro_f1` reports
# (mscl.metrics.FAMILY_MACRO_F1 maps every one of them; docs/metrics.md says why).
DATASET_FAMILY_NAMES = ("image", "text", "tabular", "mimic")
# The family of a dataset whose source names none (`prepare-csv`, `prepare-manifest`): the
# family of its modality (stats.json's `modality`).
MODALITY_FAMILY = {"image": "image", "text": "text", "tabular": "tabular"}
# The MIMIC settings, each with its own split lists (`fetch-mimic-splits --version`).
MIMIC_VERSIONS = ("mimic3", "mimic4_icd9", "mimic4_icd10")

# make-demo KIND -> (module, generator function, default number of samples). Module imports stay
# lazy (mscl.demo.generator_for) so that generating a text dataset never imports scikit-learn.
# The image defaults give test splits of at least 500 images (COCO: val2014 halved; VOC: test
# halved; NUS-WIDE: 20% of the labelled images on disk), so that one image moves a metric by at
# most 0.2 points.
DEMO_KINDS: dict[str, tuple[str, str, int]] = {
    "coco": ("mscl.demo.images", "make_coco", 2500),
    "voc": ("mscl.demo.images", "make_voc", 2080),
    "nuswide": ("mscl.demo.images", "make_nuswide", 2640),
    "aapd": ("mscl.demo.text", "make_aapd", 800),
    "mimic3": ("mscl.demo.mimic", "make_mimic3", 600),
    "mimic4": ("mscl.demo.mimic", "make_mimic4", 400),
}

# An encoder's role (the config's `encoders.<name>.role`, `collect --roles ENCODER=ROLE`) is any
# name of this form. One of the paper's encoder columns puts the encoder in that column of the
# paper's tables and figures; any other role (`mlp`, the claim check's tabular encoder, or one of
# one's own) puts it in the benchmark table alone (mscl.report.benchmark), under no paper table.
ROLE_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]*$"
PAPER_ROLES = ("resnet", "roberta", "llama", "plm_icd")
# The roles the package itself uses: the paper's, and the claim check's tabular encoder's.
ENCODER_ROLES = (*PAPER_ROLES, "mlp")
# The label prior (`python -m mscl chance`) has no encoder: `collect` files it under this role,
# which no encoder may take.
REFERENCE_ROLE = "reference"
# The roles the package names (`collect --roles` takes any other of ROLE_PATTERN's form too).
REPORT_ROLES = (*ENCODER_ROLES, REFERENCE_ROLE)
# The label prior's method and encoder key: its run is run_name(dataset, CHANCE, CHANCE, 0, 0),
# a probe-format folder that `collect` reads like any other run.
CHANCE = "chance"
