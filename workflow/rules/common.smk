import itertools
import json
import os
import shlex
import sys

import yaml
from snakemake.exceptions import WorkflowError
from snakemake.logging import logger

# Shared definitions: paths, the dataset -> source map, input functions, target lists.
# No logic beyond that: everything else lives in the mscl package. The source checks, and the
# run layout and the table, figure and demo names the commands share (mscl.layout), come from
# the checkout's own src/ (standard library only), whatever environment runs Snakemake.
sys.path.insert(0, os.path.join(REPO_ROOT, "src"))
from mscl import registry
from mscl.config_checks import config_problems, problems_message
from mscl.defaults import MISSING_IMAGES_DEFAULTS
from mscl.data.sources import LAYOUTS, SPLIT_LIST_FILES, source_problem, split_folder_problem
from mscl.interrupt import stop_jobs_on_sigint, tie_jobs_to_this_process
from mscl.jobserver import run_jobs_from, start_for_workflow
from mscl.layout import (
    CHANCE,
    CLAIM_DATA_FILES,
    CLAIM_FIGURE_NAMES,
    DEMO_KINDS,
    FIGURE_NAMES,
    LOSS_CURVES_FIGURE,
    MIMIC_VERSIONS,
    MODALITY_FAMILY,
    REFERENCE_ROLE,
    RUN_NAME,
    TABLE_NAMES,
    TUNE_RUN_NAME,
    job_benchmark,
    job_log,
    run_dir,
    run_name,
    tuning_dir,
)
from mscl.plugins import plugins_of_run
from mscl.report.names import REPORT_GROUPS
from mscl.tuning import UNTRAINED_METHODS, family_of, grid_settings
from mscl.train.gpu_pool import limit_gpu_jobs, plan_local_gpus, share_local_gpus
from mscl.train.launch import export_curves, export_ddp_timeout, export_encoder_gpus

# The jobs and the job server run the same code as this Snakefile (mscl.jobserver.run_jobs_from).
run_jobs_from(os.path.join(REPO_ROOT, "src"))

# `kill -INT` on Snakemake alone stops the running jobs too (mscl.interrupt): the children of
# this process, found through psutil (no private Snakemake API).
stop_jobs_on_sigint()


onstart:
    if CONFIG_PROBLEMS:
        raise WorkflowError("\n".join(CONFIG_PROBLEMS))
    # Jobs on this machine stop when this Snakemake process ends, even by SIGKILL (mscl.interrupt).
    tie_jobs_to_this_process(local=workflow.local_exec)
    # Training jobs fork from one interpreter that imported torch once (mscl.jobserver), when
    # they run on this machine in this environment; each is still its own job and process.
    start_for_workflow(
        enabled=config["job_server"] and not workflow.touch,
        local=workflow.local_exec,
        isolated_environments=bool(workflow.deployment_settings.deployment_method),
        log_path=os.path.join(".snakemake", "log", "mscl-job-server.log"),
        report=logger.info,
    )
    # Each local training job holds its own GPUs of this machine (mscl.train.launch); on a
    # cluster the scheduler assigns them.
    share_local_gpus(LOCAL_GPUS, report=logger.info)


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
# Locally generated model sets, written by the local_models rule (make-tiny-models --set). An
# encoder spec's path names one as "{tiny}/roberta" or "{paper_stand_ins}/roberta-base".
# tiny: 2-layer RoBERTa/Llama for tests; paper_stand_ins: the paper's hub models at their class
# and width, randomly initialised (config/paper_smoke.yaml).
LOCAL_MODEL_SETS = {"tiny": "tiny", "paper_stand_ins": "paper"}  # folder under MODELS -> --set
# Used with `--sdm conda`; otherwise jobs run in the environment snakemake runs in.
CONDA_ENV = "../../envs/mscl.yaml"


def config_files():
    """The config files in force, for error messages."""
    return ", ".join(map(str, workflow.configfiles)) or "your config file"


# Every name the config may use comes from one list: dataset settings from mscl.layout (plus
# the config's own sources), losses, reference methods and encoder kinds from mscl.registry
# (plus what the config's plugins registered). mscl.config_checks refuses an unknown name, and
# every other mistake of the config's cross-references, while the Snakefile is parsed: before
# any job, in a dry run too.
with open(os.path.join(REPO_ROOT, "workflow/schemas/config.schema.yaml")) as handle:
    _SCHEMA = yaml.safe_load(handle)["properties"]
