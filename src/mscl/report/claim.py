"""The claim check: does Sim-Dissim beat the other methods, seed for seed, on real datasets?

`python -m mscl claim-report --runs results/metrics/all_runs.csv --out-dir DIR
[--reference simdissim] [--metrics micro_f1 macro_f1 map macro_auc] [--headline-metrics
micro_f1 macro_f1 map] [--alpha 0.05] [--batch-size B] [--datasets NAME...]`

Reads the tidy CSV of `python -m mscl collect` (test split only). Runs of different methods
share split, initialisation and batch order per seed, so every comparison is paired by seed:
the reference method (default Sim-Dissim) minus each other method present on the dataset, over
the seeds that have a finite value for both (other seeds are left out). Without --batch-size each
(dataset, encoder role) uses the batch size most of its runs share (`collect.select_batch_size`);
a dataset run with several encoder roles is reported once per role.

Statistics of one comparison (n pairs, differences d_i = reference - method, fractions):
mean and sample std (ddof 1) of d; the 95% confidence interval of the mean difference
(Student t, n - 1 degrees of freedom); the paired two-sided t-test p (t = mean / (std / sqrt n);
all d equal to 0 gives t = 0, p = 1; all d equal and non-zero gives t = +-inf, p = 0); and the
two-sided sign-flip permutation p: the share of sign patterns s whose |sum s_i d_i| reaches the
observed |sum d_i|, over all 2^n patterns when n <= 16 ("exact"), else over 20,000 Monte-Carlo
patterns from a fixed seed, p = (1 + hits) / (1 + draws) ("monte-carlo"). Fewer than 2 pairs:
NaN statistics and the verdict "too few seeds".

Multiple comparisons: the t-test p values are Holm-adjusted within one family per metric made
of every dataset (x encoder role) x comparison with at least 2 pairs, so that the claim
"consistently outperforms across datasets" is corrected for the number of comparisons it
rests on. Verdict: "better" / "worse" (sign of the mean difference) when the Holm-adjusted
p < alpha, else "no detectable difference".

Writes into DIR, each atomically:
- claim_summary.{csv,md,tex}: per dataset x method the number of seeds and the mean and
  sample std of every metric (fractions in the CSV, "mean ± std" in percent in md/tex);
- claim_tests.{csv,md,tex}: one row per dataset x metric x comparison (CSV in fractions,
  md/tex in percentage points);
- claim_differences.{pdf,png}: the paired differences per seed, with the mean and its 95% CI,
  one panel per dataset (columns) x headline metric (rows);
- claim_outcome.md: one sentence per dataset for the headline metrics against ALL, ANY and
  MulSupCon, generated from the numbers above.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from mscl import cli
from mscl.cli import (
    CLAIM_ALPHA as DEFAULT_ALPHA,
    CLAIM_HEADLINE_METRICS as DEFAULT_HEADLINE_METRICS,
    CLAIM_METRICS as DEFAULT_METRICS,
    CLAIM_REFERENCE as DEFAULT_REFERENCE,
)
from mscl.data.stats_table import latex_escape
from mscl.errors import InputError
from mscl.io import write_text
from mscl.report.collect import load_runs, select_batch_size
from mscl.report.style import (
    ALL_METHOD_ORDER,
    COLUMN_WIDTH_IN,
    FULL_WIDTH_IN,
    dataset_name,
    encoder_name,
    macro_f1_note,
    method_colour,
    method_name,
    metric_name,
)

# The methods the outcome sentences compare the reference with (the paper's contrastive rivals).
OUTCOME_METHODS = ("all", "any", "mulsupcon")
CONFIDENCE = 0.95
EXACT_MAX_PAIRS = 16
MONTE_CARLO_DRAWS = 20_000
PERMUTATION_SEED = 0
JITTER_SEED = 0

BETTER, WORSE, NO_DIFFERENCE, TOO_FEW = "better", "worse", "no detectable difference", "too few seeds"
SETTING = ["dataset", "encoder_role", "batch_size"]
TEST_COLUMNS = (
    "dataset", "encoder_role", "batch_size", "metric", "reference", "method", "n_pairs", "seeds",
    "mean_diff", "std_diff", "ci95_low", "ci95_high", "t_stat", "p_ttest", "p_perm", "perm_method",
    "perm_draws", "p_holm", "holm_family_size", "alpha", "verdict",
)
SUMMARY_NAME, TESTS_NAME, FIGURE_NAME, OUTCOME_NAME = "claim_summary", "claim_tests", "claim_differences", "claim_outcome"


# -------------------------------------------------------------------------- statistics


@functools.lru_cache(maxsize=EXACT_MAX_PAIRS + 1)
def _all_sign_patterns(n: int) -> np.ndarray:
    """Every one of the 2^n sign patterns as rows of +-1 (float)."""
    bits = (np.arange(2**n, dtype=np.int64)[:, None] >> np.arange(n, dtype=np.int64)) & 1
    return (1 - 2 * bits).astype(np.float64)


def sign_flip_p(differences: Sequence[float], draws: int = MONTE_CARLO_DRAWS, seed: int = PERMUTATION_SEED) -> tuple[float, str, int]:
    """(two-sided p, "exact" | "monte-carlo", patterns used) of the paired sign-flip test.

    The statistic is |sum d_i|; p is the share of sign patterns whose |sum s_i d_i| is at least
    the observed one (the observed pattern included). All 2^n patterns when n <= 16, else
    `draws` seeded random patterns with p = (1 + hits) / (1 + draws).
    """
    d = np.asarray(differences, dtype=np.float64)
    n = d.size
    if n == 0:
        return math.nan, "exact", 0
    observed = abs(float(d.sum()))
    tolerance = 1e-12 * float(np.abs(d).sum())  # sums of the same numbers in another order
    if n <= EXACT_MAX_PAIRS:
        sums = np.abs(_all_sign_patterns(n) @ d)
        return float(np.mean(sums >= observed - tolerance)), "exact", 2**n
    signs = np.random.default_rng(seed).choice(np.array([-1.0, 1.0]), size=(draws, n))
    hits = int(np.count_nonzero(np.abs(signs @ d) >= observed - tolerance))
    return (1 + hits) / (1 + draws), "monte-carlo", draws


def paired_statistics(differences: Sequence[float]) -> dict[str, float]:
    """n, mean, sample std, 95% CI (Student t) and two-sided t-test p of paired differences."""
    d = np.asarray(differences, dtype=np.float64)
    n = d.size
    out = {"n_pairs": n, "mean_diff": math.nan, "std_diff": math.nan, "ci95_low": math.nan, "ci95_high": math.nan, "t_stat": math.nan, "p_ttest": math.nan}
    if n == 0:
        return out
    out["mean_diff"] = mean = float(d.mean())
    if n < 2:
        return out
    out["std_diff"] = std = float(d.std(ddof=1))
    se = std / math.sqrt(n)
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1)) * se
    out["ci95_low"], out["ci95_high"] = mean - half, mean + half
    if se == 0:  # every difference equal: no spread to test against
        out["t_stat"] = 0.0 if mean == 0 else math.copysign(math.inf, mean)
        out["p_ttest"] = 1.0 if mean == 0 else 0.0
    else:
        out["t_stat"] = t = mean / se
        out["p_ttest"] = float(2 * stats.t.sf(abs(t), n - 1))
    return out


def holm_adjust(pvalues: Sequence[float]) -> np.ndarray:
    """Holm step-down adjusted p values; NaN entries stay NaN and are not counted in the family."""
    p = np.asarray(pvalues, dtype=np.float64)
    adjusted = np.full(p.shape, math.nan)
    finite = np.flatnonzero(np.isfinite(p))
    family = len(finite)
    running = 0.0
    for rank, index in enumerate(finite[np.argsort(p[finite], kind="stable")]):
        running = max(running, min(1.0, (family - rank) * p[index]))
        adjusted[index] = running
    return adjusted


def verdict(n_pairs: int, mean_diff: float, p_holm: float, alpha: float) -> str:
    """better / worse when the Holm-adjusted p is below alpha, else no detectable difference."""
    if n_pairs < 2 or not math.isfinite(p_holm):
        return TOO_FEW
    if p_holm < alpha:
        return BETTER if mean_diff > 0 else WORSE
    return NO_DIFFERENCE


# ----------------------------------------------------------------------------- inputs


def method_sort_key(method: str) -> tuple[int, str]:
    """Report order: style.ALL_METHOD_ORDER, then unknown keys alphabetically."""
    return (ALL_METHOD_ORDER.index(method), "") if method in ALL_METHOD_ORDER else (len(ALL_METHOD_ORDER), method)


def ordered_methods(methods: Sequence[str]) -> list[str]:
    return sorted(set(methods), key=method_sort_key)


def claim_runs(
    runs: pd.DataFrame,
    reference: str = DEFAULT_REFERENCE,
    metrics: Sequence[str] = DEFAULT_METRICS,
    batch_size: int | None = None,
    datasets: Sequence[str] | None = None,
    source: str | Path | None = None,
) -> pd.DataFrame:
    """The test-split rows the claim check uses, validated (InputError naming `source` otherwise)."""
    test = runs[runs["split"] == "test"]
    if test.empty:
        raise InputError(source, "no test-split rows", "collect the probe runs' metrics.json (their 'test' section) with `python -m mscl collect`", field="split")
    if datasets:
        unknown = sorted(set(datasets) - set(test["dataset"]))
        if unknown:
            raise InputError(source, f"dataset(s) {unknown} have no test results", f"pass --datasets with some of {sorted(test['dataset'].unique())}", field="dataset")
        test = test[test["dataset"].isin(list(datasets))]
    test = select_batch_size(test, batch_size)
    if test.empty:
        raise InputError(source, f"no test-split rows at batch size {batch_size}", f"pass --batch-size with one of {sorted(runs['batch_size'].unique())}", field="batch_size")
    absent = [m for m in metrics if m not in set(test["metric"])]
    if absent:
        raise InputError(source, f"metric {absent[0]!r} has no test results", f"pass --metrics with some of {sorted(test['metric'].unique())}", field="metric")
    test = test[test["metric"].isin(list(metrics))]
    if reference not in set(test["loss"]):
        raise InputError(source, f"reference method {reference!r} has no test results", f"run its seeds, or pass --reference with one of {ordered_methods(test['loss'])}", field="loss")
    with_reference = test.loc[test["loss"] == reference, SETTING].drop_duplicates()
    without = test[SETTING].drop_duplicates().merge(with_reference, how="left", indicator=True).query("_merge == 'left_only'")
    if not without.empty:
        names = sorted(without["dataset"].unique())
        raise InputError(source, f"reference method {reference!r} has no test results on {names}", "run its seeds there, or leave those datasets out with --datasets", field="loss")
    keys = [*SETTING, "loss", "seed", "metric"]
    duplicated = test.duplicated(keys)
    if duplicated.any():
        first = test.loc[duplicated].iloc[0]
        raise InputError(source, f"run {dict(first[keys])} appears twice (several encoders in one role?)", "map one encoder per role in `collect --roles`", field="encoder_role")
    return test.reset_index(drop=True)


def seed_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Values indexed by (dataset, encoder_role, batch_size, metric, seed), one column per method."""
    return runs.set_index([*SETTING, "metric", "seed", "loss"])["value"].unstack("loss").sort_index()


