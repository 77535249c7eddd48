import itertools
import json
import os
import shlex
import sys

import yaml
from snakemake.exceptions import WorkflowError
from snakemake.logging import logger
from snakemake.shell import shell as job_shell

# Shared definitions: paths, the dataset -> source map, input functions, target lists.
# No logic beyond that: everything else lives in the mscl package. The source checks come
# from the checkout's own src/ (standard library only), whatever environment runs Snakemake.
sys.path.insert(0, os.path.join(workflow.basedir, "src"))
from mscl.data.sources import LAYOUTS, SPLIT_LIST_FILES, source_problem, split_folder_problem
from mscl.interrupt import stop_jobs_on_sigint
from mscl.jobserver import start_for_workflow

# `kill -INT` on Snakemake alone stops the running jobs too (mscl.interrupt). The running
# jobs' shells are Snakemake's own bookkeeping (job id -> Popen), read at interrupt time.
stop_jobs_on_sigint(lambda: [process.pid for process in list(getattr(job_shell, "_processes", {}).values())])


onstart:
    # Training jobs fork from one interpreter that imported torch once (mscl.jobserver), when
    # they run on this machine in this environment; each is still its own job and process.
    start_for_workflow(
        enabled=config["job_server"] and not workflow.touch,
        local=workflow.local_exec,
        isolated_environments=bool(workflow.deployment_settings.deployment_method),
        log_path=os.path.join(".snakemake", "log", "mscl-job-server.log"),
        report=logger.info,
    )

RAW = config["paths"]["raw"]
PROCESSED = config["paths"]["processed"]
RESULTS = config["paths"]["results"]
# Logs and benchmarks belong to the config that made them: a second config with another
# results path keeps its own (and its own cost table).
LOGS = f"{RESULTS}/logs"
BENCHMARKS = f"{RESULTS}/benchmarks"

# A prepared dataset is a folder of these files (see mscl.data.manifest).
MANIFEST_FILES = ["train.parquet", "val.parquet", "test.parquet", "labels.txt", "stats.json"]
MODELS = config["paths"]["models"]
TINY_MODELS = f"{MODELS}/tiny"
MIMIC_VERSIONS = ["mimic3", "mimic4_icd9", "mimic4_icd10"]
DEMO_KINDS = ["coco", "voc", "nuswide", "aapd", "mimic3", "mimic4"]
# Used with `--sdm conda`; otherwise jobs run in the environment snakemake runs in.
CONDA_ENV = "../../envs/mscl.yaml"


def config_files():
    """The config files in force, for error messages."""
    return ", ".join(map(str, workflow.configfiles)) or "your config file"


# Every dataset setting and method (loss or reference) the schema allows, read once:
# experiment_runs checks each block against them and the {loss} wildcard takes the methods.
with open(os.path.join(workflow.basedir, "workflow/schemas/config.schema.yaml")) as handle:
    _SCHEMA = yaml.safe_load(handle)["properties"]
KNOWN_DATASETS = _SCHEMA["datasets"]["items"]["enum"]
KNOWN_METHODS = _SCHEMA["experiments"]["additionalProperties"]["properties"]["losses"]["items"]["enum"]


def experiment_runs():
    """Every (dataset, encoder, loss, batch, seed) the experiment blocks name, once each."""
    runs = set()
    for block_name, block in config["experiments"].items():
        for dataset in block["datasets"]:
            if dataset not in KNOWN_DATASETS:
                raise ValueError(
                    f"config experiments.{block_name}.datasets names {dataset!r}, which is not a dataset "
                    f"setting of this pipeline. Fix: use one of {KNOWN_DATASETS} in {config_files()}"
                )
            if dataset not in config["datasets"]:
                raise ValueError(
                    f"config experiments.{block_name}.datasets names {dataset!r}, which is not in "
                    f"`datasets` {config['datasets']}. Fix: add it to `datasets` or remove it from the "
                    f"block, in {config_files()}"
                )
        for encoder in block["encoders"]:
            if encoder not in config["encoders"]:
                raise ValueError(
                    f"config experiments.{block_name}.encoders names {encoder!r}, which is not a key of "
                    f"`encoders` {sorted(config['encoders'])}. Fix: define it under `encoders` or fix the "
                    f"name, in {config_files()}"
                )
        for combination in itertools.product(
            block["datasets"], block["encoders"], block["losses"], block["batch_sizes"], block.get("seeds", config["seeds"])
        ):
            runs.add(combination)
    return sorted(runs)


