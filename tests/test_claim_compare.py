"""tools/claim_compare.py: two claim data folders side by side (an amendment's "As run" record)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
RECORD = REPO / "docs" / "claim" / "run_5e5c5b6"
TOOL = REPO / "tools" / "claim_compare.py"


def test_a_rerun_that_moved_one_choice_some_values_and_one_verdict_is_described_exactly(tmp_path: Path) -> None:
    """A copy of a published folder, then: one tuning choice swapped, yeast ANY's test mAP of
    seed 3 raised by 1.5 points and two other values by 0.25, one primary verdict turned. The
    tool counts every identical value, gives the largest and median difference of the others
    (in points), each method's mean test-mAP shift, and names the moved choice (with both
    settings' val mAP) and verdict; a folder without runs.csv is refused."""
    then, now = tmp_path / "then", tmp_path / "now"
    shutil.copytree(RECORD, then, ignore=shutil.ignore_patterns("figures", "*.md", "*.txt"))
    shutil.copytree(then, now)

    tuning = pd.read_csv(now / "tuning.csv")
    block = (tuning["dataset"] == "debtags") & (tuning["method"] == "any")
    first, other = tuning[block & tuning["chosen"]].index[0], tuning[block & ~tuning["chosen"]].index[0]
    old_setting, new_setting = tuning.at[first, "setting"], tuning.at[other, "setting"]
    tuning.loc[block, "chosen"] = tuning.loc[block, "setting"] == new_setting
    yeast_all = tuning[(tuning["dataset"] == "yeast") & (tuning["method"] == "all")].index[0]
    tuning.at[yeast_all, "value"] += 0.02  # one of its setting's two tuning seeds: the setting's mean moves 1 point
    moved_setting = tuning.at[yeast_all, "setting"]
    tuning.to_csv(now / "tuning.csv", index=False)

    runs = pd.read_csv(now / "runs.csv")
    yeast_any = (runs["dataset"] == "yeast") & (runs["method"] == "any") & (runs["split"] == "test")
    runs.loc[yeast_any & (runs["seed"] == 3), "map"] += 0.015
    runs.loc[yeast_any & (runs["seed"] == 4), ["micro_f1", "macro_auc"]] -= 0.0025
    runs.to_csv(now / "runs.csv", index=False)

    tests = pd.read_csv(now / "tests.csv")
    row = tests[(tests["dataset"] == "debtags") & (tests["comparison"] == "all") & (tests["metric"] == "map") & (tests["family"] == "primary")].index[0]
    before = tests.at[row, "verdict"]
    tests.at[row, "verdict"] = "inconclusive" if before != "inconclusive" else "better"
    tests.to_csv(now / "tests.csv", index=False)

    result = subprocess.run([sys.executable, str(TOOL), str(now), str(then)], capture_output=True, text=True, check=True)
    lines = result.stdout.splitlines()
    choices = len(pd.read_csv(then / "tuning.csv").query("chosen").drop_duplicates(["dataset", "method", "batch_size"]))
    assert f"tuning: {choices - 1} of {choices} choices the same (val mAP of both settings, mean over the tuning seeds)" in lines
    val = tuning[block].groupby("setting")["value"].mean() * 100  # the values are untouched: each setting's val mAP is the same then and now
    old_val, new_val = f"{val[old_setting]:.2f}", f"{val[new_setting]:.2f}"
    assert f"  debtags any batch 128: {old_setting} then ({old_val} vs {new_val}), {new_setting} now ({new_val} vs {old_val})" in lines
    settings = len(tuning.groupby(["dataset", "method", "batch_size", "setting"]))
    batch = tuning.at[yeast_all, "batch_size"]
    assert f"  each setting's val mAP moved by a median 0.00 points over {settings} settings, at most 1.00 (yeast all batch {batch} {moved_setting})" in lines
    # test mAP by method: yeast ANY moved +1.5 on one seed of 10 (mean +0.15, sd of the differences 0.47);
    # debtags ANY's values are unchanged but its setting is marked as moved
    assert any(line.startswith("  yeast any: +0.15, sd 0.47; ") for line in lines)
    assert any(line.startswith("  debtags any: +0.00, sd 0.00; ") and line.endswith("(setting moved)") for line in lines)
    assert not any(line.startswith("  yeast any: ") and line.endswith("(setting moved)") for line in lines)
    yeast_values = int((pd.read_csv(then / "runs.csv")["dataset"] == "yeast").sum()) * 4
    assert f"  yeast: {yeast_values - 3} of {yeast_values} values identical; the others differ by up to 1.50 points, median 0.25" in lines
    assert any(line.startswith("  debtags: ") and line.endswith(" values identical") for line in lines)  # untouched: no spread
    assert "tests.csv: 1 of 88 verdicts differ" in lines
    assert any(line.startswith("  debtags all map primary: ") and f"{before} then, " in line for line in lines)

    refused = subprocess.run([sys.executable, str(TOOL), str(now), str(tmp_path)], capture_output=True, text=True)
    assert refused.returncode == 2 and "no runs.csv" in refused.stderr and str(tmp_path) in refused.stderr
