"""The SLURM workflow profiles: what every job of the paper grid asks the scheduler for.

Dry runs of config/paper.yaml through workflow/profiles/slurm and workflow/profiles/slurm-gres
print each job's resolved resources and shell command; the tests read them back. In these runs
Llama-3.1-8B has 2 GPUs (`TWO_GPUS`): its pretrain jobs are distributed (DDP) runs under torchrun.
The real submission (sbatch on a live SLURM cluster) is checked by .ci/slurm_check.sh.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
PROFILES = REPO / "workflow" / "profiles"
PAPER = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
TRAINING_RULES = ("pretrain", "probe")
SITE_PLACEHOLDERS = {"slurm_account": "CHANGE_ME_account", "cpu": "CHANGE_ME_cpu", "gpu": "CHANGE_ME_gpu"}
# Any --cores above every encoder's threads: a dry run caps threads at --cores, a cluster run
# (non-local executor) does not, and cpus_per_gpu is derived from threads.
DRY_RUN_CORES = "64"
# Layered over config/paper.yaml: one encoder pretrains on 2 GPUs (resources.gpu).
TWO_GPUS = {"encoders": {"llama-3.1-8b": {"resources": {"gpu": 2}}}}


@dataclasses.dataclass
class Job:
    rule: str
    wildcards: dict[str, str]
    threads: int
    resources: dict[str, str]
    shell: str = ""

    @property
    def gpus(self) -> int:
        """GPUs the job asks for: 2 for Llama's pretrain jobs (TWO_GPUS), else 1."""
        return 2 if self.rule == "pretrain" and self.wildcards["encoder"] == "llama-3.1-8b" else 1


def configured(amount: int | dict, dataset: str) -> int:
    """A resource of config/paper.yaml for one dataset: a number, or {default: n, <dataset>: n}."""
    return amount.get(dataset, amount["default"]) if isinstance(amount, dict) else amount


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    """Run the repository's Snakefile in `workdir` with the venv's bin first on PATH."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir), *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=workdir)


def parse_key_values(text: str) -> dict[str, str]:
    """'a=1, b=x y' -> {'a': '1', 'b': 'x y'} (resources and wildcards lines of a dry run)."""
    return dict(item.split("=", 1) for item in text.split(", ") if "=" in item)


def parse_dry_run(output: str) -> list[Job]:
    """Every job block ('rule NAME:' then indented fields) of a dry run's output."""
    jobs: list[Job] = []
    for line in output.splitlines():
        if line.startswith(("rule ", "localrule ")) and line.endswith(":"):
            jobs.append(Job(line.split()[1].rstrip(":"), {}, 1, {}))
        elif jobs and line.startswith("    wildcards: "):
            jobs[-1].wildcards = parse_key_values(line.removeprefix("    wildcards: "))
        elif jobs and line.startswith("    threads: "):
            jobs[-1].threads = int(line.removeprefix("    threads: "))
        elif jobs and line.startswith("    resources: "):
            jobs[-1].resources = parse_key_values(line.removeprefix("    resources: "))
        elif jobs and line.startswith("Shell command: "):  # the profiles set printshellcmds
            jobs[-1].shell = line.removeprefix("Shell command: ")
    return jobs