RUNS = experiment_runs()
# One run's place, shared by its folder, its jobs' logs and benchmarks (run_log,
# run_benchmark) and the lists of every run's files (every_run).
RUN_NAME = "{dataset}/{encoder}/{loss}/bs{batch}/seed{seed}"
RUN_DIR = f"{RESULTS}/runs/{RUN_NAME}"


wildcard_constraints:
    dataset="|".join(config["datasets"]),
    encoder="|".join(config["encoders"]) or "NO_ENCODER",
    loss="|".join(KNOWN_METHODS),
    batch=r"\d+",
    seed=r"\d+",
    version="|".join(MIMIC_VERSIONS),
    kind="|".join(DEMO_KINDS),


def source_of(dataset_or_version):
    """The raw source a dataset setting (or MIMIC version) is prepared from."""
    for prefix in ("mimic3", "mimic4"):
        if dataset_or_version.startswith(prefix):
            return prefix
    return dataset_or_version


def is_demo(source):
    return config["sources"][source]["root"] == "demo"


def raw_root(source):
    """Params function: the generated demo folder (the rule's input) or the configured root."""

    def root(wildcards, input):
        return input.raw[0] if is_demo(source) else config["sources"][source]["root"]

    return root


def folder_of(name):
    """Params function: the folder holding the rule's first file of input/output `name`."""

    def folder(wildcards, input, output):
        files = {"input": input, "output": output}[name.split(".")[0]]
        if "." in name:
            files = getattr(files, name.split(".")[1])
        first = files if isinstance(files, str) else files[0]  # a named single file is a str
        return os.path.dirname(first)

    return folder


def prepare_options(source):
    """Options of `python -m mscl prepare-<source>` beyond --root, --out and --seed, from the
    source's config block (the schema documents each key)."""
    settings = config["sources"][source]
    options = []
    if source == "voc":
        options.append(f"--difficult {settings['difficult']}")
    if source == "aapd":
        options.append(f"--policy {settings['policy']}")
    if not settings.get("verify_images", True):
        options.append("--no-verify-images")
    return " ".join(options)


def demo_input(source):
    """The generated demo folder when a source runs on demo data, else nothing."""
    return [f"{RAW}/demo/{source}"] if is_demo(source) else []


_reported_config_problems = set()


def config_problem(message):
    """Stop a real run with `message`; a dry run (-n) only warns, once, so that the grid can be
    inspected before the data is in place."""
    if not workflow.dryrun:
        raise WorkflowError(message)
    if message not in _reported_config_problems:
        _reported_config_problems.add(message)
        logger.warning(f"WARNING (a real run stops here): {message}")


def source_input(fixed_source, manifest_dataset):
    """Input function of a preprocessing rule (for MIMIC the source follows the {version}
    wildcard): the demo folder, or [] after checking the real root while the DAG is built,
    before any job runs. Skipped once the dataset's manifest exists: the raw files may live
    elsewhere by then."""

    def raw(wildcards):
        source = source_of(wildcards.get("version", fixed_source))
        if is_demo(source):
            return demo_input(source)
        if os.path.exists(f"{PROCESSED}/{manifest_dataset.format(**wildcards)}/stats.json"):
            return []
        problem = source_problem(source, config["sources"][source]["root"])
        if problem:
            layout = ", ".join(entry.replace("|", " or ") for entry in LAYOUTS[source])
            config_problem(
                f"sources.{source}.root: {problem}. Fix: set `sources.{source}.root` in {config_files()} to "
                f"the folder that holds {layout}"
            )
        return []

    return raw


