"""Tabular runs (the `mlp` encoder, standardised features, masked views) and the two reference
methods that run through the training jobs: `none` (probe the encoder as initialised) and
`bce` (supervised BCE training, then the probe)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from mscl.__main__ import main as mscl_main
from mscl.data.manifest import read_labels, write_dataset
from mscl.losses import SupervisedBCE, csr_labels
from mscl.models import build_encoder
from mscl.train.data import TabularDataset, load_split, standardize
from mscl.train.runtime import seed_everything, trainable_state
from mscl.train.spec import RunSpec

LABELS = ["pos0", "pos1", "pos2"]
MLP = {"kind": "mlp", "input_dim": 6, "hidden_dims": [16, 8], "dropout": 0.1}


@pytest.fixture(scope="module")
def tabular_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """48/24/24 samples of 6 features on very different scales; label k <=> feature k > 0."""
    rng = np.random.default_rng(0)
    scales = np.array([1.0, 10.0, 0.1, 5.0, 100.0, 1.0], dtype=np.float32)
    splits = {}
    for split, n in (("train", 48), ("val", 24), ("test", 24)):
        features = rng.normal(size=(n, 6)).astype(np.float32) * scales + 3.0
        rows = [
            {"id": f"{split}{i}", "features": row.tolist(), "labels": [LABELS[k] for k in range(3) if row[k] > 3.0 * 1]}
            for i, row in enumerate(features)
        ]
        splits[split] = pd.DataFrame(rows)
    out = tmp_path_factory.mktemp("tabular") / "data"
    write_dataset(out, splits, labels=LABELS, info={})
    return out


def run_spec(loss: str, **pretrain) -> dict:
    return {
        "dataset": "yeast",  # a tabular setting (only the macro-F1 definition depends on it)
        "encoder_name": "mlp",
        "encoder": MLP,
        "loss": loss,
        "batch_size": 16,
        "seed": 3,
        "pretrain": {"epochs": 2, "projection_dim": 8, **pretrain},
        "probe": {"epochs": 3, "batch_size": 16},
    }


def run(data: Path, spec: dict, out: Path) -> tuple[int, int]:
    spec_json = json.dumps(spec)
    pre = mscl_main(["pretrain", "--data", str(data), "--spec", spec_json, "--out", str(out / "pre")])
    if pre != 0:
        return pre, -1
    args = ["--data", str(data), "--pretrained", str(out / "pre"), "--spec", spec_json, "--out", str(out / "probe")]
    return pre, mscl_main(["probe", *args])


# --------------------------------------------------------------------------- pieces


def test_mlp_encoder_layers_output_dim_and_spec_errors() -> None:
    encoder = build_encoder(MLP, num_labels=3)
    assert encoder.modality == "tabular" and encoder.output_dim == 8
    linears = [m for m in encoder.layers if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(6, 16), (16, 8)]
    assert encoder({"features": torch.randn(5, 6)}).shape == (5, 8)
    default = build_encoder({"kind": "mlp", "input_dim": 103}, num_labels=14)
    assert [m.out_features for m in default.layers if isinstance(m, torch.nn.Linear)] == [256, 512, 256]
    for bad, key in (({"hidden_dims": []}, "hidden_dims"), ({"hidden_dims": [4, 0]}, "hidden_dims"), ({"input_dim": 0}, "input_dim"), ({"dropout": 1.5}, "dropout")):
        with pytest.raises(ValueError, match=key):
            build_encoder({**MLP, **bad}, num_labels=3)


def test_standardize_uses_train_statistics_and_keeps_constant_features_finite(tabular_data: Path) -> None:
    vocabulary = read_labels(tabular_data)
    train = load_split(tabular_data, "train", vocabulary, "tabular")
    test = load_split(tabular_data, "test", vocabulary, "tabular")
    assert train.items.dtype == torch.float32 and train.items.shape == (48, 6)
    scaled = standardize(train, train).items
    assert torch.allclose(scaled.mean(0), torch.zeros(6), atol=1e-5)
    assert torch.allclose(scaled.std(0, unbiased=False), torch.ones(6), atol=1e-4)
    mean, std = train.items.double().mean(0), train.items.double().std(0, unbiased=False)
    expected = ((test.items.double() - mean) / std).float()
    assert torch.allclose(standardize(test, train).items, expected, atol=1e-6)
    constant = standardize(train, train.__class__(train.ids, torch.ones_like(train.items), train.labels, 0))
    assert torch.isfinite(constant.items).all()
    assert torch.equal(constant.items, train.items - 1)  # scale 1 where the train std is 0


def test_tabular_views_are_masked_copies_and_evaluation_is_unmasked(tabular_data: Path) -> None:
    vocabulary = read_labels(tabular_data)
    train = load_split(tabular_data, "train", vocabulary, "tabular")
    torch.manual_seed(0)
    item = TabularDataset(train, views=2, mask_rate=0.5)[0]
    features = item["features"]
    assert features.shape == (2, 6)
    original = train.items[0]
    for view in features:  # every entry is either the feature or zero
        assert torch.all((view == original) | (view == 0))
    draws = torch.stack([TabularDataset(train, views=2, mask_rate=0.5)[0]["features"] for _ in range(200)])
    zero_share = (draws == 0).float().mean().item()
    assert 0.4 < zero_share < 0.6  # 2,400 independent masks at rate 0.5
    assert torch.equal(TabularDataset(train, views=1)[0]["features"], original)
    assert torch.equal(item["label_ids"], train.labels.ids(0))


def test_supervised_bce_scores_every_view_against_its_sample_labels() -> None:
    logits = torch.randn(4, 2, 5)
    ids = [[0, 3], [], [4], [1, 2, 4]]
    dense = torch.zeros(4, 5)
    for row, labels in enumerate(ids):
        dense[row, labels] = 1
    naive = sum(
        F.binary_cross_entropy_with_logits(logits[b, v, k], dense[b, k])
        for b in range(4) for v in range(2) for k in range(5)
    ) / 40  # fmt: skip
    loss = SupervisedBCE()
    assert torch.allclose(loss(logits, dense), naive, atol=1e-6)
    assert torch.allclose(loss(logits, csr_labels(ids, 5)), naive, atol=1e-6)


def test_spec_accepts_the_reference_methods_and_rejects_unknown_ones() -> None:
    for method in ("none", "bce"):
        assert RunSpec.from_mapping(run_spec(method)).loss.name == method
    with pytest.raises(ValueError, match="'loss'"):
        RunSpec.from_mapping(run_spec("supervised"))
    resolved = RunSpec.from_mapping(run_spec("simdissim")).pretrain
    assert (resolved.optimizer, resolved.lr, resolved.weight_decay) == ("adamw", 4e-4, 1e-5)


# ------------------------------------------------------------------------ end to end


def test_tabular_contrastive_run_end_to_end(tabular_data: Path, tmp_path: Path) -> None:
    assert run(tabular_data, run_spec("simdissim"), tmp_path) == (0, 0)
    metrics = json.loads((tmp_path / "probe" / "metrics.json").read_text())
    assert metrics["feature_dim"] == 8 and metrics["num_labels"] == 3
    assert 0.0 <= metrics["test"]["micro_f1"] <= 1.0


def test_none_saves_the_seeded_initial_encoder_that_every_method_starts_from(tabular_data: Path, tmp_path: Path) -> None:
    assert run(tabular_data, run_spec("none"), tmp_path / "none") == (0, 0)
    saved = torch.load(tmp_path / "none" / "pre" / "encoder.pt", weights_only=True)
    seed_everything(3)  # what the pretrain job does before building the model
    initial = trainable_state(build_encoder(MLP, num_labels=3))
    assert saved.keys() == initial.keys()
    assert all(torch.equal(saved[key], initial[key]) for key in saved)
    assert not (tmp_path / "none" / "pre" / "checkpoint.pt").exists()  # nothing was trained
    assert (tmp_path / "none" / "probe" / "metrics.json").is_file()


def test_bce_trains_a_linear_classifier_head_and_moves_the_encoder(tabular_data: Path, tmp_path: Path) -> None:
    assert run(tabular_data, run_spec("bce", lr=0.01, epochs=5), tmp_path) == (0, 0)
    head = torch.load(tmp_path / "pre" / "head.pt", weights_only=True)
    assert {key: tuple(value.shape) for key, value in head.items()} == {"weight": (3, 8), "bias": (3,)}
    log = pd.read_csv(tmp_path / "pre" / "train_log.csv")
    assert log["loss"].iloc[-1] < log["loss"].iloc[0]  # supervised BCE on separable labels falls
    trained = torch.load(tmp_path / "pre" / "encoder.pt", weights_only=True)
    seed_everything(3)
    initial = trainable_state(build_encoder(MLP, num_labels=3))
    assert any(not torch.equal(trained[key], initial[key]) for key in trained)


def test_input_dim_that_does_not_match_the_manifest_is_a_named_error(tabular_data: Path, tmp_path: Path, capsys) -> None:
    spec = {**run_spec("simdissim"), "encoder": {**MLP, "input_dim": 7}}
    assert run(tabular_data, spec, tmp_path)[0] == 1
    error = capsys.readouterr().err
    assert "encoder.input_dim" in error and "set encoder.spec.input_dim to 6" in error
    assert not (tmp_path / "pre").exists()


@pytest.mark.parametrize("interval_s, expected_epochs", [(0.0, [1, 2]), (3600.0, [])])
def test_checkpoints_follow_the_time_interval_and_none_is_left_when_the_run_is_done(
    interval_s: float, expected_epochs: list, tabular_data: Path, tmp_path: Path, monkeypatch
) -> None:
    import mscl.train.pretrain as pretrain_module

    saved_epochs = []
    real_save = pretrain_module.save_checkpoint

    def counting_save(path, state):
        if Path(path).name == "checkpoint.pt":
            saved_epochs.append(state["epoch"])
        real_save(path, state)

    monkeypatch.setattr(pretrain_module, "save_checkpoint", counting_save)
    monkeypatch.setenv("MSCL_CHECKPOINT_INTERVAL_S", str(interval_s))
    spec = json.dumps(run_spec("simdissim", epochs=3))
    assert mscl_main(["pretrain", "--data", str(tabular_data), "--spec", spec, "--out", str(tmp_path)]) == 0
    assert saved_epochs == expected_epochs
    assert (tmp_path / "encoder.pt").exists() and not (tmp_path / "checkpoint.pt").exists()
    assert len(pd.read_csv(tmp_path / "train_log.csv")) == 3  # the log still has every epoch


def test_the_threshold_check_refits_each_probe_bit_for_bit_and_finds_the_published_values(tabular_data: Path, tmp_path: Path, capsys) -> None:
    """tools/claim_threshold_check.py (docs/claim-check.md's yeast BCE paragraph) on two methods'
    tiny runs: every refit reproduces its run's test scores, the published check counts the
    runs whose micro-F1 and mAP equal runs.csv's (one value altered: one run fewer), and the
    paired difference is printed per reading."""
    import importlib.util

    runs = tmp_path / "runs"
    published = []
    for method in ("bce", "none"):
        for seed in (0, 1):
            out = runs / method / "bs16" / f"seed{seed}"
            assert run(tabular_data, {**run_spec(method), "seed": seed}, out) == (0, 0)
            test = json.loads((out / "probe" / "metrics.json").read_text())["test"]
            published.append({"dataset": "yeast", "method": method, "seed": seed, "split": "test", "micro_f1": test["micro_f1"], "map": test["map"]})
    published[0]["map"] += 0.01
    pd.DataFrame(published).to_csv(tmp_path / "runs.csv", index=False)

    spec = importlib.util.spec_from_file_location("claim_threshold_check", Path(__file__).resolve().parents[1] / "tools" / "claim_threshold_check.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    capsys.readouterr()
    assert tool.main(["--data", str(tabular_data), "--runs", str(runs), "--methods", "bce", "none", "--published", str(tmp_path / "runs.csv")]) == 0
    out = capsys.readouterr().out
    assert "reproduced exactly by 3 of 4 runs; largest |difference|: micro-F1 0, mAP 0.01" in out
    assert "every run's test scores reproduced bit for bit by the refit probe" in out
    assert "bce minus none, paired by seed" in out and "micro_f1_val_threshold" in out
