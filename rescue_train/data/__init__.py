"""Loading, validation, taxonomy and splits of RESCUE-Bench data."""

from .fields import DataError
from .load import BUNDLED, Benchmark, bundled_path, load_benchmark, load_samples
from .schema import Row, Sample

__all__ = ["BUNDLED", "Benchmark", "DataError", "Row", "Sample", "bundled_path", "load_benchmark", "load_samples"]
