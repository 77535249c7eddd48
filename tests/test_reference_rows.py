"""Reference rows (issue 10, item 3): the label-prior run (`python -m mscl chance`), its path
through `collect`, the Chance / No pretraining / Supervised BCE rows of the tables, the chance
lines of the figures, and the `chance` jobs of the workflow."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from mscl.__main__ import main as mscl_main
from mscl.data.manifest import write_dataset
from mscl.errors import InputError
from mscl.metrics import MACRO_F1_PER_CLASS as PER_CLASS, evaluate
from mscl.report import collect, figures, tables
from mscl.report.collect import load_runs, read_test_scores

from conftest import tidy_runs
from test_workflow import REPO, job_counts, job_env, snakemake_command

# ------------------------------------------------------------------ the chance command

VOCABULARY = ["a", "b", "c", "d"]
# Train frequencies: a 3/4, b 2/4 (exactly 0.5: not above the threshold), c 1/4, d 0/4.
TRAIN = [["a", "b"], ["a"], ["a", "c"], ["b"]]
VAL = [["a"], ["b", "zz"], ["c"]]  # "zz" is outside the vocabulary: one ignored occurrence
TEST = [["a"], ["b", "c"], ["a", "d"], ["c"]]


def split_frame(prefix: str, labels: list[list[str]]) -> pd.DataFrame:
    # Image paths that do not exist: the chance command must never open a sample's content.
    return pd.DataFrame({"id": [f"{prefix}{i}" for i in range(len(labels))], "labels": labels, "path": [f"missing/{prefix}{i}.png" for i in range(len(labels))]})


@pytest.fixture
def toy_manifest(tmp_path: Path) -> Path:
    data = tmp_path / "data" / "coco"  # the folder name is the dataset setting: an image one
    write_dataset(data, {"train": split_frame("tr", TRAIN), "val": split_frame("va", VAL), "test": split_frame("te", TEST)}, labels=VOCABULARY)
    return data


def multi_hot(rows: list[list[str]]) -> np.ndarray:
    return np.array([[1 if label in row else 0 for label in VOCABULARY] for row in rows], dtype=np.uint8)


def same_metrics(written: dict, expected: dict) -> None:
    """metrics.json (null for NaN) against evaluate()'s dict, key by key."""
    assert set(written) == set(expected)
    for key, value in expected.items():
        if isinstance(value, float) and math.isnan(value):
            assert written[key] is None, key
        else:
            assert written[key] == pytest.approx(value), key


def test_chance_cli_scores_are_train_frequencies_and_metrics_come_from_evaluate(toy_manifest, tmp_path):
    probe = tmp_path / "results" / "runs" / "coco" / "chance" / "chance" / "bs0" / "seed0" / "probe"
    assert mscl_main(["chance", "--data", str(toy_manifest), "--out", str(probe)]) == 0

    # By hand: the fraction of the 4 train samples carrying each label.
    prior = np.array([3 / 4, 2 / 4, 1 / 4, 0 / 4])
    ids, y_true, scores, labels = read_test_scores(probe)  # the probe's format, read as collect reads it
    assert labels == VOCABULARY and list(ids) == ["te0", "te1", "te2", "te3"]
    np.testing.assert_array_equal(y_true.toarray(), multi_hot(TEST))  # collect reads the gold labels sparse
    assert scores.dtype == np.float32 and scores.shape == (4, 4)
    np.testing.assert_allclose(scores, np.tile(prior, (4, 1)), rtol=0, atol=1e-7)

    document = json.loads((probe / "metrics.json").read_text())
    same_metrics(document["test"], evaluate(multi_hot(TEST), np.tile(prior, (4, 1)), macro_f1_definition=PER_CLASS))
    same_metrics(document["val_best"], evaluate(multi_hot(VAL), np.tile(prior, (3, 1)), macro_f1_definition=PER_CLASS))
    # The floor by hand: only a (0.75 > 0.5) is predicted; a is right on te0 and te2 -> micro-F1
    # 2*2 / (2*2 + 2 FP + 4 FN); every label's scores tie -> AUC 0.5, AP = test prevalence.
    test = document["test"]
    assert test["micro_f1"] == pytest.approx(0.4)
    # coco is an image setting: macro_f1 is the per-class mean, F1 a = 2*2 / (2*2 + 2) = 2/3, b = c = d = 0.
    assert document["macro_f1_definition"] == PER_CLASS and test["macro_f1"] == pytest.approx((2 / 3) / 4)
    assert test["macro_auc"] == 0.5 and test["map"] == pytest.approx((2 + 1 + 2 + 1) / 4 / 4)
    assert {k: document[k] for k in ("best_epoch", "feature_dim", "num_labels", "select_metric")} == {"best_epoch": 0, "feature_dim": 0, "num_labels": 4, "select_metric": "micro_f1"}
    assert document["ignored_label_occurrences"] == {"train": 0, "val": 1, "test": 0}
    assert document["spec"] == {"dataset": "coco", "loss": "chance", "encoder_name": "chance", "batch_size": 0, "seed": 0}
    assert not any(p.name.startswith(".") for p in probe.iterdir())  # atomic writes leave no temporaries


