"""Every cross-key mistake of a config is refused while the Snakefile is parsed (mscl.config_checks):
unit tests of each check on the embedded default with one change, then a few `snakemake -n`
runs that show the workflow refuses them in a dry run, before any job.

Each case asserts the key as the user writes it, the bad value, the allowed values where there
is a short list, and the fix. docs/malformed-inputs.md lists them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from conftest import REPO_ROOT
from snakemake.utils import update_config, validate
from test_workflow import snakemake

from mscl import plugins, registry
from mscl.config_checks import ConfigProblem, config_problems, dataset_modality, problems_message

SCHEMA = REPO_ROOT / "workflow" / "schemas" / "config.schema.yaml"
DEFAULT = yaml.safe_load((REPO_ROOT / "config.yaml").read_text())
BUILT_IN_SOURCES = set(yaml.safe_load(SCHEMA.read_text())["properties"]["sources"]["properties"])


@pytest.fixture(autouse=True)
def clean_registry(monkeypatch):
    monkeypatch.setattr(registry, "_PLUGIN_LOSSES", {})
    monkeypatch.setattr(registry, "_PLUGIN_ENCODERS", {})
    monkeypatch.setattr(plugins, "_LOADED", {})


def merged(base: dict, overlay: dict) -> dict:
    """`overlay` over `base` as Snakemake merges config files (`--configfile base overlay`)."""
    result = copy.deepcopy(base)
    update_config(result, copy.deepcopy(overlay))
    return result


def problems(change: Callable[[dict], Any] | dict | None = None, base: dict = DEFAULT) -> list[ConfigProblem]:
    """The problems of `base` with `change` (an overlay, or a function editing the config),
    validated with the schema's defaults filled in, as the workflow sees it."""
    config = copy.deepcopy(base)
    if isinstance(change, dict):
        config = merged(config, change)
    elif change is not None:
        change(config)
    validate(config, str(SCHEMA))
    own = {name: block for name, block in config["sources"].items() if name not in BUILT_IN_SOURCES}
    return config_problems(config, own)


def only(found: list[ConfigProblem]) -> ConfigProblem:
    assert len(found) == 1, [problem.message() for problem in found]
    return found[0]


def test_the_shipped_configs_have_no_problem(monkeypatch):
    """The embedded default, the paper's grid with its smoke layer, the claim check with its
    layers and the extending example (its plugins loaded, as the workflow does) pass as they are."""
    paper = yaml.safe_load((REPO_ROOT / "config" / "paper.yaml").read_text())
    claim = yaml.safe_load((REPO_ROOT / "config" / "claim.yaml").read_text())
    assert problems() == []
    assert problems(yaml.safe_load((REPO_ROOT / "config" / "paper_smoke.yaml").read_text()), base=paper) == []
    for layer in ({}, *(yaml.safe_load((REPO_ROOT / "config" / name).read_text()) for name in ("claim_quick.yaml", "claim_gpu.yaml"))):
        assert problems(layer, base=claim) == []
    example = yaml.safe_load((REPO_ROOT / "examples" / "extending" / "config.yaml").read_text())
    monkeypatch.chdir(REPO_ROOT)
    plugins.load_plugins(example["plugins"])
    assert problems(base=example) == []


# --------------------------------------------------------------------------- loss options


def test_options_under_a_loss_nothing_defines_are_refused_not_ignored():
    problem = only(problems({"training": {"loss_options": {"simdisim": {"form": "literal"}}}}))
    assert problem.key == "training.loss_options.simdisim"
    assert "'simdisim', which is neither built in nor registered (they would be ignored)" in problem.problem
    assert "simdissim" in problem.allowed and "register_loss" in problem.fix


def test_an_option_a_built_in_loss_does_not_take_is_refused_with_the_ones_it_takes():
    problem = only(problems({"training": {"loss_options": {"msc": {"alpha": 0.5, "gama": 2}}}}))
    assert problem.key == "training.loss_options.msc.gama"
    assert problem.problem == "loss 'msc' does not take option 'gama'"
    assert problem.allowed == ("alpha", "beta")  # num_labels and dim are the run's to set


def test_a_loss_without_options_says_so_and_the_run_set_options_name_their_place():
    problem = only(problems({"training": {"loss_options": {"any": {"gamma": 2}}}}))
    assert "takes no options besides the temperature" in problem.problem and problem.allowed == ()
    problem = only(problems({"training": {"loss_options": {"simdissim": {"temperature": 0.1}}}}))
    assert problem.key == "training.loss_options.simdissim.temperature" and "training.pretrain.temperature" in problem.fix


def test_a_choice_option_takes_only_its_choices():
    problem = only(problems({"training": {"loss_options": {"simdissim": {"form": "literl"}}}}))
    assert problem.key == "training.loss_options.simdissim.form" and problem.allowed == ("weighted", "literal")


