"""The benchmarks (``make bench``; results in docs/benchmarks.md). Run each from the
repository root as a module: ``python -m benchmarks.quality``."""
