"""Fault injection over a real run, the short version (tools/fault_injection.py; the full one's
figures are in docs/faults.md): a slice of the embedded default (COCO-demo with ResNet-8, AAPD-
demo with the MiniLM stand-in; pretrain and probe through Snakemake) runs once undisturbed,
then once more with one fault of every kind injected at a random time (SIGKILL to a training
job, a job-server worker, the job server and Snakemake; SIGINT to Snakemake), rerunning the
documented command until it completes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

from fault_injection import KINDS, fault_injection  # noqa: E402


@pytest.mark.slow
def test_a_run_hit_by_every_kind_of_fault_ends_with_the_undisturbed_runs_metrics(tmp_path):
    outcome = fault_injection(tmp_path / "faults", faults_per_kind=1, seed=0, quick=True, reuse_data=True)
    summary = outcome.summary()
    assert summary["faults_injected"] == {kind: 1 for kind in KINDS}, summary
    # Every test metric and test score equals the undisturbed run's, every round completed.
    assert all(r["completed"] and r["metrics_equal"] and r["scores_equal"] for r in outcome.rounds), outcome.rounds
    # No process of any attempt outlived it; no temporary or partial file remains.
    assert summary["processes_outliving_their_run"] == 0, [a.survivors for a in outcome.attempts]
    assert all(not r["leftovers"] and not r["extra_files"] and not r["missing_files"] for r in outcome.rounds), outcome.rounds
    assert summary["passed"]
