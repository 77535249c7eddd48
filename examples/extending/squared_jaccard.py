"""A loss of one's own, as a plugin: the config lists this file under `plugins:` and names the
loss `squared_jaccard` in an experiment block's `losses` (docs/extending.md).

It is a weighted-pair loss: every pair of samples that shares a label is a positive, weighted by
the square of the Jaccard similarity of their label sets, so that near-identical label sets
pull much harder than a single shared label.
"""

import mscl


def squared_jaccard_weights(overlap):
    """LabelOverlap -> [B, B] weights: (|S ∩ T| / |S ∪ T|)^2, 0 for disjoint label sets.

    `overlap.sizes` [B] holds |S| of every sample, `overlap.intersection` [B, B] every |S ∩ T|
    (torch tensors); the union follows from them."""
    union = overlap.sizes[:, None] + overlap.sizes[None, :] - overlap.intersection
    return (overlap.intersection / union.clamp_min(1)) ** 2


mscl.register_pair_loss("squared_jaccard", squared_jaccard_weights, display="Jaccard²")