def mimic_root(wildcards, input):
    source = source_of(wildcards.version)
    return input.raw[0] if is_demo(source) else config["sources"][source]["root"]


def manifest(dataset):
    return [f"{PROCESSED}/{dataset}/{name}" for name in MANIFEST_FILES]


def split_list_option(version):
    """Command-line source of the MIMIC split lists for one version (see the schema)."""
    source = source_of(version)
    splits = config["sources"][source]["splits"]
    if splits == "download":
        return ""
    if splits == "demo":
        # The demo's lists are generated, so there is no published checksum to verify.
        return f"--source {RAW}/demo/{source}/splits/{version} --no-verify"
    return f"--source {splits}/{version}"


def split_list_input(wildcards):
    """The demo folder for demo lists; a local split folder is checked before any job runs."""
    source = source_of(wildcards.version)
    splits = config["sources"][source]["splits"]
    if splits == "demo":
        return demo_input(source)
    if splits != "download" and not os.path.exists(f"{PROCESSED}/splits/{wildcards.version}/top50_code_list.txt"):
        problem = split_folder_problem(source, splits)
        if problem:
            config_problem(
                f"sources.{source}.splits: {problem}. Fix: set `sources.{source}.splits` in {config_files()} "
                f"to `download` or a folder laid out like shared/data/mimic_splits"
            )
    return []


def encoder_spec(name):
    """The encoder's spec with "{tiny}" expanded to the generated tiny models' folder."""
    spec = dict(config["encoders"][name]["spec"])
    if isinstance(spec.get("path"), str):
        spec["path"] = spec["path"].replace("{tiny}", TINY_MODELS)
    return spec


def uses_tiny_models(name):
    return "{tiny}" in str(config["encoders"][name]["spec"].get("path", ""))


def run_spec(wildcards):
    """The run spec (mscl.train.spec) of one job, shell-quoted JSON."""
    encoder = config["encoders"][wildcards.encoder]
    spec = {
        "dataset": wildcards.dataset,
        "encoder_name": wildcards.encoder,
        "encoder": encoder_spec(wildcards.encoder),
        "loss": wildcards.loss,
        "loss_options": config["training"]["loss_options"].get(wildcards.loss, {}),
        "batch_size": int(wildcards.batch),
        "seed": int(wildcards.seed),
        "pretrain": {**config["training"]["pretrain"], **encoder["pretrain"]},
        "probe": {**config["training"]["probe"], **encoder["probe"]},
    }
    return shlex.quote(json.dumps(spec, sort_keys=True))


def encoder_resource(key):
    """Resource function: the encoder's configured value (mem_mb grows with each retry)."""

    def value(wildcards, attempt):
        amount = config["encoders"][wildcards.encoder]["resources"][key]
        return amount * attempt if key == "mem_mb" else amount

    return value


def encoder_threads(wildcards):
    return config["encoders"][wildcards.encoder]["resources"]["threads"]


# The scheduler request of every job that runs the {encoder} (cache_prefix, pretrain, probe):
# `threads: encoder_threads` and `resources: **ENCODER_RESOURCES`.
ENCODER_RESOURCES = {key: encoder_resource(key) for key in ("gpu", "mem_mb", "runtime")}


def uses_prefix_cache(name):
    """A top-layer hf or plm_icd encoder (`trainable_layers`): its frozen prefix is cached per dataset."""
    return config["encoders"][name]["spec"].get("trainable_layers") is not None


def prefix_cache_input(wildcards):
    if uses_prefix_cache(wildcards.encoder):
        return [f"{PROCESSED}/{wildcards.dataset}/prefix/{wildcards.encoder}.pt"]
    return []


def prefix_cache_option(wildcards, input):
    return f"--prefix-cache {input.prefix}" if input.prefix else ""


def tiny_models_input(wildcards):
    return [TINY_MODELS] if uses_tiny_models(wildcards.encoder) else []