# A `sources` key the schema does not list is a dataset of the user's own (kind csv or manifest).
OWN_SOURCES = {name: block for name, block in config["sources"].items() if name not in _SCHEMA["sources"]["properties"]}
KNOWN_METHODS = registry.method_names()

_PROBLEMS = config_problems(config, OWN_SOURCES)
if _PROBLEMS:
    raise WorkflowError(problems_message(_PROBLEMS, config_files()))


def experiment_runs():
    """Every (dataset, encoder, loss, batch, seed) the experiment blocks name, once each."""
    runs = set()
    for block in config["experiments"].values():
        runs.update(
            itertools.product(
                block["datasets"],
                block["encoders"],
                block["losses"],
                block["batch_sizes"],
                block.get("seeds", config["seeds"]),
            )
        )
    return sorted(runs)


RUNS = experiment_runs()
# One run's place (mscl.layout.RUN_NAME), shared by its folder, its jobs' logs and benchmarks
# (run_log, run_benchmark) and the lists of every run's files (every_run).
RUN_DIR = run_dir(RESULTS)


# Equal tuning per method (the claim check, docs/claim-check.md; mscl.tuning). A run of an
# experiment block with `tune: true` takes the hyperparameters chosen on val from tuning runs:
# every setting of its encoder's grid for the method's family (`encoders.<name>.tune`) x every
# `tuning.seeds`, at the block's `tune_batch_size` and for its `tune_encoder` (default: the run's
# own batch size and encoder; an encoder of the same architecture, e.g. a longer schedule). Methods
# in `tuning.reuse` take another method's choice (the ablations Sim-Dissim's); untrained
# reference methods have nothing to tune. A tuning run lives under tuning/, with its setting
# as a path component (mscl.layout.TUNE_RUN_NAME); the choice is tuning/.../bs{batch}/selected.json.
TUNE_DIR = tuning_dir(RESULTS)
SELECTION = f"{RESULTS}/tuning/{{dataset}}/{{encoder}}/{{loss}}/bs{{batch}}/selected.json"


def encoder_grid(encoder, loss):
    """{setting name: pretrain values} of the encoder's grid for the method's tuning family
    (mscl.config_checks has checked that it is there)."""
    return grid_settings(config["encoders"][encoder]["tune"][family_of(loss)])


def tuning_plan():
    """({tuned test run: the (dataset, encoder, method, batch) whose selection it takes}, tuning
    runs). A block's `tune_batch_size` and `tune_encoder` (an encoder of the same spec, checked
    by mscl.config_checks) name the selection its runs take; default their own."""
    selection_of, tuning_runs = {}, set()
    tuning_seeds = set(config["tuning"]["seeds"])
    for block in config["experiments"].values():
        if not block.get("tune"):
            continue
        combinations = itertools.product(
            block["datasets"],
            block["encoders"],
            block["losses"],
            block["batch_sizes"],
            block.get("seeds", config["seeds"]),
        )
        for dataset, encoder, loss, batch, seed in combinations:
            if loss in UNTRAINED_METHODS:
                continue
            source = config["tuning"]["reuse"].get(loss, loss)
            tune_batch = block.get("tune_batch_size", batch)
            tune_encoder = block.get("tune_encoder", encoder)
            selection_of[(dataset, encoder, loss, batch, seed)] = (dataset, tune_encoder, source, tune_batch)
            for setting in encoder_grid(tune_encoder, source):
                tuning_runs.update((dataset, tune_encoder, source, tune_batch, setting, s) for s in tuning_seeds)
    return selection_of, sorted(tuning_runs)


SELECTION_OF, TUNING_RUNS = tuning_plan()


def run_key(wildcards):
    return (wildcards.dataset, wildcards.encoder, wildcards.loss, int(wildcards.batch), int(wildcards.seed))


def selection_of(wildcards):
    """The (dataset, encoder, method, batch) whose selection a tuned test run takes; None for
    tuning runs and untuned runs."""
    return None if wildcards.get("setting") is not None else SELECTION_OF.get(run_key(wildcards))


