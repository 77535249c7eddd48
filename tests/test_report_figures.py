"""Every paper figure from small synthetic results: the plotted data, and the files it writes."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from mscl.errors import InputError
from mscl.report import figures
from mscl.report.style import PNG_DPI

from conftest import tidy_runs




def saved_png_size(figure, tmp_path: Path, name: str) -> tuple[int, int]:
    """Save PDF + PNG, check both are non-empty, return the PNG's pixel size."""
    prefix = tmp_path / name
    figures.save_figure(figure, prefix)
    pdf, png = prefix.with_suffix(".pdf"), prefix.with_suffix(".png")
    assert pdf.stat().st_size > 1000 and pdf.read_bytes().startswith(b"%PDF")
    with Image.open(png) as image:
        return image.size


def expected_size(width_in: float, height_in: float) -> tuple[int, int]:
    return round(width_in * PNG_DPI), round(height_in * PNG_DPI)


# Paper Table "results-image" rows ALL, ANY, MulSupCon, Sim-Dissim (micro-F1, macro-F1, mAP).
PAPER_IMAGE = {
    "coco": {"all": (68.93, 63.32, 64.11), "any": (64.80, 57.37, 56.90), "mulsupcon": (71.33, 66.25, 67.69), "simdissim": (73.40, 70.03, 69.20)},
    "voc": {"all": (82.53, 79.87, 79.32), "any": (82.31, 79.65, 79.15), "mulsupcon": (82.75, 80.26, 79.58), "simdissim": (83.63, 81.10, 79.75)},
}


def paper_image_runs() -> pd.DataFrame:
    return tidy_runs([(d, "resnet", m, metric, v / 100) for d, rows in PAPER_IMAGE.items() for m, values in rows.items() for metric, v in zip(("micro_f1", "macro_f1", "map"), values)])


def test_improvement_reproduces_the_papers_relative_gains_and_marks_missing(tmp_path):
    figure, data = figures.improvement_figure(paper_image_runs())
    coco = data[data["dataset"] == "coco"].set_index("metric")
    # The paper's text: macro-F1 +5.7% and micro-F1 +2.9% on MS-COCO.
    assert round(coco.loc["macro_f1", "mean"], 1) == 5.7 and round(coco.loc["micro_f1", "mean"], 1) == 2.9
    assert coco.loc["micro_f1", "delta"] == pytest.approx(2.07)
    assert (data.loc[data["dataset"] == "nuswide", "status"] == "missing").all()
    assert saved_png_size(figure, tmp_path, "improvement") == expected_size(3.4, 2.4)


def test_std_figure_gives_the_papers_pascal_spread():
    _, data = figures.std_figure(paper_image_runs())
    voc = data[data["dataset"] == "voc"].set_index("metric")["mean"].round(2).to_dict()
    assert voc == {"micro_f1": 0.58, "macro_f1": 0.64, "map": 0.27}  # paper: 0.58/0.64/0.27
    assert (data.loc[data["dataset"] == "nuswide", "status"] == "missing").all()


def test_text_encoders_plots_each_encoder_method_and_metric_with_seed_error_bars():
    runs = tidy_runs([("aapd", "roberta", "simdissim", "micro_f1", 0.74, 0), ("aapd", "roberta", "simdissim", "micro_f1", 0.76, 1), ("aapd", "llama", "all", "macro_f1", 0.6047)])
    _, data = figures.text_encoders_figure(runs)
    assert len(data) == 2 * 4 * 2
    ours = data[(data["encoder_role"] == "roberta") & (data["method"] == "simdissim") & (data["metric"] == "micro_f1")].iloc[0]
    assert (ours["mean"], ours["seeds"]) == (pytest.approx(75.0), 2) and ours["std"] == pytest.approx(math.sqrt(2))
    llama = data[(data["encoder_role"] == "llama") & (data["method"] == "all") & (data["metric"] == "macro_f1")].iloc[0]
    assert llama["mean"] == pytest.approx(60.47) and (data["status"] == "ok").sum() == 2


def mimic_runs() -> pd.DataFrame:
    rows = []
    for method, value in (("all", 0.40), ("any", 0.45), ("mulsupcon", 0.47), ("simdissim", 0.50)):
        rows.append(("mimic3_full", "plm_icd", method, "macro_f1", value))
        rows.append(("mimic3_full", "roberta", method, "micro_auc", 0.95 - (0.02 if method == "simdissim" else 0.0)))
    rows.append(("mimic3_50", "llama", "simdissim", "p_at_5", 0.61))
    rows.append(("mimic3_50", "llama", "any", "p_at_5", 0.60))
    rows.append(("mimic4_icd9_full", "llama", "all", "p_at_8", 0.66))  # no Ours: missing delta
    return tidy_runs(rows)


def test_heatstrip_deltas_against_the_best_baseline(tmp_path):
    figure, data = figures.mimic_heatstrip_figure(mimic_runs())
    cell = data.set_index(["dataset", "encoder_role", "metric"])
    assert cell.loc[("mimic3_full", "plm_icd", "macro_f1"), "delta"] == pytest.approx(3.0)
    assert cell.loc[("mimic3_full", "plm_icd", "macro_f1"), "best_baseline_method"] == "mulsupcon"
    assert cell.loc[("mimic3_full", "roberta", "micro_auc"), "delta"] == pytest.approx(-2.0)
    assert cell.loc[("mimic3_50", "llama", "p_at_k"), "delta"] == pytest.approx(1.0)  # P@5 for Top-50
    assert cell.loc[("mimic4_icd9_full", "llama", "p_at_k"), "status"] == "missing"
    assert len(data) == 6 * 3 * 5 and (data["status"] == "ok").sum() == 3
    norm = figures.zero_centred_norm(data["delta"])
    assert (norm.vmin, norm.vcenter, norm.vmax) == (pytest.approx(-2.0), 0.0, pytest.approx(3.0))
    assert saved_png_size(figure, tmp_path, "heatstrip") == expected_size(7.0, 3.6)


