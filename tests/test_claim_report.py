"""The claim check's statistics (`mscl.report.claim`) against their reference definitions, its
families and verdicts, the data export (`mscl.report.claim_data`), and the generated blocks."""

from __future__ import annotations

import functools
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from mscl.errors import InputError
from mscl.report import claim
from mscl.report.claim import (
    BETTER,
    INCONCLUSIVE,
    WORSE,
    comparison_tests,
    equivalent,
    holm,
    minimum_detectable_difference,
    paired_statistics,
    update_docs,
    verdict,
)


def test_paired_statistics_equal_scipys_paired_t_test_interval_and_two_one_sided_tests() -> None:
    rng = np.random.default_rng(0)
    ours, theirs = rng.normal(0.5, 0.02, 10), rng.normal(0.49, 0.02, 10)
    d = ours - theirs
    out = paired_statistics(d, margin=0.01)
    assert out["n"] == 10 and out["mean_diff"] == pytest.approx(d.mean()) and out["sd_diff"] == pytest.approx(d.std(ddof=1))
    assert out["p"] == pytest.approx(stats.ttest_rel(ours, theirs).pvalue)
    low, high = stats.t.interval(0.95, 9, loc=d.mean(), scale=stats.sem(d))
    assert (out["ci_low"], out["ci_high"]) == (pytest.approx(low), pytest.approx(high))
    # TOST: the larger of the two one-sided p values against -margin and +margin.
    lower = stats.ttest_1samp(d, -0.01, alternative="greater").pvalue
    upper = stats.ttest_1samp(d, 0.01, alternative="less").pvalue
    assert out["p_tost"] == pytest.approx(max(lower, upper))
    # Beside the t-test: the Wilcoxon signed-rank p, and the exact permutation p by its definition,
    # the share of all 2^10 sign flips of the differences whose |mean| is at least the observed one.
    assert out["p_wilcoxon"] == pytest.approx(stats.wilcoxon(ours, theirs).pvalue)
    flips = np.array(list(itertools.product((1, -1), repeat=d.size)))
    assert out["p_permutation"] == pytest.approx(np.mean(np.abs(flips @ d) >= abs(d.sum()) * (1 - 1e-12)))


def test_paired_statistics_edge_cases() -> None:
    assert math.isnan(paired_statistics([], 0.01)["mean_diff"])
    one = paired_statistics([0.02], 0.01)
    assert one["mean_diff"] == 0.02 and math.isnan(one["p"])
    same = paired_statistics([0.0, 0.0, 0.0], 0.01)  # Eq. 12 vs ANY: identical runs
    assert same["p"] == 1.0 and same["p_tost"] == 0.0 and same["ci_low"] == same["ci_high"] == 0.0
    assert same["p_wilcoxon"] == same["p_permutation"] == 1.0
    # With 5 seeds no two-sided rank or sign-flip p can go below 2/2^5, even when every difference has one sign.
    five = paired_statistics([0.01, 0.02, 0.03, 0.04, 0.05], 0.01)
    assert five["p_wilcoxon"] == five["p_permutation"] == 2 / 2**5 and five["p"] < 0.05
    shifted = paired_statistics([0.02, 0.02], 0.01)
    assert shifted["p"] == 0.0 and shifted["p_tost"] == 1.0


def test_holm_matches_the_step_down_definition_and_ignores_nan() -> None:
    p = [0.01, 0.04, 0.03, math.nan, 0.5]
    got = holm(p)
    # sorted 0.01, 0.03, 0.04, 0.5 with m = 4: 0.04, 0.09, max(0.09, 0.08) = 0.09, 0.5
    assert got[0] == pytest.approx(0.04) and got[2] == pytest.approx(0.09) and got[1] == pytest.approx(0.09)
    assert math.isnan(got[3]) and got[4] == pytest.approx(0.5)


def test_minimum_detectable_difference_has_80_percent_power() -> None:
    from statsmodels.stats.power import TTestPower

    mde = minimum_detectable_difference(10, 0.004, alpha=0.05 / 9)
    assert TTestPower().power(effect_size=mde / 0.004, nobs=10, alpha=0.05 / 9) == pytest.approx(0.8, abs=1e-6)
    assert minimum_detectable_difference(20, 0.004, alpha=0.05 / 9) < mde  # more seeds detect less
    assert math.isnan(minimum_detectable_difference(1, 0.004, 0.05))


def test_verdicts_are_better_worse_equivalent_or_inconclusive_never_tie() -> None:
    assert verdict(0.02, 0.01, 0.9, 0.05, 0.01) == BETTER
    assert verdict(-0.02, 0.01, 0.9, 0.05, 0.01) == WORSE
    assert verdict(0.001, 0.6, 0.01, 0.05, 0.01) == equivalent(0.01) == "equivalent within ±1 point"
    assert verdict(0.001, 0.6, 0.2, 0.05, 0.01) == INCONCLUSIVE


