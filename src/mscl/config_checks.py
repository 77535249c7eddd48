"""Every cross-key check of a workflow config, run while the Snakefile is parsed: a mistake
stops `snakemake` and `snakemake -n` alike, before any job is planned or queued.

The JSON schema (workflow/schemas/config.schema.yaml) checks each key on its own: its type, its
range, its choices. What it cannot see is how keys refer to one another and to the names the
package and the config's plugins define, and that is where a mistake would otherwise surface
only when a job starts, on a cluster after its queueing, while the rest of the grid goes on:

- names: every dataset, encoder kind, encoder and method the config names exists
  (mscl.layout, mscl.registry, the config's own `sources`);
- loss options: `training.loss_options.<name>` names a method that exists, and gives only
  options that method declares (built-in losses in `registry.BUILTIN_LOSS_OPTIONS`, a plugin's
  in its `register_loss(..., options=...)`; read from the declaration, no loss is built);
- pairings: every encoder an experiment block pairs with a dataset reads that dataset's
  modality (image, text or tabular), `logreg` has inputs to regress on, and every batch size
  splits evenly over the encoder's GPUs;
- tuning: the blocks with `tune: true` have the grids, seeds and selections they need, and
  `tuning.reuse` and `tuning.metric` name what exists;
- the report: `report.display` and `report.claim.reference` name a dataset and a method that
  exist (the claim's reference one that runs), and each `report.batch_size` group the paper's
  tables show has runs at the batch size it names;
- training settings: `training.pretrain`/`probe`, each encoder's overrides and its tuning grids
  hold valid run-spec values (mscl.train.settings, the run spec's own checks).

Each problem names the key as the user wrote it, the bad value, the allowed values and the
fix (`ConfigProblem.message`); the workflow reports all of them at once. Problems of the data
rather than the config (a source root or a CSV file that is not there yet) are not checked
here: the workflow lists them while it builds the DAG and stops only a run that executes jobs,
so that a grid can be planned before its data is copied (docs/malformed-inputs.md).

Standard library only: the workflow imports this module from the checkout's src/, whatever
environment Snakemake runs in.
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping, Sequence

from mscl import registry
from mscl.layout import DATASET_FAMILIES
from mscl.report.names import REPORT_GROUPS, in_scope
from mscl.train.settings import RUN_LOSS_OPTIONS, SELECT_METRICS, LossSpec, settings_problem
from mscl.tuning import UNTRAINED_METHODS, family_of

# The inputs each built-in dataset setting's family means (MIMIC: its notes).
FAMILY_MODALITY = {"image": "image", "text": "text", "mimic": "text", "tabular": "tabular"}
# Where a source's setting turns a built-in dataset into feature vectors for an mlp encoder.
TABULAR_WHEN = {"fashion_mnist": "pixels", "debtags": "embed"}
# What each modality's encoders read, for messages.
MODALITY_INPUTS = {"image": "images", "text": "texts", "tabular": "feature vectors"}


@dataclass(frozen=True)
class ConfigProblem:
    """One mistake in the config: the key as the user wrote it, what is wrong with its value
    (quoting it), the values allowed there (empty when there is no short list) and the fix."""

    key: str
    problem: str
    fix: str
    allowed: tuple[str, ...] = ()

    def message(self, files: str | None = None) -> str:
        """One line: the key, the config files (when given), the problem, the allowed values
        and the fix."""
        allowed = f" Allowed: {', '.join(self.allowed)}." if self.allowed else ""
        where = f"invalid config key `{self.key}` in {files}" if files else f"`{self.key}`"
        return f"{where}: {self.problem}.{allowed} Fix: {self.fix}"


def config_problems(config: Mapping[str, Any], own_sources: Mapping[str, Mapping[str, Any]]) -> list[ConfigProblem]:
    """Every cross-key problem of a schema-validated config (defaults filled in), in the order
    of the checks above; [] when there is none. `own_sources` are the config's `sources` that
    the schema does not list: the datasets of one's own."""
    checker = _Checker(config, own_sources)
    return list(
        itertools.chain(
            checker.dataset_names(),
            checker.encoder_kinds(),
            checker.experiment_names(),
            checker.loss_options(),
            checker.pairings(),
            checker.training_settings(),
            checker.tuning(),
            checker.report(),
        )
    )


def problems_message(problems: Sequence[ConfigProblem], files: str) -> str:
    """The workflow's error: every problem on its own line, and how many there are."""
    if len(problems) == 1:
        return problems[0].message(files)
    lines = [f"- {problem.message()}" for problem in problems]
    return "\n".join([f"{len(problems)} mistakes in the config ({files}), found before any job ran:", *lines])


