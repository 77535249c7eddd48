"""The run spec: everything one pretraining + probe job needs besides the data, validated.

`RunSpec.from_mapping(d)` fills defaults, rejects unknown keys and bad values with a
`ValueError` that names the key and the fix, and resolves every "auto" that depends only on
the spec (optimizer, learning rate, weight decay). The device-dependent "auto" (precision) is
resolved at run time and recorded in versions.json, so a checkpoint can resume on another
machine. `to_dict()` of a resolved spec parses back to the same spec.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

from mscl.defaults import MAX_SEED
from mscl.errors import InputError
from mscl.io import read_json
from mscl import registry
from mscl.metrics import FAMILY_MACRO_F1
from mscl.plugins import load_spec_plugins
from mscl.tuning import UNTRAINED_METHODS  # noqa: F401  (re-exported: pretrain reads it here)
# The loss spec, the phase blocks and the value checks live in the light mscl.train.settings
# (the workflow checks the config with them); their names stay importable from here.
from mscl.train.settings import (  # noqa: F401
    SELECT_METRICS,
    LossSpec,
    ProbeSpec,
    PretrainSpec,
    build_block,
    int_at_least,
    int_in,
    non_empty_string,
    one_of,
    pretrain_settings,
)

# Encoder kinds that load a model folder from `encoder["path"]`.
FOLDER_KINDS = ("hf", "llama_lora", "plm_icd")
# Reference methods that run through the same pretrain + probe jobs as the losses (the {loss}
# wildcard): `none` probes the encoder as initialised (no training at all: pretrained weights
# for text, a random initialisation otherwise); `bce` trains the encoder end to end with a
# linear classifier and BCE on the labels (supervised), under the same optimiser, schedule,
# epochs and views as the contrastive runs, before the same linear probe; `logreg` is the
# simplest baseline, per-label logistic regression on the inputs themselves: the same probe on
# an identity encoder (tabular features, or an image's pixels at the eval view; not for text).
BASELINES = ("none", "bce", "logreg")


def check_method(name: Any) -> None:
    """A spec's `loss`: a built-in or registered loss, or a reference method (mscl.registry)."""
    if name not in registry.method_names():
        raise ValueError(registry.unknown_name_message("loss", name, registry.method_names(), "spec key 'loss'"))


def resolve_pretrain(block: PretrainSpec, encoder_kind: str, batch_size: int) -> PretrainSpec:
    """Replace optimizer/lr/weight_decay "auto" by their values for this encoder and batch."""
    modality = registry.encoder_modality(encoder_kind)
    optimizer = block.optimizer if block.optimizer != "auto" else ("sgd" if modality == "image" else "adamw")
    if block.lr != "auto":
        lr = float(block.lr)
    elif optimizer == "sgd":
        lr = 0.05 * batch_size / 256
    else:
        lr = {"llama_lora": 1e-4, "mlp": 4e-4}.get(encoder_kind, 2e-5)
    if block.weight_decay != "auto":
        weight_decay = float(block.weight_decay)
    elif optimizer == "sgd":
        weight_decay = 1e-4
    else:
        weight_decay = 1e-5 if encoder_kind == "mlp" else 0.01
    return replace(block, optimizer=optimizer, lr=lr, weight_decay=weight_decay)


# ------------------------------------------------------------------------------ spec

_REQUIRED = ("dataset", "encoder_name", "encoder", "loss", "batch_size")