def synthetic_runs(effects: dict[str, float], datasets=("yeast", "fashion_mnist", "debtags"), seeds=range(10)) -> pd.DataFrame:
    """runs.csv rows: each method's test/val metrics = base + its effect + seed noise (shared by
    every method of a seed, so pairs cancel it) + a small own noise."""
    rng = np.random.default_rng(1)
    rows = []
    for dataset in datasets:
        for seed in seeds:
            shared = rng.normal(0, 0.02)
            for method, effect in effects.items():
                values = {m: 0.5 + effect + shared + rng.normal(0, 0.002) for m in claim.METRICS}
                for split in ("val", "test"):
                    rows.append({"dataset": dataset, "method": method, "seed": seed, "split": split, **values, "commit": "abc"})
    return pd.DataFrame(rows)


def test_primary_family_is_nine_comparisons_per_metric_with_the_protocols_verdicts() -> None:
    runs = synthetic_runs({"simdissim": 0.0, "all": -0.03, "any": 0.03, "mulsupcon": 0.0, "sim": 0.0, "dissim": 0.0, "none": -0.1, "bce": 0.05, "logreg": -0.05})
    tests = comparison_tests(runs, "simdissim", 0.05, 0.01)
    primary = tests[(tests["family"] == "primary") & (tests["metric"] == "map")]
    assert len(primary) == 9 and (primary["holm_family_size"] == 9).all()
    by_rival = primary.groupby("comparison")["verdict"].agg(set)
    assert by_rival["all"] == {BETTER} and by_rival["any"] == {WORSE} and by_rival["mulsupcon"] == {equivalent(0.01)}
    assert (tests.loc[tests["family"] == "reference", "holm_family_size"] == 9).all()
    assert (tests.loc[tests["family"] == "ablation", "holm_family_size"] == 6).all()
    # Holm p reproducible from the paired differences with statsmodels over the stated family.
    from statsmodels.stats.multitest import multipletests

    pairs = [[runs[(runs.dataset == r.dataset) & (runs.method == m) & (runs.split == "test")].sort_values("seed")["map"] for m in ("simdissim", r.comparison)] for r in primary.itertuples()]
    assert np.allclose(primary["p_holm"], multipletests([stats.ttest_rel(*pair).pvalue for pair in pairs], method="holm")[1])
    assert np.allclose(primary["p_wilcoxon_holm"], multipletests([stats.wilcoxon(*pair).pvalue for pair in pairs], method="holm")[1])
    assert np.allclose(primary["p_permutation_holm"], multipletests(primary["p_permutation"], method="holm")[1])


