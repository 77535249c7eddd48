"""Training batches: label ids per sample and the sparse CSR labels the losses read."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mscl.train.data import Split, TabularDataset, TextDataset, make_loader
from mscl.train.labels import LabelMatrix


def test_batches_carry_the_split_targets_as_sparse_csr_labels() -> None:
    targets = torch.tensor([[1, 0, 1, 0], [0, 0, 0, 0], [0, 1, 1, 1], [1, 0, 0, 0], [0, 0, 0, 1]], dtype=torch.float32)
    split = Split([f"d{i}" for i in range(5)], [f"text {i}" for i in range(5)], LabelMatrix.from_dense(targets), ignored_labels=0)
    assert [split.labels.ids(row).tolist() for row in range(5)] == [[0, 2], [], [1, 2, 3], [0], [3]]
    loader = make_loader(
        TextDataset(split), 2, shuffle=True, drop_last=False, generator=torch.Generator().manual_seed(3),
        num_workers=0, device=torch.device("cpu"),
    )  # fmt: skip
    seen = []
    for batch in loader:
        labels = batch["labels"]
        assert labels.layout == torch.sparse_csr and labels.shape == (len(batch["text"]), 4)
        for text, row in zip(batch["text"], labels.to_dense()):
            index = int(text.split()[1])
            assert torch.equal(row, targets[index])
            seen.append(index)
    assert sorted(seen) == [0, 1, 2, 3, 4]


class OneSampleAtATime(torch.utils.data.Dataset):
    """The same dataset without `__getitems__`: the DataLoader then fetches sample by sample."""

    def __init__(self, dataset: TabularDataset):
        self.dataset, self.split = dataset, dataset.split

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return self.dataset[index]


@pytest.mark.parametrize("views", [1, 2])
def test_tabular_batches_fetched_at_once_equal_those_fetched_sample_by_sample(views: int) -> None:
    """TabularDataset.__getitems__ draws one mask for the batch: the same batches, bit for bit,
    and the same global RNG state after an epoch, as per-sample fetching (so training results
    do not change)."""
    generator = torch.Generator().manual_seed(0)
    features = torch.randn(37, 11, generator=generator)
    targets = (torch.rand(37, 5, generator=generator) < 0.3).float()
    split = Split([f"g{i}" for i in range(37)], features, LabelMatrix.from_dense(targets), ignored_labels=0)
    dataset = TabularDataset(split, views=views, mask_rate=0.5)
    epochs = {}
    for name, source in (("batched", dataset), ("per sample", OneSampleAtATime(dataset))):
        torch.manual_seed(7)
        loader = make_loader(source, 8, shuffle=True, drop_last=True, generator=torch.Generator().manual_seed(3), num_workers=0, device=torch.device("cpu"))
        epochs[name] = ([(batch["features"], batch["labels"].to_dense()) for batch in loader], torch.get_rng_state())
    (batched, state), (per_sample, per_sample_state) = epochs["batched"], epochs["per sample"]
    assert len(batched) == 37 // 8 and batched[0][0].shape == ((8, views, 11) if views > 1 else (8, 11))
    assert all(torch.equal(a, b) and torch.equal(la, lb) for (a, la), (b, lb) in zip(batched, per_sample))
    assert torch.equal(state, per_sample_state)
    if views > 1:  # the masks did something: about half of each view's values are zeroed
        zeroed = torch.cat([f for f, _ in batched]).eq(0).float().mean()
        assert 0.35 < zeroed < 0.65


def test_image_views_are_the_same_with_any_number_of_persistent_workers(tmp_path) -> None:
    """Random crops are drawn from per-sample seeds the training process draws (SeededViews), so
    two epochs give the same batches, bit for bit, loaded in-process or by two persistent
    workers; the next epoch's views differ from the first's."""
    from PIL import Image

    from mscl.train.data import ImageDataset

    rng = np.random.default_rng(0)
    paths = []
    for index in range(6):
        paths.append(str(tmp_path / f"{index}.jpg"))
        Image.fromarray(rng.integers(0, 256, (30 + index, 40, 3), dtype=np.uint8)).save(paths[-1])
    split = Split([f"i{i}" for i in range(6)], paths, LabelMatrix.from_dense(torch.eye(6)[:, :3]), ignored_labels=0)
    epochs = {}
    for workers in (0, 2):
        loader = make_loader(ImageDataset(split, 16, views=2, crop_scale_min=0.3), 4, shuffle=True, drop_last=True,
                             generator=torch.Generator().manual_seed(1), num_workers=workers, device=torch.device("cpu"))  # fmt: skip
        epochs[workers] = [[(batch["images"], batch["labels"].to_dense()) for batch in loader] for _ in range(2)]
    for first, second in zip(epochs[0], epochs[2]):
        assert all(torch.equal(a, b) and torch.equal(la, lb) for (a, la), (b, lb) in zip(first, second))
    assert epochs[0][0][0][0].shape == (4, 2, 3, 16, 16) and not torch.equal(epochs[0][0][0][0], epochs[0][1][0][0])


WORKER_EPOCH = """
import sys, numpy as np, torch
from PIL import Image
from mscl.train.data import ImageDataset, Split, make_loader
from mscl.train.labels import LabelMatrix
folder = sys.argv[1]
paths = []
for index in range(4):
    paths.append(f"{folder}/{index}.jpg")
    Image.fromarray(np.full((20, 20, 3), index, dtype=np.uint8)).save(paths[-1])
split = Split([f"i{i}" for i in range(4)], paths, LabelMatrix.from_dense(torch.eye(4)), ignored_labels=0)
loader = make_loader(ImageDataset(split, 8, views=2), 2, shuffle=True, drop_last=True,
                     generator=torch.Generator().manual_seed(0), num_workers=1, device=torch.device("cpu"))
print("batches", sum(1 for _ in loader))
"""


def test_image_workers_hand_over_their_batches_under_a_deep_tmpdir(tmp_path) -> None:
    """A worker hands each batch's tensors over through a socket multiprocessing makes under
    TMPDIR. Under a TMPDIR too deep for an AF_UNIX path its bind failed in the worker's queue
    thread and the training process waited forever for the lost batch (seen in the fault test,
    whose job TMPDIR is deep); the worker now uses a short folder. Run apart, with a timeout,
    so that a hang fails instead of stopping the suite."""
    import os
    import subprocess
    import sys
    import tempfile

    from mscl.sockets import MULTIPROCESSING_LISTENER, SOCKET_PATH_MAX

    deep = tmp_path / ("d" * 60) / ("e" * 40)
    deep.mkdir(parents=True)
    assert len(os.path.join(str(deep), MULTIPROCESSING_LISTENER)) > SOCKET_PATH_MAX  # the case that hung
    images = tempfile.mkdtemp(dir=tmp_path)
    done = subprocess.run([sys.executable, "-c", WORKER_EPOCH, images], env={**os.environ, "TMPDIR": str(deep)},
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0 and "batches 2" in done.stdout, done.stderr[-2000:]
    assert "AF_UNIX path too long" not in done.stderr


def test_auto_workers_go_to_photo_sized_images_only() -> None:
    """auto: one worker per torch thread for images of >= 128 px, none for small images, text
    and tabular data; a number is taken as given."""
    from mscl.train.data import worker_count

    threads = torch.get_num_threads()
    assert worker_count("auto", "image", 224) == threads and worker_count("auto", "image", 128) == threads
    assert worker_count("auto", "image", 32) == 0 and worker_count("auto", "text", 224) == 0 and worker_count("auto", "tabular", 0) == 0
    assert worker_count(3, "image", 32) == 3 and worker_count("0", "image", 224) == 0
