"""What ran, by name: display names of datasets and encoders, and which results are the paper's experiment.

Standard library only: the workflow imports it while it builds the DAG (workflow/rules/report.smk)
to hand the names to `python -m mscl collect`, which records them beside every result in
all_runs.csv; tables and figures read them from there, never from a fixed list of paper names.

Names. A dataset setting is called by `report.display.<dataset>` in the config, else by its paper
name when it is prepared from the real data and "<paper name> (demo data)" when its source root is
`demo`. An encoder is called by `encoders.<name>.display`, else by the paper's model name when it
is the paper's model and "<name> (for <paper model>)" otherwise.

The paper's experiment. A result is compared with a number the paper prints (tables
`paper_vs_run` and `sota`) only when both hold:

- its dataset setting is one of the paper's ten and is read from the real data
  (`sources.<source>.root` is a folder, not `demo`) of the paper's release: a COCO root holding
  only the 2017 annotations is called "MS-COCO 2017" and is not compared (its split differs);
- its encoder is the paper's model for its role (`is_paper_encoder`): ResNet-50 (`kind: resnet`,
  `arch: resnet50`), RoBERTa-base (`kind: hf`, checkpoint named roberta-base, every layer trained),
  Llama-3.1-8B with LoRA (`kind: llama_lora`, checkpoint named Llama-3.1-8B or
  Meta-Llama-3.1-8B), PLM-ICD (`kind: plm_icd` on PLM-ICD's RoBERTa-base-PM-M3-Voc checkpoint,
  every layer trained). The checkpoint is the last component of `spec.path` (a hub name or a
  local folder), compared without case.

Training settings (epochs, learning rate, batch size) are not part of the rule: a run of the
paper's data and models with other settings is compared, and its resolved spec is beside it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Iterable, Mapping, Sequence

from mscl.data.sources import coco_release
from mscl.layout import PAPER_ROLES

# Every dataset setting's plain name: the paper's ten settings, then the claim check's data.
DATASET_NAMES = {
    "coco": "MS-COCO",
    "voc": "PASCAL",
    "nuswide": "NUS-WIDE",
    "aapd": "AAPD",
    "mimic3_full": "MIMIC-III-Full",
    "mimic3_50": "MIMIC-III-50",
    "mimic4_icd9_full": "MIMIC-IV-ICD9-Full",
    "mimic4_icd9_50": "MIMIC-IV-ICD9-50",
    "mimic4_icd10_full": "MIMIC-IV-ICD10-Full",
    "mimic4_icd10_50": "MIMIC-IV-ICD10-50",
    "yeast": "Yeast",
    "debtags": "Debtags",
    "fashion_mnist": "Fashion-MNIST canvases",
}
PAPER_DATASETS = tuple(list(DATASET_NAMES)[:10])
# The paper's model behind each encoder role (`mlp`, the claim check's tabular encoder, has none).
PAPER_ENCODER_NAMES = {"resnet": "ResNet-50", "roberta": "RoBERTa-base", "llama": "Llama-3.1-8B + LoRA", "plm_icd": "PLM-ICD"}
# Checkpoint names (last path component, lower case) of the paper's text models.
PAPER_CHECKPOINTS = {"roberta": ("roberta-base",), "llama": ("llama-3.1-8b", "meta-llama-3.1-8b"), "plm_icd": ("roberta-base-pm-m3-voc",)}
DEMO_ROOT = "demo"


def source_of(dataset: str) -> str:
    """The `sources` key a dataset setting is prepared from (mimic3_full -> mimic3)."""
    for prefix in ("mimic3", "mimic4"):
        if dataset.startswith(prefix):
            return prefix
    return dataset


def other_release(dataset: str, root: str | None) -> str | None:
    """The release a real root holds when it is not the paper's (COCO 2017), else None."""
    if dataset == "coco" and root not in (None, DEMO_ROOT) and coco_release(root) == "2017":
        return "2017"
    return None


def is_paper_dataset(dataset: str, root: str | None) -> bool:
    """One of the paper's settings, read from a real root (not the generated demo data) of the
    paper's release."""
    return dataset in PAPER_DATASETS and root is not None and root != DEMO_ROOT and other_release(dataset, root) is None


