"""The `python -m mscl` dispatcher and the Eq. 12 demonstration command."""

from __future__ import annotations

import subprocess
import sys

from mscl.__main__ import COMMANDS, main


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
