"""The Snakemake workflow, driven as a subprocess the way users run it."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import TINY_ENCODERS, config_with_tiny_encoders
from test_curves import read_curves

from mscl import layout

REPO = Path(__file__).resolve().parents[1]
DATASETS = [
    "coco", "voc", "nuswide", "aapd",
    "mimic3_full", "mimic3_50", "mimic4_icd9_full", "mimic4_icd9_50", "mimic4_icd10_full", "mimic4_icd10_50",
]
DEFAULT_DATASETS = ["coco", "voc", "nuswide", "aapd", "mimic3_full", "mimic3_50"]  # config.yaml's


def snakemake_command(workdir: Path, *args: str, profile: str = "none") -> list[str]:
    """The command line that runs the repository's Snakefile with `workdir` as working directory
    (outputs land there) and the embedded default config unless `args` name a --configfile
    (targets go before it: --configfile takes every word that follows)."""
    return [
        sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir),
        "--workflow-profile", profile, "--cores", "2", *args,
    ]


def job_env() -> dict[str, str]:
    """This interpreter's folder first on PATH: the rules run `python -m mscl`."""
    return dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


def snakemake(workdir: Path, *args: str, check: bool = True, profile: str = "none") -> subprocess.CompletedProcess:
    """Run Snakemake to the end (see `snakemake_command`); raise with its output tail if it fails."""
    result = subprocess.run(snakemake_command(workdir, *args, profile=profile), capture_output=True, text=True, env=job_env())
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


def expected_job_counts(
    runs: int, datasets_with_runs: int, demo_kinds: int = 0, mimic_versions: int = 3, prefix_caches: int = 0, untrained: int = 0
) -> dict[str, int]:
    """Jobs per rule of a full dry run: `runs` pretrain/probe pairs (of which `untrained` save
    their initial encoder instead of pretraining: rule initial_encoder), one label-prior
    (chance) job per dataset with runs, `mimic_versions` MIMIC sources prepared,
    `prefix_caches` frozen prefixes cached, plus `demo_kinds` demo generators when the config
    runs on the embedded default."""
    counts = {"make_demo": demo_kinds} if demo_kinds else {}
    counts.update(
        {
            "mimic_split_lists": mimic_versions, "prepare_coco": 1, "prepare_voc": 1, "prepare_nuswide": 1, "prepare_aapd": 1,
            "prepare_mimic": mimic_versions, "pretrain": runs - untrained, "probe": runs, "chance": datasets_with_runs,
            "statistics_table": 1, "collect_runs": 1,
            "paper_table": 7, "cost_table": 1, "paper_figure": 8, "benchmark_table": 1, "loss_curves": 1, "all": 1,
        }
    )
    if prefix_caches:
        counts["cache_prefix"] = prefix_caches
    if untrained:
        counts["initial_encoder"] = untrained
    counts["total"] = sum(counts.values())
    return counts


def test_dry_run_of_the_default_config_lists_every_rule(tmp_path):
    result = snakemake(tmp_path, "-n", "-p")
    counts = job_counts(result.stdout + result.stderr)
    # Grid of config.yaml: image 3 datasets x (4 losses + none) + COCO seeds 1, 2 x 4 losses +
    # COCO jaccard/proto/msc/sim/dissim + COCO batch sizes 32/128 x 2 losses; AAPD RoBERTa
    # stand-in 4 losses + none, seeds 1, 2 x 4 losses, Llama stand-in 4 losses; MIMIC-III full
    # and 50 x PLM-ICD x (4 losses + none). Every one of the 6 datasets has runs (one chance job
    # each); MIMIC-III is the only MIMIC source; no tiny models (the text stand-ins are the
    # packaged MiniLM); one prefix cache per text dataset and encoder (AAPD x 2, MIMIC x 2).
    runs = 15 + 8 + 5 + 4 + 5 + 8 + 4 + 10
    # `none` on the 3 image sets, AAPD and the 2 MIMIC-III settings: an initial encoder each.
    expected = expected_job_counts(runs, len(DEFAULT_DATASETS), demo_kinds=5, mimic_versions=1, prefix_caches=4, untrained=6)
    assert counts == expected
    assert "local_models" not in counts
    # The workflow's table, figure and demo lists are the ones the commands accept (mscl.layout).
    output = result.stdout + result.stderr
    assert set(re.findall(r"results/tables/(\w+)\.tex", output)) == set(layout.TABLE_NAMES) | {"statistics"}
    assert set(re.findall(r"results/figures/(\w+)\.pdf", output)) == set(layout.FIGURE_NAMES) | {"benchmark", layout.LOSS_CURVES_FIGURE}
    assert set(re.findall(r"python -m mscl make-demo (\w+)", output)) == set(layout.DEMO_KINDS) - {"mimic4"}


