"""One look for every table and figure: display names, method order, colours, markers, fonts.

A method keeps the same colour in every figure, and the paper's method (Sim-Dissim) is the
warm, saturated one so it stands out. Colours are from the Okabe-Ito colour-blind-safe set,
plus greys/dark yellow for the methods that only appear in one figure or table.
"""

from __future__ import annotations

from typing import Iterable

from mscl import registry
from mscl.data.stats_table import DISPLAY_NAMES as DATASET_DISPLAY_NAMES
from mscl.layout import CHANCE, REFERENCE_ROLE  # noqa: F401  (the label prior's role, which `collect --roles` reserves)
from mscl.metrics import DATASET_FAMILIES, FAMILY_MACRO_F1, MACRO_F1_CAML, MACRO_F1_PER_CLASS

# Loss keys in the paper's row order (Table "results-image"), then the ablation variants.
METHOD_ORDER = ("all", "any", "mulsupcon", "simdissim", "jaccard", "proto", "msc", "sim", "dissim")
# The four methods the text, MIMIC and robustness experiments compare.
CORE_METHODS = ("all", "any", "mulsupcon", "simdissim")
# The claim check's two baselines: a linear probe on the encoder before any training, and the
# encoder trained end to end with supervised BCE, then the same probe. Kept out of METHOD_ORDER,
# which sets the rows of the paper's tables (the image table lists every METHOD_ORDER entry).
BASELINE_METHODS = ("none", "bce")
# Claim-check methods outside the paper's tables: Eq. 12 as printed (ANY's gradients) and
# per-label logistic regression on the inputs (the simplest baseline BCE must beat).
CLAIM_EXTRA_METHODS = ("eq12", "logreg")
# Every method in report order: the paper's methods, Eq. 12, then the baselines (claim-check tables).
ALL_METHOD_ORDER = (*METHOD_ORDER, "eq12", *BASELINE_METHODS, "logreg")
# The reference rows the results tables show below the losses, when the results have them: the
# floor (label prior), the encoder before pretraining, and supervised training. Never bold and
# never part of a "best" or improvement computation. The label prior (`python -m mscl chance`,
# method and encoder CHANCE) has no encoder, so `collect` files it under its own role,
# REFERENCE_ROLE, and the tables look it up there whatever the column's encoder; it has no
# batch size either (bs0), so every batch-size selection keeps it.
REFERENCE_METHODS = (CHANCE, *BASELINE_METHODS)
# Every built-in method's display name: mscl.registry's lists, the one place that names them (a
# plugin's loss carries its own, which `collect` records in all_runs.csv as method_display).
METHOD_DISPLAY_NAMES = {**registry.BUILTIN_LOSSES, **registry.REFERENCE_METHODS}
METHOD_COLOURS = {
    "all": "#0072B2",
    "any": "#56B4E9",
    "mulsupcon": "#009E73",
    "simdissim": "#D55E00",
    "jaccard": "#E69F00",
    "proto": "#CC79A7",
    "msc": "#7F7F7F",
    "sim": "#B8860B",
    "dissim": "#3F3F3F",
    "none": "#A0A0A0",  # light grey: the untrained encoder
    "bce": "#882255",  # Paul Tol's wine (colour-blind safe)
    "eq12": "#56B4E9",  # ANY's colour: it trains exactly like ANY
    "logreg": "#DDCC77",  # Paul Tol's sand
    "chance": "#000000",  # drawn as a dashed black line
}

ENCODER_DISPLAY_NAMES = {"resnet": "ResNet-50", "roberta": "RoBERTa", "llama": "Llama", "plm_icd": "PLM-ICD", "mlp": "MLP"}
ENCODER_MARKERS = {"resnet": "D", "roberta": "o", "llama": "s", "plm_icd": "^", "mlp": "v"}

IMAGE_DATASETS = ("coco", "voc", "nuswide")
IMAGE_METRICS = ("micro_f1", "macro_f1", "map")
F1_METRICS = ("micro_f1", "macro_f1")
MIMIC_ROLES = ("roberta", "llama", "plm_icd")
# MIMIC settings as (family, label space) -> dataset key, in the paper's column order.
MIMIC_FAMILIES = ("mimic3", "mimic4_icd9", "mimic4_icd10")
MIMIC_FAMILY_DISPLAY_NAMES = {"mimic3": "MIMIC-III", "mimic4_icd9": "MIMIC-IV-ICD9", "mimic4_icd10": "MIMIC-IV-ICD10"}
LABEL_SPACES = ("full", "50")
LABEL_SPACE_DISPLAY_NAMES = {"full": "Full", "50": "Top-50"}

