"""The label-wise probe of PLM-ICD encoders (`mscl.train.probe`): PLM-ICD's output layer
logit_l = <W3_l, V_l> + b_l on the frozen encoder's label vectors, cached or streamed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

from mscl.__main__ import main as mscl_main
from mscl.data.manifest import write_dataset
from mscl.metrics import MACRO_F1_CAML
from mscl.models import LabelWiseLinear, build_encoder
from mscl.train import probe as probe_module
from mscl.train.data import load_split
from mscl.train.labels import LabelMatrix
from mscl.train.prefix import load_prefix_cache
from mscl.train.probe import CachedInputs, StreamedLabelVectors, label_vector_bytes, probabilities, train_probe
from mscl.train.spec import ProbeSpec
from test_probe import KEYWORDS as LABELS
from test_probe import keyword_texts
from test_probe import tiny_roberta  # noqa: F401 - the fixture

SPLIT_SIZES = (("train", 24), ("val", 12), ("test", 12))


@pytest.fixture(scope="module")
def notes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24/12/12 keyword texts (tests/test_probe.py): about 25 tokens, two chunks of 16."""
    rng = np.random.default_rng(0)
    out = tmp_path_factory.mktemp("notes") / "data"
    write_dataset(out, {name: keyword_texts(rng, n, name) for name, n in SPLIT_SIZES}, labels=LABELS)
    return out


def encoder_spec(roberta: Path, trainable_layers: int | None = 1) -> dict:
    return {"kind": "plm_icd", "path": str(roberta), "max_length": 64, "chunk_size": 16, "attention_dim": 8, "trainable_layers": trainable_layers}


def run_spec(roberta: Path) -> dict:
    return {
        "dataset": "mimic3_50", "encoder_name": "plm", "encoder": encoder_spec(roberta), "loss": "simdissim", "batch_size": 8,
        "pretrain": {"epochs": 1, "projection_dim": 16, "lr": 0.003}, "probe": {"epochs": 4, "batch_size": 8, "lr": 0.01},
    }  # fmt: skip


@pytest.fixture(scope="module")
def pretrained(notes: Path, tiny_roberta: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, Path]:
    """(run spec, prefix cache, pretraining folder): top layer + W1/W2 trained on the cache."""
    spec = run_spec(tiny_roberta)
    folder = tmp_path_factory.mktemp("plm_run")
    cache = folder / "prefix.pt"
    assert mscl_main(["cache-prefix", "--data", str(notes), "--encoder-spec", json.dumps(spec["encoder"]), "--out", str(cache)]) == 0
    args = ["--data", str(notes), "--spec", json.dumps(spec), "--out", str(folder / "pre"), "--prefix-cache", str(cache)]
    assert mscl_main(["pretrain", *args]) == 0
    saved = torch.load(folder / "pre" / "encoder.pt", weights_only=True)  # what the contrastive phase trained
    assert {name for name in saved if not name.startswith("model.encoder.layer.1.")} == {"label_attention.first.weight", "label_attention.second.weight"}
    return spec, cache, folder / "pre"


def probe(notes: Path, spec: dict, pretrained: Path, out: Path, cache: Path | None) -> int:
    args = ["probe", "--data", str(notes), "--spec", json.dumps(spec), "--pretrained", str(pretrained), "--out", str(out)]
    return mscl_main(args + (["--prefix-cache", str(cache)] if cache else []))


def outputs(folder: Path) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    metrics = json.loads((folder / "metrics.json").read_text())
    return metrics, pq.read_table(folder / "test_scores.parquet").to_pandas(), pd.read_csv(folder / "probe_log.csv")


def test_train_probe_on_label_vectors_reads_each_label_from_its_own_vector() -> None:
    """Label l is the sign of V_l's first coordinate: the label-wise layer learns it; the mean
    over labels (h, what the probe read before) mixes the labels up."""
    generator = torch.Generator().manual_seed(0)
    vectors = {name: torch.randn(n, 5, 6, generator=generator) for name, n in (("train", 512), ("val", 128))}
    targets = {name: LabelMatrix.from_dense(v[:, :, 0] > 0) for name, v in vectors.items()}
    cfg = ProbeSpec(epochs=8, lr=0.05, batch_size=32)
    layer, _, label_wise, _ = train_probe({k: v.half() for k, v in vectors.items()}, targets, cfg, seed=0, device=torch.device("cpu"), macro_f1=MACRO_F1_CAML)
    assert isinstance(layer[1], LabelWiseLinear) and layer[1].weight.shape == (5, 6) and layer[1].bias.shape == (5,)
    _, _, pooled, _ = train_probe({k: v.mean(dim=1) for k, v in vectors.items()}, targets, cfg, seed=0, device=torch.device("cpu"), macro_f1=MACRO_F1_CAML)
    assert label_wise["micro_f1"] >= 0.95 and pooled["micro_f1"] <= label_wise["micro_f1"] - 0.2


