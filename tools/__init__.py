"""Helpers for running the local stack: the demo, the tests and the benchmarks."""