def settings_of(runs: pd.DataFrame) -> list[tuple[str, str, int]]:
    """(dataset, encoder_role, batch_size) in report order: datasets sorted, then role."""
    return sorted({(str(d), str(r), int(b)) for d, r, b in runs[SETTING].itertuples(index=False)})


def setting_label(setting: tuple[str, str, int], settings: Sequence[tuple[str, str, int]]) -> str:
    """Display name of a dataset, with the encoder when the dataset was run with several."""
    dataset, role, _ = setting
    roles = {r for d, r, _ in settings if d == dataset}
    return dataset_name(dataset) + (f" ({encoder_name(role)})" if len(roles) > 1 else "")


# ------------------------------------------------------------------------ computations


def summary_frame(runs: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
    """Per setting x method: seeds, and mean, sample std (ddof 1) and count of finite values per metric."""
    rows = []
    for setting in settings_of(runs):
        in_setting = runs[(runs[SETTING] == pd.Series(setting, index=SETTING)).all(axis=1)]
        for method in ordered_methods(in_setting["loss"]):
            of_method = in_setting[in_setting["loss"] == method]
            row: dict[str, object] = dict(zip(SETTING, setting)) | {"method": method, "method_name": method_name(method), "n_seeds": int(of_method["seed"].nunique())}
            for metric in metrics:
                values = of_method.loc[of_method["metric"] == metric, "value"].dropna().to_numpy(dtype=np.float64)
                row[f"{metric}_mean"] = float(values.mean()) if values.size else math.nan
                row[f"{metric}_std"] = float(values.std(ddof=1)) if values.size > 1 else math.nan
                row[f"{metric}_n"] = int(values.size)
            rows.append(row)
    return pd.DataFrame(rows)


def paired_differences(runs: pd.DataFrame, reference: str, metrics: Sequence[str]) -> pd.DataFrame:
    """One row per (setting, metric, compared method, common seed): diff = reference - method (fraction)."""
    table = seed_table(runs)
    rows = []
    for setting in settings_of(runs):
        methods = [m for m in ordered_methods(runs.loc[(runs[SETTING] == pd.Series(setting, index=SETTING)).all(axis=1), "loss"]) if m != reference]
        for metric in metrics:
            key = (*setting, metric)
            if key not in table.index.droplevel("seed"):
                continue
            block = table.loc[key]
            for method in methods:
                both = block[[reference, method]].dropna()
                for seed, (ours, theirs) in zip(both.index, both.to_numpy()):
                    rows.append(dict(zip(SETTING, setting)) | {"metric": metric, "method": method, "seed": int(seed), "diff": float(ours - theirs)})
    return pd.DataFrame(rows, columns=[*SETTING, "metric", "method", "seed", "diff"])


def tests_frame(runs: pd.DataFrame, reference: str = DEFAULT_REFERENCE, metrics: Sequence[str] = DEFAULT_METRICS, alpha: float = DEFAULT_ALPHA) -> pd.DataFrame:
    """One row per setting x metric x comparison (TEST_COLUMNS), Holm-adjusted per metric."""
    diffs = paired_differences(runs, reference, metrics)
    rows = []
    for setting in settings_of(runs):
        methods = [m for m in ordered_methods(runs.loc[(runs[SETTING] == pd.Series(setting, index=SETTING)).all(axis=1), "loss"]) if m != reference]
        for metric in metrics:
            for method in methods:
                pairs = diffs[(diffs[SETTING] == pd.Series(setting, index=SETTING)).all(axis=1) & (diffs["metric"] == metric) & (diffs["method"] == method)]
                d = pairs["diff"].to_numpy(dtype=np.float64)
                row = dict(zip(SETTING, setting)) | {"metric": metric, "reference": reference, "method": method, "seeds": ";".join(str(s) for s in sorted(pairs["seed"]))}
                row |= paired_statistics(d)
                if d.size >= 2:
                    row["p_perm"], row["perm_method"], row["perm_draws"] = sign_flip_p(d)
                else:
                    row["p_perm"], row["perm_method"], row["perm_draws"] = math.nan, "", 0
                rows.append(row)
    frame = pd.DataFrame(rows, columns=[c for c in TEST_COLUMNS if c not in ("p_holm", "holm_family_size", "alpha", "verdict")])
    frame["p_holm"] = math.nan
    frame["holm_family_size"] = 0
    for metric in metrics:  # one Holm family per metric: every setting x comparison together
        family = frame.index[frame["metric"] == metric]
        frame.loc[family, "p_holm"] = holm_adjust(frame.loc[family, "p_ttest"].to_numpy(dtype=np.float64))
        frame.loc[family, "holm_family_size"] = int(np.isfinite(frame.loc[family, "p_ttest"].to_numpy(dtype=np.float64)).sum())
    frame["alpha"] = alpha
    frame["verdict"] = [verdict(int(r.n_pairs), r.mean_diff, r.p_holm, alpha) for r in frame.itertuples()]
    return frame[list(TEST_COLUMNS)]


# -------------------------------------------------------------------------- rendering


def percent(value: float, decimals: int = 1, signed: bool = False) -> str:
    """A fraction as percent (points) text; rounding never shows "-0.0"."""
    shown = round(value * 100, decimals) + 0.0
    return f"{shown:+.{decimals}f}" if signed else f"{shown:.{decimals}f}"


def format_p(p: float) -> str:
    if not math.isfinite(p):
        return "n/a"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def p_clause(name: str, p: float) -> str:
    """'Holm p = 0.310' or 'Holm p < 0.001'."""
    text = format_p(p)
    return f"{name} {text}" if text.startswith("<") else f"{name} = {text}"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]], aligns: str) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(":---" if a == "l" else "---:" for a in aligns) + "|"]
    return lines + ["| " + " | ".join(cell.replace("|", r"\|") for cell in row) + " |" for row in rows]


