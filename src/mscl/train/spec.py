"""The run spec: everything one pretraining + probe job needs besides the data, validated.

`RunSpec.from_mapping(d)` fills defaults, rejects unknown keys and bad values with a
`ValueError` that names the key and the fix, and resolves every "auto" that depends only on
the spec (optimizer, learning rate, weight decay). The device-dependent "auto" (precision) is
resolved at run time and recorded in versions.json, so a checkpoint can resume on another
machine. `to_dict()` of a resolved spec parses back to the same spec.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from mscl.errors import InputError
from mscl.losses import LOSS_NAMES
from mscl.models import ENCODER_MODALITY
from mscl.tuning import UNTRAINED_METHODS  # noqa: F401  (re-exported: pretrain reads it here)

# Encoder kinds that load a model folder from `encoder["path"]`.
FOLDER_KINDS = ("hf", "llama_lora", "plm_icd")
OPTIMIZERS = ("sgd", "adamw")
PRECISIONS = ("bf16", "fp32")
TEXT_VIEWS = ("dropout", "token_dropout")
# Reference methods that run through the same pretrain + probe jobs as the losses (the {loss}
# wildcard): `none` probes the encoder as initialised (no training at all: pretrained weights
# for text, a random initialisation otherwise); `bce` trains the encoder end to end with a
# linear classifier and BCE on the labels (supervised), under the same optimiser, schedule,
# epochs and views as the contrastive runs, before the same linear probe; `logreg` is the
# simplest baseline, per-label logistic regression on the inputs themselves: the same probe on
# an identity encoder (tabular features, or an image's pixels at the eval view; not for text).
BASELINES = ("none", "bce", "logreg")
METHODS = (*LOSS_NAMES, *BASELINES)
# Metrics of `mscl.metrics.evaluate` that grow with quality, so the probe may select on them.
SELECT_METRICS = (
    "micro_f1", "macro_f1", "map", "micro_auc", "macro_auc", "p_at_5", "p_at_8",
    "micro_precision", "micro_recall", "macro_precision", "macro_recall",
    "macro_f1_caml", "macro_f1_per_class",  # macro_f1 is the dataset family's one of these two
)  # fmt: skip
# Loss options the run fills in itself: temperature from `pretrain.temperature`, the label
# count from the data and the prototype dimension from `pretrain.projection_dim`.
RESERVED_LOSS_OPTIONS = ("temperature", "num_labels", "dim")

Check = Callable[[str, Any], None]


# ----------------------------------------------------------------------------- checks


def _fail(key: str, value: Any, expected: str) -> None:
    raise ValueError(f"spec key {key!r} is {value!r}; fix: set it to {expected}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)) and math.isfinite(value)


def int_at_least(minimum: int) -> Check:
    def check(key: str, value: Any) -> None:
        if not _is_int(value) or value < minimum:
            _fail(key, value, f"an integer >= {minimum}")

    return check


def number_in(low: float, high: float, low_open: bool = False, high_open: bool = False) -> Check:
    """A finite number in [low, high] (either end optionally open)."""

    def check(key: str, value: Any) -> None:
        ok = _is_number(value) and (value > low if low_open else value >= low)
        ok = ok and (value < high if high_open else value <= high)
        if not ok:
            _fail(key, value, f"a number in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}")

    return check


def one_of(choices: tuple[str, ...]) -> Check:
    def check(key: str, value: Any) -> None:
        if value not in choices:
            _fail(key, value, f"one of {list(choices)}")

    return check


def auto_or(inner: Check) -> Check:
    def check(key: str, value: Any) -> None:
        if value != "auto":
            inner(key, value)

    return check


def null_or(inner: Check) -> Check:
    def check(key: str, value: Any) -> None:
        if value is not None:
            inner(key, value)

    return check


def boolean(key: str, value: Any) -> None:
    if not isinstance(value, bool):
        _fail(key, value, "true or false")


def non_empty_string(key: str, value: Any) -> None:
    if not isinstance(value, str) or not value:
        _fail(key, value, "a non-empty string")


def _option(default: Any, check: Check) -> Any:
    """A dataclass field with a default and the check its values must pass."""
    return field(default=default, metadata={"check": check})


# ---------------------------------------------------------------------------- blocks


@dataclass(frozen=True)
class PretrainSpec:
    """Contrastive pretraining of encoder + projection head (paper appendix, GUIDE §3)."""

    # The paper gives no epoch count; 3 keeps the CPU demo in minutes (paper configs set it).
    epochs: int = _option(3, int_at_least(1))
    # Paper: SGD with momentum for ResNet, AdamW for RoBERTa/Llama; auto picks by modality.
    optimizer: str = _option("auto", auto_or(one_of(OPTIMIZERS)))
    # auto: SGD 0.05 * batch_size / 256 (SupCon's linear scaling rule, 0.05 per 256 samples);
    # AdamW 2e-5 on hf/plm_icd (RoBERTa fine-tuning norm), 1e-4 on llama_lora (LoRA norm) and
    # 4e-4 on mlp (MulSupCon's yeast setting).
    lr: Any = _option("auto", auto_or(number_in(0.0, math.inf, low_open=True)))
    # Standard SGD momentum (SupCon, SimCLR); AdamW ignores it.
    momentum: float = _option(0.9, number_in(0.0, 1.0, high_open=True))
    # auto: 1e-4 for SGD (SupCon ResNet recipe), 0.01 for AdamW (paper, RoBERTa), 1e-5 for
    # mlp (MulSupCon's yeast setting).
    weight_decay: Any = _option("auto", auto_or(number_in(0.0, math.inf)))
    # Paper: cosine schedule with a 0.05 warm-up period (fraction of all steps).
    warmup_fraction: float = _option(0.05, number_in(0.0, 1.0, high_open=True))
    # Paper: tau = 0.07.
    temperature: float = _option(0.07, number_in(0.0, math.inf, low_open=True))
    # Paper: projection dimension D_P = 256.
    projection_dim: int = _option(256, int_at_least(1))
    # Paper: 224 x 224 input images (demo configs lower it for 32 px images).
    image_size: int = _option(224, int_at_least(8))
    # SimCLR's random resized crop keeps 8%-100% of the area; 0.2 (SupCon's setting) keeps
    # small objects of multi-label images in the crop more often.
    crop_scale_min: float = _option(0.2, number_in(0.0, 1.0, low_open=True))
    # Two dropout-noised passes (SimCSE), GUIDE §3; token_dropout also hides 10% of tokens.
    text_views: str = _option("dropout", one_of(TEXT_VIEWS))
    # Tabular views: each standardised feature is zeroed (set to its train mean) with this
    # probability, independently per view: MulSupCon's vector augmentation (p = 0.5 on yeast).
    feature_mask_rate: float = _option(0.5, number_in(0.0, 1.0, high_open=True))
    # 0 loads in the training process: deterministic and enough for the tiny demo data.
    num_workers: int = _option(0, int_at_least(0))
    # null trains on every full batch; an integer caps steps (smoke runs, benchmarks).
    max_steps_per_epoch: Any = _option(None, null_or(int_at_least(1)))
    # auto: bf16 autocast on CUDA (paper: bf16 for Llama), fp32 on CPU (bf16 is slow there).
    precision: str = _option("auto", auto_or(one_of(PRECISIONS)))
    # null: no clipping (the paper mentions none); a number clips the global grad norm.
    grad_clip: Any = _option(None, null_or(number_in(0.0, math.inf, low_open=True)))
    # 0: off. k > 0: every k epochs and after the last one, the convergence monitor fits a ridge
    # readout of the labels on the encoder's eval-mode train features and logs its val mAP in
    # train_log.csv (`val_map_readout`; mscl.train.monitor). Costs one feature pass over train
    # and val per check; the trained weights do not depend on it.
    monitor_every: int = _option(0, int_at_least(0))


@dataclass(frozen=True)
class ProbeSpec:
    """Linear probe on the frozen encoder, trained with BCE (paper appendix)."""

    # Not given by the paper; 30 Adam epochs converge a linear layer on cached features.
    epochs: int = _option(30, int_at_least(1))
    # Adam's usual 1e-3, stable for a single linear layer.
    lr: float = _option(1e-3, number_in(0.0, math.inf, low_open=True))
    # No regularisation by default: the val-selected epoch already limits overfitting.
    weight_decay: float = _option(0.0, number_in(0.0, math.inf))
    # Features are cached, so a large batch is cheap; 256 gives enough steps per epoch.
    batch_size: int = _option(256, int_at_least(1))
    # The paper's headline metric; ties keep the earlier epoch.
    select_metric: str = _option("micro_f1", one_of(SELECT_METRICS))
    # Not in the paper: standardise every feature dimension by the train split's mean and std
    # before the linear layer (MAE's linear probe puts a BatchNorm without affine there). Feature
    # scales differ tenfold between encoders and between a trained and an untrained encoder
    # (ResNet-8 pooled features: about 0.1 untrained, 0.4 trained), and with raw features one
    # probe lr under-trains some of them: on the COCO demo the untrained ResNet-8 probed at mAP
    # 0.12 raw vs 0.23 standardised, after the same 30 epochs.
    standardize: bool = _option(True, boolean)


def _block(cls: type, data: Any, prefix: str) -> Any:
    """Build a spec block from a mapping: unknown keys and failing checks raise ValueError."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ValueError(f"spec key {prefix!r} must be a mapping of options, got {type(data).__name__}")
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ValueError(f"unknown spec key(s) {[f'{prefix}.{k}' for k in unknown]}; fix: use only {sorted(known)}")
    for name, value in data.items():
        known[name].metadata["check"](f"{prefix}.{name}", value)
    return cls(**dict(data))


