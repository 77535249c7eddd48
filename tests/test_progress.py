"""`python -m mscl progress` (mscl.progress) on a made-up grid: what Snakemake's summary, its
marks and locks, the jobs' logs, benchmark files and versions.json say. A real run watched
while it trains: tests/test_workflow.py (the Ctrl-C test)."""

from __future__ import annotations

import base64
import io
import json
import os
from pathlib import Path

import pytest

from mscl.progress import (
    SUMMARY_HEADER,
    Bookkeeping,
    Output,
    encoded_paths,
    judge,
    parse_summary,
    report,
    training_jobs,
)

RESULTS = Path("results")
BENCHMARK_HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time"
NOW = 2_000_000_000.0


def snakemake_record_name(key: str, name_max: int = 255) -> Path:
    """Where Snakemake keeps the record of output `key` under incomplete/ or metadata/: its path
    in URL-safe base64, cut into pieces of name_max - 1 characters, all but the last a folder
    prefixed with "@" (snakemake.persistence.file)."""
    encoded = base64.urlsafe_b64encode(key.encode()).decode()
    pieces = [encoded[i : i + name_max - 1] for i in range(0, len(encoded), name_max - 1)]
    return Path(*(["@" + piece for piece in pieces[:-1]] + [pieces[-1]]))


def summary_text(rows: list[tuple[str, str, bool, str]]) -> str:
    """`snakemake --summary --dry-run` output: a message line, the header, then (path, rule,
    exists, plan) rows."""
    lines = ["Building DAG of jobs...", "\t".join(SUMMARY_HEADER)]
    for path, rule, exists, plan in rows:
        lines.append("\t".join([path, "Mon Nov 30 10:00:00 2026" if exists else "-", rule, "-", "ok" if exists else "missing", plan]))
    return "\n".join(lines) + "\n"