def latex_table(headers: Sequence[str], rows: Sequence[Sequence[str]], aligns: str, notes: Sequence[str], groups: Sequence[int] = ()) -> str:
    """booktabs tabular (cells already LaTeX); a \\midrule before each row index in `groups`."""
    lines = [rf"\begin{{tabular}}{{@{{}}{aligns}@{{}}}}", r"\toprule", " & ".join(headers) + r" \\", r"\midrule"]
    for number, row in enumerate(rows):
        if number in groups and number:
            lines.append(r"\midrule")
        lines.append(" & ".join(row) + r" \\")
    lines.append(r"\bottomrule")
    lines += [rf"\multicolumn{{{len(headers)}}}{{@{{}}l}}{{\footnotesize {note}}} \\" for note in notes]
    lines.append(r"\end{tabular}")
    return "\n".join(lines) + "\n"


def summary_cell(row: pd.Series, metric: str, flavour: str) -> str:
    mean, std = row[f"{metric}_mean"], row[f"{metric}_std"]
    if not math.isfinite(mean):
        return "--" if flavour == "latex" else "missing"
    text = percent(mean)
    if math.isfinite(std):
        text += (r" $\pm$ " if flavour == "latex" else " ± ") + percent(std)
    return text


def definition_sentence(metrics: Sequence[str], settings: Sequence[tuple[str, str, int]]) -> str | None:
    """The macro-F1 definition of the datasets shown (`style.macro_f1_note`), when macro_f1 is among the metrics."""
    return macro_f1_note(setting[0] for setting in settings) if "macro_f1" in metrics else None


