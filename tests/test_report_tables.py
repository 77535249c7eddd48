"""`collect` (metrics.json tree -> tidy CSV) and every paper table built from small synthetic results."""

from __future__ import annotations

import html
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mscl import layout, metrics
from mscl.errors import InputError
from mscl.report import collect, cost, tables
from mscl.report.collect import RUN_COLUMNS, collect_runs, load_runs, read_test_scores, summarise_seeds

from conftest import tidy_runs

# ------------------------------------------------------------------------ collect

# Four labels; training counts 50/25/15/10 put a and b in the head (75% >= 60%), c and d in the tail.
TRAIN_COUNTS = {"a": 50, "b": 25, "c": 15, "d": 10}
# Label order in the score file differs from the counts on purpose: buckets must follow names.
SCORE_LABELS = ["c", "a", "d", "b"]
# Gold sets per test example and the labels predicted (score 0.9; others 0.1).
GOLD = [{"a", "b"}, {"a", "c"}, {"b", "d"}, {"a"}]
PREDICTED = [{"a", "b"}, {"a", "b"}, {"d"}, {"a"}]
# Per-class F1: a 1 (3 tp), b 0.5 (1 tp, 1 fp, 1 fn), c 0 (1 fn), d 1 -> head 0.75, tail 0.5.


def write_probe(root: Path, dataset: str, encoder: str, loss: str, batch: int, seed: int, test: dict, scores: bool, val: dict | None = None) -> Path:
    """A probe folder like the training stage writes; returns its metrics.json path."""
    probe = root / "runs" / dataset / encoder / loss / f"bs{batch}" / f"seed{seed}" / "probe"
    probe.mkdir(parents=True)
    # The run axes as the probe records them (its whole RunSpec; here only the keys collect reads).
    val = {"micro_f1": 0.5, "epoch_note": "text is ignored"} if val is None else val
    spec = {"dataset": dataset, "encoder_name": encoder, "loss": loss, "batch_size": batch, "seed": seed}
    document = {"test": test, "val_best": val, "best_epoch": 3, "num_labels": 4, "spec": spec}
    (probe / "metrics.json").write_text(json.dumps(document))
    if scores:
        # As mscl.train.probe writes it: fixed-size score lists, vocabulary in the schema metadata.
        values = pa.array(np.array([[0.9 if name in chosen else 0.1 for name in SCORE_LABELS] for chosen in PREDICTED], dtype=np.float32).ravel())
        table = pa.table({"id": ["e0", "e1", "e2", "e3"], "labels": [sorted(gold) for gold in GOLD], "scores": pa.FixedSizeListArray.from_arrays(values, len(SCORE_LABELS))})
        pq.write_table(table.replace_schema_metadata({"mscl.label_names": json.dumps(SCORE_LABELS)}), probe / "test_scores.parquet")
    return probe / "metrics.json"


@pytest.fixture
def run_tree(tmp_path: Path) -> tuple[list[Path], Path]:
    coco = write_probe(tmp_path, "coco", "resnet_tiny", "simdissim", 32, 0, {"micro_f1": 0.61, "macro_f1": 0.42, "map": None}, True)
    aapd = write_probe(tmp_path, "aapd", "roberta_tiny", "any", 16, 1, {"micro_f1": 0.7, "macro_f1": 0.3}, False)
    stats = tmp_path / "coco_stats.json"
    stats.write_text(json.dumps({"splits": {"train": {"label_frequency": TRAIN_COUNTS}}}))
    return [coco, aapd], stats


ROLES = {"resnet_tiny": "resnet", "roberta_tiny": "roberta"}


def test_collect_parses_paths_roles_and_computes_bucket_metrics(run_tree):
    paths, stats = run_tree
    frame = collect_runs(paths, ROLES, {"coco": collect.read_train_counts(stats)})
    assert list(frame.columns) == list(RUN_COLUMNS)
    coco = frame[(frame["dataset"] == "coco") & (frame["split"] == "test")].set_index("metric")
    assert set(coco["encoder"]) == {"resnet_tiny"} and set(coco["encoder_role"]) == {"resnet"}
    assert set(coco["loss"]) == {"simdissim"} and set(coco["batch_size"]) == {32} and set(coco["seed"]) == {0}
    assert coco.loc["micro_f1", "value"] == pytest.approx(0.61)
    assert math.isnan(coco.loc["map", "value"])  # the probe's null (NaN) kept, not dropped
    assert coco.loc["bucket_head_macro_f1", "value"] == pytest.approx(0.75)
    assert coco.loc["bucket_tail_macro_f1", "value"] == pytest.approx(0.5)
    assert (coco.loc["bucket_head_labels", "value"], coco.loc["bucket_tail_labels", "value"]) == (2, 2)
    aapd = frame[frame["dataset"] == "aapd"]
    assert set(aapd["encoder_role"]) == {"roberta"} and set(aapd["seed"]) == {1} and set(aapd["batch_size"]) == {16}
    assert not aapd["metric"].str.startswith("bucket").any()  # no --train-counts for aapd
    val = frame[frame["split"] == "val"]
    assert set(val["metric"]) == {"micro_f1"} and len(val) == 2  # non-numeric entries skipped


