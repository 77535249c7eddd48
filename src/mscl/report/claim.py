"""The claim check's statistics and report, from its data files (`python -m mscl claim-report`).

    python -m mscl claim-report --data-dir DIR --out-dir DIR [--figures-dir DIR]
        [--docs docs/claim-check.md README.md [--check]] [--reference simdissim] [--alpha 0.05] [--margin 0.01]

Reads the files of `python -m mscl claim-export` (runs.csv, batch_size.csv, buckets.csv,
convergence.csv, tuning.csv; fractions) and computes every comparison the protocol names
(docs/claim-check.md, "Protocol"). Each comparison is the reference method (Sim-Dissim) minus
another method on one dataset and one test metric, paired by seed:

- n pairs, the mean difference d and its sample sd; the 95% confidence interval (Student t,
  n - 1 df); p = the two-sided paired t-test (scipy.stats.ttest_rel);
- p_holm: Holm's step-down adjustment (statsmodels multipletests) within the comparison's
  family, one family per metric. The families are fixed in advance: `primary` (3 datasets x
  ALL, ANY, MulSupCon = 9), `ablation` (x Sim only, Dissim only), `reference` (x no
  pretraining, supervised BCE, logistic regression on inputs); the batch-size and long-tail
  claims have families of their own;
- p_tost: the two one-sided tests of equivalence within +-margin (statsmodels ttost_paired;
  margin 1 point, declared in advance), Holm-adjusted in the same family (p_tost_holm);
- mde80: the smallest |difference| a paired t-test at the family's strictest Holm level
  (alpha / family size) detects with 80% power, given n and the observed sd (statsmodels
  TTestPower);
- verdict: "better" / "worse" when p_holm < alpha (by the sign of d); else "equivalent within
  +-m points" when p_tost_holm < alpha; else "inconclusive". Never "tie". The verdict rule is the
  declared one (the t-test); the outcome names each verdict that the same rule with a rank or
  permutation p in place of the t-test's would change, and each significant difference whose CI
  reaches inside the margin.

The schedule check (Amendments 2, 4 and 5; schedule.csv, schedule_convergence.csv) repeats the primary
comparisons of the datasets it reran at a longer schedule (family `schedule`, Holm per dataset
and metric) and measures each rerun method's paired test-mAP gain from doubling (family
`doubling`); a primary verdict that differs there is named in the headline.

Outputs in --out-dir: tests.csv (the comparisons above), batch_size_tests.csv,
long_tail_tests.csv, schedule_tests.csv, claim_report.md (every generated section, for the
Snakemake report) and the figures claim_differences, claim_convergence, claim_batch_size,
claim_long_tail and claim_schedule (png + pdf, into --figures-dir when given).
`--docs FILE...` rewrites the generated blocks of those files, each between `<!-- claim-report:NAME -->` and `<!-- /claim-report:NAME -->`. With
`--check` it only compares them and exits 1 when a block differs; the test suite runs this
against the committed data. So every number in the claim's prose comes from this code.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from mscl import cli
from mscl.errors import InputError
from mscl.io import write_text
from mscl.layout import CLAIM_DATA_FILES, CLAIM_FIGURE_NAMES
from mscl.report.claim_data import RUNS_COLUMNS, SCHEDULE_COLUMNS, SCHEDULE_CONVERGENCE_COLUMNS
from mscl.report.style import COLUMN_WIDTH_IN, FULL_WIDTH_IN, dataset_name, method_colour, method_name, metric_name

PRIMARY_RIVALS = ("all", "any", "mulsupcon")
ABLATIONS = ("sim", "dissim")
REFERENCE_METHODS = ("none", "bce", "logreg")
FAMILIES = {"primary": PRIMARY_RIVALS, "ablation": ABLATIONS, "reference": REFERENCE_METHODS}
METRICS = ("map", "micro_f1", "macro_f1", "macro_auc")  # map first: the headline metric
HEADLINE = "map"
POWER = 0.8
CONFIDENCE = 0.95
BETTER, WORSE, INCONCLUSIVE = "better", "worse", "inconclusive"
TEST_COLUMNS = (
    "dataset", "comparison", "metric", "family", "n", "mean_diff", "sd_diff", "ci_low", "ci_high", "p", "p_holm",
    "p_wilcoxon", "p_wilcoxon_holm", "p_permutation", "p_permutation_holm",
    "holm_family_size", "margin", "p_tost", "p_tost_holm", "mde80", "verdict",
)  # fmt: skip
# The tests that assume no normality, beside the t-test: their Holm-adjusted p column and name.
RANK_TESTS = {"p_wilcoxon_holm": "Wilcoxon", "p_permutation_holm": "permutation"}
# The schedule check's files (Amendments 2 and 4): absent from data exported before it, read as empty.
OPTIONAL_DATA_FILES = {"schedule.csv": SCHEDULE_COLUMNS, "schedule_convergence.csv": SCHEDULE_CONVERGENCE_COLUMNS}
SCHEDULE_TEST_COLUMNS = ("dataset", "encoder", "epochs", *TEST_COLUMNS[1:])
BLOCK = re.compile(r"(<!-- claim-report:(?P<name>[a-z_]+) -->\n)(?P<body>.*?)(<!-- /claim-report:(?P=name) -->)", re.DOTALL)


def equivalent(margin: float) -> str:
    return f"equivalent within ±{margin * 100:g} point{'s' if margin * 100 != 1 else ''}"


# -------------------------------------------------------------------------- statistics


def rank_and_permutation_p(d: np.ndarray) -> tuple[float, float]:
    """Two-sided p of the Wilcoxon signed-rank test and of the exact paired-permutation test
    (the mean difference against all 2^n sign flips) of differences `d` (n >= 2)."""
    if not d.any():  # no difference at all (scipy's Wilcoxon warns on it): every flip is the same
        return 1.0, 1.0
    permutation = stats.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=np.inf, vectorized=True)
    return float(stats.wilcoxon(d).pvalue), float(permutation.pvalue)


def paired_statistics(differences: Sequence[float], margin: float) -> dict[str, float]:
    """n, mean, sd, 95% CI, two-sided paired t, Wilcoxon and permutation p and TOST p of paired
    differences (fractions)."""
    from statsmodels.stats.weightstats import ttost_paired

    d = np.asarray(differences, dtype=np.float64)
    n = int(d.size)
    out = dict(n=n, mean_diff=math.nan, sd_diff=math.nan, ci_low=math.nan, ci_high=math.nan, p=math.nan, p_tost=math.nan, p_wilcoxon=math.nan, p_permutation=math.nan)
    if n == 0:
        return out
    out["mean_diff"] = mean = float(d.mean())
    if n < 2:
        return out
    out["p_wilcoxon"], out["p_permutation"] = rank_and_permutation_p(d)
    out["sd_diff"] = sd = float(d.std(ddof=1))
    if sd == 0:  # identical differences: no spread to test against
        out.update(ci_low=mean, ci_high=mean, p=1.0 if mean == 0 else 0.0, p_tost=0.0 if abs(mean) < margin else 1.0)
        return out
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1)) * sd / math.sqrt(n)
    out.update(ci_low=mean - half, ci_high=mean + half)
    out["p"] = float(stats.ttest_1samp(d, 0.0).pvalue)  # = ttest_rel(reference, other)
    out["p_tost"] = float(ttost_paired(d, np.zeros_like(d), -margin, margin)[0])
    return out


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm-adjusted p (statsmodels); NaN entries stay NaN and are not counted.

    statsmodels' Holm branch ends with a full `gc.collect()`, which costs a tenth of a second
    in a process that holds pandas, scipy and matplotlib, at every one of the report's ~90
    calls. The objects alive before the call are frozen for its duration (`gc.freeze`), so
    that collection looks only at the call's own; they are unfrozen right after."""
    import gc

    from statsmodels.stats.multitest import multipletests

    p = np.asarray(pvalues, dtype=np.float64)
    adjusted = np.full(p.shape, math.nan)
    finite = np.isfinite(p)
    if finite.any():
        gc.freeze()
        try:
            adjusted[finite] = multipletests(p[finite], method="holm")[1]
        finally:
            gc.unfreeze()
    return adjusted


def minimum_detectable_difference(n: int, sd: float, alpha: float, power: float = POWER) -> float:
    """Smallest |mean difference| a two-sided paired t-test at `alpha` detects with `power`."""
    from statsmodels.stats.power import TTestPower

    if n < 2 or not math.isfinite(sd):
        return math.nan
    if sd == 0:
        return 0.0
    return float(TTestPower().solve_power(nobs=n, alpha=alpha, power=power, alternative="two-sided")) * sd