def render_summary(summary: pd.DataFrame, metrics: Sequence[str], settings: Sequence[tuple[str, str, int]]) -> dict[str, str]:
    """claim_summary as {".csv", ".md", ".tex"} texts."""
    headers = ["Dataset", "Method", "Seeds", *(metric_name(m) for m in metrics)]
    md_rows, tex_rows, groups = [], [], []
    for setting in settings:
        block = summary[(summary[SETTING] == pd.Series(setting, index=SETTING)).all(axis=1)]
        groups.append(len(md_rows))
        for _, row in block.iterrows():
            label = setting_label(setting, settings)
            md_rows.append([label, row["method_name"], str(row["n_seeds"]), *(summary_cell(row, m, "md") for m in metrics)])
            tex_rows.append([latex_escape(label), latex_escape(row["method_name"]), str(row["n_seeds"]), *(summary_cell(row, m, "latex") for m in metrics)])
    definition = definition_sentence(metrics, settings)
    caption = "Test-split results per dataset and method: mean ± sample std (ddof 1) over seeds, in percent; missing: no result." + (f" {definition}." if definition else "")
    md = "\n".join([caption, "", *markdown_table(headers, md_rows, "ll" + "r" * (1 + len(metrics)))]) + "\n"
    notes = [r"Mean $\pm$ sample std over seeds, in percent; --: no result.", *([latex_escape(definition) + "."] if definition else [])]
    tex = latex_table([latex_escape(h) for h in headers], tex_rows, "ll" + "r" * (1 + len(metrics)), notes, groups)
    return {".csv": frame_csv(summary), ".md": md, ".tex": tex}


