"""`mscl bench dag`: a finished run's wall time split into training, overhead, other jobs, idle."""

from __future__ import annotations

from pathlib import Path

from mscl.bench.dag import breakdown, main
from mscl.report.claim import cost_block

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
[Mon Nov 23 11:18:04 2026]
rule cache_prefix:
    output: data/processed/aapd/prefix/e.pt
    log: results/logs/prefix/aapd/e.log
    jobid: 8
[Mon Nov 23 11:18:10 2026]
Finished jobid: 8 (Rule: cache_prefix)
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

    prefix_log = tmp_path / "results/logs/prefix/aapd/e.log"
    prefix_log.parent.mkdir(parents=True)
    prefix_log.write_text("cache-prefix: train: 90 samples, 900 tokens, 3.0 s\ncache-prefix: test: 10 samples, 99 tokens, 1.0 s\n")
    prefix_bench = tmp_path / "results/benchmarks/prefix/aapd/e.tsv"
    prefix_bench.parent.mkdir(parents=True)
    prefix_bench.write_text("s\th:m:s\tmax_rss\tcpu_time\n6.0\t0:00:06\t900\t5.0\n")

    table, slowest, cores = breakdown(log, Path("results"), tmp_path)
    assert cores == 2
    seconds = dict(zip(table["part"], table["core_seconds"]))
    # 40 s wall x 2 cores = 80; pretrain: 29 s (benchmark) of which 19 s training; cache_prefix:
    # 6 s of which 4 s prefix passes; make_demo: 4 s.
    assert seconds["training compute"] == 23.0
    assert seconds["training-job overhead (start-up, set-up, outputs)"] == 12.0
    assert seconds["other jobs (data, tables, figures)"] == 4.0
    assert seconds["scheduling and idle cores"] == 80.0 - 23.0 - 12.0 - 4.0
    assert table["share_percent"].iloc[0] == round(100 * 23 / 80, 1)
    assert slowest["rule"].tolist()[:3] == ["pretrain", "cache_prefix", "make_demo"]

    assert main(["--log", str(log), "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "non-training share of the wall time: 71.2%" in out
    # CPU seconds from the benchmarks (28 + 5); make_demo has none and is named as not counted.
    assert "CPU time of the 2 jobs with a benchmark: 33 core-seconds; on 2 idle cores" in out and "(1 jobs without a benchmark not counted)" in out


TUNING_SEGMENT = """Provided cores: 2
[Tue Nov 24 23:00:00 2026]
rule tuning_pretrain:
    output: results/tuning/yeast/mlp/any/bs64/lr0.1/seed100/pretrain/encoder.pt
    log: results/logs/tuning/pretrain/yeast/mlp/any/bs64/lr0.1/seed100.log
    jobid: 3
[Tue Nov 24 23:00:10 2026]
Finished jobid: 3 (Rule: tuning_pretrain)
"""


def test_tuning_runs_count_as_training_and_a_resumed_run_sums_its_segments(tmp_path: Path, capsys) -> None:
    first, second = tmp_path / "first.snakemake.log", tmp_path / "second.snakemake.log"
    first.write_text(SNAKEMAKE_LOG)
    second.write_text(TUNING_SEGMENT)
    job_log = tmp_path / "results/logs/tuning/pretrain/yeast/mlp/any/bs64/lr0.1/seed100.log"
    job_log.parent.mkdir(parents=True)
    job_log.write_text("pretrain epoch 1/1: loss 1.0, lr 0.1, 50 samples/s, epoch 6.0 s, elapsed 6.0 s\n")

    table, jobs, _ = breakdown(second, Path("results"), tmp_path)
    seconds = dict(zip(table["part"], table["core_seconds"]))
    # 10 s wall x 2 cores; the tuning job's 10 s (no benchmark file: its stamps) hold 6 s of training.
    assert seconds["training compute"] == 6.0 and seconds["training-job overhead (start-up, set-up, outputs)"] == 4.0
    assert jobs["rule"].tolist() == ["tuning_pretrain"]

    assert main(["--log", str(first), str(second), "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "segment 1: first.snakemake.log" in out and "segment 2: second.snakemake.log" in out
    # the sum: capacity 80 + 20 core-seconds, training 0 (no pretrain log here) + 6
    total = out.split("all 2 segments:")[1]
    assert total.split("capacity (the 2 segments)")[1].split()[:2] == ["100.0", "100.0"]
    assert "non-training share of the wall time: 94.0%" in total
    per_rule = out.split("per rule (jobs")[1].split("slowest jobs")[0]
    assert "tuning_pretrain" in per_rule and "make_demo" in per_rule

    # The claim page's Cost block names a segmented run as such: its sum is no timing of the DAG.
    (tmp_path / "segmented").mkdir()
    (tmp_path / "segmented" / "dag_cost.txt").write_text(out)
    assert "which ran in 2 segments" in cost_block(tmp_path / "segmented")
    assert main(["--log", str(first), "--workdir", str(tmp_path)]) == 0
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "dag_cost.txt").write_text(capsys.readouterr().out)
    assert "on the measured run of the whole DAG:" in cost_block(tmp_path / "one")


def test_training_cpu_is_summed_per_dataset_and_encoder_with_tuning_apart() -> None:
    import pandas as pd

    from mscl.bench.dag import per_dataset

    jobs = pd.DataFrame([
        {"rule": "pretrain", "job": "results/claim/logs/pretrain/yeast/mlp/any/bs64/seed0.log", "seconds": 30.0, "cpu_seconds": 20.0},
        {"rule": "probe", "job": "results/claim/logs/probe/yeast/mlp/any/bs64/seed0.log", "seconds": 2.0, "cpu_seconds": 1.0},
        {"rule": "tuning_pretrain", "job": "results/claim/logs/tuning/pretrain/yeast/mlp/any/bs64/lr0.1/seed100.log", "seconds": 30.0, "cpu_seconds": 19.0},
        {"rule": "pretrain", "job": "results/claim/logs/pretrain/fashion_mnist/resnet8-2x/all/bs64/seed0.log", "seconds": 99.0, "cpu_seconds": 90.0},
        {"rule": "prepare_yeast", "job": "results/claim/logs/preprocess/yeast.log", "seconds": 2.0, "cpu_seconds": float("nan")},
    ])  # fmt: skip
    table = per_dataset(jobs).set_index(["dataset", "encoder"])
    assert table.loc[("yeast", "mlp")].tolist() == [3, 19.0, 21.0, 0.7]
    assert table.loc[("fashion_mnist", "resnet8-2x")].tolist() == [1, 0.0, 90.0, 1.5]
    assert len(table) == 2  # the preprocessing job is no training run
