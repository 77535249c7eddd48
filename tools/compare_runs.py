"""Two runs of one config side by side: which table files are byte-identical, and whether
all_runs.csv holds the same values (e.g. the embedded default before and after a change that
must not move a number; docs/records/demo_run_c6e6fda.txt).

    python tools/compare_runs.py OLD_WORKDIR NEW_WORKDIR [--results results]

Prints the identical and the differing files of results/tables, then all_runs.csv joined on
the run axes: rows in one run only, values equal (NaN equal to NaN), the largest difference,
and whether the name columns both runs have agree. Exit status 0 whatever it finds.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

AXES = ["dataset", "encoder", "loss", "batch_size", "seed", "split", "metric"]
NAME_COLUMNS = ["dataset_display", "encoder_display", "encoder_role", "paper_dataset", "paper_encoder"]


def compare_tables(old: Path, new: Path) -> tuple[list[str], list[str], list[str]]:
    """(identical, differing, in one run only) file names of two tables folders."""
    names_old, names_new = {p.name for p in old.iterdir()}, {p.name for p in new.iterdir()}
    shared = sorted(names_old & names_new)
    identical = [name for name in shared if (old / name).read_bytes() == (new / name).read_bytes()]
    return identical, [name for name in shared if name not in identical], sorted(names_old ^ names_new)


def compare_runs(old: pd.DataFrame, new: pd.DataFrame) -> dict[str, object]:
    merged = old.merge(new, on=AXES, suffixes=("_old", "_new"), how="outer", indicator=True)
    both = merged[merged["_merge"] == "both"]
    equal = (both["value_old"] == both["value_new"]) | (both["value_old"].isna() & both["value_new"].isna())
    names = {
        column: bool((both[f"{column}_old"].astype(str) == both[f"{column}_new"].astype(str)).all())
        for column in NAME_COLUMNS if f"{column}_old" in both
    }  # fmt: skip
    return {
        "rows": (len(old), len(new)), "in_one_only": int((merged["_merge"] != "both").sum()),
        "values_equal": (int(equal.sum()), len(both)), "max_difference": float((both["value_old"] - both["value_new"]).abs().max()),
        "names_agree": names, "new_columns": sorted(set(new.columns) - set(old.columns)),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--results", default="results", help="the runs' paths.results (default results)")
    args = parser.parse_args()
    identical, differing, alone = compare_tables(args.old / args.results / "tables", args.new / args.results / "tables")
    print(f"identical tables ({len(identical)}): {', '.join(identical)}")
    print(f"differing tables ({len(differing)}): {', '.join(differing)}")
    print(f"in one run only ({len(alone)}): {', '.join(alone)}")
    runs = [pd.read_csv(folder / args.results / "metrics" / "all_runs.csv") for folder in (args.old, args.new)]
    for key, value in compare_runs(*runs).items():
        print(f"all_runs.csv {key}: {value}")


if __name__ == "__main__":
    main()
