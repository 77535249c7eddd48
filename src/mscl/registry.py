"""One place per name: the losses, reference methods and encoder kinds a config may name.

Built-in names are listed here with their display names (the paper's row names), and a plugin
(a Python file or module the config's `plugins:` lists, `mscl.plugins`) adds its own through
the three functions the package exports at its top level (docs/extending.md):

    mscl.register_pair_loss(name, weights, display=None)
        a weighted-pair loss (`mscl.losses.PairLoss`) by its weight function: LabelOverlap ->
        [B, B] weights W (0: not a positive), as the built-in ALL, ANY and Sim-Dissim are;
    mscl.register_loss(name, factory, options=(), display=None)
        a whole loss module: factory(temperature, **options) -> torch.nn.Module whose
        forward(features [B, V, D], labels [B, L]) returns the batch loss; `options` names the
        keys it takes from `training.loss_options.<name>` (and `num_labels`, `dim`, which the
        run fills in with the label count and the projection dimension);
    mscl.register_encoder(kind, builder, modality)
        an encoder kind for `encoders.<name>.spec.kind`: builder(spec, num_labels) ->
        mscl.models.Encoder, on inputs of `modality` (image, text or tabular).

The name is what the config writes and what the results tree, all_runs.csv and the benchmark
table's csv use; the display name is what tables and figures show. The workflow checks every
name the config uses against this registry before any job starts, and the schema's lists of
losses and encoder kinds are these.

Standard library only: the workflow imports it while it parses, and `import mscl` stays light.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator

# Built-in losses (mscl.losses.LOSSES builds each) -> display name, in the paper's row order
# (Table "results-image"), then the ablation variants and Eq. 12 as printed.
BUILTIN_LOSSES = {
    "all": "ALL",
    "any": "ANY",
    "mulsupcon": "MulSupCon",
    "simdissim": "Sim-Dissim",
    "jaccard": "Jaccard",
    "proto": "Class proto",
    "msc": "MSC",
    "sim": "Sim only",
    "dissim": "Dissim only",
    "eq12": "Eq. 12 as printed",
}
# The options each built-in loss takes from `training.loss_options.<name>` besides the
# temperature (mscl.losses.LOSSES builds with them; a test keeps both equal), declared here so
# that the workflow checks a config's options while it parses, without importing torch.
# `num_labels` and `dim` are filled in by the run (mscl.train.settings.RUN_LOSS_OPTIONS).
BUILTIN_LOSS_OPTIONS = {
    "simdissim": ("form",),
    "proto": ("num_labels", "dim"),
    "msc": ("num_labels", "dim", "alpha", "beta"),
}
# Options whose values are a fixed choice: Sim-Dissim's `form` (mscl.losses.PairLoss: the weight
# multiplies log p, or sits inside the log as Eq. 12 prints it).
LOSS_OPTION_CHOICES = {("simdissim", "form"): ("weighted", "literal")}
# Reference methods that run through the same jobs as the losses (mscl.train.spec.BASELINES),
# and the label prior (`chance`, its own rule), with their display names.
REFERENCE_METHODS = {
    "none": "No pretraining",
    "bce": "Supervised BCE",
    "logreg": "Logistic regression on inputs",
    "chance": "Chance (label prior)",
}
# Built-in encoder kinds (mscl.models builds each) -> the modality of their inputs.
BUILTIN_ENCODER_KINDS = {
    "resnet": "image",
    "torchvision": "image",
    "cifar_resnet": "image",
    "hf": "text",
    "llama_lora": "text",
    "plm_icd": "text",
    "mlp": "tabular",
}
MODALITIES = ("image", "text", "tabular")
# A name becomes a path component and a Snakemake wildcard value: letters, digits, _ and -.
NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
WHERE_TO_REGISTER = (
    "register one in a plugin file listed under `plugins:` in the config, with mscl.register_pair_loss, "
    "mscl.register_loss or mscl.register_encoder (docs/extending.md)"
)


@dataclass(frozen=True)
class PluginLoss:
    """A registered loss: a pair loss's weight function (mscl.losses builds its PairLoss), or
    a whole module's factory (temperature, **options) -> torch.nn.Module."""

    name: str
    display: str
    weights: Callable[[Any], Any] | None
    factory: Callable[..., Any] | None
    options: frozenset[str]
    source: str  # the plugin (as the config lists it) that registered it


