#!/usr/bin/env bash
# .ci/slurm_check.sh - prove the SLURM workflow profiles on a real SLURM cluster.
#
# Starts a single-node SLURM cluster (tools/local-slurm/start_local_slurm.sh, fake GPUs, slurmdbd
# so that sacct works), runs a slice of the embedded default (.ci/slurm_config.yaml) through
# workflow/profiles/slurm with `--executor slurm`, then checks that
#   - every non-local job went through SLURM (job ids from the executor's log, state and TRES
#     from sacct, or scontrol without accounting): COMPLETED, partition, account, GPUs only for
#     pretrain/probe, and the sbatch lines the plugin built (--gpus=1, --cpus-per-gpu);
#   - the local rule (statistics_table) ran on the submit host, never through sbatch;
#   - the outputs equal those of a local run of the same targets (manifest parquet content,
#     labels, stats.json, the statistics table, and probe metrics.json numbers exactly);
#   - with training on, workflow/profiles/slurm-gres reruns the probe with --gres=gpu:1 (and no
#     --gpus) and gets the same metrics again.
# The daemons are always stopped on exit. Prints PASS/FAIL lines; exits 1 on any failure.
#
# Usage (root on Debian 12, after `make test` created .venv):   .ci/slurm_check.sh
# Environment knobs:
#   SLURM_CHECK_TRAINING=1      0: skip the training slice (TRAINING_TARGETS) and the gres rerun
#   SLURM_ACCOUNTING=1          0: no slurmdbd; status via squeue, job details via scontrol
#   SLURM_FAKE_GPUS=1           GPUs the node advertises (fake devices, no CUDA behind them)
#   SLURM_CHECK_TIMEOUT_S=240   wall-clock limit of each snakemake call (seconds)
#   SLURM_CHECK_KEEP=0          1: keep the work folder after a pass (always kept on failure)
#   SLURM_CHECK_KEEP_PACKAGES=0 1: keep the SLURM packages this script installed. By default they
#                               are purged on exit: with a SLURM client installed but no
#                               controller running, every snakemake start takes ~9 s longer
#                               (the slurm plugin asks `scontrol show config`, 10 s timeout).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
VENV_BIN=$REPO/.venv/bin
TRAINING=${SLURM_CHECK_TRAINING:-1}
ACCOUNTING=${SLURM_ACCOUNTING:-1}
FAKE_GPUS=${SLURM_FAKE_GPUS:-1}
TIMEOUT_S=${SLURM_CHECK_TIMEOUT_S:-240}
KEEP=${SLURM_CHECK_KEEP:-0}
KEEP_PACKAGES=${SLURM_CHECK_KEEP_PACKAGES:-0}
PARTITION=debug
ACCOUNT=mscl-ci     # created with sacctmgr when accounting is on

# The slice: AAPD demo -> manifest (make_demo, prepare_aapd: SLURM jobs) -> statistics table
# (statistics_table: a local rule).
DATA_TARGETS=(results/tables/statistics.csv)
# The training slice (local_models, pretrain, probe: GPU jobs), skipped with SLURM_CHECK_TRAINING=0.
RUN=aapd/roberta-tiny/simdissim/bs32/seed0
TRAINING_TARGETS=("results/runs/$RUN/probe/metrics.json")

[ "$(id -u)" = 0 ] || { echo "FAIL: .ci/slurm_check.sh must run as root (it installs and starts SLURM)" >&2; exit 1; }
[ -x "$VENV_BIN/snakemake" ] || { echo "FAIL: $VENV_BIN/snakemake missing: run 'make test' (or 'make install') first" >&2; exit 1; }
export PATH="$VENV_BIN:$PATH"   # jobs inherit it (sbatch --export=ALL): python -m mscl, snakemake

T0=$(date +%s)
WORK=$(mktemp -d /tmp/mscl-slurm-check.XXXXXX)
INSTALLED_HERE=0
[ -x /usr/sbin/slurmctld ] || INSTALLED_HERE=1   # leave the machine as we found it
FAILED=0
say() { printf '[slurm_check %s +%ss] %s\n' "$(date +%T)" "$(($(date +%s) - T0))" "$*"; }
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; FAILED=1; }

