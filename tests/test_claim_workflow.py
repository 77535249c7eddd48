"""The claim check through Snakemake: config/claim.yaml's DAG (dry run) and a tiny yeast version
end to end, from river's yeast file through tuning, selection on val and the test seeds to the
data files and the statistics."""

from __future__ import annotations

import json
import re
import subprocess

import pandas as pd
import pytest
import yaml

from mscl import layout
from test_workflow import REPO, job_counts, job_env, snakemake, snakemake_command


def test_claim_dry_run_is_the_documented_grid(tmp_path):
    """As docs/claim-check.md says, per dataset: 4 contrastive losses x 6 settings + BCE x 6
    settings, each on 2 tuning seeds (180 tuning runs), one selection per tuned method (15),
    and the test runs: yeast 10 methods x 10 seeds plus the batch-size sweep (4 losses x 3
    sizes x 5 seeds), Fashion-MNIST 7 methods (no ablation) and debtags 9 methods x 10 seeds,
    and the schedule checks of Amendments 4-6 (ALL, ANY, MulSupCon and Sim-Dissim at twice the
    schedule x 10 seeds on each dataset, with the selections made for the main encoder: no
    tuning runs of their own).
    Fashion-MNIST's canvases become pixel vectors (Amendment 3) and debtags' descriptions
    sentence embeddings, each once."""
    result = subprocess.run(
        snakemake_command(tmp_path, "-n", "--configfile", str(REPO / "config" / "claim.yaml")),
        capture_output=True, text=True, env=job_env(),
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    counts = job_counts(output)
    assert counts["tuning_pretrain"] == counts["tuning_probe"] == 3 * (4 * 6 + 6) * 2
    assert counts["select_setting"] == 3 * 5
    assert counts["probe"] == 10 * 10 + 4 * 3 * 5 + 7 * 10 + 9 * 10 + 3 * 4 * 10
    # The untrained references (none, logreg) of the three datasets' test runs x 10 seeds save
    # their initial encoder (rule initial_encoder); every other run pretrains.
    assert counts["initial_encoder"] == 3 * 2 * 10 and counts["pretrain"] == counts["probe"] - counts["initial_encoder"]
    assert "results/claim/runs/fashion_mnist/mlp-pixels/simdissim/bs64/seed9/probe/metrics.json" in output
    assert "results/claim/runs/fashion_mnist/mlp-pixels-2x/any/bs64/seed9/probe/metrics.json" in output
    assert "results/claim/runs/yeast/mlp-2x/mulsupcon/bs64/seed9/probe/metrics.json" in output
    assert "results/claim/runs/debtags/mlp-minilm-2x/all/bs128/seed0/probe/metrics.json" in output
    assert "data/processed/fashion_mnist_images/stats.json" in output
    for rule in ("prepare_yeast", "prepare_debtags", "embed_debtags", "prepare_fashion_mnist", "pixels_fashion_mnist", "claim_export", "claim_report", "statistics_table"):
        assert counts[rule] == 1, rule
    assert "paper_table" not in counts and "collect_runs" not in counts and "local_models" not in counts
    assert "results/claim/claim_check/tests.csv" in output and "results/claim/claim_check/data/runs.csv" in output
    # The workflow's claim files are the ones claim-export and claim-report write (mscl.layout).
    assert set(re.findall(r"results/claim/claim_check/data/([\w.]+)", output)) == set(layout.CLAIM_DATA_FILES)
    assert set(re.findall(r"results/claim/claim_check/(claim_\w+)\.png", output)) == set(layout.CLAIM_FIGURE_NAMES)


def tiny_config() -> dict:
    config = yaml.safe_load((REPO / "config" / "claim.yaml").read_text())
    config["datasets"] = ["yeast"]
    config["paths"]["results"] = "results"
    mlp = config["encoders"]["mlp"]
    mlp["pretrain"].update(epochs=2, monitor_every=1)
    mlp["tune"] = {"contrastive": {"temperature": [0.1, 0.2]}, "bce": {"lr": [0.001, 0.003]}}
    config["training"] = {"probe": {"epochs": 5, "select_metric": "map"}}
    config["tuning"]["seeds"] = [100]
    config["report"]["claim"]["allow_mixed_commits"] = True  # the suite may run from a dirty tree
    config["experiments"] = {
        "yeast": {"datasets": ["yeast"], "encoders": ["mlp"], "losses": ["all", "any", "simdissim", "sim", "eq12", "none", "bce", "logreg"],
                  "batch_sizes": [64], "seeds": [0, 1, 2], "tune": True},
        "yeast_batch": {"datasets": ["yeast"], "encoders": ["mlp"], "losses": ["all", "simdissim"], "batch_sizes": [32], "seeds": [0, 1],
                        "tune": True, "tune_batch_size": 64},
        "yeast_schedule": {"datasets": ["yeast"], "encoders": ["mlp-2x"], "losses": ["simdissim", "bce"], "batch_sizes": [64], "seeds": [0, 1],
                           "tune": True, "tune_encoder": "mlp"},
    }  # fmt: skip
    config["encoders"] = {"mlp": mlp, "mlp-2x": {**mlp, "pretrain": {**mlp["pretrain"], "epochs": 4}}}
    del config["encoders"]["mlp-2x"]["tune"]
    return config


@pytest.mark.slow
def test_tiny_yeast_claim_check_end_to_end(tmp_path):
    """Real yeast, a 2-setting grid on one tuning seed, 8 methods x 3 test seeds and a batch-size
    block: tuned settings are chosen on val and reused as the protocol says, Eq. 12 reproduces ANY
    seed for seed, and every data file and statistic is written."""
    config_file = tmp_path / "tiny_claim.yaml"
    config_file.write_text(yaml.safe_dump(tiny_config()))
    snakemake(tmp_path, "--configfile", str(config_file))
    results = tmp_path / "results"

    selected = {m: json.loads((results / "tuning" / "yeast" / "mlp" / m / "bs64" / "selected.json").read_text()) for m in ("all", "any", "simdissim", "bce")}
    assert not (results / "tuning" / "yeast" / "mlp" / "sim").exists()  # sim reuses simdissim's choice
    assert {entry["setting"] for entry in selected["simdissim"]["grid"]} == {"temperature0.1", "temperature0.2"}
    best = max(selected["simdissim"]["grid"], key=lambda entry: entry["per_seed"]["100"])
    assert selected["simdissim"]["chosen"] == best["setting"] and selected["simdissim"]["seeds"] == [100]

    def spec_of(method: str, batch: int = 64, seed: int = 0) -> dict:
        return json.loads((results / "runs" / "yeast" / "mlp" / method / f"bs{batch}" / f"seed{seed}" / "probe" / "metrics.json").read_text())["spec"]

    assert spec_of("simdissim")["pretrain"]["temperature"] == selected["simdissim"]["pretrain"]["temperature"]
    assert spec_of("sim")["pretrain"]["temperature"] == selected["simdissim"]["pretrain"]["temperature"]
    assert spec_of("eq12")["pretrain"]["temperature"] == selected["any"]["pretrain"]["temperature"]
    assert spec_of("bce")["pretrain"]["lr"] == selected["bce"]["pretrain"]["lr"]
    assert spec_of("all", batch=32)["pretrain"]["temperature"] == selected["all"]["pretrain"]["temperature"]  # chosen at 64
    # The schedule block takes mlp's selections (no tuning of its own) at its own epochs.
    assert not (results / "tuning" / "yeast" / "mlp-2x").exists()
    longer = json.loads((results / "runs" / "yeast" / "mlp-2x" / "bce" / "bs64" / "seed1" / "probe" / "metrics.json").read_text())["spec"]
    assert (longer["pretrain"]["lr"], longer["pretrain"]["epochs"], longer["tuned_encoder"]) == (selected["bce"]["pretrain"]["lr"], 4, "mlp")

    data = results / "claim_check" / "data"
    runs = pd.read_csv(data / "runs.csv")
    assert list(runs.columns) == ["dataset", "method", "seed", "split", "micro_f1", "macro_f1", "map", "macro_auc", "commit"]
    assert len(runs) == 8 * 3 * 2 and runs["commit"].nunique() == 1
    assert ((runs[["micro_f1", "map"]] >= 0) & (runs[["micro_f1", "map"]] <= 1)).all().all()
    # Eq. 12 as printed has ANY's gradients: with ANY's setting, identical metrics on real data.
    eq12, any_ = (runs[runs["method"] == m].set_index(["seed", "split"]).sort_index()[["micro_f1", "macro_f1", "map", "macro_auc"]] for m in ("eq12", "any"))
    assert eq12.equals(any_)
    assert set(pd.read_csv(data / "batch_size.csv")["batch_size"]) == {32, 64}
    buckets = pd.read_csv(data / "buckets.csv")
    assert set(buckets["bucket"]) == {"head", "tail"} and (buckets.groupby(["method", "seed"])["labels"].sum() == 14).all()
    convergence = pd.read_csv(data / "convergence.csv")
    assert set(convergence["epoch"]) == {1, 2} and "none" not in set(convergence["method"])
    assert len(pd.read_csv(data / "tuning.csv")) == 4 * 2  # 4 tuned methods x 2 settings x 1 seed
    probes = pd.read_csv(data / "probes.csv")
    assert len(probes) == 8 * 3 and (probes["epochs"] == 5).all() and probes["best_epoch"].between(1, 5).all()

    tests = pd.read_csv(results / "claim_check" / "tests.csv")
    primary = tests[tests["family"] == "primary"]
    assert set(primary["comparison"]) == {"all", "any"} and (primary["n"] == 3).all()
    assert set(tests.loc[tests["family"] == "reference", "comparison"]) == {"none", "bce", "logreg"}
    assert (primary.groupby("metric")["holm_family_size"].max() == 2).all()
    assert set(tests["verdict"]) <= {"better", "worse", "equivalent within ±1 point", "inconclusive"}
    # The schedule block stays out of runs.csv; its rows and monitor checks have files of their own.
    schedule = pd.read_csv(data / "schedule.csv")
    assert len(schedule) == 2 * 2 * 2 and set(schedule["encoder"]) == {"mlp-2x"} and set(schedule["epochs"]) == {4}
    assert set(pd.read_csv(data / "schedule_convergence.csv")["epoch"]) == {1, 2, 3, 4}
    doubling = pd.read_csv(results / "claim_check" / "schedule_tests.csv")
    assert set(doubling["family"]) == {"doubling"} and set(doubling["comparison"]) == {"simdissim", "bce"} and (doubling["n"] == 2).all()
    report = (results / "claim_check" / "claim_report.md").read_text()
    assert "identical to ANY on all 3 seeds" in report and "**Schedule check (longer schedules" in report
    for name in ("claim_differences", "claim_convergence", "claim_batch_size", "claim_long_tail", "claim_schedule"):
        assert (results / "claim_check" / f"{name}.png").stat().st_size > 1000


@pytest.mark.parametrize(
    ("overlay", "tuning", "test_runs"),
    [
        ("claim_quick.yaml", 3 * 30 * 1, 10 + 4 * 3 + 7 + 9 + 3 * 4),  # one tuning seed; one test seed per block
        ("claim_gpu.yaml", 3 * 30 * 2, 10 * 10 + 4 * 3 * 5 + 7 * 10 + 8 * 10 + 3 * 4 * 10),  # debtags on text: no logreg
    ],
)
def test_the_quick_and_gpu_tiers_are_the_claim_grid_with_their_documented_changes(tmp_path, overlay, tuning, test_runs):
    config_files = [str(REPO / "config" / "claim.yaml"), str(REPO / "config" / overlay)]
    result = subprocess.run(snakemake_command(tmp_path, "-n", "--configfile", *config_files), capture_output=True, text=True, env=job_env())
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    counts = job_counts(output)
    assert counts["tuning_pretrain"] == tuning and counts["select_setting"] == 15
    # The untrained references (none, logreg) save their initial encoder instead of pretraining.
    assert counts["pretrain"] + counts["initial_encoder"] == counts["probe"] == test_runs
    # The GPU tier trains on the images and the text themselves; the quick tier on the CPU tier's vectors.
    assert ("embed_debtags" in counts) == ("pixels_fashion_mnist" in counts) == (overlay == "claim_quick.yaml")


@pytest.mark.parametrize(
    ("tune_encoder", "message"),
    [
        ("resnet9", "names 'resnet9', which is not a key of `encoders`"),
        ("mlp", "'mlp' has another `spec` than 'mlp-pixels-2x'"),
    ],
)
def test_a_schedule_block_must_reuse_the_selection_of_the_same_network(tmp_path, tune_encoder, message):
    """The claim config's schedule check (Amendment 4) with another `tune_encoder`: its longer
    encoder may only reuse the selection of an encoder with the same network."""
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(yaml.safe_dump({"experiments": {"fashion_mnist_schedule": {"tune_encoder": tune_encoder}}}))
    configs = [str(REPO / "config" / "claim.yaml"), str(overlay)]
    result = subprocess.run(snakemake_command(tmp_path, "-n", "--configfile", *configs), capture_output=True, text=True, env=job_env())
    output = result.stdout + result.stderr
    assert result.returncode != 0 and message in output and "Fix:" in output
    assert "invalid config key `experiments.fashion_mnist_schedule.tune_encoder` in" in output


def test_the_convergence_pilot_builds_its_runs_from_the_claim_config() -> None:
    """tools/claim_convergence_pilot.py (how the schedules were fixed): from config/claim.yaml,
    per dataset asked for, one run per trained method on tuning seed 100 at the grid's lowest
    learning rate (and weight decay) and middle temperature, the asked-for epochs, the monitor
    on. Its training runs were checked by hand (yeast, 2 epochs); this keeps the config reading
    in step with the config."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("claim_convergence_pilot", REPO / "tools" / "claim_convergence_pilot.py")
    pilot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pilot)
    config = yaml.safe_load((REPO / "config" / "claim.yaml").read_text())
    runs = pilot.pilot_specs(config, {"yeast": 40, "debtags": 3})
    assert [(d, m) for d, m, _ in runs] == [(d, m) for d in ("yeast", "debtags") for m in ("all", "any", "mulsupcon", "simdissim", "bce")]
    yeast = {m: s for d, m, s in runs if d == "yeast"}
    grid = config["encoders"][yeast["all"]["encoder_name"]]["tune"]
    assert yeast["all"]["pretrain"]["lr"] == min(grid["contrastive"]["lr"])
    assert yeast["all"]["pretrain"]["temperature"] == sorted(grid["contrastive"]["temperature"])[1]
    assert yeast["bce"]["pretrain"]["weight_decay"] == min(grid["bce"]["weight_decay"]) and "temperature" not in yeast["bce"]["pretrain"]
    assert all(s["seed"] == 100 and s["pretrain"]["epochs"] == 40 and s["pretrain"]["monitor_every"] == 2 for s in yeast.values())
