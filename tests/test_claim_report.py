"""The claim check's statistics and artifacts (`python -m mscl claim-report`), on small synthetic runs."""

from __future__ import annotations

import itertools
import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from PIL import Image
from scipy import stats

from mscl.__main__ import main as mscl_main
from mscl.errors import InputError
from mscl.report import claim
from mscl.report.collect import load_runs, write_runs
from mscl.report.style import METHOD_COLOURS, METHOD_DISPLAY_NAMES

from conftest import tidy_runs

EXPECTED_TEST_COLUMNS = [
    "dataset", "encoder_role", "batch_size", "metric", "reference", "method", "n_pairs", "seeds",
    "mean_diff", "std_diff", "ci95_low", "ci95_high", "t_stat", "p_ttest", "p_perm", "perm_method",
    "perm_draws", "p_holm", "holm_family_size", "alpha", "verdict",
]


def rows_of(values: dict[str, dict[int, float]], dataset: str = "yeast", metric: str = "micro_f1", role: str = "roberta") -> list[tuple]:
    """Tidy tuples from {loss: {seed: value}}."""
    return [(dataset, role, loss, metric, value, seed) for loss, by_seed in values.items() for seed, value in by_seed.items()]


def write_csv(tmp_path, rows, name="all_runs.csv"):
    path = tmp_path / name
    write_runs(tidy_runs(rows), path)
    return path


def claim_tests_of(tmp_path, rows, metrics=("micro_f1",), **options) -> pd.DataFrame:
    path = write_csv(tmp_path, rows)
    runs = claim.claim_runs(load_runs(path), metrics=metrics, source=path)
    return claim.tests_frame(runs, metrics=metrics, **options)


# ------------------------------------------------------------------------- statistics


def test_ci_and_t_test_match_a_hand_computation(tmp_path):
    ours = [0.61, 0.63, 0.60, 0.65, 0.62]
    theirs = [0.60, 0.60, 0.61, 0.62, 0.60]
    rows = rows_of({"simdissim": dict(enumerate(ours)), "all": dict(enumerate(theirs))})
    row = claim_tests_of(tmp_path, rows).iloc[0]

    d = np.array(ours) - np.array(theirs)
    n = len(d)
    mean, sd = d.sum() / n, math.sqrt(((d - d.sum() / n) ** 2).sum() / (n - 1))
    t = mean / (sd / math.sqrt(n))
    p = 2 * (1 - stats.t.cdf(abs(t), df=n - 1))
    half = stats.t.ppf(0.975, df=n - 1) * sd / math.sqrt(n)
    assert row["n_pairs"] == 5 and row["method"] == "all" and row["reference"] == "simdissim"
    assert row["mean_diff"] == pytest.approx(mean) and row["std_diff"] == pytest.approx(sd)
    assert row["t_stat"] == pytest.approx(t)
    assert row["p_ttest"] == pytest.approx(p) and row["p_ttest"] == pytest.approx(stats.ttest_rel(ours, theirs).pvalue)
    assert (row["ci95_low"], row["ci95_high"]) == (pytest.approx(mean - half), pytest.approx(mean + half))
    # One comparison: the Holm family has one member and leaves p unchanged.
    assert row["holm_family_size"] == 1 and row["p_holm"] == pytest.approx(row["p_ttest"])


def test_exact_sign_flip_p_by_hand_and_by_enumeration():
    # [1, 2, 3]: of the 8 sign patterns only +++ and --- reach |sum| = 6.
    assert claim.sign_flip_p([1, 2, 3]) == (0.25, "exact", 8)
    assert claim.sign_flip_p([1, -1])[0] == 1.0
    assert claim.sign_flip_p([0, 0, 0])[0] == 1.0
    d = np.random.default_rng(3).normal(0.01, 0.02, size=7)
    naive = [abs(sum(s * x for s, x in zip(signs, d))) >= abs(d.sum()) - 1e-15 for signs in itertools.product((1, -1), repeat=len(d))]
    p, method, patterns = claim.sign_flip_p(d)
    assert method == "exact" and patterns == 128 and p == pytest.approx(sum(naive) / 128)


def test_monte_carlo_sign_flips_above_16_pairs_are_seeded():
    p, method, draws = claim.sign_flip_p(np.ones(20))
    assert method == "monte-carlo" and draws == 20_000
    assert p <= 3 / 20_001 and claim.sign_flip_p(np.ones(20)) == (p, method, draws)
    # Differences summing to zero: every pattern is at least as extreme.
    assert claim.sign_flip_p(np.tile([1.0, -1.0], 10))[0] == 1.0
    assert claim.sign_flip_p(np.ones(16))[1] == "exact"


