"""TensorBoard curves of the training jobs (mscl.train.curves), read back as TensorBoard reads them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from mscl.errors import InputError
from mscl.train.curves import EVENT_FILE_PREFIX, PROBE_HOLD_S, curve_interval, open_curves, points_per_epoch, run_settings, score_tags
from mscl.train.launch import CURVES_ENV, curves_environment

SPEC = {
    "dataset": "coco", "encoder_name": "resnet8", "encoder": {"kind": "resnet", "depth": 8}, "loss": "msc",
    "loss_options": {"alpha": 0.5}, "batch_size": 32, "seed": 2,
    "pretrain": {"epochs": 3, "lr": 0.1, "max_steps_per_epoch": None, "betas": [0.9, 0.99]},
    "probe": {"epochs": 5},
}  # fmt: skip


def read_curves(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar curve of a job folder as TensorBoard shows it: tag -> [(step, value)], in
    the order read (purged points gone)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(folder)).Reload()
    return {tag: [(event.step, event.value) for event in accumulator.Scalars(tag)] for tag in accumulator.Tags()["scalars"]}


def plugin_tags(folder: Path, plugin: str) -> set[str]:
    """The tags of a TensorBoard plugin's data (text: "spec/text_summary"; hparams) in a job folder."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    return set(EventAccumulator(str(folder)).Reload().PluginTagToContent(plugin))


def test_a_resumed_segment_continues_the_curve_without_a_duplicate_step(tmp_path: Path) -> None:
    """The first segment logged steps 1-6 but its last checkpoint was after step 3: the resumed
    segment's points 4-8 replace them, and every step appears once."""
    with open_curves(tmp_path, SPEC, "pretrain", ("epoch/loss",)) as curves:
        for step in range(1, 7):
            curves.loss(step, torch.tensor(float(step)), lr=0.1)
        curves.scalars(3, {"epoch/loss": 2.0})
        curves.scalars(6, {"epoch/loss": 5.0})
    with open_curves(tmp_path, SPEC, "pretrain", ("epoch/loss",), resumed_step=3) as curves:
        for step in range(4, 9):
            curves.loss(step, torch.tensor(10.0 + step), lr=0.01)
        curves.scalars(8, {"epoch/loss": 16.0, "epoch/val_map_readout": None})
    read = read_curves(tmp_path)
    assert read["train/loss"] == [(1, 1.0), (2, 2.0), (3, 3.0), (4, 14.0), (5, 15.0), (6, 16.0), (7, 17.0), (8, 18.0)]
    assert read["epoch/loss"] == [(3, 2.0), (8, 16.0)]
    assert "epoch/val_map_readout" not in read  # None: the monitor did not run
    assert [step for step, _ in read["train/lr"]] == list(range(1, 9))
    assert plugin_tags(tmp_path, "text") == {"spec/text_summary"}  # written once, by the first segment
    assert {"_hparams_/experiment", "_hparams_/session_start_info"} <= plugin_tags(tmp_path, "hparams")


def test_a_run_that_starts_over_deletes_the_earlier_curve(tmp_path: Path) -> None:
    with open_curves(tmp_path, SPEC, "probe", ()) as curves:
        curves.scalars(5, {"epoch/loss": 1.0})
    (tmp_path / "checkpoint.pt").write_text("not an event file")
    with open_curves(tmp_path, SPEC, "probe", ()) as curves:
        curves.scalars(1, {"epoch/loss": 9.0})
    assert read_curves(tmp_path) == {"epoch/loss": [(1, 9.0)]}
    assert len(list(tmp_path.glob(EVENT_FILE_PREFIX + "*"))) == 1 and (tmp_path / "checkpoint.pt").exists()


def test_points_wait_for_a_pretraining_epochs_end_and_for_a_probes_hold(tmp_path: Path) -> None:
    with open_curves(tmp_path / "pretrain", SPEC, "pretrain", ()) as curves:
        curves.loss(1, torch.tensor(0.5), lr=0.1)
        assert len(curves.pending) == 1 and read_curves(tmp_path / "pretrain") == {}  # the loss is still a tensor
        curves.scalars(1, {"epoch/loss": 0.5})  # the epoch's end: written and flushed
        assert not curves.pending
        assert read_curves(tmp_path / "pretrain") == {"train/loss": [(1, 0.5)], "train/lr": [(1, pytest.approx(0.1))], "epoch/loss": [(1, 0.5)]}
    with open_curves(tmp_path / "probe", SPEC, "probe", ()) as curves:
        curves.scalars(1, {"probe/train_loss": 0.25})
        assert len(curves.pending) == 1 and curves.hold_s == PROBE_HOLD_S  # an epoch of milliseconds: held
        curves.written_at -= PROBE_HOLD_S  # as if the hold had passed
        curves.scalars(2, {"probe/train_loss": 0.125})
        assert not curves.pending and read_curves(tmp_path / "probe") == {"probe/train_loss": [(1, 0.25), (2, 0.125)]}