@dataclass(frozen=True)
class RunSpec:
    """One run: dataset x encoder x loss x batch size x seed, with both phases' settings.

    Read from and written as the mapping users write (`from_mapping`, `to_dict`): the loss's
    name as `loss`, its options as `loss_options` and its temperature in the pretrain block,
    `pretrain.temperature`."""

    dataset: str
    encoder_name: str
    encoder: dict
    loss: LossSpec
    batch_size: int
    seed: int = 0
    pretrain: PretrainSpec = field(default_factory=PretrainSpec)
    probe: ProbeSpec = field(default_factory=ProbeSpec)
    # The encoder whose tuning selection set this run's values, when not its own: the same
    # network under another name, e.g. a longer schedule (the config's `tune_encoder`).
    tuned_encoder: str | None = None
    # The dataset's family (mscl.metrics.FAMILY_MACRO_F1: what its macro_f1 means), for a dataset
    # of one's own (a csv or manifest source), whose name mscl.metrics.DATASET_FAMILIES lacks.
    dataset_family: str | None = None
    # The plugins that registered this run's loss or encoder kind (mscl.plugins), each
    # {plugin: as the config lists it, sha256: its file's hash}; imported before the spec is read.
    plugins: tuple = ()

    @property
    def encoder_kind(self) -> str:
        return self.encoder["kind"]

    @property
    def modality(self) -> str:
        """"image", "text" or "tabular"."""
        return registry.encoder_modality(self.encoder_kind)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> "RunSpec":
        """Validate a spec mapping, fill defaults and resolve the spec-dependent "auto"s."""
        if not isinstance(data, Mapping):
            raise ValueError(f"the run spec must be a mapping, got {type(data).__name__}")
        allowed = {*(f.name for f in fields(cls)), "loss_options"}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise ValueError(f"unknown spec key(s) {unknown}; fix: use only {sorted(allowed)}")
        missing = [key for key in _REQUIRED if key not in data]
        if missing:
            raise ValueError(f"spec key(s) {missing} missing; fix: add them (required: {list(_REQUIRED)})")
        non_empty_string("dataset", data["dataset"])
        non_empty_string("encoder_name", data["encoder_name"])
        _check_encoder(data["encoder"])
        check_method(data["loss"])
        int_at_least(1)("batch_size", data["batch_size"])
        seed = data.get("seed", 0)
        int_in(0, MAX_SEED)("seed", seed)
        pretrain, temperature = pretrain_settings(data.get("pretrain"), "pretrain")
        probe = build_block(ProbeSpec, data.get("probe"), "probe")
        if data.get("tuned_encoder") is not None:
            non_empty_string("tuned_encoder", data["tuned_encoder"])
        if data.get("dataset_family") is not None:
            one_of(tuple(FAMILY_MACRO_F1))("dataset_family", data["dataset_family"])
        return cls(
            dataset=data["dataset"],
            encoder_name=data["encoder_name"],
            encoder=dict(data["encoder"]),
            loss=LossSpec(data["loss"], temperature, data.get("loss_options", {})),
            batch_size=data["batch_size"],
            seed=seed,
            pretrain=resolve_pretrain(pretrain, data["encoder"]["kind"], data["batch_size"]),
            probe=probe,
            tuned_encoder=data.get("tuned_encoder"),
            dataset_family=data.get("dataset_family"),
            plugins=tuple(dict(entry) for entry in data.get("plugins") or ()),
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready mapping, in the layout users write; `from_mapping(to_dict())` gives
        this spec back."""
        mapping = asdict(self)
        for optional in ("tuned_encoder", "dataset_family", "plugins"):
            if not mapping[optional]:
                del mapping[optional]  # the usual case: a spec without it reads, and resumes, as before
        if "plugins" in mapping:
            mapping["plugins"] = [dict(entry) for entry in mapping["plugins"]]
        loss = mapping.pop("loss")
        mapping["pretrain"]["temperature"] = loss["temperature"]
        return {**mapping, "loss": loss["name"], "loss_options": loss["options"]}


# The run spec's keys pretraining does not read. The workflow leaves them out of a pretrain job's
# spec, and the job out of its checkpoint check and resolved_spec.json, so that a probe-only
# change neither reruns nor restarts a pretraining (docs/reruns.md).
PROBE_ONLY_KEYS = ("probe",)


def pretrain_view(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """A spec mapping without the keys pretraining does not read."""
    return {key: value for key, value in mapping.items() if key not in PROBE_ONLY_KEYS}


def _check_encoder(encoder: Any) -> None:
    if not isinstance(encoder, Mapping) or "kind" not in encoder:
        raise ValueError(f"spec key 'encoder' is {encoder!r}; fix: give a mapping with a 'kind' key")
    if encoder["kind"] not in registry.encoder_kinds():
        raise ValueError(registry.unknown_name_message("encoder kind", encoder["kind"], registry.encoder_kinds(), "spec key 'encoder.kind'"))
    if encoder["kind"] in FOLDER_KINDS:
        non_empty_string("encoder.path", encoder.get("path"))


# --------------------------------------------------------------------------- loading


def read_spec_mapping(value: str) -> dict[str, Any]:
    """The --spec argument as a mapping: inline JSON (starts with "{") or a JSON/YAML file."""
    if value.lstrip().startswith("{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError as error:
            raise InputError("--spec", f"inline JSON does not parse ({error})", "pass valid JSON or a file path")
    path = Path(value)
    if not path.is_file():
        raise InputError(path, "spec file not found", "pass an existing JSON/YAML file or inline JSON starting with '{'")
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() in {".yaml", ".yml"}:
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise InputError(path, f"YAML does not parse ({error})", "fix the YAML syntax")
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(path, f"JSON does not parse ({error})", "fix the JSON syntax (or name the file .yaml)")


def with_selected_setting(mapping: Mapping[str, Any], selected: Path) -> dict[str, Any]:
    """`mapping` with the pretrain keys of a tuning selection (`python -m mscl select-setting`,
    selected.json: {"dataset", "encoder_name", "method", "chosen", "pretrain": {key: value}})
    written over its `pretrain` block. The selection must be for the spec's dataset and encoder
    (its `tuned_encoder` when it has one); its method may differ (the ablations reuse
    Sim-Dissim's setting, docs/claim-check.md)."""
    document = read_json(selected, "tuning selection", "run the tuning jobs and `python -m mscl select-setting` first", "rerun `python -m mscl select-setting`")
    if not isinstance(document, dict) or not isinstance(document.get("pretrain"), dict):
        raise InputError(selected, "no 'pretrain' mapping of chosen values", "rerun `python -m mscl select-setting`", field="pretrain")
    expected = {"dataset": mapping.get("dataset"), "encoder_name": mapping.get("tuned_encoder") or mapping.get("encoder_name")}
    for key, value in expected.items():
        if document.get(key) != value:
            raise InputError(
                selected, f"the selection is for {key} {document.get(key)!r}, the run spec has {value!r}",
                "pass the selection made for this run's dataset and encoder (or its tuned_encoder)", field=key,
            )  # fmt: skip
    pretrain = mapping.get("pretrain") or {}
    if not isinstance(pretrain, Mapping):
        raise ValueError(f"spec key 'pretrain' must be a mapping of options, got {type(pretrain).__name__}")
    return {**mapping, "pretrain": {**pretrain, **document["pretrain"]}}


def load_spec(value: str, selected: Path | None = None) -> RunSpec:
    """Parse and validate --spec (with a tuning selection's values when `selected` is given);
    problems become an InputError naming the key and the fix."""
    mapping = read_spec_mapping(value)
    if selected is not None:
        mapping = with_selected_setting(mapping, selected)
    where = "--spec" if value.lstrip().startswith("{") else value
    if isinstance(mapping, Mapping):
        load_spec_plugins(mapping.get("plugins"), where)  # their names are valid from here on
    try:
        return RunSpec.from_mapping(mapping)
    except ValueError as error:
        raise InputError(where, str(error), "edit the run spec (docs/training.md lists every key)")