def selected_input(wildcards):
    """A tuned test run's selection file (none for tuning runs and untuned runs)."""
    selection = selection_of(wildcards)
    if selection is None:
        return []
    dataset, encoder, loss, batch = selection
    return [SELECTION.format(dataset=dataset, encoder=encoder, loss=loss, batch=batch)]


def selected_option(wildcards, input):
    return f"--selected {input.selected}" if input.selected else ""


def tuning_metrics(wildcards):
    """Every tuning run's probe metrics.json of one method's grid (setting x tuning seed), in grid order."""
    return [
        f"{TUNE_DIR}/probe/metrics.json".format(**wildcards, setting=setting, seed=seed)
        for setting in encoder_grid(wildcards.encoder, wildcards.loss)
        for seed in sorted(config["tuning"]["seeds"])
    ]


def tuning_keys(wildcards):
    return " ".join(sorted(config["encoders"][wildcards.encoder]["tune"][family_of(wildcards.loss)]))


wildcard_constraints:
    dataset="|".join(config["datasets"]),
    encoder="|".join(config["encoders"]) or "NO_ENCODER",
    loss="|".join(KNOWN_METHODS),
    batch=r"\d+",
    seed=r"\d+",
    setting=r"[A-Za-z_]+[^/]*",
    version="|".join(MIMIC_VERSIONS),
    model_set="|".join(LOCAL_MODEL_SETS),
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
    source's config block (the schema documents each key). `missing_images` is passed only
    where it is not the parser's own default, so that a config without it plans the same jobs."""
    settings = config["sources"][source]
    options = []
    if source == "voc":
        options.append(f"--difficult {settings['difficult']}")
    if source == "aapd":
        options.append(f"--policy {settings['policy']}")
    if not settings.get("verify_images", True):
        options.append("--no-verify-images")
    if settings.get("missing_images", MISSING_IMAGES_DEFAULTS.get(source)) != MISSING_IMAGES_DEFAULTS.get(source):
        options.append(f"--missing-images {settings['missing_images']}")
    return " ".join(options)


def demo_input(source):
    """The generated demo folder when a source runs on demo data, else nothing."""
    return [f"{RAW}/demo/{source}"] if is_demo(source) else []


def demo_samples_option(wildcards):
    """--samples from `sources.<kind>.samples` (null: the generator's default size)."""
    samples = config["sources"][wildcards.kind].get("samples")
    return "" if samples is None else f"--samples {samples}"


# Problems with the config's data (a source root or split folder that is not there), found while
# the DAG is built. Each is a warning at once, so that `-n`, `--dag`, `--rulegraph`, `--summary`
# and `--list-params-changes` can inspect the grid before the data is in place (a login node
# before the copy); a run that would execute jobs stops on them in `onstart`, before any job.
CONFIG_PROBLEMS = []


def config_problem(message):
    if message not in CONFIG_PROBLEMS:
        CONFIG_PROBLEMS.append(message)
        logger.warning(f"WARNING (a run that executes jobs stops here): {message}")


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


def own_families_option():
    """`--families NAME=FAMILY ...` of the datasets of one's own ('' when there are none)."""
    families = [f"{name}={family}" for name, family in sorted(OWN_FAMILIES.items()) if family]
    return " ".join(["--families", *families]) if families else ""


def own_source_input(wildcards):
    """A dataset of one's own: its CSV file, or its manifest folder's files, as the rule's input
    (a changed file reruns the preparation); a missing one is a config problem."""
    block = OWN_SOURCES[wildcards.dataset]
    if block["kind"] == "csv":
        files, key = [block["path"]], "path"
    else:
        files, key = [
            os.path.join(block["root"], name) for name in ("train.parquet", "val.parquet", "test.parquet", "labels.txt")
        ], "root"
    missing = [path for path in files if not os.path.isfile(path)]
    if missing:
        config_problem(
            f"sources.{wildcards.dataset}.{key}: {missing[0]!r} does not exist (relative paths are read from the working "
            f"directory {os.getcwd()}). Fix: set `sources.{wildcards.dataset}.{key}` in {config_files()}"
        )
        return []
    return files