def _checkpoint(spec: Mapping[str, Any]) -> str:
    return PurePosixPath(str(spec.get("path", ""))).name.lower()


def is_paper_encoder(role: str, spec: Mapping[str, Any]) -> bool:
    """Whether an encoder spec is the paper's model for `role` (see the module docstring)."""
    kind, checkpoint = spec.get("kind"), _checkpoint(spec)
    every_layer = spec.get("trainable_layers") is None
    if role == "resnet":
        return kind == "resnet" and spec.get("arch") == "resnet50"
    if role == "roberta":
        return kind == "hf" and checkpoint in PAPER_CHECKPOINTS["roberta"] and every_layer and not spec.get("lora_r")
    if role == "llama":
        return kind == "llama_lora" and checkpoint in PAPER_CHECKPOINTS["llama"]
    if role == "plm_icd":
        return kind == "plm_icd" and checkpoint.startswith(PAPER_CHECKPOINTS["plm_icd"]) and every_layer
    return False


def dataset_display(dataset: str, root: str | None, configured: str | None = None) -> str:
    """The configured name, else the paper's name on real data, '<name> <year>' on another
    release than the paper's and '<name> (demo data)' on the demo."""
    if configured:
        return configured
    name = DATASET_NAMES.get(dataset, dataset)
    release = other_release(dataset, root)
    return f"{name} (demo data)" if root == DEMO_ROOT else f"{name} {release}" if release else name


def encoder_display(name: str, role: str, spec: Mapping[str, Any], configured: str | None = None) -> str:
    """The configured name, else the paper's model name for the paper's model and
    '<name> (for <paper model>)' for a stand-in."""
    if configured:
        return configured
    if is_paper_encoder(role, spec):
        return PAPER_ENCODER_NAMES[role]
    return f"{name} (for {PAPER_ENCODER_NAMES[role]})" if role in PAPER_ENCODER_NAMES else name


@dataclass(frozen=True)
class Named:
    """A dataset setting or encoder as the report names it, and whether it is the paper's own."""

    display: str
    paper: bool


def workflow_names(config: Mapping[str, Any]) -> tuple[dict[str, Named], dict[str, Named]]:
    """(datasets, encoders) of a validated workflow config, each key -> Named."""
    configured = config.get("report", {}).get("display", {})
    datasets = {}
    for dataset in config["datasets"]:
        root = config.get("sources", {}).get(source_of(dataset), {}).get("root")
        datasets[dataset] = Named(dataset_display(dataset, root, configured.get(dataset)), is_paper_dataset(dataset, root))
    encoders = {
        name: Named(encoder_display(name, encoder["role"], encoder["spec"], encoder.get("display")), is_paper_encoder(encoder["role"], encoder["spec"]))
        for name, encoder in config["encoders"].items()
    }
    return datasets, encoders