def test_chance_refuses_a_dataset_without_a_macro_f1_family(toy_manifest, tmp_path, capsys):
    assert mscl_main(["chance", "--data", str(toy_manifest), "--out", str(tmp_path / "out"), "--dataset", "toy"]) == 1
    assert "dataset 'toy' has no family" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_collect_reads_the_chance_run_under_the_reference_role(toy_manifest, tmp_path):
    probe = tmp_path / "runs" / "coco" / "chance" / "chance" / "bs0" / "seed0" / "probe"
    assert mscl_main(["chance", "--data", str(toy_manifest), "--out", str(probe)]) == 0
    out = tmp_path / "all_runs.csv"
    argv = ["--metrics", str(probe / "metrics.json"), "--roles", "chance=reference", "--train-counts", f"coco={toy_manifest / 'stats.json'}", "--out", str(out)]
    assert mscl_main(["collect", *argv]) == 0
    runs = load_runs(out)
    assert set(zip(runs["dataset"], runs["encoder"], runs["encoder_role"], runs["loss"], runs["batch_size"], runs["seed"])) == {("coco", "chance", "reference", "chance", 0, 0)}
    test = runs[runs["split"] == "test"].set_index("metric")["value"]
    assert test["micro_f1"] == pytest.approx(0.4) and test["macro_auc"] == 0.5
    # Buckets from the saved scores: head {a, b} (5 of 6 train instances), tail {c, d}; only a is
    # predicted: F1 a = 2/3, b = 0 -> head 1/3; c = d = 0 -> tail 0.
    assert test["bucket_head_macro_f1"] == pytest.approx(1 / 3) and test["bucket_tail_macro_f1"] == 0.0
    assert set(runs.loc[runs["split"] == "val", "metric"]) >= {"micro_f1", "map"}
    # The label prior has no batch size: an explicit batch size keeps it.
    assert len(collect.select_batch_size(runs, 64)) == len(runs)


def test_the_reference_role_belongs_to_chance_alone():
    assert collect.parse_roles(["resnet18=resnet", "chance=reference"]) == {"resnet18": "resnet", "chance": "reference"}
    with pytest.raises(InputError, match="reserved for the label prior"):
        collect.parse_roles(["resnet18=reference"])
    with pytest.raises(InputError, match="reserved for the label prior"):
        collect.parse_roles(["chance=resnet"])


# ------------------------------------------------------------------------------ tables


def md_rows(markdown: str) -> list[list[str]]:
    """Every Markdown table row as its cells (header and alignment rows included)."""
    return [[c.strip() for c in line.strip("|").split("|")] for line in markdown.splitlines() if line.startswith("|")]


def md_row(markdown: str, label: str) -> list[str]:
    matches = [cells[1:] for cells in md_rows(markdown) if cells[0] == label]
    assert len(matches) == 1, f"{label!r} appears {len(matches)} times"
    return matches[0]


def image_runs_with_references() -> pd.DataFrame:
    """Losses at bs32 and bs64 (the table shows bs64), references above every loss, chance at bs0."""
    rows = []
    for batch in (32, 64):
        rows += [("coco", "resnet", "simdissim", "micro_f1", 0.70, 0, batch), ("coco", "resnet", "all", "micro_f1", 0.60, 0, batch)]
    rows.append(("coco", "resnet", "none", "micro_f1", 0.20, 0, 64))
    rows.append(("coco", "resnet", "bce", "micro_f1", 0.90, 0, 64))  # better than every loss: still not bold
    rows.append(("voc", "resnet", "bce", "map", 0.95, 0, 64))
    rows.append(("coco", "reference", "chance", "micro_f1", 0.05, 0, 0))
    rows.append(("coco", "reference", "chance", "map", 0.12, 0, 0))
    return tidy_runs(rows)


