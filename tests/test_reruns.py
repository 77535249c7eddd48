"""Exactly the jobs a change touches rerun (docs/reruns.md).

Measured through Snakemake's own metadata, as a user's next run would see it: a small grid is
planned, every output, log and benchmark file is created empty, `--touch --forceall` records
every job as finished with its params, and then a dry run with one config key changed shows
what Snakemake would rerun. The rerun triggers are the default profile's (mtime, params, input,
software-env; not code). A change of a rule's params that widens a rerun fails here.

Config files are written with their keys in the order given (`write_config`), never sorted: a
param built in the file's order of a mapping (`encoders`, `sources`, ...) must show here as a
rerun when the order changes.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml
from test_workflow import REPO, job_counts, snakemake

# What the default profile uses (profiles/default/config.yaml), given here because the tests run
# with `--workflow-profile none`.
TRIGGERS = ("--rerun-triggers", "mtime", "params", "input", "software-env")
# Aggregation rules that every changed run result reaches: the tidy CSV, then every table and
# figure built from it, the cost table, which reads the runs' metrics.json, and the loss curves.
REPORT = {"collect_runs": 1, "paper_table": 7, "paper_figure": 8, "cost_table": 1, "benchmark_table": 1, "loss_curves": 1}

# The grid: two image sets (a trained loss with an option, the paper's loss, the untrained
# reference) and a text set whose encoder caches a frozen prefix.
IMAGE_RUNS = [(dataset, loss) for dataset in ("coco", "voc") for loss in ("any", "simdissim", "msc")]
UNTRAINED_IMAGE_RUNS = [("coco", "none"), ("voc", "none")]
TEXT_RUNS = [("aapd", "any")]
UNTRAINED_TEXT_RUNS = [("aapd", "none")]
ALL_RUNS = IMAGE_RUNS + UNTRAINED_IMAGE_RUNS + TEXT_RUNS + UNTRAINED_TEXT_RUNS


def grid_config() -> dict:
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["datasets"] = ["coco", "voc", "aapd"]
    config["experiments"] = {
        "image": {"datasets": ["coco", "voc"], "encoders": ["resnet8"], "losses": ["any", "simdissim", "msc", "none"], "batch_sizes": [32]},
        "text": {"datasets": ["aapd"], "encoders": ["minilm-top1"], "losses": ["any", "none"], "batch_sizes": [32]},
    }
    config["report"]["batch_size"] = {"image": 32, "aapd": 32, "mimic": 16}
    return config


def changed(config: dict, path: str, value) -> dict:
    """`config` with the dotted key `path` set to `value`."""
    config = copy.deepcopy(config)
    *parents, last = path.split(".")
    node = config
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return config


def write_config(path: Path, config: dict) -> Path:
    """`config` as a YAML file, its mappings' keys in the order they have here."""
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def reversed_mappings(node):
    """`node` with the keys of every mapping in reverse order (values unchanged)."""
    if isinstance(node, dict):
        return {key: reversed_mappings(value) for key, value in reversed(node.items())}
    if isinstance(node, list):
        return [reversed_mappings(value) for value in node]
    return node


def per_dataset(runs, *datasets) -> int:
    return sum(dataset in datasets for dataset, _ in runs)


# config key -> (new value, the jobs per rule Snakemake must plan, nothing else).
CHANGES = {
    # A probe setting reruns every probe and what reads them, never a pretraining.
    "training.probe.epochs": (7, {"probe": len(ALL_RUNS), **REPORT}),
    # A pretraining setting of one encoder: its pretrain jobs, and its untrained references,
    # which record the block's settings beside their initial encoder (seconds of work).
    "encoders.resnet8.pretrain.lr": (
        0.01,
        {"pretrain": len(IMAGE_RUNS), "initial_encoder": len(UNTRAINED_IMAGE_RUNS), "probe": len(IMAGE_RUNS + UNTRAINED_IMAGE_RUNS), **REPORT},
    ),
    # An encoder spec key: that encoder's frozen-prefix cache and every run of it.
    "encoders.minilm-top1.spec.max_length": (
        32,
        {"cache_prefix": 1, "pretrain": len(TEXT_RUNS), "initial_encoder": len(UNTRAINED_TEXT_RUNS), "probe": len(TEXT_RUNS + UNTRAINED_TEXT_RUNS), **REPORT},
    ),
    # A loss option: the runs of that loss alone.
    "training.loss_options": ({"msc": {"alpha": 0.5}}, {"pretrain": 2, "probe": 2, **REPORT}),
    # A display name: the report alone (tables and figures show it, all_runs.csv records it).
    "report.display.coco": ("COCO renamed", {"statistics_table": 1, **REPORT}),
    # The batch size a table group shows: that group's tables and figures (the MIMIC group: a
    # group with runs must name a batch size they have, mscl.config_checks; this grid has none).
    "report.batch_size.mimic": (8, {"paper_table": 3, "paper_figure": 2}),
    # Resources and the local GPU pool: nothing (what a job asks for, not what it computes).
    "encoders.resnet8.resources": ({"threads": 2, "gpu": 2, "mem_mb": 9000, "runtime": 90}, {}),
    "local_gpus.devices": ([0, 1], {}),
    "job_server": (False, {}),
    # TensorBoard curves: environment, not params; their event files are no output.
    "tensorboard": ({"enabled": False, "points_per_epoch": 10}, {}),
    # The order of the encoders, and an encoder that no experiment uses: nothing.
    "encoders": (dict(reversed(grid_config()["encoders"].items())), {}),
    "encoders.resnet8-unused": (grid_config()["encoders"]["resnet8"], {}),
    # A dataset source option: that dataset's manifest and everything made from it.
    "sources.voc.difficult": (
        "exclude",
        {
            "prepare_voc": 1, "chance": 1, "statistics_table": 1,
            "pretrain": per_dataset(IMAGE_RUNS, "voc"), "initial_encoder": per_dataset(UNTRAINED_IMAGE_RUNS, "voc"),
            "probe": per_dataset(ALL_RUNS, "voc"), **REPORT,
        },
    ),
}  # fmt: skip


