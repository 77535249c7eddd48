"""A corpus of malformed inputs, one row per case, across every parser, the run files and the
config: each must end in a clear error (exit non-zero, one message that names the file, the
field and the fix, no traceback, no note text) and leave no partial output behind (no output
folder, no hidden temporary beside it, an existing run folder unchanged).

Commands run in this process through `mscl.__main__.main`, as `python -m mscl` runs them; the
config cases run `snakemake -n`. docs/malformed-inputs.md lists the cases and the count.
"""

from __future__ import annotations

import gzip
import inspect
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import FIXTURES, REPO_ROOT
from test_claim_data import DEBTAGS_LISTS, idx_bytes, write_fashion_root
from test_tabular_and_baselines import LABELS, run_spec
from test_workflow import job_env

from mscl.__main__ import main as mscl_main
from mscl.data.manifest import write_dataset
from mscl.defaults import EXIT_STOPPED

SNAKEMAKE = "snakemake"  # argv[0] of the config cases


@dataclass
class Expect:
    """What a case runs and what its error must name."""

    argv: list[str]
    file: str  # the file (or config key's file) the message names
    field: str  # the field, key, column or line it names
    out: Path | None = None  # must not exist afterwards (no partial output)
    unchanged: Path | None = None  # an existing folder the command must leave exactly as it was
    forbidden: list[str] = field(default_factory=list)  # text that must not appear (note text)


CASES: dict[str, Callable[[Path], Expect]] = {}


def case(function: Callable[[Path], Expect]) -> Callable[[Path], Expect]:
    CASES[function.__name__] = function
    return function


# ----------------------------------------------------------------------- shared inputs


def tabular_manifest(out: Path, **changes) -> Path:
    """A valid 3-label tabular manifest (48/24/24 samples of 6 features)."""
    rng = np.random.default_rng(0)
    splits = {}
    for split, n in (("train", 48), ("val", 24), ("test", 24)):
        features = rng.normal(size=(n, 6)).astype(np.float32) + 3.0
        rows = [{"id": f"{split}{i}", "features": row.tolist(), "labels": [LABELS[k] for k in range(3) if row[k] > 3.0]} for i, row in enumerate(features)]
        splits[split] = pd.DataFrame(rows)
    write_dataset(out, splits, labels=LABELS, info={})
    return out


