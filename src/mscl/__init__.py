"""mscl: multi-label supervised contrastive learning, reproduction pipeline for the
Similarity-Dissimilarity Loss paper (TMLR 2026).

A plugin (a file or module listed under the config's `plugins:`) adds a loss or an encoder
kind with the three registration functions below (mscl.registry, docs/extending.md). Importing
mscl stays light: nothing here imports torch.
"""

from mscl.registry import register_encoder, register_loss, register_pair_loss

__version__ = "0.1.0"
__all__ = ["register_encoder", "register_loss", "register_pair_loss"]