def own_source_command(wildcards):
    """Params function: the prepare command and its options for a dataset of one's own (the
    config keys of `sources.<name>` as `python -m mscl prepare-csv` / `prepare-manifest` options)."""
    block = OWN_SOURCES[wildcards.dataset]
    options = [f"--dataset {wildcards.dataset}", f"--seed {config['seed']}"]
    if block.get("family"):
        options.append(f"--family {block['family']}")
    if block.get("verify_images") is False:
        options.append("--no-verify-images")
    if block["kind"] == "manifest":
        return " ".join(["prepare-manifest", f"--root {shlex.quote(block['root'])}", *options[:1], *options[2:]])
    if block.get("separator_check") is False:
        options.append("--no-separator-check")
    options += [f"--path {shlex.quote(block['path'])}", f"--input-column {shlex.quote(block['input_column'])}"]
    options.append(f"--labels-column {shlex.quote(block['labels_column'])}")
    for key in ("separator", "split_column", "id_column", "delimiter", "modality"):
        if block.get(key) is not None:
            options.append(f"--{key.replace('_', '-')} {shlex.quote(str(block[key]))}")
    if block.get("fractions") is not None:
        options.append("--fractions " + " ".join(str(value) for value in block["fractions"]))
    return " ".join(["prepare-csv", *options])


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


def own_dataset_family(dataset):
    """The family of a dataset of one's own (a csv or manifest source): `family:` as configured,
    else a csv file's modality's, else a manifest folder's stats.json family or modality's."""
    block = OWN_SOURCES[dataset]
    if block.get("family"):
        return block["family"]
    if block["kind"] == "csv":
        return MODALITY_FAMILY[block.get("modality", "text")]
    stats_file = os.path.join(block["root"], "stats.json")
    if os.path.isfile(stats_file):
        with open(stats_file, encoding="utf-8") as handle:
            recorded = json.load(handle)
        family = recorded.get("family") or MODALITY_FAMILY.get(recorded.get("modality"))
        if family:
            return family
    config_problem(
        f"sources.{dataset}: the manifest folder {block['root']!r} has no stats.json naming its family or "
        f"modality. Fix: set `sources.{dataset}.family` (image, text, tabular or mimic) in {config_files()}"
    )
    return None


# The family of each dataset of one's own the config prepares, worked out once (a manifest's may
# take a read of its stats.json): the run specs, the label prior and the benchmark read it here.
# Built-in settings have theirs in mscl.layout and no entry.
OWN_FAMILIES = {name: own_dataset_family(name) for name in OWN_SOURCES if name in config["datasets"]}


def encoder_spec(name):
    """The encoder's spec with "{tiny}" / "{paper_stand_ins}" expanded to the generated folders."""
    spec = dict(config["encoders"][name]["spec"])
    if isinstance(spec.get("path"), str):
        for model_set in LOCAL_MODEL_SETS:
            spec["path"] = spec["path"].replace(f"{{{model_set}}}", f"{MODELS}/{model_set}")
    return spec


def local_models_of(name):
    """The generated model folders the encoder's spec names ([] for hub names and other folders)."""
    path = str(config["encoders"][name]["spec"].get("path", ""))
    return [f"{MODELS}/{model_set}" for model_set in LOCAL_MODEL_SETS if f"{{{model_set}}}" in path]


def tuning_values(wildcards):
    """The pretrain values of a tuning run's setting ({} for other runs)."""
    setting = wildcards.get("setting")
    return encoder_grid(wildcards.encoder, wildcards.loss)[setting] if setting is not None else {}


def run_spec(stage):
    """Params function: the run spec (mscl.train.spec) a job of `stage` reads, shell-quoted
    JSON. A job's params hold exactly what changes its output (docs/reruns.md): pretraining
    never sees the probe's settings, so a probe-only change reruns probes alone."""

    def spec_of(wildcards):
        encoder = config["encoders"][wildcards.encoder]
        spec = {
            "dataset": wildcards.dataset,
            "encoder_name": wildcards.encoder,
            "encoder": encoder_spec(wildcards.encoder),
            "loss": wildcards.loss,
            "loss_options": config["training"]["loss_options"].get(wildcards.loss, {}),
            "batch_size": int(wildcards.batch),
            "seed": int(wildcards.seed),
            # A tuning run's setting (its {setting} wildcard) overrides the configured values.
            "pretrain": {**config["training"]["pretrain"], **encoder["pretrain"], **tuning_values(wildcards)},
        }
        if stage == "probe":
            spec["probe"] = {**config["training"]["probe"], **encoder["probe"]}
        if OWN_FAMILIES.get(wildcards.dataset):
            spec["dataset_family"] = OWN_FAMILIES[wildcards.dataset]
        # The plugins that registered the run's loss or encoder kind, with their content's hash:
        # editing a plugin reruns exactly the runs that use it (mscl.plugins).
        plugins = plugins_of_run(PLUGINS, wildcards.loss, encoder["spec"]["kind"])
        if plugins:
            spec["plugins"] = plugins
        selection = selection_of(wildcards)
        if selection and selection[1] != wildcards.encoder:
            spec["tuned_encoder"] = selection[1]  # the run takes another encoder's selection (`tune_encoder`)
        return shlex.quote(json.dumps(spec, sort_keys=True))

    return spec_of


