"""Benchmarks of beeweb at 100,000 runs (see bench/README.md)."""