METRIC_DISPLAY_NAMES = {
    "micro_f1": "Micro-F1",
    "macro_f1": "Macro-F1",
    "map": "mAP",
    "micro_auc": "Micro-AUC",
    "macro_auc": "Macro-AUC",
    "p_at_5": "P@5",
    "p_at_8": "P@8",
}

# How captions name the two macro-F1 definitions (`mscl.metrics`; docs/metrics.md has the full text)
# and the dataset families that decide between them.
MACRO_F1_DEFINITION_NAMES = {
    MACRO_F1_PER_CLASS: "mean of per-class F1 (MulSupCon)",
    MACRO_F1_CAML: "harmonic mean of macro-P and macro-R (CAML)",
}
FAMILY_DISPLAY_NAMES = {"image": "image", "text": "text", "tabular": "tabular", "mimic": "MIMIC"}

# Bars that show metrics rather than methods (improvement, std figures): one blue ramp.
METRIC_COLOURS = {"micro_f1": "#9ECAE1", "macro_f1": "#3182BD", "map": "#08519C"}

# Figure geometry: widths in inches of a one-column and a two-column (full-width) figure.
COLUMN_WIDTH_IN = 3.4
FULL_WIDTH_IN = 7.0
PNG_DPI = 200
MISSING_COLOUR = "#BBBBBB"

RC_PARAMS = {
    "font.family": "DejaVu Sans",
    "font.size": 8,
    "axes.titlesize": 9,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "legend.frameon": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.5,
    "pdf.fonttype": 42,  # embed TrueType so the PDF text stays selectable and editable
    "savefig.dpi": PNG_DPI,
}


def dataset_name(key: str) -> str:
    """Paper name of a dataset key (unknown keys as given)."""
    return DATASET_DISPLAY_NAMES.get(key, key)


def method_name(key: str) -> str:
    """Display name of a method key: built in, or registered by a plugin imported in this
    process (unknown keys, e.g. published SOTA models, as given)."""
    return registry.method_display(key)


def method_colour(key: str) -> str:
    """The fixed colour of a loss key; black for anything else."""
    return METHOD_COLOURS.get(key, "#000000")


def encoder_name(role: str) -> str:
    """Paper name of an encoder role."""
    return ENCODER_DISPLAY_NAMES.get(role, role)


def metric_colour(key: str) -> str:
    """The fixed colour of a metric's bars; grey for others."""
    return METRIC_COLOURS.get(key, "#7F7F7F")


def metric_name(key: str) -> str:
    """Display name of a metric key."""
    return METRIC_DISPLAY_NAMES.get(key, key)


def mimic_dataset(family: str, label_space: str) -> str:
    """Dataset key of a MIMIC family and label space, e.g. ('mimic4_icd9', '50') -> 'mimic4_icd9_50'."""
    return f"{family}_{label_space}"


def precision_at_k_metric(label_space: str) -> str:
    """The P@k metric the paper reports for a label space: P@8 for Full, P@5 for Top-50."""
    return "p_at_8" if label_space == "full" else "p_at_5"


def macro_f1_note(datasets: Iterable[str]) -> str | None:
    """The caption sentence naming the macro-F1 definition of the datasets a table or figure shows
    (None for none). One definition: "Macro-F1: <definition>"; several: one clause per definition
    naming its families. A dataset without a family is named as such."""
    families: dict[str | None, list[str]] = {}
    for dataset in dict.fromkeys(datasets):
        family = DATASET_FAMILIES.get(dataset)
        members = families.setdefault(FAMILY_MACRO_F1[family] if family else None, [])
        label = FAMILY_DISPLAY_NAMES[family] if family else dataset_name(dataset)
        if label not in members:
            members.append(label)
    if not families:
        return None
    if list(families) != [None] and len(families) == 1:
        return f"Macro-F1: {MACRO_F1_DEFINITION_NAMES[next(iter(families))]}"
    clauses = [
        f"{' and '.join(labels)}: {MACRO_F1_DEFINITION_NAMES[definition] if definition else 'no family, definition unknown'}"
        for definition, labels in families.items()
    ]
    return "Macro-F1 by dataset family: " + "; ".join(clauses)


def apply_style() -> None:
    """Set the shared matplotlib defaults (Agg backend, fonts, grid)."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams.update(RC_PARAMS)
