"""The Snakemake workflow, driven as a subprocess the way users run it."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATASETS = [
    "coco", "voc", "nuswide", "aapd",
    "mimic3_full", "mimic3_50", "mimic4_icd9_full", "mimic4_icd9_50", "mimic4_icd10_full", "mimic4_icd10_50",
]


def snakemake(workdir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run the repository's Snakefile with `workdir` as working directory (outputs land there)."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    command = [
        sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir),
        "--configfile", str(REPO / "config.yaml"), "--workflow-profile", "none", "--cores", "2", *args,
    ]
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake failed ({result.returncode}):\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return result


def job_counts(dry_run_output: str) -> dict[str, int]:
    """Parse the 'Job stats' table of a dry run into {rule: count}."""
    lines = dry_run_output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Job stats"))
    counts = {}
    for line in lines[start + 3 :]:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        counts[parts[0]] = int(parts[1])
    return counts


def expected_job_counts(runs: int, demo: bool) -> dict[str, int]:
    """Jobs per rule of a full dry run: `runs` pretrain/probe pairs, plus the demo generators
    and tiny models when the config runs on the embedded default."""
    counts = {"make_demo": 6, "tiny_models": 1} if demo else {}
    counts.update(
        {
            "mimic_split_lists": 3, "prepare_coco": 1, "prepare_voc": 1, "prepare_nuswide": 1, "prepare_aapd": 1,
            "prepare_mimic": 3, "pretrain": runs, "probe": runs, "statistics_table": 1, "collect_runs": 1,
            "paper_table": 7, "cost_table": 1, "paper_figure": 8, "all": 1,
        }
    )
    counts["total"] = sum(counts.values())
    return counts


def test_dry_run_of_the_default_config_lists_every_rule(tmp_path):
    result = snakemake(tmp_path, "-n")
    counts = job_counts(result.stdout + result.stderr)
    # Grid of config.yaml: image 3 datasets x 7 losses + coco sim/dissim + coco batch sizes
    # 32/128/256 x 4 losses + aapd 2 encoders x 4 losses + aapd sim/dissim + MIMIC 6 settings
    # x PLM-ICD x 4 losses + MIMIC-III-Full x 2 more encoders x 4 losses.
    runs = 21 + 2 + 12 + 8 + 2 + 24 + 8
    assert counts == expected_job_counts(runs, demo=True)


def test_lint_passes(tmp_path):
    result = snakemake(tmp_path, "--lint", check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    "override, key",
    [
        ("seed=-1", "seed"),
        ("datasets=[imagenet]", "imagenet"),
        ("sources={'voc': {'difficult': 'sometimes'}}", "['voc']['properties']['difficult']"),
    ],
)
def test_bad_config_fails_at_parse_time_naming_the_key(tmp_path, override, key):
    result = snakemake(tmp_path, "-n", "--config", override, check=False)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert key in output and "Error validating config" in output
    assert not (tmp_path / "data").exists() and not (tmp_path / "logs").exists()


@pytest.mark.slow
def test_default_data_stage_end_to_end(tmp_path):
    """Demo raw files -> manifests -> statistics table, then nothing left to do."""
    target = "results/tables/statistics.csv"
    snakemake(tmp_path, target)
    with open(tmp_path / "results" / "tables" / "statistics.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(DATASETS)
    for dataset, row in zip(DATASETS, rows):
        stats = json.loads((tmp_path / "data" / "processed" / dataset / "stats.json").read_text())
        counts = [int(row[column]) for column in ("Train", "Val", "Test")]
        assert counts == [stats["counts"][split] for split in ("train", "val", "test")]
        assert min(counts) > 0
    tex = (tmp_path / "results" / "tables" / "statistics.tex").read_text()
    assert "\\toprule" in tex and "MIMIC-IV-ICD10-50" in tex
    # No note text (PHI) in any log: no 30-character window of any prepared MIMIC note.
    import pandas as pd

    notes = pd.read_parquet(tmp_path / "data" / "processed" / "mimic3_full" / "train.parquet")["text"]
    windows = {text[i : i + 30] for text in notes for i in range(0, max(1, len(text) - 30), 97)}
    logs = [path.read_text() for path in (tmp_path / "logs").rglob("*.log")]
    assert len(logs) >= 14 and windows
    assert not any(window in log for window in windows for log in logs)
    again = snakemake(tmp_path, "-n", target)
    assert "Nothing to be done" in again.stdout + again.stderr


def test_experiment_naming_an_unprepared_dataset_fails_at_parse_time(tmp_path):
    result = snakemake(tmp_path, "-n", "--config", "datasets=[coco]", check=False)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "experiments.image.datasets names 'voc'" in output and "add it there" in output


def test_paper_configuration_dry_runs_the_full_grid(tmp_path):
    """config/paper.yaml without any data: the DAG and its job counts per rule."""
    result = snakemake(tmp_path, "-n", "--configfile", str(REPO / "config" / "paper.yaml"))
    counts = job_counts(result.stdout + result.stderr)
    runs = 21 + 2 + 12 + 8 + 2 + 72  # the demo grid with every encoder on every MIMIC setting
    assert counts == expected_job_counts(runs, demo=False)


@pytest.mark.slow
def test_one_run_trains_and_probes_through_snakemake(tmp_path):
    """demo data -> manifest -> tiny models -> pretrain -> probe, with log and benchmark files."""
    run = "aapd/roberta-tiny/simdissim/bs32/seed0"
    snakemake(tmp_path, f"results/runs/{run}/probe/metrics.json")
    metrics = json.loads((tmp_path / "results" / "runs" / run / "probe" / "metrics.json").read_text())
    assert 0.0 <= metrics["test"]["micro_f1"] <= 1.0 and metrics["spec"]["loss"] == "simdissim"
    for stage in ("pretrain", "probe"):
        assert (tmp_path / "logs" / stage / f"{run}.log").exists()
        header = (tmp_path / "benchmarks" / stage / f"{run}.tsv").read_text().splitlines()[0]
        assert header.split("\t")[:3] == ["s", "h:m:s", "max_rss"]


@pytest.mark.slow
def test_mini_grid_builds_every_table_figure_and_the_report(tmp_path):
    """The whole DAG on one image dataset and two losses: every table and figure is built
    (absent cells marked missing, not dropped), and `snakemake --report` succeeds."""
    import yaml

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["datasets"] = ["coco"]
    config["experiments"] = {
        "mini": {"datasets": ["coco"], "encoders": ["resnet18-small"], "losses": ["any", "simdissim"], "batch_sizes": [64]}
    }
    config["training"] = {"pretrain": {"epochs": 1}, "probe": {"epochs": 5}}
    config_file = tmp_path / "mini.yaml"
    config_file.write_text(yaml.safe_dump(config))
    snakemake(tmp_path, "--configfile", str(config_file))
    tables = ["image", "aapd", "mimic_full", "mimic_50", "sota", "ablation", "paper_vs_run", "cost", "statistics"]
    figures = ["improvement", "std", "text_encoders", "mimic_dotplot", "mimic_heatstrip", "frequency_buckets", "batch_size", "relations"]
    for name in tables:
        for ext in ("tex", "csv", "md"):
            assert (tmp_path / "results" / "tables" / f"{name}.{ext}").stat().st_size > 0
    for name in figures:
        assert (tmp_path / "results" / "figures" / f"{name}.png").stat().st_size > 1000
    image_md = (tmp_path / "results" / "tables" / "image.md").read_text()
    assert "missing" in image_md  # PASCAL, NUS-WIDE and five methods were not run
    image_csv = (tmp_path / "results" / "tables" / "image.csv").read_text()
    assert image_csv.count("missing") > 0 and "ok" in image_csv
    report = tmp_path / "report.html"
    snakemake(tmp_path, "--configfile", str(config_file), "--report", str(report))
    assert report.stat().st_size > 10_000
