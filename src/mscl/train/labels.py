"""A split's multi-hot labels [N, L] held sparse: each sample's label ids, never a dense matrix.

At the paper's sizes a dense float32 [N, L] is what breaks first: MIMIC-IV-ICD10-Full's train
split (110,442 notes x 25,230 codes) is 11.1 GB, where its 1.7 M label occurrences take 13 MB
as CSR (docs/scale.md). So every stage keeps labels as a `LabelMatrix` and makes dense rows
only for what it works on at once: a probe batch (`dense(rows)`), a chunk of metric columns
(`mscl.metrics` reads `to_scipy()`), a batch's loss labels (`mscl.losses.csr_labels`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from torch import Tensor

from mscl.data.manifest import label_id_lists


@dataclass(frozen=True)
class LabelMatrix:
    """Multi-hot labels [N, num_labels] in CSR form: sample i carries the label ids
    indices[indptr[i]:indptr[i + 1]], ascending and without repeats (int64 tensors, on one device)."""

    indptr: Tensor  # [N + 1]
    indices: Tensor  # [number of label occurrences]
    num_labels: int

    @classmethod
    def from_label_lists(cls, label_lists: Sequence[Sequence[str]], vocabulary: Sequence[str]) -> tuple["LabelMatrix", int]:
        """The labels of `label_lists` (names) over `vocabulary`, and how many occurrences were
        not in it (dropped, counted). A name listed twice in a sample counts once."""
        indptr, indices, ignored = label_id_lists(label_lists, vocabulary)
        return cls(torch.from_numpy(indptr), torch.from_numpy(indices), len(vocabulary)), ignored

    @classmethod
    def from_dense(cls, dense: Tensor | np.ndarray) -> "LabelMatrix":
        """The nonzero cells of a dense [N, L] matrix (tests and small benchmarks)."""
        dense = torch.as_tensor(np.asarray(dense) if not isinstance(dense, Tensor) else dense)
        rows, columns = dense.nonzero(as_tuple=True)
        indptr = torch.zeros(len(dense) + 1, dtype=torch.long)
        indptr[1:] = torch.cumsum(torch.bincount(rows, minlength=len(dense)), 0)
        return cls(indptr, columns.long(), int(dense.shape[1]))

    def __len__(self) -> int:
        return len(self.indptr) - 1

    @property
    def shape(self) -> tuple[int, int]:
        return len(self), self.num_labels

    @property
    def device(self) -> torch.device:
        return self.indices.device

    def ids(self, row: int) -> Tensor:
        """Sample `row`'s label ids (a view)."""
        return self.indices[self.indptr[row] : self.indptr[row + 1]]

    def any(self) -> bool:
        return self.indices.numel() > 0

    def to(self, device: torch.device | str) -> "LabelMatrix":
        return LabelMatrix(self.indptr.to(device), self.indices.to(device), self.num_labels)

    def column_counts(self) -> Tensor:
        """How many samples carry each label, int64 [num_labels]."""
        return torch.bincount(self.indices, minlength=self.num_labels)

    def dense(self, rows: Tensor | None = None) -> Tensor:
        """Float32 multi-hot rows [len(rows), L] (every row when None), on this matrix's device."""
        if rows is None:
            rows = torch.arange(len(self), device=self.device)
        rows = rows.to(self.device)
        starts, lengths = self.indptr[rows], self.indptr[rows + 1] - self.indptr[rows]
        # Position of every selected occurrence in `indices`: its row's start plus its rank in the row.
        ends = torch.cumsum(lengths, 0)
        rank = torch.arange(int(ends[-1]) if len(ends) else 0, device=self.device) - torch.repeat_interleave(ends - lengths, lengths)
        out = torch.zeros(len(rows), self.num_labels, dtype=torch.float32, device=self.device)
        out[torch.repeat_interleave(torch.arange(len(rows), device=self.device), lengths), self.indices[torch.repeat_interleave(starts, lengths) + rank]] = 1.0
        return out

    def column_block(self, start: int, stop: int) -> Tensor:
        """Float32 multi-hot columns start..stop-1 of every row [N, stop - start]."""
        inside = (self.indices >= start) & (self.indices < stop)
        out = torch.zeros(len(self), stop - start, dtype=torch.float32, device=self.device)
        out[self.row_of_occurrences()[inside], self.indices[inside] - start] = 1.0
        return out

    def row_of_occurrences(self) -> Tensor:
        """The sample of every entry of `indices`."""
        return torch.repeat_interleave(torch.arange(len(self), device=self.device), self.indptr[1:] - self.indptr[:-1])

    def first_columns(self, width: int) -> "LabelMatrix":
        """The labels restricted to ids < width (a smaller label space of the same samples)."""
        keep = self.indices < width
        indptr = torch.zeros_like(self.indptr)
        indptr[1:] = torch.cumsum(torch.bincount(self.row_of_occurrences()[keep], minlength=len(self)), 0)
        return LabelMatrix(indptr, self.indices[keep], width)

    def to_scipy(self):
        """A scipy.sparse bool CSR array [N, L] of the same cells: what `mscl.metrics` reads."""
        from scipy import sparse

        indices = self.indices.cpu().numpy()
        return sparse.csr_array((np.ones(len(indices), dtype=bool), indices, self.indptr.cpu().numpy()), shape=self.shape)
