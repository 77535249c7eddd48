"""Dataset preprocessing: raw published formats -> one manifest format for all datasets."""
