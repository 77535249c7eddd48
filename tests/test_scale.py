"""The paper's sizes at small S (docs/scale.md): `make-synthetic` writes the paper's shapes, and
`bench scale` runs its stages on them. The scale runs themselves are benchmarks, not tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from mscl.__main__ import main as mscl_main
from mscl.bench.scale import Row, fit_lines
from mscl.demo import synthetic
from mscl.errors import InputError
from mscl.train.data import ImageDataset, load_split


def test_synthetic_text_has_the_papers_split_sizes_labels_and_document_lengths(tmp_path: Path) -> None:
    """AAPD at S = 0.002: the paper's 37.8k / 6.7k / 11.3k x S, its 54 labels and 2.4 per sample,
    abstracts of about 160 words that carry their labels' names; the same seed gives the same data."""
    out = tmp_path / "aapd"
    assert mscl_main(["make-synthetic", "aapd", "--scale", "0.002", "--out", str(out), "--seed", "3"]) == 0
    stats = json.loads((out / "stats.json").read_text())
    assert stats["counts"] == {"train": 76, "val": 13, "test": 23} and stats["num_labels"] == 54
    assert stats["synthetic"] is True and stats["scale"] == 0.002 and len((out / "labels.txt").read_text().split()) == 54
    assert 1.8 < stats["avg_labels"] < 3.0
    train = pd.read_parquet(out / "train.parquet")
    words = train["text"].str.split()
    assert 120 < words.str.len().mean() < 200
    assert all({label.lower() for label in labels} <= set(text) for labels, text in zip(train["labels"], words))
    frequency = sorted(stats["splits"]["train"]["label_frequency"].values(), reverse=True)
    assert frequency[0] > 4 * frequency[len(frequency) // 2]  # long-tailed
    again = tmp_path / "again"
    synthetic.make_synthetic("aapd", 0.002, again, seed=3)
    pd.testing.assert_frame_equal(pd.read_parquet(again / "train.parquet"), train)


def test_synthetic_images_are_photo_sized_jpegs_the_training_loader_reads(tmp_path: Path) -> None:
    out = tmp_path / "voc"
    stats = synthetic.make_synthetic("voc", 0.004, out)
    assert stats["counts"] == {"train": 20, "val": 10, "test": 10} and stats["num_labels"] == 20
    train = load_split(out, "train", (out / "labels.txt").read_text().split(), "image")
    for path in train.items[:4]:
        with Image.open(path) as image:
            assert image.format == "JPEG" and image.size in ((500, 375), (375, 500))
        assert 60_000 < Path(path).stat().st_size < 200_000
    item = ImageDataset(train, 32, views=2, crop_scale_min=0.2)[(0, 7)]
    assert item["images"].shape == (2, 3, 32, 32) and len(item["label_ids"]) >= 1


def test_make_synthetic_refuses_a_bad_scale_and_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InputError, match="--scale 0.0 is outside"):
        synthetic.make_synthetic("coco", 0.0, tmp_path / "none")
    calls = []

    def failing_jpeg(*args):
        calls.append(1)
        if len(calls) > 3:
            raise OSError("disk full")
        return b"\xff\xd8"

    monkeypatch.setattr(synthetic, "jpeg", failing_jpeg)
    with pytest.raises(OSError, match="disk full"):
        synthetic.make_synthetic("voc", 0.004, tmp_path / "voc")
    assert not (tmp_path / "voc").exists()


def test_bench_scale_fits_a_line_per_stage_and_extrapolates_it() -> None:
    rows = [Row("d", scale, samples, 10, "probe", 2.0 + samples / 1000, 100.0 + samples / 10) for scale, samples in ((0.1, 1000), (0.2, 2000))]
    rows.append(Row("d", 0.1, 1000, 10, "table", 1.0, 50.0))  # one size only: no fit
    (line,) = fit_lines(rows, 10_000)
    assert line.startswith("probe") and "->     1100 MiB at S = 1" in line and "->       12 s at S = 1" in line


@pytest.mark.slow
def test_bench_scale_runs_the_dataset_stages_at_a_small_scale(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert mscl_main(["bench", "scale", "--dataset", "aapd", "--scales", "0.001", "--skip", "pretrain", "probe",
                      "--workdir", str(tmp_path), "--csv", str(tmp_path / "scale.csv")]) == 0  # fmt: skip
    measured = pd.read_csv(tmp_path / "scale.csv")
    assert list(measured["stage"]) == ["make-synthetic", "chance", "collect", "table"]
    assert (measured["samples"] == 38 + 7 + 11).all() and (measured["peak_rss_mib"] > 10).all() and (measured["wall_s"] > 0).all()
    assert "aapd" in capsys.readouterr().out
    assert np.isfinite(measured["peak_rss_mib"]).all()


def test_bench_scale_refuses_a_probe_without_its_pretraining(capsys: pytest.CaptureFixture) -> None:
    """--skip pretrain alone would run the probe on an encoder nobody wrote: refused at once."""
    with pytest.raises(SystemExit) as stopped:
        mscl_main(["bench", "scale", "--skip", "pretrain"])
    assert stopped.value.code == 2 and "--skip pretrain needs --skip probe too" in capsys.readouterr().err