def verdict(mean_diff: float, p_holm: float, p_tost_holm: float, alpha: float, margin: float) -> str:
    if not math.isfinite(p_holm):
        return "too few seeds"
    if p_holm < alpha:
        return BETTER if mean_diff > 0 else WORSE
    if math.isfinite(p_tost_holm) and p_tost_holm < alpha:
        return equivalent(margin)
    return INCONCLUSIVE


def adjust_families(frame: pd.DataFrame, alpha: float, margin: float, family_keys: Sequence[str]) -> pd.DataFrame:
    """Holm (t-test, rank, permutation and TOST p), family size, mde80 and verdict per family =
    `family_keys` values."""
    frame = frame.copy()
    adjusted = {"p_holm": "p", "p_wilcoxon_holm": "p_wilcoxon", "p_permutation_holm": "p_permutation", "p_tost_holm": "p_tost"}
    for column in (*adjusted, "mde80"):
        frame[column] = math.nan
    frame["holm_family_size"] = 0
    for _, family in frame.groupby(list(family_keys), sort=False):
        index = family.index
        size = int(np.isfinite(frame.loc[index, "p"].to_numpy(dtype=float)).sum())
        for column, raw in adjusted.items():
            frame.loc[index, column] = holm(frame.loc[index, raw].to_numpy(dtype=float))
        frame.loc[index, "holm_family_size"] = size
        frame.loc[index, "mde80"] = [minimum_detectable_difference(int(r.n), r.sd_diff, alpha / max(size, 1)) for r in frame.loc[index].itertuples()]
    frame["margin"] = margin
    frame["verdict"] = [verdict(r.mean_diff, r.p_holm, r.p_tost_holm, alpha, margin) for r in frame.itertuples()]
    return frame


# ------------------------------------------------------------------------------- data


def read_claim_csv(path: Path, fix: str, columns: Sequence[str] = ()) -> pd.DataFrame:
    """One claim CSV; InputError naming the file when it is missing, unreadable or lacks one of
    `columns`, with `fix` as the remedy."""
    try:
        frame = pd.read_csv(path)
    except FileNotFoundError:
        raise InputError(path, "claim data file not found", fix) from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as error:
        raise InputError(path, f"not a readable CSV ({error})", fix) from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(path, f"columns {missing} are missing", fix, field=missing[0])
    return frame


def load_data(data_dir: Path) -> dict[str, pd.DataFrame]:
    """The claim-export files as frames; InputError naming a missing or malformed one."""
    fix = "run `python -m mscl claim-export` (the claim DAG writes it)"
    frames = {}
    for name in CLAIM_DATA_FILES:
        path = Path(data_dir) / name
        if name in OPTIONAL_DATA_FILES and not path.exists():  # data exported before the schedule check existed
            frames[name.removesuffix(".csv")] = pd.DataFrame(columns=list(OPTIONAL_DATA_FILES[name]))
            continue
        frames[name.removesuffix(".csv")] = read_claim_csv(path, fix, RUNS_COLUMNS if name == "runs.csv" else ())
    return frames


def datasets_of(runs: pd.DataFrame) -> list[str]:
    """Datasets in report order: yeast, fashion_mnist, debtags, then any other alphabetically."""
    order = ("yeast", "fashion_mnist", "debtags")
    present = set(runs["dataset"])
    return [d for d in order if d in present] + sorted(present - set(order))


def seed_values(frame: pd.DataFrame, dataset: str, method: str, metric: str, split: str = "test", **where: Any) -> pd.Series:
    rows = frame[(frame["dataset"] == dataset) & (frame["method"] == method) & (frame["split"] == split)]
    for column, value in where.items():
        rows = rows[rows[column] == value]
    return rows.set_index("seed")[metric].dropna()


def paired(frame: pd.DataFrame, dataset: str, reference: str, other: str, metric: str, split: str = "test", **where: Any) -> pd.Series:
    """reference - other per common seed."""
    ours, theirs = seed_values(frame, dataset, reference, metric, split, **where), seed_values(frame, dataset, other, metric, split, **where)
    common = ours.index.intersection(theirs.index).sort_values()
    return ours[common] - theirs[common]


# ------------------------------------------------------------------------- comparisons


def comparison_tests(runs: pd.DataFrame, reference: str, alpha: float, margin: float) -> pd.DataFrame:
    """tests.csv: every family's comparisons on every metric, Holm per (family, metric)."""
    rows = []
    for family, rivals in FAMILIES.items():
        for metric in METRICS:
            for dataset in datasets_of(runs):
                for rival in rivals:
                    d = paired(runs, dataset, reference, rival, metric)
                    if d.empty:
                        continue
                    rows.append({"dataset": dataset, "comparison": rival, "metric": metric, "family": family, **paired_statistics(d.to_numpy(), margin)})
    frame = pd.DataFrame(rows)
    if frame.empty:
        raise InputError(None, f"no seed has results for {method_name(reference)} and another method", "run the claim DAG (or pass --reference)", field="method")
    return adjust_families(frame, alpha, margin, ["family", "metric"])[list(TEST_COLUMNS)]


def batch_size_tests(batch: pd.DataFrame, reference: str, alpha: float, margin: float) -> pd.DataFrame:
    """The batch-size claim: reference minus each primary rival at every batch size (test mAP,
    micro- and macro-F1), Holm per metric over batch sizes x rivals."""
    rows = []
    for dataset in datasets_of(batch):
        sizes = sorted(batch.loc[batch["dataset"] == dataset, "batch_size"].unique())
        if len(sizes) < 2:
            continue
        for metric in METRICS[:3]:
            for size in sizes:
                for rival in PRIMARY_RIVALS:
                    d = paired(batch, dataset, reference, rival, metric, batch_size=size)
                    if not d.empty:
                        rows.append({"dataset": dataset, "batch_size": int(size), "comparison": rival, "metric": metric, "family": "batch_size", **paired_statistics(d.to_numpy(), margin)})
    frame = pd.DataFrame(rows)
    return adjust_families(frame, alpha, margin, ["dataset", "metric"]) if not frame.empty else frame


def long_tail_tests(buckets: pd.DataFrame, reference: str, alpha: float, margin: float) -> pd.DataFrame:
    """The long-tail claim: does the reference gain more over each primary rival on tail labels
    than on head labels? Per seed (tail gain - head gain) in bucket macro-F1 (the paper's bucket
    metric) and mAP; Holm per metric over datasets x rivals."""
    rows = []
    for metric in ("macro_f1", "map"):
        for dataset in datasets_of(buckets):
            for rival in PRIMARY_RIVALS:
                gains = {}
                for bucket in ("head", "tail"):
                    frame = buckets[buckets["bucket"] == bucket].assign(split="test")
                    gains[bucket] = paired(frame, dataset, reference, rival, metric)
                common = gains["head"].index.intersection(gains["tail"].index)
                if common.empty:
                    continue
                excess = gains["tail"][common] - gains["head"][common]
                row = {"dataset": dataset, "comparison": rival, "metric": metric, "family": "long_tail",
                       "head_gain": float(gains["head"][common].mean()), "tail_gain": float(gains["tail"][common].mean())}  # fmt: skip
                rows.append(row | paired_statistics(excess.to_numpy(), margin))
    frame = pd.DataFrame(rows)
    return adjust_families(frame, alpha, margin, ["metric"]) if not frame.empty else frame


def eq12_identity(runs: pd.DataFrame) -> list[dict[str, Any]]:
    """Per dataset with Eq. 12 runs: seeds x splits x metrics compared with ANY, and the largest |difference|."""
    out = []
    for dataset in datasets_of(runs):
        largest, compared = 0.0, 0
        for split in ("val", "test"):
            for metric in METRICS:
                d = paired(runs, dataset, "eq12", "any", metric, split)
                if not d.empty:
                    largest, compared = max(largest, float(d.abs().max())), compared + d.size
        if compared:
            seeds = int(len(seed_values(runs, dataset, "eq12", METRICS[0])))
            out.append({"dataset": dataset, "seeds": seeds, "values": compared, "max_abs_diff": largest})
    return out


def bce_check(runs: pd.DataFrame, margin: float) -> list[dict[str, Any]]:
    """The setup check: supervised BCE against logistic regression on the inputs, per dataset (test mAP)."""
    out = []
    for dataset in datasets_of(runs):
        d = paired(runs, dataset, "bce", "logreg", HEADLINE)
        if not d.empty:
            out.append({"dataset": dataset, **paired_statistics(d.to_numpy(), margin), "passes": bool(d.mean() >= 0)})
    return out