def test_image_table_shows_reference_rows_below_the_losses_never_bold(tmp_path):
    runs_csv = tmp_path / "all_runs.csv"
    image_runs_with_references().to_csv(runs_csv, index=False)
    prefix = tmp_path / "image"
    assert tables.main(["image", "--runs", str(runs_csv), "--out-prefix", str(prefix), "--batch-size", "64"]) == 0
    markdown, latex = prefix.with_suffix(".md").read_text(), prefix.with_suffix(".tex").read_text()
    csv = pd.read_csv(prefix.with_suffix(".csv"))
    csv["best"] = csv["best"].map(str) == "True"

    labels = [cells[0] for cells in md_rows(markdown)[2:] if cells[0]]
    # Loss rows without a result are left out; the references follow under a labelled rule.
    assert labels == ["ALL", "Sim-Dissim", "*reference rows (not ranked)*", "Chance (label prior)", "No pretraining", "Supervised BCE"]
    assert md_row(markdown, "Sim-Dissim")[0] == "**70.00**"  # best among the losses
    # Columns: MS-COCO micro-F1 and PASCAL mAP (MS-COCO mAP has only the label prior: left out).
    assert md_row(markdown, "Supervised BCE") == ["90.00", "95.00"]
    assert md_row(markdown, "Chance (label prior)") == ["5.00", "not run"]  # bs0, kept at --batch-size 64
    assert md_row(markdown, "No pretraining")[0] == "20.00"
    references = csv[csv["method"].isin(["chance", "none", "bce"])]
    assert len(csv) == 63 + 3 * 9 and len(references) == 27 and not references["best"].any()
    assert set(references.loc[references["method"] == "chance", "encoder_role"]) == {"reference"}
    best = csv[csv["best"]]
    assert set(zip(best["method"], best["dataset"], best["metric"])) == {("simdissim", "coco", "micro_f1")}
    # LaTeX: a rule between the last loss row and the references, nothing bold below it.
    below = latex[latex.index("Sim-Dissim &") :].split("\n", 1)[1]
    assert below.splitlines()[0] == r"\midrule" and r"\textbf" not in below.split(r"\bottomrule")[0]
    assert "reference rows (under the losses, never bold)" in latex
    assert "Chance (label prior) = each label's train frequency" in markdown


def test_references_absent_from_the_results_are_not_shown():
    runs = image_runs_with_references()
    runs = runs[runs["loss"] != "bce"]
    markdown = tables.to_markdown(tables.build_table("image", runs, batch_size=64))
    assert "Supervised BCE" not in markdown and "No pretraining" in markdown and "Chance (label prior)" in markdown
    losses_only = runs[~runs["loss"].isin(["none", "chance"])]
    plain = tables.to_markdown(tables.build_table("image", losses_only, batch_size=64))
    assert "reference rows" not in plain and "No pretraining" not in plain and "Chance" not in plain


def test_aapd_mimic_and_ablation_tables_get_their_reference_rows():
    runs = tidy_runs(
        [
            ("aapd", "roberta", "any", "micro_f1", 0.50),
            ("aapd", "roberta", "none", "micro_f1", 0.30),
            ("aapd", "llama", "bce", "macro_f1", 0.80),
            ("aapd", "reference", "chance", "micro_f1", 0.10, 0, 0),
            ("mimic3_full", "plm_icd", "simdissim", "macro_auc", 0.80),
            ("mimic3_full", "plm_icd", "none", "macro_auc", 0.90),
            ("mimic3_full", "reference", "chance", "macro_auc", 0.5, 0, 0),
            ("mimic3_full", "reference", "chance", "p_at_8", 0.25, 0, 0),
            ("coco", "resnet", "sim", "micro_f1", 0.60),
            ("coco", "resnet", "none", "micro_f1", 0.40),
        ]
    )
    aapd = tables.to_markdown(tables.build_table("aapd", runs))
    # RoBERTa micro-F1 and Llama macro-F1 have results; ANY alone in its column is not bold.
    assert md_row(aapd, "ANY") == ["50.00", "not run"] and md_row(aapd, "No pretraining") == ["30.00", "not run"]
    assert md_row(aapd, "Chance (label prior)") == ["10.00", "not run"]  # one value per dataset, under each encoder
    assert md_row(aapd, "Supervised BCE") == ["not run", "80.00"]

    mimic = tables.build_table("mimic_full", runs)
    items = [item.title if isinstance(item, tables.BlockTitle) else type(item).__name__ if isinstance(item, tables.Rule) else item[0].text for item in mimic.body]
    plm = items.index("PLM-ICD")
    assert items[plm + 1 : plm + 2] == ["Ours"]  # the losses without a result are left out
    assert items[plm + 2 :] == ["ReferenceRule", "No pretraining", "Rule", "Label prior (no encoder)", "Chance (label prior)"]
    assert items.count("No pretraining") == 1  # RoBERTa and Llama did not run: no block
    # Ours is the block's only loss with a result: nothing to be best over, not bold (never beside No pretraining's 90).
    assert not mimic.records["best"].any()
    markdown = tables.to_markdown(mimic)
    assert md_row(markdown, "Chance (label prior)") == ["50.00"]  # P@8 has only the label prior's value: column left out

    ablation = tables.to_markdown(tables.build_table("ablation", runs))
    # MS-COCO and AAPD micro-F1 have results (the AAPD one from No pretraining alone).
    assert "| ✓ | ✗ | 60.00 | not run |" in ablation
    assert "| No pretraining |  | 40.00 | 30.00 |" in ablation
    assert "| Chance (label prior) |  | not run | 10.00 |" in ablation