cleanup() {
  local rc=$?
  local stop_args=()
  [ "$INSTALLED_HERE" = 1 ] && [ "$KEEP_PACKAGES" != 1 ] && stop_args=(--purge)
  say "stopping the SLURM daemons ${stop_args[*]}"
  "$REPO/tools/local-slurm/stop_local_slurm.sh" "${stop_args[@]}" || echo "WARNING: stop_local_slurm.sh failed" >&2
  if [ "$FAILED" = 0 ] && [ "$rc" = 0 ] && [ "$KEEP" != 1 ]; then
    rm -rf "$WORK"
  else
    echo "work folder kept for inspection: $WORK"
  fi
  say "done"
}
trap cleanup EXIT

# ------------------------------------------------------------------ 1. the cluster
if [ "$INSTALLED_HERE" = 1 ]; then
  say "apt-get update"
  # Keep apt's English descriptions: on an image with Acquire::Languages "none" a plain update
  # deletes the *_Translation-en indexes, and with them the claim check's debtags source
  # (`make claim-data`, docs/claim-check.md), on this machine for every later run.
  apt-get -o Acquire::Languages=en update -q > "$WORK/apt-update.log" 2>&1 || { tail -n 20 "$WORK/apt-update.log"; exit 1; }
fi
say "starting SLURM (fake GPUs: $FAKE_GPUS, accounting: $ACCOUNTING)"
SLURM_FAKE_GPUS=$FAKE_GPUS SLURM_ACCOUNTING=$ACCOUNTING SLURM_PARTITION=$PARTITION \
  "$REPO/tools/local-slurm/start_local_slurm.sh"
if [ "$ACCOUNTING" = 1 ]; then
  # An account the jobs are charged to, so that the profile's slurm_account is exercised.
  sacctmgr -n -P show account format=account | grep -qx "$ACCOUNT" || sacctmgr -i add account "$ACCOUNT" > /dev/null
  sacctmgr -n -P show assoc user=root account="$ACCOUNT" format=user | grep -qx root ||
    sacctmgr -i add user root account="$ACCOUNT" > /dev/null
  ACCOUNT_RESOURCE=(slurm_account="$ACCOUNT")
  STATUS_ARGS=()
else
  ACCOUNT_RESOURCE=()   # no account: the plugin submits without -A
  # Without slurmdbd the default status command (sacct) fails on every query and the executor
  # waits forever: query squeue instead.
  STATUS_ARGS=(--slurm-status-command squeue)
fi
say "cluster up: $(sinfo -h -o '%P %T %c cpus %m MB %G')"

# ------------------------------------------------------------------ 2. the site's profiles
# What a user does once: fill in the profile's `site:` block. Everything else comes from the
# project's profiles unchanged; CI-sized defaults (small memory, short time limit) are given on
# the command line, which replaces the profile's whole default-resources block.
site_profile() {  # site_profile NAME -> folder with the filled-in copy of workflow/profiles/NAME
  local src=$REPO/workflow/profiles/$1/config.v8+.yaml dst=$WORK/profiles/$1
  mkdir -p "$dst"
  sed -e "s/'CHANGE_ME_account'/'${ACCOUNT_RESOURCE[*]:+$ACCOUNT}'/" \
      -e "s/'CHANGE_ME_cpu'/'$PARTITION'/" -e "s/'CHANGE_ME_gpu'/'$PARTITION'/" "$src" > "$dst/config.v8+.yaml"
  if grep -q CHANGE_ME "$dst/config.v8+.yaml"; then
    echo "FAIL: workflow/profiles/$1 has placeholders outside its site block:" >&2
    grep -n CHANGE_ME "$dst/config.v8+.yaml" >&2
    return 1
  fi
  echo "$dst"
}
SLURM_PROFILE=$(site_profile slurm)
GRES_PROFILE=$(site_profile slurm-gres)
pass "profiles filled in through their site block only: $SLURM_PROFILE, $GRES_PROFILE"