def finished(folder: Path, stage: str, name: str, wall_s: float, cpu_s: float, device: str, world_size: int = 1) -> None:
    """A finished job's outputs' folder, versions.json and benchmark file."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "versions.json").write_text(json.dumps({"device": device, "world_size": world_size}))
    benchmark = RESULTS / "benchmarks" / stage / f"{name}.tsv"
    benchmark.parent.mkdir(parents=True, exist_ok=True)
    benchmark.write_text(f"{BENCHMARK_HEADER}\n{wall_s}\t0:00:00\t100\t200\t0\t0\t0\t0\t0\t{cpu_s}\n")


def job_log(stage: str, name: str, text: str) -> None:
    log = RESULTS / "logs" / stage / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(text)


def mark(output: str, since: float, cluster_job: str | None = None) -> None:
    path = Path(".snakemake/incomplete") / snakemake_record_name(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"external_jobid": cluster_job}))
    os.utime(path, (since, since))  # the mark's age is the job's run time


@pytest.fixture
def grid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Output]:
    """A grid in the middle of its run, in the working folder `tmp_path` (see each line)."""
    monkeypatch.chdir(tmp_path)
    run = "results/runs/{}/pretrain/encoder.pt", "results/runs/{}/probe/metrics.json"
    rows = []

    def job(name: str, stage: int, rule: str, exists: bool, plan: str = "no update") -> str:
        path = run[stage].format(name)
        rows.append((path, rule, exists, plan))
        return path

    # Done: two 2-GPU pretrainings (1 h and 0.5 h of wall time) and a CPU probe (0.5 CPU hours).
    for name, wall in (("coco/resnet8/any/bs32/seed0", 3600.0), ("coco/resnet8/msc/bs32/seed0", 1800.0)):
        job(name, 0, "pretrain", True)
        finished(Path(run[0].format(name)).parent, "pretrain", name, wall, 50.0, "cuda", world_size=2)
    job("coco/resnet8/any/bs32/seed0", 1, "probe", True)
    finished(Path(run[1].format("coco/resnet8/any/bs32/seed0")).parent, "probe", "coco/resnet8/any/bs32/seed0", 600.0, 1800.0, "cpu")
    # Running for 15 min, on SLURM, at epoch 2 of 10.
    running = job("coco/resnet8/simdissim/bs32/seed0", 0, "pretrain", False)
    mark(running, NOW - 900, cluster_job="4711")
    folder = Path(running).parent
    folder.mkdir(parents=True)
    (folder / "resolved_spec.json").write_text(json.dumps({"pretrain": {"epochs": 10}}))
    (folder / "train_log.csv").write_text("epoch,loss\n1,5.0\n2,4.0\n")
    # Failed: its log ends with the error.
    job("coco/resnet8/msc/bs32/seed0", 1, "probe", False, "update pending")
    job_log("probe", "coco/resnet8/msc/bs32/seed0", "probe epoch 1/5\nRuntimeError: CUDA out of memory\nmscl job-server worker usage: cpu_s=1\n")
    # To go: a probe of a finished kind, voc (only other datasets' jobs compare), a tuning run
    # and an encoder with nothing finished (unknown).
    job("coco/resnet8/simdissim/bs32/seed0", 1, "probe", False, "update pending")
    job("voc/resnet8/any/bs32/seed0", 0, "pretrain", False, "update pending")
    job("voc/resnet8/any/bs32/seed0", 1, "probe", False, "update pending")
    rows.append(("results/tuning/coco/resnet8/simdissim/bs32/lr0.1/seed7/pretrain/encoder.pt", "tuning_pretrain", False, "update pending"))
    job("aapd/minilm/any/bs32/seed0", 0, "pretrain", False, "update pending")
    # Outputs of other rules: the label prior (a probe-format folder, no training job) and a table.
    rows.append(("results/runs/coco/chance/chance/bs0/seed0/probe/metrics.json", "chance", True, "no update"))
    rows.append(("results/tables/image.csv", "paper_table", False, "update pending"))
    Path(".snakemake/locks").mkdir(parents=True)
    Path(".snakemake/locks/0.output.lock").write_text("results/tables/image.csv\n")  # a Snakemake runs
    return parse_summary(summary_text(rows))


def progress_report(outputs: list[Output], jobs_at_once: int | None = None) -> str:
    jobs, others = training_jobs(outputs, RESULTS)
    bookkeeping = Bookkeeping.read(Path(".snakemake"))
    for job in jobs:
        judge(job, bookkeeping, RESULTS)
    out = io.StringIO()
    report(jobs, others, RESULTS, jobs_at_once, NOW, out)
    return out.getvalue()


def test_the_table_counts_each_state_per_dataset_encoder_and_stage(grid: list[Output]) -> None:
    lines = progress_report(grid).splitlines()
    assert lines[0] == "5 runs and 1 tuning run in results (the workflow's grid, from snakemake --summary)"
    table = [line.split() for line in lines[2:9]]
    assert table == [
        ["dataset", "encoder", "stage", "done", "running", "interrupted", "failed", "to", "go", "of"],
        ["aapd", "minilm", "pretrain", "0", "0", "0", "0", "1", "1"],
        ["coco", "resnet8", "pretrain", "2", "1", "0", "0", "0", "3"],
        ["coco", "resnet8", "probe", "1", "0", "0", "1", "1", "3"],
        ["coco", "resnet8", "tuning", "pretrain", "0", "0", "0", "0", "1", "1"],
        ["voc", "resnet8", "pretrain", "0", "0", "0", "0", "1", "1"],
        ["voc", "resnet8", "probe", "0", "0", "0", "0", "1", "1"],
    ]
    assert lines[9] == "other outputs: 1 of 2 to make (paper_table 1)"


def test_running_and_failed_jobs_say_where_they_are_and_what_to_read(grid: list[Output]) -> None:
    text = progress_report(grid)
    assert ("  coco/resnet8/simdissim/bs32/seed0 pretrain: epoch 2 of 10, 15 min so far, cluster job 4711 "
            "(log: results/logs/pretrain/coco/resnet8/simdissim/bs32/seed0.log)") in text  # fmt: skip
    assert "Failed, read the log (1):\n  coco/resnet8/msc/bs32/seed0 probe: log results/logs/probe/coco/resnet8/msc/bs32/seed0.log\n    RuntimeError: CUDA out of memory\n" in text


def test_device_hours_spent_and_left_come_from_comparable_finished_jobs(grid: list[Output]) -> None:
    text = progress_report(grid)
    # 1 h x 2 GPUs + 0.5 h x 2 GPUs; the CPU probe's 1800 CPU seconds.
    assert "Spent: 3.00 GPU-hours, 0.5 CPU-hours by 3 finished training jobs" in text
    # Left, by the means of finished jobs (pretrain: 2700 s and 1.5 GPU h; probe: 600 s, 0.5 CPU h):
    # the running pretraining has 1800 of 2700 s left (1.0 GPU h), the voc pretraining and the tuning
    # run count 1.5 GPU h each, three probes 0.5 CPU h each; 9000 s of wall time at the 1 job running.
    assert ("Left: 7 training jobs; for 6 of them about 4.00 GPU-hours and 1.50 CPU-hours, 2.5 h of wall time at 1 job(s) "
            "at once (the number running now; --jobs N for another) (~ 2 of them from other datasets' jobs)") in text  # fmt: skip
    assert "Unknown for 1 job, nothing comparable has finished (dataset/encoder: jobs): aapd/minilm 1" in text
    assert "1.2 h of wall time at 2 job(s) at once (--jobs" in progress_report(grid, jobs_at_once=2)


def test_without_a_running_snakemake_a_marked_job_is_interrupted(grid: list[Output]) -> None:
    Path(".snakemake/locks/0.output.lock").unlink()
    text = progress_report(grid)
    assert "Interrupted (no Snakemake runs; the next run reruns them, pretraining resumes from its checkpoint) (1):" in text
    assert "  coco/resnet8/simdissim/bs32/seed0 pretrain: epoch 2 of 10, log results/logs/pretrain/coco/resnet8/simdissim/bs32/seed0.log" in text


def test_a_finished_grid_has_nothing_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    name = "coco/resnet8/any/bs32/seed0"
    finished(Path(f"results/runs/{name}/pretrain"), "pretrain", name, 60.0, 120.0, "cpu")
    outputs = parse_summary(summary_text([(f"results/runs/{name}/pretrain/encoder.pt", "pretrain", True, "no update")]))
    text = progress_report(outputs)
    assert "Spent: 0 GPU-hours, 0.0333 CPU-hours by 1 finished training job" in text
    assert text.rstrip().endswith("Left: nothing, every training job of the grid is done")


def test_snakemakes_record_names_decode_to_the_outputs_long_paths_included(tmp_path: Path) -> None:
    short, long = "results/runs/a/pretrain/encoder.pt", "results/" + "x" * 300 + "/probe/metrics.json"
    for key in (short, long):
        path = tmp_path / snakemake_record_name(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
    (tmp_path / "migration_underway").write_text("")  # Snakemake's flag, no record
    assert sorted(key for _, key in encoded_paths(tmp_path)) == sorted([short, long])


def test_a_summary_without_its_table_is_refused() -> None:
    with pytest.raises(ValueError, match="no summary table"):
        parse_summary("Building DAG of jobs...\nWorkflowError: bad config\n")