def per_dataset(amount, dataset):
    """A resource's value for one dataset: the number itself, or the dataset's entry of a
    {default: n, <dataset>: n} mapping (memory measured per dataset, docs/scale.md)."""
    return amount.get(dataset, amount["default"]) if isinstance(amount, dict) else amount


def rule_resource(rule, key, wildcard="dataset"):
    """Resource function of a job without an encoder (config `resources.<rule>`), per value of
    its `wildcard` (the dataset; prepare_mimic's MIMIC version); mem_mb grows with each retry."""

    def value(wildcards, attempt):
        amount = per_dataset(config["resources"][rule][key], wildcards[wildcard])
        return amount * attempt if key == "mem_mb" else amount

    return value


def encoder_threads(wildcards):
    return config["encoders"][wildcards.encoder]["resources"]["threads"]


def encoder_resources(stage):
    """The scheduler request of a job that runs the {encoder} (`resources: **encoder_resources(stage)`):
    the encoder's configured values for the job's dataset. `gpu` (what Snakemake and SLURM
    count) and `job_gpus` (what `mscl launch` holds of the local pool, and the number of
    torchrun processes of a pretrain job; the gres profile removes `gpu`) are the encoder's
    `resources.gpu` for pretraining, at most 1 for the single-process jobs, and 0 for an untrained
    method's initial encoder. A pretrain job of N GPUs runs N processes that each hold the data,
    the model, a CUDA context and loader workers, so it asks for N x `mem_mb`; every retry
    asks for attempt x that."""

    def gpus(wildcards):
        configured = config["encoders"][wildcards.encoder]["resources"]["gpu"]
        return {"pretrain": configured, "initial_encoder": 0}.get(stage, min(configured, 1))

    def mem_mb(wildcards, attempt):
        amount = per_dataset(config["encoders"][wildcards.encoder]["resources"]["mem_mb"], wildcards.dataset)
        processes = max(1, gpus(wildcards)) if stage == "pretrain" else 1
        return amount * processes * attempt

    def runtime(wildcards):
        return per_dataset(config["encoders"][wildcards.encoder]["resources"]["runtime"], wildcards.dataset)

    return {"gpu": gpus, "job_gpus": gpus, "mem_mb": mem_mb, "runtime": runtime}


# For the SLURM profiles' GPU request of pretrain jobs, the DDP jobs' hung-rank timeout and the
# training jobs' TensorBoard curves (mscl.train.launch): environment variables, not params,
# since none of them changes a result.
export_encoder_gpus(config["encoders"])
export_ddp_timeout(config["distributed"]["timeout_s"])
export_curves(config["tensorboard"]["enabled"], config["tensorboard"]["points_per_epoch"])

# This machine's GPU pool for a local run (mscl.train.gpu_pool), found once: Snakemake's `gpu`
# resource is its size (unless `--resources gpu=N` says otherwise), so the scheduler starts no
# more GPU jobs than the pool holds. GPUs that cannot be listed stop the run before any job.
# The executor is not known while the workflow parses; a cluster run is one with remote nodes
# (`--jobs N`, which Snakemake requires of a cluster executor: the SLURM profiles' `jobs`).
LOCAL_GPUS = plan_local_gpus(
    config["local_gpus"]["devices"], config["local_gpus"]["jobs_per_device"], local=workflow.nodes is None
)
limit_gpu_jobs(workflow.global_resources, LOCAL_GPUS, report=logger.info)
if LOCAL_GPUS.problem:
    config_problem(LOCAL_GPUS.problem)


