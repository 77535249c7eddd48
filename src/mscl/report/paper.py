"""The numbers the paper prints, as data (`paper_results.csv`, packaged with mscl).

One row per printed cell: `cell` (identifier `table/dataset/encoder_role/method/metric`,
`-` for an empty part), `table` (the paper's table label without `tab:`), `dataset`,
`encoder_role`, `method` (loss key, or a published model's name in `mimic-sota`), `metric`
(`mscl.metrics` key; `train/val/test/labels/avg` in `statistics`) and `value` as printed, in
percent. Cells printed as `-` are absent. Statistics counts are plain numbers: "82.0k" is
82000 and "47,723" is 47723.
"""

from __future__ import annotations

import functools
from importlib import resources

import pandas as pd

RESULT_TABLES = ("results-image", "results-text", "mimic-sota", "ablation", "results-mimic-full", "results-mimic-50")
PAPER_TABLES = (*RESULT_TABLES, "statistics")
# mimic-sota rows below the rule: they use DRG/CPT codes and medications annotated by coders,
# so the paper lists them "for reference" only and does not bold them.
NOT_STRICTLY_COMPARABLE = ("MRR", "AKIL")
COLUMNS = ("cell", "table", "dataset", "encoder_role", "method", "metric", "value")


def cell_id(table: str, dataset: str, encoder_role: str, method: str, metric: str) -> str:
    """The identifier of a paper cell, e.g. 'results-image/coco/resnet/simdissim/micro_f1'."""
    return "/".join(part or "-" for part in (table, dataset, encoder_role, method, metric))


@functools.cache
def _packaged_results() -> pd.DataFrame:
    with resources.files("mscl.report").joinpath("paper_results.csv").open("r", encoding="utf-8") as handle:
        frame = pd.read_csv(handle, dtype={c: str for c in COLUMNS if c != "value"}, keep_default_na=False)
    frame["value"] = frame["value"].astype(float)
    return frame


def paper_results(table: str | None = None) -> pd.DataFrame:
    """All printed cells (a copy), in the paper's row order; only one table's if `table` is given."""
    frame = _packaged_results()
    if table is not None:
        if table not in PAPER_TABLES:
            raise ValueError(f"unknown paper table {table!r}; choose one of {list(PAPER_TABLES)}")
        frame = frame[frame["table"] == table]
    return frame.reset_index(drop=True).copy()


def published_models() -> list[str]:
    """The published (non-loss) models of the SOTA table, in the paper's row order."""
    sota = paper_results("mimic-sota")
    return list(dict.fromkeys(sota.loc[sota["encoder_role"] == "", "method"]))