def paper_dry_run(tmp_path: Path, profile: str) -> list[Job]:
    two_gpus = tmp_path / "two_gpus.yaml"
    two_gpus.write_text(yaml.safe_dump(TWO_GPUS))
    result = snakemake(
        tmp_path, "-n", "--cores", DRY_RUN_CORES, "--configfile", str(REPO / "config" / "paper.yaml"), str(two_gpus),
        "--workflow-profile", str(PROFILES / profile),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    jobs = parse_dry_run(result.stdout + result.stderr)
    assert len([job for job in jobs if job.rule == "pretrain"]) == 117
    return jobs


@pytest.fixture(scope="module")
def slurm_jobs(tmp_path_factory) -> list[Job]:
    return paper_dry_run(tmp_path_factory.mktemp("slurm"), "slurm")


@pytest.fixture(scope="module")
def gres_jobs(tmp_path_factory) -> list[Job]:
    return paper_dry_run(tmp_path_factory.mktemp("gres"), "slurm-gres")


def find(jobs: list[Job], rule: str, **wildcards: str) -> Job:
    matches = [job for job in jobs if job.rule == rule and wildcards.items() <= job.wildcards.items()]
    assert matches, f"no {rule} job with {wildcards}"
    return matches[0]


def test_slurm_executor_plugin_knows_every_slurm_option_of_the_profiles():
    from snakemake_executor_plugin_slurm import ExecutorSettings

    settings = {field.name.replace("_", "-") for field in dataclasses.fields(ExecutorSettings)}
    for profile in ("slurm", "slurm-gres"):
        document = yaml.safe_load((PROFILES / profile / "config.v8+.yaml").read_text())
        assert document["executor"] == "slurm"
        options = {key.removeprefix("slurm-") for key in document if key.startswith("slurm-")}
        assert options and options <= settings, f"{profile}: unknown plugin options {options - settings}"


@pytest.mark.parametrize(
    "dataset, encoder, loss, batch",
    [("coco", "resnet50", "simdissim", "256"), ("aapd", "roberta-base", "all", "32"), ("mimic3_50", "llama-3.1-8b", "any", "8")],
)
def test_training_jobs_get_their_gpus_and_their_encoders_own_memory_and_time(slurm_jobs, dataset, encoder, loss, batch):
    wanted = PAPER["encoders"][encoder]["resources"]
    for rule in TRAINING_RULES:
        job = find(slurm_jobs, rule, dataset=dataset, encoder=encoder, loss=loss, batch=batch)
        assert job.resources["gpu"] == str(job.gpus) and "gres" not in job.resources
        # Attempt 1; a job of N processes (DDP ranks) asks for N x the configured amount.
        assert job.resources["mem_mb"] == str(job.gpus * configured(wanted["mem_mb"], dataset))
        assert job.resources["runtime"] == str(wanted["runtime"])
        assert job.threads == wanted["threads"] and job.resources["cpus_per_gpu"] == str(wanted["threads"])
        assert job.resources["slurm_partition"] == SITE_PLACEHOLDERS["gpu"]
        assert job.resources["slurm_account"] == SITE_PLACEHOLDERS["slurm_account"]


def test_no_training_job_has_its_runtime_or_memory_flattened(slurm_jobs):
    training = [job for job in slurm_jobs if job.rule in TRAINING_RULES]
    assert len(training) == 2 * 117
    for job in training:
        wanted = PAPER["encoders"][job.wildcards["encoder"]]["resources"]
        memory = job.gpus * configured(wanted["mem_mb"], job.wildcards["dataset"])  # N processes ask N x
        assert (job.resources["runtime"], job.resources["mem_mb"]) == (str(wanted["runtime"]), str(memory))
    # ResNet-50 12 h, RoBERTa-base 6 h, Llama-3.1-8B and PLM-ICD 24 h (config/paper.yaml)
    assert {job.resources["runtime"] for job in training} == {"360", "720", "1440"}


def test_preprocessing_jobs_run_on_the_cpu_partition_without_gpus(slurm_jobs):
    for rule in ("prepare_coco", "prepare_aapd", "prepare_mimic", "mimic_split_lists"):
        job = find(slurm_jobs, rule)
        assert "gpu" not in job.resources and "gres" not in job.resources and "cpus_per_gpu" not in job.resources
        assert job.resources["slurm_partition"] == SITE_PLACEHOLDERS["cpu"]
        assert job.resources["slurm_account"] == SITE_PLACEHOLDERS["slurm_account"]
    assert find(slurm_jobs, "prepare_coco").resources["mem_mb"] == "8000"
    # The workflow's own request (config `resources.prepare_mimic`), which the profile keeps.
    wanted = PAPER["resources"].get("prepare_mimic", {})
    assert find(slurm_jobs, "prepare_mimic", version="mimic4_icd10").resources["mem_mb"] == str(configured(wanted.get("mem_mb", 4000), "mimic4_icd10"))
    assert find(slurm_jobs, "prepare_mimic", version="mimic4_icd10").resources["runtime"] == "360"


def test_chance_jobs_get_their_datasets_measured_memory(slurm_jobs):
    """The label-prior jobs run on the CPU partition with config/paper.yaml's `resources.chance`
    for their dataset (docs/scale.md), not the profile's flat default."""
    wanted = PAPER["resources"]["chance"]["mem_mb"]
    jobs = [job for job in slurm_jobs if job.rule == "chance"]
    assert {job.wildcards["dataset"] for job in jobs} == set(PAPER["datasets"])
    for job in jobs:
        assert job.resources["mem_mb"] == str(configured(wanted, job.wildcards["dataset"]))
        assert job.resources["slurm_partition"] == SITE_PLACEHOLDERS["cpu"] and "gpu" not in job.resources
    assert len({job.resources["mem_mb"] for job in jobs}) > 1  # the MIMIC-IV Full sets need more


def test_gres_profile_asks_for_gres_instead_of_gpu_and_is_otherwise_identical(slurm_jobs, gres_jobs):
    assert len(gres_jobs) == len(slurm_jobs)
    by_job = {(job.rule, tuple(sorted(job.wildcards.items()))): job for job in slurm_jobs}
    for job in gres_jobs:
        twin = by_job[(job.rule, tuple(sorted(job.wildcards.items())))]
        if job.rule in TRAINING_RULES:
            assert job.resources["gres"] == f"gpu:{job.gpus}" and "gpu" not in job.resources
            assert {k: v for k, v in job.resources.items() if k != "gres"} == {
                k: v for k, v in twin.resources.items() if k != "gpu"
            }
        else:
            assert job.resources == twin.resources


def test_a_distributed_pretrain_job_runs_torchrun_on_its_gpus_of_one_node(slurm_jobs, gres_jobs):
    """An encoder with resources.gpu: 2 pretrains as one torchrun run of 2 processes on 2 GPUs
    of one node; its probe, and every other encoder's pretrain job, is one process on 1 GPU."""
    training = [job for job in slurm_jobs + gres_jobs if job.rule in TRAINING_RULES]
    distributed = [job for job in training if job.gpus == 2]
    assert len(distributed) == 2 * 28  # Llama's 28 pretrain jobs, through both profiles
    for job in training:
        # `mscl launch` holds the job's GPUs (SLURM's own inside a SLURM job) and, for a pretrain
        # job of N GPUs, runs N processes under torchrun (mscl.train.launch).
        torchrun = " --torchrun" if job.rule == "pretrain" else ""
        launch = f"OMP_NUM_THREADS={job.threads} python -m mscl launch --gpus {job.gpus}{torchrun} -- python -m mscl {job.rule} --data"
        assert job.shell.startswith(launch)
        if job.gpus == 2:
            assert job.resources["nodes"] == "1" and job.resources["job_gpus"] == "2"
        assert job.resources["cpus_per_gpu"] == str(job.threads)  # per process: each rank runs `threads` threads


def asks_for_a_gpu(job: Job) -> bool:
    """What sbatch gets: --gpus from `gpu`, --gres from `gres`."""
    return int(job.resources.get("gpu", "0")) > 0 or "gpu" in job.resources.get("gres", "")


def check_partitions(jobs: list[Job], where: str) -> set[str]:
    """Every job that asks for a GPU names the GPU partition and every other one the CPU
    partition; a job whose command would use a GPU (`mscl launch --gpus N`, N > 0) asks for
    one. Returns the rules that ask for GPUs."""
    for job in jobs:
        what = f"{where}: {job.rule} {job.wildcards} {job.resources}"
        if asks_for_a_gpu(job):
            assert job.resources["slurm_partition"] == SITE_PLACEHOLDERS["gpu"], what
        else:
            assert job.resources["slurm_partition"] == SITE_PLACEHOLDERS["cpu"], what
            assert not re.search(r"mscl launch --gpus [1-9]", job.shell), what
    return {job.rule for job in jobs if asks_for_a_gpu(job)}


@pytest.mark.parametrize("profile", ["slurm", "slurm-gres"])
def test_every_gpu_job_is_on_the_gpu_partition_and_no_job_asks_for_one_on_the_cpu_partition(slurm_jobs, gres_jobs, profile, tmp_path):
    """Every job of the paper grid, and of the embedded default (whose text encoders cache a
    frozen prefix per dataset, rule cache_prefix, which the paper's encoders do not)."""
    paper = {"slurm": slurm_jobs, "slurm-gres": gres_jobs}[profile]
    assert check_partitions(paper, f"paper grid, {profile}") == set(TRAINING_RULES)
    result = snakemake(tmp_path, "-n", "--cores", DRY_RUN_CORES, "--workflow-profile", str(PROFILES / profile))
    assert result.returncode == 0, result.stderr[-3000:]
    default = parse_dry_run(result.stdout + result.stderr)
    assert check_partitions(default, f"embedded default, {profile}") == {"cache_prefix", *TRAINING_RULES}


def test_site_values_are_set_in_one_block_and_code_edits_do_not_rerun_jobs():
    for profile in ("slurm", "slurm-gres"):
        text = (PROFILES / profile / "config.v8+.yaml").read_text()
        document = yaml.safe_load(text)
        placeholder_lines = [line for line in text.splitlines() if "CHANGE_ME" in line]
        assert len(placeholder_lines) == 3 and all(line.startswith("  ") and "&" in line for line in placeholder_lines)
        assert set(document["rerun-triggers"]) == {"mtime", "params", "input", "software-env"}
        for rule in (*TRAINING_RULES, "cache_prefix"):
            assert not {"mem_mb", "runtime"} & set(document["set-resources"][rule])
        for rule in TRAINING_RULES:
            # The claim check's tuning runs are the same jobs: the same partition and GPUs.
            assert document["set-resources"][f"tuning_{rule}"] == document["set-resources"][rule]


def aapd_only_config(path: Path) -> Path:
    """A config file that narrows the embedded default to AAPD (every experiment block one run)."""
    blocks = yaml.safe_load((REPO / "config.yaml").read_text())["experiments"]
    run = {"datasets": ["aapd"], "encoders": ["minilm-top1"], "losses": ["simdissim"], "batch_sizes": [32]}
    path.write_text(yaml.safe_dump({"datasets": ["aapd"], "experiments": {name: run for name in blocks}}))
    return path


def test_a_local_rule_runs_on_the_submit_host_under_the_slurm_executor(tmp_path):
    """statistics_table (a localrule) runs in the snakemake process; nothing calls sbatch."""
    configs = ["--configfile", str(REPO / "config.yaml"), str(aapd_only_config(tmp_path / "aapd.yaml"))]
    target = "results/tables/statistics.csv"
    stats = "data/processed/aapd/stats.json"
    prepared = snakemake(tmp_path, *configs, "--workflow-profile", "none", "--cores", "1", stats)
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    # Stand-ins for the SLURM commands: each records its call and fails, so any submission or
    # query would show up in calls.txt (and fail the job).
    fake_bin = tmp_path / "fake-slurm"
    fake_bin.mkdir()
    calls = tmp_path / "calls.txt"
    for command in ("sbatch", "squeue", "sacct", "sinfo", "scontrol", "scancel", "sacctmgr", "sshare"):
        stub = fake_bin / command
        stub.write_text(f'#!/bin/sh\necho "{command} $*" >> "{calls}"\nexit 1\n')
        stub.chmod(0o755)
    env_path = f"{fake_bin}{os.pathsep}{os.environ['PATH']}"
    result = subprocess.run(
        [
            sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path),
            *configs, "--workflow-profile", str(PROFILES / "slurm"), "--executor", "slurm",
            "--slurm-init-seconds-before-status-checks", "1", target,  # else it idles 40 s before exiting
        ],
        capture_output=True, text=True, cwd=tmp_path,
        env=dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{env_path}"),
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "localrule statistics_table:" in output
    assert (tmp_path / target).is_file()
    assert "sbatch" not in (calls.read_text() if calls.exists() else "")


def test_untrained_references_ask_for_no_gpu_and_never_start_torchrun(tmp_path):
    """`none` saves its encoder in rule initial_encoder, which no set-resources entry names: the
    CPU partition, no GPU request, a one-process command, even for an encoder of 2 GPUs."""
    overlay = tmp_path / "two_gpus.yaml"
    overlay.write_text(yaml.safe_dump({"encoders": {"resnet8": {"resources": {"gpu": 2}}}}))
    result = snakemake(
        tmp_path, "-n", "--cores", DRY_RUN_CORES, "--configfile", str(REPO / "config.yaml"), str(overlay),
        "--workflow-profile", str(PROFILES / "slurm"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = parse_dry_run(result.stdout + result.stderr)
    untrained = [job for job in jobs if job.rule == "initial_encoder"]
    assert {job.wildcards["loss"] for job in untrained} == {"none"} and len(untrained) == 6
    for job in untrained:
        assert job.resources["gpu"] == "0" and "cpus_per_gpu" not in job.resources
        assert job.resources["slurm_partition"] == SITE_PLACEHOLDERS["cpu"]
        assert job.shell.startswith("python -m mscl launch --gpus 0 -- python -m mscl pretrain") and "torch.distributed" not in job.shell
    trained = find(jobs, "pretrain", encoder="resnet8", loss="any")
    assert trained.resources["gpu"] == "2" and "--gpus 2 --torchrun" in trained.shell
