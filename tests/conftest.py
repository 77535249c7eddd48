from __future__ import annotations

import os
from pathlib import Path

import pytest

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