# ----------------------------------------------------------------------------- figures


def test_batch_size_and_bucket_figures_draw_a_dashed_chance_line():
    rows = [("coco", "resnet", m, "micro_f1", 0.5 + b / 1000, 0, b, "val") for m in ("all", "simdissim") for b in (32, 128)]
    rows.append(("coco", "reference", "chance", "micro_f1", 0.1, 0, 0, "val"))
    figure, data = figures.batch_size_figure(tidy_runs(rows))
    chance = data[data["method"] == "chance"]
    assert chance[["metric", "mean", "status"]].values.tolist() == [["micro_f1", pytest.approx(10.0), "ok"]]
    assert sorted(data.loc[data["method"] != "chance", "batch_size"].unique()) == [32, 128]
    dashed = [line for line in figure.axes[0].get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == 1 and dashed[0].get_ydata()[0] == pytest.approx(10.0)
    assert len(figure.axes) == 1  # no method has a macro-F1 or mAP result: those panels are left out

    rows = [("coco", "resnet", "simdissim", "bucket_head_macro_f1", 0.7), ("coco", "resnet", "simdissim", "bucket_tail_macro_f1", 0.6)]
    rows += [("coco", "reference", "chance", "bucket_head_macro_f1", 0.05, 0, 0), ("coco", "reference", "chance", "bucket_tail_macro_f1", 0.0, 0, 0)]
    figure, data = figures.frequency_buckets_figure(tidy_runs(rows))
    assert data.loc[data["method"] == "chance", "mean"].tolist() == [pytest.approx(5.0), 0.0]
    segments = [c for c in figure.axes[0].collections if c.get_linestyle()[0][1] is not None]  # dashed hlines
    assert len(segments) == 2
    assert figure.axes[0].get_ylim()[0] == 0.0  # zoomed to include the floor


# ---------------------------------------------------------------------------- workflow


def dry_run(tmp_path: Path, config: dict, *targets: str) -> str:
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(config))
    result = subprocess.run(snakemake_command(tmp_path, "-n", "-p", *targets, "--configfile", str(config_file)), capture_output=True, text=True, env=job_env())
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    return output


def test_one_chance_job_per_dataset_with_runs_feeds_collect(tmp_path):
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["datasets"] = ["coco", "voc", "aapd"]  # voc is prepared but has no run
    config["experiments"] = {
        "image": {"datasets": ["coco"], "encoders": ["resnet8"], "losses": ["any", "none"], "batch_sizes": [64, 128]},
        "text": {"datasets": ["aapd"], "encoders": ["minilm-top1"], "losses": ["simdissim"], "batch_sizes": [32]},
    }
    output = dry_run(tmp_path, config)
    counts = job_counts(output)
    assert counts["chance"] == 2 and counts["probe"] == 5 and counts["collect_runs"] == 1
    for dataset in ("coco", "aapd"):
        assert output.count(f"python -m mscl chance --data data/processed/{dataset} --out results/runs/{dataset}/chance/chance/bs0/seed0/probe ") == 1
    assert "data/processed/voc --out" not in output
    collect_line = next(line for line in output.splitlines() if "python -m mscl collect" in line)
    assert "results/runs/coco/chance/chance/bs0/seed0/probe/metrics.json" in collect_line and "chance=reference" in collect_line

    config["report"] = {"artifacts": "claim"}  # the claim check compares trained methods only
    claim = dry_run(tmp_path, config)
    assert "chance" not in job_counts(claim) and "chance=reference" not in claim