def test_collect_cli_writes_a_csv_that_loads_back(run_tree, tmp_path):
    paths, stats = run_tree
    out = tmp_path / "metrics" / "all_runs.csv"
    argv = ["--metrics", *map(str, paths), "--roles", "resnet_tiny=resnet", "roberta_tiny=roberta", "--train-counts", f"coco={stats}", "--out", str(out)]
    assert collect.main(argv) == 0
    runs = load_runs(out)
    # coco test: micro_f1, map, macro_f1 + both named definitions (recomputed from the scores of
    # this old-format file) + 4 bucket rows; aapd test: micro_f1, macro_f1_caml (its old macro_f1;
    # no scores to recompute the per-class one); 2 val rows.
    assert len(runs) == (5 + 4) + 2 + 2
    head = runs[(runs["metric"] == "bucket_head_macro_f1")]["value"]
    assert head.tolist() == [pytest.approx(0.75)]
    assert runs["value"].isna().sum() == 1


def test_collect_rejects_unknown_encoders_bad_roles_and_files_without_a_run_spec(run_tree, tmp_path):
    paths, _ = run_tree
    with pytest.raises(InputError, match="roberta_tiny"):
        collect_runs(paths, {"resnet_tiny": "resnet"})
    assert collect.parse_roles(["roberta_tiny=bert"]) == {"roberta_tiny": "bert"}  # a role of one's own: the benchmark alone
    with pytest.raises(InputError, match="role 'bert base' of encoder 'roberta_tiny' is not a name"):
        collect.parse_roles(["roberta_tiny=bert base"])
    stray = tmp_path / "elsewhere" / "metrics.json"
    stray.parent.mkdir()
    stray.write_text(json.dumps({"test": {"micro_f1": 0.5}, "spec": {"dataset": "coco", "encoder_name": "resnet_tiny", "loss": "any"}}))
    with pytest.raises(InputError, match="spec has no valid 'batch_size'"):
        collect_runs([stray], ROLES)


def test_collect_reads_the_run_axes_from_the_spec_not_the_path(run_tree, tmp_path):
    paths, _ = run_tree
    moved = tmp_path / "copied" / "metrics.json"  # a folder that names no run axis
    moved.parent.mkdir()
    moved.write_bytes(paths[1].read_bytes())
    frame = collect_runs([moved], ROLES)
    assert set(zip(frame["dataset"], frame["encoder"], frame["loss"], frame["batch_size"], frame["seed"])) == {("aapd", "roberta_tiny", "any", 16, 1)}


def test_read_test_scores_accepts_npz_and_parquet_with_labels_txt(run_tree, tmp_path):
    paths, _ = run_tree
    ids, y_true, scores, labels = read_test_scores(paths[0].parent)
    y_true = y_true.toarray()  # gold labels come back sparse (docs/scale.md)
    assert labels == SCORE_LABELS and list(ids) == ["e0", "e1", "e2", "e3"]
    assert y_true[1].tolist() == [1, 1, 0, 0]  # e1 holds a and c; columns are c, a, d, b
    npz_probe, list_probe = tmp_path / "npz_probe", tmp_path / "list_probe"
    npz_probe.mkdir()
    np.savez(npz_probe / "test_scores.npz", ids=ids, y_true=y_true, scores=scores, labels=np.array(labels))
    list_probe.mkdir()
    (list_probe / "labels.txt").write_text("\n".join(labels) + "\n")
    gold = [[labels[j] for j in np.flatnonzero(row)] for row in y_true]
    pd.DataFrame({"id": ids, "labels": gold, "scores": [list(map(float, row)) for row in scores]}).to_parquet(list_probe / "test_scores.parquet")
    for probe in (npz_probe, list_probe):
        ids2, y_true2, scores2, labels2 = read_test_scores(probe)
        assert list(ids2) == list(ids) and labels2 == labels
        np.testing.assert_array_equal(y_true2.toarray(), y_true)
        np.testing.assert_allclose(scores2, scores)
    with pytest.raises(InputError, match="no test scores"):
        read_test_scores(tmp_path)


