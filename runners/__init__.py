"""Benchmark tool adapters (``runners.tools``) and output parsers (``runners.parsers``)."""
