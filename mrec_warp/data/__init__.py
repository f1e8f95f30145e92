"""Data layer: interaction matrices, readers and writers, splits, synthetic data, datasets."""