def test_collect_reports_the_dataset_familys_macro_f1_from_the_named_definitions(tmp_path):
    both = {"micro_f1": 0.6, "macro_f1": 0.3, "macro_f1_caml": 0.3, "macro_f1_per_class": 0.4}
    paths = [
        # coco's macro_f1 written as CAML's (say, by an older mapping): collect decides from the named entries.
        write_probe(tmp_path, "coco", "resnet_tiny", "any", 32, 0, both, False, val=both),
        write_probe(tmp_path, "mimic3_50", "roberta_tiny", "any", 16, 0, both, False, val=both),
    ]
    frame = collect_runs(paths, ROLES)
    value = frame.set_index(["dataset", "split", "metric"])["value"]
    for split in ("test", "val"):
        assert value[("coco", split, "macro_f1")] == pytest.approx(0.4)  # image family: per-class
        assert value[("mimic3_50", split, "macro_f1")] == pytest.approx(0.3)  # MIMIC family: CAML
        assert value[("coco", split, "macro_f1_caml")] == pytest.approx(0.3)  # both kept under their names
        assert value[("coco", split, "macro_f1_per_class")] == pytest.approx(0.4)
    unknown = write_probe(tmp_path, "toy", "resnet_tiny", "any", 32, 0, both, False)
    with pytest.raises(InputError, match="dataset 'toy' has no family"):
        collect_runs([unknown], ROLES)


def test_collect_computes_buckets_in_the_datasets_macro_f1_definition(run_tree, tmp_path, monkeypatch):
    paths, stats = run_tree
    mimic = write_probe(tmp_path, "mimic3_50", "roberta_tiny", "any", 16, 0, {"micro_f1": 0.5}, True)
    asked = []

    def spy(*args, **kwargs):
        asked.append(kwargs["definition"])
        return metrics.bucket_macro_f1(*args, **kwargs)

    monkeypatch.setattr(collect, "bucket_macro_f1", spy)
    counts = collect.read_train_counts(stats)
    collect_runs([paths[0], mimic], ROLES, {"coco": counts, "mimic3_50": counts})
    assert asked == [metrics.MACRO_F1_PER_CLASS, metrics.MACRO_F1_CAML]


def test_collect_upgrades_metrics_json_from_before_the_per_family_macro_f1(tmp_path, capsys):
    old = {"micro_f1": 0.6, "macro_f1": 0.42, "threshold": 0.5}  # macro_f1 was always CAML's then
    paths = [
        write_probe(tmp_path, "coco", "resnet_tiny", "any", 32, 0, old, True, val=old),
        write_probe(tmp_path, "mimic3_50", "roberta_tiny", "any", 16, 0, old, False, val=old),
    ]
    frame = collect_runs(paths, ROLES)
    value = frame.set_index(["dataset", "split", "metric"])["value"]
    # coco test: both recomputed from test_scores.parquet; per-class F1 a 1, b 1/2, c 0, d 1.
    assert value[("coco", "test", "macro_f1")] == pytest.approx(2.5 / 4)
    assert value[("coco", "test", "macro_f1_per_class")] == pytest.approx(2.5 / 4)
    # coco val: no val scores exist, so only CAML's value is known and macro_f1 is left out, with a note.
    assert value[("coco", "val", "macro_f1_caml")] == pytest.approx(0.42)
    assert ("coco", "val", "macro_f1") not in value.index
    assert "val has no macro_f1_per_class" in capsys.readouterr().err
    # mimic3_50 (CAML family): the old macro_f1 is the right one, test and val alike.
    for split in ("test", "val"):
        assert value[("mimic3_50", split, "macro_f1")] == pytest.approx(0.42)
        assert value[("mimic3_50", split, "macro_f1_caml")] == pytest.approx(0.42)


# ------------------------------------------------------------------------- tables




def md_row(markdown: str, label: str) -> list[str]:
    """The cells of the Markdown row whose first cell is `label`."""
    for line in markdown.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == label:
            return cells[1:]
    raise AssertionError(f"no row {label!r}")


PER_CLASS_NAME = "mean of per-class F1 (MulSupCon)"
CAML_NAME = "harmonic mean of macro-P and macro-R (CAML)"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("image", f"Macro-F1: {PER_CLASS_NAME}"),
        ("aapd", f"Macro-F1: {PER_CLASS_NAME}"),
        ("ablation", f"Macro-F1: {PER_CLASS_NAME}"),  # MS-COCO and AAPD: both per-class
        ("mimic_full", f"Macro-F1: {CAML_NAME}"),
        ("mimic_50", f"Macro-F1: {CAML_NAME}"),
        ("sota", f"Macro-F1: {CAML_NAME}"),
        ("paper_vs_run", f"Macro-F1 by dataset family: image and text: {PER_CLASS_NAME}; MIMIC: {CAML_NAME}"),
    ],
)
def test_every_table_with_a_macro_f1_column_names_its_definition(name, expected):
    runs = tidy_runs(
        [
            ("coco", "resnet", "simdissim", "macro_f1", 0.7),
            ("aapd", "roberta", "simdissim", "macro_f1", 0.5),
            ("mimic3_full", "plm_icd", "simdissim", "macro_f1", 0.1),
            ("mimic3_50", "plm_icd", "simdissim", "macro_f1", 0.2),
        ]
    )
    table = tables.build_table(name, runs)
    assert expected in table.notes  # Markdown and HTML, under the table
    assert tables.latex_escape(expected) in table.latex_notes  # LaTeX, a note paragraph under the tabular
    assert tables.latex_escape(expected) in tables.to_latex(table)
    assert expected in tables.to_html(table)


