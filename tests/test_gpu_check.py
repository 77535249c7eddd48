"""The GPU check made safe (tools/gpu_check.sh, `bench gpu`, docs/gpu.md): a case that raises
costs its own row, a stage that hangs its own limit, SIGTERM ends a pytest session, and the
limits fit the device call. The full-budget rehearsal is docs/records/gpu_check_rehearsal_6e8659a.txt."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mscl.errors import InputError
from mscl.interrupt import EXIT_TERMINATED

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tools" / "gpu_check.sh"
DEVICE_CALL_S = 560  # docs/gpu.md: run(..., timeout_s=560)
BUDGET_S = 520  # of it, what the check may take in the worst case


def environment(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("T_", "GPU_CHECK_", "MSCL_BENCH_GPU_FAULTS", "MSCL_TEST_HANG"))}
    return {**env, "PYTHONPATH": str(REPO / "src"), **extra}


def run_check(tmp_path: Path, timeout: float, **extra: str) -> tuple[subprocess.CompletedProcess, float]:
    env = environment(PYTHON=sys.executable, OUT=str(tmp_path / "out"), WORK=str(tmp_path / "work"), **extra)
    started = time.monotonic()
    result = subprocess.run(["bash", str(SCRIPT)], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    return result, time.monotonic() - started


def test_a_failing_case_costs_only_its_own_row_and_earlier_rows_stay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """`bench gpu` with the resnet50 case made to raise: its row holds the error, the losses case
    after it still runs, the exit status is 1; what another run left in --json (a row, the
    decode figures) stays, a row of a case measured again is replaced, and --table shows it all."""
    from mscl.bench import main as bench_main

    out, table = tmp_path / "rows.json", tmp_path / "table.txt"
    earlier = {"case": "plm-icd", "what": "an earlier run's row", "pipeline_samples_per_s": 10.0, "bare_samples_per_s": 20.0}
    stale = {"case": "losses L=87", "what": "measured again now"}
    out.write_text(json.dumps({"device": "bench gpu: CPU", "rows": [earlier, stale], "decode": ["decode: an earlier run's figures"]}))
    monkeypatch.setenv("MSCL_BENCH_GPU_FAULTS", "resnet50:raise")
    argv = ["gpu", "--device", "cpu", "--cases", "resnet50", "losses", "--repeats", "1", "--json", str(out), "--table", str(table)]
    assert bench_main(argv) == 1
    saved = json.loads(out.read_text())
    assert [(row["case"], row["error"]) for row in saved["rows"]] == [
        ("plm-icd", None),
        ("resnet50", "RuntimeError: resnet50: fault injected by MSCL_BENCH_GPU_FAULTS"),
        ("losses L=87", None),
        ("losses L=252", None),
    ]
    assert saved["rows"][0]["ratio"] == 0.5 and saved["rows"][1]["pipeline_samples_per_s"] is None and saved["rows"][1]["ratio"] is None
    assert all(row["bare_samples_per_s"] > 0 for row in saved["rows"][2:])
    assert saved["decode"] == ["decode: an earlier run's figures"]
    text = table.read_text()
    assert text.startswith("bench gpu: CPU; torch ") and text.rstrip().endswith("decode: an earlier run's figures")
    assert "| plm-icd " in text and "FAILED: RuntimeError: resnet50: fault injected" in text and "| losses L=252 " in text
    captured = capsys.readouterr()
    assert "Traceback" in captured.err and "1 case(s) failed: resnet50" in captured.err


def test_a_fault_spec_that_names_no_case_is_an_error() -> None:
    from mscl.bench.gpu import injected_faults

    assert injected_faults(" decode:hang, losses:raise ") == {"decode": "hang", "losses": "raise"}
    with pytest.raises(InputError, match="'resnet:raise' is not CASE:KIND"):
        injected_faults("resnet:raise")
    with pytest.raises(InputError, match="'losses:crash' is not CASE:KIND"):
        injected_faults("losses:crash")


def test_sigterm_ends_the_pytest_session_inside_a_training_commands_handler(tmp_path: Path) -> None:
    """A test hung after installing pretrain's SIGTERM handler (tests/gpu_check_hang.py): SIGTERM
    ends the session within the check's kill margin, prints the summary, and the test after it
    does not run (before tests/conftest.py's hooks pytest went on to it until SIGKILL)."""
    command = [sys.executable, "-m", "pytest", "tests/gpu_check_hang.py", "-v", "-s", "-p", "no:cacheprovider"]
    pytest_run = subprocess.Popen(command, cwd=REPO, env=environment(MSCL_TEST_HANG="1"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        for line in pytest_run.stdout:
            lines.append(line)
            if "gpu_check_hang: hanging" in line:
                break
        pytest_run.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        lines += pytest_run.stdout.readlines()
        pytest_run.wait(timeout=30)
        seconds = time.monotonic() - signalled
    finally:
        pytest_run.kill()
    output = "".join(lines)
    assert "gpu_check_hang: hanging" in output
    assert "Interrupted: SIGTERM during tests/gpu_check_hang.py::test_hangs_inside_a_training_commands_sigterm_handler" in output
    assert "pytest went on" not in output and "test_runs_only_if_pytest_went_on_after_sigterm" not in output
    assert "1 failed" in output and pytest_run.returncode == EXIT_TERMINATED
    assert seconds < 3, f"pytest took {seconds:.1f} s to end after SIGTERM (the check's kill margin is 3 s)"


def test_the_limits_fit_the_device_call_and_a_spent_budget_skips_what_is_left(tmp_path: Path) -> None:
    """The script's own limits, every one spent with its kill margin, fit the budget, and the
    budget the call. With no budget left every command is skipped, not started."""
    result, seconds = run_check(tmp_path, 60, GPU_CHECK_BUDGET="1")
    summary = (tmp_path / "out" / "gpu_check_summary.txt").read_text()
    head = re.search(r"limits: (.*), kill margin (\d+) s each", summary)
    limits = {name: int(value) for name, value in re.findall(r"([a-z0-9-]+) (\d+)", head.group(1))}
    assert list(limits) == ["install", "nvidia-smi", "probe", "data", "resnet50", "roberta-base", "tests",
                            "resnet50-cpu-decode", "llama-lora", "plm-icd", "losses", "decode"]  # fmt: skip
    assert sum(limits.values()) + len(limits) * int(head.group(2)) <= BUDGET_S < DEVICE_CALL_S
    assert result.returncode != 0 and seconds < 10
    spent = "SKIPPED: the budget of 1 s is spent"
    assert f"probe: {spent}" in summary and all(f"== {name}: {spent} in 0 s" in summary for name in list(limits)[3:])
    assert re.search(r"did not pass: (install )?probe data resnet50 roberta-base tests resnet50-cpu-decode llama-lora plm-icd losses decode ", summary)


@pytest.mark.slow
def test_a_hung_stage_and_a_raising_case_cost_only_their_own_rows(tmp_path: Path) -> None:
    """Three stages of the check at toy sizes with tiny limits: the tests stage hangs (the test of
    tests/gpu_check_hang.py) and is stopped at its limit, the resnet50 case raises; the losses
    rows after them are measured and the summary has every stage's line, inside the limits.
    Takes 15-50 s (four Python starts that import torch; the latter on a loaded 2-core machine)."""
    stages = {"tests": 5, "resnet50": 90, "losses": 90}
    kill_after = 10  # SIGTERM during torch's import waits for it: a margin for a loaded machine
    limits = {f"T_{name.upper()}": str(limit) for name, limit in stages.items()}
    result, seconds = run_check(tmp_path, 400, GPU_CHECK_STAGES=" ".join(stages), GPU_CHECK_KILL_AFTER=str(kill_after), T_PROBE="90",
                                MSCL_TEST_HANG="1", MSCL_BENCH_GPU_FAULTS="resnet50:raise", **limits)  # fmt: skip
    out = tmp_path / "out"
    summary = (out / "gpu_check_summary.txt").read_text()
    assert result.returncode == 1, summary
    assert re.search(r"== tests: TIMED OUT at its limit of 5 s in [0-9.]+ s", summary)
    assert re.search(r"== resnet50: FAILED \(exit 1\) in [0-9.]+ s", summary) and re.search(r"== losses: ok in [0-9.]+ s", summary)
    assert "gpu_check: 2 did not pass: tests resnet50" in summary
    rows = json.loads((out / "bench_gpu.json").read_text())["rows"]
    assert [row["case"] for row in rows] == ["resnet50", "losses L=87", "losses L=252"]
    assert rows[0]["error"] == "RuntimeError: resnet50: fault injected by MSCL_BENCH_GPU_FAULTS" and rows[1]["bare_samples_per_s"] > 0
    assert "FAILED: RuntimeError: resnet50: fault injected" in summary and "| losses L=87 " in summary and "| losses L=252 " in summary
    assert "packages: torch " in summary and all(f", {name} " in summary for name in ("pyarrow", "scipy", "scikit-learn", "pytest"))
    assert sorted(path.name for path in out.iterdir()) == ["bench.log", "bench_gpu.json", "gpu_check_summary.txt", "prologue.log", "tests.log"]
    took = {name: float(value) for name, value in re.findall(r"== ([a-z0-9-]+): .*? in ([0-9.]+) s \(limit", summary)}
    assert took["tests"] < stages["tests"] + kill_after
    worst = sum(stages.values()) + 90 + 15 + (len(stages) + 2) * kill_after  # the stages, probe and install, each with its margin
    assert seconds < worst
