"""Contrastive pretraining: the run spec, the LR schedule, end-to-end smoke runs per encoder kind,
resuming, determinism and configuration errors (`mscl.train`)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch
from PIL import Image
from test_curves import plugin_tags, read_curves

from mscl.__main__ import main as mscl_main
from mscl.data.manifest import write_dataset
from mscl.models import build_encoder
from mscl.errors import InputError
from mscl.train.curves import EVENT_FILE_PREFIX
from mscl.train.labels import LabelMatrix
from mscl.train.pretrain import EXIT_STOPPED, build_model, learning_rate, warmup_steps_for
from mscl.train.runtime import trainable_state
from mscl.train.settings import LossSpec, settings_problem
from mscl.train.spec import RunSpec, load_spec, pretrain_view

IMAGE_LABELS = ["band0", "band1", "band2", "band3"]
TEXT_LABELS = ["fever", "fracture", "asthma", "anemia"]
FILLER = "the of and to in is was for on are with as at one have this from".split()
IMAGE_PX = 16
RESNET = {"kind": "resnet", "arch": "resnet18", "weights": "none", "small_input": True}


# ------------------------------------------------------------------------- fixtures


def label_sets(rng: np.random.Generator, n: int, num_labels: int) -> list[list[int]]:
    """n random label sets of 1-2 distinct labels."""
    return [sorted(rng.choice(num_labels, size=rng.integers(1, 3), replace=False).tolist()) for _ in range(n)]


def band_image(labels: list[int], rng: np.random.Generator) -> np.ndarray:
    """A dark noisy 16x16 image with a bright horizontal band (rows 4k..4k+3) per label k."""
    pixels = rng.integers(0, 40, size=(IMAGE_PX, IMAGE_PX, 3)).astype(np.uint8)
    for label in labels:
        pixels[4 * label : 4 * label + 4] = 255
    return pixels


@pytest.fixture(scope="module")
def image_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Image manifest (24/12/12 PNGs) whose labels are the bright bands present."""
    root = tmp_path_factory.mktemp("images")
    rng = np.random.default_rng(0)
    splits = {}
    for split, n in (("train", 24), ("val", 12), ("test", 12)):
        rows = []
        for i, labels in enumerate(label_sets(rng, n, len(IMAGE_LABELS))):
            Image.fromarray(band_image(labels, rng)).save(root / f"{split}{i}.png")
            rows.append({"id": f"{split}{i}", "path": f"{split}{i}.png", "labels": [IMAGE_LABELS[k] for k in labels]})
        splits[split] = pd.DataFrame(rows)
    write_dataset(root / "data", splits, labels=IMAGE_LABELS, info={"root": str(root)})
    return root / "data"