def dataset_modality(dataset: str, config: Mapping[str, Any], own_sources: Mapping[str, Mapping[str, Any]]) -> str | None:
    """What a dataset setting's samples are (image, text or tabular), from the config alone;
    None where only the data would tell (a manifest folder without a stats.json naming it)."""
    if dataset in own_sources:
        block = own_sources[dataset]
        if block["kind"] == "csv":
            return block.get("modality") or "text"
        return _recorded_modality(block["root"])
    family = DATASET_FAMILIES.get(dataset)
    if family is None:
        return None
    setting = TABULAR_WHEN.get(dataset)
    if setting and config["sources"].get(dataset, {}).get(setting) is not None:
        return "tabular"
    return FAMILY_MODALITY[family]


def _recorded_modality(root: str) -> str | None:
    """The `modality` a manifest folder's stats.json records (None without one)."""
    try:
        with open(os.path.join(root, "stats.json"), encoding="utf-8-sig") as handle:
            recorded = json.load(handle)
    except (OSError, ValueError):
        return None
    modality = recorded.get("modality") if isinstance(recorded, dict) else None
    return modality if modality in registry.MODALITIES else None


def _as_text(values: Iterable[Any]) -> tuple[str, ...]:
    """The allowed values as a message lists them."""
    return tuple(str(value) for value in values)


def _named(what: str, names: Sequence[str], plural: str | None = None) -> str:
    """"dataset 'coco'" or "datasets 'coco', 'voc'"."""
    return f"{what if len(names) == 1 else plural or what + 's'} {', '.join(map(repr, names))}"


def _is(names: Sequence[str]) -> str:
    return "is" if len(names) == 1 else "are"


