"""Every paper figure from small synthetic results: the plotted data, and the files it writes."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image
from scipy import stats as scipy_stats

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


def test_saved_figures_are_byte_identical_when_their_data_are(tmp_path, monkeypatch):
    """Regenerating a figure from the same data a day later must not change its files (no
    timestamps; matplotlib reads "now" from SOURCE_DATE_EPOCH when set), and other data must."""
    import matplotlib.pyplot as plt

    def save(name: str, y: list[float], day: int = 0) -> tuple[bytes, bytes]:
        monkeypatch.setenv("SOURCE_DATE_EPOCH", str(day * 86400))
        figure, axes = plt.subplots()
        axes.plot([0, 1, 2], y)
        figures.save_figure(figure, tmp_path / name)
        return (tmp_path / f"{name}.pdf").read_bytes(), (tmp_path / f"{name}.png").read_bytes()

    first, again, other = save("first", [1, 2, 3]), save("again", [1, 2, 3], day=1), save("other", [3, 2, 1])
    assert first == again
    assert first[0] != other[0] and first[1] != other[1]


def expected_size(width_in: float, height_in: float) -> tuple[int, int]:
    return round(width_in * PNG_DPI), round(height_in * PNG_DPI)


# Paper Table "results-image" rows ALL, ANY, MulSupCon, Sim-Dissim (micro-F1, macro-F1, mAP).
PAPER_IMAGE = {
    "coco": {"all": (68.93, 63.32, 64.11), "any": (64.80, 57.37, 56.90), "mulsupcon": (71.33, 66.25, 67.69), "simdissim": (73.40, 70.03, 69.20)},
    "voc": {"all": (82.53, 79.87, 79.32), "any": (82.31, 79.65, 79.15), "mulsupcon": (82.75, 80.26, 79.58), "simdissim": (83.63, 81.10, 79.75)},
}


def paper_image_runs() -> pd.DataFrame:
    return tidy_runs([(d, "resnet", m, metric, v / 100) for d, rows in PAPER_IMAGE.items() for m, values in rows.items() for metric, v in zip(("micro_f1", "macro_f1", "map"), values)])


def test_improvement_reproduces_the_papers_relative_gains_and_leaves_out_what_did_not_run(tmp_path):
    figure, data = figures.improvement_figure(paper_image_runs())
    coco = data[data["dataset"] == "coco"].set_index("metric")
    # The paper's text: macro-F1 +5.7% and micro-F1 +2.9% on MS-COCO.
    assert round(coco.loc["macro_f1", "mean"], 1) == 5.7 and round(coco.loc["micro_f1", "mean"], 1) == 2.9
    assert coco.loc["micro_f1", "delta"] == pytest.approx(2.07)
    assert (coco["seeds"] == 1).all() and coco["ci_low"].isna().all()  # one seed: no interval
    assert (data.loc[data["dataset"] == "nuswide", "status"] == "not_run").all()
    ticks = [t.get_text() for t in figure.axes[0].get_xticklabels()]
    assert len(ticks) == 2 and all(t.endswith("n = 1") for t in ticks)  # NUS-WIDE left out, every n said
    assert "the paper's NUS-WIDE" in data.attrs["caption"] and "NUS-WIDE Micro-F1" in " ".join(data.attrs["not_run"])
    assert saved_png_size(figure, tmp_path, "improvement") == expected_size(3.4, 2.9)


def test_improvement_pairs_seeds_and_gives_a_t_interval_from_three_seeds():
    # Sim-Dissim - MulSupCon per seed: +2, +4, +3 points on a base of 50 -> +4, +8, +6 %.
    rows = [("coco", "resnet", "mulsupcon", "micro_f1", 0.50, s) for s in (0, 1, 2)]
    rows += [("coco", "resnet", "simdissim", "micro_f1", v, s) for s, v in ((0, 0.52), (1, 0.54), (2, 0.53))]
    rows += [("coco", "resnet", "simdissim", "micro_f1", 0.9, 3)]  # seed 3 has no MulSupCon run: not paired
    rows += [("voc", "resnet", m, "micro_f1", v, 0) for m, v in (("mulsupcon", 0.5), ("simdissim", 0.51))]
    _, data = figures.improvement_figure(tidy_runs(rows))
    coco = data.set_index(["dataset", "metric"]).loc[("coco", "micro_f1")]
    assert coco["seeds"] == 3 and coco["mean"] == pytest.approx(6.0) and coco["delta"] == pytest.approx(3.0)
    half = scipy_stats.t.ppf(0.975, 2) * 2.0 / math.sqrt(3)  # sample std of 4, 8, 6 is 2
    assert (coco["ci_low"], coco["ci_high"]) == (pytest.approx(6.0 - half), pytest.approx(6.0 + half))
    assert (coco["delta_ci_low"], coco["delta_ci_high"]) == (pytest.approx(3.0 - half / 2), pytest.approx(3.0 + half / 2))
    voc = data.set_index(["dataset", "metric"]).loc[("voc", "micro_f1")]
    assert voc["seeds"] == 1 and math.isnan(voc["ci_low"])


def test_std_figure_gives_the_papers_pascal_spread():
    _, data = figures.std_figure(paper_image_runs())
    voc = data[data["dataset"] == "voc"].set_index("metric")["mean"].round(2).to_dict()
    assert voc == {"micro_f1": 0.58, "macro_f1": 0.64, "map": 0.27}  # paper: 0.58/0.64/0.27
    assert (data.loc[data["dataset"] == "nuswide", "status"] == "not_run").all()


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
    assert cell.loc[("mimic4_icd9_full", "llama", "p_at_k"), "status"] == "not_run"
    assert len(data) == 6 * 3 * 5 and (data["status"] == "ok").sum() == 3
    norm = figures.zero_centred_norm(data["delta"])
    assert (norm.vmin, norm.vcenter, norm.vmax) == (pytest.approx(-2.0), 0.0, pytest.approx(3.0))
    # Two strips (the settings with a delta), three encoder rows; MIMIC-IV-ICD9-Full (no Ours) left out.
    assert [ax.get_title() for ax in figure.axes[:2]] == ["MIMIC-III-Full", "MIMIC-III-50"]
    assert "the paper's MIMIC-IV-ICD10-Full" in data.attrs["caption"] and "MIMIC-IV-ICD9-Full" in data.attrs["caption"]
    assert saved_png_size(figure, tmp_path, "heatstrip") == expected_size(7.0, 0.3 + 0.3 * 3 + 1.0)


def test_dotplot_uses_p_at_8_for_full_and_p_at_5_for_top50_and_draws_only_what_ran():
    figure, data = figures.mimic_dotplot_figure(mimic_runs())
    # Three settings ran: three panels (a 2 x 2 grid, the fourth blank); the legend names the three encoders and four methods that ran.
    titles = [ax.get_title() for ax in figure.axes if ax.get_title()]
    assert titles == ["MIMIC-III-Full (n = 1)", "MIMIC-III-50 (n = 1)", "MIMIC-IV-ICD9-Full (n = 1)"]
    legend = [text.get_text() for text in figure.legends[0].get_texts()]
    assert legend == ["ALL", "ANY", "MulSupCon", "Sim-Dissim", "RoBERTa-base", "Llama-3.1-8B + LoRA", "PLM-ICD"]
    assert all("zoomed" in ax.get_xlabel() for ax in figure.axes if ax.get_title())
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
    assert values.loc[("any", "head"), "status"] == "not_run"
    assert [t.get_text() for t in figure.axes[0].get_xticklabels()] == ["Head (23 classes)", "Tail (57 classes)"]
    assert figure.axes[0].get_ylim()[0] == 0.0  # bars from 0
    # The legend names the methods drawn, each with its n; ANY did not run.
    assert [t.get_text() for t in figure.legends[0].get_texts()] == ["ALL (n = 1)", "MulSupCon (n = 1)", "Sim-Dissim (n = 1)"]


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
    assert (data.loc[data["method"] == "mulsupcon", "status"] == "not_run").all()
    # Only micro-F1 ran: one panel; the rest goes to the log (data.attrs["not_run"]), not into the image.
    assert len(figure.axes) == 1 and not any("missing" in t.get_text() or "not run" in t.get_text() for t in figure.texts)
    assert "MulSupCon bs32 Micro-F1" in data.attrs["not_run"]
    assert "zoomed" in figure.axes[0].get_ylabel()
    assert saved_png_size(figure, tmp_path, "batch") == expected_size(7.0, 2.7)


def test_relations_figure_factors_come_from_the_loss_definitions(tmp_path):
    figure, data = figures.relations_figure()
    products = dict(zip(data["relation"], data["product"]))
    assert products == {"R1": 0.0, "R2": 1.0, "R3": pytest.approx(1 / 9), "R4": pytest.approx(2 / 3), "R5": pytest.approx(1 / 3)}
    assert data["intersection"].tolist() == [0, 3, 1, 2, 3] and data["difference"].tolist() == [3, 0, 2, 0, 2]
    texts = [t.get_text() for t in figure.axes[0].texts]
    assert any("=1/9" in t for t in texts)
    assert saved_png_size(figure, tmp_path, "relations") == expected_size(4.9, 2.9)


def test_a_figure_with_nothing_to_draw_says_so_in_one_line(tmp_path):
    empty = tidy_runs([])
    for name in figures.FIGURE_NAMES:
        figure, data = figures.build_figure(name, empty)
        width, height = saved_png_size(figure, tmp_path, name)
        assert width > 500, name
        if name == "relations":
            continue
        assert (data["status"] == "not_run").all(), name
        texts = [text.get_text() for ax in figure.axes for text in ax.texts]
        assert len(texts) == 1 and "outside this configuration's grid" in texts[0], name
        assert not figure.legends and height == round(0.9 * PNG_DPI), name


def test_figure_cli_writes_pdf_png_and_a_captioned_page_and_logs_what_did_not_run(tmp_path, capsys):
    runs_csv = tmp_path / "all_runs.csv"
    paper_image_runs().to_csv(runs_csv, index=False)
    prefix = tmp_path / "figures" / "std"
    assert figures.main(["std", "--runs", str(runs_csv), "--out-prefix", str(prefix)]) == 0
    assert prefix.with_suffix(".pdf").exists() and prefix.with_suffix(".png").stat().st_size > 10_000
    page = prefix.with_suffix(".html").read_text()
    assert page.startswith("<!DOCTYPE html>") and 'src="data:image/png;base64,' in page
    assert "Sample standard deviation (ddof 1, in points) across the test means" in page and "Ran: ResNet-50 on MS-COCO, PASCAL." in page
    assert "NUS-WIDE Micro-F1 (0 methods)" in capsys.readouterr().err  # what did not run: in the job's log
    with pytest.raises(InputError, match="--runs"):
        figures.main(["std", "--out-prefix", str(prefix)])