def resolve_pretrain(block: PretrainSpec, encoder_kind: str, batch_size: int) -> PretrainSpec:
    """Replace optimizer/lr/weight_decay "auto" by their values for this encoder and batch."""
    modality = ENCODER_MODALITY[encoder_kind]
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
    """One run: dataset x encoder x loss x batch size x seed, with both phases' settings."""

    dataset: str
    encoder_name: str
    encoder: dict
    loss: str
    batch_size: int
    loss_options: dict = field(default_factory=dict)
    seed: int = 0
    pretrain: PretrainSpec = field(default_factory=PretrainSpec)
    probe: ProbeSpec = field(default_factory=ProbeSpec)

    @property
    def encoder_kind(self) -> str:
        return self.encoder["kind"]

    @property
    def modality(self) -> str:
        """"image", "text" or "tabular"."""
        return ENCODER_MODALITY[self.encoder_kind]

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> "RunSpec":
        """Validate a spec mapping, fill defaults and resolve the spec-dependent "auto"s."""
        if not isinstance(data, Mapping):
            raise ValueError(f"the run spec must be a mapping, got {type(data).__name__}")
        allowed = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise ValueError(f"unknown spec key(s) {unknown}; fix: use only {sorted(allowed)}")
        missing = [key for key in _REQUIRED if key not in data]
        if missing:
            raise ValueError(f"spec key(s) {missing} missing; fix: add them (required: {list(_REQUIRED)})")
        non_empty_string("dataset", data["dataset"])
        non_empty_string("encoder_name", data["encoder_name"])
        _check_encoder(data["encoder"])
        one_of(METHODS)("loss", data["loss"])
        loss_options = _checked_loss_options(data.get("loss_options", {}))
        int_at_least(1)("batch_size", data["batch_size"])
        seed = data.get("seed", 0)
        int_at_least(0)("seed", seed)
        pretrain = _block(PretrainSpec, data.get("pretrain"), "pretrain")
        probe = _block(ProbeSpec, data.get("probe"), "probe")
        return cls(
            dataset=data["dataset"],
            encoder_name=data["encoder_name"],
            encoder=dict(data["encoder"]),
            loss=data["loss"],
            batch_size=data["batch_size"],
            loss_options=loss_options,
            seed=seed,
            pretrain=resolve_pretrain(pretrain, data["encoder"]["kind"], data["batch_size"]),
            probe=probe,
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready mapping; `from_mapping(to_dict())` gives this spec back."""
        return asdict(self)


def _check_encoder(encoder: Any) -> None:
    if not isinstance(encoder, Mapping) or "kind" not in encoder:
        raise ValueError(f"spec key 'encoder' is {encoder!r}; fix: give a mapping with a 'kind' key")
    one_of(tuple(ENCODER_MODALITY))("encoder.kind", encoder["kind"])
    if encoder["kind"] in FOLDER_KINDS:
        non_empty_string("encoder.path", encoder.get("path"))


def _checked_loss_options(options: Any) -> dict:
    if not isinstance(options, Mapping):
        raise ValueError(f"spec key 'loss_options' is {options!r}; fix: give a mapping (or leave it out)")
    reserved = sorted(set(options) & set(RESERVED_LOSS_OPTIONS))
    if reserved:
        raise ValueError(
            f"spec key(s) {[f'loss_options.{k}' for k in reserved]} are set by the run; fix: remove them "
            "(temperature comes from pretrain.temperature, num_labels from the data, dim from "
            "pretrain.projection_dim)"
        )
    return dict(options)


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
    written over its `pretrain` block. The selection must be for the spec's dataset and encoder;
    its method may differ (the ablations reuse Sim-Dissim's setting, docs/claim-check.md)."""
    try:
        document = json.loads(Path(selected).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(selected, "tuning selection not found", "run the tuning jobs and `python -m mscl select-setting` first") from None
    except json.JSONDecodeError as error:
        raise InputError(selected, f"not valid JSON ({error.msg})", "rerun `python -m mscl select-setting`") from None
    if not isinstance(document, dict) or not isinstance(document.get("pretrain"), dict):
        raise InputError(selected, "no 'pretrain' mapping of chosen values", "rerun `python -m mscl select-setting`", field="pretrain")
    for key in ("dataset", "encoder_name"):
        if document.get(key) != mapping.get(key):
            raise InputError(
                selected, f"the selection is for {key} {document.get(key)!r}, the run spec has {mapping.get(key)!r}",
                "pass the selection made for this run's dataset and encoder", field=key,
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
    try:
        return RunSpec.from_mapping(mapping)
    except ValueError as error:
        raise InputError(where, str(error), "edit the run spec (docs/training.md lists every key)")
