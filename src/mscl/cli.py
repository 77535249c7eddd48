"""Every `python -m mscl` command's options, in one light module.

`python -m mscl <command> --help`, and a usage error such as a missing required option, must
answer at once. So the argparse parsers live here, and this module imports only the standard
library and light mscl modules (never torch, pandas, transformers, matplotlib, sklearn; a test
runs every command's --help and checks): `mscl.__main__` parses a command's arguments with
`parse_args(command, argv)` before it imports the command's module, and that module's
`main(argv)` parses them with the same parser, so each option is defined once, here.

Every default and choice a parser offers comes from the standard-library modules
`mscl.defaults` (the commands' defaults) and `mscl.layout` (what the workflow shares: table,
figure and demo names, roles, MIMIC versions), which the commands' modules read too.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
from pathlib import Path
from typing import Callable, Sequence

from mscl.defaults import (
    AAPD_FRACTIONS,
    AAPD_POLICIES,
    CACHE_PREFIX_BATCH_SIZE,
    CLAIM_ALPHA,
    CLAIM_MARGIN,
    CLAIM_REFERENCE,
    CSV_FRACTIONS,
    CSV_LABEL_SEPARATOR,
    CSV_MODALITIES,
    DEBTAGS_EXCLUDED_FACETS,
    DEBTAGS_FRACTIONS,
    DEBTAGS_MIN_COUNT,
    EMBED_BATCH_SIZE,
    EXIT_STOPPED,
    FASHION_MNIST_CANVAS_SIZE,
    FASHION_MNIST_CLASS_EXPONENT,
    FASHION_MNIST_MAX_ITEMS,
    FASHION_MNIST_ROOT,
    FASHION_MNIST_VAL_FRACTION,
    GPU_BENCH_CASES,
    LABEL_FORM_NAMES,
    MAX_SEED,
    MIMIC_CHUNK_ROWS,
    MIMIC_DOWNLOAD_TIMEOUT_S,
    MIMIC_LABEL_SPACES,
    MISSING_IMAGES_DEFAULTS,
    MISSING_POLICIES,
    NUSWIDE_FRACTIONS,
    VOC_DIFFICULT_POLICIES,
    YEAST_POLICIES,
    YEAST_VAL_FRACTION,
)
from mscl.layout import DATASET_FAMILY_NAMES, DEMO_KINDS, FIGURE_NAMES, MIMIC_VERSIONS, PAPER_DATASETS, PAPER_ROLES, TABLE_NAMES

AddOptions = Callable[[argparse.ArgumentParser], None]
# command -> (description, module whose docstring's first paragraph is the description, options)
_COMMANDS: dict[str, tuple[str | None, str | None, AddOptions]] = {}


def command(name: str, *, description: str | None = None, doc_of: str | None = None) -> Callable[[AddOptions], AddOptions]:
    """Register the function that adds command `name`'s options (`bench NAME` for a benchmark).

    The --help description is `description`, or the first paragraph of module `doc_of`'s docstring.
    """

    def register(add_options: AddOptions) -> AddOptions:
        _COMMANDS[name] = (description, doc_of, add_options)
        return add_options

    return register


def commands() -> tuple[str, ...]:
    """Every command with a parser here."""
    return tuple(_COMMANDS)


def module_summary(module: str) -> str:
    """First paragraph of `module`'s docstring, read from its source file without importing it
    (importing the module would import torch or pandas, which --help must not)."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ValueError(f"module {module!r} not found")
    docstring = ast.get_docstring(ast.parse(Path(spec.origin).read_text(encoding="utf-8")), clean=False)
    return (docstring or "").split("\n\n")[0]


def build_parser(name: str) -> argparse.ArgumentParser:
    """The argparse parser of command `name` (prog `python -m mscl NAME`)."""
    description, doc_of, add_options = _COMMANDS[name]
    if description is None and doc_of is not None:
        description = module_summary(doc_of)
    parser = argparse.ArgumentParser(prog=f"python -m mscl {name}", description=description)
    add_options(parser)
    return parser