def holm_definition(tests: pd.DataFrame, metrics: Sequence[str]) -> str:
    sizes = ", ".join(f"{metric_name(m)} m = {int(tests.loc[tests['metric'] == m, 'holm_family_size'].max() if (tests['metric'] == m).any() else 0)}" for m in metrics)
    return (
        "Holm p: the t-test p values Holm-adjusted within one family per metric made of every dataset x comparison "
        f"with at least 2 pairs ({sizes}), so that a claim across datasets is corrected for the number of comparisons."
    )


def render_tests(tests: pd.DataFrame, reference: str, metrics: Sequence[str], alpha: float, settings: Sequence[tuple[str, str, int]]) -> dict[str, str]:
    """claim_tests as {".csv", ".md", ".tex"} texts."""
    headers = ["Dataset", "Metric", "Comparison", "n", "Mean diff (pts)", "95% CI (pts)", "p (t)", "p (perm.)", "Holm p", "Verdict"]
    md_rows, tex_rows, groups = [], [], []
    ref_name = method_name(reference)
    previous = None
    for row in tests.itertuples(index=False):
        setting = (row.dataset, row.encoder_role, row.batch_size)
        if setting != previous:
            groups.append(len(md_rows))
            previous = setting
        finite = math.isfinite(row.ci95_low)
        ci = f"[{percent(row.ci95_low, 2, True)}, {percent(row.ci95_high, 2, True)}]" if finite else "n/a"
        mean = percent(row.mean_diff, 2, True) if math.isfinite(row.mean_diff) else "n/a"
        perm = format_p(row.p_perm) + (" (MC)" if row.perm_method == "monte-carlo" else "")
        cells = [setting_label(setting, settings), metric_name(row.metric), f"{ref_name} − {method_name(row.method)}", str(row.n_pairs), mean, ci, format_p(row.p_ttest), perm, format_p(row.p_holm), row.verdict]
        md_rows.append(cells)
        tex_rows.append([latex_escape(c.replace("−", "-")).replace("<", "$<$") for c in cells])
    caption = (
        f"Paired comparisons on the test split: {ref_name} minus each method, in percentage points, paired by seed "
        "(n: seeds with a result for both methods; other seeds are left out). 95% CI: Student t with n - 1 df. "
        "p (t): paired two-sided t-test. p (perm.): two-sided sign-flip permutation test, exact over all 2^n sign "
        f"patterns for n <= {EXACT_MAX_PAIRS}, else {MONTE_CARLO_DRAWS:,} seeded Monte-Carlo draws (MC). "
        + holm_definition(tests, metrics)
        + f' Verdict: "better" / "worse" by the sign of the mean difference when Holm p < {alpha:g}, else "no detectable difference"; '
        '"too few seeds" below 2 pairs.'
    )
    definition = definition_sentence(metrics, settings)
    if definition:
        caption += f" {definition}."
    md = "\n".join([caption, "", *markdown_table(headers, md_rows, "lllrrrrrrl")]) + "\n"
    notes = [
        rf"Differences in points, {latex_escape(ref_name)} minus method, paired by seed; CI: Student t.",
        rf"p (perm.): sign flips, exact for n $\le$ {EXACT_MAX_PAIRS}, else {MONTE_CARLO_DRAWS:,} draws (MC).",
        rf"Holm: per metric, over all datasets $\times$ comparisons; verdict at $\alpha$ = {alpha:g}.",
        *([latex_escape(definition) + "."] if definition else []),
    ]
    tex = latex_table([latex_escape(h) for h in headers], tex_rows, "lllrrrrrrl", notes, groups)
    return {".csv": frame_csv(tests), ".md": md, ".tex": tex}


