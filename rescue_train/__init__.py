"""rescue-train: train and benchmark models on RESCUE-Bench."""

__version__ = "0.1.0"
