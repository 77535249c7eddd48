"""The claim check through Snakemake: config/claim.yaml's DAG (dry run) and a tiny yeast version
end to end, from river's yeast file to the paired statistics."""

from __future__ import annotations

import subprocess

import pandas as pd
import pytest
import yaml

from test_workflow import REPO, job_counts, job_env, snakemake, snakemake_command

METHODS = ["all", "any", "mulsupcon", "simdissim", "sim", "dissim", "none", "bce"]


def test_claim_dry_run_is_the_documented_grid(tmp_path):
    """As docs/claim-check.md says: 8 methods x (10 yeast seeds + 5 Fashion-MNIST seeds + 5
    debtags seeds), one pretrain and one probe job each (in an empty working directory)."""
    result = subprocess.run(
        snakemake_command(tmp_path, "-n", "--configfile", str(REPO / "config" / "claim.yaml")),
        capture_output=True, text=True, env=job_env(),
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    counts = job_counts(output)
    runs = len(METHODS) * (10 + 5 + 5)
    assert counts["pretrain"] == counts["probe"] == runs
    for rule in ("prepare_yeast", "prepare_debtags", "prepare_fashion_mnist", "collect_runs", "claim_report", "statistics_table"):
        assert counts[rule] == 1, rule
    assert "paper_table" not in counts and "make_demo" not in counts and "tiny_models" not in counts
    assert "results/claim/claim_check/claim_outcome.md" in output


@pytest.mark.slow
def test_tiny_yeast_claim_check_end_to_end(tmp_path):
    """Real yeast, 3 methods x 3 seeds of a few epochs: every claim artifact, paired by seed."""
    config = yaml.safe_load((REPO / "config" / "claim.yaml").read_text())
    config["datasets"] = ["yeast"]
    config["paths"]["results"] = "results"
    config["encoders"]["mlp"]["pretrain"]["epochs"] = 2
    config["training"] = {"probe": {"epochs": 5}}
    config["experiments"] = {
        "yeast": {"datasets": ["yeast"], "encoders": ["mlp"], "losses": ["simdissim", "all", "none"], "batch_sizes": [64], "seeds": [0, 1, 2]}
    }
    config_file = tmp_path / "tiny_claim.yaml"
    config_file.write_text(yaml.safe_dump(config))
    snakemake(tmp_path, "--configfile", str(config_file))

    stats = (tmp_path / "results" / "tables" / "statistics.md").read_text()
    assert "| Yeast | 1.2k | 300 | 917 | 14 | 4.2 | - |" in stats  # tabular row; not a paper dataset
    tests = pd.read_csv(tmp_path / "results" / "claim_check" / "claim_tests.csv")
    assert set(tests["method"]) == {"all", "none"} and set(tests["reference"]) == {"simdissim"}
    assert (tests["n_pairs"] == 3).all()
    summary = pd.read_csv(tmp_path / "results" / "claim_check" / "claim_summary.csv")
    assert set(summary["method"]) == {"simdissim", "all", "none"} and (summary["n_seeds"] == 3).all()
    outcome = (tmp_path / "results" / "claim_check" / "claim_outcome.md").read_text()
    assert "Yeast" in outcome and "ALL" in outcome
    assert (tmp_path / "results" / "claim_check" / "claim_differences.png").stat().st_size > 1000
