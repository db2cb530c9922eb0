"""Published-study data set: one plain-data module per seed document (../shared/seeds)."""

from __future__ import annotations

# Each module defines KEY, SOURCE, PROFILES, NODES, TESTBEDS, TUNING_SETS and RUNS, with a
# source_ref on every dict, so ``manage.py load_published`` can cite each stored value.
from experiments.published import seed000, seed001, seed002, seed003, seed004

SEEDS = [seed000, seed001, seed002, seed003, seed004]

__all__ = ["SEEDS"]