def schedule_tests(runs: pd.DataFrame, schedule: pd.DataFrame, reference: str, alpha: float, margin: float) -> pd.DataFrame:
    """The schedule check (docs/claim-check.md, Amendments 2 and 4), per dataset x longer-schedule encoder:

    - family `schedule`: the reference minus each primary rival at the longer schedule, every
      metric, paired by seed; Holm per (dataset, metric) over the rivals (3);
    - family `doubling`: each method at the longer schedule minus itself at the main schedule
      (runs.csv), test mAP, paired by seed; Holm per dataset over the methods.
    """
    rows = []
    for (dataset, encoder), block in schedule.groupby(["dataset", "encoder"], sort=False):
        where = {"dataset": dataset, "encoder": encoder, "epochs": int(block["epochs"].iloc[0])}
        for metric in METRICS:
            for rival in PRIMARY_RIVALS:
                d = paired(block, dataset, reference, rival, metric)
                if not d.empty:
                    rows.append({**where, "comparison": rival, "metric": metric, "family": "schedule", **paired_statistics(d.to_numpy(), margin)})
        for method in block["method"].unique():
            longer, main = seed_values(block, dataset, method, HEADLINE), seed_values(runs, dataset, method, HEADLINE)
            common = longer.index.intersection(main.index).sort_values()
            if not common.empty:
                rows.append({**where, "comparison": method, "metric": HEADLINE, "family": "doubling", **paired_statistics((longer[common] - main[common]).to_numpy(), margin)})
    frame = pd.DataFrame(rows)
    if frame.empty:
        return pd.DataFrame(columns=list(SCHEDULE_TEST_COLUMNS))
    return adjust_families(frame, alpha, margin, ["family", "dataset", "encoder", "metric"])[list(SCHEDULE_TEST_COLUMNS)]


def schedule_plateau(convergence: pd.DataFrame) -> pd.DataFrame:
    """plateau_frame of every longer-schedule encoder's monitor checks, with its encoder."""
    parts = [plateau_frame(block).assign(encoder=encoder) for encoder, block in convergence.groupby("encoder", sort=False)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["dataset", "method", "encoder", "epochs", "final", "gain_last_third", "seeds"])


def changed_verdicts(tests: pd.DataFrame, checks: pd.DataFrame) -> list[tuple[str, str, str, str, int]]:
    """(dataset, rival, verdict at the main schedule, at the longer one, its epochs) for every
    test-mAP comparison of the schedule check whose verdict differs from the primary one."""
    changed = []
    for r in checks[(checks["family"] == "schedule") & (checks["metric"] == HEADLINE)].itertuples():
        main = tests[(tests["family"] == "primary") & (tests["metric"] == HEADLINE) & (tests["dataset"] == r.dataset) & (tests["comparison"] == r.comparison)]
        if not main.empty and main["verdict"].iloc[0] != r.verdict:
            changed.append((r.dataset, r.comparison, main["verdict"].iloc[0], r.verdict, int(r.epochs)))
    return changed


# --------------------------------------------------------------------------- rendering


def points(value: float, decimals: int = 1, signed: bool = False) -> str:
    """A fraction as percentage points; never "-0.0"."""
    if not math.isfinite(value):
        return "n/a"
    shown = round(value * 100, decimals) + 0.0
    return f"{shown:+.{decimals}f}" if signed else f"{shown:.{decimals}f}"


def format_p(p: float) -> str:
    if not math.isfinite(p):
        return "n/a"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], aligns: str) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(":---" if a == "l" else "---:" for a in aligns) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows]) + "\n"


def difference_cell(row: Any) -> str:
    return f"{points(row.mean_diff, 2, True)} [{points(row.ci_low, 2, True)}, {points(row.ci_high, 2, True)}]"


def comparisons_table(tests: pd.DataFrame, metrics: Sequence[str]) -> str:
    """One row per dataset x comparison; per metric the difference [CI], Holm p and verdict."""
    headers = ["Dataset", "Sim-Dissim minus"] + [f"{metric_name(m)}: Δ [95% CI], Holm p, verdict" for m in metrics]
    rows = []
    for (dataset, comparison), block in tests.groupby(["dataset", "comparison"], sort=False):
        cells = [dataset_name(dataset), method_name(comparison)]
        for metric in metrics:
            match = block[block["metric"] == metric]
            if match.empty:
                cells.append("n/a")
                continue
            r = next(match.itertuples())
            cells.append(f"{difference_cell(r)}, {format_p(r.p_holm)}, {r.verdict}")
        rows.append(cells)
    return table(headers, rows, "ll" + "l" * len(metrics))


def summary_table(runs: pd.DataFrame) -> str:
    """Mean ± sd (n) of every test metric per dataset and method."""
    from mscl.report.style import ALL_METHOD_ORDER

    rows = []
    test = runs[runs["split"] == "test"]
    for dataset in datasets_of(runs):
        methods = sorted(test.loc[test["dataset"] == dataset, "method"].unique(), key=lambda m: ALL_METHOD_ORDER.index(m) if m in ALL_METHOD_ORDER else 99)
        for method in methods:
            block = test[(test["dataset"] == dataset) & (test["method"] == method)]
            cells = [dataset_name(dataset), method_name(method), str(block["seed"].nunique())]
            for metric in METRICS:
                values = block[metric].dropna().to_numpy(dtype=float)
                cells.append(f"{points(values.mean())} ± {points(values.std(ddof=1))}" if values.size > 1 else points(values.mean()) if values.size else "n/a")
            rows.append(cells)
    return table(["Dataset", "Method", "Seeds", *(metric_name(m) for m in METRICS)], rows, "llr" + "r" * len(METRICS))


def tuning_table(tuning: pd.DataFrame) -> str:
    """The chosen setting per dataset and tuned method, with its mean val metric and the grid's range."""
    rows = []
    for (dataset, method, batch), block in tuning.groupby(["dataset", "method", "batch_size"], sort=False):
        means = block.groupby("setting", sort=False)["value"].mean()
        chosen = block.loc[block["chosen"].astype(str) == "True", "setting"].iloc[0]
        metric = block["metric"].iloc[0]
        rows.append([dataset_name(dataset), method_name(method), str(int(batch)), f"`{chosen}`", f"{points(means[chosen])}", f"{points(means.min())}–{points(means.max())}", str(len(means)), str(block["seed"].nunique())])
    return table(["Dataset", "Method", "Batch", "Chosen setting", f"Val {metric_name(metric)} (chosen)", "Val range over grid", "Settings", "Tuning seeds"], rows, "llrlrrrr")


def plateau_frame(convergence: pd.DataFrame) -> pd.DataFrame:
    """Per dataset x method: the mean readout at the last check and at the check nearest 2/3 of
    the schedule, and the gain between them (the plateau criterion, docs/claim-check.md)."""
    rows = []
    for (dataset, method), block in convergence.groupby(["dataset", "method"], sort=False):
        curve = block.groupby("epoch")["val_map_readout"].mean()
        last = int(curve.index.max())
        two_thirds = int(curve.index[np.abs(curve.index - 2 * last / 3).argmin()])
        rows.append({"dataset": dataset, "method": method, "epochs": last, "at_two_thirds": float(curve[two_thirds]), "two_thirds_epoch": two_thirds, "final": float(curve[last]), "best": float(curve.max()), "gain_last_third": float(curve[last] - curve[two_thirds]), "seeds": int(block["seed"].nunique())})
    return pd.DataFrame(rows)


def convergence_table(plateau: pd.DataFrame) -> str:
    rows = [
        [dataset_name(r.dataset), method_name(r.method), str(r.epochs), f"{points(r.at_two_thirds)} (epoch {r.two_thirds_epoch})", points(r.final), points(r.gain_last_third, 2, True), str(r.seeds)]
        for r in plateau.itertuples()
    ]
    return table(["Dataset", "Method", "Epochs", "Readout at 2/3", "Readout at end", "Gain over last third", "Seeds"], rows, "llrrrrr")


def holm_scope(frame: pd.DataFrame) -> str:
    """Which Holm correction the rows of `frame` (one metric) had: "Holm over 12" when they are
    one family, "Holm within each dataset, over its 3" when each dataset is a family of its own
    (the schedule check of several datasets), "one comparison per dataset, so no Holm correction"."""
    sizes = sorted({int(size) for size in frame["holm_family_size"]})
    if sizes == [len(frame)]:
        return f"Holm over {len(frame)}"
    if sizes == [1]:
        return "one comparison per dataset, so no Holm correction"
    return f"Holm within each dataset, over its {' or '.join(str(size) for size in sizes)}"


def count_verdicts(frame: pd.DataFrame, margin: float) -> str:
    labels = (BETTER, WORSE, equivalent(margin), INCONCLUSIVE)
    counts = {label: int((frame["verdict"] == label).sum()) for label in labels}
    return ", ".join(f"{label} {counts[label]}" for label in labels)