# .ci/slurm_config.yaml with its `ci` run standing in for every experiment block of config.yaml.
"$VENV_BIN/python" - "$REPO/config.yaml" "$REPO/.ci/slurm_config.yaml" "$WORK/slurm_config.yaml" <<'PY'
import sys

import yaml

default_path, slice_path, out_path = sys.argv[1:]
default, ci_slice = (yaml.safe_load(open(path)) for path in (default_path, slice_path))
run = ci_slice["experiments"]["ci"]
ci_slice["experiments"] = {name: run for name in [*default["experiments"], "ci"]}
with open(out_path, "w") as handle:
    yaml.safe_dump(ci_slice, handle, sort_keys=False)
PY
CONFIG_ARGS=(--configfile "$REPO/config.yaml" "$REPO/tests/configs/tiny_encoders.yaml" "$WORK/slurm_config.yaml")
TARGETS=("${DATA_TARGETS[@]}")
[ "$TRAINING" = 1 ] && TARGETS+=("${TRAINING_TARGETS[@]}")

# run_snakemake DIR LOG ARGS...: snakemake in DIR, output to LOG, killed after TIMEOUT_S.
run_snakemake() {
  local dir=$1 log=$2 rc=0
  shift 2
  mkdir -p "$dir"
  (cd "$dir" && timeout -k 10 "$TIMEOUT_S" "$VENV_BIN/snakemake" --snakefile "$REPO/Snakefile" \
    --directory "$dir" "${CONFIG_ARGS[@]}" "$@") > "$log" 2>&1 || rc=$?
  if [ "$rc" != 0 ]; then
    [ "$rc" = 124 ] || [ "$rc" = 137 ] && echo "snakemake hit the ${TIMEOUT_S}s limit" >> "$log"
    echo "---- last lines of $log"; tail -n 40 "$log"
  fi
  return "$rc"
}

SLURM_ARGS=(
  --executor slurm --verbose
  --default-resources slurm_partition="$PARTITION" "${ACCOUNT_RESOURCE[@]}" mem_mb=1000 runtime=10
  --slurm-init-seconds-before-status-checks 2 "${STATUS_ARGS[@]}"
)

# ------------------------------------------------------------------ 3. the SLURM run
say "SLURM run: ${TARGETS[*]}"
t=$(date +%s)
if run_snakemake "$WORK/slurm" "$WORK/slurm.log" --workflow-profile "$SLURM_PROFILE" "${SLURM_ARGS[@]}" "${TARGETS[@]}"; then
  pass "snakemake --executor slurm (profile workflow/profiles/slurm) finished in $(($(date +%s) - t)) s"
else
  fail "snakemake --executor slurm (profile workflow/profiles/slurm) failed; see above"
fi

# ------------------------------------------------------------------ 4. the gres profile
GRES_LOG=$WORK/slurm-gres.log
: > "$GRES_LOG"
if [ "$TRAINING" = 1 ] && [ "$FAILED" = 0 ]; then
  say "SLURM run with workflow/profiles/slurm-gres: probe again"
  t=$(date +%s)
  # (targets before --forcerun, which would swallow them as its own list)
  if run_snakemake "$WORK/slurm" "$GRES_LOG" --workflow-profile "$GRES_PROFILE" "${SLURM_ARGS[@]}" \
      "${TRAINING_TARGETS[@]}" --forcerun probe; then
    pass "snakemake --executor slurm (profile workflow/profiles/slurm-gres) reran the probe in $(($(date +%s) - t)) s"
    cp "$WORK/slurm/results/runs/$RUN/probe/metrics.json" "$WORK/gres-metrics.json"
  else
    fail "snakemake --executor slurm (profile workflow/profiles/slurm-gres) failed; see above"
  fi
else
  say "SKIP: gres profile run (it reruns the probe: needs the training slice and a passing first run)"
fi

# ------------------------------------------------------------------ 5. the local run
say "local run: ${TARGETS[*]}"
t=$(date +%s)
if run_snakemake "$WORK/local" "$WORK/local.log" --workflow-profile none --executor local --cores 2 "${TARGETS[@]}"; then
  pass "snakemake --executor local finished in $(($(date +%s) - t)) s"
