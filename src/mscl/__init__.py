"""mscl: multi-label supervised contrastive learning, reproduction pipeline for the
Similarity-Dissimilarity Loss paper (TMLR 2026)."""

__version__ = "0.1.0"
