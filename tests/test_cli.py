"""The `python -m mscl` dispatcher and the Eq. 12 demonstration command."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mscl import cli
from mscl.__main__ import COMMANDS, main
from mscl.bench import BENCHMARKS

# What `--help` and a usage error must never import (each costs 0.3 to 2 s of start-up).
HEAVY = ("torch", "pandas", "transformers", "matplotlib", "sklearn", "torchvision")
# `python -m mscl ARGS`, run by runpy as -m does (its final os._exit turned into SystemExit);
# prints the exit code, stdout, stderr and which HEAVY modules got imported.
RUN_MSCL = """
import contextlib, io, json, os, runpy, sys
args, watched = json.loads(sys.argv[1]), json.loads(sys.argv[2])
def exit_as_system_exit(code):  # mscl.__main__.leave ends with os._exit; report instead
    raise SystemExit(code)
os._exit = exit_as_system_exit
sys.argv = ["mscl", *args]
out, err = io.StringIO(), io.StringIO()
try:
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        runpy.run_module("mscl", run_name="__main__", alter_sys=True)
    code = 0
except SystemExit as stop:
    code = stop.code
heavy = sorted(name for name in watched if name in sys.modules)
print(json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue(), "heavy": heavy}))
"""
BENCH_COMMANDS = [f"bench {name}" for name in BENCHMARKS]


def run_mscl(args: list[str]) -> dict:
    result = subprocess.run([sys.executable, "-c", RUN_MSCL, json.dumps(args), json.dumps(HEAVY)], capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def test_help_lists_every_command(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert name in out


def test_unknown_command_exits_2(capsys):
    assert main(["no-such-command"]) == 2
    assert "unknown command 'no-such-command'" in capsys.readouterr().err


def test_input_errors_exit_1_with_the_message(tmp_path, capsys):
    missing = tmp_path / "nowhere"
    code = main(["prepare-aapd", "--root", str(missing), "--out", str(tmp_path / "out")])
    assert code == 1
    err = capsys.readouterr().err
    assert "mscl prepare-aapd: error:" in err and str(missing) in err


def test_eq12_command_shows_literal_form_has_any_gradients():
    result = subprocess.run(
        [sys.executable, "-m", "mscl", "eq12", "--batch", "12", "--labels", "6"],
        capture_output=True, text=True, check=True,
    )
    values = {}
    for line in result.stdout.splitlines():
        key, value = line.rsplit(maxsplit=1)
        values[key.strip()] = float(value)
    assert values["max |grad(literal) - grad(any)|"] == 0.0
    assert values["max |grad(weighted) - grad(any)|"] > 1e-3
    assert values["loss(literal) - loss(any)"] > 0.0


def test_every_command_has_a_light_parser():
    """`bench` dispatches to its benchmarks, each of which has a parser of its own."""
    assert set(cli.commands()) == (set(COMMANDS) - {"bench"}) | set(BENCH_COMMANDS)


@pytest.mark.parametrize("command", [*COMMANDS, *BENCH_COMMANDS])
def test_help_answers_without_heavy_imports(command):
    result = run_mscl([*command.split(), "--help"])
    assert result["code"] == 0, result["err"]
    assert result["out"].startswith(f"usage: python -m mscl {command}")
    assert result["heavy"] == []


@pytest.mark.parametrize("command", [c for c in [*COMMANDS, *BENCH_COMMANDS] if c in cli.commands() and any(a.required for a in cli.build_parser(c)._actions)])
def test_usage_errors_answer_without_heavy_imports(command):
    result = run_mscl(command.split())  # no arguments: a required one is missing
    assert result["code"] == 2
    assert f"usage: python -m mscl {command}" in result["err"] and "error: the following arguments are required" in result["err"]
    assert result["heavy"] == []


def test_main_parses_before_importing_the_command(capsys):
    """A usage error exits 2 from the light parser, as the module's own main would."""
    with pytest.raises(SystemExit) as stop:
        main(["pretrain", "--data", "d"])
    assert stop.value.code == 2
    assert "--spec" in capsys.readouterr().err


def test_bench_help_and_unknown_benchmark(capsys):
    from mscl.bench import main as bench_main

    assert bench_main(["--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: python -m mscl bench {losses,")
    assert bench_main(["nope"]) == 2
    assert "usage: python -m mscl bench" in capsys.readouterr().err


LEAVE = """
import atexit, sys, threading, time
from mscl.__main__ import leave
atexit.register(lambda: print("atexit ran", file=sys.stderr))
sys.stdout.write("x" * 100_000)  # a pipe: block-buffered, not yet written
threading.Thread(target=lambda: (time.sleep(0.3), print("thread done", file=sys.stderr))).start()
leave(int(sys.argv[1]))
"""


@pytest.mark.parametrize("code", [0, 3])
def test_leave_runs_atexit_handlers_flushes_output_and_keeps_the_exit_status(code):
    """`python -m mscl` ends through `leave`: no interpreter teardown, but nothing a normal exit
    delivers is lost (a running non-daemon thread, buffered stdout, atexit handlers) and the
    command's status is the process's."""
    result = subprocess.run([sys.executable, "-c", LEAVE, str(code)], capture_output=True, text=True)
    assert result.returncode == code
    assert result.stdout == "x" * 100_000 and "atexit ran" in result.stderr
    assert result.stderr.index("thread done") < result.stderr.index("atexit ran")  # threads joined first, as at a normal exit


def test_the_module_entry_point_exits_through_leave_with_mains_status():
    help_ = subprocess.run([sys.executable, "-m", "mscl", "--help"], capture_output=True, text=True)
    unknown = subprocess.run([sys.executable, "-m", "mscl", "no-such-command"], capture_output=True, text=True)
    assert help_.returncode == 0 and "usage: python -m mscl" in help_.stdout
    assert unknown.returncode == 2 and "unknown command" in unknown.stderr
