"""The linear probe (`mscl.train.probe`): a separable problem that only a correctly wired loss and
probe solve, feature caching, weight checks, epoch selection and the scores file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

from mscl.__main__ import main as mscl_main
from mscl.data.manifest import write_dataset
from mscl.metrics import MACRO_F1_CAML, MACRO_F1_PER_CLASS, evaluate
from mscl.models import build_encoder
from mscl.train import probe as probe_module
from mscl.train.labels import LabelMatrix
from mscl.train.probe import better, train_probe
from mscl.train.runtime import save_checkpoint, trainable_state
from mscl.train.spec import ProbeSpec

KEYWORDS = ["fever", "fracture", "asthma", "diabetes", "anemia"]
FILLER = "the of and to in is was for on are with as at one have this from or had by not but what some".split()
FILLER_WORDS_PER_TEXT = 20  # keywords are ~1/20 of a text: a random encoder's features blur them


def keyword_texts(rng: np.random.Generator, n: int, prefix: str) -> pd.DataFrame:
    """n texts: 20 filler words plus the keywords of 1-2 random labels, shuffled; labels = keywords."""
    rows = []
    for i in range(n):
        labels = sorted(rng.choice(len(KEYWORDS), size=rng.integers(1, 3), replace=False).tolist())
        words = [*rng.choice(FILLER, size=FILLER_WORDS_PER_TEXT), *(KEYWORDS[k] for k in labels)]
        rng.shuffle(words)
        rows.append({"id": f"{prefix}{i}", "text": " ".join(words), "labels": [KEYWORDS[k] for k in labels]})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def tiny_roberta(tiny_models: dict[str, Path]) -> Path:
    return tiny_models["roberta"]


@pytest.fixture(scope="module")
def keyword_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """512/64/64 keyword texts; the labels are a deterministic function of the words."""
    rng = np.random.default_rng(0)
    splits = {name: keyword_texts(rng, n, name) for name, n in (("train", 512), ("val", 64), ("test", 64))}
    out = tmp_path_factory.mktemp("keywords") / "data"
    write_dataset(out, splits, labels=KEYWORDS)
    return out


@pytest.fixture(scope="module")
def shuffled_data(keyword_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same texts with the train label sets permuted across samples (val/test intact)."""
    splits = {name: pd.read_parquet(keyword_data / f"{name}.parquet") for name in ("train", "val", "test")}
    permutation = np.random.default_rng(1).permutation(len(splits["train"]))
    splits["train"]["labels"] = [list(splits["train"]["labels"][i]) for i in permutation]
    out = tmp_path_factory.mktemp("shuffled") / "data"
    write_dataset(out, splits, labels=KEYWORDS)
    return out


def keyword_spec(roberta: Path, epochs: int = 5) -> dict:
    """Tiny RoBERTa with mean pooling (its first token barely depends on the text at random init)."""
    return {
        "dataset": "aapd",  # a text setting: its macro_f1 is the per-class mean
        "encoder_name": "tiny-roberta",
        "encoder": {"kind": "hf", "path": str(roberta), "max_length": 64, "pooling": "mean"},
        "loss": "simdissim",
        "batch_size": 32,
        # 80 steps at 3e-3: the tiny model learns in seconds (2e-5 suits pretrained RoBERTa).
        "pretrain": {"epochs": epochs, "lr": 3e-3, "projection_dim": 32},
        # Raw features: standardised, even the untrained tiny model's mean-pooled features
        # decode the keywords (test micro-F1 0.98), and this test is about what pretraining adds.
        "probe": {"epochs": 30, "batch_size": 32, "lr": 1e-2, "standardize": False},
    }


def run(command: str, data: Path, spec: dict, out: Path, pretrained: Path | None = None) -> int:
    args = [command, "--data", str(data), "--spec", json.dumps(spec), "--out", str(out)]
    return mscl_main(args + (["--pretrained", str(pretrained)] if pretrained else []))


