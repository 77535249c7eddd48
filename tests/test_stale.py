"""`python -m mscl stale` (mscl.stale): finished runs whose record names code, distributions or
plugins that changed since, what reads them, and the command that reruns exactly them.

A results tree is written here with the records today's code makes (mscl.provenance), then one
record or file is changed per test, as a later edit of the code or the stack would leave it.
The whole workflow's side (a real run's records, and Snakemake planning the printed command)
is in tests/test_workflow.py's mini grid.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mscl import stale
from mscl.provenance import PACKAGE_DIR, provenance

RUN = "results/runs/coco/resnet8/{loss}/bs32/seed0"
CHANCE_RUN = "results/runs/coco/chance/chance/bs0/seed0"


@pytest.fixture(scope="module")
def today() -> dict:
    """What a job made by today's code records (this process has imported the losses)."""
    import mscl.losses  # noqa: F401

    return provenance()


def write_json(path: Path, document: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))


def finished_job(folder: Path, final: str, record: dict) -> None:
    write_json(folder / "versions.json", record)
    (folder / final).write_text("done")


@pytest.fixture
def tree(tmp_path, today) -> Path:
    """A config and what it made: a prepared dataset, two runs, the label prior."""
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump({"paths": {"results": "results", "processed": "data/processed"}}))
    finished_job(tmp_path / "data/processed/coco", "stats.json", today)
    for loss in ("any", "simdissim"):
        finished_job(tmp_path / RUN.format(loss=loss) / "pretrain", "encoder.pt", today)
        finished_job(tmp_path / RUN.format(loss=loss) / "probe", "metrics.json", today)
    finished_job(tmp_path / CHANCE_RUN / "probe", "metrics.json", today)
    return tmp_path


def run_stale(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mscl", "stale", *args], cwd=workdir, capture_output=True, text=True, timeout=120)


def edit_record(path: Path, change) -> None:
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))


def forcerun_targets(stdout: str) -> list[str]:
    [command] = [line.strip() for line in stdout.splitlines() if line.strip().startswith("snakemake")]
    return command.split("--forcerun ", 1)[1].split()


def test_runs_made_by_todays_code_are_not_stale(tree):
    done = run_stale(tree, "--configfile", "mine.yaml")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0 of 3 runs stale"


def test_a_changed_file_a_pretraining_ran_makes_its_run_stale_and_names_the_file(tree):
    pretrain = tree / RUN.format(loss="any") / "pretrain" / "versions.json"
    edit_record(pretrain, lambda record: record["code"]["files"].update({"mscl/losses.py": "0" * 64}))
    done = run_stale(tree, "--configfile", "mine.yaml")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[0] == f"{RUN.format(loss='any')}: pretrain: mscl/losses.py changed; probe: reads the stale pretrain"
    assert "1 of 3 runs stale" in lines
    # Only the pretraining is named: its probe, then the tables, rerun after it.
    assert forcerun_targets(done.stdout) == [f"{RUN.format(loss='any')}/pretrain/encoder.pt"]
    assert "snakemake --configfile mine.yaml --forcerun" in done.stdout


def test_a_file_gone_a_distribution_moved_and_another_python_are_each_named(tree):
    probe = tree / RUN.format(loss="simdissim") / "probe" / "versions.json"

    def age(record):
        record["code"]["files"]["mscl/old_module.py"] = "1" * 64
        record["imported_distributions"]["torch"] = "0.0.1"
        record["imported_distributions"]["gone-package"] = "1.0"
        record["python"] = "3.9.0"

    edit_record(probe, age)
    done = run_stale(tree, "--configfile", "mine.yaml")
    line = done.stdout.splitlines()[0]
    assert line.startswith(f"{RUN.format(loss='simdissim')}: probe: mscl/old_module.py removed; python 3.9.0 -> {sys.version.split()[0]}")
    assert "gone-package 1.0 -> not installed" in line and re.search(r"torch 0\.0\.1 -> \d", line)
    assert forcerun_targets(done.stdout) == [f"{RUN.format(loss='simdissim')}/probe/metrics.json"]


def test_a_stale_prepared_dataset_makes_every_run_on_it_stale_and_is_the_one_rerun(tree):
    edit_record(tree / "data/processed/coco/versions.json", lambda record: record["code"]["files"].update({"mscl/data/coco.py": "2" * 64}))
    done = run_stale(tree, "--configfile", "mine.yaml")
    assert done.returncode == 1 and "3 of 3 runs stale" in done.stdout
    assert f"{CHANCE_RUN}: probe: reads the stale prepared dataset coco (data/processed/coco)" in done.stdout
    assert forcerun_targets(done.stdout) == ["data/processed/coco/stats.json"]


def test_records_made_before_jobs_recorded_their_code_cannot_vouch_for_it(tree):
    edit_record(tree / CHANCE_RUN / "probe" / "versions.json", lambda record: (record.pop("code"), record.update(mscl_commit="abcdef0123456789")))
    (tree / RUN.format(loss="any") / "probe" / "versions.json").unlink()
    done = run_stale(tree, "--configfile", "mine.yaml")
    assert f"{CHANCE_RUN}: probe: no record of its code (made before runs recorded it, commit abcdef012345)" in done.stdout
    assert f"{RUN.format(loss='any')}: probe: no record of what made it (made before jobs recorded it)" in done.stdout


