"""`mscl bench dag`: a finished run's wall time split into training, overhead, other jobs, idle."""

from __future__ import annotations

from pathlib import Path

from mscl.bench.dag import breakdown, main

SNAKEMAKE_LOG = """Building DAG of jobs...
Provided cores: 2
Execute 2 jobs...
[Mon Nov 23 11:18:00 2026]
localrule make_demo:
    output: data/raw/demo/aapd
    log: results/logs/demo/aapd.log
    jobid: 5
    reason: Missing output files
[Mon Nov 23 11:18:00 2026]
rule pretrain:
    input: data/processed/aapd/train.parquet
    output: results/runs/aapd/e/any/bs8/seed0/pretrain/encoder.pt
    log: results/logs/pretrain/aapd/e/any/bs8/seed0.log
    jobid: 7
[Mon Nov 23 11:18:04 2026]
Finished jobid: 5 (Rule: make_demo)
[Mon Nov 23 11:18:30 2026]
Finished jobid: 7 (Rule: pretrain)
[Mon Nov 23 11:18:40 2026]
Finished jobid: 0 (Rule: all)
"""


def test_the_run_is_split_into_training_overhead_other_jobs_and_idle(tmp_path: Path, capsys) -> None:
    log = tmp_path / "run.snakemake.log"
    log.write_text(SNAKEMAKE_LOG)
    job_log = tmp_path / "results/logs/pretrain/aapd/e/any/bs8/seed0.log"
    job_log.parent.mkdir(parents=True)
    job_log.write_text(
        "pretrain epoch 1/2: loss 1.0, lr 0.1, 50 samples/s, epoch 9.0 s, elapsed 9.5 s\n"
        "pretrain epoch 2/2: loss 0.9, lr 0.0, 50 samples/s, epoch 9.0 s, elapsed 19.0 s\n"
    )
    bench = tmp_path / "results/benchmarks/pretrain/aapd/e/any/bs8/seed0.tsv"
    bench.parent.mkdir(parents=True)
    bench.write_text("s\th:m:s\tmax_rss\tcpu_time\n29.0\t0:00:29\t900\t28.0\n")

    table, slowest = breakdown(log, Path("results"), tmp_path)
    seconds = dict(zip(table["part"], table["core_seconds"]))
    # 40 s wall x 2 cores = 80; pretrain: 29 s (benchmark) of which 19 s training; make_demo: 4 s.
    assert seconds["training compute"] == 19.0
    assert seconds["training-job overhead (start-up, set-up, outputs)"] == 10.0
    assert seconds["other jobs (data, tables, figures)"] == 4.0
    assert seconds["scheduling and idle cores"] == 80.0 - 19.0 - 10.0 - 4.0
    assert table["share_percent"].iloc[0] == round(100 * 19 / 80, 1)
    assert slowest["rule"].tolist()[:2] == ["pretrain", "make_demo"]

    assert main(["--log", str(log), "--workdir", str(tmp_path)]) == 0
    assert "non-training share of the wall time: 76.2%" in capsys.readouterr().out