def headline_sentence(tests: pd.DataFrame, margin: float, changed: Sequence[tuple[str, str, str, str, int]] = ()) -> str:
    primary = tests[(tests["family"] == "primary") & (tests["metric"] == HEADLINE)]
    better = int((primary["verdict"] == BETTER).sum())
    consistent = better == len(primary) and len(primary) > 0
    detail = "; ".join(
        f"{dataset_name(d)}: " + ", ".join(f"vs {method_name(r.comparison)} {points(r.mean_diff, 2, True)} ({r.verdict})" for r in block.itertuples())
        for d, block in primary.groupby("dataset", sort=False)
    )
    depends = "".join(
        f" The verdict on {dataset_name(d)} vs {method_name(rival)} depends on the schedule: {main} at the main schedule, {longer} at {epochs} epochs (schedule check)."
        for d, rival, main, longer, epochs in changed
    )
    return (
        f"**Headline (test mAP, {len(primary)} primary comparisons, Holm).** Sim-Dissim {'does' if consistent else 'does not'} "
        f"consistently outperform ALL, ANY and MulSupCon on these data: {count_verdicts(primary, margin)}. {detail}.{depends}"
    )


def batch_sentence(batch_tests: pd.DataFrame, margin: float) -> str:
    if batch_tests.empty:
        return "**Batch size.** Not run in this configuration."
    frame = batch_tests[batch_tests["metric"] == HEADLINE]
    sizes = ", ".join(str(s) for s in sorted(frame["batch_size"].unique()))
    per_size = "; ".join(
        f"{size}: " + ", ".join(f"vs {method_name(r.comparison)} {points(r.mean_diff, 2, True)} ({r.verdict})" for r in block.itertuples())
        for size, block in frame.groupby("batch_size")
    )
    datasets = ", ".join(dataset_name(d) for d in frame["dataset"].unique())
    robust = (frame["verdict"] == BETTER).all()
    return (
        f"**Batch size ({datasets}; {sizes}; test mAP, {holm_scope(frame)}).** Sim-Dissim "
        f"{'is better than every rival at every batch size' if robust else 'is not better than every rival at every batch size'}: "
        f"{count_verdicts(frame, margin)}. {per_size}."
    )


def long_tail_sentence(tail_tests: pd.DataFrame, margin: float) -> str:
    if tail_tests.empty:
        return "**Long tail.** No bucket data."
    frame = tail_tests[tail_tests["metric"] == "macro_f1"]
    larger = int((frame["verdict"] == BETTER).sum())
    detail = "; ".join(
        f"{dataset_name(r.dataset)} vs {method_name(r.comparison)}: head {points(r.head_gain, 2, True)}, tail {points(r.tail_gain, 2, True)} ({r.verdict})"
        for r in frame.itertuples()
    )
    return (
        f"**Long tail (macro-F1 gain on tail labels minus gain on head labels, {len(frame)} comparisons, Holm).** "
        f"Sim-Dissim gains significantly more on tail labels in {larger} of {len(frame)}: {count_verdicts(frame, margin)}. {detail}."
    )


def ablation_sentence(tests: pd.DataFrame, margin: float) -> str:
    frame = tests[(tests["family"] == "ablation") & (tests["metric"] == HEADLINE)]
    if frame.empty:
        return "**Ablation.** Not run."
    detail = "; ".join(f"{dataset_name(r.dataset)} vs {method_name(r.comparison)} {points(r.mean_diff, 2, True)} ({r.verdict})" for r in frame.itertuples())
    return f"**Ablation (test mAP, Sim-Dissim minus Sim only / Dissim only, Holm over {len(frame)}).** {count_verdicts(frame, margin)}. {detail}."


def verdict_frame(tests: pd.DataFrame, batch_tests: pd.DataFrame, tail_tests: pd.DataFrame, checks: pd.DataFrame) -> pd.DataFrame:
    """Every verdict of the statistics files, one row each, with a `label` that names it (dataset,
    rival, family context, metric) and `stated`: whether the outcome states it (the primary and
    ablation families, the batch sizes and the schedule check on test mAP, the long tail on
    macro-F1), or it stands only in a table of another metric."""
    where = {"primary": "", "ablation": "ablation", "reference": "reference"}
    parts = [
        tests.assign(context=tests["family"].map(where), stated=tests["family"].isin(["primary", "ablation"]) & (tests["metric"] == HEADLINE)),
        tail_tests.assign(context="long tail", stated=tail_tests["metric"] == "macro_f1") if not tail_tests.empty else None,
        batch_tests.assign(context="batch " + batch_tests["batch_size"].astype(str), stated=batch_tests["metric"] == HEADLINE) if not batch_tests.empty else None,
    ]  # fmt: skip
    rivals = checks[checks["family"] == "schedule"] if not checks.empty else checks
    if not rivals.empty:
        parts.append(rivals.assign(context=rivals["epochs"].astype(int).astype(str) + " epochs", stated=rivals["metric"] == HEADLINE))
    frame = pd.concat([part for part in parts if part is not None], ignore_index=True)
    frame["label"] = [
        f"{dataset_name(r.dataset)} vs {method_name(r.comparison)} ({', '.join(x for x in (r.context, metric_name(r.metric)) if x)})" for r in frame.itertuples()
    ]  # fmt: skip
    return frame


def robustness_sentence(verdicts: pd.DataFrame, alpha: float, margin: float) -> str:
    """Which verdicts the declared rule would give otherwise with the Wilcoxon or the permutation
    p (Holm-adjusted in the same family) in place of the t-test's; the verdicts stay the t-test's.
    Rows with too few seeds for a rank or sign-flip test to reach alpha at all (its smallest p,
    all n differences of one sign, is 2/2^n: 0.0625 with 5 seeds) are counted apart."""
    smallest = {int(n): min(rank_and_permutation_p(np.arange(1.0, n + 1))) for n in verdicts["n"].unique() if n >= 2}
    few = verdicts["n"].map(lambda n: smallest.get(int(n), math.nan) >= alpha)
    changes = []
    for r in verdicts[~few].itertuples():
        others = {name: verdict(r.mean_diff, getattr(r, column), r.p_tost_holm, alpha, margin) for column, name in RANK_TESTS.items()}
        if any(other != r.verdict for other in others.values()):
            same = len(set(others.values())) == 1
            changes.append((r, f"{next(iter(others.values()))} by both" if same else ", ".join(f"{other} by {name}" for name, other in others.items())))

    def listed(rows: list) -> str:
        return "; ".join(f"{r.label}: {r.verdict} by the t-test, {others}" for r, others in rows) if rows else "none"

    stated = [(r, others) for r, others in changes if r.stated]
    primary = [r for r, _ in stated if r.family == "primary"]
    text = (
        f"**Rank and permutation tests.** With the two-sided Wilcoxon signed-rank or the exact sign-flip permutation p (Holm-adjusted in "
        f"the same families) in place of the t-test's, the declared rule would change {len(stated)} of the verdicts above: {listed(stated)}"
        f"{'' if primary else ' (none in the primary test-mAP family)'}. In the tables of the other metrics it would change "
        f"{len(changes) - len(stated)}: {listed([c for c in changes if not c[0].stated])}."
    )
    for n, block in verdicts[few].groupby("n"):
        significant = block[block["verdict"].isin([BETTER, WORSE])]
        contexts = "; ".join(f"{dataset_name(d)} {', '.join(dict.fromkeys(rows['context']))}" for d, rows in block.groupby("dataset", sort=False))
        text += (
            f" With {int(n)} seeds ({contexts}) no two-sided rank or sign-flip test can reach p < {smallest[int(n)]:.4g}, so the "
            f"better or worse verdicts there ({len(significant)} of {len(block)}, every metric) rest on the t-test alone."
        )
    return text + " The verdicts stay the t-test's, as declared."


def small_gains_sentence(verdicts: pd.DataFrame, margin: float) -> str:
    """The "better" verdicts the outcome states whose 95% CI reaches inside the equivalence
    margin: significant, but a gain smaller than the margin is not ruled out."""
    small = verdicts[verdicts["stated"] & (verdicts["verdict"] == BETTER) & (verdicts["ci_low"] < margin)]
    listed = "; ".join(f"{r.label} {difference_cell(r)}" for r in small.itertuples()) or "none"
    return (
        f"**Small gains.** The \"better\" verdicts above whose 95% CI reaches inside the ±{margin * 100:g} point margin, so that a gain "
        f"smaller than the margin is not ruled out (the verdicts stay as declared): {listed}."
    )


