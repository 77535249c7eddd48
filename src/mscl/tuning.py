"""Equal tuning per method: the grid's settings, their names, and the choice on val.

    python -m mscl select-setting --metrics FILE... --keys KEY... --metric map --out selected.json

The claim check gives every method the same tuning budget (docs/claim-check.md). An encoder's
config block lists one grid per method family (`tune: {contrastive: {...}, bce: {...}}`),
each a mapping of pretrain keys to candidate values. A *setting* is one combination,
named by `setting_name` (keys sorted, `lr0.001-temperature0.1`): the `{setting}` path
component of a tuning run. Every setting runs with every tuning seed (seeds disjoint from the
test seeds), through the same pretrain + probe jobs as a test run.

`select-setting` reads those runs' probe metrics.json and averages `val_best[metric]` over the
tuning seeds per setting; `val_best` is the val split at the probe's val-chosen epoch. It
chooses the setting with the highest mean; ties go to the earlier setting in grid order. The
test split is never read. selected.json records the whole table, with per-seed values, the
seeds and the chosen values (`pretrain`). The test runs read it with `--selected`. The grid
must be complete: every setting needs the same tuning seeds, or the command stops and says
which run is missing.

Standard library only: the workflow imports this module while it builds the DAG.
"""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from mscl.errors import InputError
from mscl.io import read_json, write_json

# Tuning families: which grid of an encoder's `tune` block a method uses.
BCE_FAMILY, CONTRASTIVE_FAMILY = "bce", "contrastive"
# Reference methods whose pretrain job trains nothing (`none`: the encoder as initialised;
# `logreg`: the identity encoder over the inputs), so they have nothing to tune.
UNTRAINED_METHODS = ("none", "logreg")


def family_of(method: str) -> str:
    """The grid a method is tuned on: `bce` its own; every contrastive loss the shared one."""
    return BCE_FAMILY if method == BCE_FAMILY else CONTRASTIVE_FAMILY


def format_value(value: float | int | str) -> str:
    """A value as it appears in a setting name: numbers in shortest %g form (1e-05, 0.001)."""
    return f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def setting_name(values: Mapping[str, Any]) -> str:
    """`lr0.001-temperature0.1`: keys sorted, each followed by its value."""
    return "-".join(f"{key}{format_value(values[key])}" for key in sorted(values))


def grid_settings(grid: Mapping[str, Sequence[Any]]) -> dict[str, dict[str, Any]]:
    """Every combination of a grid, {name: values}, in grid order (keys sorted, each key's
    values in the order given; the last key varies fastest)."""
    keys = sorted(grid)
    settings = {}
    for combination in itertools.product(*(grid[key] for key in keys)):
        values = dict(zip(keys, combination))
        settings[setting_name(values)] = values
    return settings


# ---------------------------------------------------------------------------- selection


def read_tuning_run(path: Path, keys: Sequence[str], metric: str) -> dict[str, Any]:
    """One tuning run's probe metrics.json: its axes, its values of the tuned keys and its val metric."""
    document = read_json(path, "metrics file", "run this tuning run's probe job first", "rerun this tuning run's probe job")
    spec, val = document.get("spec") or {}, document.get("val_best") or {}
    pretrain = spec.get("pretrain") or {}
    missing = [key for key in keys if key not in pretrain]
    if missing:
        raise InputError(path, f"the run spec has no pretrain value for {missing}", "pass --keys naming the grid's pretrain keys", field="spec.pretrain")
    value = val.get(metric)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise InputError(path, f"val_best has no finite {metric!r}", "rerun the probe, or select on a metric it records", field=f"val_best.{metric}")
    return {
        "dataset": spec.get("dataset"), "encoder_name": spec.get("encoder_name"), "method": spec.get("loss"),
        "batch_size": spec.get("batch_size"), "seed": spec.get("seed"),
        "values": {key: pretrain[key] for key in sorted(keys)}, "value": float(value),
    }  # fmt: skip


def select_setting(paths: Sequence[Path], keys: Sequence[str], metric: str) -> dict[str, Any]:
    """The selection document (module docstring) of one method's tuning runs, in the order given."""
    if not paths:
        raise InputError(None, "no tuning runs given", "pass every tuning run's probe metrics.json with --metrics", field="--metrics")
    runs = [read_tuning_run(Path(path), keys, metric) for path in paths]
    axes = {(run["dataset"], run["encoder_name"], run["method"], run["batch_size"]) for run in runs}
    if len(axes) != 1:
        raise InputError(None, f"the runs mix several (dataset, encoder, method, batch size): {sorted(map(str, axes))}", "select one method's grid at a time", field="--metrics")
    table: dict[str, dict[str, Any]] = {}
    for run in runs:
        entry = table.setdefault(setting_name(run["values"]), {"values": run["values"], "per_seed": {}})
        if str(run["seed"]) in entry["per_seed"]:
            raise InputError(None, f"setting {setting_name(run['values'])} seed {run['seed']} appears twice", "pass each tuning run once", field="--metrics")
        entry["per_seed"][str(run["seed"])] = run["value"]
    seed_sets = {name: sorted(entry["per_seed"], key=int) for name, entry in table.items()}
    expected = max(seed_sets.values(), key=len)
    for name, seeds in seed_sets.items():
        if seeds != expected:
            raise InputError(None, f"setting {name} has tuning seeds {seeds}, others have {expected}", "run the missing tuning runs (every setting needs every tuning seed)", field="--metrics")
    for entry in table.values():
        entry["mean"] = sum(entry["per_seed"].values()) / len(entry["per_seed"])
    chosen = max(table, key=lambda name: (table[name]["mean"], -list(table).index(name)))
    dataset, encoder_name, method, batch_size = axes.pop()
    return {
        "dataset": dataset, "encoder_name": encoder_name, "method": method, "batch_size": batch_size,
        "metric": metric, "split": "val", "seeds": [int(s) for s in expected],
        "grid": [{"setting": name, **entry} for name, entry in table.items()],
        "chosen": chosen, "pretrain": dict(table[chosen]["values"]),
    }  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    from mscl import cli

    args = cli.parse_args("select-setting", argv)
    document = select_setting(args.metrics, args.keys, args.metric)
    write_json(args.out, document)
    best = next(entry for entry in document["grid"] if entry["setting"] == document["chosen"])
    print(
        f"select-setting: {document['dataset']} / {document['method']}: chose {document['chosen']} "
        f"(mean val {args.metric} {best['mean']:.4f} over seeds {document['seeds']}; {len(document['grid'])} settings)",
        file=sys.stderr,
    )
    return 0