def test_update_docs_rewrites_blocks_and_check_reports_differences(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("intro\n<!-- claim-report:outcome -->\nold\n<!-- /claim-report:outcome -->\nend\n")
    assert update_docs([doc], {"outcome": "new\n"}, check=True) == [f"{doc}:outcome"]
    assert "old" in doc.read_text()  # --check writes nothing
    assert update_docs([doc], {"outcome": "new\n"}, check=False) == [f"{doc}:outcome"]
    assert doc.read_text() == "intro\n<!-- claim-report:outcome -->\nnew\n<!-- /claim-report:outcome -->\nend\n"
    assert update_docs([doc], {"outcome": "new\n"}, check=True) == []
    doc.write_text("<!-- claim-report:nonsense -->\nx\n<!-- /claim-report:nonsense -->\n")
    with pytest.raises(InputError, match="unknown generated block"):
        update_docs([doc], {"outcome": "new\n"}, check=True)


# ------------------------------------------------------------------------------- export


def write_run(root: Path, method: str, seed: int, commit: str, batch: int = 64, value: float = 0.5, encoder: str = "mlp", epochs: int = 120) -> Path:
    probe = root / encoder / method / f"bs{batch}" / f"seed{seed}" / "probe"
    (probe.parent / "pretrain").mkdir(parents=True)
    probe.mkdir(parents=True)
    section = {"micro_f1": value, "macro_f1_per_class": value - 0.1, "macro_f1": value - 0.1, "map": value + 0.01, "macro_auc": value + 0.2}
    spec = {"dataset": "yeast", "encoder_name": encoder, "loss": method, "batch_size": batch, "seed": seed, "pretrain": {"epochs": epochs}}
    (probe / "metrics.json").write_text(json.dumps({"test": section, "val_best": section, "spec": spec, "macro_f1_definition": "per_class"}))
    for folder in (probe, probe.parent / "pretrain"):
        (folder / "versions.json").write_text(json.dumps({"mscl_commit": commit}))
    return probe / "metrics.json"


def test_export_refuses_runs_of_several_or_uncommitted_versions(tmp_path: Path) -> None:
    from mscl.report.claim_data import export

    paths = [write_run(tmp_path / "a", "all", 0, "c1"), write_run(tmp_path / "a", "any", 0, "c2")]
    with pytest.raises(InputError, match="not by one clean commit"):
        export(paths, [], {}, tmp_path / "out")
    dirty = [write_run(tmp_path / "b", "all", 0, "c1+dirty")]
    with pytest.raises(InputError, match="not by one clean commit"):
        export(dirty, [], {}, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def write_scores_and_stats(root: Path, paths: list[Path]) -> Path:
    """Each run's test scores (4 samples x 2 labels, for the buckets) and a stats.json with the
    training label counts; returns the stats.json."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for path in paths:
        table = pa.table({"id": ["a", "b", "c", "d"], "labels": [["x"], ["x", "y"], [], ["x"]], "scores": pa.FixedSizeListArray.from_arrays(pa.array([0.9, 0.1, 0.8, 0.7, 0.2, 0.3, 0.6, 0.4], pa.float32()), 2)})
        pq.write_table(table.replace_schema_metadata({"mscl.label_names": json.dumps(["x", "y"])}), path.parent / "test_scores.parquet")
    stats_json = root / "stats.json"
    stats_json.write_text(json.dumps({"splits": {"train": {"label_frequency": {"x": 30, "y": 5}}}}))
    return stats_json


def test_export_writes_runs_at_the_main_batch_size_and_the_sweep_apart(tmp_path: Path) -> None:
    from mscl.report.claim_data import export

    paths = [write_run(tmp_path, m, s, "c1") for m in ("all", "simdissim") for s in (0, 1)] + [write_run(tmp_path, "all", 0, "c1", batch=32)]
    stats_json = write_scores_and_stats(tmp_path, paths)
    counts = export(paths, [], {"yeast": stats_json}, tmp_path / "out")
    runs = pd.read_csv(tmp_path / "out" / "runs.csv")
    assert counts["runs.csv"] == len(runs) == 2 * 2 * 2 and set(runs["method"]) == {"all", "simdissim"}
    assert runs["macro_f1"].eq(0.4).all()  # the dataset family's definition (per class)
    assert set(pd.read_csv(tmp_path / "out" / "batch_size.csv")["batch_size"]) == {32, 64}
    buckets = pd.read_csv(tmp_path / "out" / "buckets.csv")
    assert set(zip(buckets["bucket"], buckets["labels"])) == {("head", 1), ("tail", 1)}  # x holds 30 of 35 instances


def test_export_keeps_the_schedule_check_apart_with_one_commit_per_group(tmp_path: Path) -> None:
    """Runs of a second encoder of a dataset (the schedule check) go to schedule.csv and
    schedule_convergence.csv only; each group must be one clean commit, and may be another
    commit than the main runs'."""
    from mscl.report.claim_data import export

    main = [write_run(tmp_path, m, s, "c1") for m in ("all", "simdissim") for s in (0, 1, 2)]
    longer = [write_run(tmp_path, m, s, "c2", encoder="mlp-2x", epochs=240, value=0.6) for m in ("all", "simdissim") for s in (0, 1)]
    (longer[0].parent.parent / "pretrain" / "train_log.csv").write_text("epoch,loss,val_map_readout\n120,1.5,0.41\n240,1.4,0.42\n")
    (main[0].parent.parent / "pretrain" / "train_log.csv").write_text("epoch,loss,val_map_readout\n60,1.6,0.40\n120,1.5,0.41\n")
    stats_json = write_scores_and_stats(tmp_path, main + longer)
    counts = export(main + longer, [], {"yeast": stats_json}, tmp_path / "out")
    runs, schedule = pd.read_csv(tmp_path / "out" / "runs.csv"), pd.read_csv(tmp_path / "out" / "schedule.csv")
    assert counts["runs.csv"] == 2 * 3 * 2 and set(runs["commit"]) == {"c1"} and set(pd.read_csv(tmp_path / "out" / "batch_size.csv")["commit"]) == {"c1"}
    assert len(pd.read_csv(tmp_path / "out" / "buckets.csv")) == 2 * 3 * 2  # main runs only: head and tail
    assert list(schedule.columns) == ["dataset", "method", "encoder", "epochs", "seed", "split", "micro_f1", "macro_f1", "map", "macro_auc", "commit"]
    assert len(schedule) == 2 * 2 * 2 and set(schedule["encoder"]) == {"mlp-2x"} and set(schedule["epochs"]) == {240} and set(schedule["commit"]) == {"c2"}
    assert schedule["micro_f1"].eq(0.6).all()
    convergence = pd.read_csv(tmp_path / "out" / "convergence.csv")
    assert convergence["epoch"].tolist() == [60, 120]
    longer_convergence = pd.read_csv(tmp_path / "out" / "schedule_convergence.csv")
    assert longer_convergence["epoch"].tolist() == [120, 240] and set(longer_convergence["encoder"]) == {"mlp-2x"}
    mixed = longer + [write_run(tmp_path / "c3", "any", 0, "c3", encoder="mlp-2x", epochs=240)]
    write_scores_and_stats(tmp_path / "c3", mixed[-1:])
    with pytest.raises(InputError, match="the schedule-check runs were made by"):
        export(main + mixed, [], {"yeast": stats_json}, tmp_path / "mixed")


def schedule_frame(effects: dict[str, float], shift: float, epochs: int = 50, seeds=range(10), dataset: str = "fashion_mnist", encoder: str = "resnet8-2x") -> pd.DataFrame:
    """schedule.csv rows of one dataset at a longer schedule: synthetic_runs' rows plus `shift`."""
    runs = synthetic_runs(effects, datasets=(dataset,), seeds=seeds)
    for metric in claim.METRICS:
        runs[metric] = runs[metric] + shift
    return runs.assign(encoder=encoder, epochs=epochs)


CORE_EFFECTS = {"simdissim": 0.0, "all": -0.03, "any": 0.03, "mulsupcon": 0.0}


@functools.cache
def core_runs_and_tests() -> tuple[pd.DataFrame, pd.DataFrame]:
    """synthetic_runs of the four core methods (Sim-Dissim better than ALL, worse than ANY,
    equivalent to MulSupCon on every dataset) and their tests, computed once for the tests that
    only read them."""
    runs = synthetic_runs(CORE_EFFECTS)
    return runs, comparison_tests(runs, "simdissim", 0.05, 0.01)


def test_the_schedule_check_repeats_the_primary_comparisons_and_names_a_changed_verdict() -> None:
    main = synthetic_runs({"simdissim": 0.0, "all": -0.03, "any": 0.03, "mulsupcon": 0.0, "bce": 0.1})
    tests = comparison_tests(main, "simdissim", 0.05, 0.01)
    # At the longer schedule ALL catches up (+0.03 + the common shift): better -> equivalent.
    longer = schedule_frame({"simdissim": 0.0, "all": 0.0, "any": 0.03, "mulsupcon": 0.0, "bce": 0.1}, shift=0.02)
    checks = claim.schedule_tests(main, longer, "simdissim", 0.05, 0.01)
    rivals = checks[(checks["family"] == "schedule") & (checks["metric"] == "map")]
    assert len(rivals) == 3 and (rivals["holm_family_size"] == 3).all() and (rivals["epochs"] == 50).all()
    assert set(checks.loc[checks["family"] == "schedule", "metric"]) == set(claim.METRICS)
    by_rival = rivals.set_index("comparison")["verdict"]
    assert by_rival["all"] == equivalent(0.01) and by_rival["any"] == WORSE
    # Doubling: each method's longer-schedule test mAP minus its own at the main schedule, by seed.
    doubling = checks[checks["family"] == "doubling"].set_index("comparison")
    assert set(doubling.index) == {"simdissim", "all", "any", "mulsupcon", "bce"} and (doubling["metric"] == "map").all()
    main_fm = main[(main.dataset == "fashion_mnist") & (main.split == "test")]
    expected = (longer[(longer.method == "all") & (longer.split == "test")].set_index("seed")["map"] - main_fm[main_fm.method == "all"].set_index("seed")["map"]).mean()
    assert doubling.loc["all", "mean_diff"] == pytest.approx(expected) and doubling.loc["all", "holm_family_size"] == 5
    changed = claim.changed_verdicts(tests, checks)
    assert changed == [("fashion_mnist", "all", BETTER, equivalent(0.01), 50)]
    headline = claim.headline_sentence(tests, 0.01, changed)
    assert "The verdict on Fashion-MNIST canvases vs ALL depends on the schedule: better at the main schedule, equivalent within ±1 point at 50 epochs (schedule check)" in headline
    assert "vs ALL better became equivalent within ±1 point" in claim.schedule_check_phrase(tests, checks)
    assert claim.schedule_check_phrase(tests, checks, longer).startswith("Rerun at a longer schedule (commit `abc`, Fashion-MNIST canvases 50 epochs; 3 comparisons)")
    assert "The schedule check was made by commit `abc`; Fashion-MNIST canvases 10 seeds x 5 methods." in claim.provenance_sentence(main, longer)
    verdict_rows = claim.schedule_verdicts_table(tests, checks).splitlines()[2:]
    assert len(verdict_rows) == 3 and verdict_rows[0].startswith("| Fashion-MNIST canvases (50 epochs) | ALL | +3.") and ", better | +0.0" in verdict_rows[0]
    assert verdict_rows[0].endswith(f"{equivalent(0.01)} | no |") and verdict_rows[1].endswith("| yes |")
    same = claim.schedule_tests(main, schedule_frame({"simdissim": 0.0, "all": -0.03, "any": 0.03, "mulsupcon": 0.0}, shift=0.01), "simdissim", 0.05, 0.01)
    assert claim.changed_verdicts(tests, same) == [] and "every verdict held" in claim.schedule_check_phrase(tests, same)
    assert claim.schedule_tests(main, longer.iloc[0:0], "simdissim", 0.05, 0.01).empty


def test_the_readme_says_trained_to_a_plateau_only_when_every_method_plateaued() -> None:
    def plateau(gains: dict[tuple[str, str], float]) -> pd.DataFrame:
        return pd.DataFrame([{"dataset": d, "method": m, "gain_last_third": g} for (d, m), g in gains.items()])

    flat = plateau({("yeast", "all"): 0.001, ("debtags", "bce"): 0.0049})
    assert claim.schedule_phrase(flat) == "schedules trained to a plateau"
    rising = claim.schedule_phrase(plateau({("yeast", "all"): 0.001, ("fashion_mnist", "any"): 0.0168, ("fashion_mnist", "bce"): 0.0089, ("debtags", "bce"): 0.005}))
    assert "trained to a plateau" not in rising and "not all at a plateau" in rising
    assert "Fashion-MNIST canvases: ANY, Supervised BCE; Debtags: Supervised BCE" in rising and "still gained 0.5-1.7 points" in rising
    assert "Yeast" not in rising
    runs, tests = core_runs_and_tests()
    one_rising = plateau({("fashion_mnist", "any"): 0.0168})
    assert "still gained 1.7 points of val mAP" in claim.schedule_phrase(one_rising)  # one number, not "1.7-1.7"
    assert claim.schedule_phrase(one_rising) in claim.readme_paragraph(tests, runs, one_rising, 0.01)
    assert "schedules trained to a plateau and 10 fresh seeds per method, " in claim.readme_paragraph(tests, runs, flat, 0.01)
    sweep = pd.concat([runs.assign(batch_size=64), synthetic_runs(CORE_EFFECTS, datasets=("yeast",), seeds=range(5)).assign(batch_size=32)])
    assert "and 10 fresh seeds per method (5 in the batch-size sweep), " in claim.readme_paragraph(tests, runs, flat, 0.01, batch=sweep)



def test_the_committed_claim_pages_are_generated_from_the_committed_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/claim-check.md and the README's claim paragraph: every generated block equals what
    `claim-report` makes of the committed docs/claim/*.csv (compared with the record
    docs/claim/run_5e5c5b6, as `make claim-publish` does), and tests.csv is reproduced from them;
    the main runs and the schedule check (Amendments 4-6) are one commit with 10 seeds a method."""
    from mscl.__main__ import main as mscl_main

    repo = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(repo)  # the outcome names the --previous folder as given: relative, as the Makefile gives it
    docs = [str(repo / "docs" / "claim-check.md"), str(repo / "README.md")]
    args = ["claim-report", "--data-dir", str(repo / "docs" / "claim"), "--out-dir", str(tmp_path), "--figures-dir", str(tmp_path), "--previous", "docs/claim/run_5e5c5b6"]
    assert mscl_main([*args, "--docs", *docs, "--check"]) == 0
    committed = pd.read_csv(repo / "docs" / "claim" / "tests.csv")
    pd.testing.assert_frame_equal(committed, pd.read_csv(tmp_path / "tests.csv"))
    runs = pd.read_csv(repo / "docs" / "claim" / "runs.csv")
    assert runs["commit"].nunique() == 1 and not runs["commit"].iloc[0].endswith("+dirty")
    schedule = pd.read_csv(repo / "docs" / "claim" / "schedule.csv")
    assert set(schedule["commit"]) == set(runs["commit"])
    for dataset in ("yeast", "fashion_mnist", "debtags"):
        for method in ("all", "any", "mulsupcon", "simdissim", "none", "bce"):
            assert runs[(runs.dataset == dataset) & (runs.method == method) & (runs.split == "test")]["seed"].nunique() >= 10, (dataset, method)
        for method in ("all", "any", "mulsupcon", "simdissim"):  # the schedule check's methods
            assert schedule[(schedule.dataset == dataset) & (schedule.method == method) & (schedule.split == "test")]["seed"].nunique() >= 10, (dataset, method)


@pytest.mark.parametrize(
    ("record", "previous", "runs_commit", "schedule_commit", "schedule_encoders"),
    [
        ("resnet8", None, "65f7299", "750f196", {"resnet8-2x", "mlp-minilm-2x"}),  # the regime Amendment 3 replaced
        ("run_5e5c5b6", "docs/claim/resnet8", "5e5c5b6", "cd6d1db", {"mlp-pixels-2x"}),  # the data Amendment 6's run replaced
    ],
)
def test_a_claim_record_is_regenerated_from_its_own_data(
    record: str, previous: str | None, runs_commit: str, schedule_commit: str, schedule_encoders: set[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record folder under docs/claim/: its report and statistics are what claim-report
    computes from its committed data (compared with the record it was published against),
    byte for byte, and each run group is one commit."""
    repo = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(repo)  # the outcome names the previous folder as given, relative
    folder = repo / "docs" / "claim" / record
    report = claim.compute_report(folder, "simdissim", 0.05, 0.01, claim.Previous.read(Path(previous)) if previous else None)
    for name, text in report.files().items():
        assert text == (folder / name).read_text(encoding="utf-8"), name
    runs, schedule = report.frames["runs"], report.frames["schedule"]
    assert runs["commit"].str.startswith(runs_commit).all() and schedule["commit"].str.startswith(schedule_commit).all()
    assert set(schedule["encoder"]) == schedule_encoders


def test_previous_data_counts_identical_reruns_and_names_each_changed_verdict(tmp_path: Path) -> None:
    """claim-report --previous: a dataset rerun by unchanged code matches value for value, a
    dataset in a new regime does not and says how far its values moved, and each primary mAP
    verdict that moved is named."""
    before, old_tests = core_runs_and_tests()
    after = before.copy()
    moved = after["dataset"] == "fashion_mnist"
    after.loc[moved & (after["method"] == "any"), list(claim.METRICS)] -= 0.06  # ANY: better than Sim-Dissim before, worse now
    after.loc[moved & (after["method"] != "any"), list(claim.METRICS)] += 1e-6  # every other value moves a little
    after["commit"] = "def"
    new_tests = comparison_tests(after, "simdissim", 0.05, 0.01)
    for name, frame in (("runs.csv", before), ("tests.csv", old_tests)):
        frame.to_csv(tmp_path / name, index=False)
    previous = claim.Previous.read(tmp_path)
    sentence = claim.previous_sentence(new_tests, after, previous)
    values = 4 * 10 * 2 * len(claim.METRICS)  # methods x seeds x splits x metrics
    moved = "the others differ by up to 6.00 points, median 0.00"  # ANY by 6 points, a quarter of the values
    assert f"Yeast {values} of {values}; Fashion-MNIST canvases 0 of {values} ({moved}); Debtags {values} of {values}" in sentence
    assert "commit `abc`" in sentence and "1 of 9: Fashion-MNIST canvases vs ANY: worse then, better now" in sentence
    same = claim.previous_sentence(old_tests, before, previous)
    assert "none of 9" in same
    with pytest.raises(InputError, match="--previous"):
        claim.Previous.read(tmp_path / "missing")
    old_tests.drop(columns="verdict").to_csv(tmp_path / "tests.csv", index=False)  # a tests.csv of another kind
    with pytest.raises(InputError, match=r"tests.csv.*'verdict'.*--previous"):
        claim.Previous.read(tmp_path)


def test_load_data_names_a_missing_or_malformed_file_and_reads_an_absent_schedule_check_as_empty(tmp_path: Path) -> None:
    """claim-report's input: every claim-export file but the schedule check's is required; an
    unreadable file or a runs.csv without a required column gets an error naming file and column."""
    record = Path(__file__).resolve().parents[1] / "docs" / "claim" / "resnet8"
    for name in claim.CLAIM_DATA_FILES:
        if name not in ("schedule.csv", "schedule_convergence.csv"):
            (tmp_path / name).write_bytes((record / name).read_bytes())
    frames = claim.load_data(tmp_path)
    assert frames["schedule"].empty and list(frames["schedule"].columns) == list(claim.OPTIONAL_DATA_FILES["schedule.csv"])
    assert len(frames["runs"]) == len(pd.read_csv(record / "runs.csv"))
    pd.read_csv(record / "runs.csv").drop(columns="commit").to_csv(tmp_path / "runs.csv", index=False)
    with pytest.raises(InputError, match=r"runs.csv.*\['commit'\] are missing.*claim-export"):
        claim.load_data(tmp_path)
    (tmp_path / "runs.csv").write_text("")
    with pytest.raises(InputError, match=r"runs.csv.*not a readable CSV"):
        claim.load_data(tmp_path)
    (tmp_path / "tuning.csv").unlink()
    (tmp_path / "runs.csv").write_bytes((record / "runs.csv").read_bytes())
    with pytest.raises(InputError, match=r"tuning.csv.*claim data file not found"):
        claim.load_data(tmp_path)


def test_a_schedule_check_of_one_rival_says_one_comparison_without_holm() -> None:
    """Amendment 4's shape: only ANY and Sim-Dissim at the longer schedule, so one comparison per
    metric; its Holm p is its p, and the sentences say one comparison, not 'Holm over 1'."""
    main, tests = core_runs_and_tests()
    longer = schedule_frame({"simdissim": 0.0, "any": 0.0}, shift=0.02, epochs=300)
    checks = claim.schedule_tests(main, longer, "simdissim", 0.05, 0.01)
    rivals = checks[checks["family"] == "schedule"]
    assert set(rivals["comparison"]) == {"any"} and (rivals["holm_family_size"] == 1).all() and (rivals["p_holm"] == rivals["p"]).all()
    changed = claim.changed_verdicts(tests, checks)
    assert changed == [("fashion_mnist", "any", WORSE, equivalent(0.01), 300)]
    plateau = pd.DataFrame({"dataset": ["fashion_mnist"] * 2, "method": ["any", "simdissim"], "gain_last_third": [0.002, 0.001]})
    sentence = claim.schedule_sentence(checks, plateau, changed, 0.01)
    assert "every rerun method plateaued" in sentence and "(test mAP, one comparison, so no Holm correction): its verdict differs from the one at the main schedule" in sentence
    assert "Holm over 1" not in sentence
    assert "Fashion-MNIST canvases 300 epochs; 1 comparison): Fashion-MNIST canvases vs ANY worse became" in claim.schedule_check_phrase(tests, checks, longer)


@pytest.mark.parametrize("data", ["claim", "claim/resnet8"])
def test_every_claim_figure_keeps_its_text_inside_the_figure(data: str) -> None:
    """Drawn from the committed data (one to three dataset panels): no title, label or legend
    runs off the page; a one-panel figure is a column wide, narrower than a one-line title."""
    import matplotlib.pyplot as plt

    report = claim.compute_report(Path(__file__).resolve().parents[1] / "docs" / data, "simdissim", 0.05, 0.01)
    for name, draw in claim.report_figures(report, "simdissim").items():
        figure = draw()
        assert_drawn_inside(figure, name)
        plt.close(figure)


def assert_drawn_inside(figure, name: str) -> None:
    """Everything drawn (titles, labels, legends) lies inside the figure's page."""
    figure.canvas.draw()
    drawn = figure.get_tightbbox(figure.canvas.get_renderer())  # inches: everything drawn, titles included
    width, height = figure.get_size_inches()
    assert drawn.x0 >= -0.01 and drawn.y0 >= -0.01 and drawn.x1 <= width + 0.01 and drawn.y1 <= height + 0.01, (name, drawn.bounds, (width, height))


def test_the_outcome_names_each_verdict_a_rank_or_permutation_test_would_change_and_each_small_gain() -> None:
    """The declared verdicts stay the t-test's; the outcome names each one the same rule would
    change with the Wilcoxon or permutation Holm p, apart for the outcome's verdicts and the other
    metrics', counts those of too few seeds for such a test, and lists the small "better"s."""
    def row(label, family, n, mean, ci_low, verdict, wilcoxon, permutation, tost, stated=True, context=""):
        return dict(label=label, family=family, dataset="yeast", context=context, n=n, mean_diff=mean, ci_low=ci_low, ci_high=2 * mean - ci_low,
                    verdict=verdict, p_holm=0.01, p_wilcoxon_holm=wilcoxon, p_permutation_holm=permutation, p_tost_holm=tost, stated=stated)  # fmt: skip

    verdicts = pd.DataFrame([
        row("A", "primary", 10, 0.02, 0.015, BETTER, 0.001, 0.002, 0.9),
        row("B", "ablation", 10, 0.007, 0.002, BETTER, 0.06, 0.04, 0.3),
        row("C", "reference", 10, 0.003, 0.001, BETTER, 0.08, 0.07, 0.01, stated=False),
        row("D", "batch_size", 5, 0.03, 0.02, BETTER, 0.75, 0.75, 0.9, context="batch 32"),
        row("E", "batch_size", 5, 0.001, -0.01, INCONCLUSIVE, 0.75, 0.75, 0.2, context="batch 32"),
    ])  # fmt: skip
    text = claim.robustness_sentence(verdicts, 0.05, 0.01)
    assert "would change 1 of the verdicts above: B: better by the t-test, inconclusive by Wilcoxon, better by permutation (none in the primary test-mAP family)." in text
    assert "In the tables of the other metrics it would change 1: C: better by the t-test, equivalent within ±1 point by both." in text
    assert "With 5 seeds (Yeast batch 32) no two-sided rank or sign-flip test can reach p < 0.0625, so the better or worse verdicts there (1 of 2" in text
    assert "D:" not in text and "A:" not in text
    gains = claim.small_gains_sentence(verdicts, 0.01)
    assert gains.endswith("the verdicts stay as declared): B +0.70 [+0.20, +1.20].")
    assert "A " not in gains and "C " not in gains


def test_a_schedule_check_of_several_datasets_is_tested_and_told_per_dataset() -> None:
    """Amendment 6's shape: Fashion-MNIST at 300 epochs, yeast at 240 and debtags at 30, each a
    Holm family of its own per metric (3 rivals), so no sentence says "Holm over 9"; every table,
    sentence and the figure name each dataset with its own schedule."""
    import matplotlib.pyplot as plt
    from statsmodels.stats.multitest import multipletests

    main, tests = core_runs_and_tests()
    schedules = {"fashion_mnist": ("mlp-pixels-2x", 150), "yeast": ("mlp-2x", 120), "debtags": ("mlp-minilm-2x", 15)}
    longer = pd.concat([  # ALL catches up on yeast only: better -> equivalent there (seeds 1-10: other noise than the main runs')
        schedule_frame({**CORE_EFFECTS, "all": 0.0} if d == "yeast" else CORE_EFFECTS, 0.01, 2 * e, range(1, 11) if d == "yeast" else range(10), d, encoder)
        for d, (encoder, e) in schedules.items()
    ])  # fmt: skip
    checks = claim.schedule_tests(main, longer, "simdissim", 0.05, 0.01)
    rivals = checks[(checks["family"] == "schedule") & (checks["metric"] == "map")]
    assert len(rivals) == 9 and (rivals["holm_family_size"] == 3).all()
    for _, block in rivals.groupby("dataset"):
        assert np.allclose(block["p_holm"], multipletests(block["p"], method="holm")[1])
    assert rivals.groupby("dataset")["epochs"].first().to_dict() == {"fashion_mnist": 300, "yeast": 240, "debtags": 30}
    doubling = checks[checks["family"] == "doubling"]
    assert len(doubling) == 12 and (doubling["holm_family_size"] == 4).all()
    changed = claim.changed_verdicts(tests, checks)
    assert changed == [("yeast", "all", BETTER, equivalent(0.01), 240)]

    def curves(epochs_of: dict[str, int], encoder: bool) -> pd.DataFrame:
        return pd.DataFrame([
            {"dataset": d, "method": m, "seed": 0, "epoch": epoch, "val_map_readout": 0.4 + epoch / 1e4, **({"encoder": schedules[d][0]} if encoder else {})}
            for d, epochs in epochs_of.items() for m in CORE_EFFECTS for epoch in (epochs // 3, 2 * epochs // 3, epochs)
        ])  # fmt: skip

    main_curves, longer_curves = curves({d: e for d, (_, e) in schedules.items()}, False), curves({d: 2 * e for d, (_, e) in schedules.items()}, True)
    longer_plateau = claim.schedule_plateau(longer_curves)
    sentence = claim.schedule_sentence(checks, longer_plateau, changed, 0.01)
    assert "(test mAP, Holm within each dataset, over its 3): better 2, worse 3, equivalent within ±1 point 4, inconclusive 0; 1 of 9 verdicts differ" in sentence
    assert "Holm over 9" not in sentence
    assert all(f"{name} ({epochs} epochs): Sim-Dissim " in sentence for name, epochs in (("Fashion-MNIST canvases", 300), ("Yeast", 240), ("Debtags", 30)))
    table = claim.schedule_table(checks, longer_plateau, main, longer, claim.plateau_frame(main_curves))
    assert "| Yeast | ALL | 120 → 240 |" in table and "| Debtags | Sim-Dissim | 15 → 30 |" in table and "| Fashion-MNIST canvases | ANY | 150 → 300 |" in table
    verdict_rows = claim.schedule_verdicts_table(tests, checks).splitlines()[2:]
    assert len(verdict_rows) == 9 and [r for r in verdict_rows if r.endswith("| no |")][0].startswith("| Yeast (240 epochs) | ALL |")
    phrase = claim.schedule_check_phrase(tests, checks, longer)
    assert "Fashion-MNIST canvases 300 epochs, Yeast 240 epochs, Debtags 30 epochs; 9 comparisons): Yeast vs ALL better became equivalent" in phrase
    assert "Yeast 10 seeds x 4 methods, Fashion-MNIST canvases 10 seeds x 4 methods, Debtags 10 seeds x 4 methods." in claim.provenance_sentence(main, longer)
    labels = claim.verdict_frame(tests, pd.DataFrame(), pd.DataFrame(), checks)["label"]
    assert {"Yeast vs ALL (240 epochs, mAP)", "Debtags vs ANY (30 epochs, Micro-F1)"} <= set(labels)
    figure = claim.schedule_figure(main_curves, longer_curves)
    assert [ax.get_title() for ax in figure.axes] == ["Yeast (1 seeds)", "Fashion-MNIST canvases (1 seeds)", "Debtags (1 seeds)"]
    assert_drawn_inside(figure, "claim_schedule")
    plt.close(figure)

