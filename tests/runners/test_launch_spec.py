"""The typed launch spec (runners/launch.py): what the matrix expansion writes is what the
executor reads, and a stored spec a worker cannot use is refused with a clear message."""

from __future__ import annotations

from pathlib import Path

import pytest

from runners.launch import LaunchError, LaunchSpec, queue_for
from runners.tools.base import Host


def test_round_trip_and_context(tmp_path):
    spec = LaunchSpec(
        workdir="/data/bench",
        launcher="stor1",
        mode="mpi",
        hosts=(Host("c1", "10.0.0.1"), Host("c2", "c2.lab")),
        tasks_per_node=4,
        timeout_s=600,
        drop_caches=True,
        tuning={"os.vm.dirty_ratio": "10"},
    )
    stored = spec.to_json()
    assert stored["hosts"] == [["c1", "10.0.0.1"], ["c2", "c2.lab"]]
    # Run.launch also holds the run's history and parse options: the spec ignores them.
    assert LaunchSpec.read({**stored, "history": [{"attempt": 1}], "parse_options": {}}) == spec
    ctx = spec.context(tmp_path)
    assert (ctx.workdir, ctx.mode, ctx.tasks_per_node) == (Path("/data/bench"), "mpi", 4)
    assert ctx.hosts == spec.hosts and ctx.scratch == tmp_path
    assert queue_for("stor1") == "node.stor1"


@pytest.mark.parametrize(
    "launch, message",
    [
        (None, "no launch spec"),
        ({}, "malformed launch spec"),
        ({"workdir": ""}, "is not a directory path"),
        ({"workdir": "/d", "mode": "ssh"}, "mode 'ssh' is not one of single, mpi, multihost"),
        ({"workdir": "/d", "hosts": [["c1"]]}, "malformed launch spec"),
        ({"workdir": "/d", "hosts": [["c1", "bad host!"]]}, "launch spec: hosts"),
        ({"workdir": "/d", "tasks_per_node": "many"}, "malformed launch spec"),
        ({"workdir": "/d", "tuning": ["x"]}, "tuning is not a mapping"),
    ],
)
def test_a_spec_a_worker_cannot_use_is_refused(launch, message):
    with pytest.raises(LaunchError, match=message):
        LaunchSpec.read(launch)