def run_log(stage):
    """The log of a run's `stage` job (pretrain, probe)."""
    return f"{LOGS}/{stage}/{RUN_NAME}.log"


def run_benchmark(stage):
    """The benchmark file of a run's `stage` job (pretrain, probe): mscl.report.cost reads the
    run's axes from this path."""
    return f"{BENCHMARKS}/{stage}/{RUN_NAME}.tsv"


def every_run(pattern):
    """`pattern` (a path with the run wildcards) for every run in the grid."""
    return [pattern.format(dataset=d, encoder=e, loss=l, batch=b, seed=s) for d, e, l, b, s in RUNS]


def run_outputs(stage_file):
    """`stage_file` (e.g. "probe/metrics.json") of every run in the grid."""
    return every_run(f"{RUN_DIR}/{stage_file}")


# The label prior ("chance", rule `chance`, mscl.report.chance) of a dataset, written where a
# probe writes its outputs so that `collect` reads it as a run (encoder "chance", loss "chance",
# bs0, seed0). "{loss}" only takes KNOWN_METHODS and "{encoder}" the configured encoders, so the
# probe rule never claims these paths.
CHANCE_DIR = f"{RESULTS}/runs/{{dataset}}/chance/chance/bs0/seed0/probe"
# Its `collect --roles` entry (mscl.report.style: CHANCE=REFERENCE_ROLE).
CHANCE_ROLE = "chance=reference"


def chance_outputs(name):
    """File `name` of the label prior of every dataset with runs, for the paper's tables and
    figures; none for the claim check (report.artifacts = claim), which compares trained methods."""
    if config["report"]["artifacts"] == "claim":
        return []
    return [os.path.join(CHANCE_DIR.format(dataset=dataset), name) for dataset in sorted({run[0] for run in RUNS})]


def run_benchmarks(stage):
    return every_run(run_benchmark(stage))


TABLES = ["image", "aapd", "mimic_full", "mimic_50", "sota", "ablation", "paper_vs_run", "cost"]
FIGURES = [
    "improvement", "std", "text_encoders", "mimic_dotplot", "mimic_heatstrip",
    "frequency_buckets", "batch_size", "relations",
]


# The table/figure group whose configured batch size selects the runs shown; artifacts that
# mix groups (ablation, paper_vs_run) take, per dataset and encoder, the batch size most runs
# share, and the batch-size figure shows every batch size.
REPORT_GROUP = {
    "image": "image", "aapd": "aapd", "mimic_full": "mimic", "mimic_50": "mimic", "sota": "mimic",
    "improvement": "image", "std": "image", "frequency_buckets": "image", "text_encoders": "aapd",
    "mimic_dotplot": "mimic", "mimic_heatstrip": "mimic",
}


def batch_size_option(wildcards):
    name = wildcards.get("table") or wildcards.get("figure")
    group = REPORT_GROUP.get(name)
    return f"--batch-size {config['report']['batch_size'][group]}" if group else ""


# The claim check's artifacts (report.artifacts = claim; mscl.report.claim).
CLAIM_TABLES = ["claim_summary", "claim_tests"]
CLAIM_FILES = [f"{name}.{ext}" for name in CLAIM_TABLES for ext in ("tex", "csv", "md")] + [
    "claim_differences.pdf", "claim_differences.png", "claim_outcome.md",
]


def all_targets():
    targets = [f"{RESULTS}/tables/statistics.{ext}" for ext in ("tex", "csv", "md", "html")]
    if RUNS and config["report"]["artifacts"] == "claim":
        targets += [f"{RESULTS}/claim_check/{name}" for name in CLAIM_FILES]
    elif RUNS:
        targets += [f"{RESULTS}/tables/{name}.{ext}" for name in TABLES for ext in ("tex", "csv", "md", "html")]
        targets += [f"{RESULTS}/figures/{name}.{ext}" for name in FIGURES for ext in ("pdf", "png", "html")]
    return targets