else
  fail "snakemake --executor local failed; see above"
fi

# ------------------------------------------------------------------ 6. checks
say "checking jobs and outputs"
"$VENV_BIN/python" - "$WORK" "$ACCOUNTING" "$TRAINING" "$PARTITION" "${ACCOUNT_RESOURCE[*]:+$ACCOUNT}" "$RUN" <<'PY' || FAILED=1
"""Check the SLURM jobs of the two runs and compare their outputs with the local run."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd

work, accounting, training, partition, account, run = sys.argv[1:]
work = Path(work)
accounting, training = accounting == "1", training == "1"
failures = 0


def report(ok: bool, message: str) -> None:
    global failures
    print(("PASS: " if ok else "FAIL: ") + message)
    failures += not ok


def submitted_jobs(log: Path) -> dict[str, list[str]]:
    """{rule: [SLURM job id, ...]} from the executor's 'has been submitted' lines."""
    jobs: dict[str, list[str]] = {}
    pattern = r"has been submitted with SLURM jobid (\d+) \(log: \S*/rule_(\w+)/"
    for job_id, rule in re.findall(pattern, log.read_text()):
        jobs.setdefault(rule, []).append(job_id)
    return jobs


def sbatch_lines(log: Path) -> dict[str, str]:
    """{rule: the sbatch call the plugin logged (--verbose)} for each submitted rule."""
    lines = {}
    for line in log.read_text().splitlines():
        match = re.search(r"sbatch call: (sbatch .*?--comment '?rule_(\w+?)(?:_wildcards_|'| ).*)", line)
        if match:
            lines[match.group(2)] = match.group(1).split(" --wrap=")[0]
    return lines


def job_details(job_ids: list[str]) -> dict[str, dict[str, str]]:
    """State, partition, account and GPUs of each job, from sacct (or scontrol without slurmdbd)."""
    details = {}
    if accounting:
        out = subprocess.run(
            ["sacct", "-X", "-n", "-P", "-j", ",".join(job_ids), "-o", "JobID,State,Partition,Account,AllocTRES"],
            capture_output=True, text=True, check=True,
        ).stdout
        for line in out.splitlines():
            job_id, state, part, acct, tres = line.split("|")
            details[job_id] = {"state": state, "partition": part, "account": acct, "tres": tres}
    else:
        for job_id in job_ids:
            out = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True).stdout
            fields = dict(item.split("=", 1) for item in out.split() if "=" in item)
            details[job_id] = {
                "state": fields.get("JobState", "UNKNOWN"), "partition": fields.get("Partition", ""),
                "account": fields.get("Account", ""), "tres": fields.get("TRES", ""),
            }
    return details


def gpus_of(tres: str) -> int:
    match = re.search(r"gres/gpu=(\d+)", tres)
    return int(match.group(1)) if match else 0


def check_run(name: str, log: Path, expected_rules: set[str], gpu_flag: str) -> None:
    if not log.exists() or not log.read_text():
        return
    text = log.read_text()
    jobs = submitted_jobs(log)
    ids = [job_id for ids in jobs.values() for job_id in ids]
    report(
        set(jobs) == expected_rules and all(len(v) == 1 for v in jobs.values()),
        f"{name}: {len(ids)} jobs went through SLURM, one per rule {sorted(expected_rules)}: "
        + ", ".join(f"{rule}={','.join(v)}" for rule, v in sorted(jobs.items())),
    )
    if not ids:
        return
    details = job_details(ids)
    for rule, rule_ids in sorted(jobs.items()):
        for job_id in rule_ids:
            info = details.get(job_id, {"state": "MISSING", "partition": "", "account": "", "tres": ""})
            want_gpus = 1 if rule in {"pretrain", "probe"} else 0
            ok = (
                info["state"] == "COMPLETED"
                and info["partition"] == partition
                and (not account or info["account"] == account)
                and gpus_of(info["tres"]) == want_gpus
            )
            report(ok, f"{name}: job {job_id} ({rule}) {info['state']} on partition {info['partition']!r}, "
                       f"account {info['account']!r}, {gpus_of(info['tres'])} GPU(s) [{info['tres']}]")
    lines = sbatch_lines(log)
    for rule in sorted(jobs):
        line = lines.get(rule, "")
        if rule in {"pretrain", "probe"}:
            other = "--gres=" if gpu_flag.startswith("--gpus") else "--gpus="
            ok = gpu_flag in line and other not in line and "--cpus-per-gpu=" in line
            report(ok, f"{name}: {rule} submitted with {gpu_flag} and --cpus-per-gpu, without {other}: {line}")
        else:
            ok = bool(line) and "--gpus" not in line and "--gres" not in line and "--cpus-per-task=" in line
            report(ok, f"{name}: {rule} submitted without GPUs: {line}")
    if name == "slurm profile":
        report("localrule statistics_table:" in text and "statistics_table" not in jobs,
               f"{name}: statistics_table ran on the submit host (localrule), not through sbatch")


