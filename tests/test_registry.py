"""Losses and encoder kinds of one's own: mscl.registry and mscl.plugins (docs/extending.md).

Every test starts from the built-in names only: the registry and the plugin cache are emptied
and restored around it (`clean_registry`)."""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys

import pytest
import torch
from torch import nn

import mscl
from mscl import plugins, registry
from mscl.errors import InputError
from mscl.losses import LOSSES, label_overlap, index_labels, make_loss
from mscl.train.settings import LossSpec


@pytest.fixture(autouse=True)
def clean_registry(monkeypatch):
    monkeypatch.setattr(registry, "_PLUGIN_LOSSES", {})
    monkeypatch.setattr(registry, "_PLUGIN_ENCODERS", {})
    monkeypatch.setattr(plugins, "_LOADED", {})


def batch(seed: int = 0, samples: int = 6, labels: int = 4, dim: int = 5):
    generator = torch.Generator().manual_seed(seed)
    features = torch.nn.functional.normalize(torch.randn(samples, 2, dim, generator=generator, dtype=torch.float64), dim=-1)
    targets = (torch.rand(samples, labels, generator=generator) < 0.45).to(torch.float64)
    targets[0] = 0  # a sample without labels: its anchors have no positive and are skipped
    return features.requires_grad_(), targets


def squared_jaccard(overlap):
    union = overlap.sizes[:, None] + overlap.sizes[None, :] - overlap.intersection
    return (overlap.intersection / union.clamp_min(1)) ** 2


def naive_weighted_pair_loss(features, labels, weight, temperature):
    """L = mean over anchors with a positive of -(1/N_i) sum_{p != i} W_ip log p_ip, N_i the
    number of p with W_ip > 0, written from the equations (GUIDE §2) with plain loops."""
    samples, views = features.shape[:2]
    z = features.transpose(0, 1).reshape(samples * views, -1)
    sets = [set(torch.nonzero(labels[b]).flatten().tolist()) for b in range(samples)]
    losses = []
    for i in range(samples * views):
        others = [a for a in range(samples * views) if a != i]
        log_denominator = torch.logsumexp(torch.stack([z[i] @ z[a] / temperature for a in others]), 0)
        terms, count = [], 0
        for p in others:
            w = weight(sets[i % samples], sets[p % samples])
            if w > 0:
                count += 1
                terms.append(w * (z[i] @ z[p] / temperature - log_denominator))
        if count:
            losses.append(-torch.stack(terms).sum() / count)
    return torch.stack(losses).mean()


def test_a_registered_pair_loss_is_the_equation_with_its_weights():
    mscl.register_pair_loss("squared_jaccard", squared_jaccard, display="Jaccard²")
    features, labels = batch()
    loss = make_loss("squared_jaccard", temperature=0.5)(features, labels)

    def weight(s, t):
        return (len(s & t) / len(s | t)) ** 2 if s & t else 0.0

    expected = naive_weighted_pair_loss(features, labels, weight, 0.5)
    assert torch.allclose(loss, expected, atol=1e-12)
    loss.backward()
    assert torch.isfinite(features.grad).all()
    assert registry.method_display("squared_jaccard") == "Jaccard²"
    assert registry.plugin_sources(loss="squared_jaccard") == ["<not a plugin>"]


def test_a_pair_loss_with_a_built_in_weight_function_is_that_loss():
    """The registration path builds exactly the built-in PairLoss: Jaccard's own weights give
    Jaccard's loss and gradients bit for bit."""
    from mscl.losses import WEIGHT_FUNCTIONS

    mscl.register_pair_loss("my_jaccard", WEIGHT_FUNCTIONS["jaccard"])
    features, labels = batch(seed=3)
    mine = make_loss("my_jaccard", temperature=0.1)(features, labels)
    (mine_grad,) = torch.autograd.grad(mine, features)
    builtin = make_loss("jaccard", temperature=0.1)(features, labels)
    (builtin_grad,) = torch.autograd.grad(builtin, features)
    assert mine.item() == builtin.item() and torch.equal(mine_grad, builtin_grad)