def test_a_registered_loss_is_checked_against_its_declared_options_without_being_built():
    built = []

    def factory(temperature, margin=0.0, num_labels=None):
        built.append(margin)  # pragma: no cover - the check must not build it
        raise AssertionError("the check built the loss")

    with registry.loading("my_losses.py"):
        registry.register_loss("margin_any", factory, options=("margin", "num_labels"))
    overlay = {"training": {"loss_options": {"margin_any": {"margn": 0.2}}}}
    problem = only(problems(overlay))
    assert problem.key == "training.loss_options.margin_any.margn" and problem.allowed == ("margin",)
    assert "my_losses.py declares the options of 'margin_any'" in problem.fix
    assert problems({"training": {"loss_options": {"margin_any": {"margin": 0.2}}}}) == [] and built == []


# ------------------------------------------------------------------------------ pairings


def test_an_image_encoder_on_a_text_dataset_is_refused_naming_the_encoders_that_fit():
    problem = only(problems({"experiments": {"mixed": {"datasets": ["aapd"], "encoders": ["resnet8"], "losses": ["any"], "batch_sizes": [32]}}}))
    assert problem.key == "experiments.mixed.encoders"
    assert "pairs encoder 'resnet8' (kind cifar_resnet, which reads images) with dataset 'aapd', whose samples are texts" in problem.problem
    assert problem.allowed == ("minilm-top1", "minilm-lora", "plmicd-minilm")


def test_modality_follows_the_config_for_tabular_claim_data_and_datasets_of_ones_own(tmp_path):
    config = merged(DEFAULT, {"sources": {"fashion_mnist": {"pixels": 28}, "debtags": {"embed": {"kind": "hf", "path": "x"}}}})
    validate(config, str(SCHEMA))
    assert dataset_modality("fashion_mnist", config, {}) == "tabular" and dataset_modality("debtags", config, {}) == "tabular"
    assert dataset_modality("fashion_mnist", DEFAULT | {"sources": {"fashion_mnist": {}}}, {}) == "image"
    assert dataset_modality("mimic3_50", DEFAULT, {}) == "text"
    (tmp_path / "stats.json").write_text(json.dumps({"modality": "tabular"}))
    own = {"shapes": {"kind": "csv", "modality": "image"}, "notes": {"kind": "csv"}, "vectors": {"kind": "manifest", "root": str(tmp_path)},
           "later": {"kind": "manifest", "root": str(tmp_path / "not_yet")}}  # fmt: skip
    assert [dataset_modality(name, DEFAULT, own) for name in own] == ["image", "text", "tabular", None]


def test_logreg_on_text_is_refused():
    problem = only(problems(lambda c: c["experiments"]["aapd"]["losses"].append("logreg")))
    assert problem.key == "experiments.aapd.losses" and "'logreg'" in problem.problem and "texts" in problem.problem


def test_a_batch_size_the_encoders_gpus_cannot_split_is_refused():
    def change(config):
        config["encoders"]["resnet8"]["resources"]["gpu"] = 4
        config["experiments"]["batch_size"]["batch_sizes"] = [32, 64, 130]

    problem = only(problems(change))
    assert problem.key == "experiments.batch_size.batch_sizes"
    assert "batch size 130" in problem.problem and "`encoders.resnet8.resources.gpu: 4`" in problem.problem
    assert "use a multiple of 4, e.g. 128 or 132" in problem.fix


# -------------------------------------------------------------------------------- names


def test_unknown_names_are_listed_once_per_key_with_the_known_ones():
    found = problems(lambda c: c["experiments"]["image"].update(datasets=["cocoo", "vocc"], encoders=["resnet9"], losses=["simdisim"]))
    assert [p.key for p in found] == ["experiments.image.datasets", "experiments.image.encoders", "experiments.image.losses"]
    assert "names datasets 'cocoo', 'vocc', which are neither a built-in dataset setting" in found[0].problem
    assert "coco" in found[0].allowed and "sources.cocoo: {kind: csv" in found[0].fix
    assert found[1].allowed == ("resnet8", "minilm-top1", "minilm-lora", "plmicd-minilm")
    assert "mscl.register_loss" in found[2].fix and "simdissim" in found[2].allowed


def test_a_dataset_not_prepared_is_refused_saying_that_a_list_replaces_the_one_it_builds_on():
    problem = only(problems({"datasets": ["coco", "voc", "aapd", "mimic3_full"]}))
    assert problem.key == "datasets"
    assert problem.problem == (
        "is ['coco', 'voc', 'aapd', 'mimic3_full'], which leaves out datasets 'nuswide', 'mimic3_50' that "
        "experiment blocks run (image: 'nuswide'; mimic: 'mimic3_50')"
    )
    assert "a list replaces the list of the config it builds on" in problem.fix


# ------------------------------------------------------------------------------- tuning


def test_tuning_reuse_names_trained_methods_of_the_same_family():
    found = problems({"tuning": {"reuse": {"sim": "simdisim", "bce": "simdissim", "eq12": "none"}}})
    assert [p.key for p in found] == ["tuning.reuse.sim", "tuning.reuse.bce", "tuning.reuse.eq12"]
    assert "'simdisim', a method nothing defines" in found[0].problem
    assert "the bce grid" in found[1].problem and "the contrastive grid" in found[1].problem
    assert "'none', an untrained method" in found[2].problem