def uses_prefix_cache(name):
    """A top-layer hf or plm_icd encoder (`trainable_layers`): its frozen prefix is cached per dataset."""
    return config["encoders"][name]["spec"].get("trainable_layers") is not None


def prefix_cache_input(wildcards):
    if uses_prefix_cache(wildcards.encoder):
        return [f"{PROCESSED}/{wildcards.dataset}/prefix/{wildcards.encoder}.pt"]
    return []


def prefix_cache_option(wildcards, input):
    return f"--prefix-cache {input.prefix}" if input.prefix else ""


def local_models_input(wildcards):
    return local_models_of(wildcards.encoder)


def run_log(stage, name=RUN_NAME):
    """The log of a run's `stage` job (pretrain, probe); tuning runs pass TUNE_RUN_NAME."""
    return job_log(RESULTS, stage, name, tuning=name == TUNE_RUN_NAME)


def run_benchmark(stage, name=RUN_NAME):
    """The benchmark file of a run's `stage` job (pretrain, probe): mscl.report.cost finds it
    from the run by the same mscl.layout function (tuning runs' files live under tuning/)."""
    return job_benchmark(RESULTS, stage, name, tuning=name == TUNE_RUN_NAME)


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
CHANCE_DIR = f"{run_dir(RESULTS, run_name('{dataset}', CHANCE, CHANCE, 0, 0))}/probe"
# Its `collect --roles` entry.
CHANCE_ROLE = f"{CHANCE}={REFERENCE_ROLE}"


def chance_outputs(name):
    """File `name` of the label prior of every dataset with runs, for the paper's tables and
    figures; none for the claim check (report.artifacts = claim), which compares trained methods."""
    if config["report"]["artifacts"] == "claim":
        return []
    return [os.path.join(CHANCE_DIR.format(dataset=dataset), name) for dataset in sorted({run[0] for run in RUNS})]


def run_benchmarks(stage):
    return every_run(run_benchmark(stage))


def report_batch_size(name):
    """The configured batch size of a table or figure's group; None for those that mix groups."""
    group = REPORT_GROUPS.get(name)
    return config["report"]["batch_size"][group] if group else None


def batch_size_option(wildcards):
    size = report_batch_size(wildcards.get("table") or wildcards.get("figure"))
    return f"--batch-size {size}" if size else ""


# The claim check's artifacts (report.artifacts = claim): the data files of `claim-export`
# (mscl.report.claim_data) and the statistics, sections and figures of `claim-report`
# (mscl.report.claim). `make claim` copies them into docs/ (docs/claim-check.md).
CLAIM_FILES = ["tests.csv", "batch_size_tests.csv", "long_tail_tests.csv", "schedule_tests.csv", "claim_report.md"] + [
    f"{name}.{ext}" for name in CLAIM_FIGURE_NAMES for ext in ("pdf", "png")
]


def claim_selections():
    """Every tuning selection the grid's test runs read."""
    return sorted({SELECTION.format(dataset=d, encoder=e, loss=l, batch=b) for d, e, l, b in SELECTION_OF.values()})


def claim_train_stats(wildcards, input):
    return " ".join(f"{os.path.basename(os.path.dirname(path))}={path}" for path in input.stats)


def all_targets():
    targets = [f"{RESULTS}/tables/statistics.{ext}" for ext in ("tex", "csv", "md", "html")]
    if RUNS and config["report"]["artifacts"] == "claim":
        targets += [f"{RESULTS}/claim_check/data/{name}" for name in CLAIM_DATA_FILES]
        targets += [f"{RESULTS}/claim_check/{name}" for name in CLAIM_FILES]
    elif RUNS:
        targets += [f"{RESULTS}/tables/{name}.{ext}" for name in TABLE_NAMES for ext in ("tex", "csv", "md", "html")]
        targets += [f"{RESULTS}/figures/{name}.{ext}" for name in FIGURE_NAMES for ext in ("pdf", "png", "html")]
        targets += [f"{RESULTS}/tables/benchmark.{ext}" for ext in ("csv", "md", "html")]
        targets += [f"{RESULTS}/figures/benchmark.{ext}" for ext in ("pdf", "png", "html")]
        targets += [f"{RESULTS}/figures/{LOSS_CURVES_FIGURE}.{ext}" for ext in ("pdf", "png", "html")]
    return targets