def test_holm_matches_a_naive_loop_over_each_metric_family(tmp_path):
    rng = np.random.default_rng(7)
    rows = []
    for dataset in ("yeast", "debtags", "fashion_mnist"):
        for metric, shift in (("micro_f1", 0.004), ("macro_f1", 0.0)):
            base = rng.normal(0.6, 0.02, size=4)
            for loss, offset in (("simdissim", shift), ("all", 0.0), ("any", -0.002), ("mulsupcon", 0.001)):
                rows += [(dataset, "roberta", loss, metric, b + offset + rng.normal(0, 0.003), seed) for seed, b in enumerate(base)]
    tests = claim_tests_of(tmp_path, rows, metrics=("micro_f1", "macro_f1"))
    assert len(tests) == 3 * 2 * 3
    for metric in ("micro_f1", "macro_f1"):
        family = tests[tests["metric"] == metric]
        p = family["p_ttest"].tolist()
        m = len(p)
        order = sorted(range(m), key=lambda i: p[i])
        expected = [0.0] * m
        for rank, i in enumerate(order):
            # Holm: adjusted p_(k) = max over j <= k of min(1, (m - j) p_(j)), ranks from 0.
            expected[i] = max(min(1.0, (m - j) * p[order[j]]) for j in range(rank + 1))
        assert family["holm_family_size"].tolist() == [9] * 9
        assert family["p_holm"].tolist() == pytest.approx(expected)
    assert (tests["p_holm"] >= tests["p_ttest"]).all()


def test_pairing_uses_only_seeds_both_methods_have(tmp_path):
    ours = {seed: 0.60 + 0.01 * seed for seed in range(5)}  # seeds 0-4
    theirs = {seed: 0.58 + 0.002 * seed for seed in range(2, 7)}  # seeds 2-6
    theirs[3] = math.nan  # a NaN value drops that seed too
    row = claim_tests_of(tmp_path, rows_of({"simdissim": ours, "all": theirs})).iloc[0]
    assert row["n_pairs"] == 2 and row["seeds"] == "2;4"
    assert row["mean_diff"] == pytest.approx(np.mean([ours[2] - theirs[2], ours[4] - theirs[4]]))


def test_verdicts_better_worse_none_and_too_few(tmp_path):
    rng = np.random.default_rng(0)
    base = rng.normal(0.6, 0.02, size=8)
    noise = rng.normal(0, 0.002, size=8)
    rows = []
    rows += rows_of({"simdissim": dict(enumerate(base + 0.05 + noise)), "all": dict(enumerate(base))}, dataset="better_set")
    rows += rows_of({"simdissim": dict(enumerate(base - 0.05 + noise)), "all": dict(enumerate(base))}, dataset="worse_set")
    rows += rows_of({"simdissim": dict(enumerate(base)), "all": dict(enumerate(base))}, dataset="same_set")  # identical values
    rows += rows_of({"simdissim": {0: 0.7, 1: 0.71}, "all": {1: 0.6, 2: 0.6}}, dataset="tiny_set")  # one common seed
    tests = claim_tests_of(tmp_path, rows).set_index("dataset")
    assert tests.loc["better_set", "verdict"] == "better"
    assert tests.loc["worse_set", "verdict"] == "worse"
    same = tests.loc["same_set"]
    assert same["verdict"] == "no detectable difference"
    assert (same["mean_diff"], same["p_ttest"], same["p_perm"], same["p_holm"]) == (0.0, 1.0, 1.0, 1.0)
    tiny = tests.loc["tiny_set"]
    assert tiny["verdict"] == "too few seeds" and tiny["n_pairs"] == 1
    assert all(math.isnan(tiny[c]) for c in ("p_ttest", "p_perm", "p_holm", "ci95_low", "std_diff"))
    assert tests["holm_family_size"].eq(3).all()  # the too-few comparison is not in the family
    # The threshold is strict, and the sign of the mean picks the direction.
    assert claim.verdict(8, 0.01, 0.05, 0.05) == "no detectable difference"
    assert claim.verdict(8, -0.01, 0.049, 0.05) == "worse"


def test_constant_nonzero_differences_give_a_zero_width_ci():
    result = claim.paired_statistics([0.01, 0.01, 0.01])
    assert result["ci95_low"] == result["ci95_high"] == pytest.approx(0.01)
    assert result["t_stat"] == math.inf and result["p_ttest"] == 0.0


# ---------------------------------------------------------------------------- outputs