def test_tables_without_macro_f1_name_no_definition():
    assert not any("Macro-F1" in note for note in tables.build_table("cost", None).notes)
    no_macro = tables.build_table("paper_vs_run", tidy_runs([("coco", "resnet", "simdissim", "micro_f1", 0.7)]))
    assert not any("Macro-F1" in note for note in no_macro.notes)


def test_image_table_says_every_cells_n_and_never_bolds_fewer_seeds_over_more():
    runs = tidy_runs(
        [
            ("coco", "resnet", "simdissim", "micro_f1", 0.70, 0),
            ("coco", "resnet", "simdissim", "micro_f1", 0.72, 1),
            ("coco", "resnet", "mulsupcon", "micro_f1", 0.705, 0),
            ("coco", "resnet", "mulsupcon", "micro_f1", 0.695, 1),
            ("coco", "resnet", "proto", "micro_f1", 0.80),  # one seed, higher than every mean: not bold
            ("coco", "resnet", "all", "macro_f1", 0.55),
            ("coco", "resnet", "any", "macro_f1", 0.5),
            ("voc", "resnet", "all", "micro_f1", 0.6),  # alone in its column: nothing to be best over
        ]
    )
    table = tables.build_table("image", runs)
    markdown, latex, csv = tables.to_markdown(table), tables.to_latex(table), table.records
    # Seed counts differ within the table: every cell names its n.
    assert md_row(markdown, "Sim-Dissim")[0] == "**71.00 ± 1.4** (n=2)"  # mean of 70/72, sample std 1.41
    assert md_row(markdown, "MulSupCon")[0] == "70.00 ± 0.7 (n=2)"
    assert md_row(markdown, "Class proto")[0] == "80.00 (n=1)"
    assert md_row(markdown, "ALL")[:2] == ["not run", "**55.00** (n=1)"]  # macro-F1: two single-seed cells, ranked
    assert md_row(markdown, "ALL")[2] == "60.00 (n=1)"  # PASCAL micro-F1: one cell, not bold
    assert "MSC" not in markdown.split("- ")[0] and "Jaccard" not in markdown.split("- ")[0]  # rows without a result: left out
    assert r"\textbf{71.00 $\pm$ 1.4}\,{\scriptsize(n=2)}" in latex and "& -- &" in latex
    assert "--: not run" not in latex and "not run: no result for this cell, which is outside this configuration's grid" in markdown
    # Columns without any result are left out and named; NUS-WIDE never ran at all.
    assert "left out, not run in this configuration (outside its grid): columns MS-COCO mAP, PASCAL Macro-F1, PASCAL mAP, the paper's NUS-WIDE; rows Jaccard, MSC" in markdown
    assert "cells with fewer seeds are not ranked" in markdown
    assert "n = 2 for 2 cells, n = 1 for 4 cells" in table.caption and "± is the sample standard deviation" in table.caption
    assert r"\multicolumn{2}{c}{\textbf{MS-COCO}}" in latex and r"\cmidrule(lr){2-3}" in latex
    cell = csv[(csv["method"] == "simdissim") & (csv["dataset"] == "coco") & (csv["metric"] == "micro_f1")].iloc[0]
    assert (cell["mean"], cell["seeds"], cell["best"], cell["status"]) == (pytest.approx(71.0), 2, True, "ok")
    assert cell["std"] == pytest.approx(math.sqrt(2))
    proto = csv[(csv["method"] == "proto") & (csv["metric"] == "micro_f1") & (csv["dataset"] == "coco")].iloc[0]
    assert not proto["best"]
    assert len(csv) == 63 and (csv["status"] == "not_run").sum() == 63 - 6  # the CSV keeps the paper's whole grid