@pytest.mark.slow
def test_pretraining_with_the_labels_makes_a_separable_problem_solvable(
    keyword_data: Path, shuffled_data: Path, tiny_roberta: Path, tmp_path: Path
) -> None:
    spec = keyword_spec(tiny_roberta)
    assert run("pretrain", keyword_data, spec, tmp_path / "pre") == 0
    assert run("probe", keyword_data, spec, tmp_path / "probe", tmp_path / "pre") == 0
    trained = json.loads((tmp_path / "probe/metrics.json").read_text())["test"]["micro_f1"]

    # The same probe on the untrained encoder: the weights pretraining started from (seed 0).
    torch.manual_seed(0)
    untrained = build_encoder(spec["encoder"], num_labels=len(KEYWORDS))
    save_checkpoint(tmp_path / "untrained" / "encoder.pt", trainable_state(untrained))
    assert run("probe", keyword_data, spec, tmp_path / "probe_untrained", tmp_path / "untrained") == 0
    random_init = json.loads((tmp_path / "probe_untrained/metrics.json").read_text())["test"]["micro_f1"]

    # Pretraining on permuted train labels: the loss must use each sample's own labels.
    assert run("pretrain", shuffled_data, spec, tmp_path / "pre_shuffled") == 0
    assert run("probe", keyword_data, spec, tmp_path / "probe_shuffled", tmp_path / "pre_shuffled") == 0
    shuffled = json.loads((tmp_path / "probe_shuffled/metrics.json").read_text())["test"]["micro_f1"]

    # Chance: predicting every label gives micro-F1 = 2p/(1+p) with p ~ 0.3 labels per slot, ~0.46.
    assert trained >= 0.9
    assert random_init <= trained - 0.15
    assert shuffled <= trained - 0.15


