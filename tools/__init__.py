"""Developers' tools, not part of the package: the identical-output check, the ranking A/B,
a reference ranking the fast one must equal, and helpers that start real servers for the
tests and the load benchmark. Run from the repository root: ``python -m tools.same_output``."""