def test_a_tuned_block_needs_its_grid_fresh_seeds_and_a_tune_encoder_of_the_same_spec():
    claim = yaml.safe_load((REPO_ROOT / "config" / "claim.yaml").read_text())
    found = problems(lambda c: c["encoders"]["mlp"]["tune"].pop("bce"), base=claim)
    assert any(p.key == "encoders.mlp.tune.bce" and "'bce'" in p.problem for p in found)
    problem = only(problems({"tuning": {"seeds": [0, 100]}}, base=claim))
    assert problem.key == "tuning.seeds" and "shares seed 0 with the test seeds of blocks 'yeast', " in problem.problem
    problem = only(problems({"experiments": {"fashion_mnist_schedule": {"tune_encoder": "resnet9"}}}, base=claim))
    assert problem.key == "experiments.fashion_mnist_schedule.tune_encoder" and "'resnet9'" in problem.problem
    problem = only(problems({"experiments": {"fashion_mnist_schedule": {"tune_encoder": "mlp"}}}, base=claim))
    assert "'mlp' has another `spec` than 'mlp-pixels-2x'" in problem.problem


def test_a_tuning_grid_key_that_is_no_pretrain_setting_is_refused():
    claim = yaml.safe_load((REPO_ROOT / "config" / "claim.yaml").read_text())
    problem = only(problems(lambda c: c["encoders"]["mlp"]["tune"]["contrastive"].update(temprature=[0.1]), base=claim))
    assert problem.key == "encoders.mlp.tune.contrastive" and "temprature" in problem.problem


def test_tuning_metric_must_be_one_the_probe_can_select_on():
    problem = only(problems({"tuning": {"metric": "accuracy"}}))
    assert problem.key == "tuning.metric" and "map" in problem.allowed


# ------------------------------------------------------------------------------- report


def test_the_claim_reference_must_be_a_trained_method_that_runs():
    problem = only(problems({"report": {"claim": {"reference": "simdisim"}}}))
    assert problem.key == "report.claim.reference" and "not a trained method" in problem.problem
    claim = yaml.safe_load((REPO_ROOT / "config" / "claim.yaml").read_text())
    problem = only(problems({"report": {"claim": {"reference": "jaccard"}}}, base=claim))
    assert "which no experiment block runs" in problem.problem and "simdissim" in problem.allowed


def test_a_report_batch_size_no_run_of_its_tables_has_is_refused():
    problem = only(problems({"report": {"batch_size": {"image": 256}}}))
    assert problem.key == "report.batch_size.image" and problem.allowed == ("32", "64", "128")
    assert problems({"report": {"batch_size": {"image": 128}}}) == []


def test_report_display_of_an_unknown_dataset_is_refused():
    problem = only(problems({"report": {"display": {"cocoo": "COCO"}}}))
    assert problem.key == "report.display.cocoo"


# ------------------------------------------------------------------------------- message


def test_the_message_names_the_key_the_files_the_value_the_allowed_values_and_the_fix():
    problem = ConfigProblem("tuning.metric", "is 'accuracy'", "use one of the allowed metrics", ("map", "micro_f1"))
    assert problem.message("a.yaml, b.yaml") == (
        "invalid config key `tuning.metric` in a.yaml, b.yaml: is 'accuracy'. Allowed: map, micro_f1. Fix: use one of the allowed metrics"
    )
    several = problems_message([problem, ConfigProblem("seeds", "is wrong", "fix it")], "a.yaml")
    assert several.splitlines() == [
        "2 mistakes in the config (a.yaml), found before any job ran:",
        "- `tuning.metric`: is 'accuracy'. Allowed: map, micro_f1. Fix: use one of the allowed metrics",
        "- `seeds`: is wrong. Fix: fix it",
    ]


# -------------------------------------------------------------------- through snakemake -n


@pytest.mark.parametrize(
    "overlay, expected",
    [
        ({"training": {"loss_options": {"simdisim": {"form": "literal"}}}}, "`training.loss_options.simdisim`"),
        ({"experiments": {"mixed": {"datasets": ["aapd"], "encoders": ["resnet8"], "losses": ["any"], "batch_sizes": [32]}}}, "`experiments.mixed.encoders`"),
    ],
)
def test_a_dry_run_refuses_the_mistake_before_any_job(tmp_path, overlay, expected):
    """As a user runs it: the default config with their file layered over it, `snakemake -n`
    (tests/test_malformed_inputs.py runs more cases, each over a whole copy of the config)."""
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump(overlay))
    result = snakemake(tmp_path, "-n", "--configfile", str(REPO_ROOT / "config.yaml"), str(mine), check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and f"invalid config key {expected} in" in output and str(mine) in output and "Fix:" in output
    assert len(output.splitlines()) < 10
    assert not (tmp_path / "data").exists() and not (tmp_path / "results").exists()
