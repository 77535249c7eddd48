"""Pretraining's convergence monitor (`mscl.train.monitor`, `pretrain.monitor_every`): the ridge
readout against scikit-learn, the epochs it logs, and that it never changes what is trained."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.linear_model import Ridge
from sklearn.metrics import average_precision_score

from mscl.__main__ import main as mscl_main
from mscl.data.manifest import write_dataset
from mscl.train.labels import LabelMatrix
from mscl.train.monitor import RIDGE_PENALTY, ridge_readout_map


def test_ridge_readout_map_equals_sklearn_ridge_and_average_precision() -> None:
    rng = np.random.default_rng(0)
    train_x, val_x = rng.normal(size=(200, 12)) * np.arange(1, 13), rng.normal(size=(80, 12)) * np.arange(1, 13)
    weights = rng.normal(size=(12, 4))
    train_y = (train_x @ weights + rng.normal(size=(200, 4)) > 1).astype(np.float32)
    val_y = (val_x @ weights + rng.normal(size=(80, 4)) > 1).astype(np.float32)
    val_y[:, 3] = 0  # a label without a val positive is left out of the mean
    mean, std = train_x.mean(0), train_x.std(0)
    model = Ridge(alpha=RIDGE_PENALTY * len(train_x)).fit((train_x - mean) / std, train_y)
    scores = model.predict((val_x - mean) / std)
    expected = np.mean([average_precision_score(val_y[:, j], scores[:, j]) for j in range(3)])
    got = ridge_readout_map(torch.from_numpy(train_x), LabelMatrix.from_dense(train_y), torch.from_numpy(val_x), LabelMatrix.from_dense(val_y))
    assert got == pytest.approx(expected, abs=1e-9)


@pytest.fixture
def tabular_data(tmp_path: Path) -> Path:
    rng = np.random.default_rng(1)

    def frame(n: int, prefix: str) -> pd.DataFrame:
        x = rng.normal(size=(n, 6)).astype(np.float32)
        labels = [[name for name, on in zip("abc", row[:3] > 0) if on] for row in x]
        return pd.DataFrame({"id": [f"{prefix}{i}" for i in range(n)], "features": list(x), "labels": labels})

    out = tmp_path / "data"
    write_dataset(out, {"train": frame(96, "t"), "val": frame(40, "v"), "test": frame(40, "s")}, ["a", "b", "c"], {"dataset": "yeast"})
    return out


def spec(monitor_every: int) -> str:
    return json.dumps(
        {
            "dataset": "yeast", "encoder_name": "mlp", "encoder": {"kind": "mlp", "input_dim": 6, "hidden_dims": [16], "dropout": 0.1},
            "loss": "simdissim", "batch_size": 16, "seed": 0,
            "pretrain": {"epochs": 5, "lr": 0.01, "projection_dim": 8, "monitor_every": monitor_every},
        }
    )  # fmt: skip


def test_the_monitor_logs_every_k_epochs_and_the_last_and_trains_the_same_weights(tabular_data: Path, tmp_path: Path) -> None:
    runs = {}
    for every in (0, 2):
        out = tmp_path / f"every{every}"
        assert mscl_main(["pretrain", "--data", str(tabular_data), "--spec", spec(every), "--out", str(out)]) == 0
        runs[every] = out
    log = pd.read_csv(runs[2] / "train_log.csv")
    logged = log.loc[log["val_map_readout"].notna(), "epoch"].tolist()
    assert logged == [2, 4, 5]  # every 2 epochs, and the last
    assert ((log["val_map_readout"].dropna() > 0) & (log["val_map_readout"].dropna() <= 1)).all()
    assert pd.read_csv(runs[0] / "train_log.csv")["val_map_readout"].isna().all()
    plain, monitored = (torch.load(runs[e] / "encoder.pt", weights_only=True) for e in (0, 2))
    assert plain.keys() == monitored.keys() and all(torch.equal(plain[k], monitored[k]) for k in plain)