def outcome_text(tests: pd.DataFrame, runs: pd.DataFrame, reference: str, headline: Sequence[str], alpha: float, source: str) -> str:
    """claim_outcome.md: one generated sentence per dataset, then the tally of verdicts."""
    ref_name = method_name(reference)
    rivals = [m for m in OUTCOME_METHODS if m != reference]
    settings = settings_of(runs)
    lines = [
        f"# Claim check: {ref_name} vs {', '.join(method_name(m) for m in rivals)}",
        "",
        f"Generated by `python -m mscl claim-report` from {source}: test split; differences are {ref_name} minus the "
        f"other method in percentage points, paired by seed; Holm-adjusted t-test p per metric over all datasets x "
        f"comparisons; verdicts at alpha = {alpha:g}.",
        "",
    ]
    tally: dict[str, int] = {}
    for setting in settings:
        in_setting = (runs[SETTING] == pd.Series(setting, index=SETTING)).all(axis=1)
        seeds = runs.loc[in_setting & (runs["loss"] == reference), "seed"].nunique()
        clauses = []
        for method in rivals:
            rows = tests[(tests[SETTING] == pd.Series(setting, index=SETTING)).all(axis=1) & (tests["method"] == method)]
            if rows.empty:
                clauses.append(f"no {method_name(method)} runs")
                continue
            for metric in headline:
                row = rows[rows["metric"] == metric].iloc[0]
                head = f"{ref_name} vs {method_name(method)} {metric_name(metric)}"
                tally[row["verdict"]] = tally.get(row["verdict"], 0) + 1
                if row["verdict"] == TOO_FEW:
                    clauses.append(f"{head}: {TOO_FEW} ({row['n_pairs']} pair{'s' if row['n_pairs'] != 1 else ''})")
                    continue
                clauses.append(
                    f"{head} {percent(row['mean_diff'], 2, True)} points [95% CI {percent(row['ci95_low'], 2, True)}, "
                    f"{percent(row['ci95_high'], 2, True)}], {p_clause('Holm p', row['p_holm'])} ({row['verdict']})"
                )
        lines += [f"{setting_label(setting, settings)} ({seeds} seed{'s' if seeds != 1 else ''}): " + "; ".join(clauses) + ".", ""]
    counts = ", ".join(f"{label} {tally.get(label, 0)}" for label in (BETTER, WORSE, NO_DIFFERENCE, TOO_FEW))
    total = sum(tally.values())
    lines.append(f"In all: {total} comparison{'s' if total != 1 else ''} of {ref_name} ({len(settings)} dataset{'s' if len(settings) != 1 else ''} x rivals x metrics): {counts}.")
    return "\n".join(lines) + "\n"