class _Checker:
    """The checks of one config; each method yields its problems."""

    def __init__(self, config: Mapping[str, Any], own_sources: Mapping[str, Mapping[str, Any]]):
        self.config = config
        self.own_sources = own_sources
        self.known_datasets = (*DATASET_FAMILIES, *own_sources)
        self.methods = registry.method_names()
        self.encoders = config["encoders"]
        self.experiments = config["experiments"]

    # ------------------------------------------------------------------------- names

    def unknown_datasets(self, key: str, datasets: Sequence[str]) -> Iterator[ConfigProblem]:
        if datasets:
            yield ConfigProblem(
                key,
                f"names {_named('dataset', datasets)}, which {_is(datasets)} neither a built-in dataset setting nor a source of your own",
                f"correct the name, or add a dataset of your own as `sources.{datasets[0]}: {{kind: csv, path: ..., "
                "input_column: ..., labels_column: ...}` (docs/extending.md)",
                self.known_datasets,
            )

    def dataset_names(self) -> Iterator[ConfigProblem]:
        for name in sorted(set(self.own_sources) & set(DATASET_FAMILIES)):
            yield ConfigProblem(
                f"sources.{name}",
                f"a source of your own is named like the built-in dataset setting {name!r}",
                "give it another name (and use that name in `datasets` and the experiment blocks)",
            )
        yield from self.unknown_datasets("datasets", [d for d in self.config["datasets"] if d not in self.known_datasets])
        for dataset in self.config["report"]["display"]:
            yield from self.unknown_datasets(f"report.display.{dataset}", [dataset] if dataset not in self.known_datasets else [])

    def encoder_kinds(self) -> Iterator[ConfigProblem]:
        for name, encoder in self.encoders.items():
            kind = encoder["spec"]["kind"]
            if kind not in registry.encoder_kinds():
                yield ConfigProblem(
                    f"encoders.{name}.spec.kind",
                    f"names encoder kind {kind!r}, which is neither built in nor registered",
                    f"correct the name, or {registry.WHERE_TO_REGISTER}",
                    registry.encoder_kinds(),
                )

    def experiment_names(self) -> Iterator[ConfigProblem]:
        unprepared: dict[str, list[str]] = {}  # block -> the datasets it runs that `datasets` leaves out
        for block_name, block in self.experiments.items():
            left_out = [d for d in block["datasets"] if d in self.known_datasets and d not in self.config["datasets"]]
            if left_out:
                unprepared[block_name] = left_out
        if unprepared:
            datasets = list(dict.fromkeys(d for left_out in unprepared.values() for d in left_out))
            yield ConfigProblem(
                "datasets",
                f"is {list(self.config['datasets'])}, which leaves out {_named('dataset', datasets)} that experiment blocks run ("
                + "; ".join(f"{name}: {', '.join(map(repr, left_out))}" for name, left_out in unprepared.items()) + ")",
                "add them to `datasets` (a list replaces the list of the config it builds on: name every dataset there), "
                "or remove them from those experiment blocks",
            )
        for block_name, block in self.experiments.items():
            key = f"experiments.{block_name}"
            yield from self.unknown_datasets(f"{key}.datasets", [d for d in block["datasets"] if d not in self.known_datasets])
            undefined = [e for e in block["encoders"] if e not in self.encoders]
            if undefined:
                yield ConfigProblem(
                    f"{key}.encoders",
                    f"names {_named('encoder', undefined)}, which {_is(undefined)} not a key of `encoders`",
                    "define it under `encoders` or correct the name",
                    _as_text(self.encoders),
                )
            unknown = [loss for loss in block["losses"] if loss not in self.methods]
            if unknown:
                yield ConfigProblem(
                    f"{key}.losses",
                    f"names {_named('loss', unknown, 'losses')}, which {_is(unknown)} neither built in nor registered",
                    f"correct the name, or {registry.WHERE_TO_REGISTER}",
                    self.methods,
                )

    # ------------------------------------------------------------------ loss options

    def loss_options(self) -> Iterator[ConfigProblem]:
        for loss, options in self.config["training"]["loss_options"].items():
            key = f"training.loss_options.{loss}"
            declared = registry.loss_options(loss)
            if declared is None:
                yield ConfigProblem(
                    key,
                    f"gives options to loss {loss!r}, which is neither built in nor registered (they would be ignored)",
                    f"put the options under the name of the loss they are for, or {registry.WHERE_TO_REGISTER}",
                    self.methods,
                )
                continue
            if not isinstance(options, Mapping):
                yield ConfigProblem(key, f"is {options!r}, not a mapping of option names to values", f"write it as {{option: value}}, e.g. `{key}: {{...}}`")
                continue
            takes = sorted(declared - set(RUN_LOSS_OPTIONS))
            set_by_run = sorted(set(options) & {"temperature", *RUN_LOSS_OPTIONS})
            if set_by_run:
                yield ConfigProblem(
                    f"{key}.{set_by_run[0]}",
                    f"sets {set_by_run[0]!r}, which the run sets itself",
                    "remove it: the temperature is `training.pretrain.temperature` (or an encoder's `pretrain.temperature`), "
                    "num_labels comes from the data, dim from `pretrain.projection_dim`",
                    _as_text(takes),
                )
            for option in sorted(set(options) - declared - {"temperature", *RUN_LOSS_OPTIONS}):
                yield ConfigProblem(
                    f"{key}.{option}",
                    f"loss {loss!r} does not take option {option!r}"
                    + ("" if takes else f" (it takes no options besides the temperature, `training.pretrain.temperature`)"),
                    "correct the option's name, or remove it" + (f" ({registry.plugin_loss(loss).source} declares the options of {loss!r})" if registry.plugin_loss(loss) else ""),
                    _as_text(takes),
                )
            for option, value in options.items():
                choices = registry.LOSS_OPTION_CHOICES.get((loss, option))
                if choices is not None and value not in choices:
                    yield ConfigProblem(f"{key}.{option}", f"is {value!r}", "use one of the allowed values", choices)

    # ---------------------------------------------------------------------- pairings

    def named_pairs(self) -> Iterator[tuple[str, str, Mapping[str, Any], str, str]]:
        """(block name, block, dataset, encoder) of every known dataset and encoder a block pairs."""
        for block_name, block in self.experiments.items():
            for dataset in block["datasets"]:
                for encoder in block["encoders"]:
                    if dataset in self.known_datasets and encoder in self.encoders:
                        yield block_name, block, dataset, encoder

    def pairings(self) -> Iterator[ConfigProblem]:
        for block_name, block, dataset, encoder in self.named_pairs():
            key = f"experiments.{block_name}"
            kind = self.encoders[encoder]["spec"]["kind"]
            reads = registry.encoder_modality(kind)
            holds = dataset_modality(dataset, self.config, self.own_sources)
            if reads is not None and holds is not None and reads != holds:
                fitting = [name for name, other in self.encoders.items() if registry.encoder_modality(other["spec"]["kind"]) == holds]
                yield ConfigProblem(
                    f"{key}.encoders",
                    f"pairs encoder {encoder!r} (kind {kind}, which reads {MODALITY_INPUTS[reads]}) with dataset {dataset!r}, "
                    f"whose samples are {MODALITY_INPUTS[holds]}",
                    "run each encoder on datasets of its modality: split the block into one per modality"
                    + ("" if fitting else f", or define an encoder of a kind that reads {MODALITY_INPUTS[holds]}"),
                    _as_text(fitting),
                )
            if "logreg" in block["losses"] and holds == "text":
                yield ConfigProblem(
                    f"{key}.losses",
                    f"runs 'logreg' (logistic regression on the inputs) on dataset {dataset!r}, whose samples are texts, "
                    "which have no input vector to regress on",
                    "leave logreg out of blocks of text datasets",
                )
        yield from self.batch_sizes()

    def batch_sizes(self) -> Iterator[ConfigProblem]:
        """A pretrain job of N GPUs splits the batch over N processes (mscl.train.distributed)."""
        for block_name, block in self.experiments.items():
            key = f"experiments.{block_name}"
            sizes = [(f"{key}.batch_sizes", size, encoder) for size in block["batch_sizes"] for encoder in block["encoders"]]
            if block.get("tune") and "tune_batch_size" in block:
                tuned = block.get("tune_encoder")
                sizes += [(f"{key}.tune_batch_size", block["tune_batch_size"], tuned or encoder) for encoder in block["encoders"]]
            for size_key, size, encoder in dict.fromkeys(sizes):
                gpus = self.encoders.get(encoder, {}).get("resources", {}).get("gpu", 0)
                if gpus > 1 and size % gpus:
                    lower, upper = size - size % gpus, size + gpus - size % gpus
                    yield ConfigProblem(
                        size_key,
                        f"gives batch size {size}, which encoder {encoder!r} (`encoders.{encoder}.resources.gpu: {gpus}`) cannot split "
                        f"evenly over its {gpus} data-parallel processes",
                        f"use a multiple of {gpus}, e.g. {' or '.join(str(s) for s in (lower, upper) if s)}, or change "
                        f"`encoders.{encoder}.resources.gpu`",
                    )

    # ---------------------------------------------------------------------- settings

    def training_settings(self) -> Iterator[ConfigProblem]:
        blocks = [(f"training.{phase}", phase, self.config["training"][phase]) for phase in ("pretrain", "probe")]
        blocks += [(f"encoders.{name}.{phase}", phase, encoder[phase]) for name, encoder in self.encoders.items() for phase in ("pretrain", "probe")]
        for name, encoder in self.encoders.items():
            for family, grid in encoder.get("tune", {}).items():
                for setting in _grid_values(grid):
                    blocks.append((f"encoders.{name}.tune.{family}", "pretrain", setting))
        for key, phase, block in blocks:
            problem = settings_problem(phase, block, key)
            if problem:
                yield ConfigProblem(key, problem, "correct it there (docs/training.md lists every key)")

    # ------------------------------------------------------------------------ tuning

    def tuning(self) -> Iterator[ConfigProblem]:
        tuning = self.config["tuning"]
        trained = [method for method in self.methods if method not in UNTRAINED_METHODS]
        for method, source in tuning["reuse"].items():
            key = f"tuning.reuse.{method}"
            for name in (method, source):
                if name not in self.methods or name in UNTRAINED_METHODS:
                    what = "a method nothing defines" if name not in self.methods else "an untrained method, which has nothing to tune"
                    yield ConfigProblem(key, f"names {name!r}, {what}", f"name trained methods on both sides, e.g. `sim: simdissim`", _as_text(trained))
                    break
            else:
                if family_of(method) != family_of(source):
                    yield ConfigProblem(
                        key,
                        f"lets {method!r} (tuned on the {family_of(method)} grid) take the choice of {source!r} (tuned on the {family_of(source)} grid)",
                        "reuse the choice of a method of the same family (contrastive losses among themselves)",
                    )
        if tuning["metric"] not in SELECT_METRICS:
            yield ConfigProblem("tuning.metric", f"is {tuning['metric']!r}, not a metric that grows with quality", "use one of the allowed metrics", SELECT_METRICS)
        tuned = [(name, block) for name, block in self.experiments.items() if block.get("tune")]
        tuning_seeds = sorted(self.config["tuning"]["seeds"])
        sharing = {name: sorted(set(block.get("seeds", self.config["seeds"])) & set(tuning_seeds)) for name, block in tuned}
        sharing = {name: seeds for name, seeds in sharing.items() if seeds}
        if sharing:
            yield ConfigProblem(
                "tuning.seeds",
                f"is {tuning_seeds}, which shares seed {next(iter(sharing.values()))[0]} with the test seeds of "
                f"{_named('block', list(sharing))} (`tune: true`; their `seeds`, else the top-level `seeds`)",
                "make `tuning.seeds` and the test seeds disjoint (test seeds must be fresh)",
            )
        for block_name, block in tuned:
            yield from self.tuned_block(block_name, block)
        yield from self.tuned_and_untuned()

    def tuned_block(self, block_name: str, block: Mapping[str, Any]) -> Iterator[ConfigProblem]:
        key = f"experiments.{block_name}"
        source = block.get("tune_encoder")
        if source is not None and source not in self.encoders:
            yield ConfigProblem(
                f"{key}.tune_encoder",
                f"names {source!r}, which is not a key of `encoders`",
                "name the encoder whose tuning selection the block reuses",
                _as_text(self.encoders),
            )
            return
        for encoder in block["encoders"]:
            if encoder not in self.encoders:
                continue
            chosen_by = source or encoder
            if self.encoders[chosen_by]["spec"] != self.encoders[encoder]["spec"]:
                yield ConfigProblem(
                    f"{key}.tune_encoder",
                    f"{source!r} has another `spec` than {encoder!r}, so its chosen settings do not carry over",
                    "give both encoders the same spec (they may differ in `pretrain`), or drop `tune_encoder`",
                )
                continue
            for loss in block["losses"]:
                if loss not in self.methods or loss in UNTRAINED_METHODS:
                    continue
                family = family_of(self.config["tuning"]["reuse"].get(loss, loss))
                if not self.encoders[chosen_by].get("tune", {}).get(family):
                    yield ConfigProblem(
                        f"encoders.{chosen_by}.tune.{family}",
                        f"is missing, but block {block_name!r} (`tune: true`) runs {loss!r} on {encoder!r}",
                        f"give `encoders.{chosen_by}.tune.{family}` as pretrain keys with candidate values, e.g. "
                        "{temperature: [0.05, 0.1, 0.2], lr: [0.0003, 0.001]}",
                    )

    def tuned_and_untuned(self) -> Iterator[ConfigProblem]:
        tuned, untuned = {}, {}
        for block_name, block in self.experiments.items():
            for run in itertools.product(block["datasets"], block["encoders"], block["losses"], block["batch_sizes"], block.get("seeds", self.config["seeds"])):
                target = tuned if block.get("tune") and run[2] not in UNTRAINED_METHODS else untuned
                target.setdefault(run, block_name)
        for run in sorted(set(tuned) & set(untuned)):
            yield ConfigProblem(
                f"experiments.{tuned[run]}.tune",
                f"tunes run {'/'.join(map(str, run))}, which block {untuned[run]!r} runs untuned",
                "tune it in every block that names it, or in none",
            )
            return  # one such run says it; the others follow from the same two blocks

    # ------------------------------------------------------------------------ report

    def report(self) -> Iterator[ConfigProblem]:
        report = self.config["report"]
        reference = report["claim"]["reference"]
        run_methods = sorted({loss for block in self.experiments.values() for loss in block["losses"]})
        if reference not in self.methods or reference in UNTRAINED_METHODS:
            yield ConfigProblem(
                "report.claim.reference",
                f"is {reference!r}, which is not a trained method",
                "name the method every other one is compared with (default simdissim)",
                _as_text(m for m in self.methods if m not in UNTRAINED_METHODS),
            )
        elif report["artifacts"] == "claim" and self.experiments and reference not in run_methods:
            yield ConfigProblem(
                "report.claim.reference",
                f"is {reference!r}, which no experiment block runs, so the claim check has nothing to compare with",
                "name a method the experiment blocks run, or add it to their `losses`",
                _as_text(run_methods),
            )
        if report["artifacts"] == "paper":
            yield from self.report_batch_sizes()

    def report_batch_sizes(self) -> Iterator[ConfigProblem]:
        """A table group whose paper tables have runs, but none at its `report.batch_size`,
        would show every cell as not run."""
        roles = {name: encoder["role"] for name, encoder in self.encoders.items()}
        sizes: dict[str, set[int]] = {}
        for _, block, dataset, encoder in self.named_pairs():
            for artifact, group in REPORT_GROUPS.items():
                if in_scope(artifact, dataset, roles[encoder]):
                    sizes.setdefault(group, set()).update(block["batch_sizes"])
        for group, ran in sorted(sizes.items()):
            configured = self.config["report"]["batch_size"][group]
            if configured not in ran:
                yield ConfigProblem(
                    f"report.batch_size.{group}",
                    f"is {configured}, but the {group} tables' runs have batch sizes {sorted(ran)} only, so every cell would show 'not run'",
                    f"set `report.batch_size.{group}` to the batch size whose runs the {group} tables show",
                    _as_text(sorted(ran)),
                )


def _grid_values(grid: Mapping[str, Sequence[Any]]) -> Iterator[dict[str, Any]]:
    """Each key of a tuning grid with each of its candidate values, as a pretrain block."""
    for key, values in grid.items():
        for value in values:
            yield {key: value}