@dataclass
class WhatRan:
    """The names and paper status that all_runs.csv records, per dataset and per (dataset, role).

    Built by `mscl.report.collect.what_ran` from the tidy runs; tables and figures ask it how to
    call a dataset, a loss or the encoder behind a role, and whether a cell may be compared with
    the paper. `encoders` holds the encoder the paper's tables and figures show per (dataset,
    role) (`mscl.report.collect.shown_encoders`), `also_ran` the others that ran there, and
    `losses` every loss that ran there, under any of its encoders.
    """

    datasets: dict[str, Named] = field(default_factory=dict)
    encoders: dict[tuple[str, str], list[Named]] = field(default_factory=dict)
    also_ran: dict[tuple[str, str], list[Named]] = field(default_factory=dict)
    methods: dict[str, str] = field(default_factory=dict)
    losses: dict[tuple[str, str], list[str]] = field(default_factory=dict)

    def dataset(self, key: str) -> str:
        """Display name of a dataset setting (the key itself if it did not run)."""
        return self.datasets[key].display if key in self.datasets else DATASET_NAMES.get(key, key)

    def method(self, key: str) -> str:
        """Display name of a loss key (the key itself if neither the runs nor the paper name it)."""
        return self.methods.get(key, key)

    def encoder(self, role: str, datasets: Iterable[str] | None = None) -> str:
        """Display name(s) of the encoder(s) that ran under `role` (on `datasets`, default all),
        joined by ' / '; the role's paper model name with '(not run)' if none ran."""
        chosen = None if datasets is None else set(datasets)
        names = [n.display for (dataset, r), named in self.encoders.items() if r == role and (chosen is None or dataset in chosen) for n in named]
        names = list(dict.fromkeys(names))
        return " / ".join(names) if names else f"{PAPER_ENCODER_NAMES.get(role, role)} (not run)"

    def is_paper(self, dataset: str, role: str) -> bool:
        """Whether results of this dataset and encoder role are the paper's experiment."""
        named = self.encoders.get((dataset, role), [])
        return dataset in self.datasets and self.datasets[dataset].paper and bool(named) and all(n.paper for n in named)

    def ran(self, dataset: str, role: str | None = None) -> bool:
        return dataset in self.datasets if role is None else (dataset, role) in self.encoders

    def stand_ins(self) -> list[tuple[str, str]]:
        """(dataset, role) pairs that ran on a stand-in dataset or encoder, in order of appearance."""
        return [(dataset, role) for (dataset, role) in self.encoders if role in PAPER_ENCODER_NAMES and not self.is_paper(dataset, role)]

    def also_ran_notes(self, artifact: str, shown: Mapping[tuple[str, str], Iterable[str]] | None = None, references: Iterable[str] = ()) -> list[str]:
        """The notes under a paper table or figure (ARTIFACT_SCOPE) naming what ran in its scope
        but is not in it: "also ran: <names> (see benchmark)", one note for the losses and one
        for the encoders. A loss counts when `shown` (dataset, role) -> losses is given and
        lists none of its (dataset, role) pairs; `references` (the reference rows, shown by every
        table that lists losses) never count."""
        pairs = [pair for pair in dict.fromkeys([*self.losses, *self.also_ran]) if in_scope(artifact, *pair)]
        notes = []
        if shown is not None:
            left = set(references)
            methods = [loss for pair in pairs for loss in self.losses.get(pair, []) if loss not in left and loss not in set(shown.get(pair, ()))]
            if methods:
                notes.append(f"also ran: {', '.join(dict.fromkeys(self.method(m) for m in methods))} (see benchmark)")
        encoders = [named.display for pair in pairs for named in self.also_ran.get(pair, [])]
        if encoders:
            notes.append(f"also ran: {', '.join(dict.fromkeys(encoders))} (see benchmark)")
        return notes


# Which datasets and encoder roles each table or figure shows (None: all), for the one-line
# "Ran: ..." of its description in `snakemake --report` (workflow/report/*.rst).
_IMAGE = ("coco", "voc", "nuswide")
_MIMIC_FULL = ("mimic3_full", "mimic4_icd9_full", "mimic4_icd10_full")
_MIMIC_50 = ("mimic3_50", "mimic4_icd9_50", "mimic4_icd10_50")
_MIMIC_ROLES = ("roberta", "llama", "plm_icd")
ARTIFACT_SCOPE: dict[str, tuple[tuple[str, ...] | None, tuple[str, ...] | None]] = {
    "image": (_IMAGE, ("resnet",)),
    "aapd": (("aapd",), ("roberta", "llama")),
    "mimic_full": (_MIMIC_FULL, _MIMIC_ROLES),
    "mimic_50": (_MIMIC_50, _MIMIC_ROLES),
    "sota": (("mimic3_full",), ("plm_icd",)),
    "ablation": (("coco", "aapd"), ("resnet", "roberta")),
    "paper_vs_run": (None, PAPER_ROLES),
    "cost": (None, None),
    "improvement": (_IMAGE, ("resnet",)),
    "std": (_IMAGE, ("resnet",)),
    "text_encoders": (("aapd",), ("roberta", "llama")),
    "mimic_dotplot": (_MIMIC_FULL + _MIMIC_50, _MIMIC_ROLES),
    "mimic_heatstrip": (_MIMIC_FULL + _MIMIC_50, _MIMIC_ROLES),
    "frequency_buckets": (("coco",), ("resnet",)),
    "batch_size": (("coco",), ("resnet",)),
}