def normalised_json(path: Path, root: Path):
    """JSON with the run folder's absolute path removed (stats.json records the raw root)."""
    return json.loads(path.read_text().replace(str(root) + "/", ""))


def compare_outputs(slurm: Path, local: Path) -> None:
    data = Path("data/processed/aapd")
    for split in ("train", "val", "test"):
        path = data / f"{split}.parquet"
        try:
            same = pd.read_parquet(slurm / path).equals(pd.read_parquet(local / path))
            rows = len(pd.read_parquet(slurm / path))
        except (OSError, ValueError) as error:
            same, rows = False, f"unreadable ({error})"
        report(same, f"{path}: SLURM and local manifests hold the same rows ({rows})")
    for path in (data / "labels.txt", Path("results/tables/statistics.csv"), Path("results/tables/statistics.tex"),
                 Path("results/tables/statistics.md")):
        same = (slurm / path).is_file() and (local / path).is_file() and (slurm / path).read_bytes() == (local / path).read_bytes()
        report(same, f"{path}: identical bytes")
    try:
        same = normalised_json(slurm / data / "stats.json", slurm) == normalised_json(local / data / "stats.json", local)
    except (OSError, ValueError):
        same = False
    report(same, f"{data}/stats.json: same content (up to the run folder's path)")


def compare_metrics(slurm_file: Path, local_file: Path, label: str) -> None:
    try:
        slurm_metrics, local_metrics = json.loads(slurm_file.read_text()), json.loads(local_file.read_text())
    except (OSError, ValueError) as error:
        report(False, f"{label}: cannot read metrics ({error})")
        return
    same = slurm_metrics == local_metrics
    detail = "" if same else " differing: " + ", ".join(
        f"{split}.{key}" for split in ("test", "val_best") for key in local_metrics.get(split, {})
        if slurm_metrics.get(split, {}).get(key) != local_metrics[split][key]
    )
    test = local_metrics.get("test", {})
    report(same, f"{label}: metrics.json identical (test micro_f1={test.get('micro_f1')}, "
                 f"map={test.get('map')}){detail}")


data_rules = {"make_demo", "prepare_aapd"}
train_rules = {"local_models", "pretrain", "probe"} if training else set()
check_run("slurm profile", work / "slurm.log", data_rules | train_rules, "--gpus=1")
if training:
    check_run("slurm-gres profile", work / "slurm-gres.log", {"probe"}, "--gres=gpu:1")
compare_outputs(work / "slurm", work / "local")
if training:
    metrics = Path(f"results/runs/{run}/probe/metrics.json")
    compare_metrics(work / "slurm" / metrics, work / "local" / metrics, f"{metrics} (slurm profile)")
    compare_metrics(work / "gres-metrics.json", work / "local" / metrics, f"{metrics} (slurm-gres profile)")
sys.exit(1 if failures else 0)
PY

say "total $(($(date +%s) - T0)) s"
if [ "$FAILED" = 0 ]; then
  echo "PASS: SLURM check (training slice: $([ "$TRAINING" = 1 ] && echo on || echo 'skipped, SLURM_CHECK_TRAINING=0'))"
else
  echo "FAIL: SLURM check"
  exit 1
fi
