"""The benchmarks (``make bench``; results in docs/benchmarks.md), in rooms by what they
measure. Run each from the repository root as a module:
``python -m benchmarks.<room>.<name>``, e.g. ``python -m benchmarks.quality.quality``."""