class ScaledAny(nn.Module):
    """A whole loss module: ANY times a factor, with the label count the run fills in."""

    def __init__(self, temperature, scale=1.0, num_labels=None):
        super().__init__()
        self.inner, self.scale, self.num_labels = make_loss("any", temperature=temperature), scale, num_labels

    def forward(self, features, labels):
        return self.scale * self.inner(features, labels)


def test_a_registered_loss_module_takes_its_declared_options_and_the_run_options():
    from mscl.losses import build_loss, loss_options_taken

    mscl.register_loss("scaled_any", ScaledAny, options=("scale", "num_labels"), display="ANY x k")
    assert loss_options_taken("scaled_any") == {"scale", "num_labels"}
    features, labels = batch()
    module = build_loss(LossSpec("scaled_any", 0.2, {"scale": 3.0}), num_labels=4)
    assert module.num_labels == 4
    assert torch.allclose(module(features, labels), 3.0 * make_loss("any", temperature=0.2)(features, labels))
    with pytest.raises(ValueError, match=r"does not take option\(s\) \['alpha'\]"):
        build_loss(LossSpec("scaled_any", 0.2, {"alpha": 1}))


def test_the_examples_loss_module_is_any_at_margin_0_and_takes_its_declared_option(monkeypatch):
    """examples/extending/margin_any.py (docs/extending.md): a whole torch.nn.Module registered
    with an option, built from a LossSpec as a run builds it, on dense and sparse CSR labels."""
    from pathlib import Path

    from mscl.losses import build_loss, csr_labels, loss_options_taken

    monkeypatch.chdir(Path(__file__).parents[1])
    plugins.load_plugins(["examples/extending/margin_any.py"])
    assert loss_options_taken("margin_any") == {"margin"} and registry.method_display("margin_any") == "ANY + margin"
    features, labels = batch()
    sparse = csr_labels([torch.nonzero(row).flatten() for row in labels], labels.shape[1])
    any_loss = make_loss("any", temperature=0.2)(features, labels)
    at_zero = build_loss(LossSpec("margin_any", 0.2, {"margin": 0.0}))
    assert torch.allclose(at_zero(features, labels).double(), any_loss, atol=1e-6)
    assert torch.allclose(at_zero(features, sparse).double(), any_loss, atol=1e-6)
    with_margin = build_loss(LossSpec("margin_any", 0.2, {"margin": 0.3}))(features, labels)
    assert with_margin > any_loss  # positives count less: every anchor's loss grows
    with_margin.backward()
    assert features.grad is not None and torch.isfinite(features.grad).all()
    assert build_loss(LossSpec("margin_any", 0.2))(features, torch.zeros_like(labels)) == 0  # no positive at all
    with pytest.raises(ValueError, match=r"does not take option\(s\) \['gamma'\]"):
        build_loss(LossSpec("margin_any", 0.2, {"gamma": 1}))


def test_the_training_loop_builds_a_registered_loss_from_a_run_spec():
    """pretrain.build_model passes num_labels and dim to a loss that declares them."""
    from mscl.train.pretrain import build_model
    from mscl.train.spec import RunSpec

    mscl.register_loss("scaled_any", ScaledAny, options=("scale", "num_labels"))
    spec = RunSpec.from_mapping({
        "dataset": "d", "encoder_name": "e", "encoder": {"kind": "mlp", "input_dim": 3}, "loss": "scaled_any",
        "loss_options": {"scale": 2.0}, "batch_size": 4, "pretrain": {"projection_dim": 8},
    })  # fmt: skip
    _, _, loss_fn = build_model(spec, num_labels=7, device=torch.device("cpu"))
    assert isinstance(loss_fn, ScaledAny) and loss_fn.num_labels == 7 and loss_fn.scale == 2.0