def test_dotplot_uses_p_at_8_for_full_and_p_at_5_for_top50():
    _, data = figures.mimic_dotplot_figure(mimic_runs())
    assert len(data) == 6 * 3 * 4 * 5
    keys = data.drop_duplicates(["label_space", "metric_key"]).query("metric == 'p_at_k'").set_index("label_space")["metric_key"].to_dict()
    assert keys == {"full": "p_at_8", "50": "p_at_5"}
    point = data[(data["dataset"] == "mimic3_50") & (data["encoder_role"] == "llama") & (data["method"] == "simdissim") & (data["metric"] == "p_at_k")].iloc[0]
    assert point["mean"] == pytest.approx(61.0) and point["status"] == "ok"


def test_frequency_buckets_plots_head_and_tail_and_names_bucket_sizes():
    rows = []
    for method, head, tail in (("all", 0.70, 0.60), ("mulsupcon", 0.72, 0.63), ("simdissim", 0.7339, 0.6595)):
        rows += [("coco", "resnet", method, "bucket_head_macro_f1", head), ("coco", "resnet", method, "bucket_tail_macro_f1", tail)]
        rows += [("coco", "resnet", method, "bucket_head_labels", 23), ("coco", "resnet", method, "bucket_tail_labels", 57)]
    figure, data = figures.frequency_buckets_figure(tidy_runs(rows))
    values = data.set_index(["method", "bucket"])
    assert values.loc[("simdissim", "head"), "mean"] - values.loc[("mulsupcon", "head"), "mean"] == pytest.approx(1.39)
    assert values.loc[("simdissim", "tail"), "mean"] - values.loc[("mulsupcon", "tail"), "mean"] == pytest.approx(2.95)
    assert values.loc[("any", "head"), "status"] == "missing"
    title = figure.axes[0].get_title()
    assert "23 classes" in title and "57 classes" in title


def test_frequency_buckets_use_the_image_tables_macro_f1_definition():
    from mscl.metrics import MACRO_F1_PER_CLASS, macro_f1_definition
    from mscl.report import tables
    from mscl.report.style import IMAGE_DATASETS, MACRO_F1_DEFINITION_NAMES

    figure, data = figures.frequency_buckets_figure(tidy_runs([("coco", "resnet", "simdissim", "bucket_head_macro_f1", 0.7)]))
    # The figure extends the image table: one definition for its MS-COCO buckets and every image column.
    assert set(data["macro_f1_definition"]) == {macro_f1_definition("coco")} == {macro_f1_definition(d) for d in IMAGE_DATASETS} == {MACRO_F1_PER_CLASS}
    name = MACRO_F1_DEFINITION_NAMES[MACRO_F1_PER_CLASS]
    assert name in figure.axes[0].get_ylabel()
    image = tables.build_table("image", tidy_runs([("coco", "resnet", "simdissim", "macro_f1", 0.7)]))
    assert any(name in note for note in image.notes)


def test_batch_size_uses_the_batch_sizes_present_and_the_validation_split(tmp_path):
    rows = [("coco", "resnet", m, "micro_f1", 0.5 + b / 1000, 0, b, "val") for m in ("all", "simdissim") for b in (32, 128)]
    rows.append(("coco", "resnet", "simdissim", "micro_f1", 0.99, 0, 64, "test"))  # a test value: not plotted
    figure, data = figures.batch_size_figure(tidy_runs(rows))
    assert sorted(data["batch_size"].unique()) == [32, 128]
    ours = data[(data["method"] == "simdissim") & (data["metric"] == "micro_f1")].set_index("batch_size")["mean"]
    assert ours.to_dict() == {32: pytest.approx(53.2), 128: pytest.approx(62.8)}
    assert (data.loc[data["method"] == "mulsupcon", "status"] == "missing").all()
    assert saved_png_size(figure, tmp_path, "batch") == expected_size(7.0, 2.5)


def test_relations_figure_factors_come_from_the_loss_definitions(tmp_path):
    figure, data = figures.relations_figure()
    products = dict(zip(data["relation"], data["product"]))
    assert products == {"R1": 0.0, "R2": 1.0, "R3": pytest.approx(1 / 9), "R4": pytest.approx(2 / 3), "R5": pytest.approx(1 / 3)}
    assert data["intersection"].tolist() == [0, 3, 1, 2, 3] and data["difference"].tolist() == [3, 0, 2, 0, 2]
    texts = [t.get_text() for t in figure.axes[0].texts]
    assert any("=1/9" in t for t in texts)
    assert saved_png_size(figure, tmp_path, "relations") == expected_size(4.9, 2.9)


def test_every_figure_renders_with_no_results_at_all(tmp_path):
    empty = tidy_runs([])
    for name in figures.FIGURE_NAMES:
        figure, data = figures.build_figure(name, empty)
        if name != "relations":
            assert (data["status"] == "missing").all(), name
        width, height = saved_png_size(figure, tmp_path, name)
        assert width > 500 and height > 400


def test_figure_cli_writes_pdf_and_png_and_needs_runs(tmp_path):
    runs_csv = tmp_path / "all_runs.csv"
    paper_image_runs().to_csv(runs_csv, index=False)
    prefix = tmp_path / "figures" / "std"
    assert figures.main(["std", "--runs", str(runs_csv), "--out-prefix", str(prefix)]) == 0
    assert prefix.with_suffix(".pdf").exists() and prefix.with_suffix(".png").stat().st_size > 10_000
    with pytest.raises(InputError, match="--runs"):
        figures.main(["std", "--out-prefix", str(prefix)])