def test_uniform_seed_counts_are_said_once_in_the_caption():
    runs = tidy_runs([("aapd", "roberta", m, "micro_f1", v, s) for m, v in (("all", 0.7), ("any", 0.6)) for s in (0, 1, 2)])
    table = tables.build_table("aapd", runs)
    assert "Every value is the mean over n = 3 seeds." in table.caption
    assert "(n=" not in tables.to_markdown(table)
    single = tables.build_table("aapd", tidy_runs([("aapd", "roberta", "all", "micro_f1", 0.7)]))
    assert "Every value is one run (n = 1 seed), so no spread is shown." in single.caption


def test_a_table_none_of_whose_cells_ran_says_so_in_one_line():
    empty = tidy_runs([])
    for name in ("image", "aapd", "mimic_full", "mimic_50", "ablation"):
        table = tables.build_table(name, empty)
        assert tables.to_latex(table).splitlines()[2].startswith(r"\begin{tabular}")
        assert "Nothing of this table ran in this configuration: every cell is outside its grid." in tables.to_markdown(table)
        assert (table.records["status"] == "not_run").all() and not table.records["best"].any()
    assert "this run has none of the paper's result cells" in tables.to_markdown(tables.build_table("paper_vs_run", empty))
    sota = tables.to_markdown(tables.build_table("sota", empty))
    assert "GKI-ICD" in sota and "this run" not in md_rows_text(sota)


def md_rows_text(markdown: str) -> str:
    """The table rows of a Markdown table (no caption, no notes)."""
    return "\n".join(line for line in markdown.splitlines() if line.startswith("|"))


def test_ties_on_the_displayed_mean_are_all_bold():
    runs = tidy_runs([("aapd", "roberta", "all", "micro_f1", 0.73231), ("aapd", "roberta", "any", "micro_f1", 0.73229), ("aapd", "roberta", "mulsupcon", "micro_f1", 0.7)])
    markdown = tables.to_markdown(tables.build_table("aapd", runs))
    assert md_row(markdown, "ALL")[0] == md_row(markdown, "ANY")[0] == "**73.23**"
    assert md_row(markdown, "MulSupCon")[0] == "70.00"


def test_mimic_table_bolds_within_each_encoder_block():
    runs = tidy_runs(
        [
            ("mimic3_full", "roberta", "all", "macro_auc", 0.80),
            ("mimic3_full", "roberta", "simdissim", "macro_auc", 0.81),
            ("mimic3_full", "plm_icd", "all", "macro_auc", 0.95),
            ("mimic3_full", "plm_icd", "simdissim", "macro_auc", 0.90),
            ("mimic3_full", "plm_icd", "simdissim", "p_at_8", 0.75),
            ("mimic3_full", "plm_icd", "simdissim", "micro_auc", 0.99),
            ("mimic3_50", "plm_icd", "simdissim", "p_at_5", 0.60),
        ]
    )
    full = tables.build_table("mimic_full", runs)
    best = full.records[full.records["best"]]
    # P@8 has one value in the PLM-ICD block: nothing to be best over, not bold.
    assert set(zip(best["encoder_role"], best["method"], best["metric"])) == {("roberta", "simdissim", "macro_auc"), ("plm_icd", "all", "macro_auc")}
    latex = tables.to_latex(full)
    # Only MIMIC-III-Full's macro/micro-AUC and P@8 have results: 1 + 3 columns; the Llama block is left out.
    assert r"\multicolumn{4}{c}{\textbf{PLM-ICD}}" in latex and "P@8" in latex and "Ours" in latex
    assert r"\multicolumn{2}{c}{AUC}" in latex and "Llama" not in latex.split(r"\bottomrule")[0]
    assert "the paper's blocks Llama-3.1-8B + LoRA" in tables.to_markdown(full)
    fifty = tables.build_table("mimic_50", runs).records
    assert set(fifty["metric"]) == {"macro_auc", "micro_auc", "macro_f1", "micro_f1", "p_at_5"}
    assert fifty.loc[fifty["status"] == "ok", "mean"].tolist() == [pytest.approx(60.0)]


SOTA_RUN = [("mimic3_full", "plm_icd", "simdissim", m, v) for m, v in (("macro_auc", 0.9), ("micro_auc", 0.99), ("macro_f1", 0.11), ("micro_f1", 0.631), ("p_at_8", 0.7))]


def test_sota_table_places_the_paper_configurations_run_row_above_the_rule_with_one_decimal():
    table = tables.build_table("sota", tidy_runs(SOTA_RUN))
    labels = [item[0].text if isinstance(item, list) else "RULE" for item in table.body]
    assert labels.index("Sim-Dissim (this run)") == labels.index("Sim-Dissim (paper)") + 1
    assert labels[labels.index("Sim-Dissim (this run)") + 1 :] == ["RULE", "MRR", "AKIL"]
    markdown = tables.to_markdown(table)
    assert md_row(markdown, "Sim-Dissim (this run)") == ["90.0", "99.0", "11.0", "**63.1**", "70.0"]
    assert md_row(markdown, "GKI-ICD")[0] == "**96.2**" and md_row(markdown, "GKI-ICD")[3] == "62.3"
    assert md_row(markdown, "MRR")[1] == "99.5"  # higher than every row above, but not comparable: not bold
    assert md_row(markdown, "Sim-Dissim (paper)")[1] == "**99.4**"
    assert md_row(markdown, "KEPTLongformer")[:2] == ["-", "-"]
    assert "not strictly comparable" in markdown and "The paper's own data and models" in table.caption