def eq12_sentence(identity: Sequence[Mapping[str, Any]]) -> str:
    if not identity:
        return "**Eq. 12 as printed.** Not run."
    parts = []
    for row in identity:
        same = row["max_abs_diff"] == 0
        parts.append(
            f"{dataset_name(row['dataset'])}: {'identical to' if same else 'different from'} ANY on all {row['seeds']} seeds "
            f"({row['values']} values compared, largest |difference| {row['max_abs_diff']:.3g})"
        )
    return "**Eq. 12 as printed** (run with ANY's chosen setting): " + "; ".join(parts) + "."


def bce_sentence(checks: Sequence[Mapping[str, Any]]) -> str:
    if not checks:
        return "**Setup check.** No logistic-regression runs."
    parts = [f"{dataset_name(c['dataset'])} {points(c['mean_diff'], 2, True)} [{points(c['ci_low'], 2, True)}, {points(c['ci_high'], 2, True)}]" for c in checks]
    failing = [dataset_name(c["dataset"]) for c in checks if not c["passes"]]
    verdict_text = "passes on every dataset" if not failing else f"FAILS on {', '.join(failing)}"
    return f"**Setup check (supervised BCE minus logistic regression on the inputs, test mAP).** The check {verdict_text}: {'; '.join(parts)}."


PLATEAU_GAIN = 0.005  # the protocol's plateau criterion: < 0.5 point of readout gain over the last third


def convergence_sentence(plateau: pd.DataFrame) -> str:
    if plateau.empty:
        return "**Convergence.** No monitor data."
    still_rising = plateau[plateau["gain_last_third"] >= PLATEAU_GAIN]
    largest = plateau.loc[plateau["gain_last_third"].idxmax()]
    if still_rising.empty:
        return (
            f"**Convergence.** Every method plateaued by the protocol's criterion (val readout gain over the last third of "
            f"the schedule < {PLATEAU_GAIN * 100:g} point); the largest gain is {points(largest.gain_last_third, 2, True)} "
            f"({dataset_name(largest.dataset)}, {method_name(largest.method)})."
        )
    names = ", ".join(f"{dataset_name(r.dataset)} {method_name(r.method)} ({points(r.gain_last_third, 2, True)})" for r in still_rising.itertuples())
    return f"**Convergence.** NOT every method plateaued (gain over the last third >= {PLATEAU_GAIN * 100:g} point): {names}."


def schedule_sentence(checks: pd.DataFrame, plateau: pd.DataFrame, changed: Sequence[tuple[str, str, str, str, int]], margin: float) -> str:
    """The schedule check's outcome: plateau at the longer schedule, what it gained, and
    whether the primary verdicts hold there."""
    if checks.empty:
        return "**Schedule check.** No schedule-check runs in these data."
    still = plateau[plateau["gain_last_third"] >= PLATEAU_GAIN]
    if still.empty:
        state = f"every rerun method plateaued by the protocol's criterion (largest gain over the last third {points(plateau['gain_last_third'].max(), 2, True)})"
    else:
        state = "NOT every rerun method plateaued: " + ", ".join(f"{dataset_name(r.dataset)} {method_name(r.method)} ({points(r.gain_last_third, 2, True)})" for r in still.itertuples())
    doubling = checks[checks["family"] == "doubling"]
    gains = "; ".join(
        f"{dataset_name(d)} ({int(block['epochs'].iloc[0])} epochs): " + ", ".join(f"{method_name(r.comparison)} {points(r.mean_diff, 2, True)}" for r in block.itertuples())
        for d, block in doubling.groupby("dataset", sort=False)
    )
    rivals = checks[(checks["family"] == "schedule") & (checks["metric"] == HEADLINE)]
    if rivals.empty:
        held = ""
    else:
        detail = "; ".join(
            f"{dataset_name(d)}: " + ", ".join(f"vs {method_name(r.comparison)} {points(r.mean_diff, 2, True)} ({r.verdict})" for r in block.itertuples())
            for d, block in rivals.groupby("dataset", sort=False)
        )
        if len(rivals) == 1:
            outcome = "its verdict is the one at the main schedule" if not changed else "its verdict differs from the one at the main schedule"
            held = f" Sim-Dissim minus its rival at the longer schedule (test mAP, one comparison, so no Holm correction): {outcome}. {detail}."
        else:
            outcome = "every verdict is the one at the main schedule" if not changed else f"{len(changed)} of {len(rivals)} verdicts differ from those at the main schedule"
            held = f" Sim-Dissim minus each rival at the longer schedule (test mAP, {holm_scope(rivals)}): {count_verdicts(rivals, margin)}; {outcome}. {detail}."
    return (
        f"**Schedule check (longer schedules, each method's setting from the first).** At the longer schedule {state}. "
        f"Test mAP gained by the longer schedule, paired by seed: {gains}.{held}"
    )


def schedule_table(checks: pd.DataFrame, plateau: pd.DataFrame, runs: pd.DataFrame, schedule: pd.DataFrame, main_plateau: pd.DataFrame) -> str:
    """Per rerun method: epochs, end readout and test mAP at both schedules, the longer one's
    gain over its last third, and the paired test-mAP gain from doubling."""
    rows = []
    for r in checks[checks["family"] == "doubling"].itertuples():
        first = main_plateau[(main_plateau["dataset"] == r.dataset) & (main_plateau["method"] == r.comparison)]
        longer = plateau[(plateau["dataset"] == r.dataset) & (plateau["method"] == r.comparison) & (plateau["encoder"] == r.encoder)]
        main_map = seed_values(runs, r.dataset, r.comparison, HEADLINE).mean()
        long_map = seed_values(schedule[schedule["encoder"] == r.encoder], r.dataset, r.comparison, HEADLINE).mean()
        epochs = f"{int(first['epochs'].iloc[0]) if not first.empty else '?'} → {int(r.epochs)}"
        readout = f"{points(first['final'].iloc[0]) if not first.empty else 'n/a'} → {points(longer['final'].iloc[0]) if not longer.empty else 'n/a'}"
        rows.append([
            dataset_name(r.dataset), method_name(r.comparison), epochs, readout,
            points(longer["gain_last_third"].iloc[0], 2, True) if not longer.empty else "n/a",
            f"{points(main_map)} → {points(long_map)}", f"{difference_cell(r)}, p {format_p(r.p)}", str(int(r.n)),
        ])  # fmt: skip
    headers = ["Dataset", "Method", "Epochs", "Val readout at end", "Gain over last third (longer)", "Test mAP", "Test mAP gain from doubling [95% CI]", "Seeds"]
    return table(headers, rows, "llrrrrrr")


def schedule_verdicts_table(tests: pd.DataFrame, checks: pd.DataFrame) -> str:
    """Each primary comparison the schedule check repeats: test mAP at both schedules."""
    rows = []
    for r in checks[(checks["family"] == "schedule") & (checks["metric"] == HEADLINE)].itertuples():
        main = tests[(tests["family"] == "primary") & (tests["metric"] == HEADLINE) & (tests["dataset"] == r.dataset) & (tests["comparison"] == r.comparison)]
        first = next(main.itertuples()) if not main.empty else None
        rows.append([
            f"{dataset_name(r.dataset)} ({int(r.epochs)} epochs)", method_name(r.comparison),
            f"{points(first.mean_diff, 2, True)}, {first.verdict}" if first else "n/a",
            f"{difference_cell(r)}, {format_p(r.p_holm)}, {r.verdict}", "yes" if first and first.verdict == r.verdict else "no",
        ])  # fmt: skip
    return table(["Dataset (longer schedule)", "Sim-Dissim minus", "Test mAP at the main schedule: Δ, verdict", "At the longer schedule: Δ [95% CI], Holm p, verdict", "Same verdict"], rows, "lllll")