@dataclass(frozen=True)
class PluginEncoder:
    kind: str
    builder: Callable[..., Any]  # (spec, num_labels) -> mscl.models.Encoder
    modality: str
    source: str


_PLUGIN_LOSSES: dict[str, PluginLoss] = {}
_PLUGIN_ENCODERS: dict[str, PluginEncoder] = {}
# The plugin being imported (mscl.plugins sets it): what its registrations are attributed to.
_loading: list[str] = []


class RegistrationError(ValueError):
    """A name a plugin cannot register (taken, malformed, or a bad argument)."""


@contextlib.contextmanager
def loading(source: str) -> Iterator[None]:
    """Attribute the registrations made inside the block to plugin `source`."""
    _loading.append(source)
    try:
        yield
    finally:
        _loading.pop()


def _source() -> str:
    return _loading[-1] if _loading else "<not a plugin>"


def _check_name(what: str, name: Any, taken: dict[str, str]) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise RegistrationError(
            f"{what} name {name!r} is not a valid name: it becomes a path component and a wildcard value, so use a letter "
            f"then letters, digits, '_' or '-' (e.g. 'my_loss')"
        )
    if name in taken:
        raise RegistrationError(f"{what} name {name!r} is taken ({taken[name]}); choose another name in {_source()}")
    return name


def _taken_loss_names() -> dict[str, str]:
    taken = {name: "a built-in loss" for name in BUILTIN_LOSSES}
    taken.update({name: "a reference method" for name in REFERENCE_METHODS})
    taken.update({name: f"registered by {entry.source}" for name, entry in _PLUGIN_LOSSES.items()})
    return taken


def _add_loss(name: str, weights: Callable[..., Any] | None, factory: Callable[..., Any] | None, options: Any, display: str | None) -> None:
    existing = _PLUGIN_LOSSES.get(name)
    if existing is not None and existing.source == _source():
        del _PLUGIN_LOSSES[name]  # the same plugin imported again (another config, a test)
    _check_name("loss", name, _taken_loss_names())
    if weights is None and not callable(factory):
        raise RegistrationError(f"loss {name!r}: the factory must be callable, got {type(factory).__name__}")
    if isinstance(options, str) or not all(isinstance(option, str) for option in options):
        raise RegistrationError(f"loss {name!r}: options must be a list of option names, got {options!r}")
    if display is not None and (not isinstance(display, str) or not display.strip()):
        raise RegistrationError(f"loss {name!r}: display must be a non-empty string, got {display!r}")
    _PLUGIN_LOSSES[name] = PluginLoss(name, display or name, weights, factory, frozenset(options), _source())


def register_pair_loss(name: str, weights: Callable[[Any], Any], display: str | None = None) -> None:
    """Register a weighted-pair loss: `weights(overlap)` maps an `mscl.losses.LabelOverlap`
    (`sizes` [B] label-set sizes, `intersection` [B, B] overlaps) to the [B, B] sample weights W
    (0 where the pair is no positive), exactly as the built-in weight functions do."""
    if not callable(weights):
        raise RegistrationError(f"pair loss {name!r}: weights must be callable (LabelOverlap -> [B, B] tensor), got {type(weights).__name__}")
    _add_loss(name, weights, None, (), display)


def register_loss(name: str, factory: Callable[..., Any], options: tuple[str, ...] | list[str] = (), display: str | None = None) -> None:
    """Register a whole loss module: `factory(temperature, **options)` builds it."""
    _add_loss(name, None, factory, options if isinstance(options, str) else tuple(options), display)


