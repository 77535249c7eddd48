"""The report's convergence figure (mscl.report.loss_curves) from pretraining folders."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from mscl.__main__ import main as mscl_main
from mscl.report.loss_curves import Names, loss_curves_figure, read_curves


def pretraining(root: Path, dataset: str, loss: str, batch: int, seed: int, losses: list[float] | None) -> Path:
    """A pretraining folder: its resolved spec and, unless `losses` is None (a method that
    trains nothing), a train_log.csv with one row per epoch."""
    folder = root / dataset / "enc" / loss / f"bs{batch}" / f"seed{seed}" / "pretrain"
    folder.mkdir(parents=True)
    spec = {"dataset": dataset, "encoder_name": "enc", "encoder": {"kind": "resnet"}, "loss": loss, "batch_size": batch, "seed": seed}
    (folder / "resolved_spec.json").write_text(json.dumps(spec))
    if losses is not None:
        rows = [f"{epoch},1,{value},0.1,100,1.0," for epoch, value in enumerate(losses, start=1)]
        (folder / "train_log.csv").write_text("epoch,steps,loss,lr,samples_per_second,seconds,val_map_readout\n" + "\n".join(rows) + "\n")
    return folder


NAMES = Names(
    pd.DataFrame(
        {"dataset": ["coco"], "dataset_display": ["COCO-demo"], "encoder": ["enc"], "encoder_display": ["ResNet-8"],
         "loss": ["simdissim"], "method_display": ["Sim-Dissim"]}
    )
)  # fmt: skip
SETTLED = [4.0, 3.0, 2.5, 2.4, 2.4, 2.4, 2.4, 2.4]  # flat over its last two quarters
FALLING = [2.0, 1.9, 1.8, 1.7, 1.6, 1.4, 1.2, 1.0]  # last quarter 1.1 vs 1.5 before: -27%


@pytest.fixture
def folders(tmp_path: Path) -> list[Path]:
    return [
        pretraining(tmp_path, "coco", "simdissim", 64, 0, SETTLED),
        pretraining(tmp_path, "coco", "simdissim", 64, 1, [2 * value for value in SETTLED]),  # same curve relative to epoch 1
        pretraining(tmp_path, "coco", "any", 64, 0, FALLING),
        pretraining(tmp_path, "coco", "any", 32, 0, FALLING),  # the batch-size sweep's extra run
        pretraining(tmp_path, "coco", "none", 64, 0, None),  # trains nothing
        pretraining(tmp_path, "voc", "any", 64, 0, [1.0, 0.9]),
    ]


def test_lines_are_relative_to_the_first_epoch_and_averaged_over_seeds(folders: list[Path]) -> None:
    figure, data = loss_curves_figure(read_curves(folders), NAMES)
    simdissim = data[(data["loss"] == "simdissim")].sort_values("epoch")
    assert simdissim["mean"].tolist() == pytest.approx([value / 4.0 for value in SETTLED])
    assert simdissim["seeds"].eq(2).all() and simdissim["min"].tolist() == simdissim["max"].tolist()
    assert set(data["batch_size"][data["dataset"] == "coco"]) == {64}  # the size most coco runs share
    assert "none" not in set(data["loss"])
    assert len(figure.axes) == 2  # a panel per dataset x encoder


def test_the_notes_say_which_lines_have_not_converged(folders: list[Path]) -> None:
    _, data = loss_curves_figure(read_curves(folders), NAMES)
    assert "Settled: 1 of 3 lines" in data.attrs["caption"]
    assert "Batch sizes left out (each panel shows the size most of its runs share): COCO-demo, ResNet-8: 32." in data.attrs["caption"]
    assert data.attrs["notes"] == [
        "Still moving, their last quarter of epochs more than 5% from the quarter before in mean loss (falling: more epochs may help; "
        "rising: diverging): COCO-demo, ResNet-8, any (-27%).",
        "Fewer than 4 epochs, too short to judge: voc, ResNet-8, any.",
    ]  # fmt: skip


def test_the_command_writes_the_figure_and_its_page(folders: list[Path], tmp_path: Path) -> None:
    runs = tmp_path / "all_runs.csv"
    runs.write_text(
        "dataset,encoder,encoder_role,loss,batch_size,seed,split,metric,value,dataset_display,encoder_display,paper_dataset,paper_encoder,method_display,encoder_order\n"
        "coco,enc,resnet,simdissim,64,0,test,map,0.5,COCO-demo,ResNet-8,False,False,Sim-Dissim,0\n"
    )
    prefix = tmp_path / "figures" / "loss_curves"
    prefix.parent.mkdir()
    assert mscl_main(["loss-curves", "--pretrain", *map(str, folders), "--runs", str(runs), "--out-prefix", str(prefix)]) == 0
    assert prefix.with_suffix(".png").stat().st_size > 1000 and prefix.with_suffix(".pdf").exists()
    page = prefix.with_suffix(".html").read_text()
    assert "did every run converge?" in page and "COCO-demo, ResNet-8, any (-27%)" in page