def test_sota_table_leaves_a_stand_in_run_out_of_the_published_rows():
    table = tables.build_table("sota", tidy_runs(SOTA_RUN, paper=False))
    markdown = tables.to_markdown(table)
    assert "this run" not in md_rows_text(markdown)
    assert md_row(markdown, "Sim-Dissim (paper)")[2] == "**12.5**"  # the paper's best macro-F1, not the run's
    assert any("left out" in note and "MIMIC-III-Full-demo" in note and "plm_icd_enc (for PLM-ICD)" in note for note in table.notes)
    assert "stand-ins" in table.caption
    run = table.records[table.records["source"] == "run"]
    assert len(run) == 5 and not run["best"].any()


def test_ablation_table_marks_factors():
    runs = tidy_runs([("coco", "resnet", "sim", "micro_f1", 0.6722), ("coco", "resnet", "any", "micro_f1", 0.6), ("aapd", "roberta", "dissim", "macro_f1", 0.5803)])
    table = tables.build_table("ablation", runs)
    latex, markdown = tables.to_latex(table), tables.to_markdown(table)
    # Columns without a result (MS-COCO macro-F1, AAPD micro-F1) are left out.
    assert r"$\checkmark$ & $\times$ & \textbf{67.22} & -- \\" in latex
    assert r"$\times$ & $\checkmark$ & -- & 58.03 \\" in latex  # alone in its column: not bold
    assert "| ✓ | ✗ | **67.22** | not run |" in markdown
    assert "| ✗ | ✗ | 60.00 | not run |" in markdown
    assert "Sim-Dissim" not in md_rows_text(markdown)


def test_paper_vs_run_lists_deltas_of_the_papers_own_data_and_models():
    runs = tidy_runs([("coco", "resnet", "simdissim", "micro_f1", 0.74), ("coco", "resnet", "any", "micro_f1", 0.6480), ("aapd", "roberta", "any", "macro_f1", 0.58)])
    table = tables.build_table("paper_vs_run", runs)
    frame = table.records.set_index("cell")
    assert frame.loc["results-image/coco/resnet/simdissim/micro_f1", "delta"] == pytest.approx(0.60)
    assert frame.loc["ablation/coco/resnet/any/micro_f1", "delta"] == pytest.approx(0.0)
    assert frame.loc["results-text/aapd/roberta/any/macro_f1", "delta"] == pytest.approx(-0.55)
    assert (frame["status"] == "ok").sum() == 6  # each run cell appears in two paper tables
    total = len(frame)
    assert total == 63 + 16 + 16 + 360 + 5  # loss cells of all result tables (SOTA: the paper's own row)
    markdown = tables.to_markdown(table)
    assert f"{total - 6} of the paper's {total} loss cells have no result in this run" in markdown
    assert "| results-image | results-image/coco/resnet/simdissim/micro_f1 | 73.40 | 74.00 | +0.60 |" in markdown


def test_paper_vs_run_draws_no_delta_for_a_stand_in_run():
    rows = [("coco", "resnet", "simdissim", "micro_f1", 0.74), ("coco", "resnet", "any", "micro_f1", 0.6480), ("aapd", "roberta", "any", "macro_f1", 0.58)]
    table = tables.build_table("paper_vs_run", tidy_runs(rows, paper=False))
    frame = table.records
    assert (frame["status"] == "stand_in").sum() == 6 and frame["delta"].isna().all()
    markdown = tables.to_markdown(table)
    assert "No cell is compared" in table.caption and "+0.60" not in markdown and "74.00" not in markdown
    assert "| MS-COCO with ResNet-50 | MS-COCO-demo with resnet_enc (for ResNet-50) | 4 | no: stand-in |" in markdown
    assert "| AAPD with RoBERTa-base | AAPD-demo with roberta_enc (for RoBERTa-base) | 2 | no: stand-in |" in markdown
    # A run with some cells on the paper's own data and models compares those only.
    mixed = tidy_runs(rows[:1]).pipe(lambda own: pd.concat([own, tidy_runs(rows[2:], paper=False)], ignore_index=True))
    partial = tables.build_table("paper_vs_run", mixed)
    assert set(partial.records.loc[partial.records["status"] == "ok", "cell"].str.split("/").str[1]) == {"coco"}
    assert "2 further cells of this run are on stand-ins and are not compared" in partial.notes


