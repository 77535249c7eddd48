"""The README's demo results block is generated from a committed record of the run, not typed
(issue 22): the block in README.md equals what `python -m mscl readme-results` renders from
docs/results/demo_run.csv, and the rendering itself is checked on a small record."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mscl.errors import InputError
from mscl.report import readme

from conftest import tidy_runs

REPO = Path(__file__).resolve().parents[1]


def test_readme_block_is_the_one_the_committed_record_gives():
    record = readme.read_record(REPO / "docs" / "results" / "demo_run.csv")
    assert set(record["run"]) == {"reference", "rerun"} and record["commit"].nunique() == 1
    assert readme.current_block(REPO / "README.md") == readme.render_block(record)


def small_record() -> pd.DataFrame:
    rows = [("coco", "resnet", "simdissim", "map", v, s, 64) for s, v in ((0, 0.24), (1, 0.26), (2, 0.25))]
    rows += [("coco", "resnet", "all", "map", 0.22, 0, 64), ("coco", "resnet", "proto", "map", 0.30, 0, 64), ("coco", "resnet", "msc", "map", 0.27, 0, 64)]
    rows += [("coco", "reference", "chance", "map", 0.095, 0, 0), ("aapd", "roberta", "all", "micro_f1", 0.771, 0, 32), ("aapd", "roberta", "all", "macro_auc", 0.929, 0, 32)]
    rows += [("coco", "resnet", "all", "map", 0.9, 0, 128)]  # another batch size: not the table's (most runs are at 64)
    runs = tidy_runs(rows, paper=False)
    reference = readme.record_frame(runs, "reference", "1 torch thread per job", "abc1234", "Test CPU, 2 cores")
    moved = runs.assign(value=runs["value"] + ([0.0] * 3 + [0.012, 0.0, 0.0, 0.0, 0.003, 0.0, 0.0]))
    rerun = readme.record_frame(moved, "rerun", "2 torch threads per job", "abc1234", "Test CPU, 2 cores")
    return pd.concat([reference, rerun], ignore_index=True)


def test_block_shows_means_with_their_n_and_how_far_a_rerun_moved_them():
    record = small_record()
    assert len(record[record["run"] == "reference"]) == 9  # the batch-128 row is not a shown cell
    block = readme.render_block(record)
    lines = block.splitlines()
    assert lines[0].startswith("**Results of that run** (commit `abc1234`, 1 torch thread per job, on Test CPU, 2 cores;")
    # Only the datasets that ran get a column, each named by what ran.
    assert lines[2] == "|  | MS-COCO-demo, resnet_enc (for ResNet-50): mAP | AAPD-demo, roberta_enc (for RoBERTa-base): Micro-F1 / Macro-AUC |"
    assert "| Sim-Dissim | 25.0 ± 1.0 (n=3) |  |" in block
    assert "| ALL | 22.0 | 77.1 / 92.9 |" in block
    assert "| Class prototypes / MSC | 30.0 / 27.0 |  |" in block and "| Chance (label prior) | 9.5 |  |" in block
    assert "| ANY |" not in block  # no result: no row
    # ALL mAP moved by 1.2 points, AAPD micro-F1 by 0.3; the other 5 cells not at all.
    assert "moved the 7 cells above by 1.2 points at most (ALL, MS-COCO-demo mAP), 0.0 points in the median; 1 of them by 1 point or more" in block
    assert "2 torch threads per job" in block


def test_write_and_check_the_readme(tmp_path, capsys):
    record_path, readme_path = tmp_path / "record.csv", tmp_path / "README.md"
    readme_path.write_text(f"# Title\n\nbefore\n{readme.BEGIN_MARKER}\nold typed numbers\n{readme.END_MARKER}\nafter\n")
    runs_csv, rerun_csv = tmp_path / "all_runs.csv", tmp_path / "rerun.csv"
    record = small_record()
    for path, run in ((runs_csv, "reference"), (rerun_csv, "rerun")):
        record[record["run"] == run].drop(columns=["run", "setting", "commit", "machine"]).to_csv(path, index=False)
    argv = ["--runs", str(runs_csv), "--rerun", str(rerun_csv), "--commit", "abc1234", "--machine", "Test CPU, 2 cores", "--record", str(record_path), "--readme", str(readme_path)]
    assert readme.main(argv) == 0
    text = readme_path.read_text()
    assert text.startswith("# Title\n\nbefore\n") and text.endswith(f"{readme.END_MARKER}\nafter\n") and "old typed numbers" not in text
    assert readme.current_block(readme_path) == readme.render_block(small_record())
    assert readme.main(["--check", "--record", str(record_path), "--readme", str(readme_path)]) == 0
    readme_path.write_text(text.replace("25.0 ± 1.0", "26.0 ± 1.0"))  # a hand edit
    assert readme.main(["--check", "--record", str(record_path), "--readme", str(readme_path)]) == 1
    assert "differs" in capsys.readouterr().out
    readme_path.write_text("no markers\n")
    with pytest.raises(InputError, match="no generated results block"):
        readme.main(argv)
