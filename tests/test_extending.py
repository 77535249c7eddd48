"""The worked examples of docs/extending.md, run as a user would: a loss in a plugin file, a
dataset given by one CSV file and a torchvision encoder, added by config alone
(examples/extending/), through the real workflow at toy size, into results/tables/benchmark.csv
and the HTML report; then what an edit of the plugin reruns, and the refusals of names nobody
registered, before any job."""

from __future__ import annotations

import base64
import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_workflow import REPO, job_counts, snakemake

EXAMPLE = REPO / "examples" / "extending"
CONFIG = "examples/extending/config.yaml"


def git_status_of_src() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--", "src"], cwd=REPO, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def example_run(tmp_path_factory) -> Path:
    """The docs' steps in a fresh working folder: copy the example, make the CSV dataset, run
    snakemake with the example config, then build the report."""
    workdir = tmp_path_factory.mktemp("extending")
    shutil.copytree(EXAMPLE, workdir / "examples" / "extending")
    src_before = git_status_of_src()
    subprocess.run([sys.executable, "examples/extending/make_shapes.py", "--out", "data/raw/shapes"], cwd=workdir, check=True, capture_output=True)
    snakemake(workdir, "--configfile", CONFIG)
    snakemake(workdir, "--configfile", CONFIG, "--report", "report.html")
    assert git_status_of_src() == src_before  # nothing under src/ was touched
    return workdir


