"""config/paper_smoke.yaml: the paper's grid at smoke scale (README "Reproducing the paper").

The overlay may change data, sizes and the models that need a hub, nothing else: its keys are
checked against that list and its dry run's run list against config/paper.yaml's. A slice of
it (one dataset per family through every encoder of the paper) trains and probes for real.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_workflow import job_counts, job_env

REPO = Path(__file__).resolve().parents[1]
PAPER = REPO / "config" / "paper.yaml"
SMOKE = REPO / "config" / "paper_smoke.yaml"
# What the overlay may set, key by key: paths and data (sources), input and step sizes, and the
# encoder specs' model folders (with what a stand-in needs: bf16 auto).
ALLOWED_TOP_KEYS = {"paths", "sources", "encoders", "training"}
ALLOWED_SOURCE_KEYS = {"root", "splits", "samples"}
ALLOWED_SPEC_KEYS = {"path", "max_length", "bf16"}
ALLOWED_PRETRAIN_KEYS = {"epochs", "image_size", "max_steps_per_epoch"}
ALLOWED_TRAINING = {"pretrain": {"max_steps_per_epoch", "epochs"}, "probe": {"epochs"}}
# The CI slice: one dataset per family through every encoder the paper runs on it, Sim-Dissim.
SLICE_RUNS = [
    "coco/resnet50/simdissim/bs256/seed0",
    "aapd/roberta-base/simdissim/bs32/seed0",
    "aapd/llama-3.1-8b/simdissim/bs32/seed0",
    *(f"{dataset}/{encoder}/simdissim/bs8/seed0" for dataset in ("mimic3_full", "mimic4_icd10_50") for encoder in ("roberta-base", "llama-3.1-8b", "plm-icd")),
]


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def dry_run(workdir: Path, *config_files: Path) -> str:
    """`snakemake -n` of the whole DAG from the repository root, outputs under `workdir`."""
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--directory", str(workdir), "--configfile", *map(str, config_files)],
        cwd=REPO, capture_output=True, text=True, env=job_env(),
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    return output


def run_names(dry_run_output: str, rule: str, results: str) -> list[str]:
    """dataset/encoder/loss/bs<B>/seed<S> of every `rule` job of a dry run (its output path
    minus the results folder and the stage)."""
    pattern = re.compile(rf"^rule {rule}:\n(?:    .*\n)*?    output: {re.escape(results)}/runs/(\S+?)/(?:pretrain|probe)/", re.MULTILINE)
    return sorted(pattern.findall(dry_run_output))


def test_the_overlay_changes_only_data_sizes_and_model_stand_ins():
    paper, smoke = load(PAPER), load(SMOKE)
    assert set(smoke) <= ALLOWED_TOP_KEYS, f"the overlay sets {sorted(set(smoke) - ALLOWED_TOP_KEYS)}"
    for source, settings in smoke["sources"].items():
        assert source in paper["sources"] and set(settings) <= ALLOWED_SOURCE_KEYS
        assert settings["root"] == "demo" and settings.get("splits", "demo") == "demo"
    assert set(smoke["sources"]) == set(paper["sources"])  # every paper dataset on small data
    assert set(smoke["encoders"]) <= set(paper["encoders"])  # stand-ins under the paper's names
    for name, encoder in smoke["encoders"].items():
        assert set(encoder) <= {"spec", "pretrain"}, name
        assert set(encoder.get("spec", {})) <= ALLOWED_SPEC_KEYS, name
        assert set(encoder.get("pretrain", {})) <= ALLOWED_PRETRAIN_KEYS, name
        if "path" in encoder.get("spec", {}):
            assert encoder["spec"]["path"].startswith("{paper_stand_ins}/"), name
    for block, keys in smoke["training"].items():
        assert set(keys) <= ALLOWED_TRAINING[block], block
    # Every replaced value says what it replaces.
    for line in SMOKE.read_text().splitlines():
        if re.match(r"^\s+(max_length|epochs|image_size|max_steps_per_epoch|bf16|samples):", line):
            assert "replaces" in line, line


def test_the_smoke_dry_run_is_exactly_the_paper_grid(tmp_path):
    """Same 117 runs (pretrain and probe), same rules apart from generating the data and the
    stand-ins, same tables and figures."""
    paper = dry_run(tmp_path / "paper", PAPER)
    smoke = dry_run(tmp_path / "smoke", PAPER, SMOKE)
    smoke_results = load(SMOKE)["paths"]["results"]
    for rule in ("pretrain", "probe"):
        paper_runs = run_names(paper, rule, "results")
        assert len(paper_runs) == 117 and run_names(smoke, rule, smoke_results) == paper_runs
    paper_counts, smoke_counts = job_counts(paper), job_counts(smoke)
    added = {"make_demo": 6, "local_models": 1}
    assert {rule: smoke_counts[rule] for rule in added} == added
    assert {rule: n for rule, n in smoke_counts.items() if rule not in added and rule != "total"} == {
        rule: n for rule, n in paper_counts.items() if rule != "total"
    }
    assert "WARNING (a run that executes jobs stops here)" not in smoke  # every source resolves


@pytest.mark.slow
def test_a_slice_of_the_smoke_grid_trains_every_paper_encoder_on_every_family(tmp_path):
    """COCO x ResNet-50, AAPD x RoBERTa/Llama, MIMIC-III Full and MIMIC-IV ICD-10 top-50 x
    RoBERTa/Llama/PLM-ICD, through the real overlay: data generated, stand-ins written, every
    run pretrained and probed to finite test metrics."""
    results = tmp_path / load(SMOKE)["paths"]["results"]
    targets = [str(results.relative_to(tmp_path) / "runs" / run / "probe" / "metrics.json") for run in SLICE_RUNS]
    command = [
        sys.executable, "-m", "snakemake", "--directory", str(tmp_path), "--workflow-profile", "none", "--cores", "2",
        *targets, "--configfile", str(PAPER), str(SMOKE),
    ]  # fmt: skip
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=job_env())
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]
    for run in SLICE_RUNS:
        metrics = json.loads((results / "runs" / run / "probe" / "metrics.json").read_text())
        assert all(math.isfinite(metrics["test"][key]) for key in ("micro_f1", "macro_f1")), run
        assert "{paper_stand_ins}" not in json.dumps(metrics["spec"])  # expanded to the generated folder
        log = (results / "runs" / run / "pretrain" / "train_log.csv").read_text().splitlines()
        assert all(row.split(",")[1] == "1" for row in log[1:]), run  # one step per epoch
    stand_ins = tmp_path / load(SMOKE)["paths"]["models"] / "paper_stand_ins"
    roberta = json.loads((stand_ins / "roberta-base" / "config.json").read_text())
    assert (roberta["architectures"], roberta["num_hidden_layers"], roberta["hidden_size"]) == (["RobertaModel"], 12, 768)
    llama = json.loads((stand_ins / "llama-3.1-8b-design" / "config.json").read_text())
    assert (llama["architectures"], llama["dtype"], llama["num_key_value_heads"]) == (["LlamaForCausalLM"], "bfloat16", 1)
    plm = json.loads((results / "runs" / SLICE_RUNS[3].replace("roberta-base", "plm-icd") / "probe" / "metrics.json").read_text())
    assert plm["feature_dim"] == 768  # PLM-ICD's label vectors over the roberta-base stand-in
    llama_log = (results / "logs" / "pretrain" / f"{SLICE_RUNS[2]}.log").read_text()
    assert "llama_lora: bf16 auto -> " in llama_log