# The table/figure group (`report.batch_size.<group>`) whose configured batch size selects the
# runs a table or figure shows; the artifacts that mix groups (ablation, paper_vs_run) take, per
# dataset and encoder role, the batch size most runs share, and the batch-size figure shows all.
REPORT_GROUPS = {
    "image": "image",
    "aapd": "aapd",
    "mimic_full": "mimic",
    "mimic_50": "mimic",
    "sota": "mimic",
    "improvement": "image",
    "std": "image",
    "frequency_buckets": "image",
    "text_encoders": "aapd",
    "mimic_dotplot": "mimic",
    "mimic_heatstrip": "mimic",
}


def in_scope(artifact: str, dataset: str, role: str) -> bool:
    """Whether a table or figure (ARTIFACT_SCOPE) shows results of `dataset` with an encoder of `role`."""
    scope_datasets, scope_roles = ARTIFACT_SCOPE.get(artifact, ((), ()))
    return (scope_datasets is None or dataset in scope_datasets) and (scope_roles is None or role in scope_roles)


def collect_options(
    runs: Iterable[Sequence[Any]], datasets: Mapping[str, Named], encoders: Mapping[str, Named], methods: Mapping[str, str]
) -> str:
    """`python -m mscl collect`'s --dataset-names, --encoder-names, --method-names,
    --paper-datasets and --paper-encoders (shell-quoted) for the datasets, encoders and methods
    of the grid's runs ((dataset, encoder, loss, ...) tuples); `methods` maps a method key to its
    display name (mscl.registry: a plugin's loss by the name it registered)."""
    runs = list(runs)
    ran = sorted({run[0] for run in runs}), sorted({run[1] for run in runs})
    options = ["--dataset-names", *(shlex.quote(f"{d}={datasets[d].display}") for d in ran[0])]
    options += ["--encoder-names", *(shlex.quote(f"{e}={encoders[e].display}") for e in ran[1])]
    options += ["--method-names", *(shlex.quote(f"{m}={methods[m]}") for m in sorted({run[2] for run in runs}))]
    options += ["--paper-datasets", *(d for d in ran[0] if datasets[d].paper)]
    options += ["--paper-encoders", *(e for e in ran[1] if encoders[e].paper)]
    return " ".join(options)


def roles_option(runs: Iterable[Sequence[Any]], roles: Mapping[str, str]) -> str:
    """`python -m mscl collect`'s --roles for the encoders of the grid's runs ((dataset, encoder,
    ...) tuples), by key; `roles` maps an encoder key to its role. A job's params: listing the
    config's encoders in file order, or every encoder, reran every table and figure when the
    `encoders` block was reordered or gained an encoder no experiment uses."""
    return " ".join(["--roles", *(f"{encoder}={roles[encoder]}" for encoder in sorted({run[1] for run in runs}))])


def ran_line(artifact: str, runs: Iterable[Sequence[Any]], datasets: Mapping[str, Named], encoders: Mapping[str, Named], roles: Mapping[str, str]) -> str:
    """'Ran: ENCODER on DATASET, ...; ENCODER on ...' for the grid's runs ((dataset, encoder, ...)
    tuples) that a table or figure shows (ARTIFACT_SCOPE); `roles` maps an encoder key to its role.
    Empty for an artifact drawn from no run (the relations figure, the statistics table)."""
    if artifact not in ARTIFACT_SCOPE:
        return ""
    shown: dict[str, list[str]] = {}
    for dataset, encoder in sorted({(run[0], run[1]) for run in runs}):
        if in_scope(artifact, dataset, roles[encoder]):
            names = shown.setdefault(encoders[encoder].display, [])
            if datasets[dataset].display not in names:
                names.append(datasets[dataset].display)
    if not shown:
        return "Ran: nothing of it in this configuration (outside its grid)."
    return "Ran: " + "; ".join(f"{encoder} on {', '.join(names)}" for encoder, names in shown.items()) + "."

