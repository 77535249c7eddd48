"""The snippets of docs/extending.md run as written: read out of the Markdown itself, so the page
cannot drift from what works. Each YAML snippet is a `mine.yaml` that a dry run layers over the
embedded default (`snakemake -n --configfile config.yaml mine.yaml`, as the page says); each
Python snippet is a plugin, run as the workflow imports one, and what it registers is built and
run on a small batch."""

from __future__ import annotations

import itertools
import re
import shutil
import textwrap
from pathlib import Path

import pytest
import torch
import yaml
from conftest import REPO_ROOT
from test_workflow import snakemake

from mscl import plugins, registry
from mscl.losses import build_loss, make_loss
from mscl.train.settings import LossSpec

PAGE = REPO_ROOT / "docs" / "extending.md"
# A fenced block, possibly indented under a list item: its language and its text.
FENCE = re.compile(r"^(?P<indent> *)```(?P<language>\w*)\n(?P<body>.*?)^(?P=indent)```", re.MULTILINE | re.DOTALL)


def snippets(language: str) -> list[str]:
    """The page's fenced blocks of `language`, dedented."""
    return [textwrap.dedent(match["body"]) for match in FENCE.finditer(PAGE.read_text()) if match["language"] == language]


def test_the_page_has_the_snippets_this_test_runs():
    assert len(snippets("yaml")) >= 4 and len(snippets("python")) >= 3
    assert any("margin_any" in snippet and "loss_options" in snippet for snippet in snippets("yaml"))


@pytest.mark.parametrize("index", range(len(snippets("yaml"))))
def test_a_yaml_snippet_layered_over_the_default_passes_a_dry_run(tmp_path, index):
    snippet = snippets("yaml")[index]
    shutil.copytree(REPO_ROOT / "examples" / "extending", tmp_path / "examples" / "extending")  # the plugins it names
    mine = tmp_path / "mine.yaml"
    mine.write_text(snippet)
    result = snakemake(tmp_path, "-n", "--configfile", str(REPO_ROOT / "config.yaml"), str(mine), check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"docs/extending.md's YAML snippet {index + 1} fails:\n{snippet}\n{output[-3000:]}"
    # What the snippet adds runs: every run of each experiment block it names is planned.
    for block in yaml.safe_load(snippet).get("experiments", {}).values():
        for dataset, encoder, loss, batch in itertools.product(block["datasets"], block["encoders"], block["losses"], block["batch_sizes"]):
            assert f"results/runs/{dataset}/{encoder}/{loss}/bs{batch}/seed0/probe/metrics.json" in output, (index, loss)


@pytest.fixture
def clean_registry(monkeypatch):
    monkeypatch.setattr(registry, "_PLUGIN_LOSSES", {})
    monkeypatch.setattr(registry, "_PLUGIN_ENCODERS", {})
    monkeypatch.setattr(plugins, "_LOADED", {})


@pytest.mark.parametrize("index", range(len(snippets("python"))))
def test_a_python_snippet_registers_what_then_builds_and_runs(clean_registry, index):
    with registry.loading(f"docs/extending.md snippet {index + 1}"):
        exec(compile(snippets("python")[index], f"<docs/extending.md python snippet {index + 1}>", "exec"), {"__name__": "docs_snippet"})
    losses, kinds = list(registry._PLUGIN_LOSSES), list(registry._PLUGIN_ENCODERS)
    assert losses or kinds, "the snippet registers nothing"
    generator = torch.Generator().manual_seed(index)
    features = torch.nn.functional.normalize(torch.randn(6, 2, 8, generator=generator), dim=-1)
    labels = torch.tensor([[1, 0, 0], [1, 1, 0], [0, 1, 0], [0, 0, 1], [1, 0, 1], [0, 1, 1]], dtype=torch.float32)
    for name in losses:
        value = build_loss(LossSpec(name, 0.1))(features, labels)
        assert value.dim() == 0 and torch.isfinite(value) and value > 0, name
        if registry.plugin_loss(name).options:  # a loss module with options: its defaults give ANY here
            assert torch.allclose(value, make_loss("any", temperature=0.1)(features, labels), atol=1e-5), name
    for kind in kinds:
        entry = registry.plugin_encoder(kind)
        assert entry.modality == "image"  # the page's encoder: an image batch is what its loader makes
        encoder = entry.builder({"kind": kind}, 3)
        assert encoder({"images": torch.randn(2, 3, 16, 16, generator=generator)}).shape == (2, encoder.output_dim)
