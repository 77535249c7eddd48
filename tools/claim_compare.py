"""Two published claim data folders side by side: what a rerun of the claim DAG reproduced.

    .venv/bin/python tools/claim_compare.py docs/claim docs/claim/run_5e5c5b6

The report's own last outcome line (`claim-report --previous`) counts identical metric values
in runs.csv and names each primary test-mAP verdict that moved. This prints the rest, for an
amendment's "As run" record:

- tuning: for each dataset, method and batch size, whether both folders chose the same setting,
  and for a choice that moved, both settings' val mAP (mean over the tuning seeds) then and
  now: how near the choice was; and how far each setting's val mAP moved (median, largest);
- means: for each dataset and method of runs.csv, the test mAP now minus then (mean over the
  paired seeds) and the standard deviation of the per-seed differences, in points, beside the
  spread over seeds within each folder, with the methods whose tuned setting moved marked;
- values: for runs.csv, schedule.csv and batch_size.csv, per dataset, how many of the metric
  values of the same run (dataset, method, encoder, epochs, batch size, seed, split) are
  identical, and the largest and median absolute difference of the others, in points;
- verdicts: for every statistics file (tests.csv, schedule_tests.csv, batch_size_tests.csv,
  long_tail_tests.csv), how many verdicts of the same comparison differ, each with its mean
  difference in points then and now.

A row that only one folder has is counted, not compared. Nothing is written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from mscl.report.claim import value_agreement

RUN_KEYS = ("dataset", "method", "encoder", "epochs", "batch_size", "seed", "split")
TEST_KEYS = ("dataset", "encoder", "epochs", "batch_size", "comparison", "metric", "family")
RUN_FILES = ("runs.csv", "schedule.csv", "batch_size.csv")
TEST_FILES = ("tests.csv", "schedule_tests.csv", "batch_size_tests.csv", "long_tail_tests.csv")


def read(folder: Path, name: str) -> pd.DataFrame | None:
    path = folder / name
    return pd.read_csv(path) if path.is_file() else None


def chosen_settings(tuning: pd.DataFrame) -> pd.DataFrame:
    return tuning[tuning["chosen"]].drop_duplicates(["dataset", "method", "batch_size"])[["dataset", "method", "batch_size", "setting"]]


def moved_choices(now: pd.DataFrame, then: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every (dataset, method, batch size) both folders tuned, and those whose chosen setting differs."""
    both = chosen_settings(now).merge(chosen_settings(then), on=["dataset", "method", "batch_size"], suffixes=("_now", "_then"))
    return both, both[both["setting_now"] != both["setting_then"]]


def tuning_lines(now: pd.DataFrame, then: pd.DataFrame, both: pd.DataFrame, moved: pd.DataFrame) -> list[str]:
    means = {name: t.groupby(["dataset", "method", "batch_size", "setting"])["value"].mean() * 100 for name, t in (("now", now), ("then", then))}
    lines = [f"tuning: {len(both) - len(moved)} of {len(both)} choices the same (val mAP of both settings, mean over the tuning seeds)"]
    shift = (means["now"] - means["then"]).dropna().abs()  # the same setting's val mAP, now against then
    if not shift.empty:
        dataset, method, batch, setting = shift.idxmax()
        lines.append(
            f"  each setting's val mAP moved by a median {shift.median():.2f} points over {len(shift)} settings, "
            f"at most {shift.max():.2f} ({dataset} {method} batch {batch} {setting})"
        )
    for r in moved.itertuples():
        cell = (r.dataset, r.method, r.batch_size)
        val = {name: (means[name][(*cell, r.setting_then)], means[name][(*cell, r.setting_now)]) for name in means}
        lines.append(
            f"  {r.dataset} {r.method} batch {r.batch_size}: {r.setting_then} then ({val['then'][0]:.2f} vs {val['then'][1]:.2f}), "
            f"{r.setting_now} now ({val['now'][1]:.2f} vs {val['now'][0]:.2f})"
        )
    return lines


def mean_lines(now: pd.DataFrame, then: pd.DataFrame, moved: pd.DataFrame | None) -> list[str]:
    keys = [k for k in RUN_KEYS if k in now.columns and k in then.columns]
    pairs = now[now["split"] == "test"].merge(then[then["split"] == "test"], on=keys, suffixes=("_now", "_then"))
    retuned = set() if moved is None else set(zip(moved["dataset"], moved["method"]))
    lines = ["test mAP by method, now minus then over the paired seeds (points): mean, sd of the differences; sd over seeds now / then"]
    for (dataset, method), block in pairs.groupby(["dataset", "method"], sort=True):
        difference = (block["map_now"] - block["map_then"]) * 100
        mark = "  (setting moved)" if (dataset, method) in retuned else ""
        lines.append(
            f"  {dataset} {method}: {difference.mean():+.2f}, sd {difference.std():.2f}; "
            f"{block['map_now'].std() * 100:.2f} / {block['map_then'].std() * 100:.2f} (n={len(block)}){mark}"
        )
    return lines


def value_lines(name: str, now: pd.DataFrame, then: pd.DataFrame) -> list[str]:
    keys = [k for k in RUN_KEYS if k in now.columns and k in then.columns]
    common = len(now.merge(then, on=keys))
    lines = [f"{name}: {len(now)} rows now, {len(then)} then, {common} in common"]
    for r in value_agreement(now, then, keys).sort_values("dataset").itertuples():
        spread = f"; the others differ by up to {r.largest * 100:.2f} points, median {r.median * 100:.2f}" if r.identical < r.values else ""
        lines.append(f"  {r.dataset}: {r.identical} of {r.values} values identical{spread}")
    return lines


def verdict_lines(name: str, now: pd.DataFrame, then: pd.DataFrame) -> list[str]:
    keys = [k for k in TEST_KEYS if k in now.columns and k in then.columns]
    both = now.merge(then, on=keys, suffixes=("_now", "_then"))
    moved = both[both["verdict_now"] != both["verdict_then"]]
    lines = [f"{name}: {len(moved)} of {len(both)} verdicts differ"]
    for r in moved.to_dict("records"):
        where = " ".join(str(r[k]) for k in keys)
        lines.append(f"  {where}: {r['mean_diff_then'] * 100:+.2f} {r['verdict_then']} then, {r['mean_diff_now'] * 100:+.2f} {r['verdict_now']} now")
    return lines


def compare(now_dir: Path, then_dir: Path) -> list[str]:
    lines: list[str] = []
    now, then = read(now_dir, "tuning.csv"), read(then_dir, "tuning.csv")
    moved = None
    if now is not None and then is not None:
        both, moved = moved_choices(now, then)
        lines += tuning_lines(now, then, both, moved)
    lines += mean_lines(pd.read_csv(now_dir / "runs.csv"), pd.read_csv(then_dir / "runs.csv"), moved)
    for name in RUN_FILES:
        now, then = read(now_dir, name), read(then_dir, name)
        if now is not None and then is not None:
            lines += value_lines(name, now, then)
    for name in TEST_FILES:
        now, then = read(now_dir, name), read(then_dir, name)
        if now is not None and then is not None:
            lines += verdict_lines(name, now, then)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("now", type=Path, help="the newer claim data folder (e.g. docs/claim)")
    parser.add_argument("then", type=Path, help="the earlier one (e.g. a record folder under docs/claim/)")
    args = parser.parse_args(argv)
    for folder in (args.now, args.then):
        if not (folder / "runs.csv").is_file():
            print(f"claim_compare: {folder}: no runs.csv; pass a claim data folder (docs/claim or a record under it)", file=sys.stderr)
            return 2
    print("\n".join(compare(args.now, args.then)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
