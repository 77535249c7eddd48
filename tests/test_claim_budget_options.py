"""tools/claim_budget_options.py: the re-priced claim DAG from its jobs' CPU and wall seconds, on a
results tree laid out as the workflow lays it out (mscl.layout), with hand-summable costs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from mscl import layout

REPO = Path(__file__).resolve().parents[1]
MINUTE = 60  # every cost below is in CPU minutes, written as seconds
BENCHMARK_HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def write_job(results: Path, stage: str, name: str, cpu_s: float, tuning: bool = False) -> None:
    """A finished job: its log ends with the job-server worker's usage line (CPU seconds), and
    its benchmark file says a different CPU time that the worker's figure must override, and a
    wall time of three times the worker's CPU time."""
    log = Path(layout.job_log(str(results), stage, name, tuning=tuning))
    benchmark = Path(layout.job_benchmark(str(results), stage, name, tuning=tuning))
    for path in (log, benchmark):
        path.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"pretrain epoch 1/1: loss 1.0\nmscl job-server worker usage: cpu_s={cpu_s * MINUTE} max_rss_mib=100.0\n")
    benchmark.write_text(BENCHMARK_HEADER + f"{cpu_s * 3 * MINUTE}\t0:00:01\t100\t1\t1\t1\t0\t0\t50\t999.0\n")


def test_budget_options_sum_the_jobs_per_dataset_and_reprice_tuning_seeds_the_sweep_and_the_schedules(tmp_path: Path) -> None:
    results = tmp_path / "results"
    config = {"experiments": {
        "yeast": {"datasets": ["yeast"], "encoders": ["mlp"], "batch_sizes": [64]},
        "yeast_batch_size": {"datasets": ["yeast"], "encoders": ["mlp"], "batch_sizes": [32]},
        "fashion_mnist": {"datasets": ["fashion_mnist"], "encoders": ["mlp-pixels"], "batch_sizes": [64]},
        "fashion_mnist_schedule": {"datasets": ["fashion_mnist"], "encoders": ["mlp-pixels-2x"], "batch_sizes": [64]},
    }, "encoders": {"mlp-pixels": {"pretrain": {"epochs": 150}}, "mlp-pixels-2x": {"pretrain": {"epochs": 300}}}}  # fmt: skip
    (tmp_path / "claim.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    for seed in (100, 101):  # tuning: yeast 2 x (60 + 6) = 132, Fashion-MNIST 2 x (120 + 6) = 252
        for dataset, encoder, pretrain in (("yeast", "mlp", 60.0), ("fashion_mnist", "mlp-pixels", 120.0)):
            name = f"{dataset}/{encoder}/simdissim/bs64/lr0.001-temperature0.1/seed{seed}"
            write_job(results, "pretrain", name, pretrain, tuning=True)
            write_job(results, "probe", name, 6.0, tuning=True)
    write_job(results, "pretrain", "yeast/mlp/simdissim/bs64/seed0", 30.0)  # test: yeast 30 + 3 + sweep 40 + 4 = 77
    write_job(results, "probe", "yeast/mlp/simdissim/bs64/seed0", 3.0)
    write_job(results, "pretrain", "yeast/mlp/simdissim/bs32/seed0", 40.0)
    write_job(results, "probe", "yeast/mlp/simdissim/bs32/seed0", 4.0)
    write_job(results, "pretrain", "fashion_mnist/mlp-pixels-2x/any/bs64/seed0", 50.0)  # the schedule check: 50 + 5 = 55
    write_job(results, "probe", "fashion_mnist/mlp-pixels-2x/any/bs64/seed0", 5.0)
    # Fashion-MNIST's test runs at the main schedule: ANY 24 + 3 (the schedule check reran it),
    # supervised BCE 18 + 2 (not rerun: its pretraining priced at 300 / 150 times its cost, its probe as it is), `none` 1 + 1 (untrained)
    for method, pretrain, probe in (("any", 24.0, 3.0), ("bce", 18.0, 2.0), ("none", 1.0, 1.0)):
        write_job(results, "pretrain", f"fashion_mnist/mlp-pixels/{method}/bs64/seed0", pretrain)
        write_job(results, "probe", f"fashion_mnist/mlp-pixels/{method}/bs64/seed0", probe)
    bench = results / "benchmarks" / "preprocess" / "debtags_embed.tsv"
    bench.parent.mkdir(parents=True)
    bench.write_text(BENCHMARK_HEADER + "100\t0:01:40\t1\t1\t1\t1\t0\t0\t50\t3600.0\n")

    command = [sys.executable, str(REPO / "tools" / "claim_budget_options.py"), "--results", str(results), "--config", str(tmp_path / "claim.yaml")]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    assert "yeast tuning 7920, test 4620; fashion_mnist tuning 15120, test 2940; the batch-size sweep (among the test runs) 2640; the schedule check 3300; preprocessing 3600" in output
    whole = 132 + 77 + 252 + 49 + 55 + 60  # CPU minutes
    preprocessing_wall = 100 / MINUTE  # the embedding's benchmark: 100 s of wall for 3600 s of CPU
    rows = {line[:56].strip(): line[56:].split() for line in output.splitlines() if line.startswith(("the DAG", "with", "without", "one tuning", "only"))}
    expected = {
        "the DAG as run (2 tuning seeds)": whole,
        "with one tuning seed instead of two": whole - (132 + 252) / 2,
        "without the batch-size sweep": whole - 44,
        "with one tuning seed and without the batch-size sweep": whole - (132 + 252) / 2 - 44,
        "without the schedule check": whole - 55,
        "without the batch-size sweep and the schedule check": whole - 44 - 55,
        "one tuning seed, no batch-size sweep, no schedule check": whole - (132 + 252) / 2 - 44 - 55,
        "only the longer schedule, no batch-size sweep (estimate)": whole - 44 - 27 + 18 * (300 / 150 - 1),
    }
    # each row: core-minutes, CPU minutes / 2 cores, the jobs' wall minutes / 2 cores
    wall = {name: 3 * (m - 60) + preprocessing_wall for name, m in expected.items()}
    assert {name: [float(v) for v in values] for name, values in rows.items()} == {name: [round(m), round(m / 2), round(wall[name] / 2)] for name, m in expected.items()}
