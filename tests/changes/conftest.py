"""Fixtures of the change-point tests."""

from __future__ import annotations

import pytest

from tests.helpers.changes import make_history, node_config, noisy


@pytest.fixture
def history(testbed, alice):
    """20 runs at ~2 GB/s on kernel 6.1, then 12 at ~1.4 GB/s on kernel 6.8 with the
    ``none`` I/O scheduler."""
    values = noisy(11, (2.0e9, 20), (1.4e9, 12))
    configs = [node_config() for _ in range(20)]
    configs += [node_config("6.8.0-31-generic", "none") for _ in range(12)]
    return make_history(testbed, alice, values, configs)
