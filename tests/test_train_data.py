"""Training batches: label ids per sample and the sparse CSR labels the losses read."""

from __future__ import annotations

import torch

from mscl.train.data import Split, TextDataset, make_loader


def test_batches_carry_the_split_targets_as_sparse_csr_labels() -> None:
    targets = torch.tensor([[1, 0, 1, 0], [0, 0, 0, 0], [0, 1, 1, 1], [1, 0, 0, 0], [0, 0, 0, 1]], dtype=torch.float32)
    split = Split([f"d{i}" for i in range(5)], [f"text {i}" for i in range(5)], targets, ignored_labels=0)
    assert [ids.tolist() for ids in split.label_ids] == [[0, 2], [], [1, 2, 3], [0], [3]]
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