class Flatten(mscl_encoder := __import__("mscl.models", fromlist=["Encoder"]).Encoder):  # noqa: N801
    """A tiny image encoder of one's own: the mean colour of each channel, through a linear map."""

    def __init__(self, spec, num_labels):
        super().__init__(spec)
        self.output_dim = int(spec.get("width", 4))
        self.linear = nn.Linear(3, self.output_dim)

    def forward(self, batch):
        return self.linear(batch["images"].mean(dim=(2, 3)))


def test_a_registered_encoder_kind_builds_and_sets_the_spec_defaults_of_its_modality():
    from mscl.models import build_encoder
    from mscl.train.spec import RunSpec

    mscl.register_encoder("mean_colour", Flatten, "image")
    encoder = build_encoder({"kind": "mean_colour", "width": 6}, num_labels=3)
    assert encoder.modality == "image" and encoder(({"images": torch.rand(2, 3, 8, 8)})).shape == (2, 6)
    spec = RunSpec.from_mapping({"dataset": "d", "encoder_name": "e", "encoder": {"kind": "mean_colour"}, "loss": "any", "batch_size": 256})
    assert spec.modality == "image" and spec.pretrain.optimizer == "sgd" and math.isclose(spec.pretrain.lr, 0.05)  # as resnet
    mscl.register_encoder("not_a_module", lambda spec, labels: object(), "image")
    with pytest.raises(ValueError, match="returned object, not a torch.nn.Module"):
        build_encoder({"kind": "not_a_module"}, num_labels=3)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: mscl.register_pair_loss("any", squared_jaccard), "name 'any' is taken (a built-in loss)"),
        (lambda: mscl.register_pair_loss("none", squared_jaccard), "name 'none' is taken (a reference method)"),
        (lambda: mscl.register_pair_loss("my loss", squared_jaccard), "is not a valid name"),
        (lambda: mscl.register_pair_loss("ok", 3), "weights must be callable"),
        (lambda: mscl.register_loss("ok", ScaledAny, options="scale"), "options must be a list"),
        (lambda: mscl.register_loss("ok", ScaledAny, display=""), "display must be a non-empty string"),
        (lambda: mscl.register_encoder("resnet", Flatten, "image"), "kind name 'resnet' is taken"),
        (lambda: mscl.register_encoder("mine", Flatten, "audio"), "modality 'audio' is not one of"),
    ],
)
def test_a_bad_registration_is_refused_with_what_to_do(call, message):
    with pytest.raises(registry.RegistrationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()


def test_an_unknown_name_lists_the_known_ones_and_where_to_register_one():
    from mscl.train.spec import RunSpec

    mscl.register_pair_loss("squared_jaccard", squared_jaccard)
    with pytest.raises(ValueError) as raised:
        RunSpec.from_mapping({"dataset": "d", "encoder_name": "e", "encoder": {"kind": "mlp", "input_dim": 3}, "loss": "sqared_jaccard", "batch_size": 4})
    text = str(raised.value)
    assert "'sqared_jaccard', which is neither built in nor registered" in text
    assert "squared_jaccard" in text and "simdissim" in text and "plugins:" in text and "docs/extending.md" in text


PLUGIN = '''
import mscl


def weights(overlap):
    return (overlap.intersection > 0).double() * 2.0


mscl.register_pair_loss("twice_any", weights, display="2 x ANY")
'''


def test_a_plugin_file_registers_once_and_is_recorded_with_its_hash(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_plugin.py").write_text(PLUGIN)
    [plugin] = plugins.load_plugins(["my_plugin.py"])
    assert plugin.sha256 == __import__("hashlib").sha256(PLUGIN.encode()).hexdigest()
    assert plugins.load_plugin("my_plugin.py") is plugin  # imported once per process
    assert registry.plugin_sources(loss="twice_any") == ["my_plugin.py"]
    assert plugins.plugins_of_run([plugin], "twice_any", "mlp") == [{"plugin": "my_plugin.py", "sha256": plugin.sha256}]
    assert plugins.plugins_of_run([plugin], "any", "mlp") == []  # a run that does not use it does not carry it


def test_a_spec_imports_its_plugins_and_refuses_a_changed_file(tmp_path, monkeypatch):
    from mscl.train.spec import load_spec

    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_plugin.py").write_text(PLUGIN)
    sha = __import__("hashlib").sha256(PLUGIN.encode()).hexdigest()
    spec = {"dataset": "d", "encoder_name": "e", "encoder": {"kind": "mlp", "input_dim": 3}, "loss": "twice_any", "batch_size": 4,
            "plugins": [{"plugin": "my_plugin.py", "sha256": sha}]}  # fmt: skip
    loaded = load_spec(json.dumps(spec))
    assert loaded.loss.name == "twice_any" and loaded.to_dict()["plugins"] == spec["plugins"]
    monkeypatch.setattr(plugins, "_LOADED", {})
    monkeypatch.setattr(registry, "_PLUGIN_LOSSES", {})
    (tmp_path / "my_plugin.py").write_text(PLUGIN + "\n# edited\n")
    with pytest.raises(InputError, match="changed after this job was planned.*rerun snakemake"):
        load_spec(json.dumps(spec))


def test_a_job_imports_a_plugins_helper_without_pythonpath_and_refuses_an_edited_helper(tmp_path, monkeypatch):
    """What a training job does with its spec's plugins, in a fresh interpreter whose working
    folder is the workflow's: the plugin's folder is on sys.path while it loads (and after, last),
    so its helper imports; a helper edited after planning is refused, naming it."""
    folder = tmp_path / "lab_plugins"
    folder.mkdir()
    (folder / "helped.py").write_text("import mscl\nfrom weights_of_mine import w\nmscl.register_pair_loss('helped', w)\n")
    (folder / "weights_of_mine.py").write_text("def w(overlap):\n    return (overlap.intersection > 0).float()\n")
    for module, name in ((plugins, "_LOADED"), (registry, "_PLUGIN_LOSSES"), (sys, "path")):  # this process's state stays as it was
        monkeypatch.setattr(module, name, copy.copy(getattr(module, name)))
    monkeypatch.delitem(sys.modules, "weights_of_mine", raising=False)
    [plugin] = plugins.load_plugins([str(folder / "helped.py")])
    entry = plugin.spec_entry()
    assert entry["local_modules"] == {"weights_of_mine.py": __import__("hashlib").sha256((folder / "weights_of_mine.py").read_bytes()).hexdigest()}
    job = (
        "import json, sys\nfrom mscl.plugins import load_spec_plugins\nfrom mscl import registry\n"
        f"load_spec_plugins([json.loads({json.dumps(json.dumps(entry))})], 'spec')\n"
        "print(registry.plugin_sources(loss='helped'), sys.path[-1])"
    )  # fmt: skip
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", job], cwd=tmp_path, env=environment, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"['{folder / 'helped.py'}'] {folder}"
    (folder / "weights_of_mine.py").write_text("def w(overlap):\n    return overlap.intersection\n")
    refused = subprocess.run([sys.executable, "-c", job], cwd=tmp_path, env=environment, capture_output=True, text=True)
    assert refused.returncode != 0 and "changed after this job was planned: its helper 'weights_of_mine.py'" in refused.stderr


@pytest.mark.parametrize(
    "reference, content, message",
    [
        ("missing.py", None, "plugin file 'missing.py' does not exist"),
        ("no_such_module_xyz", None, "plugin module 'no_such_module_xyz' is not importable"),
        ("broken.py", "import mscl\nraise RuntimeError('boom')\n", "plugin 'broken.py' raised RuntimeError: boom (at"),
        ("taken.py", "import mscl\nmscl.register_pair_loss('all', lambda o: o.intersection)\n", "could not register: loss name 'all' is taken"),
    ],
)
def test_a_plugin_that_cannot_load_is_refused_naming_it_and_the_fix(tmp_path, monkeypatch, reference, content, message):
    monkeypatch.chdir(tmp_path)
    if content is not None:
        (tmp_path / reference).write_text(content)
    with pytest.raises(InputError) as raised:
        plugins.load_plugins([reference], where="config key `plugins` in my.yaml")
    text = str(raised.value)
    assert message in text and "config key `plugins` in my.yaml" in text and "docs/extending.md" in text


def test_the_built_in_names_are_listed_once():
    """mscl.registry lists every built-in loss (mscl.losses builds exactly those), reference
    method (the run spec's baselines and the label prior) and encoder kind (mscl.models builds
    exactly those); the report's display names are the registry's."""
    from mscl.layout import CHANCE
    from mscl.models import _BUILDERS
    from mscl.report.style import METHOD_DISPLAY_NAMES
    from mscl.train.spec import BASELINES

    assert set(LOSSES) == set(registry.BUILTIN_LOSSES)
    assert (*BASELINES, CHANCE) == tuple(registry.REFERENCE_METHODS)
    assert set(_BUILDERS) == set(registry.BUILTIN_ENCODER_KINDS)
    assert METHOD_DISPLAY_NAMES == {**registry.BUILTIN_LOSSES, **registry.REFERENCE_METHODS}
    assert registry.method_names() == (*registry.BUILTIN_LOSSES, *BASELINES)


def test_the_weights_see_the_label_overlap_of_the_batch():
    """What a weight function receives: sizes |S| and intersections |S ∩ T| (docs/extending.md)."""
    labels = torch.tensor([[1, 1, 0], [0, 1, 1], [0, 0, 0]], dtype=torch.float64)
    overlap = label_overlap(index_labels(labels), torch.float64)
    assert overlap.sizes.tolist() == [2, 2, 0]
    assert overlap.intersection.tolist() == [[2, 1, 0], [1, 2, 0], [0, 0, 0]]


def test_the_schemas_short_lists_are_the_packages_lists():
    """The few closed lists the config schema still spells out (it is YAML: it cannot import
    them) are checked against the one list each comes from: the form of an encoder role (mscl.layout), the
    families and modalities of a source of one's own, the source kinds."""
    from pathlib import Path

    import yaml

    from mscl.defaults import CSV_MODALITIES
    from mscl.layout import DATASET_FAMILY_NAMES, REFERENCE_ROLE, ROLE_PATTERN

    schema = yaml.safe_load((Path(__file__).parents[1] / "workflow" / "schemas" / "config.schema.yaml").read_text())["properties"]
    role = schema["encoders"]["additionalProperties"]["properties"]["role"]
    assert role["pattern"] == ROLE_PATTERN and role["not"] == {"const": REFERENCE_ROLE} and "enum" not in role
    own = schema["sources"]["additionalProperties"]
    csv_source, manifest_source = own["oneOf"]
    for branch in (csv_source, manifest_source):
        assert branch["properties"]["family"]["enum"] == [*DATASET_FAMILY_NAMES, None]
    assert csv_source["properties"]["modality"]["enum"] == list(CSV_MODALITIES)
    assert own["properties"]["kind"]["enum"] == [csv_source["properties"]["kind"]["const"], manifest_source["properties"]["kind"]["const"]]
    # The names the schema no longer lists come from the registry and mscl.layout at parse time.
    assert "enum" not in schema["experiments"]["additionalProperties"]["properties"]["losses"]["items"]
    assert "enum" not in schema["datasets"]["items"]


def test_a_plugin_module_is_imported_by_name_and_hashed_by_its_file(tmp_path, monkeypatch):
    (tmp_path / "mylab_losses.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    [plugin] = plugins.load_plugins(["mylab_losses"])
    assert plugin.path == tmp_path / "mylab_losses.py" and plugin.sha256 == __import__("hashlib").sha256(PLUGIN.encode()).hexdigest()
    assert registry.plugin_sources(loss="twice_any") == ["mylab_losses"] and registry.method_display("twice_any") == "2 x ANY"