def test_a_run_resumed_across_a_code_change_is_stale(tree):
    def resumed(record):
        older = copy.deepcopy(record["code"]["files"])
        older["mscl/train/pretrain.py"] = "3" * 64
        record["code"]["earlier_segments"] = [older, None]

    edit_record(tree / RUN.format(loss="any") / "pretrain" / "versions.json", resumed)
    line = run_stale(tree, "--configfile", "mine.yaml").stdout.splitlines()[0]
    assert "pretrain: mscl/train/pretrain.py differed in an earlier segment (resumed); resumed from a checkpoint that did not record its code" in line


def test_a_plugin_its_helper_and_its_distributions_are_checked(tree):
    plugins = tree / "plugins"
    plugins.mkdir()
    (plugins / "mine.py").write_text("import yaml\nimport helper\n")
    (plugins / "helper.py").write_text("X = 1\n")
    from mscl.provenance import plugin_record

    record = plugin_record("plugins/mine.py", plugins / "mine.py", plugins)
    edit_record(tree / RUN.format(loss="any") / "pretrain" / "versions.json", lambda r: r.update(plugins=[record]))
    assert run_stale(tree, "--configfile", "mine.yaml").returncode == 0
    (plugins / "helper.py").write_text("X = 2\n")
    edit_record(tree / RUN.format(loss="any") / "pretrain" / "versions.json", lambda r: r["plugins"][0]["distributions"].update(pyyaml="0.1"))
    line = run_stale(tree, "--configfile", "mine.yaml").stdout.splitlines()[0]
    assert "helper.py (helpers of plugin plugins/mine.py) changed" in line and "pyyaml 0.1 -> " in line and "(imported by plugin plugins/mine.py)" in line
    (plugins / "mine.py").unlink()
    assert "plugin plugins/mine.py is gone" in run_stale(tree, "--configfile", "mine.yaml").stdout


def test_a_stale_tuning_run_makes_the_tuned_methods_runs_stale_through_its_selection(tree, today):
    tuning = tree / "results/tuning/coco/resnet8/any/bs32"
    for setting in ("lr0.1", "lr0.01"):
        finished_job(tuning / setting / "seed0" / "pretrain", "encoder.pt", today)
        finished_job(tuning / setting / "seed0" / "probe", "metrics.json", today)
    (tuning / "selected.json").write_text("{}")
    edit_record(tuning / "lr0.1" / "seed0" / "pretrain" / "versions.json", lambda r: r["code"]["files"].update({"mscl/losses.py": "4" * 64}))
    done = run_stale(tree, "--configfile", "mine.yaml")
    assert "2 of 5 runs stale" in done.stdout  # the tuning run, then the tuned method's run through the selection
    assert f"{RUN.format(loss='any')}: pretrain: reads the stale selected setting (results/tuning/coco/resnet8/any/bs32)" in done.stdout
    assert "results/tuning/coco/resnet8/any/bs32/lr0.01/seed0" not in done.stdout
    assert forcerun_targets(done.stdout) == ["results/tuning/coco/resnet8/any/bs32/lr0.1/seed0/pretrain/encoder.pt"]


def test_a_change_to_comments_and_docstrings_only_is_reported_not_counted(tree, monkeypatch, capsys):
    """The file as the record's clean commit had it, read from git (here: given), differs from
    today's in a docstring and a comment only."""
    today_source = (PACKAGE_DIR / "losses.py").read_bytes()
    then = today_source.replace(b'"""', b'"""An older docstring. ', 1) + b"\n# an old comment\n"
    changed = today_source + b"\nCHANGED = 1\n"
    import hashlib

    for record in (tree / RUN.format(loss=loss) / "pretrain" / "versions.json" for loss in ("any", "simdissim")):
        edit_record(record, lambda r: (r["code"]["files"].update({"mscl/losses.py": hashlib.sha256(then).hexdigest()}), r.update(mscl_commit="a" * 40)))
    monkeypatch.setattr(stale, "file_then", lambda commit, relative: then if commit == "a" * 40 else None)
    monkeypatch.chdir(tree)
    assert stale.main(["--configfile", "mine.yaml"]) == 0
    out = capsys.readouterr().out
    assert "mscl/losses.py changed in comments, docstrings or layout only (not counted)" in out and "0 of 3 runs stale" in out
    # Code that changed is counted, whatever git says.
    monkeypatch.setattr(stale, "file_then", lambda commit, relative: changed)
    assert stale.main(["--configfile", "mine.yaml"]) == 1
    # A dirty commit cannot be read back: counted.
    assert not stale.cosmetic_change("mscl/losses.py", hashlib.sha256(then).hexdigest(), "a" * 40 + "+dirty")


def test_usage_errors_exit_with_status_2_saying_what_to_do(tree):
    missing = run_stale(tree, "--configfile", "nope.yaml")
    assert missing.returncode == 2 and "nope.yaml: config file not found" in missing.stderr
    (tree / "bad.yaml").write_text(yaml.safe_dump({"paths": {"results": 3}}))
    bad = run_stale(tree, "--configfile", "bad.yaml")
    assert bad.returncode == 2 and "invalid config key `paths.results`" in bad.stderr
    (tree / "elsewhere.yaml").write_text(yaml.safe_dump({"paths": {"results": "no_results_here"}}))
    nowhere = run_stale(tree, "--configfile", "elsewhere.yaml")
    assert nowhere.returncode == 2 and "no results folder no_results_here (config paths.results)" in nowhere.stderr
    assert run_stale(tree, "--no-such-option").returncode == 2
