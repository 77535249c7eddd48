"""`python -m mscl check-complete` (mscl.report.complete): holes in tables and figures are found."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from conftest import tidy_runs

from mscl.report.complete import main

TABLE_COLUMNS = ["table", "dataset", "encoder_role", "method", "metric", "mean", "std", "seeds", "best", "status"]


def write_table(path: Path, rows: list[tuple]) -> Path:
    pd.DataFrame(rows, columns=TABLE_COLUMNS).to_csv(path, index=False)
    return path


def write_statistics(path: Path, datasets: list[str]) -> Path:
    rows = [{"key": name, "Dataset": name, "Train": 10, "Val": 2, "Test": 3, "Total # labels": 5, "Avg # labels": 1.5} for name in datasets]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_a_complete_run_passes_and_writes_its_summary(tmp_path, capsys):
    table = write_table(tmp_path / "image.csv", [("image", "coco", "resnet", "all", "map", 12.5, None, 1, True, "ok"), ("sota", "mimic3_50", "", "caml", "micro_f1", None, None, 0, False, "not_reported")])
    statistics = write_statistics(tmp_path / "statistics.csv", ["coco", "aapd"])
    out = tmp_path / "complete.txt"
    code = main(["--tables", str(table), "--statistics", str(statistics), "--datasets", "coco", "aapd", "--figure", "relations", "--out", str(out)])
    assert code == 0
    assert out.read_text() == "complete: 1 tables (1 cells with a result), 2 datasets in the statistics, 1 figures (5 plotted items)\n"


def test_missing_and_nan_cells_missing_datasets_and_figure_holes_are_each_reported(tmp_path, capsys):
    table = write_table(
        tmp_path / "aapd.csv",
        [
            ("aapd", "aapd", "roberta", "all", "micro_f1", 70.0, None, 1, True, "ok"),
            ("aapd", "aapd", "llama", "any", "micro_f1", None, None, 0, False, "missing"),
            ("aapd", "aapd", "llama", "all", "macro_f1", None, None, 0, False, "not_run"),
            ("aapd", "aapd", "roberta", "any", "macro_f1", float("nan"), None, 1, False, "ok"),
        ],
    )
    statistics = write_statistics(tmp_path / "statistics.csv", ["coco"])
    runs_csv = tmp_path / "all_runs.csv"
    # AAPD with the RoBERTa column only: the text-encoder figure lacks every Llama bar.
    rows = [("aapd", "roberta", m, metric, 0.5) for m in ("all", "any", "mulsupcon", "simdissim") for metric in ("micro_f1", "macro_f1")]
    tidy_runs(rows).to_csv(runs_csv, index=False)
    out = tmp_path / "complete.txt"
    args = ["--tables", str(table), "--statistics", str(statistics), "--datasets", "coco", "aapd", "--runs", str(runs_csv), "--figure", "text_encoders=32", "--out", str(out)]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "aapd.csv: no result for aapd/aapd/llama/any/micro_f1" in err
    assert "aapd.csv: no result for aapd/aapd/llama/all/macro_f1" in err  # a reworked report's not_run
    assert "aapd.csv: aapd/aapd/roberta/any/macro_f1 is NaN" in err
    assert "statistics.csv: no row for dataset 'aapd'" in err
    assert err.count("figure text_encoders: no result for") == 8  # 4 methods x 2 metrics of Llama
    assert not out.exists()