def test_both_entry_points_plan_the_same_jobs(tmp_path):
    """The root Snakefile and workflow/Snakefile (the workflow catalog's entry point) are one
    workflow: the same jobs, with the same commands, from either."""

    def plan(snakefile: Path) -> list[str]:
        result = subprocess.run(
            [sys.executable, "-m", "snakemake", "-s", str(snakefile), "-n", "-p", "--directory", str(tmp_path), "--workflow-profile", "none"],
            capture_output=True, text=True, env=job_env(),
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
        lines = [line for line in result.stdout.splitlines() if line.startswith(("rule ", "localrule ", "    output:", "    python ", "OMP_"))]
        return sorted(lines)

    root = plan(REPO / "Snakefile")
    assert len(root) > 300 and root == plan(REPO / "workflow" / "Snakefile")


def test_plm_icd_with_trainable_layers_gets_a_prefix_cache_per_dataset(tmp_path):
    """`trainable_layers` on a plm_icd spec (k = 0: only the label attention trains) adds one
    cache_prefix job per dataset, which its pretrain and probe jobs read; the other encoders
    (no trainable_layers) get none."""
    config = config_with_tiny_encoders()
    config["encoders"]["plmicd-tiny"]["spec"]["trainable_layers"] = 0
    losses = ["all", "any", "mulsupcon", "simdissim"]
    config["experiments"] = {
        "mimic": {"datasets": ["mimic3_full", "mimic3_50"], "encoders": ["plmicd-tiny"], "losses": losses, "batch_sizes": [16]},
        "mimic_text_encoders": {"datasets": ["mimic3_full"], "encoders": ["roberta-tiny", "llama-tiny"], "losses": losses, "batch_sizes": [16]},
    }
    config_file = tmp_path / "plm_prefix.yaml"
    config_file.write_text(yaml.safe_dump(config))
    result = snakemake(tmp_path, "-n", "-p", "--configfile", str(config_file))
    output = result.stdout + result.stderr
    counts = job_counts(output)
    assert counts["cache_prefix"] == 2 and counts["pretrain"] == counts["probe"] == 2 * 4 + 2 * 4
    for dataset in ("mimic3_full", "mimic3_50"):
        cache = f"data/processed/{dataset}/prefix/plmicd-tiny.pt"
        assert f"--out {cache}" in output
        assert output.count(f"--prefix-cache {cache}") == 4 * 2  # every loss's pretrain and probe
    assert "prefix/roberta-tiny.pt" not in output and "prefix/llama-tiny.pt" not in output


def test_lint_passes(tmp_path):
    result = snakemake(tmp_path, "--lint", check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    "override, problem",
    [
        ("seed=-1", "invalid config key `seed` in"),
        ("sources={'voc': {'difficult': 'sometimes'}}", "invalid config key `sources.voc.difficult` in"),
        # Names come from the package's lists (mscl.layout, mscl.registry), checked after the schema.
        ("datasets=[imagenet]", "`datasets`: names dataset 'imagenet', which is neither a built-in dataset setting"),
        ("report={'display': {'cocoo': 'COCO-demo'}}", "invalid config key `report.display.cocoo` in"),
    ],
)
def test_bad_config_fails_at_parse_time_naming_the_key(tmp_path, override, problem):
    """The key and the config file, in a few lines (not the schema's dump; more cases in
    test_malformed_inputs)."""
    result = snakemake(tmp_path, "-n", "--config", override, check=False)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert problem in output and str(REPO / "config.yaml") in output and "Fix: correct" in output
    assert len(output.splitlines()) < 10
    assert not (tmp_path / "data").exists() and not (tmp_path / "results").exists()


@pytest.mark.slow
def test_default_data_stage_end_to_end(tmp_path):
    """Demo raw files -> manifests -> statistics table, then nothing left to do; every dataset
    setting, MIMIC-IV's too (the embedded default prepares only MIMIC-III)."""
    target = "results/tables/statistics.csv"
    every_dataset = tmp_path / "every_dataset.yaml"
    every_dataset.write_text(yaml.safe_dump({"datasets": DATASETS}))
    configs = ["--configfile", str(REPO / "config.yaml"), str(every_dataset)]
    snakemake(tmp_path, target, *configs)
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
    logs = [path.read_text() for path in (tmp_path / "results" / "logs").rglob("*.log")]
    assert len(logs) >= 14 and windows
    assert not any(window in log for window in windows for log in logs)
    again = snakemake(tmp_path, "-n", target, *configs)
    assert "Nothing to be done" in again.stdout + again.stderr


def test_experiment_naming_an_unprepared_dataset_fails_at_parse_time(tmp_path):
    result = snakemake(tmp_path, "-n", "--config", "datasets=[coco]", check=False)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "invalid config key `datasets` in" in output and "leaves out datasets 'voc', 'nuswide', 'aapd'" in output
    assert "(image: 'voc', 'nuswide'; aapd: 'aapd';" in output and "image_seeds" not in output  # coco is prepared
    assert "Fix: add them to `datasets`" in output


def test_experiment_naming_an_unknown_dataset_offers_a_valid_fix(tmp_path):
    """A typo must not be told to 'add it to datasets' (the schema would reject that)."""
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["experiments"]["image"]["datasets"] = ["cocoo"]
    config_file = tmp_path / "typo.yaml"
    config_file.write_text(yaml.safe_dump(config))
    result = snakemake(tmp_path, "-n", "--configfile", str(config_file), check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "`experiments.image.datasets` in" in output and "names dataset 'cocoo', which is neither a built-in dataset setting" in output
    assert "Allowed: coco, voc," in output and "add them to `datasets`" not in output
    assert str(config_file) in output


def test_paper_dry_run_from_the_repository_root_is_exactly_the_paper_grid(tmp_path):
    """As the README says: from the repository root, default workflow profile, no data (the
    working directory is an empty folder, so a checkout that has run the demo, whose manifests
    would skip the source checks, gives the same answer). Nothing of the embedded default (its
    tiny models, its demo generators) leaks into the paper's grid."""
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--configfile", "config/paper.yaml", "--directory", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, env=job_env(),
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    runs = 21 + 2 + 12 + 8 + 2 + 72  # paper grid: every text encoder on every MIMIC setting
    assert job_counts(output) == expected_job_counts(runs, datasets_with_runs=len(DATASETS))
    assert "tiny" not in output and "make_demo" not in output
    # The placeholder roots are reported, naming the config key, while the dry run goes on.
    assert "sources.coco.root: '/path/to/coco2014' does not exist" in output
    assert "Fix: set `sources.coco.root` in" in output and "config/paper.yaml" in output


@pytest.mark.parametrize("inspection", ["--dag", "--rulegraph", "--summary"])
def test_the_paper_grid_can_be_inspected_before_its_data_is_in_place(tmp_path, inspection):
    """As on a login node before the data is copied: every inspection works on config/paper.yaml
    whose roots are placeholders, with one warning per missing source."""
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", inspection, "--configfile", "config/paper.yaml", "--directory", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, env=job_env(),
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert output.count("WARNING (a run that executes jobs stops here): sources.") == 6  # coco voc nuswide aapd mimic3 mimic4
    if inspection in ("--dag", "--rulegraph"):
        assert result.stdout.lstrip().startswith("digraph") and "pretrain" in result.stdout
    if inspection == "--summary":
        assert "results/tables/image.tex" in result.stdout
    assert not (tmp_path / "data").exists() and not (tmp_path / "results").exists()


def test_a_missing_source_root_stops_the_run_before_any_job(tmp_path):
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["sources"]["voc"]["root"] = str(tmp_path / "no_such_voc")
    config["sources"]["mimic3"]["splits"] = str(tmp_path / "no_such_splits")
    config_file = tmp_path / "bad_root.yaml"
    config_file.write_text(yaml.safe_dump(config))
    result = snakemake(tmp_path, "results/tables/statistics.csv", "--configfile", str(config_file), check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert f"sources.voc.root: '{tmp_path / 'no_such_voc'}' does not exist" in output
    assert "Fix: set `sources.voc.root` in" in output and "Annotations, ImageSets/Main/trainval.txt" in output
    assert not (tmp_path / "data").exists() and not (tmp_path / "results").exists()  # no job ran
    # A local split folder is checked the same way (the VOC root fixed, MIMIC-III's splits not).
    voc = tmp_path / "voc"
    for part in ("Annotations", "ImageSets/Main", "JPEGImages"):
        (voc / part).mkdir(parents=True)
    for name in ("trainval.txt", "test.txt"):
        (voc / "ImageSets" / "Main" / name).write_text("")
    config["sources"]["voc"]["root"] = str(voc)
    config_file.write_text(yaml.safe_dump(config))
    result = snakemake(tmp_path, "results/tables/statistics.csv", "--configfile", str(config_file), check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "sources.voc.root" not in output
    assert f"sources.mimic3.splits: '{tmp_path / 'no_such_splits'}' is not an existing folder" in output
    assert not (tmp_path / "data").exists()


@pytest.mark.slow
def test_one_run_trains_and_probes_through_snakemake(tmp_path):
    """demo data -> manifest -> tiny models -> pretrain -> probe, with log and benchmark files."""
    run = "aapd/roberta-tiny/simdissim/bs32/seed0"
    snakemake(tmp_path, f"results/runs/{run}/probe/metrics.json", "--configfile", str(REPO / "config.yaml"), str(TINY_ENCODERS))
    metrics = json.loads((tmp_path / "results" / "runs" / run / "probe" / "metrics.json").read_text())
    assert 0.0 <= metrics["test"]["micro_f1"] <= 1.0 and metrics["spec"]["loss"] == "simdissim"
    for stage in ("pretrain", "probe"):
        assert (tmp_path / "results" / "logs" / stage / f"{run}.log").exists()
        header = (tmp_path / "results" / "benchmarks" / stage / f"{run}.tsv").read_text().splitlines()[0]
        assert header.split("\t")[:3] == ["s", "h:m:s", "max_rss"]


@pytest.mark.slow
def test_mini_grid_builds_every_table_figure_and_the_report(tmp_path):
    """The whole DAG on one image dataset and two losses: every table and figure is built
    (absent cells marked missing, not dropped), and `snakemake --report` succeeds."""
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["datasets"] = ["coco"]
    config["experiments"] = {
        "mini": {"datasets": ["coco"], "encoders": ["resnet8"], "losses": ["any", "simdissim"], "batch_sizes": [64]}
    }
    config["training"] = {"pretrain": {"epochs": 1}, "probe": {"epochs": 5}}
    config["encoders"]["resnet8"]["pretrain"]["epochs"] = 1  # the encoder's own setting wins
    config_file = tmp_path / "mini.yaml"
    config_file.write_text(yaml.safe_dump(config))
    snakemake(tmp_path, "--configfile", str(config_file))
    # Every training job left its TensorBoard curves, which `tensorboard --logdir results/runs` reads.
    for loss in ("any", "simdissim"):
        for stage, tag in (("pretrain", "epoch/loss"), ("probe", "val/map")):
            assert tag in read_curves(tmp_path / "results" / "runs" / "coco" / "resnet8" / loss / "bs64" / "seed0" / stage), (loss, stage)
    tables = ["image", "aapd", "mimic_full", "mimic_50", "sota", "ablation", "paper_vs_run", "cost", "statistics"]
    figures = ["improvement", "std", "text_encoders", "mimic_dotplot", "mimic_heatstrip", "frequency_buckets", "batch_size", "relations", "loss_curves"]
    for name in tables:
        for ext in ("tex", "csv", "md", "html"):
            assert (tmp_path / "results" / "tables" / f"{name}.{ext}").stat().st_size > 0
    for name in figures:
        assert (tmp_path / "results" / "figures" / f"{name}.png").stat().st_size > 1000
        assert (tmp_path / "results" / "figures" / f"{name}.html").read_text().startswith("<!DOCTYPE html>")
    image_md = (tmp_path / "results" / "tables" / "image.md").read_text()
    # Named as config.yaml names them; PASCAL, NUS-WIDE and five methods did not run: left out, said so.
    assert "Ran: ResNet-8 (for ResNet-50) on COCO-demo (30 glyph classes)." in image_md
    assert "the paper's PASCAL, the paper's NUS-WIDE" in image_md and "rows ALL, MulSupCon, Jaccard, Class proto, MSC" in image_md
    image_csv = (tmp_path / "results" / "tables" / "image.csv").read_text()
    assert image_csv.count("not_run") > 0 and "ok" in image_csv
    assert "| COCO-demo (30 glyph classes) |" in (tmp_path / "results" / "tables" / "statistics.md").read_text()
    assert "No cell is compared" in (tmp_path / "results" / "tables" / "paper_vs_run.md").read_text()
    report = tmp_path / "report.html"
    snakemake(tmp_path, "--configfile", str(config_file), "--report", str(report))
    text = report.read_text()
    # Every table and figure is in the report as its HTML page, with its own description.
    for name in tables:
        assert f'"results/tables/{name}.html"' in text, name
    for name in figures:
        assert f'"results/figures/{name}.html"' in text, name
    assert "The paper&#x27;s Table results-image, regenerated from this run" in text or "The paper's Table results-image, regenerated from this run" in text
    # The completeness check, asked for by name, fails on this partial grid and says where.
    result = snakemake(tmp_path, "results/complete.txt", "--configfile", str(config_file), check=False)
    assert result.returncode != 0 and not (tmp_path / "results" / "complete.txt").exists()
    check_log = (tmp_path / "results" / "logs" / "report" / "check_complete.log").read_text()
    assert any("image.csv: no result for" in line and "/voc/" in line for line in check_log.splitlines())  # PASCAL was not run
    assert "figure text_encoders: no result for" in check_log and "problems in 7 tables" in check_log
    # What made the runs (mscl.provenance): each job recorded the mscl files it ran, a
    # pretraining no report code; today's code made every run, one version of each file.
    run = tmp_path / "results/runs/coco/resnet8/any/bs64/seed0"
    ran = json.loads((run / "pretrain" / "versions.json").read_text())["code"]["files"]
    assert {"mscl/losses.py", "mscl/train/pretrain.py"} <= set(ran) and not any(name.startswith("mscl/report/") for name in ran)
    prepared = json.loads((tmp_path / "data/processed/coco/versions.json").read_text())["code"]["files"]
    assert {"mscl/data/coco.py", "mscl/data/manifest.py"} <= set(prepared) and "mscl/train/pretrain.py" not in prepared
    assert "more than one version of the code" not in image_md
    stale = [sys.executable, "-m", "mscl", "stale", "--configfile", str(config_file)]
    done = subprocess.run(stale, cwd=tmp_path, capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "0 of 3 runs stale\n"), done.stderr  # any, simdissim, the label prior
    # As a later edit of the losses leaves it: that run is stale, and the printed command plans
    # exactly its jobs and what reads them.
    record = json.loads((run / "pretrain" / "versions.json").read_text())
    record["code"]["files"]["mscl/losses.py"] = "0" * 64
    (run / "pretrain" / "versions.json").write_text(json.dumps(record))
    done = subprocess.run(stale, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 1 and done.stdout.startswith("results/runs/coco/resnet8/any/bs64/seed0: pretrain: mscl/losses.py changed;")
    command = done.stdout.splitlines()[-1].split()
    assert command[:2] == ["snakemake", "--configfile"] and command[-2:] == ["--forcerun", "results/runs/coco/resnet8/any/bs64/seed0/pretrain/encoder.pt"]
    planned = job_counts(snakemake(tmp_path, "-n", *command[1:]).stdout)
    assert planned["pretrain"] == 1 and planned["probe"] == 1 and "prepare_coco" not in planned


TINY_RUN = "aapd/roberta-tiny/simdissim/bs8/seed0"


def tiny_text_config(path: Path, epochs: int) -> Path:
    """One AAPD-demo run of a tiny random RoBERTa: one step per epoch, so `epochs` sets how long
    the pretrain job takes (a checkpoint every epoch)."""
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["datasets"] = ["aapd"]
    config["encoders"] = {
        "roberta-tiny": {
            "role": "roberta",
            "spec": {"kind": "hf", "path": "{tiny}/roberta", "max_length": 32, "pooling": "mean"},
            "resources": {"threads": 1, "mem_mb": 2000, "runtime": 20},
        }
    }
    config["experiments"] = {
        "one": {"datasets": ["aapd"], "encoders": ["roberta-tiny"], "losses": ["simdissim"], "batch_sizes": [8]}
    }
    config["training"] = {"pretrain": {"epochs": epochs, "max_steps_per_epoch": 1}, "probe": {"epochs": 2}}
    config["report"]["batch_size"]["aapd"] = 8  # the AAPD tables show the run's batch size
    path.write_text(yaml.safe_dump(config))
    return path


def wait_for(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.2)


def training_processes(run_dir: Path) -> list:
    """Live processes whose command line names this run's folder (the pretrain job)."""
    import psutil

    found = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            if any(str(run_dir) in part for part in process.info["cmdline"] or []):
                found.append(process)
        except psutil.Error:
            pass
    return found


def progress(workdir: Path, config: Path) -> str:
    """`python -m mscl progress` run where Snakemake runs, with its config file."""
    result = subprocess.run([sys.executable, "-m", "mscl", "progress", "--configfile", str(config)], cwd=workdir, capture_output=True, text=True, env=job_env())
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def progress_row(text: str, stage: str) -> list[int]:
    """The counts (done, running, interrupted, failed, to go, of) of the one run's `stage` in a progress table."""
    return [int(cell) for cell in next(line for line in text.splitlines() if line.split()[:3] == ["aapd", "roberta-tiny", stage]).split()[3:]]


@pytest.mark.slow
def test_sigint_to_snakemake_stops_training_and_the_rerun_resumes_then_a_changed_spec_restarts(tmp_path):
    """`kill -INT <snakemake>` alone (not the process group): the running pretrain job stops
    within seconds, keeps its last checkpoint, and the next run (default workflow profile)
    resumes from it; then an edited training setting makes the job start over by itself.
    `python -m mscl progress` watches: the job running, then interrupted, then done."""
    workdir = tmp_path / "work"
    config = tiny_text_config(tmp_path / "tiny.yaml", epochs=400)
    run_dir = workdir / "results" / "runs" / TINY_RUN / "pretrain"
    target = f"results/runs/{TINY_RUN}/pretrain/encoder.pt"
    # The data and tiny models first, so that the interrupt below lands in training.
    snakemake(workdir, "data/processed/aapd/stats.json", "models/tiny", "--configfile", str(config))

    process = subprocess.Popen(
        snakemake_command(workdir, target, "--configfile", str(config), profile=str(REPO / "profiles/default")),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env={**job_env(), "MSCL_CHECKPOINT_INTERVAL_S": "0"},  # a checkpoint every epoch, so one exists
    )
    try:
        wait_for(lambda: (run_dir / "train_log.csv").exists() and len((run_dir / "train_log.csv").read_text().splitlines()) > 3,
                 180, "the pretrain job to checkpoint a few epochs")
        watched = progress(workdir, config)
        assert progress_row(watched, "pretrain") == [0, 1, 0, 0, 0, 1] and progress_row(watched, "probe") == [0, 0, 0, 0, 1, 1]
        assert re.search(rf"  {TINY_RUN} pretrain: epoch \d+ of 400, \d+ s so far \(log: results/logs/pretrain/{TINY_RUN}.log\)", watched), watched
        assert process.poll() is None  # asking never stopped or locked the run
        os.kill(process.pid, signal.SIGINT)
        interrupted = time.monotonic()
        output, _ = process.communicate(timeout=60)
        stopped_after = time.monotonic() - interrupted
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode != 0, output[-3000:]
    assert stopped_after < 30, f"snakemake took {stopped_after:.0f} s to stop"
    wait_for(lambda: not training_processes(run_dir), 15, "the training process to be gone")
    # The job ran in a worker of the run's job server (the default): that process is gone too.
    interrupted_log = (workdir / "results" / "logs" / "pretrain" / f"{TINY_RUN}.log").read_text()
    worker = worker_pid(interrupted_log)
    assert worker is not None, interrupted_log[-2000:]
    wait_for(lambda: not psutil_exists(worker), 15, f"the job-server worker {worker} to be gone")
    epochs_done = torch_load(run_dir / "checkpoint.pt")["epoch"]
    assert 1 <= epochs_done < 400 and not (run_dir / "encoder.pt").exists()
    assert progress_row(progress(workdir, config), "pretrain") == [0, 0, 1, 0, 0, 1]  # marked incomplete, no Snakemake runs

    # Rerun with the default profile (rerun-incomplete): resumes after the last checkpoint.
    snakemake(workdir, target, "--configfile", str(config), profile=str(REPO / "profiles/default"))
    log = (workdir / "results" / "logs" / "pretrain" / f"{TINY_RUN}.log").read_text()
    assert f"resumed from checkpoint.pt after epoch {epochs_done}" in log
    assert f"pretrain epoch {epochs_done + 1}/400:" in log and f"pretrain epoch {epochs_done}/400:" not in log
    epochs = [int(line.split(",")[0]) for line in (run_dir / "train_log.csv").read_text().splitlines()[1:]]
    assert epochs == list(range(1, 401))
    # Its TensorBoard curve too: the resumed segment hid whatever the stopped one logged after its checkpoint.
    assert [step for step, _ in read_curves(run_dir)["epoch/loss"]] == list(range(1, 401))
    assert (workdir / "results" / "benchmarks" / "pretrain" / f"{TINY_RUN}.tsv").exists()
    assert not (run_dir / "checkpoint.pt").exists()  # a finished run leaves no checkpoint
    finished = progress(workdir, config)
    assert progress_row(finished, "pretrain") == [1, 0, 0, 0, 0, 1]
    assert re.search(r"Spent: 0 GPU-hours, [0-9.e-]+ CPU-hours by 1 finished training job\n", finished), finished

    # An edited training setting: Snakemake reruns the job (params changed), which trains anew.
    # (A stale checkpoint of another spec is discarded: tests/test_train.py.)
    changed = tiny_text_config(tmp_path / "tiny.yaml", epochs=3)
    snakemake(workdir, target, "--configfile", str(changed))
    log = (workdir / "results" / "logs" / "pretrain" / f"{TINY_RUN}.log").read_text()
    assert "resumed" not in log
    assert [line.split(":")[0] for line in log.splitlines() if line.startswith("pretrain epoch")] == [
        "pretrain epoch 1/3", "pretrain epoch 2/3", "pretrain epoch 3/3"
    ]
    assert not (run_dir / "checkpoint.pt").exists() and (run_dir / "encoder.pt").exists()


def worker_pid(log_text: str) -> int | None:
    """The job-server worker that ran a job, from the line it starts the job's log with."""
    for line in log_text.splitlines():
        if line.startswith("mscl job-server worker ") and line.endswith("runs this job"):
            return int(line.split()[3])
    return None


def psutil_exists(pid: int) -> bool:
    import psutil

    return psutil.pid_exists(pid)


def torch_load(path: Path) -> dict:
    import torch

    return torch.load(path, weights_only=True)


def test_a_plain_snakemake_from_the_repository_root_reads_the_default_profile():
    """Snakemake looks for a workflow profile only in ./profiles/default (and ./default) next to
    a root-level Snakefile: the profile's rerun triggers (no `code`) must really apply."""
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--configfile", "config/paper.yaml"],
        cwd=REPO, capture_output=True, text=True, env=job_env(),
    )  # fmt: skip
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert "Using workflow specific profile profiles/default" in result.stdout + result.stderr


def test_jobs_run_the_workflows_own_checkout_not_another_installed_mscl(tmp_path):
    """An environment whose mscl comes from elsewhere (here a decoy first on PYTHONPATH; in
    practice a virtualenv shared with another clone) must not run the jobs: they and the job
    server import this checkout's src/, so results name its commit."""
    decoy = tmp_path / "decoy" / "mscl"
    decoy.mkdir(parents=True)
    (decoy / "__init__.py").write_text("raise ImportError('the decoy mscl ran instead of the checkout')\n")
    (decoy / "__main__.py").write_text("import sys; sys.exit('the decoy mscl ran instead of the checkout')\n")
    workdir = tmp_path / "work"
    workdir.mkdir()
    env = dict(job_env(), PYTHONPATH=str(decoy.parent))
    command = snakemake_command(workdir, "data/raw/demo/aapd")
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (workdir / "data" / "raw" / "demo" / "aapd").is_dir()
    assert "decoy" not in (workdir / "results" / "logs" / "demo" / "aapd.log").read_text()
