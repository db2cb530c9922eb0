"""The chaos soak, short (issue 28; tests/soak/harness.py): ~40 short real runs (dd, fio) of
two users on the three nodes of a network-namespace lab, with its own PostgreSQL and Redis,
while a seeded fault plan restarts PostgreSQL and Redis, SIGKILLs and restarts a node worker
and beat, cuts a node's link, fills a node's benchmark directory and steps a node's clock,
two of them within a minute. Then: every run final (a failure with its reason), none lost
or stuck, each attempt's tool started at most once and its results stored once, no two runs
overlapping on a node, no lease left, the summaries equal to a rebuild, the raw output of
every run whose tool ended stored.

SOAK_SEED, SOAK_RUNS, SOAK_FAULTS and SOAK_KINDS (tests/soak/harness.py, Config.from_env)
change it; ``make soak`` runs the long one. Nothing here bounds a duration: the soak's waits
are for states and counts, its deadline only a hang guard."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.labs.servers import unavailable
from tests.soak.harness import Config, Soak, clock_unavailable, parse_kinds

pytestmark = [
    pytest.mark.slow,
    pytest.mark.soak,
    pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed"),
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("losetup") is None or shutil.which("mkfs.ext4") is None,
        reason="loop-mounted benchmark directories need root, losetup and mkfs.ext4",
    ),
    pytest.mark.skipif(bool(unavailable()), reason=f"the soak's own servers: {unavailable()}"),
]


def test_short_chaos_soak_loses_nothing(netns_available, tmp_path):
    # Every kind (SOAK_KINDS overrides them); clock steps only where libfaketime and gcc are
    # (tests/soak/realsleep.c), else said and left out.
    kinds = parse_kinds("all" if not clock_unavailable() else "-clock")
    if clock_unavailable():
        print(f"\nclock steps left out: {clock_unavailable()}")
    config = Config.from_env(runs=40, faults=8, seed=28, kinds=kinds)
    soak = Soak(tmp_path, config)
    try:
        soak.start()
        outcome = soak.run()
    finally:
        soak.close()
    report = soak.report(outcome)
    print("\n" + report)
    assert not outcome.failures, report
    assert outcome.runs >= config.runs
    assert {f.kind for f in soak.plan if f.started is not None} == set(config.kinds), report