def make_every_product(plan: str, workdir: Path) -> None:
    """Create, empty, every output, log and benchmark file a dry run lists (directories for the
    rules whose output is a folder)."""
    rule = None
    for line in plan.splitlines():
        if match := re.match(r"^(?:local)?rule (\w+):", line):
            rule = match.group(1)
        elif match := re.match(r"^    (output|log|benchmark): (.+)$", line):
            for name in match.group(2).split(", "):
                path = workdir / name
                if match.group(1) == "output" and rule in ("make_demo", "local_models"):
                    path.mkdir(parents=True, exist_ok=True)
                else:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.touch()


@pytest.fixture(scope="module")
def finished_grid(tmp_path_factory) -> Path:
    """A working folder where Snakemake's metadata records every job of `grid_config` as done."""
    workdir = tmp_path_factory.mktemp("reruns")
    config_file = write_config(workdir / "base.yaml", grid_config())
    plan = snakemake(workdir, "-n", "--configfile", str(config_file)).stdout
    make_every_product(plan, workdir)
    snakemake(workdir, "--touch", "--forceall", "--quiet", "--configfile", str(config_file))
    return workdir


def planned(workdir: Path, config: dict, name: str) -> dict[str, int]:
    config_file = write_config(workdir / f"{name}.yaml", config)
    output = snakemake(workdir, "-n", *TRIGGERS, "--configfile", str(config_file)).stdout
    if "Nothing to be done" in output:
        return {}
    counts = job_counts(output)
    counts.pop("all", None)
    counts.pop("total", None)
    return counts


@pytest.mark.slow
def test_an_unchanged_config_reruns_nothing(finished_grid):
    assert planned(finished_grid, grid_config(), "unchanged") == {}


@pytest.mark.slow
def test_the_order_of_keys_in_the_config_file_reruns_nothing(finished_grid):
    """Every mapping of the config (encoders, sources, training settings, report names, ...)
    written in reverse order: the same runs, the same params."""
    assert planned(finished_grid, reversed_mappings(grid_config()), "reversed") == {}


@pytest.mark.slow
@pytest.mark.parametrize("key", list(CHANGES))
def test_a_changed_key_reruns_exactly_the_jobs_it_touches(finished_grid, key):
    value, expected = CHANGES[key]
    assert planned(finished_grid, changed(grid_config(), key, value), key.replace(".", "_")) == expected


# A plugin that imports a helper of its own folder (docs/extending.md): the helper's hash joins
# the run spec of the runs that use the plugin, as the plugin file's does.
PLUGIN = '''import mscl
from overlap_weights import shared_label_weights

mscl.register_pair_loss("helped", shared_label_weights)
'''
HELPER = '''def shared_label_weights(overlap):
    return (overlap.intersection > 0).float()
'''


@pytest.fixture(scope="module")
def finished_plugin_grid(tmp_path_factory) -> Path:
    """Every job of a grid with the plugin's loss and a built-in one recorded as done; the plugin
    imports its helper with nothing on PYTHONPATH."""
    workdir = tmp_path_factory.mktemp("plugin_reruns")
    (workdir / "my_plugins").mkdir()
    (workdir / "my_plugins" / "helped.py").write_text(PLUGIN)
    (workdir / "my_plugins" / "overlap_weights.py").write_text(HELPER)
    config = plugin_grid_config()
    config_file = workdir / "base.yaml"
    config_file.write_text(yaml.safe_dump(config))
    make_every_product(snakemake(workdir, "-n", "--configfile", str(config_file)).stdout, workdir)
    snakemake(workdir, "--touch", "--forceall", "--quiet", "--configfile", str(config_file))
    return workdir


def plugin_grid_config() -> dict:
    config = grid_config()
    config["datasets"] = ["coco"]
    config["plugins"] = ["my_plugins/helped.py"]
    config["experiments"] = {"image": {"datasets": ["coco"], "encoders": ["resnet8"], "losses": ["any", "helped"], "batch_sizes": [32]}}
    return config


@pytest.mark.slow
def test_editing_a_plugins_helper_reruns_exactly_the_runs_that_use_the_plugin(finished_plugin_grid):
    helper = finished_plugin_grid / "my_plugins" / "overlap_weights.py"
    assert planned(finished_plugin_grid, plugin_grid_config(), "same") == {}
    try:
        helper.write_text(HELPER + "# an edit\n")
        counts = planned(finished_plugin_grid, plugin_grid_config(), "edited")
    finally:
        helper.write_text(HELPER)
    assert counts == {"pretrain": 1, "probe": 1, **REPORT}  # the `helped` run alone
