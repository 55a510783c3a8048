"""Concurrency: the worker threads sources run on, the loops requests run on, BLAS threads."""
