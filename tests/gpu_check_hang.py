"""A test that hangs the way a training command does, for rehearsing a time limit.

Not part of the suite: pytest collects only files named test_*.py unless a file is named on its
command line. tools/gpu_check.sh runs it first in its tests stage when MSCL_TEST_HANG=1 (the
rehearsal in docs/gpu.md), and tests/test_gpu_check.py runs it to check that SIGTERM then ends
the pytest session. The hanging test installs the SIGTERM handler of pretrain and probe
(SIGTERM -> SystemExit(143)) before it waits, as a hung training run inside a test would have;
the test after it records whether pytest went on.
"""

from __future__ import annotations

import os
import time

import pytest

from mscl.interrupt import exit_on_sigterm

HANG = os.environ.get("MSCL_TEST_HANG") == "1"


@pytest.mark.gpu
@pytest.mark.skipif(not HANG, reason="hangs only with MSCL_TEST_HANG=1 (a rehearsal)")
def test_hangs_inside_a_training_commands_sigterm_handler() -> None:
    exit_on_sigterm("pretrain: stopped by SIGTERM; the last epoch checkpoint stays and a rerun resumes from it")
    print("gpu_check_hang: hanging", flush=True)
    while True:
        time.sleep(60)


@pytest.mark.gpu
@pytest.mark.skipif(not HANG, reason="runs only with MSCL_TEST_HANG=1 (a rehearsal)")
def test_runs_only_if_pytest_went_on_after_sigterm() -> None:
    print("gpu_check_hang: pytest went on after SIGTERM", flush=True)
