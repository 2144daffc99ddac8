"""Benchmarks: `python bench/run.py [--quick]` writes bench/results.json."""