def frame_csv(frame: pd.DataFrame) -> str:
    return frame.to_csv(index=False, lineterminator="\n", float_format="%.17g")


# ----------------------------------------------------------------------------- figure


def differences_figure(runs: pd.DataFrame, tests: pd.DataFrame, reference: str, metrics: Sequence[str]):
    """(figure, plotted data): per dataset (columns) x metric (rows), each seed's paired difference
    in points per compared method (jittered dots), the mean with its 95% CI, a dashed zero line."""
    from mscl.report.figures import mark_missing, new_figure

    settings = settings_of(runs)
    diffs = paired_differences(runs, reference, metrics)
    width = min(FULL_WIDTH_IN, max(COLUMN_WIDTH_IN, 1.9 * len(settings)))
    figure, axes = new_figure(width, 0.5 + 1.55 * len(metrics), nrows=len(metrics), ncols=len(settings), sharex="col")
    jitter = np.random.default_rng(JITTER_SEED)
    plotted = []
    for column, setting in enumerate(settings):
        at = pd.Series(setting, index=SETTING)
        methods = [m for m in ordered_methods(runs.loc[(runs[SETTING] == at).all(axis=1), "loss"]) if m != reference]
        for row_number, metric in enumerate(metrics):
            ax = axes[row_number, column]
            for x, method in enumerate(methods):
                points = diffs[(diffs[SETTING] == at).all(axis=1) & (diffs["metric"] == metric) & (diffs["method"] == method)]
                test = tests[(tests[SETTING] == at).all(axis=1) & (tests["metric"] == metric) & (tests["method"] == method)]
                if points.empty:
                    mark_missing(ax, x)
                    continue
                y = points["diff"].to_numpy() * 100
                ax.scatter(x + jitter.uniform(-0.18, 0.18, size=y.size), y, s=7, color=method_colour(method), alpha=0.75, linewidths=0, zorder=2)
                mean = float(y.mean())
                low = high = math.nan
                if not test.empty and math.isfinite(test["ci95_low"].iloc[0]):
                    low, high = test["ci95_low"].iloc[0] * 100, test["ci95_high"].iloc[0] * 100
                    ax.errorbar([x + 0.32], [mean], yerr=[[mean - low], [high - mean]], fmt="o", ms=3, color="black", elinewidth=0.9, capsize=2, zorder=3)
                else:
                    ax.plot([x + 0.32], [mean], "o", ms=3, color="black", zorder=3)
                plotted += [dict(zip(SETTING, setting)) | {"metric": metric, "method": method, "seed": s, "diff_points": v, "mean_points": mean, "ci_low_points": low, "ci_high_points": high} for s, v in zip(points["seed"], y)]
            ax.axhline(0, color="0.3", linestyle="--", linewidth=0.8, zorder=1)
            ax.set_xticks(range(len(methods)))
            ax.set_xticklabels([method_name(m) for m in methods], rotation=45, ha="right")
            ax.set_xlim(-0.6, len(methods) - 0.3)
            if column == 0:
                ax.set_ylabel(f"Δ {metric_name(metric)} (points)")
            if row_number == 0:
                seeds = runs.loc[(runs[SETTING] == at).all(axis=1) & (runs["loss"] == reference), "seed"].nunique()
                ax.set_title(f"{setting_label(setting, settings)} ({seeds} seeds)")
    figure.suptitle(f"{method_name(reference)} minus method, paired by seed (test); mean and 95% CI", fontsize=8)
    return figure, pd.DataFrame(plotted, columns=[*SETTING, "metric", "method", "seed", "diff_points", "mean_points", "ci_low_points", "ci_high_points"])