def test_default_batch_size_is_the_one_most_runs_share_and_can_be_overridden():
    runs = tidy_runs([("coco", "resnet", m, "micro_f1", 0.5 + i / 100, 0, 32) for i, m in enumerate(("all", "any", "mulsupcon", "simdissim"))] + [("coco", "resnet", "simdissim", "micro_f1", 0.9, 0, 64)])
    default = tables.build_table("image", runs).records
    assert default.loc[(default["method"] == "simdissim") & (default["metric"] == "micro_f1"), "mean"].iloc[0] == pytest.approx(53.0)
    chosen = tables.build_table("image", runs, batch_size=64).records.query("dataset == 'coco'").set_index(["method", "metric"])
    assert chosen.loc[("simdissim", "micro_f1"), "mean"] == pytest.approx(90.0)
    assert chosen.loc[("all", "micro_f1"), "status"] == "not_run"


def test_a_summary_over_two_encoders_of_one_role_is_refused_and_the_table_shows_the_first():
    runs = tidy_runs([("coco", "resnet", "all", "micro_f1", 0.5), ("coco", "resnet", "all", "micro_f1", 0.6, 1)])
    runs.loc[1, ["encoder", "encoder_order"]] = ["other", 1]
    with pytest.raises(InputError, match="map to role 'resnet'"):
        summarise_seeds(runs)
    cells = tables.build_table("image", runs).records.set_index(["dataset", "method", "metric"])
    assert cells.loc[("coco", "all", "micro_f1"), "mean"] == pytest.approx(50.0)  # resnet_enc, listed first


def test_html_table_merges_group_headers_and_carries_caption_and_notes():
    runs = tidy_runs([("coco", "resnet", m, metric, v) for m, v in (("all", 0.6), ("simdissim", 0.7)) for metric in ("micro_f1", "macro_f1", "map")], paper=False)
    table = tables.build_table("image", runs)
    page = tables.to_html(table)
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page and "http" not in page
    assert '<th class="group" colspan="3">MS-COCO-demo</th>' in page
    assert "<strong>70.00</strong>" in page and "Ran: resnet_enc (for ResNet-50) on MS-COCO-demo." in page
    assert all(html.escape(note) in page for note in table.notes)
    assert "<h1>Image classification (paper Table results-image)</h1>" in page


BENCHMARK_HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time"


def write_run(results: Path, run: tuple[str, str, str, int, int], pretrain_rows: list[str], probe_rows: list[str]) -> Path:
    """A run as the workflow leaves it for the cost table: its probe metrics.json recording the
    run's spec, and each training job's benchmark file at the run's place (mscl.layout)."""
    dataset, encoder, loss, batch, seed = run
    name = layout.run_name(*run)
    metrics = Path(layout.run_dir(str(results), name)) / "probe" / "metrics.json"
    metrics.parent.mkdir(parents=True, exist_ok=True)
    spec = {"dataset": dataset, "encoder_name": encoder, "loss": loss, "batch_size": batch, "seed": seed}
    metrics.write_text(json.dumps({"spec": spec, "test": {"map": 0.5}}))
    for stage, rows in (("pretrain", pretrain_rows), ("probe", probe_rows)):
        benchmark = Path(layout.job_benchmark(str(results), stage, name))
        benchmark.parent.mkdir(parents=True, exist_ok=True)
        benchmark.write_text("\n".join([BENCHMARK_HEADER, *rows]) + "\n")
    return metrics


def test_cost_table_sums_hours_and_takes_max_rss(tmp_path):
    results = tmp_path / "results"
    probe_row = "36\t0:00:36\tNA\t-\t-\t-\t-\t-\t-\tNA"
    files = [
        write_run(results, ("coco", "resnet_tiny", "all", 32, 0), ["3600\t1:00:00\t2048\t1\t1\t1\t0\t0\t90\t7200"], [probe_row]),
        # Two repeats of one job: averaged (wall 1800 s, cpu 3600 s, rss 1024 MB).
        write_run(results, ("coco", "resnet_tiny", "any", 32, 0), ["1200\t0:20:00\t512\t1\t1\t1\t0\t0\t90\t3000", "2400\t0:40:00\t1536\t1\t1\t1\t0\t0\t90\t4200"], [probe_row]),
    ]
    out = tmp_path / "tables" / "cost"
    assert tables.main(["cost", "--out-prefix", str(out), "--metrics", *map(str, files)]) == 0
    frame = pd.read_csv(out.with_suffix(".csv")).set_index("rule")
    assert frame.loc["pretrain", "jobs"] == 2
    assert frame.loc["pretrain", "wall_hours"] == pytest.approx(1.5)
    assert frame.loc["pretrain", "cpu_hours"] == pytest.approx(3.0)
    assert frame.loc["pretrain", "max_rss_gb"] == pytest.approx(2.0)
    assert frame.loc["probe", "wall_hours"] == pytest.approx(0.02) and math.isnan(frame.loc["probe", "cpu_hours"])
    markdown = out.with_suffix(".md").read_text()
    assert "| probe | coco | resnet_tiny | 2 | n/a | 0.020 | n/a |" in markdown


