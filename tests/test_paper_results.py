"""paper_results.csv against the paper's own .tex: every transcribed cell, and the counts per table."""

from __future__ import annotations

import re

import pytest
from conftest import shared_dir

from mscl.report.paper import NOT_STRICTLY_COMPARABLE, PAPER_TABLES, cell_id, paper_results, published_models

TEX_PATH = shared_dir() / "paper" / "sd_loss_paper.tex"
NUMBER = r"(?:\d[\d,]*\.?\d*k?|-)"

# Column order of each paper table, as (dataset, encoder_role, metric) per printed number.
IMAGE_COLUMNS = [(d, "resnet", m) for d in ("coco", "voc", "nuswide") for m in ("micro_f1", "macro_f1", "map")]
TEXT_COLUMNS = [("aapd", r, m) for r in ("roberta", "llama") for m in ("micro_f1", "macro_f1")]
ABLATION_COLUMNS = [("coco", "resnet", "micro_f1"), ("coco", "resnet", "macro_f1"), ("aapd", "roberta", "micro_f1"), ("aapd", "roberta", "macro_f1")]
MIMIC_METRICS = ("macro_auc", "micro_auc", "macro_f1", "micro_f1")
ROW_METHODS = {"ALL": "all", "ANY": "any", "MulSupCon": "mulsupcon", "Sim-Dissim": "simdissim", "Ours": "simdissim", "Jaccard": "jaccard", "Class proto": "proto", "MSC": "msc"}


@pytest.fixture(scope="module")
def tex() -> str:
    if not TEX_PATH.exists():
        pytest.fail(f"paper source not found at {TEX_PATH}; set MSCL_SHARED to the team's shared folder")
    return TEX_PATH.read_text(encoding="utf-8")


def tabular_of(tex: str, label: str) -> str:
    """The text from a table's \\label to the end of its tabular."""
    start = tex.index(rf"\label{{tab:{label}}}")
    return tex[start : tex.index(r"\end{tabular}", start)]


def row_numbers(body: str, row_name: str, is_pattern: bool = False) -> list[str]:
    """The numbers (or '-') printed in the row that starts with `row_name` (a regex if
    `is_pattern`), \\textbf removed."""
    head = row_name if is_pattern else re.escape(row_name)
    pattern = rf"^\s*{head}(?:\s*\\citep\{{[^}}]*\}})?\s*&(.*?)\\\\"
    match = re.search(pattern, body, flags=re.MULTILINE)
    assert match, f"row {row_name!r} not found"
    plain = re.sub(r"\\textbf\{([^}]*)\}", r"\1", match.group(1))
    return [cell.strip() for cell in plain.split("&")]


def as_number(printed: str) -> float:
    """A printed cell as a number: '82.0k' -> 82000, '47,723' -> 47723."""
    text = printed.replace(",", "")
    return round(float(text[:-1]) * 1000) if text.endswith("k") else float(text)


def expected_cells(tex: str) -> dict[str, float]:
    """Every number of the seven tables, keyed by cell id, parsed from the .tex."""
    cells: dict[str, float] = {}

    def add(table: str, dataset: str, role: str, method: str, metric: str, printed: str) -> None:
        if printed != "-":
            cells[cell_id(table, dataset, role, method, metric)] = as_number(printed)

    for label, columns, names in (
        ("results-image", IMAGE_COLUMNS, ("ALL", "ANY", "MulSupCon", "Sim-Dissim", "Jaccard", "Class proto", "MSC")),
        ("results-text", TEXT_COLUMNS, ("ALL", "ANY", "MulSupCon", "Sim-Dissim")),
    ):
        body = tabular_of(tex, label)
        for name in names:
            for (dataset, role, metric), printed in zip(columns, row_numbers(body, name), strict=True):
                add(label, dataset, role, ROW_METHODS[name], metric, printed)
    ablation = tabular_of(tex, "ablation")
    cross, check = r"\$\\times\$", r"\$\\checkmark\$"
    for similarity, dissimilarity, method in ((cross, cross, "any"), (check, cross, "sim"), (cross, check, "dissim"), (check, check, "simdissim")):
        numbers = row_numbers(ablation, rf"{similarity}\s*&\s*{dissimilarity}", is_pattern=True)
        for (dataset, role, metric), printed in zip(ABLATION_COLUMNS, numbers, strict=True):
            add("ablation", dataset, role, method, metric, printed)
    sota = tabular_of(tex, "mimic-sota")
    for model in ("CAML", "MSATT-KG", "MSMN", "KEPTLongformer", "PLM-ICD", "PLM-CA", "CoRelation", "GKI-ICD", "Sim-Dissim (ours)", "MRR", "AKIL"):
        role, method = ("plm_icd", "simdissim") if model.startswith("Sim-Dissim") else ("", model)
        for metric, printed in zip((*MIMIC_METRICS, "p_at_8"), row_numbers(sota, model), strict=True):
            add("mimic-sota", "mimic3_full", role, method, metric, printed)
    for label, space, top in (("results-mimic-full", "full", "p_at_8"), ("results-mimic-50", "50", "p_at_5")):
        body = tabular_of(tex, label)
        datasets = [f"mimic3_{space}", f"mimic4_icd9_{space}", f"mimic4_icd10_{space}"]
        blocks = re.split(r"\\textbf\{(RoBERTa|Llama|PLM-ICD)\}", body)
        for title, block in zip(blocks[1::2], blocks[2::2]):
            role = {"RoBERTa": "roberta", "Llama": "llama", "PLM-ICD": "plm_icd"}[title]
            for name in ("ALL", "ANY", "MulSupCon", "Ours"):
                columns = [(d, m) for d in datasets for m in (*MIMIC_METRICS, top)]
                for (dataset, metric), printed in zip(columns, row_numbers(block, name), strict=True):
                    add(label, dataset, role, ROW_METHODS[name], metric, printed)
    statistics = tabular_of(tex, "statistics")
    for name, key in (("MS-COCO", "coco"), ("PASCAL", "voc"), ("NUS-WIDE", "nuswide"), ("AAPD", "aapd"), ("MIMIC-III-Full", "mimic3_full"), ("MIMIC-III-50", "mimic3_50"), ("MIMIC-IV-ICD9-Full", "mimic4_icd9_full"), ("MIMIC-IV-ICD9-50", "mimic4_icd9_50"), ("MIMIC-IV-ICD10-Full", "mimic4_icd10_full"), ("MIMIC-IV-ICD10-50", "mimic4_icd10_50")):
        for metric, printed in zip(("train", "val", "test", "labels", "avg"), row_numbers(statistics, name), strict=True):
            add("statistics", key, "", "", metric, printed)
    return cells


