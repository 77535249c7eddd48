"""The training settings of a run spec (its loss and its `pretrain` and `probe` blocks) and
the checks of every spec value: standard library only, so that the workflow checks the config's
training settings (`settings_problem`) while it parses, before any job runs, without importing
torch. `mscl.train.spec` builds the whole run spec from these, and `mscl.losses` builds a loss
from a `LossSpec`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Mapping

OPTIMIZERS = ("sgd", "adamw")
PRECISIONS = ("bf16", "fp32")
TEXT_VIEWS = ("dropout", "token_dropout")
IMAGE_DECODES = ("auto", "cpu", "gpu")  # pretrain.decode (mscl.train.decode)
# Metrics of `mscl.metrics.evaluate` that grow with quality, so the probe may select on them.
SELECT_METRICS = (
    "micro_f1", "macro_f1", "map", "micro_auc", "macro_auc", "p_at_5", "p_at_8",
    "micro_precision", "micro_recall", "macro_precision", "macro_recall",
    "macro_f1_caml", "macro_f1_per_class",  # macro_f1 is the dataset family's one of these two
)  # fmt: skip

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


def int_in(low: int, high: int) -> Check:
    def check(key: str, value: Any) -> None:
        if not _is_int(value) or not low <= value <= high:
            _fail(key, value, f"an integer in [{low}, {high}]")

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


# ------------------------------------------------------------------------------ loss

# Paper: tau = 0.07. The one default of the temperature (mscl.losses takes it from here).
DEFAULT_TEMPERATURE = 0.07
check_temperature = number_in(0.0, math.inf, low_open=True)
# Loss options a run fills in itself: the label count from the data and the prototype
# dimension from `pretrain.projection_dim` (prototype losses).
RUN_LOSS_OPTIONS = ("num_labels", "dim")


@dataclass(frozen=True)
class LossSpec:
    """A run's loss: the method (the {loss} wildcard), its temperature tau and its own options
    (`loss_options`, e.g. simdissim's `form`, msc's `alpha` and `beta`), validated once, here.

    Users set tau in the pretrain block, `pretrain.temperature` (configs and tuning grids keep
    it beside the other pretraining values, and recorded specs show it there): the run spec
    moves it into its LossSpec when it reads a spec and back when it writes one
    (`mscl.train.spec`).
    """

    name: str
    temperature: float = DEFAULT_TEMPERATURE
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        non_empty_string("loss", self.name)
        check_temperature("pretrain.temperature", self.temperature)
        if not isinstance(self.options, Mapping):
            raise ValueError(f"spec key 'loss_options' is {self.options!r}; fix: give a mapping (or leave it out)")
        set_elsewhere = sorted(set(self.options) & {"temperature", *RUN_LOSS_OPTIONS})
        if set_elsewhere:
            raise ValueError(
                f"spec key(s) {[f'loss_options.{k}' for k in set_elsewhere]} are set by the run; fix: remove them "
                "(temperature comes from pretrain.temperature, num_labels from the data, dim from "
                "pretrain.projection_dim)"
            )
        object.__setattr__(self, "options", dict(self.options))  # its own copy


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
    # DataLoader workers. auto: one per torch thread (the job's `threads`) for image data, whose
    # JPEG decoding and cropping starves a GPU on one core (docs/scale.md), none for text and
    # tabular data; 0 loads in the training process. Views do not depend on it.
    num_workers: Any = _option("auto", auto_or(int_at_least(0)))
    # Where training JPEGs are decoded and cropped: cpu (Pillow, in the DataLoader workers), gpu
    # (torchvision's nvJPEG decoder and the crops on the GPU; the workers only read the files)
    # or auto (gpu where torchvision decodes on the run's GPU, else cpu). Both cut the same crop
    # boxes; their views differ only where the decoders do (docs/gpu.md).
    decode: str = _option("auto", one_of(IMAGE_DECODES))
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


def build_block(cls: type, data: Any, prefix: str, elsewhere: tuple[str, ...] = ()) -> Any:
    """Build a spec block from a mapping: unknown keys and failing checks raise ValueError.
    Keys in `elsewhere` are the block's too but belong to another part of the spec: accepted
    here and left to it."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ValueError(f"spec key {prefix!r} must be a mapping of options, got {type(data).__name__}")
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known) - set(elsewhere))
    if unknown:
        raise ValueError(f"unknown spec key(s) {[f'{prefix}.{k}' for k in unknown]}; fix: use only {sorted({*known, *elsewhere})}")
    for name, value in data.items():
        if name in known:
            known[name].metadata["check"](f"{prefix}.{name}", value)
    return cls(**{name: value for name, value in data.items() if name in known})


def pretrain_settings(data: Any, prefix: str) -> tuple[PretrainSpec, Any]:
    """The `pretrain` block as users write it: its PretrainSpec and the loss temperature they
    set there too (`pretrain.temperature`, checked when the LossSpec is made)."""
    block = build_block(PretrainSpec, data, prefix, elsewhere=("temperature",))
    return block, (data or {}).get("temperature", DEFAULT_TEMPERATURE)


def settings_problem(phase: str, data: Any, key: str) -> str | None:
    """Why `data` is not a valid `phase` block ("pretrain" or "probe") of a run spec, naming
    the offending key under `key` (e.g. "training.probe"); None when it is valid."""
    try:
        if phase == "pretrain":
            check_temperature(f"{key}.temperature", pretrain_settings(data, key)[1])
        else:
            build_block(ProbeSpec, data, key)
    except ValueError as error:
        return str(error)
    return None