def value_agreement(now: pd.DataFrame, then: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """Per dataset (in `now`'s order), over the METRICS values of the rows both frames hold
    (matched on `keys`): how many values, how many identical, and the largest and median
    absolute difference of the others (NaN where none differs)."""
    both = now.merge(then, on=list(keys), suffixes=("", "_then"))
    rows = []
    for dataset, block in both.groupby("dataset", sort=False):
        differences = np.concatenate([(block[m] - block[f"{m}_then"]).abs().to_numpy() for m in METRICS])
        others = differences[differences != 0]
        rows.append({
            "dataset": dataset, "values": len(differences), "identical": len(differences) - len(others),
            "largest": others.max() if len(others) else math.nan, "median": float(np.median(others)) if len(others) else math.nan,
        })  # fmt: skip
    return pd.DataFrame(rows, columns=["dataset", "values", "identical", "largest", "median"])


def previous_sentence(tests: pd.DataFrame, runs: pd.DataFrame, previous: Previous) -> str:
    """What changed against an earlier published data folder: per dataset how many of the test
    and val metric values of the same method x seed are identical (a rerun of unchanged code on
    the same kind of CPU reproduces them exactly) and, where some are not, how far the others
    moved (another CPU's floating point makes the training runs drift apart); and which primary
    test-mAP verdicts differ."""
    agreement = value_agreement(runs, previous.runs, ["dataset", "method", "seed", "split"])
    reruns = "; ".join(
        f"{dataset_name(r.dataset)} {r.identical} of {r.values}"
        + (f" (the others differ by up to {points(r.largest, 2)} points, median {points(r.median, 2)})" if r.identical < r.values else "")
        for r in agreement.itertuples()
    )  # fmt: skip
    verdicts = ["dataset", "comparison", "verdict"]
    now, then = (t[(t["family"] == "primary") & (t["metric"] == HEADLINE)][verdicts] for t in (tests, previous.tests))
    paired = now.merge(then, on=["dataset", "comparison"], suffixes=("", "_previous"))
    changed = paired[paired["verdict"] != paired["verdict_previous"]]
    changes = "; ".join(f"{dataset_name(r.dataset)} vs {method_name(r.comparison)}: {r.verdict_previous} then, {r.verdict} now" for r in changed.itertuples())
    return (
        f"**Against the previous data ({previous.name}, {made_by(previous.runs)}).** Metric values identical to theirs "
        f"(same method, seed and split): {reruns or 'no run in common'}. Primary test-mAP verdicts that differ: "
        f"{f'{len(changed)} of {len(paired)}: {changes}' if len(changed) else f'none of {len(paired)}'}."
    )


def probe_sentence(probes: pd.DataFrame) -> str:
    """The probe's own convergence: runs whose val-chosen epoch is the last one (still improving)."""
    if probes.empty:
        return "**Probe convergence.** No probe data."
    at_last = probes[probes["best_epoch"] >= probes["epochs"]]
    per_dataset = "; ".join(
        f"{dataset_name(d)} {int((block['best_epoch'] >= block['epochs']).sum())} of {len(block)} (median chosen epoch {int(block['best_epoch'].median())} of {int(block['epochs'].max())})"
        for d, block in probes.groupby("dataset", sort=False)
    )
    state = "Every probe stopped improving before its last epoch" if at_last.empty else f"{len(at_last)} of {len(probes)} probes chose their last epoch (still improving)"
    return f"**Probe convergence.** {state}: {per_dataset}."


def cost_block(data_dir: Path) -> str:
    """`python -m mscl bench dag` on the run that made the data (dag_cost.txt; a run resumed in
    segments is named as such, its sum being no timing of the DAG in one piece), and
    `tools/claim_budget_options.py` on the jobs behind the data (budget_options.txt) when
    present, verbatim. The two can differ in their jobs: an amendment's runs added after the
    measured run are priced by the options and absent from the run's breakdown."""
    path = Path(data_dir) / "dag_cost.txt"
    if not path.is_file():
        return "Not measured for these data (no dag_cost.txt).\n"
    text = path.read_text(encoding="utf-8").rstrip()
    segments = re.search(r"^all (\d+) segments:$", text, flags=re.MULTILINE)  # bench dag's sum over several logs
    run = (
        f"the run that made these data, which ran in {segments.group(1)} segments (each segment's table, then their sum; the time between segments is not counted, so this is no timing of the whole DAG in one piece)"
        if segments
        else "the measured run of the whole DAG"
    )
    block = f"`python -m mscl bench dag` on {run}:\n\n```\n{text}\n```\n"
    options = Path(data_dir) / "budget_options.txt"
    if options.is_file():
        block += "\n`tools/claim_budget_options.py` on the jobs behind these data (each job's own benchmark, re-priced):\n\n```\n" + options.read_text(encoding="utf-8").rstrip() + "\n```\n"
    return block


def made_by(frame: pd.DataFrame) -> str:
    """"commit `abc`", or the commits of a draft made by several."""
    commits = sorted(frame["commit"].astype(str).unique())
    return f"commit `{commits[0][:12]}`" if len(commits) == 1 else f"{len(commits)} commits ({', '.join(c[:12] for c in commits)}): a draft, not one pipeline"


def run_counts(frame: pd.DataFrame) -> str:
    test = frame[frame["split"] == "test"]
    counts = ((d, test[test["dataset"] == d]["seed"].nunique(), test[test["dataset"] == d]["method"].nunique()) for d in datasets_of(frame))
    return ", ".join(f"{dataset_name(d)} {seeds} seed{'s' * (seeds != 1)} x {methods} method{'s' * (methods != 1)}" for d, seeds, methods in counts)


def provenance_sentence(runs: pd.DataFrame, schedule: pd.DataFrame) -> str:
    longer = f" The schedule check was made by {made_by(schedule)}; {run_counts(schedule)}." if not schedule.empty else ""
    return f"Generated by `python -m mscl claim-report` from docs/claim/*.csv, made by {made_by(runs)}; {run_counts(runs)}.{longer}"


def blocks(
    frames: Mapping[str, pd.DataFrame], tests: pd.DataFrame, batch_tests: pd.DataFrame, tail_tests: pd.DataFrame, checks: pd.DataFrame,
    alpha: float, margin: float, cost: str, previous: Previous | None = None,
) -> dict[str, str]:  # fmt: skip
    """Every generated section, by block name (the docs' markers); `checks` are schedule_tests;
    with `previous`, the outcome compares these data with an earlier published folder."""
    runs = frames["runs"]
    plateau = plateau_frame(frames["convergence"])
    longer_plateau = schedule_plateau(frames["schedule_convergence"])
    changed = changed_verdicts(tests, checks)
    verdicts = verdict_frame(tests, batch_tests, tail_tests, checks)
    outcome = [
        bce_sentence(bce_check(runs, margin)), convergence_sentence(plateau), schedule_sentence(checks, longer_plateau, changed, margin),
        probe_sentence(frames["probes"]), headline_sentence(tests, margin, changed),
        batch_sentence(batch_tests, margin), long_tail_sentence(tail_tests, margin), ablation_sentence(tests, margin),
        robustness_sentence(verdicts, alpha, margin), small_gains_sentence(verdicts, margin), eq12_sentence(eq12_identity(runs)),
    ] + ([previous_sentence(tests, runs, previous)] if previous is not None else [])  # fmt: skip
    schedule_rivals = checks[checks["family"] == "schedule"]
    primary = tests[tests["family"] == "primary"]
    batch_table = "" if batch_tests.empty else comparisons_table(
        batch_tests[batch_tests["metric"].isin(METRICS[:3])].assign(dataset=lambda f: f["dataset"].map(dataset_name) + " batch " + f["batch_size"].astype(str)), METRICS[:3]
    )  # fmt: skip
    tail_rows = [
        [dataset_name(r.dataset), method_name(r.comparison), metric_name(r.metric), points(r.head_gain, 2, True), points(r.tail_gain, 2, True), difference_cell(r), format_p(r.p_holm), r.verdict]
        for r in tail_tests.itertuples()
    ] if not tail_tests.empty else []  # fmt: skip
    return {
        "provenance": provenance_sentence(runs, frames["schedule"]) + "\n",
        "outcome": "\n\n".join(f"- {sentence}" for sentence in outcome) + "\n",
        "readme": readme_paragraph(tests, runs, plateau, margin, checks, frames["schedule"], frames["batch_size"]),
        "summary": summary_table(runs),
        "primary": comparisons_table(primary, METRICS),
        "secondary": comparisons_table(tests[tests["family"] != "primary"], METRICS),
        "batch_size": batch_table or "Not run.\n",
        "long_tail": table(["Dataset", "Sim-Dissim minus", "Metric", "Head gain", "Tail gain", "Tail − head [95% CI]", "Holm p", "Verdict"], tail_rows, "lllrrrrl") if tail_rows else "No bucket data.\n",
        "tuning": tuning_table(frames["tuning"]) if not frames["tuning"].empty else "No tuning runs.\n",
        "convergence": convergence_table(plateau) if not plateau.empty else "No convergence data.\n",
        "schedule": schedule_table(checks, longer_plateau, runs, frames["schedule"], plateau) if not checks.empty else "No schedule-check runs in these data.\n",
        "schedule_comparisons": (
            schedule_verdicts_table(tests, checks) + "\nEvery metric at the longer schedule (Holm per metric over the rivals):\n\n"
            + comparisons_table(schedule_rivals.assign(dataset=schedule_rivals["dataset"].map(dataset_name) + ", " + schedule_rivals["epochs"].astype(str) + " epochs"), METRICS)
        ) if not schedule_rivals.empty else "No schedule-check comparisons in these data.\n",
        "cost": cost,
    }


def seeds_phrase(runs: pd.DataFrame, batch: pd.DataFrame | None = None) -> str:
    """How many fresh test seeds each method ran ("10 fresh seeds per method", or "10-12 ..."),
    and the batch-size sweep's count when it ran fewer."""
    def counts(frame: pd.DataFrame, keys: list[str]) -> pd.Series:
        return frame[frame["split"] == "test"].groupby(keys)["seed"].nunique()

    main = counts(runs, ["dataset", "method"])
    text = f"{main.min()}" if main.min() == main.max() else f"{main.min()}-{main.max()}"
    sweep = counts(batch, ["dataset", "method", "batch_size"]) if batch is not None and not batch.empty else main
    return f"{text} fresh seeds per method" + (f" ({sweep.min()} in the batch-size sweep)" if sweep.min() < main.min() else "")


def readme_paragraph(
    tests: pd.DataFrame, runs: pd.DataFrame, plateau: pd.DataFrame, margin: float, checks: pd.DataFrame | None = None,
    schedule: pd.DataFrame | None = None, batch: pd.DataFrame | None = None,
) -> str:  # fmt: skip
    primary = tests[(tests["family"] == "primary") & (tests["metric"] == HEADLINE)]
    commits = sorted(runs["commit"].astype(str).unique())
    better = int((primary["verdict"] == BETTER).sum())
    consistent = better == len(primary) and len(primary) > 0
    return (
        f"**Outcome (commit `{commits[0][:12] if len(commits) == 1 else 'mixed'}`):** with equal tuning per method, "
        f"{schedule_phrase(plateau)} and {seeds_phrase(runs, batch)}, "
        f"Sim-Dissim {'does' if consistent else 'does not'} consistently outperform ALL, ANY and MulSupCon on these data. "
        f"Of the {len(primary)} primary comparisons on test mAP (Holm-corrected): {count_verdicts(primary, margin)}. "
        f"{schedule_check_phrase(tests, checks, schedule)}"
        "docs/claim-check.md has the protocol, every comparison and the other claims (batch size, long tail, ablation, Eq. 12).\n"
    )


def schedule_check_phrase(tests: pd.DataFrame, checks: pd.DataFrame | None, schedule: pd.DataFrame | None = None) -> str:
    """The README's sentence on the schedule check: which comparisons it repeated (made by which
    commit) and whether their verdicts held."""
    if checks is None or checks.empty:
        return ""
    rivals = checks[(checks["family"] == "schedule") & (checks["metric"] == HEADLINE)]
    if rivals.empty:
        return ""
    changed = changed_verdicts(tests, checks)
    held = "every verdict held" if not changed else "; ".join(f"{dataset_name(d)} vs {method_name(rival)} {main} became {longer}" for d, rival, main, longer, _ in changed)
    which = f"{made_by(schedule)}, " if schedule is not None and not schedule.empty else ""
    epochs = ", ".join(f"{dataset_name(d)} {int(e)} epochs" for d, e in rivals.groupby("dataset", sort=False)["epochs"].first().items())
    return f"Rerun at a longer schedule ({which}{epochs}; {len(rivals)} comparison{'s' * (len(rivals) != 1)}): {held}. "


def schedule_phrase(plateau: pd.DataFrame) -> str:
    """What the convergence check found, in a few words: "trained to a plateau" only when every
    method met the protocol's plateau criterion."""
    if plateau.empty:
        return "schedules fixed in advance (no convergence data)"
    rising = plateau[plateau["gain_last_third"] >= PLATEAU_GAIN]
    if rising.empty:
        return "schedules trained to a plateau"
    where = "; ".join(
        f"{dataset_name(dataset)}: {', '.join(method_name(m) for m in block['method'])}" for dataset, block in rising.groupby("dataset", sort=False)
    )
    low, high = points(rising["gain_last_third"].min(), 1), points(rising["gain_last_third"].max(), 1)
    gained = low if low == high else f"{low}-{high}"  # one method, or gains that print alike: one number
    return f"schedules fixed in advance by a convergence pilot (not all at a plateau: {where} still gained {gained} points of val mAP over the last third)"


# ----------------------------------------------------------------------------- figures


def differences_figure(runs: pd.DataFrame, tests: pd.DataFrame, reference: str):
    """Per dataset (columns) x metric (rows: mAP, micro-F1, macro-F1): each seed's paired
    difference against each primary rival, with the mean and its 95% CI."""
    from mscl.report.figures import fitted_suptitle, new_figure

    datasets, metrics = datasets_of(runs), METRICS[:3]
    figure, axes = new_figure(min(FULL_WIDTH_IN, max(COLUMN_WIDTH_IN, 2.2 * len(datasets))), 0.6 + 1.6 * len(metrics), nrows=len(metrics), ncols=len(datasets), sharex="col")
    jitter = np.random.default_rng(0)
    for column, dataset in enumerate(datasets):
        for row_number, metric in enumerate(metrics):
            ax = axes[row_number, column]
            for x, rival in enumerate(PRIMARY_RIVALS):
                d = paired(runs, dataset, reference, rival, metric) * 100
                if d.empty:
                    continue
                ax.scatter(x + jitter.uniform(-0.15, 0.15, d.size), d, s=7, color=method_colour(rival), alpha=0.75, linewidths=0, zorder=2)
                r = tests[(tests["dataset"] == dataset) & (tests["comparison"] == rival) & (tests["metric"] == metric)].iloc[0]
                ax.errorbar([x + 0.3], [r.mean_diff * 100], yerr=[[(r.mean_diff - r.ci_low) * 100], [(r.ci_high - r.mean_diff) * 100]], fmt="o", ms=3, color="black", elinewidth=0.9, capsize=2, zorder=3)
            ax.axhline(0, color="0.3", linestyle="--", linewidth=0.8, zorder=1)
            ax.set_xticks(range(len(PRIMARY_RIVALS)), [method_name(m) for m in PRIMARY_RIVALS], rotation=30, ha="right")
            if column == 0:
                ax.set_ylabel(f"Δ {metric_name(metric)} (points)")
            if row_number == 0:
                ax.set_title(f"{dataset_name(dataset)} ({runs[(runs['dataset'] == dataset) & (runs['method'] == reference)]['seed'].nunique()} seeds)")
    fitted_suptitle(figure, f"{method_name(reference)} minus each rival, paired by seed (test); mean and 95% CI")
    return figure


def convergence_figure(convergence: pd.DataFrame):
    """Per dataset: the monitor's val mAP against epoch, mean over seeds per method (band: min-max)."""
    from mscl.report.figures import fitted_suptitle, new_figure

    datasets = datasets_of(convergence)
    figure, axes = new_figure(min(FULL_WIDTH_IN, max(COLUMN_WIDTH_IN, 2.4 * len(datasets))), 2.4, nrows=1, ncols=len(datasets))
    for ax, dataset in zip(axes[0], datasets):
        block = convergence[convergence["dataset"] == dataset]
        for method, curve in block.groupby("method", sort=False):
            by_epoch = curve.groupby("epoch")["val_map_readout"]
            mean, low, high = by_epoch.mean() * 100, by_epoch.min() * 100, by_epoch.max() * 100
            ax.plot(mean.index, mean, color=method_colour(method), linewidth=1.1, label=method_name(method))
            ax.fill_between(mean.index, low, high, color=method_colour(method), alpha=0.15, linewidth=0)
        ax.set_title(f"{dataset_name(dataset)} ({block['seed'].nunique()} seeds)")
        ax.set_xlabel("epoch")
    axes[0, 0].set_ylabel("val mAP of the ridge readout (%)")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=min(6, len(labels)))
    fitted_suptitle(figure, "Convergence: the monitor's val mAP against epoch (mean over test seeds; band: min-max)")
    return figure


