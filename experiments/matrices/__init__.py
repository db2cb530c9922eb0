"""Benchmark matrices: axes and rules expanded into cells (plan), validation, YAML files, forms and
adaptive repetitions."""