def register_encoder(kind: str, builder: Callable[..., Any], modality: str) -> None:
    """Register an encoder kind: `builder(spec, num_labels)` builds it for inputs of `modality`."""
    existing = _PLUGIN_ENCODERS.get(kind)
    if existing is not None and existing.source == _source():
        del _PLUGIN_ENCODERS[kind]
    taken = {name: "a built-in encoder kind" for name in BUILTIN_ENCODER_KINDS}
    taken.update({name: f"registered by {entry.source}" for name, entry in _PLUGIN_ENCODERS.items()})
    _check_name("encoder kind", kind, taken)
    if not callable(builder):
        raise RegistrationError(f"encoder kind {kind!r}: the builder must be callable (spec, num_labels) -> Encoder")
    if modality not in MODALITIES:
        raise RegistrationError(f"encoder kind {kind!r}: modality {modality!r} is not one of {list(MODALITIES)}")
    _PLUGIN_ENCODERS[kind] = PluginEncoder(kind, builder, modality, _source())


# ------------------------------------------------------------------------------ lookups


def loss_names() -> tuple[str, ...]:
    """Every loss a run may name: the built-in ones, then the registered ones."""
    return (*BUILTIN_LOSSES, *_PLUGIN_LOSSES)


def method_names() -> tuple[str, ...]:
    """Every method of an experiment block's `losses`: the losses and the reference methods
    that run through the same jobs (the label prior `chance` has its own rule)."""
    return (*loss_names(), *(name for name in REFERENCE_METHODS if name != "chance"))


def method_display(name: str) -> str:
    """How tables and figures call a method (its key when nothing registered it)."""
    if name in _PLUGIN_LOSSES:
        return _PLUGIN_LOSSES[name].display
    return BUILTIN_LOSSES.get(name) or REFERENCE_METHODS.get(name) or name


def plugin_loss(name: str) -> PluginLoss | None:
    return _PLUGIN_LOSSES.get(name)


def loss_options(name: str) -> frozenset[str] | None:
    """The options loss `name` declares (a built-in loss's BUILTIN_LOSS_OPTIONS, a registered
    loss's `options`; none for a pair loss or a reference method), read without building it;
    None for a name nothing defines."""
    if name in BUILTIN_LOSSES:
        return frozenset(BUILTIN_LOSS_OPTIONS.get(name, ()))
    if name in _PLUGIN_LOSSES:
        return _PLUGIN_LOSSES[name].options
    return frozenset() if name in REFERENCE_METHODS else None


def encoder_kinds() -> tuple[str, ...]:
    return (*BUILTIN_ENCODER_KINDS, *_PLUGIN_ENCODERS)


def encoder_modality(kind: str) -> str | None:
    """The input modality of an encoder kind (None for an unknown kind)."""
    if kind in BUILTIN_ENCODER_KINDS:
        return BUILTIN_ENCODER_KINDS[kind]
    entry = _PLUGIN_ENCODERS.get(kind)
    return entry.modality if entry else None


def plugin_encoder(kind: str) -> PluginEncoder | None:
    return _PLUGIN_ENCODERS.get(kind)


def plugin_sources(loss: str | None = None, kind: str | None = None) -> list[str]:
    """The plugins that registered `loss` and encoder `kind` (none for built-in names)."""
    sources = []
    if loss in _PLUGIN_LOSSES:
        sources.append(_PLUGIN_LOSSES[loss].source)
    if kind in _PLUGIN_ENCODERS:
        sources.append(_PLUGIN_ENCODERS[kind].source)
    return list(dict.fromkeys(sources))


def unknown_name_message(what: str, name: str, known: tuple[str, ...], where: str) -> str:
    """The refusal of an unknown loss or encoder kind: where it was named, what is known, and
    how to add one."""
    return f"{where} names {what} {name!r}, which is neither built in nor registered. Known: {', '.join(known)}. Fix: correct the name, or {WHERE_TO_REGISTER}"