def test_every_csv_cell_matches_the_tex_and_none_is_left_out(tex):
    expected = expected_cells(tex)
    results = paper_results()
    transcribed = dict(zip(results["cell"], results["value"]))
    assert set(transcribed) == set(expected)
    wrong = {cell: (transcribed[cell], value) for cell, value in expected.items() if transcribed[cell] != pytest.approx(value)}
    assert not wrong


SAMPLE = {
    "results-image/coco/resnet/simdissim/micro_f1": 73.40,
    "results-image/voc/resnet/jaccard/map": 80.09,
    "results-image/nuswide/resnet/proto/macro_f1": 56.03,
    "results-image/voc/resnet/msc/macro_f1": 80.39,
    "results-image/coco/resnet/any/map": 56.90,
    "results-text/aapd/llama/simdissim/macro_f1": 63.42,
    "results-text/aapd/roberta/mulsupcon/micro_f1": 73.64,
    "results-text/aapd/llama/all/micro_f1": 74.32,
    "mimic-sota/mimic3_full/-/CAML/macro_f1": 8.8,
    "mimic-sota/mimic3_full/-/KEPTLongformer/p_at_8": 77.1,
    "mimic-sota/mimic3_full/-/GKI-ICD/macro_auc": 96.2,
    "mimic-sota/mimic3_full/plm_icd/simdissim/micro_auc": 99.4,
    "mimic-sota/mimic3_full/-/AKIL/p_at_8": 78.4,
    "ablation/coco/resnet/sim/micro_f1": 67.22,
    "ablation/aapd/roberta/dissim/macro_f1": 58.03,
    "ablation/coco/resnet/dissim/macro_f1": 59.32,
    "results-mimic-full/mimic3_full/roberta/all/macro_auc": 89.87,
    "results-mimic-full/mimic4_icd10_full/plm_icd/simdissim/macro_f1": 5.74,
    "results-mimic-full/mimic4_icd9_full/llama/mulsupcon/p_at_8": 66.73,
    "results-mimic-full/mimic4_icd9_full/roberta/any/micro_auc": 98.14,
    "results-mimic-50/mimic3_50/plm_icd/any/p_at_5": 63.84,
    "results-mimic-50/mimic4_icd10_50/llama/simdissim/micro_f1": 71.23,
    "results-mimic-50/mimic4_icd9_50/roberta/mulsupcon/macro_auc": 94.73,
    "statistics/coco/-/-/train": 82000,
    "statistics/mimic4_icd10_full/-/-/labels": 25230,
    "statistics/mimic3_full/-/-/train": 47723,
    "statistics/aapd/-/-/avg": 2.4,
}


def test_sampled_cells_hold_the_printed_values(tex):
    """A hand-read sample (each value typed from the PDF table) and the .tex agree with the CSV."""
    expected = expected_cells(tex)
    transcribed = dict(zip(paper_results()["cell"], paper_results()["value"]))
    for cell, value in SAMPLE.items():
        assert transcribed[cell] == pytest.approx(value), cell
        assert expected[cell] == pytest.approx(value), cell


def test_counts_per_table_match_the_paper_grids():
    results = paper_results()
    counts = results["table"].value_counts().to_dict()
    assert counts == {
        "results-image": 7 * 9,
        "results-text": 4 * 4,
        "results-mimic-full": 3 * 3 * 4 * 5,  # with -50: 2 x 3 x 3 x 4 x 5 = 360
        "results-mimic-50": 3 * 3 * 4 * 5,
        "mimic-sota": 11 * 5 - 2,  # KEPTLongformer has no AUCs
        "ablation": 4 * 4,
        "statistics": 10 * 5,
    }
    sota = paper_results("mimic-sota")
    assert sota.groupby(["encoder_role", "method"]).ngroups == 11
    assert published_models()[-2:] == list(NOT_STRICTLY_COMPARABLE)
    assert set(results["table"]) == set(PAPER_TABLES)


def test_cell_ids_are_unique_and_built_from_the_columns():
    results = paper_results()
    assert results["cell"].is_unique
    rebuilt = [cell_id(*parts) for parts in results[["table", "dataset", "encoder_role", "method", "metric"]].itertuples(index=False)]
    assert rebuilt == list(results["cell"])


def test_methods_and_metrics_use_the_project_keys():
    results = paper_results()
    losses = results[(results["encoder_role"] != "") & (results["table"] != "statistics")]
    assert set(losses["method"]) == {"all", "any", "mulsupcon", "simdissim", "jaccard", "proto", "msc", "sim", "dissim"}
    assert set(losses["metric"]) == {"micro_f1", "macro_f1", "map", "micro_auc", "macro_auc", "p_at_5", "p_at_8"}
    with pytest.raises(ValueError, match="unknown paper table"):
        paper_results("results-typo")