def test_summary_mean_std_order_and_baseline_names(tmp_path):
    values = {"bce": {0: 0.70, 1: 0.72, 2: 0.71}, "simdissim": {0: 0.60, 1: 0.61, 2: 0.62}, "none": {0: 0.5, 1: 0.5, 2: 0.5}, "all": {0: 0.59, 1: 0.60}}
    path = write_csv(tmp_path, rows_of(values))
    runs = claim.claim_runs(load_runs(path), metrics=["micro_f1"], source=path)
    summary = claim.summary_frame(runs, ["micro_f1"])
    assert summary["method"].tolist() == ["all", "simdissim", "none", "bce"]
    ref = summary.set_index("method").loc["simdissim"]
    assert ref["n_seeds"] == 3 and ref["micro_f1_mean"] == pytest.approx(np.mean([0.60, 0.61, 0.62]))
    assert ref["micro_f1_std"] == pytest.approx(np.std([0.60, 0.61, 0.62], ddof=1))
    md = claim.render_summary(summary, ["micro_f1"], claim.settings_of(runs))[".md"]
    assert "| Yeast | Sim-Dissim | 3 | 61.0 ± 1.0 |" in md
    assert "| Yeast | ALL | 2 | 59.5 ± 0.7 |" in md
    assert "No pretraining" in md and "Supervised BCE" in md
    assert METHOD_DISPLAY_NAMES["none"] == "No pretraining" and METHOD_DISPLAY_NAMES["bce"] == "Supervised BCE"
    assert {"none", "bce"} <= set(METHOD_COLOURS)


def claim_rows() -> list[tuple]:
    """Two datasets (one with a display name), five methods, three metrics, six seeds."""
    rng = np.random.default_rng(11)
    rows = []
    for dataset, gain in (("coco", 0.03), ("yeast", 0.0)):
        base = rng.normal(0.6, 0.02, size=6)
        for loss, offset in (("all", 0.0), ("any", -0.01), ("mulsupcon", 0.005), ("simdissim", gain), ("none", -0.1), ("bce", 0.01)):
            for metric in ("micro_f1", "macro_f1", "map"):
                rows += [(dataset, "resnet", loss, metric, b + offset + rng.normal(0, 0.003), seed) for seed, b in enumerate(base)]
    rows += [("coco", "resnet", "simdissim", "micro_f1", 0.9, 0, 32, "val")]  # val rows are ignored
    return rows


def test_cli_writes_every_artifact(tmp_path, capsys):
    path = write_csv(tmp_path, claim_rows())
    out = tmp_path / "claim"
    assert mscl_main(["claim-report", "--runs", str(path), "--out-dir", str(out), "--metrics", "micro_f1", "macro_f1", "map"]) == 0
    names = [f"{stem}.{suffix}" for stem in ("claim_summary", "claim_tests") for suffix in ("csv", "md", "tex")]
    names += ["claim_differences.pdf", "claim_differences.png", "claim_outcome.md"]
    for name in names:
        assert (out / name).stat().st_size > 0, name
    assert sorted(p.name for p in out.iterdir()) == sorted(names)  # no temporary files left
    with Image.open(out / "claim_differences.png") as image:
        assert image.size[0] > 100 and image.size[1] > 100
    assert (out / "claim_differences.pdf").read_bytes().startswith(b"%PDF")

    tests = pd.read_csv(out / "claim_tests.csv")
    assert list(tests.columns) == EXPECTED_TEST_COLUMNS
    assert len(tests) == 2 * 3 * 5  # datasets x metrics x comparisons
    summary = pd.read_csv(out / "claim_summary.csv")
    assert list(summary.columns[:6]) == ["dataset", "encoder_role", "batch_size", "method", "method_name", "n_seeds"]
    assert summary.loc[(summary["dataset"] == "coco") & (summary["method"] == "simdissim"), "micro_f1_mean"].iloc[0] < 0.9  # val row left out
    for name in ("claim_summary.md", "claim_tests.md"):
        text = (out / name).read_text()
        assert "MS-COCO" in text and "Yeast" in text
    assert "one family per metric" in (out / "claim_tests.md").read_text()
    # MS-COCO (image) and yeast (tabular) both report the per-class macro-F1; every caption says so.
    for name in ("claim_summary.md", "claim_tests.md", "claim_summary.tex", "claim_tests.tex"):
        assert "Macro-F1: mean of per-class F1 (MulSupCon)." in (out / name).read_text(), name
    assert r"\toprule" in (out / "claim_tests.tex").read_text()

    outcome = (out / "claim_outcome.md").read_text()
    coco_all = tests[(tests["dataset"] == "coco") & (tests["method"] == "all") & (tests["metric"] == "micro_f1")].iloc[0]
    expected = f"Sim-Dissim vs ALL Micro-F1 {coco_all['mean_diff'] * 100:+.2f} points"
    assert expected in outcome and "MS-COCO (6 seeds):" in outcome and "Yeast (6 seeds):" in outcome
    assert f"({coco_all['verdict']})" in outcome and "vs MulSupCon mAP" in outcome
    assert "claim-report: wrote" in capsys.readouterr().out