@pytest.fixture(scope="module")
def text_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Text manifest (24/12/12) of filler words plus one keyword per label; one train sample
    carries a label outside the vocabulary."""
    rng = np.random.default_rng(1)
    splits = {}
    for split, n in (("train", 24), ("val", 12), ("test", 12)):
        rows = []
        for i, labels in enumerate(label_sets(rng, n, len(TEXT_LABELS))):
            words = [*rng.choice(FILLER, size=8), *(TEXT_LABELS[k] for k in labels)]
            rng.shuffle(words)
            rows.append({"id": f"{split}{i}", "text": " ".join(words), "labels": [TEXT_LABELS[k] for k in labels]})
        splits[split] = pd.DataFrame(rows)
    splits["train"].at[0, "labels"] = [*splits["train"].at[0, "labels"], "not_in_vocabulary"]
    out = tmp_path_factory.mktemp("text") / "data"
    write_dataset(out, splits, labels=TEXT_LABELS)
    return out


def encoder_spec(kind: str, models: dict[str, Path]) -> dict:
    return {
        "resnet": RESNET,
        "hf": {"kind": "hf", "path": str(models["roberta"]), "max_length": 64},
        "llama_lora": {"kind": "llama_lora", "path": str(models["llama"]), "bf16": False, "max_length": 64},
        "plm_icd": {"kind": "plm_icd", "path": str(models["roberta"]), "max_length": 256, "chunk_size": 64},
    }[kind]


def run_spec(encoder: dict, loss: str = "simdissim", batch_size: int = 8, **pretrain) -> dict:
    """A small run: 16 px images, 32-d projection, 2-epoch probe."""
    return {
        "dataset": "coco",  # any setting with a family: only the macro-F1 definition depends on it
        "encoder_name": encoder["kind"],
        "encoder": encoder,
        "loss": loss,
        "batch_size": batch_size,
        "pretrain": {"epochs": 1, "image_size": IMAGE_PX, "projection_dim": 32, "crop_scale_min": 0.8, **pretrain},
        "probe": {"epochs": 2, "batch_size": 8},
    }


def pretrain(data: Path, spec: dict, out: Path, *extra: str) -> int:
    return mscl_main(["pretrain", "--data", str(data), "--spec", json.dumps(spec), "--out", str(out), *extra])


def probe(data: Path, spec: dict, pretrained: Path, out: Path) -> int:
    args = ["--data", str(data), "--pretrained", str(pretrained), "--spec", json.dumps(spec), "--out", str(out)]
    return mscl_main(["probe", *args])


def load(path: Path) -> dict:
    return torch.load(path, weights_only=True)


def assert_same_tensors(left: dict, right: dict) -> None:
    """Equal keys and bit-identical tensors, recursively through nested dicts and lists."""
    if isinstance(left, torch.Tensor):
        assert torch.equal(left, right)
    elif isinstance(left, dict):
        assert left.keys() == right.keys()
        for key in left:
            assert_same_tensors(left[key], right[key])
    elif isinstance(left, (list, tuple)):
        assert len(left) == len(right)
        for a, b in zip(left, right):
            assert_same_tensors(a, b)


# ----------------------------------------------------------------------------- spec


def test_spec_defaults_resolve_auto_by_encoder_kind() -> None:
    image = RunSpec.from_mapping({"dataset": "d", "encoder_name": "r", "encoder": RESNET, "loss": "any", "batch_size": 512})
    assert (image.pretrain.optimizer, image.pretrain.lr, image.pretrain.weight_decay) == ("sgd", 0.1, 1e-4)
    assert (image.pretrain.epochs, image.loss.temperature, image.pretrain.projection_dim) == (3, 0.07, 256)
    assert (image.pretrain.warmup_fraction, image.pretrain.image_size, image.pretrain.precision) == (0.05, 224, "auto")
    assert (image.probe.epochs, image.probe.lr, image.probe.select_metric) == (30, 1e-3, "micro_f1")
    assert image.seed == 0 and image.loss == LossSpec("any", 0.07, {}) and image.modality == "image"
    text = {"dataset": "d", "encoder_name": "t", "loss": "msc", "batch_size": 8}
    hf = RunSpec.from_mapping({**text, "encoder": {"kind": "hf", "path": "x"}})
    assert (hf.pretrain.optimizer, hf.pretrain.lr, hf.pretrain.weight_decay) == ("adamw", 2e-5, 0.01)
    llama = RunSpec.from_mapping({**text, "encoder": {"kind": "llama_lora", "path": "x"}})
    assert (llama.pretrain.optimizer, llama.pretrain.lr) == ("adamw", 1e-4)
    assert RunSpec.from_mapping(llama.to_dict()) == llama  # a resolved spec parses back to itself


def test_spec_reads_inline_json_and_yaml_files(tmp_path: Path) -> None:
    yaml_file = tmp_path / "run.yaml"
    yaml_file.write_text("dataset: d\nencoder_name: r\nencoder: {kind: resnet}\nloss: any\nbatch_size: 4\n")
    inline = json.dumps({"dataset": "d", "encoder_name": "r", "encoder": {"kind": "resnet"}, "loss": "any", "batch_size": 4})
    assert load_spec(str(yaml_file)) == load_spec(inline)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"optimiser": "sgd"}, "optimiser"),
        ({"pretrain": {"epoch": 2}}, "pretrain.epoch"),
        ({"pretrain": {"lr": -1.0}}, "pretrain.lr"),
        ({"pretrain": {"epochs": True}}, "pretrain.epochs"),
        ({"pretrain": {"text_views": "crop"}}, "pretrain.text_views"),
        ({"probe": {"select_metric": "accuracy"}}, "probe.select_metric"),
        ({"loss": "supcon"}, "loss"),
        ({"encoder": {"kind": "vit"}}, "encoder.kind"),
        ({"encoder": {"kind": "hf"}}, "encoder.path"),
        ({"loss_options": {"temperature": 0.1}}, "loss_options.temperature"),
        ({"batch_size": 0}, "batch_size"),
    ],
)
def test_spec_rejects_bad_keys_and_values_naming_them(change: dict, message: str) -> None:
    spec = {"dataset": "d", "encoder_name": "r", "encoder": RESNET, "loss": "any", "batch_size": 4, **change}
    with pytest.raises(ValueError, match=rf"(?i)'{message}'.*fix"):
        RunSpec.from_mapping(spec)


def test_the_loss_spec_takes_its_temperature_from_the_pretrain_block() -> None:
    """Users write tau as pretrain.temperature (configs, tuning grids, recorded specs); the run
    spec holds it in its one LossSpec and writes it back where it was read."""
    mapping = {"dataset": "d", "encoder_name": "r", "encoder": RESNET, "loss": "simdissim", "batch_size": 4,
               "loss_options": {"form": "literal"}, "pretrain": {"temperature": 0.2, "epochs": 1}}  # fmt: skip
    spec = RunSpec.from_mapping(mapping)
    assert spec.loss == LossSpec("simdissim", 0.2, {"form": "literal"})
    recorded = spec.to_dict()
    assert (recorded["loss"], recorded["loss_options"], recorded["pretrain"]["temperature"]) == ("simdissim", {"form": "literal"}, 0.2)
    assert RunSpec.from_mapping(recorded) == spec
    _, _, loss = build_model(spec, num_labels=3, device=torch.device("cpu"))
    assert loss.temperature == 0.2 and loss.log_weight_inside
    with pytest.raises(ValueError, match=r"'pretrain.temperature' is 0.0; fix"):
        RunSpec.from_mapping({**mapping, "pretrain": {"temperature": 0.0}})
    # The workflow's check of a config block reads it where users write it, and names it there.
    assert settings_problem("pretrain", {"temperature": 0.1, "epochs": 2}, "training.pretrain") is None
    assert "'training.pretrain.temperature' is -1" in settings_problem("pretrain", {"temperature": -1}, "training.pretrain")
    assert "'temperature'" in settings_problem("pretrain", {"temprature": 0.1}, "training.pretrain")  # offered as a key


def test_a_tuning_selection_applies_to_its_own_encoder_or_the_named_tuned_encoder(tmp_path: Path) -> None:
    """A selection carries its chosen values into the spec's pretrain block. It is refused for
    another encoder, unless the spec names that encoder as `tuned_encoder` (the same network with
    another schedule), which the resolved spec then records; specs without it read as before."""
    selected = tmp_path / "selected.json"
    selected.write_text(json.dumps({"dataset": "d", "encoder_name": "r", "method": "any", "chosen": "lr0.5", "pretrain": {"lr": 0.5}}))
    base = {"dataset": "d", "encoder_name": "r", "encoder": RESNET, "loss": "any", "batch_size": 4, "pretrain": {"lr": 0.1, "epochs": 2}}
    own = load_spec(json.dumps(base), selected)
    assert (own.pretrain.lr, own.pretrain.epochs, own.tuned_encoder) == (0.5, 2, None) and "tuned_encoder" not in own.to_dict()
    longer = {**base, "encoder_name": "r-2x", "pretrain": {"lr": 0.1, "epochs": 4}}
    with pytest.raises(InputError, match="the selection is for encoder_name 'r', the run spec has 'r-2x'"):
        load_spec(json.dumps(longer), selected)
    reused = load_spec(json.dumps({**longer, "tuned_encoder": "r"}), selected)
    assert (reused.pretrain.lr, reused.pretrain.epochs, reused.tuned_encoder) == (0.5, 4, "r")
    assert RunSpec.from_mapping(reused.to_dict()) == reused and reused.to_dict()["tuned_encoder"] == "r"
    with pytest.raises(InputError, match="the selection is for encoder_name 'r', the run spec has 'q'"):
        load_spec(json.dumps({**longer, "tuned_encoder": "q"}), selected)
    with pytest.raises(ValueError, match="'tuned_encoder'"):
        RunSpec.from_mapping({**longer, "tuned_encoder": ""})


def test_spec_requires_the_run_axes() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        RunSpec.from_mapping({"dataset": "d", "encoder_name": "r", "encoder": RESNET, "loss": "any"})


# ------------------------------------------------------------------ pure helpers


def test_learning_rate_warms_up_linearly_then_decays_by_cosine_to_zero() -> None:
    # 10 steps, 2 warm-up steps, base 2.0: warm-up 1.0, 2.0; cosine over the 8 remaining steps.
    assert learning_rate(0, 10, 2, 2.0) == pytest.approx(1.0)
    assert learning_rate(1, 10, 2, 2.0) == pytest.approx(2.0)
    assert learning_rate(2, 10, 2, 2.0) == pytest.approx(2.0)
    assert learning_rate(4, 10, 2, 2.0) == pytest.approx(1.0 + math.cos(math.pi / 4))
    assert learning_rate(6, 10, 2, 2.0) == pytest.approx(1.0)
    assert learning_rate(10, 10, 2, 2.0) == pytest.approx(0.0)
    decay = [learning_rate(step, 10, 2, 2.0) for step in range(2, 11)]
    assert all(a > b for a, b in zip(decay, decay[1:]))
    assert learning_rate(0, 10, 0, 2.0) == pytest.approx(2.0)  # no warm-up: starts at base
    assert warmup_steps_for(1000, 0.05) == 50 and warmup_steps_for(10, 0.05) == 0


def test_label_lists_become_sparse_labels_ignoring_and_counting_names_outside_the_vocabulary() -> None:
    labels, ignored = LabelMatrix.from_label_lists([["b"], ["a", "zz", "b", "a"], [], ["c", "b"]], ["a", "b", "c"])
    assert labels.dense().tolist() == [[0, 1, 0], [1, 1, 0], [0, 0, 0], [0, 1, 1]] and ignored == 1
    assert [labels.ids(row).tolist() for row in range(4)] == [[1], [0, 1], [], [1, 2]]  # ascending, no repeat
    assert labels.dense(torch.tensor([3, 0, 3])).tolist() == [[0, 1, 1], [0, 1, 0], [0, 1, 1]]
    assert labels.column_counts().tolist() == [1, 3, 1] and labels.column_block(1, 3).tolist() == [[1, 0], [1, 0], [0, 0], [1, 1]]
    assert labels.first_columns(2).dense().tolist() == [[0, 1], [1, 1], [0, 0], [0, 1]]
    assert (labels.to_scipy().toarray() == labels.dense().numpy().astype(bool)).all()


# ------------------------------------------------------------------ end to end


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["resnet", "hf", "llama_lora", "plm_icd"])
def test_pretrain_and_probe_run_end_to_end(
    kind: str, image_data: Path, text_data: Path, tiny_models: dict, tmp_path: Path
) -> None:
    data = image_data if kind == "resnet" else text_data
    loss = "msc" if kind == "plm_icd" else "simdissim"  # msc: prototypes in the optimiser
    spec = run_spec(encoder_spec(kind, tiny_models), loss=loss, max_steps_per_epoch=2)
    assert pretrain(data, spec, tmp_path / "pre") == 0
    assert probe(data, spec, tmp_path / "pre", tmp_path / "probe") == 0

    pre = tmp_path / "pre"
    assert {p.name for p in pre.iterdir() if not p.name.startswith(EVENT_FILE_PREFIX)} == {
        "encoder.pt", "head.pt", "train_log.csv", "resolved_spec.json", "versions.json"
    }  # fmt: skip: no checkpoint.pt once the run is done
    log = pd.read_csv(pre / "train_log.csv")
    assert log["epoch"].tolist() == [1] and log["steps"].tolist() == [2] and np.isfinite(log["loss"]).all()
    # TensorBoard curves: a loss point every step of this 2-step epoch, the epoch's figures at its last step.
    curves = read_curves(pre)
    assert [step for step, _ in curves["train/loss"]] == [1, 2] and [step for step, _ in curves["train/lr"]] == [1, 2]
    assert curves["epoch/loss"] == [(2, pytest.approx(log["loss"][0], abs=1e-6))]
    assert {"epoch/lr", "epoch/samples_per_second", "epoch/seconds", "memory/host_peak_mib"} <= set(curves)
    assert plugin_tags(pre, "text") == {"spec/text_summary"} and "_hparams_/session_start_info" in plugin_tags(pre, "hparams")
    versions = json.loads((pre / "versions.json").read_text())
    assert {"python", "torch", "torchvision", "transformers", "peft", "numpy", "device_name", "cuda"} <= set(versions)
    # Pretraining records the spec it reads: all but the probe block (mscl.train.spec.pretrain_view).
    assert json.loads((pre / "resolved_spec.json").read_text()) == pretrain_view(RunSpec.from_mapping(spec).to_dict())
    fresh = build_encoder(spec["encoder"], num_labels=4)
    assert set(load(pre / "encoder.pt")) == set(trainable_state(fresh))  # LoRA: the adapter only

    metrics = json.loads((tmp_path / "probe" / "metrics.json").read_text())
    assert metrics["num_labels"] == 4 and metrics["best_epoch"] in (1, 2)
    for key in ("micro_f1", "macro_f1", "map"):
        assert 0.0 <= metrics["test"][key] <= 1.0
    scores = pq.read_table(tmp_path / "probe" / "test_scores.parquet").to_pandas()
    assert len(scores) == 12 and all(len(row) == 4 for row in scores["scores"])
    assert metrics["ignored_label_occurrences"]["train"] == (1 if kind != "resnet" else 0)
    probe_curves = read_curves(tmp_path / "probe")
    assert [step for step, _ in probe_curves["probe/train_loss"]] == [1, 2] and len(probe_curves["val/map"]) == 2
    assert probe_curves["probe/selected_epoch"] == [(metrics["best_epoch"], metrics["best_epoch"])]
    assert probe_curves["test/micro_f1"] == [(metrics["best_epoch"], pytest.approx(metrics["test"]["micro_f1"]))]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["resnet", "hf"])
def test_resumed_run_equals_an_uninterrupted_run(kind: str, image_data: Path, text_data: Path, tiny_models: dict, tmp_path: Path) -> None:
    data = image_data if kind == "resnet" else text_data
    spec = run_spec(encoder_spec(kind, tiny_models), loss="msc", epochs=2, max_steps_per_epoch=2)
    # Both stop after the last epoch once, so that their full training states can be compared.
    straight = tmp_path / "straight"
    assert pretrain(data, spec, straight, "--stop-after-epoch", "2") == EXIT_STOPPED

    resumed = tmp_path / "resumed"
    assert pretrain(data, spec, resumed, "--stop-after-epoch", "1") == EXIT_STOPPED
    assert load(resumed / "checkpoint.pt")["epoch"] == 1 and not (resumed / "encoder.pt").exists()
    assert pretrain(data, spec, resumed, "--stop-after-epoch", "2") == EXIT_STOPPED

    straight_state, resumed_state = load(straight / "checkpoint.pt"), load(resumed / "checkpoint.pt")
    assert straight_state["loss"].keys() == {"prototypes"}  # msc: its prototypes are checkpointed
    for key in ("loss", "optimizer", "rng"):
        assert_same_tensors(straight_state[key], resumed_state[key])
    for run in (straight, resumed):  # finishing writes the final files and removes the checkpoint
        assert pretrain(data, spec, run) == 0
        assert (run / "encoder.pt").exists() and not (run / "checkpoint.pt").exists()
    for name in ("encoder.pt", "head.pt"):
        assert_same_tensors(load(straight / name), load(resumed / name))
    assert pd.read_csv(resumed / "train_log.csv")["epoch"].tolist() == [1, 2]
    straight_loss = pd.read_csv(straight / "train_log.csv")["loss"]
    assert pd.read_csv(resumed / "train_log.csv")["loss"].tolist() == straight_loss.tolist()
    # The resumed run's TensorBoard curve is the uninterrupted run's, each step once.
    assert read_curves(resumed)["train/loss"] == read_curves(straight)["train/loss"]
    assert [step for step, _ in read_curves(resumed)["train/loss"]] == [1, 2, 3, 4]


@pytest.mark.slow
def test_same_seed_gives_identical_weights_and_metrics(text_data: Path, tiny_models: dict, tmp_path: Path) -> None:
    spec = run_spec(encoder_spec("hf", tiny_models), max_steps_per_epoch=2)
    for run in ("a", "b"):
        assert pretrain(text_data, spec, tmp_path / run / "pre") == 0
        assert probe(text_data, spec, tmp_path / run / "pre", tmp_path / run / "probe") == 0
    assert_same_tensors(load(tmp_path / "a/pre/encoder.pt"), load(tmp_path / "b/pre/encoder.pt"))
    metrics = [json.loads((tmp_path / run / "probe/metrics.json").read_text()) for run in ("a", "b")]
    assert metrics[0]["test"] == metrics[1]["test"] and metrics[0]["best_epoch"] == metrics[1]["best_epoch"]

    assert pretrain(text_data, {**spec, "seed": 1}, tmp_path / "c") == 0
    other = load(tmp_path / "c/encoder.pt")
    assert any(not torch.equal(t, other[k]) for k, t in load(tmp_path / "a/pre/encoder.pt").items())


@pytest.mark.slow  # fails at once, but needs the tiny models (a module fixture of ~10 s)
@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"loss": "supcon"}, "'loss'"),
        ({"encoder": {"kind": "transformer"}}, "encoder.kind"),
        ({"encoder": {"kind": "hf", "path": "/nonexistent/roberta"}}, "model folder not found"),
        ({"batch_size": 25}, "larger than the train split"),
    ],
)
def test_bad_config_fails_before_any_output(
    change: dict, message: str, text_data: Path, tiny_models: dict, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    spec = {**run_spec(encoder_spec("hf", tiny_models)), **change}
    assert pretrain(text_data, spec, tmp_path / "out") == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_checkpoint_of_another_spec_is_discarded_and_the_run_starts_over(
    text_data: Path, tiny_models: dict, tmp_path: Path, capsys
) -> None:
    spec = run_spec(encoder_spec("hf", tiny_models), epochs=2, max_steps_per_epoch=1)
    out = tmp_path / "out"
    assert pretrain(text_data, spec, out, "--stop-after-epoch", "1") == EXIT_STOPPED
    capsys.readouterr()
    changed = {**spec, "loss": "any", "pretrain": {**spec["pretrain"], "epochs": 3}}
    assert pretrain(text_data, changed, out) == 0
    err = capsys.readouterr().err
    assert "discarding checkpoint.pt: the run spec changed (loss, pretrain.epochs)" in err
    assert "resumed" not in err
    assert json.loads((out / "resolved_spec.json").read_text())["loss"] == "any"
    assert (out / "encoder.pt").exists() and not (out / "checkpoint.pt").exists()
    # The old run's log row is gone: epochs 1-3 of the new run, once each.
    assert pd.read_csv(out / "train_log.csv")["epoch"].tolist() == [1, 2, 3]
    # One log line per epoch with loss, learning rate, throughput and elapsed time.
    lines = [line for line in err.splitlines() if line.startswith("pretrain epoch")]
    assert len(lines) == 3 and all(k in lines[0] for k in ("loss", "lr", "samples/s", "elapsed"))


@pytest.mark.slow
def test_the_same_spec_resumes_after_its_last_checkpoint(text_data: Path, tiny_models: dict, tmp_path: Path, capsys) -> None:
    spec = run_spec(encoder_spec("hf", tiny_models), epochs=3, max_steps_per_epoch=1)
    assert pretrain(text_data, spec, tmp_path / "out", "--stop-after-epoch", "2") == EXIT_STOPPED
    capsys.readouterr()
    assert pretrain(text_data, spec, tmp_path / "out") == 0
    err = capsys.readouterr().err
    assert "resumed from checkpoint.pt after epoch 2" in err and "discarding" not in err
    assert [line.split(":")[0] for line in err.splitlines() if line.startswith("pretrain epoch")] == ["pretrain epoch 3/3"]