def parse_args(name: str, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse command `name`'s arguments; --help and usage errors exit here (SystemExit 0 or 2)."""
    return build_parser(name).parse_args(argv)


# ----------------------------------------------------------- options several commands share


def seed(text: str) -> int:
    """argparse type of every --seed: an integer in [0, MAX_SEED]."""
    if not text.isdigit() or int(text) > MAX_SEED:
        raise argparse.ArgumentTypeError(f"{text!r} is not a seed. Fix: give an integer from 0 to {MAX_SEED}")
    return int(text)


def add_from_config_argument(parser: argparse.ArgumentParser) -> None:
    """`--from-config`: a preparation's messages name the config keys its options come from."""
    parser.add_argument(
        "--from-config", action="store_true",
        help="the options come from the config's `sources.<name>` block (the workflow passes it): messages name its keys beside the options",
    )  # fmt: skip


def add_image_arguments(parser: argparse.ArgumentParser, source: str) -> None:
    """Add --root/--out/--seed and the image-check options every image parser takes."""
    missing_default = MISSING_IMAGES_DEFAULTS[source]
    parser.add_argument("--root", required=True, type=Path, help="dataset root folder (the published layout)")
    parser.add_argument("--out", required=True, type=Path, help="output folder of the prepared manifest")
    parser.add_argument("--seed", type=seed, default=0, help="seed of the split (default 0)")
    parser.add_argument(
        "--verify-images",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="decode every referenced image in full with PIL, in parallel (default on)",
    )
    parser.add_argument(
        "--missing-images",
        choices=MISSING_POLICIES,
        default=missing_default,
        help=f"a missing or undecodable image is an error, or is dropped, counted and listed in stats.json (default {missing_default})",
    )
    add_from_config_argument(parser)


def add_fractions_argument(parser: argparse.ArgumentParser, default: Sequence[float], help_default: str) -> None:
    """The `--fractions TRAIN VAL TEST` option of the parsers that split seeded by fractions."""
    parser.add_argument(
        "--fractions",
        nargs=3,
        type=float,
        default=list(default),
        metavar=("TRAIN", "VAL", "TEST"),
        help=f"split fractions, summing to 1 (default: {help_default})",
    )


def add_results_arguments(parser: argparse.ArgumentParser, artifact: str, example: str) -> None:
    """The options `table` and `figure` share: the tidy results, the output prefix, the batch size."""
    parser.add_argument("--runs", type=Path, help=f"tidy CSV from `python -m mscl collect` (all {artifact}s but {example})")
    parser.add_argument("--out-prefix", required=True, type=Path, help=f"output path without suffix, e.g. results/{artifact}s/NAME")
    parser.add_argument("--batch-size", type=int, help="use runs at this batch size (default: per dataset and encoder, the size most runs share)")


# ------------------------------------------------------------------------ preprocessing


@command("fetch-mimic-splits", description="Copy or download the fixed MIMIC split lists and top-50 code list, verified by sha256.")
def _fetch_mimic_splits(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", required=True, choices=MIMIC_VERSIONS, help="which setting's lists")
    parser.add_argument("--out", required=True, type=Path, help="folder to write the 7 files into")
    parser.add_argument("--source", type=Path, help="copy from this local folder (or its <version>/ subfolder) instead of downloading")
    parser.add_argument(
        "--no-verify",
        action="store_true",
        help="skip the sha256 check (only for deliberately custom lists: results will not match the paper)",
    )
    parser.add_argument("--timeout", type=float, default=MIMIC_DOWNLOAD_TIMEOUT_S, help="download timeout per file, seconds")


@command("prepare-mimic", doc_of="mscl.data.mimic")
def _prepare_mimic(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", required=True, choices=MIMIC_VERSIONS, help="MIMIC-III, or MIMIC-IV with ICD-9 or ICD-10 codes")
    parser.add_argument("--root", required=True, type=Path, help="raw release folder (MIMIC-III: NOTEEVENTS.csv(.gz)...; MIMIC-IV: note/, hosp/)")
    parser.add_argument("--splits", required=True, type=Path, help="folder written by `fetch-mimic-splits` for this version")
    parser.add_argument("--out-full", required=True, type=Path, help="output folder of the full-code setting")
    parser.add_argument("--out-50", required=True, type=Path, help="output folder of the top-50 setting")
    parser.add_argument(
        "--label-space",
        choices=MIMIC_LABEL_SPACES,
        default="train",
        help="full-setting vocabulary: codes seen in train (default, MIMIC-III ~8.7k) or in any split (CAML's 8,922)",
    )
    parser.add_argument("--chunk-rows", type=int, default=MIMIC_CHUNK_ROWS, help="CSV rows per streamed chunk (memory knob)")


@command("prepare-coco", doc_of="mscl.data.coco")
def _prepare_coco(parser: argparse.ArgumentParser) -> None:
    add_image_arguments(parser, "coco")


@command("prepare-voc", doc_of="mscl.data.voc")
def _prepare_voc(parser: argparse.ArgumentParser) -> None:
    add_image_arguments(parser, "voc")
    parser.add_argument(
        "--difficult",
        choices=VOC_DIFFICULT_POLICIES,
        default="include",
        help="whether objects marked difficult count as labels (default include)",
    )


@command("prepare-nuswide", doc_of="mscl.data.nuswide")
def _prepare_nuswide(parser: argparse.ArgumentParser) -> None:
    add_image_arguments(parser, "nuswide")
    add_fractions_argument(parser, NUSWIDE_FRACTIONS, "0.6 0.2 0.2; AllLabels only: TrainTestLabels keeps the official split")


@command("prepare-aapd", doc_of="mscl.data.aapd")
def _prepare_aapd(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", required=True, type=Path, help="folder holding text_{train,val,test} and label_{train,val,test}")
    parser.add_argument("--out", required=True, type=Path, help="output folder of the prepared manifest")
    parser.add_argument("--seed", type=seed, default=0, help="seed of the re-split (default 0)")
    parser.add_argument("--policy", choices=AAPD_POLICIES, default="resplit", help="re-split the pooled documents (default) or keep the published split")
    add_fractions_argument(parser, AAPD_FRACTIONS, "the paper's 37.8k/6.7k/11.3k proportions, used by the re-split")
    add_from_config_argument(parser)


@command("prepare-yeast", doc_of="mscl.data.yeast")
def _prepare_yeast(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, type=Path, help="output folder of the prepared manifest")
    parser.add_argument("--source", type=Path, default=None, help="yeast CSV(.gz) (default: river/datasets/yeast.csv.gz of the installed river)")
    parser.add_argument("--split", choices=YEAST_POLICIES, default="mulan", help="MULAN's train/test split (default, md5-checked) or a seeded re-split")
    parser.add_argument("--val-fraction", type=float, default=YEAST_VAL_FRACTION, help="share of the train pool carved out as val (default 0.2)")
    parser.add_argument("--seed", type=seed, default=0, help="seed of the val carve-out (default 0)")


def parse_facets(value: str) -> tuple[str, ...]:
    """`--exclude-facets A,B`: the sorted distinct facet names ('' keeps all)."""
    return tuple(sorted({facet.strip() for facet in value.split(",") if facet.strip()}))


@command("prepare-debtags", doc_of="mscl.data.debtags")
def _prepare_debtags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lists", type=Path, default=Path("/var/lib/apt/lists"), help="apt lists folder (default /var/lib/apt/lists)")
    parser.add_argument("--out", required=True, type=Path, help="output folder of the prepared manifest")
    parser.add_argument("--min-count", type=int, default=DEBTAGS_MIN_COUNT, help="keep tags carried by at least this many packages (default 50)")
    parser.add_argument(
        "--exclude-facets",
        type=parse_facets,
        default=DEBTAGS_EXCLUDED_FACETS,
        help="comma-separated facets whose tags are dropped (default role,special,made-of; '' keeps all)",
    )
    parser.add_argument("--seed", type=seed, default=0, help="salt of the name hash that picks the split (default 0)")
    add_fractions_argument(parser, DEBTAGS_FRACTIONS, "0.7 0.1 0.2")
    parser.add_argument(
        "--sample-fraction",
        type=float,
        default=1.0,
        help="keep this share of the labelled packages, by a name hash independent of the split (default 1: all)",
    )


@command("prepare-fashion-mnist", doc_of="mscl.data.fashion_mnist")
def _prepare_fashion_mnist(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", type=Path, default=FASHION_MNIST_ROOT, help=f"folder of the idx files (default {FASHION_MNIST_ROOT})")
    parser.add_argument("--out", required=True, type=Path, help="output folder: PNG canvases under images/ and the manifest")
    parser.add_argument("--train-canvases", required=True, type=int, help="number of train canvases")
    parser.add_argument("--test-canvases", required=True, type=int, help="number of test canvases (from t10k)")
    parser.add_argument("--val-fraction", type=float, default=FASHION_MNIST_VAL_FRACTION, help="share of train images held out for val, and val canvases per train canvas (default 0.1)")
    parser.add_argument("--seed", type=seed, default=0, help="seed of the held-out part and of every canvas (default 0)")
    parser.add_argument("--canvas-size", type=int, default=FASHION_MNIST_CANVAS_SIZE, help="canvas side in pixels, a 2x2 grid of cells (default 56)")
    parser.add_argument("--max-items", type=int, default=FASHION_MNIST_MAX_ITEMS, help="items per canvas are uniform in 1..max (default 4)")
    parser.add_argument("--class-exponent", type=float, default=FASHION_MNIST_CLASS_EXPONENT, help="Zipf exponent of the class draw, 0 = uniform (default 1.0)")


def delimiter(text: str) -> str:
    """argparse type of `prepare-csv --delimiter`: auto, tab (or \\t), or one character."""
    if text == "auto":
        return text
    if text in ("tab", "\\t", "\t"):  # the word, a typed backslash-t, or a real tab
        return "\t"
    if len(text) != 1 or text.isalnum() or text in "\"\r\n ":
        raise argparse.ArgumentTypeError(f"{text!r} is not a delimiter. Fix: give auto, tab, or one punctuation character such as , ; |")
    return text


def add_family_argument(parser: argparse.ArgumentParser, default_help: str) -> None:
    """The `--family` of the commands that prepare a dataset of one's own."""
    parser.add_argument(
        "--family", choices=DATASET_FAMILY_NAMES, default=None,
        help=f"dataset family, which decides what its macro_f1 means (docs/metrics.md; default: {default_help})",
    )  # fmt: skip


def add_own_dataset_arguments(parser: argparse.ArgumentParser) -> None:
    """The options `prepare-csv` and `prepare-manifest` share: the output, its name and the image check."""
    parser.add_argument("--out", required=True, type=Path, help="output folder of the prepared manifest")
    parser.add_argument("--dataset", default=None, help="dataset name recorded in stats.json (default: the --out folder's name)")
    parser.add_argument(
        "--verify-images", action=argparse.BooleanOptionalAction, default=True,
        help="image datasets: decode every image in full with PIL, in parallel, besides checking that it exists (default on)",
    )  # fmt: skip
    add_from_config_argument(parser)


@command("prepare-csv", doc_of="mscl.data.csv_source")
def _prepare_csv(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--path", required=True, type=Path, help="the CSV or TSV file (UTF-8, a header line first)")
    add_own_dataset_arguments(parser)
    parser.add_argument("--input-column", required=True, help="column of each sample's text, or with --modality image its image path (relative to the file's folder)")
    parser.add_argument("--labels-column", required=True, help="column of each sample's labels, joined by --separator")
    parser.add_argument("--separator", default=CSV_LABEL_SEPARATOR, help=f"what joins the labels within a cell (default {CSV_LABEL_SEPARATOR!r})")
    parser.add_argument(
        "--separator-check", action=argparse.BooleanOptionalAction, default=True,
        help="refuse a labels column whose cells look joined by another separator (|, comma, /, whitespace, ...) than --separator, which never occurs (default on)",
    )  # fmt: skip
    split = parser.add_mutually_exclusive_group()
    split.add_argument("--split-column", default=None, help="column naming each row's split: train, val or test (any case; dev, valid, validation mean val)")
    split.add_argument(
        "--fractions", nargs=3, type=float, default=None, metavar=("TRAIN", "VAL", "TEST"),
        help=f"without --split-column: seeded split fractions, summing to 1 (default {' '.join(map(str, CSV_FRACTIONS))})",
    )  # fmt: skip
    parser.add_argument("--modality", choices=CSV_MODALITIES, default="text", help="what --input-column holds: text (default) or image paths")
    add_family_argument(parser, "the modality's: image or text")
    parser.add_argument("--id-column", default=None, help="column of unique sample ids (default: ids row-000001, row-000002, ... by data row)")
    parser.add_argument("--seed", type=seed, default=0, help="seed of the split by fractions (default 0)")
    parser.add_argument("--delimiter", type=delimiter, default="auto", help="field delimiter: auto (default: tab for .tsv/.tab, comma for .csv, else sniffed), tab, or a character")


@command("prepare-manifest", doc_of="mscl.data.manifest_source")
def _prepare_manifest(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", required=True, type=Path, help="folder in the manifest format: {train,val,test}.parquet, labels.txt, optionally stats.json")
    add_own_dataset_arguments(parser)
    add_family_argument(parser, "the input stats.json's `family`, else the modality's: image, text or tabular")


@command("make-demo", description="Generate a small demo dataset from packaged real data, in the real raw format.")
def _make_demo(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kind", choices=sorted(DEMO_KINDS), help="which dataset format to imitate")
    parser.add_argument("--out", required=True, type=Path, help="dataset root to (re)create")
    parser.add_argument("--seed", type=seed, default=0, help="random seed (same seed -> identical files)")
    parser.add_argument(
        "--samples",
        type=int,
        default=None,
        help="images/documents/admissions; default "
        + ", ".join(f"{kind} {spec[2]}" for kind, spec in DEMO_KINDS.items()),
    )


@command("make-synthetic", doc_of="mscl.demo.synthetic")
def _make_synthetic(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", choices=PAPER_DATASETS, help="which of the paper's datasets to shape it after")
    parser.add_argument("--scale", type=float, default=1.0, help="share of the paper's split sizes, in (0, 1] (default 1)")
    parser.add_argument("--out", required=True, type=Path, help="prepared dataset folder to write")
    parser.add_argument("--seed", type=seed, default=0, help="random seed (same seed -> identical files)")


@command("stats-table", description="dataset statistics table (tex/csv/md/html) from manifests")
def _stats_table(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", action="append", required=True, metavar="NAME=DIR", help="dataset key and prepared folder; repeat per dataset")
    parser.add_argument("--name", action="append", default=[], metavar="NAME=DISPLAY", help="how the table calls a dataset (default: its plain name); repeat per dataset")
    parser.add_argument("--out-prefix", required=True, type=Path, help="output path without suffix, e.g. results/tables/statistics")


@command("make-tiny-models", description="Write randomly initialised local RoBERTa and Llama models plus a BPE tokenizer (offline).")
def _make_tiny_models(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, type=Path, help="folder to (re)create with tokenizer/ and the set's model folders")
    parser.add_argument("--seed", type=seed, default=0, help="weight initialisation seed (same seed -> identical files)")
    parser.add_argument(
        "--set",
        choices=("tiny", "paper"),
        default="tiny",
        help="tiny: roberta/ and llama/, 2 layers at width 64 (tests); paper: roberta-base/ (roberta-base's config) and "
        "llama-3.1-8b-design/ (Llama-3.1-8B's layer design, hidden 512, 4 layers), the smoke overlay's stand-ins",
    )


def add_encoder_pass_arguments(parser: argparse.ArgumentParser, encoders: str, out_help: str, batch_size: int, batch: str) -> None:
    """The options of the commands that run an encoder once over a text manifest's splits
    (embed-text, cache-prefix): the manifest, the encoder spec, the output and the batch size."""
    parser.add_argument("--data", required=True, type=Path, help="prepared text manifest folder")
    parser.add_argument("--encoder-spec", required=True, help=f"{encoders} (or a run spec): inline JSON starting with '{{' or a JSON/YAML file")
    parser.add_argument("--out", required=True, type=Path, help=out_help)
    parser.add_argument("--batch-size", type=int, default=batch_size, help=f"texts per {batch} (default {batch_size})")


@command("embed-text", doc_of="mscl.data.embed")
def _embed_text(parser: argparse.ArgumentParser) -> None:
    add_encoder_pass_arguments(parser, "hf encoder spec", "output folder of the embedded (tabular) manifest", EMBED_BATCH_SIZE, "batch")


@command("image-pixels", doc_of="mscl.data.pixels")
def _image_pixels(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, type=Path, help="prepared image manifest folder")
    parser.add_argument("--size", required=True, type=int, help="side of the grey pixel square each image is box-averaged to")
    parser.add_argument("--out", required=True, type=Path, help="output folder of the pixel-vector (tabular) manifest")


# ---------------------------------------------------------------------------- training


@command("cache-prefix", doc_of="mscl.train.prefix")
def _cache_prefix(parser: argparse.ArgumentParser) -> None:
    encoders = "hf or plm_icd encoder spec with trainable_layers"
    add_encoder_pass_arguments(parser, encoders, "cache file to write (.pt)", CACHE_PREFIX_BATCH_SIZE, "prefix batch")


def add_run_arguments(parser: argparse.ArgumentParser, out_help: str, prefix_cache_use: str = "") -> None:
    """The options of a run's training jobs (pretrain, probe): its data, spec, output folder and
    the encoder's frozen-prefix cache."""
    parser.add_argument("--data", required=True, type=Path, help="prepared manifest folder")
    parser.add_argument("--spec", required=True, help="run spec: inline JSON starting with '{' or a JSON/YAML file")
    parser.add_argument("--out", required=True, type=Path, help=out_help)
    parser.add_argument(
        "--prefix-cache",
        type=Path,
        default=None,
        help=f"frozen-prefix cache of a trainable_layers hf or plm_icd encoder (python -m mscl cache-prefix){prefix_cache_use}",
    )
    parser.add_argument(
        "--selected",
        type=Path,
        default=None,
        help="tuning selection (selected.json of `python -m mscl select-setting`): its chosen pretrain values replace the spec's",
    )


@command("pretrain", doc_of="mscl.train.pretrain")
def _pretrain(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser, "output folder (a rerun resumes from its checkpoint)", ": train the top layers on it")
    parser.add_argument(
        "--stop-after-epoch",
        type=int,
        default=None,
        metavar="K",
        help=f"exit with code {EXIT_STOPPED} right after checkpointing epoch K (simulates a killed job)",
    )


@command("launch", doc_of="mscl.train.launch")
def _launch(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gpus", type=int, default=0, help="GPUs of the job (its `resources.gpu`): held from the local pool for the job's life (default 0)")
    parser.add_argument("--torchrun", action="store_true", help="with --gpus N > 1: run the command as N processes under torchrun (one per GPU)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- and the job's command, e.g. -- python -m mscl pretrain ...")


@command("probe", doc_of="mscl.train.probe")
def _probe(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser, "output folder")
    parser.add_argument("--pretrained", required=True, type=Path, help="pretrain output folder (holds encoder.pt)")


@command("select-setting", doc_of="mscl.tuning")
def _select_setting(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--metrics", required=True, nargs="+", type=Path, help="probe metrics.json of every tuning run of one method (every setting x tuning seed)")
    parser.add_argument("--keys", required=True, nargs="+", help="the grid's pretrain keys, e.g. temperature lr")
    parser.add_argument("--metric", default="map", help="val metric (metrics.json val_best) the choice maximises (default map)")
    parser.add_argument("--out", required=True, type=Path, help="selection file to write (selected.json)")


# ------------------------------------------------------------------------------ report


@command("chance", doc_of="mscl.report.chance")
def _chance(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, type=Path, help="prepared manifest folder")
    parser.add_argument("--out", required=True, type=Path, help="output folder (the run's probe/ folder)")
    parser.add_argument("--dataset", help="dataset name recorded in the spec (default: the --data folder's name)")
    parser.add_argument(
        "--dataset-family", choices=DATASET_FAMILY_NAMES, default=None,
        help="the dataset's family when its name has none in mscl.metrics.DATASET_FAMILIES (a dataset of one's own; recorded in the spec)",
    )  # fmt: skip


def add_configfile_argument(parser: argparse.ArgumentParser) -> None:
    """--configfile of the commands that run beside Snakemake (mscl.workflow_config)."""
    parser.add_argument(
        "--configfile", nargs="+", metavar="FILE",
        help="the config files snakemake runs with, in the same order (default: the checkout's config.yaml, as snakemake's)",
    )  # fmt: skip


@command("stale", doc_of="mscl.stale")
def _stale(parser: argparse.ArgumentParser) -> None:
    add_configfile_argument(parser)


def positive_int(text: str) -> int:
    """argparse type of a count of at least 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return int(text)


@command("progress", doc_of="mscl.progress")
def _progress(parser: argparse.ArgumentParser) -> None:
    add_configfile_argument(parser)
    parser.add_argument("--jobs", type=positive_int, metavar="N", help="jobs that run at once, for the wall time left (default: the number running now, at least 1)")
    parser.add_argument("--snakefile", type=Path, metavar="FILE", help="the workflow's Snakefile (default: the one snakemake finds here, else this checkout's)")


@command("collect", description="gather every run's metrics into one tidy CSV")
def _collect(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--metrics", nargs="+", required=True, metavar="FILE", help="metrics.json of probe (or chance) runs; the run axes come from the spec recorded in each")
    parser.add_argument(
        "--roles",
        nargs="+",
        required=True,
        metavar="ENCODER=ROLE",
        help=f"role of each encoder: a paper column ({', '.join(PAPER_ROLES)}) or a name of your own (the benchmark alone; chance=reference); where encoders share a role on a dataset, the paper's tables show the paper's model, else the first listed (the workflow lists them by key)",
    )
    parser.add_argument("--train-counts", nargs="*", default=[], metavar="DATASET=STATS_JSON", help="stats.json of datasets that get head/tail bucket metrics")
    parser.add_argument("--dataset-names", nargs="*", default=[], metavar="DATASET=NAME", help="how tables and figures call each dataset (default: its key)")
    parser.add_argument("--encoder-names", nargs="*", default=[], metavar="ENCODER=NAME", help="how tables and figures call each encoder (default: its key)")
    parser.add_argument("--method-names", nargs="*", default=[], metavar="LOSS=NAME", help="how tables and figures call each loss (default: the paper's name of a built-in loss, else its key)")
    parser.add_argument("--paper-datasets", nargs="*", default=[], metavar="DATASET", help="datasets that are the paper's own, on the real data (mscl.report.names)")
    parser.add_argument("--paper-encoders", nargs="*", default=[], metavar="ENCODER", help="encoders that are the paper's own models (mscl.report.names)")
    parser.add_argument("--out", required=True, type=Path, help="tidy CSV to write, e.g. results/metrics/all_runs.csv")


@command("table", description="one paper table (tex/csv/md/html) from the tidy results")
def _table(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", choices=TABLE_NAMES)
    add_results_arguments(parser, "table", "cost")
    parser.add_argument(
        "--metrics",
        nargs="*",
        default=[],
        metavar="FILE",
        help="cost table: probe metrics.json of each run whose training jobs it counts (their benchmark files are found from the run)",
    )


@command("figure", description="one paper figure (pdf/png/html) from the tidy results")
def _figure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", choices=FIGURE_NAMES)
    add_results_arguments(parser, "figure", "relations")
    parser.add_argument("--split", choices=("test", "val"), help="split to plot (default: test; batch_size uses val as the paper)")


@command("loss-curves", doc_of="mscl.report.loss_curves")
def _loss_curves(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pretrain", nargs="+", required=True, type=Path, metavar="DIR", help="pretraining folders (each with resolved_spec.json and, when the run trained, train_log.csv)")
    parser.add_argument("--runs", required=True, type=Path, help="tidy results (all_runs.csv), for the names of datasets, encoders and losses")
    parser.add_argument("--out-prefix", required=True, type=Path, help="writes <prefix>.pdf, .png and .html")


@command("benchmark", doc_of="mscl.report.benchmark")
def _benchmark(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", required=True, type=Path, help="tidy CSV from `python -m mscl collect`, e.g. results/metrics/all_runs.csv")
    parser.add_argument("--out-prefix", required=True, type=Path, help="table path without suffix: writes .csv, .md and .html, e.g. results/tables/benchmark")
    parser.add_argument("--figure-prefix", type=Path, help="figure path without suffix: writes .pdf, .png and .html, e.g. results/figures/benchmark (default: no figure)")
    parser.add_argument("--metric", help="the metric the tables and the figure show for every dataset that has it (default: per dataset family, mAP for images, micro_f1 otherwise); the CSV has every metric")
    parser.add_argument("--split", choices=("test", "val"), default="test", help="split to report (default: test)")
    parser.add_argument("--families", nargs="*", default=[], metavar="DATASET=FAMILY", help="family (image, text, tabular, mimic) of datasets mscl.metrics does not know, for their default metric")


@command("check-complete", doc_of="mscl.report.complete")
def _check_complete(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tables", nargs="*", default=[], type=Path, metavar="CSV", help="CSV of each paper table (`python -m mscl table NAME`)")
    parser.add_argument("--statistics", type=Path, help="statistics.csv (`python -m mscl stats-table`)")
    parser.add_argument("--datasets", nargs="*", default=[], metavar="NAME", help="dataset settings the statistics table must list")
    parser.add_argument("--runs", type=Path, help="tidy CSV from `python -m mscl collect` (for the figures)")
    parser.add_argument("--figure", action="append", default=[], metavar="NAME[=BATCH]", help=f"a figure to rebuild and check ({', '.join(FIGURE_NAMES)}), at batch size BATCH (default: the figure's own)")
    parser.add_argument("--out", type=Path, help="summary file, written only when nothing is missing")


@command("readme-results", doc_of="mscl.report.readme")
def _readme_results(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=Path, help="tidy CSV of the run the block shows (results/metrics/all_runs.csv)")
    parser.add_argument("--rerun", type=Path, help="tidy CSV of a rerun of the same commit under another setting (threads, oneDNN, CPU)")
    parser.add_argument("--setting", default="1 torch thread per job", help="how the run was made (default: 1 torch thread per job, the default config's)")
    parser.add_argument("--rerun-setting", default="2 torch threads per job", help="how the rerun was made (default: 2 torch threads per job)")
    parser.add_argument("--commit", help="commit the run was made with (default: this checkout's HEAD)")
    parser.add_argument("--machine", help="machine of the run (default: this one's CPU model and core count)")
    parser.add_argument("--rerun-machine", help="machine of the rerun (default: --machine)")
    parser.add_argument("--record", type=Path, default=Path("docs/results/demo_run.csv"), help="the record to write, or to check against (default docs/results/demo_run.csv)")
    parser.add_argument("--readme", type=Path, default=Path("README.md"), help="README holding the block between its markers (default README.md)")
    parser.add_argument("--check", action="store_true", help="only check that the README's block is the one the record gives (exit 1 if not)")


@command("claim-report", doc_of="mscl.report.claim")
def _claim_report(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", required=True, type=Path, help="folder of the claim-export files (runs.csv, batch_size.csv, buckets.csv, convergence.csv, tuning.csv, probes.csv, schedule.csv, schedule_convergence.csv)")
    parser.add_argument("--out-dir", required=True, type=Path, help="folder for tests.csv, batch_size_tests.csv, long_tail_tests.csv, schedule_tests.csv and claim_report.md")
    parser.add_argument("--figures-dir", type=Path, help="folder for the figures (default: --out-dir)")
    parser.add_argument("--docs", nargs="+", type=Path, default=[], help="markdown files whose generated blocks (<!-- claim-report:NAME -->) are rewritten")
    parser.add_argument("--check", action="store_true", help="with --docs: only compare the blocks, exit 1 if any differs")
    parser.add_argument("--previous", type=Path, help="an earlier published data folder (runs.csv, tests.csv; e.g. docs/claim/resnet8): the outcome says which runs reproduce it and which primary verdicts differ")
    parser.add_argument("--reference", default=CLAIM_REFERENCE, help=f"method compared with every other (default {CLAIM_REFERENCE})")
    parser.add_argument("--alpha", type=float, default=CLAIM_ALPHA, help=f"family-wise level of the Holm-adjusted verdicts (default {CLAIM_ALPHA})")
    parser.add_argument("--margin", type=float, default=CLAIM_MARGIN, help=f"equivalence margin of the TOST, as a fraction (default {CLAIM_MARGIN}: 1 point)")


@command("claim-export", doc_of="mscl.report.claim_data")
def _claim_export(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--metrics", required=True, nargs="+", type=Path, help="probe metrics.json of every test run of the claim check")
    parser.add_argument("--selections", nargs="*", type=Path, default=[], help="every tuning selection (selected.json)")
    parser.add_argument("--train-stats", nargs="+", default=[], metavar="DATASET=STATS_JSON", help="each dataset's stats.json (training label counts for the frequency buckets)")
    parser.add_argument("--out-dir", required=True, type=Path, help="folder for runs.csv, batch_size.csv, buckets.csv, convergence.csv, tuning.csv, probes.csv, schedule.csv, schedule_convergence.csv")
    parser.add_argument("--allow-mixed-commits", action="store_true", help="write even if the runs come from several (or uncommitted) versions of the code; the report says so")


@command("job-server", doc_of="mscl.jobserver")
def _job_server(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--socket", required=True, help="Unix socket path to serve (the workflow exports it to the jobs as $MSCL_JOB_SERVER)")
    parser.add_argument("--owner-pid", required=True, type=int, help="process whose end stops the server (the Snakemake run)")
    parser.add_argument("--preload", nargs="+", metavar="MODULE", help="modules to import before serving (default: what training jobs import)")


@command("eq12", doc_of="mscl.eq12")
def _eq12(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--labels", type=int, default=10)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--seed", type=seed, default=0)


# ---------------------------------------------------------- benchmarks (`bench NAME`)


@command("bench losses", doc_of="mscl.bench.losses")
def _bench_losses(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--anchors", type=int, nargs="+", default=[256, 1024], help="overview: n = B*V anchors (V = 2)")
    parser.add_argument("--overhead-anchors", type=int, default=1024, help="n for the label-bookkeeping table")
    parser.add_argument("--labels", type=int, nargs="+", default=[80, 8692, 25230], help="label-space sizes L")
    parser.add_argument("--dim", type=int, default=256, help="projection dimension D")
    parser.add_argument("--repeats", type=int, default=21, help="timed runs per cell (median reported)")
    parser.add_argument("--forms", nargs="+", default=list(LABEL_FORM_NAMES), choices=LABEL_FORM_NAMES, help="label forms")
    parser.add_argument(
        "--losses",
        nargs="+",
        default=None,  # mscl.bench.losses.OVERVIEW_LOSSES: every loss and some variants (the loss names need torch)
        help="overview losses; ':literal' = simdissim form=literal, ':csr' = labels as a sparse CSR tensor",
    )
    parser.add_argument("--no-overview", action="store_true", help="print the label-bookkeeping table only")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")


@command("bench preprocess", doc_of="mscl.bench.preprocess")
def _bench_preprocess(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--notes", type=int, default=12_000, help="notes at 1x (all categories)")
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 10], help="multiples of --notes to measure")
    parser.add_argument("--chunk-rows", type=int, default=5_000, help="passed to prepare-mimic")
    parser.add_argument("--seed", type=seed, default=0)
    parser.add_argument("--workdir", type=Path, help="scratch folder (default: a temporary one, removed afterwards)")


@command("bench images", doc_of="mscl.bench.images")
def _bench_images(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--images", type=int, default=300, help="JPEGs to write and check (default 300)")
    parser.add_argument("--size", type=int, nargs=2, default=[640, 480], metavar=("WIDTH", "HEIGHT"), help="their size in pixels (default 640 480, COCO's usual)")
    parser.add_argument("--workers", type=int, default=None, help="the most decoding threads to time (default: the CPUs this process may use)")
    parser.add_argument("--seed", type=seed, default=0)


@command("bench dag", doc_of="mscl.bench.dag")
def _bench_dag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log", required=True, nargs="+", type=Path,
        help="a finished run's .snakemake/log/*.snakemake.log; a stopped and resumed run: every segment's log, in order",
    )
    parser.add_argument("--results", type=Path, default=Path("results"), help="the run's paths.results (relative to --workdir)")
    parser.add_argument("--workdir", type=Path, default=Path("."), help="the folder Snakemake ran in")


@command("bench scale", doc_of="mscl.bench.scale")
def _bench_scale(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", choices=PAPER_DATASETS, default="mimic4_icd10_full", help="the paper dataset whose shape is measured (default mimic4_icd10_full)")
    parser.add_argument("--scales", type=float, nargs="+", default=[0.01, 0.02, 0.04], help="shares of the paper's sizes, each in (0, 1] (default 0.01 0.02 0.04)")
    parser.add_argument("--skip", nargs="*", default=[], choices=["pretrain", "probe"], help="stages to leave out")
    parser.add_argument("--plm-icd", action="store_true", help="MIMIC: also pretrain and probe PLM-ICD's stand-in (seconds per document on a CPU)")
    parser.add_argument("--threads", type=int, default=2, help="OMP_NUM_THREADS of every stage (default 2)")
    parser.add_argument("--workdir", type=Path, help="scratch folder, kept (default: a temporary one, removed)")
    parser.add_argument("--csv", type=Path, help="also write the measurements to this CSV")


@command("bench loader", doc_of="mscl.bench.loader")
def _bench_loader(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, help="prepared image manifest folder (default: make-synthetic coco --scale 0.01 in a temporary folder)")
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2], help="DataLoader worker counts to time (default 0 1 2)")
    parser.add_argument("--image-size", type=int, default=224, help="crop side in pixels (default 224, the paper's)")
    parser.add_argument("--batch-size", type=int, default=64, help="samples per batch, two views each (default 64)")
    parser.add_argument("--batches", type=int, default=10, help="timed batches per worker count (default 10)")
    parser.add_argument("--samples", type=int, default=200, help="samples timed part by part in this process (default 200)")
    parser.add_argument("--target", type=int, default=3000, help="views/s a GPU consumes, to size the workers for (default 3,000: ResNet-50 bf16 on an H100)")


@command("bench curves", doc_of="mscl.bench.curves")
def _bench_curves(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, type=Path, help="prepared dataset folder (e.g. data/processed/coco after `make demo`)")
    parser.add_argument("--spec", required=True, help="run spec, inline JSON or a JSON/YAML file (as `pretrain --spec`)")
    parser.add_argument("--epochs", type=positive_int, default=6, help="timed epochs with curves off and as many on (default 6)")
    parser.add_argument("--points", type=positive_int, default=50, help="loss points an epoch (default 50)")


@command("bench gpu", doc_of="mscl.bench.gpu")
def _bench_gpu(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cuda: the paper's sizes; cpu: toy sizes that check the code (default cuda)")
    parser.add_argument("--cases", nargs="+", choices=GPU_BENCH_CASES, default=list(GPU_BENCH_CASES), help="what to measure (default: all)")
    parser.add_argument("--steps", type=int, default=30, help="timed optimisation steps per loop (default 30: more than two batches per worker)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps before each loop (default 2)")
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions of the losses and decode cases, median (default 5)")
    parser.add_argument("--data-dir", type=Path, help="folder for the synthetic data, reused when already there (default: a temporary one)")
    parser.add_argument("--models", type=Path, help="make-tiny-models output, written there when absent (default: a temporary folder; --set paper on CUDA)")
    parser.add_argument("--json", type=Path, help="also write the rows to this JSON file, rewritten after every case; rows of other cases already in it stay")
    parser.add_argument("--table", type=Path, help="also write the table (device, every row of --json, decode figures) to this text file, rewritten after every case")
    parser.add_argument("--prepare-only", action="store_true", help="write the data (--data-dir) and models (--models) the cases need, then stop")


@command("bench plm_icd", doc_of="mscl.bench.plm_icd")
def _bench_plm_icd(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, help="prepared mimic3_full manifest folder (default: generate the demo one)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--docs", type=int, default=32, help="documents timed by cache-prefix (default 32)")
    parser.add_argument("--steps", type=int, default=3, help="timed pretraining steps, median (default 3)")
    parser.add_argument("--skip", nargs="*", default=[], choices=["cache", "pretrain", "probe"], help="parts to leave out")