def test_cost_table_reads_the_runs_axes_from_their_recorded_specs(tmp_path, monkeypatch):
    """The spec, not the path, says whose cost it is: the run must sit where its spec puts it,
    and its benchmark files are found from there (here under a relative results folder)."""
    monkeypatch.chdir(tmp_path)
    metrics = write_run(Path("out"), ("voc", "enc", "any", 8, 3), ["10\t0:00:10\t100\t1\t1\t1\t0\t0\t90\t5"], ["2\t0:00:02\t50\t1\t1\t1\t0\t0\t90\t1"])
    row = cost.cost_frame([metrics]).set_index("rule").loc["pretrain"]
    assert (row["dataset"], row["encoder"], row["jobs"]) == ("voc", "enc", 1) and row["wall_hours"] == pytest.approx(10 / 3600)
    document = json.loads(metrics.read_text())
    document["spec"]["loss"] = "all"  # recorded for another run than the folder holds
    metrics.write_text(json.dumps(document))
    with pytest.raises(InputError, match="runs/voc/enc/all/bs8/seed3"):
        cost.cost_frame([metrics])
    document["spec"]["loss"] = "any"
    metrics.write_text(json.dumps(document))
    Path(layout.job_benchmark("out", "probe", layout.run_name("voc", "enc", "any", 8, 3))).unlink()
    with pytest.raises(InputError, match="benchmark file not found"):
        cost.cost_frame([metrics])


def test_a_table_and_a_figure_say_when_their_runs_ran_more_than_one_version_of_the_code(tmp_path):
    from mscl.report import figures
    from mscl.report.collect import code_versions

    ran = [{"mscl/losses.py": {"a" * 64}, "mscl/io.py": {"c" * 64}}, {"mscl/losses.py": {"b" * 64, "d" * 64}, "mscl/io.py": {"c" * 64}}, {}]
    assert code_versions(ran) == ["mscl/losses.py@aaaaaaaaaaaa", "mscl/losses.py@bbbbbbbbbbbb mscl/losses.py@dddddddddddd", ""]
    runs = tidy_runs([("aapd", "llama", "simdissim", "micro_f1", 0.7561), ("aapd", "llama", "all", "micro_f1", 0.5)])
    prefix = tmp_path / "aapd"
    runs.assign(code_versions="").to_csv(tmp_path / "same.csv", index=False)
    assert tables.main(["aapd", "--runs", str(tmp_path / "same.csv"), "--out-prefix", str(prefix)]) == 0
    assert "version of the code" not in prefix.with_suffix(".md").read_text()
    runs.assign(code_versions=code_versions(ran)[:2]).to_csv(tmp_path / "mixed.csv", index=False)
    assert tables.main(["aapd", "--runs", str(tmp_path / "mixed.csv"), "--out-prefix", str(prefix)]) == 0
    sentence = "These runs were made by more than one version of the code: mscl/losses.py (3 versions); `python -m mscl stale` lists the runs"
    for suffix in (".md", ".html"):
        assert sentence in prefix.with_suffix(suffix).read_text()
    assert figures.main(["text_encoders", "--runs", str(tmp_path / "mixed.csv"), "--out-prefix", str(tmp_path / "figure")]) == 0
    assert sentence in (tmp_path / "figure.html").read_text()


def test_table_cli_writes_four_files_and_needs_runs(tmp_path):
    runs_csv = tmp_path / "all_runs.csv"
    tidy_runs([("aapd", "llama", "simdissim", "micro_f1", 0.7561), ("aapd", "llama", "all", "macro_f1", 0.5)]).to_csv(runs_csv, index=False)
    prefix = tmp_path / "tables" / "aapd"
    assert tables.main(["aapd", "--runs", str(runs_csv), "--out-prefix", str(prefix)]) == 0
    assert "75.61" in prefix.with_suffix(".tex").read_text()
    assert "not run" in prefix.with_suffix(".md").read_text()
    assert "75.61" in prefix.with_suffix(".html").read_text()
    assert len(pd.read_csv(prefix.with_suffix(".csv"))) == 16
    with pytest.raises(InputError, match="--runs"):
        tables.main(["image", "--out-prefix", str(prefix)])
