"""Preloaded by a test job server (tests/test_jobserver.py): starts torch's intra-op (OpenMP)
thread pool in the server, a state from which the server must refuse to fork."""

import torch

torch.set_num_threads(2)
torch.ones(1 << 22).sum()  # 4M elements: above torch's grain size, so the sum runs in parallel
