from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from mscl.interrupt import EXIT_TERMINATED

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = REPO_ROOT / "tests" / "fixtures"
# Tiny random text encoders (roberta-tiny, llama-tiny, plmicd-tiny) that train in seconds.
TINY_ENCODERS = REPO_ROOT / "tests" / "configs" / "tiny_encoders.yaml"


def pytest_configure(config: pytest.Config) -> None:
    """MSCL_TEST_ONEDNN=0 runs the suite with torch's oneDNN (mkldnn) kernels off, as on a CPU
    or build without them: trained numbers move with the kernels and the thread count
    (OMP_NUM_THREADS), so the tests that assert on them are checked under both (docs/testing.md)."""
    if os.environ.get("MSCL_TEST_ONEDNN", "1") == "0":
        import torch

        torch.backends.mkldnn.enabled = False


# ------------------------------------------------------------- SIGTERM ends the session
# A time limit (tools/gpu_check.sh's `timeout`, a CI job's) sends SIGTERM and expects the run to
# end, with pytest's summary of what ran. By default SIGTERM kills pytest without one; worse, the
# training commands that tests run in-process (pretrain, probe, cache-prefix) install a handler
# that turns SIGTERM into SystemExit(143), which pytest reports as the current test's failure
# before going on with the next test, until the limit's SIGKILL. So: SIGTERM raises
# KeyboardInterrupt (pytest's own way to stop a session, summary included), reinstalled before
# every test, and a test ended by the training commands' SystemExit(143) stops the session.
# Once pytest has printed its summary the process leaves at once (os._exit): tearing down torch's
# modules takes seconds on a loaded machine, longer than the limit's kill margin.
_terminated = False


class Terminated(KeyboardInterrupt):
    """SIGTERM, as the KeyboardInterrupt that ends a pytest session."""


def _end_session(signum: int, frame: object) -> None:
    global _terminated
    _terminated = True
    raise Terminated("SIGTERM: the session stops (tests/conftest.py)")


def pytest_sessionstart(session: pytest.Session) -> None:
    signal.signal(signal.SIGTERM, _end_session)


def _default_sigterm_in_child() -> None:
    if signal.getsignal(signal.SIGTERM) is _end_session:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


# Forked children (DataLoader workers, multiprocessing) end on SIGTERM as they did before.
os.register_at_fork(after_in_child=_default_sigterm_in_child)


def pytest_runtest_setup(item: pytest.Item) -> None:
    signal.signal(signal.SIGTERM, _end_session)  # a training command run by an earlier test replaced it


def pytest_exception_interact(node: pytest.Item | pytest.Collector, call: pytest.CallInfo, report: pytest.TestReport) -> None:
    error = call.excinfo.value if call.excinfo else None
    if isinstance(error, SystemExit) and error.code == EXIT_TERMINATED:
        global _terminated
        _terminated = True
        print(f"\n{node.nodeid}: ended by SIGTERM (SystemExit {EXIT_TERMINATED}); the session stops", file=sys.stderr, flush=True)
        node.session.shouldstop = f"SIGTERM during {node.nodeid}"


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    if _terminated:
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            stream.flush()
        os._exit(EXIT_TERMINATED)


def config_with_tiny_encoders() -> dict:
    """config.yaml (the embedded default) with the tiny test encoders added to `encoders`, as
    `--configfile config.yaml tests/configs/tiny_encoders.yaml` would merge them."""
    import yaml

    config = yaml.safe_load((REPO_ROOT / "config.yaml").read_text())
    config["encoders"].update(yaml.safe_load(TINY_ENCODERS.read_text())["encoders"])
    return config


def shared_dir() -> Path:
    """The team's shared folder: $MSCL_SHARED, else ../shared beside the checkout."""
    return Path(os.environ.get("MSCL_SHARED", REPO_ROOT.parent / "shared"))


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny random HF models (`mscl.demo.tiny_models`: roberta, llama, ...), made once per
    session for every module that builds encoders from them; the tests only read them."""
    from mscl.demo.tiny_models import make_tiny_models

    return make_tiny_models(tmp_path_factory.mktemp("models") / "tiny", seed=0)


@pytest.fixture
def mimic_split_lists() -> Path:
    path = shared_dir() / "data" / "mimic_splits"
    if not path.is_dir():
        pytest.fail(f"MIMIC split lists not found at {path}; set MSCL_SHARED to the team's shared folder")
    return path


def tidy_runs(rows: list[tuple], paper: bool = True):
    """Tidy run results (the `collect` format) from (dataset, role, loss, metric, value[, seed[,
    batch[, split]]]) tuples: synthetic inputs for the table and figure tests.

    paper=True names them as results of the paper's own data and models (paper names, compared
    with the paper); paper=False as stand-ins ("MS-COCO-demo", "resnet_enc (for ResNet-50)")."""
    import pandas as pd

    from mscl.report.collect import RUN_COLUMNS
    from mscl.report.names import DATASET_NAMES, PAPER_ENCODER_NAMES
    from mscl.report.style import method_name

    records = []
    for row in rows:
        dataset, role, loss, metric, value, *rest = row
        seed, batch, split = (list(rest) + [0, 32, "test"][len(rest) :])[:3]
        model = PAPER_ENCODER_NAMES.get(role, role)
        records.append(
            {"dataset": dataset, "encoder": f"{role}_enc", "encoder_role": role, "loss": loss, "batch_size": batch,
             "seed": seed, "split": split, "metric": metric, "value": value,
             "dataset_display": DATASET_NAMES.get(dataset, dataset) + ("" if paper else "-demo"),
             "encoder_display": model if paper else f"{role}_enc (for {model})", "paper_dataset": paper, "paper_encoder": paper,
             "method_display": method_name(loss), "encoder_order": 0}
        )
    return pd.DataFrame(records, columns=list(RUN_COLUMNS))