def schedule_figure(convergence: pd.DataFrame, longer: pd.DataFrame):
    """Per dataset of the schedule check: the monitor's val mAP against epoch at the main
    schedule (solid) and at the longer one (dashed), mean over seeds per rerun method."""
    from mscl.report.figures import fitted_suptitle, new_figure

    datasets = datasets_of(longer) if not longer.empty else []
    figure, axes = new_figure(min(FULL_WIDTH_IN, max(COLUMN_WIDTH_IN, 2.6 * max(1, len(datasets)))), 2.4, nrows=1, ncols=max(1, len(datasets)))
    for ax, dataset in zip(axes[0], datasets):
        rerun = longer[longer["dataset"] == dataset]
        for method in rerun["method"].unique():
            for frame, style in ((convergence, "-"), (rerun, "--")):
                curve = frame[(frame["dataset"] == dataset) & (frame["method"] == method)].groupby("epoch")["val_map_readout"].mean() * 100
                ax.plot(curve.index, curve, style, color=method_colour(method), linewidth=1.1, label=method_name(method) if style == "-" else None)
        ax.set_title(f"{dataset_name(dataset)} ({rerun['seed'].nunique()} seeds)")
        ax.set_xlabel("epoch")
    axes[0, 0].set_ylabel("val mAP of the ridge readout (%)")
    if datasets:
        axes[0, 0].legend(fontsize=6)
    fitted_suptitle(figure, "Schedule check: main schedule (solid) and the longer one (dashed), mean over test seeds")
    return figure