def test_a_failing_write_stops_the_curves_and_never_the_job(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    curves = open_curves(tmp_path, SPEC, "pretrain", ())

    def full_disk(*args: object) -> None:
        raise OSError(28, "No space left on device")

    curves.writer.file_writer.add_summary = full_disk
    curves.scalars(1, {"epoch/loss": 1.0})  # no exception: the training goes on
    curves.scalars(2, {"epoch/loss": 0.9})
    curves.close()
    assert not curves.on
    assert capsys.readouterr().err.count("TensorBoard curves: stopped, the job goes on without them (OSError: [Errno 28] No space left on device)") == 1


def test_curves_off_write_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CURVES_ENV, curves_environment(enabled=False, points_per_epoch=50)[CURVES_ENV])
    with open_curves(tmp_path / "run", SPEC, "pretrain", ()) as curves:
        curves.loss(1, torch.tensor(1.0), lr=0.1)
        curves.scalars(1, {"epoch/loss": 1.0})
        assert not curves.on
    assert not (tmp_path / "run").exists()


def test_the_environment_sets_the_points_per_epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CURVES_ENV, raising=False)
    assert points_per_epoch() == 50
    monkeypatch.setenv(CURVES_ENV, curves_environment(enabled=True, points_per_epoch=200)[CURVES_ENV])
    assert points_per_epoch() == 200
    monkeypatch.setenv(CURVES_ENV, "lots")
    with pytest.raises(InputError, match=CURVES_ENV):
        points_per_epoch()
    with pytest.raises(ValueError, match="points per epoch"):
        curves_environment(enabled=True, points_per_epoch=0)


@pytest.mark.parametrize(("steps", "interval"), [(7, 1), (99, 1), (100, 2), (5_003, 100)])
def test_about_fifty_points_an_epoch_and_every_step_of_a_short_one(steps: int, interval: int) -> None:
    assert curve_interval(steps, 50) == interval
    assert steps // interval >= min(steps, 50)


def test_hparams_are_the_run_axes_and_the_phase_settings() -> None:
    settings = run_settings(SPEC, "pretrain")
    assert settings == {
        "dataset": "coco", "encoder": "resnet8", "encoder_kind": "resnet", "loss": "msc", "batch_size": 32, "seed": 2,
        "loss_options": '{"alpha": 0.5}', "pretrain.epochs": 3, "pretrain.lr": 0.1, "pretrain.max_steps_per_epoch": None,
        "pretrain.betas": "[0.9, 0.99]",
    }  # fmt: skip
    assert "probe.epochs" in run_settings(SPEC, "probe") and "pretrain.lr" not in run_settings(SPEC, "probe")


def test_only_scores_become_metric_curves() -> None:
    metrics = {"micro_f1": 0.5, "map": 0.25, "threshold": 0.5, "num_examples": 12, "map_skipped_labels": 1}
    assert score_tags("val", metrics) == {"val/micro_f1": 0.5, "val/map": 0.25}


def test_bench_curves_measures_both_jobs_on_a_small_dataset(tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """`python -m mscl bench curves` runs (figures are printed, never asserted: they are timings)."""
    monkeypatch.setenv(CURVES_ENV, "50")  # the benchmark sets its --points there: restored after the test
    import numpy as np
    import pandas as pd

    from mscl.__main__ import main as mscl_main
    from mscl.data.manifest import write_dataset

    rng = np.random.default_rng(0)
    splits = {
        split: pd.DataFrame({"id": [f"{split}{i}" for i in range(size)], "features": rng.normal(size=(size, 4)).tolist(),
                             "labels": [["a"] if i % 2 else ["a", "b"] for i in range(size)]})
        for split, size in (("train", 32), ("val", 8), ("test", 8))
    }  # fmt: skip
    write_dataset(tmp_path / "data", splits, labels=["a", "b"], info={})
    spec = {"dataset": "yeast", "encoder_name": "mlp", "encoder": {"kind": "mlp", "input_dim": 4, "hidden_dims": [8]}, "loss": "any",
            "batch_size": 8, "pretrain": {"epochs": 1, "projection_dim": 4}, "probe": {"epochs": 3, "batch_size": 8}}  # fmt: skip
    assert mscl_main(["bench", "curves", "--data", str(tmp_path / "data"), "--spec", json.dumps(spec), "--epochs", "2"]) == 0
    printed = capsys.readouterr().out
    assert "pretraining: 4 steps an epoch, 4 loss points; medians of 2 epochs each" in printed
    assert "probe: 3 epochs on 64-wide features" in printed and printed.count("writer calls:") == 2
