"""tools/compare_runs.py: two runs' tables and all_runs.csv side by side (the record of a rerun)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pandas as pd

SPEC = importlib.util.spec_from_file_location("compare_runs", Path(__file__).parents[1] / "tools" / "compare_runs.py")
compare_runs = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(compare_runs)


def runs(values, display="COCO"):
    return pd.DataFrame(
        [{"dataset": "coco", "encoder": "r", "loss": loss, "batch_size": 64, "seed": 0, "split": "test", "metric": "map",
          "value": value, "dataset_display": display} for loss, value in values]
    )  # fmt: skip


def test_identical_changed_and_missing_values_and_tables_are_told_apart(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    for folder, text in ((old, "a"), (new, "b")):
        folder.mkdir()
        (folder / "same.md").write_text("x")
        (folder / "moved.md").write_text(text)
    (new / "benchmark.csv").write_text("")
    assert compare_runs.compare_tables(old, new) == (["same.md"], ["moved.md"], ["benchmark.csv"])
    found = compare_runs.compare_runs(runs([("any", 0.5), ("all", math.nan), ("msc", 0.1)]), runs([("any", 0.5), ("all", math.nan), ("msc", 0.4)], "MS-COCO"))
    assert found["values_equal"] == (2, 3) and math.isclose(found["max_difference"], 0.3) and found["in_one_only"] == 0
    assert found["names_agree"] == {"dataset_display": False}
    assert compare_runs.compare_runs(runs([("any", 0.5)]), runs([("all", 0.5)]))["in_one_only"] == 2