def benchmark_rows(workdir: Path) -> list[dict[str, str]]:
    with open(workdir / "results" / "tables" / "benchmark.csv", newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.slow
def test_the_three_extensions_reach_the_benchmark_table(example_run):
    rows = benchmark_rows(example_run)
    assert list(rows[0]) == ["dataset", "encoder", "method", "batch_size", "metric", "mean", "sd", "n"]
    maps = {row["method"]: row for row in rows if row["metric"] == "map"}
    assert set(maps) == {"any", "simdissim", "squared_jaccard", "margin_any", "none", "chance"}
    for method in ("any", "simdissim", "squared_jaccard", "margin_any", "none"):
        row = maps[method]
        assert (row["dataset"], row["encoder"], row["batch_size"], row["n"]) == ("shapes", "mobilenet", "16", "1")
        assert 0 <= float(row["mean"]) <= 100
    # The plugin's run records the plugin it used and the family of the CSV dataset.
    metrics = json.loads((example_run / "results/runs/shapes/mobilenet/squared_jaccard/bs16/seed0/probe/metrics.json").read_text())
    [plugin] = metrics["spec"]["plugins"]
    assert plugin["plugin"] == "examples/extending/squared_jaccard.py" and len(plugin["sha256"]) == 64
    assert metrics["spec"]["dataset_family"] == "image" and metrics["spec"]["encoder"]["kind"] == "torchvision"
    margin = json.loads((example_run / "results/runs/shapes/mobilenet/margin_any/bs16/seed0/probe/metrics.json").read_text())
    assert margin["spec"]["loss_options"] == {"margin": 0.2} and margin["spec"]["plugins"][0]["plugin"] == "examples/extending/margin_any.py"
    # The encoder of a role of its own ("mine") is in the benchmark and in no paper table.
    with open(example_run / "results" / "metrics" / "all_runs.csv", newline="") as handle:
        assert {row["encoder_role"] for row in csv.DictReader(handle) if row["encoder"] == "mobilenet"} == {"mine"}
    for table in ("image", "ablation", "paper_vs_run"):
        assert "MobileNetV3" not in (example_run / "results" / "tables" / f"{table}.md").read_text()
    stats = json.loads((example_run / "data/processed/shapes/stats.json").read_text())
    assert stats["family"] == "image" and sum(stats["splits"][s]["samples"] for s in ("train", "val", "test")) == 120


@pytest.mark.slow
def test_the_report_shows_them_by_their_display_names(example_run):
    text = (example_run / "report.html").read_text()
    entry = text[text.index('"results/tables/benchmark.html": {') :]
    page = base64.b64decode(re.search(r'"data_uri": "data:text/html;[^,]*base64,([A-Za-z0-9+/=]+)"', entry).group(1)).decode()
    assert "Jaccard²" in page and "ANY + margin" in page and "MobileNetV3-small (torchvision, random init)" in page and "shapes" in page
    assert '"results/figures/benchmark.html"' in text
    assert "Jaccard²" in (example_run / "results" / "tables" / "benchmark.md").read_text()


@pytest.mark.slow
def test_editing_the_plugin_reruns_exactly_the_runs_that_use_it(example_run):
    plugin = example_run / "examples" / "extending" / "squared_jaccard.py"
    original = plugin.read_text()
    try:
        plugin.write_text(original + "\n# an edit\n")
        counts = job_counts(snakemake(example_run, "-n", "--configfile", CONFIG).stdout)
    finally:
        plugin.write_text(original)
    assert counts["pretrain"] == 1 and counts["probe"] == 1  # squared_jaccard's run alone
    assert "initial_encoder" not in counts and "prepare_own_dataset" not in counts
    assert "Nothing to be done" in snakemake(example_run, "-n", "--configfile", CONFIG).stdout


def refused(tmp_path: Path, change) -> str:
    """A dry run of the example config with `change` applied: it must fail before any job."""
    shutil.copytree(EXAMPLE, tmp_path / "examples" / "extending", dirs_exist_ok=True)
    config = yaml.safe_load((EXAMPLE / "config.yaml").read_text())
    change(config)
    path = tmp_path / "changed.yaml"
    path.write_text(yaml.safe_dump(config))
    result = snakemake(tmp_path, "-n", "--configfile", str(path), check=False)
    assert result.returncode != 0
    assert not (tmp_path / "results").exists() and not (tmp_path / "data").exists()
    return result.stdout + result.stderr


def test_a_loss_nobody_registered_is_refused_listing_the_registered_ones(tmp_path):
    output = refused(tmp_path, lambda config: config["experiments"]["mine"]["losses"].append("squared_jacard"))
    assert "config key `experiments.mine.losses`" in output and "'squared_jacard', which is neither built in nor registered" in output
    assert "squared_jaccard" in output and "plugins:" in output and "mscl.register_pair_loss" in output and "docs/extending.md" in output


def test_an_encoder_kind_nobody_registered_is_refused(tmp_path):
    output = refused(tmp_path, lambda config: config["encoders"]["mobilenet"]["spec"].update(kind="torchvison"))
    assert "config key `encoders.mobilenet.spec.kind`" in output and "'torchvison', which is neither built in nor registered" in output
    assert "torchvision" in output and "mscl.register_encoder" in output


def test_a_dataset_without_a_source_is_refused_saying_how_to_add_one(tmp_path):
    output = refused(tmp_path, lambda config: config["datasets"].append("shaps"))
    assert "config key `datasets`" in output and "names dataset 'shaps'" in output and "shapes" in output and "kind: csv" in output


def test_a_plugin_that_is_not_there_is_refused(tmp_path):
    output = refused(tmp_path, lambda config: config.update(plugins=["examples/extending/no_such_plugin.py"]))
    assert "plugin file 'examples/extending/no_such_plugin.py' does not exist" in output and "config key `plugins`" in output


def test_an_option_the_plugins_loss_does_not_declare_is_refused_in_a_dry_run(tmp_path):
    """The option is read from margin_any.py's `register_loss(..., options=("margin",))`, before any job."""
    output = refused(tmp_path, lambda config: config["training"]["loss_options"].update(margin_any={"margn": 0.2}))
    assert "invalid config key `training.loss_options.margin_any.margn` in" in output
    assert "loss 'margin_any' does not take option 'margn'. Allowed: margin." in output
    assert "examples/extending/margin_any.py declares the options of 'margin_any'" in output