@pytest.fixture(scope="module")
def pretrained_run(keyword_data: Path, tiny_roberta: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    spec = keyword_spec(tiny_roberta, epochs=1)
    spec["pretrain"]["max_steps_per_epoch"] = 2
    spec["probe"]["epochs"] = 3
    out = tmp_path_factory.mktemp("pretrained")
    assert run("pretrain", keyword_data, spec, out) == 0
    return spec, out


@pytest.mark.slow
def test_features_are_cached_until_the_encoder_changes(
    keyword_data: Path, pretrained_run: tuple[dict, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, pretrained = pretrained_run
    assert run("probe", keyword_data, spec, tmp_path, pretrained) == 0
    first = json.loads((tmp_path / "metrics.json").read_text())

    built = []
    real_loader = probe_module.load_frozen_encoder
    monkeypatch.setattr(probe_module, "load_frozen_encoder", lambda *a: built.append(1) or real_loader(*a))
    assert run("probe", keyword_data, spec, tmp_path, pretrained) == 0
    assert built == [] and json.loads((tmp_path / "metrics.json").read_text()) == first

    weights = pretrained / "encoder.pt"
    newer = (tmp_path / "features_train.pt").stat().st_mtime_ns + 10**9
    os.utime(weights, ns=(newer, newer))
    assert run("probe", keyword_data, spec, tmp_path, pretrained) == 0
    assert built == [1] and json.loads((tmp_path / "metrics.json").read_text()) == first


@pytest.mark.slow
def test_test_scores_file_recomputes_the_reported_metrics(
    keyword_data: Path, pretrained_run: tuple[dict, Path], tmp_path: Path
) -> None:
    spec, pretrained = pretrained_run
    assert run("probe", keyword_data, spec, tmp_path, pretrained) == 0
    table = pq.read_table(tmp_path / "test_scores.parquet")
    vocabulary = json.loads(table.schema.metadata[b"mscl.label_names"])
    frame = table.to_pandas()
    scores = np.stack(frame["scores"])
    y_true = np.array([[label in set(row) for label in vocabulary] for row in frame["labels"]])
    test = pd.read_parquet(keyword_data / "test.parquet")
    assert vocabulary == KEYWORDS and scores.dtype == np.float32 and frame["id"].tolist() == test["id"].tolist()
    assert y_true.tolist() == [[label in set(row) for label in KEYWORDS] for row in test["labels"]]
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["macro_f1_definition"] == MACRO_F1_PER_CLASS
    recomputed = evaluate(y_true, scores, macro_f1_definition=MACRO_F1_PER_CLASS)
    for key in ("micro_f1", "macro_f1", "macro_f1_caml", "macro_f1_per_class", "map", "p_at_5"):
        assert recomputed[key] == pytest.approx(metrics["test"][key])
    for section in ("test", "val_best"):
        assert metrics[section]["macro_f1"] == metrics[section]["macro_f1_per_class"]
    log = pd.read_csv(tmp_path / "probe_log.csv")
    assert log["epoch"].tolist() == [1, 2, 3] and metrics["best_epoch"] == int(log["val_selected"].idxmax()) + 1


@pytest.mark.slow
def test_probe_refuses_weights_that_do_not_fit_the_encoder(
    keyword_data: Path, pretrained_run: tuple[dict, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    spec, pretrained = pretrained_run
    state = torch.load(pretrained / "encoder.pt", weights_only=True)
    state.pop(next(iter(state)))
    save_checkpoint(tmp_path / "broken" / "encoder.pt", state)
    assert run("probe", keyword_data, spec, tmp_path / "out", tmp_path / "broken") == 1
    assert "do not match" in capsys.readouterr().err
    assert run("probe", keyword_data, spec, tmp_path / "out", tmp_path / "missing") == 1
    assert "pretrained encoder not found" in capsys.readouterr().err
    other = {**spec, "encoder": {**spec["encoder"], "pooling": "cls"}}
    assert run("probe", keyword_data, other, tmp_path / "out", pretrained) == 1
    assert "different encoder spec" in capsys.readouterr().err
    # A dataset without a family has no macro-F1 definition: refused before any work.
    assert run("probe", keyword_data, {**spec, "dataset": "keywords"}, tmp_path / "unknown", pretrained) == 1
    assert "dataset 'keywords' has no family" in capsys.readouterr().err
    assert not (tmp_path / "unknown").exists()


def test_best_epoch_selection_keeps_the_earliest_best_and_never_picks_nan() -> None:
    assert better(0.5, None) and better(0.6, 0.5)
    assert not better(0.5, 0.5) and not better(float("nan"), None) and not better(float("nan"), 0.1)


def sparse(targets: dict[str, torch.Tensor]) -> dict[str, LabelMatrix]:
    """Dense test targets in the form the probe takes (a split's labels are never dense)."""
    return {name: LabelMatrix.from_dense(dense) for name, dense in targets.items()}


def test_train_probe_learns_a_linear_rule_and_reports_the_selected_epoch() -> None:
    generator = torch.Generator().manual_seed(0)
    features = {name: torch.randn(n, 8, generator=generator) for name, n in (("train", 256), ("val", 64))}
    targets = {name: (x[:, :3] > 0).float() for name, x in features.items()}  # label j = sign of feature j
    cfg = ProbeSpec(epochs=5, lr=0.05, batch_size=32, standardize=False)  # layer[0] is then the identity
    layer, best_epoch, val_best, rows = train_probe(features, sparse(targets), cfg, seed=0, device=torch.device("cpu"), macro_f1=MACRO_F1_CAML)
    selected = [float(row["val_selected"]) for row in rows]
    assert best_epoch == selected.index(max(selected)) + 1
    assert val_best["micro_f1"] == pytest.approx(max(selected), abs=1e-6) and val_best["micro_f1"] >= 0.9
    assert isinstance(layer[0], torch.nn.Identity) and layer[1].weight.shape == (3, 8)
    assert val_best["macro_f1"] == val_best["macro_f1_caml"]  # the definition it was given


def test_standardised_probe_does_not_depend_on_the_feature_scale() -> None:
    """With standardize (the default) the probe sees (x - mean) / std of the train features: the
    same features times 0.01 plus 3 give the same layer outputs, epoch and val metrics."""
    from mscl.train.probe import feature_statistics, probabilities, CachedInputs

    generator = torch.Generator().manual_seed(1)
    features = {name: torch.randn(n, 6, generator=generator) * torch.arange(1, 7) for name, n in (("train", 200), ("val", 50))}
    targets = {name: (x[:, :2] > 0).float() for name, x in features.items()}
    shifted = {name: x * 0.01 + 3 for name, x in features.items()}
    cfg = ProbeSpec(epochs=4, lr=0.05, batch_size=32)
    assert cfg.standardize
    runs = [train_probe(inputs, sparse(targets), cfg, seed=0, device=torch.device("cpu"), macro_f1=MACRO_F1_CAML) for inputs in (features, shifted)]
    assert runs[0][1] == runs[1][1] and runs[0][2]["micro_f1"] == pytest.approx(runs[1][2]["micro_f1"])
    assert np.allclose(probabilities(runs[0][0], features["val"]), probabilities(runs[1][0], shifted["val"]), atol=1e-4)
    mean, std = feature_statistics(CachedInputs(features["train"], torch.device("cpu")))
    assert torch.allclose(mean, features["train"].double().mean(0)) and torch.allclose(std, features["train"].double().std(0, unbiased=False))
    # Label vectors [N, L, d]: one statistic per feature dimension, over samples and labels.
    vectors = torch.randn(30, 4, 5, generator=generator)
    mean, std = feature_statistics(CachedInputs(vectors, torch.device("cpu")))
    assert torch.allclose(mean, vectors.reshape(-1, 5).double().mean(0), atol=1e-6)


def test_the_probe_starts_at_the_label_prior() -> None:
    """Zero weights and bias = logit(train prevalence), clamped for labels a split never (or
    always) shows, for the linear probe and PLM-ICD's label-wise layer alike."""
    from mscl.models.heads import LabelWiseLinear
    from mscl.train.probe import PRIOR_CLAMP, start_at_label_prior

    targets = torch.tensor([[1, 0, 1, 0], [0, 0, 1, 0], [0, 0, 1, 1], [0, 0, 1, 0]], dtype=torch.float32)
    for layer in (torch.nn.Linear(6, 4), LabelWiseLinear(4, 6)):
        start_at_label_prior(layer, LabelMatrix.from_dense(targets))
        assert torch.count_nonzero(layer.weight) == 0
        expected = torch.tensor([0.25, PRIOR_CLAMP, 1 - PRIOR_CLAMP, 0.25])
        assert torch.allclose(torch.sigmoid(layer.bias), expected, rtol=1e-4)


def test_a_short_probe_on_standardised_features_stays_calibrated_to_rare_labels() -> None:
    """The yeast failure (docs/training.md): on zero-mean features only the bias carries a label's
    base rate, and a few hundred Adam steps at 1e-3 cannot move a random bias to log-odds of -3.
    From the label prior the mean predicted probability of a 5% label is its prevalence, and
    thresholding at 0.5 predicts it rarely; a random start predicted it for about half of val."""
    generator = torch.Generator().manual_seed(0)
    features = {name: torch.randn(n, 32, generator=generator) for name, n in (("train", 1200), ("val", 300))}
    # Label 0: 5% prevalence, weakly tied to feature 0; label 1: 50%, tied to feature 1.
    targets = {
        name: torch.stack([(x[:, 0] + 0.3 * torch.randn(len(x), generator=generator) > 1.645).float(), (x[:, 1] > 0).float()], dim=1)
        for name, x in features.items()
    }
    cfg = ProbeSpec(epochs=3, lr=1e-3, batch_size=256)  # 15 steps: far too few to move a bias by 3
    layer, _, _, _ = train_probe(features, sparse(targets), cfg, seed=0, device=torch.device("cpu"), macro_f1=MACRO_F1_CAML)
    from mscl.train.probe import probabilities

    scores = probabilities(layer.eval(), features["val"])
    assert abs(scores[:, 0].mean() - targets["train"][:, 0].mean().item()) < 0.03
    assert (scores[:, 0] > 0.5).mean() < 0.1