def test_probe_trains_w3_and_b_only_on_the_frozen_encoder(pretrained: tuple[dict, Path, Path], notes: Path) -> None:
    spec, cache, folder = pretrained
    from mscl.train.probe import load_frozen_encoder
    from mscl.train.spec import RunSpec

    run = RunSpec.from_mapping(spec)
    encoder = load_frozen_encoder(run, len(LABELS), folder / "encoder.pt", torch.device("cpu"))
    before = {name: tensor.clone() for name, tensor in encoder.state_dict().items()}
    splits = {name: load_split(notes, name, LABELS, "text") for name, _ in SPLIT_SIZES}
    cached = load_prefix_cache(cache, spec["encoder"], splits)
    inputs = {name: StreamedLabelVectors(encoder, splits[name], cached[name], 5, torch.device("cpu"), "fp32") for name in splits}
    targets = {name: split.labels for name, split in splits.items()}
    layer, *_ = train_probe(inputs, targets, ProbeSpec(epochs=2, batch_size=8), seed=0, device=torch.device("cpu"), macro_f1=MACRO_F1_CAML)
    assert [name for name, _ in layer.named_parameters()] == ["1.weight", "1.bias"]  # layer[0] standardises
    assert layer[1].weight.shape == (len(LABELS), 64) and layer[1].bias.shape == (len(LABELS),)
    assert not any(parameter.requires_grad or parameter.grad is not None for parameter in encoder.parameters())
    after = encoder.state_dict()
    assert after.keys() == before.keys() and all(torch.equal(after[name], before[name]) for name in before)
    assert not encoder.training


def test_cached_and_streamed_label_vectors_give_the_same_probe(
    pretrained: tuple[dict, Path, Path], notes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """V cached (the budget holds it) or streamed (a budget of 0 bytes), from the prefix cache
    or from the texts: the same outputs, formats and selected epoch; only cached runs write
    feature files, and those hold V [N, L, d] as float16."""
    spec, cache, folder = pretrained
    assert label_vector_bytes([24, 12, 12], len(LABELS), 64) == 48 * 5 * 64 * 2 <= probe_module.LABEL_VECTOR_BUDGET_MB * 2**20
    runs = {}
    for name, budget, prefix in (("cached", None, cache), ("cached_tokens", None, None), ("streamed", 0, cache), ("streamed_tokens", 0, None)):
        if budget is not None:
            monkeypatch.setenv("MSCL_LABEL_VECTOR_BUDGET_MB", str(budget))
        assert probe(notes, spec, folder, tmp_path / name, prefix) == 0
        runs[name] = outputs(tmp_path / name)
        features = sorted(path.name for path in (tmp_path / name).glob("features_*.pt"))
        assert features == ([] if name.startswith("streamed") else ["features_test.pt", "features_train.pt", "features_val.pt"])

    stored = torch.load(tmp_path / "cached" / "features_val.pt", weights_only=True)
    assert stored["features"].shape == (12, len(LABELS), 64) and stored["features"].dtype == torch.float16
    assert stored["fingerprint"]["representation"] == "label_vectors"
    metrics, scores, log = runs["cached"]
    assert metrics["feature_dim"] == 64 and metrics["num_labels"] == len(LABELS)
    assert all(len(row) == len(LABELS) for row in scores["scores"]) and scores["scores"].iloc[0].dtype == np.float32
    for name, (other_metrics, other_scores, other_log) in runs.items():
        assert other_metrics.keys() == metrics.keys() and other_metrics["best_epoch"] == metrics["best_epoch"]
        assert other_metrics["feature_dim"] == 64 and list(other_log.columns) == list(log.columns)
        assert other_scores["id"].tolist() == scores["id"].tolist()
        assert [list(gold) for gold in other_scores["labels"]] == [list(gold) for gold in scores["labels"]]
        # float16 V (feature files, prefix cache) against float32 V: equal to that precision.
        np.testing.assert_allclose(np.stack(other_scores["scores"]), np.stack(scores["scores"]), atol=2e-3, err_msg=name)
        np.testing.assert_allclose(other_log["train_loss"], log["train_loss"], atol=2e-3, err_msg=name)


def test_streamed_label_vectors_equal_the_encoder_on_tokens(pretrained: tuple[dict, Path, Path], notes: Path) -> None:
    spec, cache, folder = pretrained
    from mscl.train.probe import load_frozen_encoder
    from mscl.train.spec import RunSpec

    encoder = load_frozen_encoder(RunSpec.from_mapping(spec), len(LABELS), folder / "encoder.pt", torch.device("cpu"))
    split = load_split(notes, "test", LABELS, "text")
    cached = load_prefix_cache(cache, spec["encoder"], {"test": split})["test"]
    from_cache = StreamedLabelVectors(encoder, split, cached, 5, torch.device("cpu"), "fp32")
    from_text = StreamedLabelVectors(encoder, split, None, 3, torch.device("cpu"), "fp32")
    with torch.no_grad():
        expected = encoder.label_vectors(encoder.tokenize(split.items))
    index = torch.tensor([7, 0, 11, 3])
    torch.testing.assert_close(from_text.take(index), expected[index], atol=1e-5, rtol=0)
    torch.testing.assert_close(from_cache.take(index), expected[index], atol=5e-3, rtol=0)
    torch.testing.assert_close(torch.cat(list(from_cache.batches())), expected, atol=5e-3, rtol=0)
    layer = LabelWiseLinear(len(LABELS), 64)
    np.testing.assert_allclose(probabilities(layer, from_text), probabilities(layer, CachedInputs(expected.half(), torch.device("cpu"))), atol=2e-3)