def rewrite_split(data: Path, split: str, change: Callable[[pd.DataFrame], pd.DataFrame]) -> Path:
    """Replace a split file of a prepared manifest by `change(frame)`, as a hand edit would."""
    path = data / f"{split}.parquet"
    frame = change(pd.read_parquet(path))
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    return path


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tabular manifest and a one-epoch pretrain folder on it (for the probe's cases)."""
    root = tmp_path_factory.mktemp("pretrained")
    data = tabular_manifest(root / "data")
    assert mscl_main(["pretrain", "--data", str(data), "--spec", json.dumps(spec()), "--out", str(root / "pre")]) == 0
    return data, root / "pre"


def spec(**changes) -> dict:
    return {**run_spec("simdissim", epochs=1), **changes}


def pretrain(tmp: Path, data: Path, run: dict | str | None = None) -> list[str]:
    text = run if isinstance(run, str) else json.dumps(run or spec())
    return ["pretrain", "--data", str(data), "--spec", text, "--out", str(tmp / "run" / "pretrain")]


def probe(tmp: Path, data: Path, pre: Path) -> list[str]:
    return ["probe", "--data", str(data), "--pretrained", str(pre), "--spec", json.dumps(spec()), "--out", str(tmp / "run" / "probe")]


def copy_fixture(name: str, tmp: Path) -> Path:
    return Path(shutil.copytree(FIXTURES / name, tmp / name))


# ---------------------------------------------------------- prepared manifests (run files)


@case
def truncated_parquet_manifest(tmp: Path) -> Expect:
    data = tabular_manifest(tmp / "data")
    path = data / "train.parquet"
    path.write_bytes(path.read_bytes()[:-200])
    return Expect(pretrain(tmp, data), str(path), "train", out=tmp / "run")


@case
def corrupt_parquet_manifest(tmp: Path, pretrained) -> Expect:
    data = Path(shutil.copytree(pretrained[0], tmp / "data"))
    (data / "test.parquet").write_bytes(b"PAR1" + bytes(range(256)) * 4 + b"PAR1")
    return Expect(probe(tmp, data, pretrained[1]), str(data / "test.parquet"), "test", out=tmp / "run")


@case
def manifest_without_labels_column(tmp: Path) -> Expect:
    data = tabular_manifest(tmp / "data")
    path = rewrite_split(data, "train", lambda frame: frame.drop(columns=["labels"]))
    return Expect(pretrain(tmp, data), str(path), "labels", out=tmp / "run")


@case
def labels_txt_missing_a_label_of_the_manifest(tmp: Path) -> Expect:
    data = tabular_manifest(tmp / "data")
    (data / "labels.txt").write_text("pos0\npos1\n")
    return Expect(pretrain(tmp, data), str(data / "labels.txt"), "labels", out=tmp / "run")


@case
def labels_txt_repeating_a_label(tmp: Path) -> Expect:
    data = tabular_manifest(tmp / "data")
    (data / "labels.txt").write_text("pos0\npos1\npos2\npos1\n")
    return Expect(pretrain(tmp, data), str(data / "labels.txt"), "labels", out=tmp / "run")


@case
def labels_txt_empty(tmp: Path) -> Expect:
    data = tabular_manifest(tmp / "data")
    (data / "labels.txt").write_text("")
    return Expect(pretrain(tmp, data), str(data / "labels.txt"), "labels", out=tmp / "run")


@case
def nan_feature_in_a_manifest(tmp: Path, pretrained) -> Expect:
    data = Path(shutil.copytree(pretrained[0], tmp / "data"))
    path = rewrite_split(data, "test", lambda frame: frame.assign(features=[[np.nan] * 6] + list(frame["features"][1:])))
    return Expect(probe(tmp, data, pretrained[1]), str(path), "features", out=tmp / "run")


@case
def infinite_feature_in_a_manifest(tmp: Path) -> Expect:
    data = tabular_manifest(tmp / "data")
    path = rewrite_split(data, "train", lambda frame: frame.assign(features=list(frame["features"][:-1]) + [[np.inf] * 6]))
    return Expect(pretrain(tmp, data), str(path), "features", out=tmp / "run")


@case
def empty_label_sets_everywhere_in_train(tmp: Path) -> Expect:
    data = tabular_manifest(tmp / "data")
    path = rewrite_split(data, "train", lambda frame: frame.assign(labels=[[] for _ in range(len(frame))]))
    return Expect(pretrain(tmp, data), str(path), "labels", out=tmp / "run")


@case
def empty_label_sets_everywhere_in_test(tmp: Path, pretrained) -> Expect:
    data = Path(shutil.copytree(pretrained[0], tmp / "data"))
    path = rewrite_split(data, "test", lambda frame: frame.assign(labels=[[] for _ in range(len(frame))]))
    return Expect(probe(tmp, data, pretrained[1]), str(path), "labels", out=tmp / "run")


@case
def duplicate_ids_in_a_manifest(tmp: Path) -> Expect:
    data = tabular_manifest(tmp / "data")
    path = rewrite_split(data, "train", lambda frame: frame.assign(id=["train0"] * len(frame)))
    return Expect(pretrain(tmp, data), str(path), "id", out=tmp / "run")


@case
def features_longer_than_the_spec_input_dim(tmp: Path) -> Expect:
    data = tabular_manifest(tmp / "data")
    run = spec(encoder={"kind": "mlp", "input_dim": 7, "hidden_dims": [8]})
    return Expect(pretrain(tmp, data, run), str(data / "train.parquet"), "encoder.input_dim", out=tmp / "run")


@case
def invalid_stats_json(tmp: Path) -> Expect:
    data = tabular_manifest(tmp / "data")
    (data / "stats.json").write_text('{"counts": {"train": 48,')
    return Expect(["stats-table", "--dataset", f"tab={data}", "--out-prefix", str(tmp / "out" / "statistics")], str(data / "stats.json"), "stats.json", out=tmp / "out")


@case
def truncated_checkpoint_under_weights_only_load(tmp: Path, pretrained) -> Expect:
    data, _ = pretrained
    # An interrupted run (a finished one keeps no checkpoint): its checkpoint is resumed.
    assert mscl_main([*pretrain(tmp, data), "--stop-after-epoch", "1"]) == EXIT_STOPPED
    run = tmp / "run" / "pretrain"
    checkpoint = run / "checkpoint.pt"
    checkpoint.write_bytes(checkpoint.read_bytes()[: checkpoint.stat().st_size // 2])
    return Expect(pretrain(tmp, data), str(checkpoint), "checkpoint.pt", unchanged=run)


@case
def truncated_encoder_under_weights_only_load(tmp: Path, pretrained) -> Expect:
    data, pre = pretrained
    copied = Path(shutil.copytree(pre, tmp / "pre"))
    encoder = copied / "encoder.pt"
    encoder.write_bytes(encoder.read_bytes()[:100])
    return Expect(probe(tmp, data, copied), str(encoder), "encoder.pt", out=tmp / "run")


@case
def encoder_of_another_architecture(tmp: Path, pretrained) -> Expect:
    data, pre = pretrained
    argv = probe(tmp, data, pre)
    argv[argv.index("--spec") + 1] = json.dumps(spec(encoder={"kind": "mlp", "input_dim": 6, "hidden_dims": [32, 8]}))
    return Expect(argv, str(pre / "resolved_spec.json"), "encoder", out=tmp / "run")


# --------------------------------------------------------------------------- run specs


@case
def unknown_spec_key(tmp: Path) -> Expect:
    data = tabular_manifest(tmp / "data")
    run = spec()
    run["pretrain"]["epochz"] = 3
    return Expect(pretrain(tmp, data, run), "--spec", "pretrain.epochz", out=tmp / "run")


@case
def spec_value_of_the_wrong_type(tmp: Path) -> Expect:
    data = tabular_manifest(tmp / "data")
    run = spec()
    run["pretrain"]["epochs"] = "ten"
    return Expect(pretrain(tmp, data, run), "--spec", "pretrain.epochs", out=tmp / "run")


@case
def out_of_range_seed_in_a_spec(tmp: Path) -> Expect:
    data = tabular_manifest(tmp / "data")
    return Expect(pretrain(tmp, data, spec(seed=-1)), "--spec", "seed", out=tmp / "run")


@case
def seed_beyond_64_bits_in_a_spec(tmp: Path) -> Expect:
    data = tabular_manifest(tmp / "data")
    return Expect(pretrain(tmp, data, spec(seed=2**64)), "--spec", "seed", out=tmp / "run")


@case
def spec_that_is_not_json(tmp: Path) -> Expect:
    data = tabular_manifest(tmp / "data")
    return Expect(pretrain(tmp, data, '{"dataset": "yeast", '), "--spec", "--spec", out=tmp / "run")


@case
def unknown_loss_in_a_spec(tmp: Path) -> Expect:
    data = tabular_manifest(tmp / "data")
    return Expect(pretrain(tmp, data, spec(loss="simdisim")), "--spec", "loss", out=tmp / "run")


# -------------------------------------------------------------------------------- parsers


def prepare(command: str, root: Path, tmp: Path, *options: str) -> list[str]:
    return [command, "--root", str(root), "--out", str(tmp / "out" / "manifest"), *options]


@case
def coco_json_truncated(tmp: Path) -> Expect:
    root = copy_fixture("coco", tmp)
    path = root / "annotations" / "instances_train2014.json"
    path.write_text(path.read_text()[:-40])
    return Expect(prepare("prepare-coco", root, tmp), str(path), "instances_train2014.json", out=tmp / "out")


@case
def coco_json_naming_missing_images(tmp: Path) -> Expect:
    root = copy_fixture("coco", tmp)
    missing = sorted((root / "val2014").iterdir())[0]
    missing.unlink()
    return Expect(prepare("prepare-coco", root, tmp), missing.name, "file_name", out=tmp / "out")


@case
def coco_image_cut_short(tmp: Path) -> Expect:
    """Its header opens (PIL's verify() passed it); decoding every pixel does not."""
    root = copy_fixture("coco", tmp)
    image = root / "train2014" / "COCO_train2014_000000000009.jpg"
    image.write_bytes(image.read_bytes()[: image.stat().st_size // 2])
    return Expect(prepare("prepare-coco", root, tmp, "--from-config"), str(root / "annotations" / "instances_train2014.json"), "train2014/COCO_train2014_000000000009.jpg' is unreadable", out=tmp / "out")


@case
def csv_labels_joined_by_a_pipe_under_the_default_separator(tmp: Path) -> Expect:
    """7 labels joined by '|' would read as dozens of single labels, 1.0 per sample."""
    rng = np.random.default_rng(0)
    names = ["cat", "dog", "bird", "fish", "horse", "cow", "sheep"]
    lines = ["text,tags"] + [f"doc {i},{'|'.join(sorted(rng.choice(names, size=rng.integers(1, 4), replace=False)))}" for i in range(60)]
    path = tmp / "mine.csv"
    path.write_text("\n".join(lines) + "\n")
    argv = ["prepare-csv", "--path", str(path), "--out", str(tmp / "out" / "mine"), "--input-column", "text", "--labels-column", "tags", "--from-config"]
    return Expect(argv, str(path), "`sources.mine.separator` (--separator) to '|'", out=tmp / "out")


@case
def coco_image_id_that_is_not_a_number(tmp: Path) -> Expect:
    root = copy_fixture("coco", tmp)
    path = root / "annotations" / "instances_val2014.json"
    data = json.loads(path.read_text())
    data["annotations"][0]["image_id"] = "forty-two"
    path.write_text(json.dumps(data))
    return Expect(prepare("prepare-coco", root, tmp), str(path), "image_id", out=tmp / "out")


@case
def coco_duplicate_image_ids(tmp: Path) -> Expect:
    root = copy_fixture("coco", tmp)
    path = root / "annotations" / "instances_train2014.json"
    data = json.loads(path.read_text())
    data["images"].append({**data["images"][0], "file_name": data["images"][1]["file_name"]})
    path.write_text(json.dumps(data))
    return Expect(prepare("prepare-coco", root, tmp), str(path), "id", out=tmp / "out")


@case
def voc_xml_malformed(tmp: Path) -> Expect:
    root = copy_fixture("voc", tmp)
    path = root / "Annotations" / "000001.xml"
    path.write_text(path.read_text()[:-30])
    return Expect(prepare("prepare-voc", root, tmp), str(path), "000001.xml", out=tmp / "out")


@case
def voc_image_set_naming_an_id_without_annotation(tmp: Path) -> Expect:
    root = copy_fixture("voc", tmp)
    image_set = root / "ImageSets" / "Main" / "trainval.txt"
    image_set.write_text(image_set.read_text() + "009999\n")
    return Expect(prepare("prepare-voc", root, tmp), "009999", "Annotations", out=tmp / "out")


@case
def voc_class_name_outside_the_20(tmp: Path) -> Expect:
    root = copy_fixture("voc", tmp)
    path = root / "Annotations" / "000002.xml"
    path.write_text(path.read_text().replace("<name>train</name>", "<name>Train</name>"))
    return Expect(prepare("prepare-voc", root, tmp), str(path), "object/name", out=tmp / "out")


@case
def nuswide_label_file_of_the_wrong_length(tmp: Path) -> Expect:
    root = copy_fixture("nuswide", tmp)
    path = sorted((root / "Groundtruth" / "AllLabels").iterdir())[0]
    path.write_text(path.read_text() + "0\n")
    return Expect(prepare("prepare-nuswide", root, tmp), str(path), "Imagelist.txt", out=tmp / "out")


@case
def nuswide_label_that_is_not_0_or_1(tmp: Path) -> Expect:
    root = copy_fixture("nuswide", tmp)
    path = sorted((root / "Groundtruth" / "AllLabels").iterdir())[0]
    lines = path.read_text().splitlines()
    path.write_text("\n".join(["2", *lines[1:]]) + "\n")
    return Expect(prepare("prepare-nuswide", root, tmp), str(path), "line 1", out=tmp / "out")


@case
def aapd_text_and_label_files_disagree(tmp: Path) -> Expect:
    root = copy_fixture("aapd", tmp)
    (root / "label_val").write_text("".join((root / "label_val").read_text().splitlines(keepends=True)[:-1]))
    return Expect(prepare("prepare-aapd", root, tmp), str(root / "text_val"), "label_val", out=tmp / "out")


@case
def aapd_empty_label_sets_everywhere_in_a_split(tmp: Path) -> Expect:
    root = copy_fixture("aapd", tmp)
    lines = (root / "label_test").read_text().splitlines()
    (root / "label_test").write_text("\n" * len(lines))
    return Expect(prepare("prepare-aapd", root, tmp, "--policy", "original"), str(root / "label_test"), "test", out=tmp / "out")


@case
def aapd_comma_separated_label_line(tmp: Path) -> Expect:
    root = copy_fixture("aapd", tmp)
    (root / "label_val").write_text("cs.CL,cs.LG\n")
    return Expect(prepare("prepare-aapd", root, tmp), str(root / "label_val"), "line 1", out=tmp / "out")


@case
def aapd_one_hot_label_line(tmp: Path) -> Expect:
    root = copy_fixture("aapd", tmp)
    (root / "label_val").write_text("0 0 1 0 0 0 0 0\n")
    return Expect(prepare("prepare-aapd", root, tmp), str(root / "label_val"), "line 1", out=tmp / "out")


@case
def mimic_procedure_code_that_lost_its_leading_zeros(tmp: Path) -> Expect:
    root = copy_fixture("mimic3", tmp)
    path = root / "raw" / "PROCEDURES_ICD.csv"
    path.write_text(path.read_text().replace('"0066"', "66"))  # re-saved with the codes read as numbers
    return mimic_expect(tmp, root, str(path), "ICD9_CODE")


@case
def mimic4_radiology_notes_in_place_of_discharge_notes(tmp: Path) -> Expect:
    root = copy_fixture("mimic4", tmp)
    notes = root / "raw" / "note" / "discharge.csv"
    rows = notes.read_text().replace(",DS,", ",RR,")  # radiology.csv.gz: note_type RR (or AR), never DS
    notes.write_text(rows)
    argv = [
        "prepare-mimic", "--version", "mimic4_icd9", "--root", str(root / "raw"), "--splits", str(root / "splits_icd9"),
        "--out-full", str(tmp / "out" / "full"), "--out-50", str(tmp / "out" / "top50"),
    ]  # fmt: skip
    texts = pd.read_csv(notes, dtype=str)["text"].dropna()
    return Expect(argv, str(notes), "note_type", out=tmp / "out", forbidden=[text.strip()[:20] for text in texts if len(text.strip()) >= 20])


@case
def mimic_noteevents_hadm_id_that_is_not_a_number(tmp: Path) -> Expect:
    root = copy_fixture("mimic3", tmp)
    notes = root / "raw" / "NOTEEVENTS.csv"
    text = notes.read_text()
    notes.write_text(text.replace('11,901,100001,', '11,901,1000x1,', 1))
    return mimic_expect(tmp, root, str(notes), "HADM_ID")


@case
def mimic_diagnoses_without_code_column(tmp: Path) -> Expect:
    root = copy_fixture("mimic3", tmp)
    path = root / "raw" / "DIAGNOSES_ICD.csv"
    path.write_text(path.read_text().replace('"ICD9_CODE"', '"ICD9"', 1))
    return mimic_expect(tmp, root, str(path), "ICD9_CODE")


@case
def mimic_notes_gzip_cut_short(tmp: Path) -> Expect:
    root = copy_fixture("mimic3", tmp)
    notes = root / "raw" / "NOTEEVENTS.csv"
    packed = gzip.compress(notes.read_bytes())
    notes.unlink()
    (root / "raw" / "NOTEEVENTS.csv.gz").write_bytes(packed[: len(packed) // 2])
    return mimic_expect(tmp, root, str(root / "raw" / "NOTEEVENTS.csv.gz"), "NOTEEVENTS")


@case
def mimic_split_list_with_a_line_that_is_not_an_id(tmp: Path) -> Expect:
    root = copy_fixture("mimic3", tmp)
    path = root / "splits" / "train_full_hadm_ids.csv"
    path.write_text(path.read_text() + "not-an-id\n")
    return mimic_expect(tmp, root, str(path), "line")


def mimic_expect(tmp: Path, root: Path, file: str, field_name: str) -> Expect:
    notes = pd.read_csv(FIXTURES / "mimic3" / "raw" / "NOTEEVENTS.csv", dtype=str)["TEXT"].dropna()
    windows = [text[i : i + 25] for text in notes for i in range(0, max(1, len(text) - 25), 50)]
    argv = [
        "prepare-mimic", "--version", "mimic3", "--root", str(root / "raw"), "--splits", str(root / "splits"),
        "--out-full", str(tmp / "out" / "full"), "--out-50", str(tmp / "out" / "top50"),
    ]
    return Expect(argv, file, field_name, out=tmp / "out", forbidden=windows)


@case
def yeast_csv_with_a_nan_feature(tmp: Path) -> Expect:
    source = tmp / "yeast.csv"
    lines = gzip.decompress((FIXTURES / "claim" / "yeast" / "yeast.csv.gz").read_bytes()).decode().splitlines()
    cells = lines[1].split(",")
    cells[0] = "nan"
    source.write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n")
    return Expect(["prepare-yeast", "--source", str(source), "--split", "seeded", "--out", str(tmp / "out" / "yeast")], str(source), "line 2", out=tmp / "out")


@case
def debtags_translation_with_non_utf8_bytes(tmp: Path) -> Expect:
    lists = Path(shutil.copytree(DEBTAGS_LISTS, tmp / "lists"))
    path = next(lists.glob("*Translation-en.gz"))
    text = gzip.decompress(path.read_bytes())
    path.write_bytes(gzip.compress(text.replace(b"Description-en:", b"Description-en: caf\xe9 \xff", 1)))
    return Expect(["prepare-debtags", "--lists", str(lists), "--out", str(tmp / "out" / "debtags"), "--min-count", "2"], str(path), "line", out=tmp / "out")


@case
def fashion_mnist_idx_with_a_wrong_magic_number(tmp: Path) -> Expect:
    root = tmp / "fashion"
    write_fashion_root(root)
    path = root / "t10k-labels-idx1-ubyte.gz"
    path.write_bytes(gzip.compress(idx_bytes(0x803, np.zeros(20)), mtime=0))
    return Expect(fashion(root, tmp), str(path), "magic number", out=tmp / "out")


@case
def fashion_mnist_idx_cut_short(tmp: Path) -> Expect:
    root = tmp / "fashion"
    write_fashion_root(root)
    path = root / "train-images-idx3-ubyte.gz"
    path.write_bytes(gzip.compress(gzip.decompress(path.read_bytes())[:-100], mtime=0))
    return Expect(fashion(root, tmp), str(path), "data", out=tmp / "out")


def fashion(root: Path, tmp: Path) -> list[str]:
    return ["prepare-fashion-mnist", "--root", str(root), "--out", str(tmp / "out" / "fashion"), "--train-canvases", "20", "--test-canvases", "10"]


@case
def out_of_range_seed_of_a_prepare_command(tmp: Path) -> Expect:
    root = copy_fixture("aapd", tmp)
    return Expect(prepare("prepare-aapd", root, tmp, "--seed", "-1"), "--seed", "--seed", out=tmp / "out")


@case
def out_of_range_seed_of_a_demo(tmp: Path) -> Expect:
    return Expect(["make-demo", "aapd", "--out", str(tmp / "out" / "aapd"), "--seed", "-3"], "--seed", "--seed", out=tmp / "out")


# ---------------------------------------------------------------------------- the config


def config_case(tmp: Path, change: Callable[[dict], None], key: str) -> Expect:
    config = yaml.safe_load((REPO_ROOT / "config.yaml").read_text())
    change(config)
    path = tmp / "my_config.yaml"
    path.write_text(yaml.safe_dump(config))
    return Expect([SNAKEMAKE, "--configfile", str(path)], str(path), key, out=tmp / "data")


@case
def config_seed_out_of_range(tmp: Path) -> Expect:
    return config_case(tmp, lambda c: c.update(seed=-1), "seed")


@case
def config_value_of_the_wrong_type(tmp: Path) -> Expect:
    return config_case(tmp, lambda c: c["training"]["probe"].update(epochs="ten"), "training.probe.epochs")


@case
def config_flag_that_is_not_a_boolean(tmp: Path) -> Expect:
    return config_case(tmp, lambda c: c.update(job_server="yes"), "job_server")


@case
def config_choice_not_offered(tmp: Path) -> Expect:
    return config_case(tmp, lambda c: c["sources"]["voc"].update(difficult="sometimes"), "sources.voc.difficult")


@case
def config_unknown_top_level_key(tmp: Path) -> Expect:
    return config_case(tmp, lambda c: c.update(sedd=1), "sedd")


@case
def config_unknown_encoder_setting(tmp: Path) -> Expect:
    return config_case(tmp, lambda c: c["encoders"]["resnet8"]["pretrain"].update(epochz=3), "encoders.resnet8.pretrain")


@case
def config_experiment_block_without_losses(tmp: Path) -> Expect:
    return config_case(tmp, lambda c: c["experiments"]["image"].pop("losses"), "experiments.image")


# Cross-key mistakes (mscl.config_checks): they used to pass the dry run and fail every job, or no job.


@case
def config_loss_options_under_a_loss_nothing_defines(tmp: Path) -> Expect:
    return config_case(tmp, lambda c: c["training"]["loss_options"].update(simdisim={"form": "literal"}), "training.loss_options.simdisim")


@case
def config_loss_option_the_loss_does_not_take(tmp: Path) -> Expect:
    return config_case(tmp, lambda c: c["training"]["loss_options"].update(msc={"gamma": 2}), "training.loss_options.msc.gamma")


@case
def config_image_encoder_on_a_text_dataset(tmp: Path) -> Expect:
    return config_case(tmp, lambda c: c["experiments"]["aapd"].update(encoders=["resnet8"]), "experiments.aapd.encoders")


@case
def config_batch_size_the_encoders_gpus_cannot_split(tmp: Path) -> Expect:
    return config_case(tmp, lambda c: c["encoders"]["resnet8"]["resources"].update(gpu=3), "experiments.image.batch_sizes")


@case
def config_tuning_reuse_of_a_method_nothing_defines(tmp: Path) -> Expect:
    return config_case(tmp, lambda c: c.update(tuning={"reuse": {"sim": "simdisim"}}), "tuning.reuse.sim")


@case
def config_report_batch_size_no_run_has(tmp: Path) -> Expect:
    return config_case(tmp, lambda c: c["report"]["batch_size"].update(mimic=8), "report.batch_size.mimic")


# ---------------------------------------------------------------------------------- test


def run_case(expect: Expect, tmp: Path, capsys) -> tuple[int, str]:
    if expect.argv[0] == SNAKEMAKE:
        command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO_ROOT / "Snakefile"), "--directory", str(tmp), "--workflow-profile", "none", "-n", *expect.argv[1:]]
        result = subprocess.run(command, capture_output=True, text=True, env=job_env())
        return result.returncode, result.stdout + result.stderr
    try:
        code = mscl_main(expect.argv)
    except SystemExit as stop:  # argparse: usage errors exit 2
        code = stop.code
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_malformed_input_gets_a_clear_error_and_leaves_nothing_behind(name, tmp_path, capsys, request):
    build = CASES[name]
    arguments = [request.getfixturevalue(name) for name in list(inspect.signature(build).parameters)[1:]]
    expect = build(tmp_path, *arguments)
    before = tree(expect.unchanged) if expect.unchanged else None
    capsys.readouterr()
    code, output = run_case(expect, tmp_path, capsys)
    assert code not in (0, None), output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    assert expect.file in output and expect.field in output and "Fix:" in output, output[-3000:]
    assert len(output) < 4000, f"the error is buried in {len(output)} characters of output"
    assert not any(window in output for window in expect.forbidden), "note text in the error output"
    if expect.out is not None:
        assert not expect.out.exists() or not any(expect.out.rglob("*")), sorted(map(str, expect.out.rglob("*")))
    if expect.unchanged is not None:
        assert tree(expect.unchanged) == before
    hidden = [str(p) for p in tmp_path.rglob(".*") if ".snakemake" not in p.parts]
    assert not hidden, f"temporaries left behind: {hidden}"


def test_the_corpus_has_at_least_30_cases():
    assert len(CASES) >= 30


def test_a_noteevents_row_without_hadm_id_is_dropped_and_counted_not_refused(tmp_path, capsys):
    """Real MIMIC-III has notes without an admission (HADM_ID empty): they are dropped and
    counted in stats.json, as CAML does, and the command succeeds; no note text is printed."""
    root = copy_fixture("mimic3", tmp_path)
    notes = root / "raw" / "NOTEEVENTS.csv"
    fixture = pd.read_csv(notes, dtype=str)
    already = int((fixture["HADM_ID"].isna() & (fixture["CATEGORY"] == "Discharge summary")).sum())
    notes.write_text(notes.read_text().replace("11,901,100001,", "11,901,,", 1))
    expect = mimic_expect(tmp_path, root, str(notes), "HADM_ID")
    assert mscl_main(expect.argv) == 0
    output = "".join(capsys.readouterr())
    stats = json.loads((tmp_path / "out" / "full" / "stats.json").read_text())
    assert stats["dropped"]["discharge_notes_without_hadm_id"] == already + 1
    assert not any(window in output for window in expect.forbidden)