def batch_size_figure(batch: pd.DataFrame, reference: str):
    """Test mAP against batch size per core method that ran at several sizes (mean ± sd over seeds)."""
    from mscl.report.figures import new_figure

    datasets = [d for d in datasets_of(batch) if batch.loc[batch["dataset"] == d, "batch_size"].nunique() > 1]
    figure, axes = new_figure(COLUMN_WIDTH_IN * max(1, len(datasets)), 2.4, nrows=1, ncols=max(1, len(datasets)))
    for ax, dataset in zip(axes[0], datasets):
        test = batch[(batch["dataset"] == dataset) & (batch["split"] == "test")]
        seeds = []
        for method in (*PRIMARY_RIVALS, reference):
            per_size = test[test["method"] == method].groupby("batch_size")
            if per_size.ngroups < 2:
                continue
            summary = per_size[HEADLINE].agg(["mean", "std"])
            seeds += per_size["seed"].nunique().tolist()
            ax.errorbar(summary.index, summary["mean"] * 100, yerr=summary["std"] * 100, marker="o", ms=3, capsize=2, color=method_colour(method), label=method_name(method), linewidth=1)
        sizes = sorted(test["batch_size"].unique())
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [str(size) for size in sizes])
        ax.set_xlabel("batch size")
        ax.set_ylabel("test mAP (%), mean ± sd")
        ax.set_title(f"{dataset_name(dataset)} ({min(seeds)}-{max(seeds)} seeds per point)" if seeds else dataset_name(dataset), fontsize=7)
        ax.legend(fontsize=6)
    return figure


def long_tail_figure(tail_tests: pd.DataFrame):
    """Head and tail macro-F1 gains of Sim-Dissim over each rival, per dataset."""
    from mscl.report.figures import fitted_suptitle, new_figure

    frame = tail_tests[tail_tests["metric"] == "macro_f1"] if not tail_tests.empty else tail_tests
    datasets = datasets_of(frame) if not frame.empty else []
    figure, axes = new_figure(min(FULL_WIDTH_IN, max(COLUMN_WIDTH_IN, 2.2 * max(1, len(datasets)))), 2.3, nrows=1, ncols=max(1, len(datasets)))
    for ax, dataset in zip(axes[0], datasets):
        block = frame[frame["dataset"] == dataset]
        x = np.arange(len(block))
        ax.bar(x - 0.18, block["head_gain"] * 100, width=0.36, color="0.6", label="head labels")
        ax.bar(x + 0.18, block["tail_gain"] * 100, width=0.36, color=method_colour("simdissim"), label="tail labels")
        ax.axhline(0, color="0.3", linewidth=0.8)
        ax.set_xticks(x, [f"vs {method_name(m)}" for m in block["comparison"]], rotation=30, ha="right")
        ax.set_title(dataset_name(dataset))
    axes[0, 0].set_ylabel("Sim-Dissim macro-F1 gain (points)")
    axes[0, 0].legend(fontsize=6)
    fitted_suptitle(figure, "Gain on head vs tail labels (mean over seeds, test)")
    return figure


# ------------------------------------------------------------------------------- docs


def update_docs(paths: Sequence[Path], generated: Mapping[str, str], check: bool) -> list[str]:
    """Rewrite (or, with `check`, compare) every generated block of `paths`; return what differs.
    A block name that the report does not generate is an error."""
    differing = []
    for path in paths:
        text = Path(path).read_text(encoding="utf-8")

        def replace(match: re.Match) -> str:
            name = match.group("name")
            if name not in generated:
                raise InputError(path, f"unknown generated block {name!r}", f"use one of {sorted(generated)}", field=name)
            if match.group("body") != generated[name]:
                differing.append(f"{path}:{name}")
            return match.group(1) + generated[name] + match.group(4)

        new = BLOCK.sub(replace, text)
        if not check and new != text:
            write_text(path, new)
    return differing


# -------------------------------------------------------------------------------- CLI


@dataclass(frozen=True)
class Previous:
    """An earlier published data folder (claim-report --previous): its runs and its tests."""

    name: str
    runs: pd.DataFrame
    tests: pd.DataFrame

    @classmethod
    def read(cls, folder: Path) -> "Previous":
        fix = "pass a published claim data folder (with runs.csv and tests.csv) as --previous"
        runs = read_claim_csv(Path(folder) / "runs.csv", fix, RUNS_COLUMNS)
        return cls(str(folder), runs, read_claim_csv(Path(folder) / "tests.csv", fix, ("dataset", "comparison", "metric", "family", "verdict")))


@dataclass(frozen=True)
class Report:
    """Everything claim-report computes from one data folder, before anything is written."""

    frames: Mapping[str, pd.DataFrame]
    tests: pd.DataFrame
    batch_tests: pd.DataFrame
    tail_tests: pd.DataFrame
    checks: pd.DataFrame  # schedule_tests
    generated: dict[str, str]  # block name -> text

    def files(self) -> dict[str, str]:
        """The text files claim-report writes (statistics and claim_report.md), by name."""
        csv = {name: frame.to_csv(index=False, lineterminator="\n", float_format="%.17g") for name, frame in (
            ("tests.csv", self.tests), ("batch_size_tests.csv", self.batch_tests), ("long_tail_tests.csv", self.tail_tests), ("schedule_tests.csv", self.checks))}  # fmt: skip
        return {**csv, "claim_report.md": "\n".join(f"## {name}\n\n{body}" for name, body in self.generated.items())}


def compute_report(data_dir: Path, reference: str, alpha: float, margin: float, previous: Previous | None = None) -> Report:
    frames = load_data(data_dir)
    tests = comparison_tests(frames["runs"], reference, alpha, margin)
    batch_tests = batch_size_tests(frames["batch_size"], reference, alpha, margin)
    tail_tests = long_tail_tests(frames["buckets"], reference, alpha, margin)
    checks = schedule_tests(frames["runs"], frames["schedule"], reference, alpha, margin)
    generated = blocks(frames, tests, batch_tests, tail_tests, checks, alpha, margin, cost_block(data_dir), previous)
    return Report(frames, tests, batch_tests, tail_tests, checks, generated)


def write_report(
    data_dir: Path, out_dir: Path, figures_dir: Path | None, reference: str, alpha: float, margin: float, previous: Previous | None = None
) -> tuple[dict[str, str], pd.DataFrame]:
    """Compute everything, write tests and figures; return (generated blocks, tests)."""
    from mscl.report.figures import save_figure

    report = compute_report(data_dir, reference, alpha, margin, previous)
    tests, generated = report.tests, report.generated
    for name, text in report.files().items():
        write_text(Path(out_dir) / name, text)
    figures = report_figures(report, reference)
    for name in CLAIM_FIGURE_NAMES:
        save_figure(figures[name](), Path(figures_dir or out_dir) / name)
    return generated, tests


def report_figures(report: Report, reference: str) -> dict[str, Callable[[], Any]]:
    """Each claim figure's name (mscl.layout.CLAIM_FIGURE_NAMES) and how to draw it."""
    frames = report.frames
    return {
        "claim_differences": lambda: differences_figure(frames["runs"], report.tests, reference),
        "claim_convergence": lambda: convergence_figure(frames["convergence"]),
        "claim_batch_size": lambda: batch_size_figure(frames["batch_size"], reference),
        "claim_long_tail": lambda: long_tail_figure(report.tail_tests),
        "claim_schedule": lambda: schedule_figure(frames["convergence"], frames["schedule_convergence"]),
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = cli.parse_args("claim-report", argv)
    if not 0 < args.alpha < 1:
        raise InputError(None, f"alpha {args.alpha} is not between 0 and 1", "pass e.g. --alpha 0.05", field="--alpha")
    previous = Previous.read(args.previous) if args.previous else None
    generated, tests = write_report(args.data_dir, args.out_dir, args.figures_dir, args.reference, args.alpha, args.margin, previous)
    differing = update_docs(args.docs, generated, args.check) if args.docs else []
    if args.check and differing:
        print("claim-report: generated blocks differ from the data: " + ", ".join(differing) + "; rerun without --check to rewrite them", file=sys.stderr)
        return 1
    print(f"claim-report: {len(tests)} comparisons; wrote {args.out_dir}" + (f"; docs blocks {'checked' if args.check else 'updated'} in {', '.join(map(str, args.docs))}" if args.docs else ""))
    return 0