def test_outcome_follows_the_numbers(tmp_path):
    rows = rows_of({"simdissim": {s: 0.7 + 0.001 * s for s in range(6)}, "all": {s: 0.6 + 0.0012 * s for s in range(6)}})
    path = write_csv(tmp_path, rows)
    runs = claim.claim_runs(load_runs(path), metrics=["micro_f1"], source=path)
    tests = claim.tests_frame(runs, metrics=["micro_f1"])
    text = claim.outcome_text(tests, runs, "simdissim", ["micro_f1"], 0.05, "all_runs.csv")
    assert "Yeast (6 seeds): Sim-Dissim vs ALL Micro-F1 +9.95 points" in text
    assert "Holm p < 0.001 (better)" in text and "no ANY runs" in text and "no MulSupCon runs" in text
    assert "better 1, worse 0" in text


def test_figure_plots_each_seeds_difference_in_points(tmp_path):
    path = write_csv(tmp_path, claim_rows())
    runs = claim.claim_runs(load_runs(path), metrics=["micro_f1", "map"], source=path)
    tests = claim.tests_frame(runs, metrics=["micro_f1", "map"])
    figure, data = claim.differences_figure(runs, tests, "simdissim", ["micro_f1", "map"])
    try:
        assert figure.axes and len(figure.axes) == 2 * 2
        point = data[(data["dataset"] == "yeast") & (data["method"] == "any") & (data["metric"] == "map") & (data["seed"] == 2)].iloc[0]
        values = runs[(runs["dataset"] == "yeast") & (runs["metric"] == "map") & (runs["seed"] == 2)].set_index("loss")["value"]
        assert point["diff_points"] == pytest.approx((values["simdissim"] - values["any"]) * 100)
        assert len(data) == 2 * 2 * 5 * 6  # datasets x metrics x methods x seeds
    finally:
        plt.close(figure)


# ----------------------------------------------------------------------------- errors


def test_missing_reference_names_the_file_and_field(tmp_path, capsys):
    path = write_csv(tmp_path, rows_of({"all": {0: 0.6, 1: 0.61}, "any": {0: 0.6, 1: 0.6}}))
    with pytest.raises(InputError) as error:
        claim.write_claim_report(path, tmp_path / "out", metrics=["micro_f1"])
    assert error.value.field == "loss" and error.value.path == str(path) and "--reference" in error.value.fix
    assert mscl_main(["claim-report", "--runs", str(path), "--out-dir", str(tmp_path / "out"), "--metrics", "micro_f1"]) == 1
    assert "'simdissim'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_reference_missing_on_one_dataset_is_named(tmp_path):
    rows = rows_of({"simdissim": {0: 0.6}, "all": {0: 0.6}}) + rows_of({"all": {0: 0.6}}, dataset="debtags")
    path = write_csv(tmp_path, rows)
    with pytest.raises(InputError, match="debtags") as error:
        claim.claim_runs(load_runs(path), metrics=["micro_f1"], source=path)
    assert error.value.field == "loss"


def test_missing_column_and_empty_test_split_are_input_errors(tmp_path):
    path = write_csv(tmp_path, rows_of({"simdissim": {0: 0.6}, "all": {0: 0.6}}))
    pd.read_csv(path).drop(columns=["seed"]).to_csv(tmp_path / "no_seed.csv", index=False)
    with pytest.raises(InputError) as error:
        claim.write_claim_report(tmp_path / "no_seed.csv", tmp_path / "out")
    assert error.value.field == "seed" and "no_seed.csv" in str(error.value)

    val_only = write_csv(tmp_path, [("yeast", "roberta", "simdissim", "micro_f1", 0.6, 0, 32, "val")], name="val_only.csv")
    with pytest.raises(InputError) as error:
        claim.write_claim_report(val_only, tmp_path / "out")
    assert error.value.field == "split" and "val_only.csv" in str(error.value)

    with pytest.raises(InputError) as error:
        claim.write_claim_report(path, tmp_path / "out", metrics=["micro_f1", "p_at_5"])
    assert error.value.field == "metric" and "p_at_5" in str(error.value)
