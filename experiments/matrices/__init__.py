"""Benchmark matrices, one job per module: axes (grammar, bounds, MatrixError), rules (the
exclusion-rule language), cells, launching (launch context and spec), preview (plan, problems
before saving), expansion (runs created, sent, cancelled; progress), comparing (a matrix's
comparison link), validation, files (YAML), forms and adaptive repetitions. Import each name
from the module that defines it: this package re-exports nothing."""