# -------------------------------------------------------------------------------- CLI


def write_claim_report(
    runs_path: str | Path,
    out_dir: str | Path,
    reference: str = DEFAULT_REFERENCE,
    metrics: Sequence[str] = DEFAULT_METRICS,
    headline: Sequence[str] | None = None,
    alpha: float = DEFAULT_ALPHA,
    batch_size: int | None = None,
    datasets: Sequence[str] | None = None,
) -> dict[str, pd.DataFrame]:
    """Compute and write every claim artifact into `out_dir`; returns the summary and tests frames."""
    if not 0 < alpha < 1:
        raise InputError(None, f"alpha {alpha} is not between 0 and 1", "pass e.g. --alpha 0.05", field="--alpha")
    metrics = list(dict.fromkeys(metrics))
    headline = [m for m in DEFAULT_HEADLINE_METRICS if m in metrics] if headline is None else list(dict.fromkeys(headline))
    outside = [m for m in headline if m not in metrics]
    if outside:
        raise InputError(None, f"headline metric {outside[0]!r} is not among --metrics {metrics}", "add it to --metrics (its Holm family is computed there)", field="--headline-metrics")
    if not headline:
        raise InputError(None, "no headline metric", "pass --headline-metrics with some of --metrics", field="--headline-metrics")
    runs = claim_runs(load_runs(runs_path), reference, metrics, batch_size, datasets, source=runs_path)
    settings = settings_of(runs)
    summary = summary_frame(runs, metrics)
    tests = tests_frame(runs, reference, metrics, alpha)
    # Render everything first, then write: a failure never leaves a half-updated report.
    texts = {f"{SUMMARY_NAME}{s}": t for s, t in render_summary(summary, metrics, settings).items()}
    texts |= {f"{TESTS_NAME}{s}": t for s, t in render_tests(tests, reference, metrics, alpha, settings).items()}
    texts[f"{OUTCOME_NAME}.md"] = outcome_text(tests, runs, reference, headline, alpha, Path(runs_path).name)
    figure, _ = differences_figure(runs, tests, reference, headline)
    out_dir = Path(out_dir)
    for name, text in texts.items():
        write_text(out_dir / name, text)
    from mscl.report.figures import save_figure

    save_figure(figure, out_dir / FIGURE_NAME)
    return {"summary": summary, "tests": tests}


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point (see the module docstring)."""
    args = cli.parse_args("claim-report", argv)
    frames = write_claim_report(args.runs, args.out_dir, args.reference, args.metrics, args.headline_metrics, args.alpha, args.batch_size, args.datasets)
    tests = frames["tests"]
    print(f"claim-report: wrote {args.out_dir}/{{{SUMMARY_NAME},{TESTS_NAME}}}.{{csv,md,tex}}, {FIGURE_NAME}.{{pdf,png}}, {OUTCOME_NAME}.md ({len(tests)} comparisons)")
    return 0
