"""Telemetry of every node a run holds, on one time axis, on the network-namespace cluster
(tests/labs/netns.py): three nodes, each with its own hostname and its own Celery worker (and so
its own node agent, experiments.execution.agent) reaching PostgreSQL and Redis over the network. The
testbed is launched from node1; node2 is its metadata server and node3 its storage server,
so a run holds all three.

A fio run of 4 s ends with a telemetry row per held node: node1's from its executor, node2's
and node3's from their agents, each sampled in its own namespace (its own /proc/net/dev).
node1 samples from just before its tool starts to just after it ends; node2 and node3 start at
their agents' first poll after the tool started, so their first readings fall inside node1's
window; every node's clock agrees with the database server's within what its measurement can
tell (half its round trip: one kernel clock); and the run page draws a panel per node on the
shared axis.

Nothing here bounds a duration (issue 24): how late an agent starts, how many readings fit
into the run and what a reading costs are the machine's (the sampler's cost per reading is
measured by bench/telemetry.py).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
import zlib
from datetime import timedelta

import pytest

from tests.labs import Stack, finished, launch, run_page, wait_for, wait_for_workers

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed"),
    pytest.mark.skipif(
        not os.environ.get("DATABASE_URL", "").startswith("postgres"),
        reason="the namespaces reach the database over the network: PostgreSQL only",
    ),
]

FIO = """\
name: telemetry
tool: fio
testbeds: [tb]
repetitions: 1
drop_caches: false
timeout_s: 120
params: {rw: write, size: 4m, bs: 1m, runtime: 4, time_based: true}
"""

ROWS = """
SELECT t.hostname, t.started_at, t.samples, t.meta, r.uuid::text, r.status, r.nodes_held,
       t.interval_s, t.data
FROM experiments_runtelemetry t JOIN experiments_run r ON r.id = t.run_id ORDER BY 1
"""


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) process ``pid`` has used so far."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_multi_node_run_shows_every_nodes_telemetry_on_one_time_axis(netns_lab, tmp_path):
    began = time.monotonic()
    stack = Stack(tmp_path)
    try:
        bench = tmp_path / "bench"
        bench.mkdir()
        nodes = {n.hostname: {"owner": "alice", "address": n.address} for n in netns_lab.nodes}
        roles = {"node1": ["client"], "node2": ["metadata"], "node3": ["storage"]}
        testbed = {"name": "tb", "owner": "alice", "benchmark_dir": str(bench), "members": roles}
        stack.call("inventory", {"users": {"alice": "x"}, "nodes": nodes, "testbeds": [testbed]})
        stack.node_workers(netns_lab, {"BEEWEB_NODE_DIRS": str(bench)})
        wait_for_workers(stack, "node1@node1", "node2@node2", "node3@node3", agents=True)
        up = time.monotonic() - began

        launch(stack, ("alice", FIO))
        status = "SELECT status FROM experiments_run"
        assert wait_for(lambda: finished(stack), 120, 0.2)
        assert stack.sql(status) == [("succeeded",)], stack.sql("SELECT error FROM experiments_run")
        # The agents store at their first poll after the tool ended.
        assert wait_for(lambda: len(stack.sql(ROWS)) == 3, 60, 0.2), stack.sql(ROWS)
        rows = stack.sql(ROWS)
        assert [r[0] for r in rows] == ["node1", "node2", "node3"]
        assert rows[0][6] == ["node1", "node2", "node3"]  # the run held all three
        starts = {r[0]: r[1] for r in rows}
        times = {r[0]: json.loads(zlib.decompress(bytes(r[8])))["t"] for r in rows}
        # node1's sampler takes its first reading just before its tool starts and its last
        # just after it ended (then it asks the other nodes to stop): its window holds the
        # tool's run. The other nodes started sampling once the tool had started and before
        # it ended, each at its agent's poll.
        tool_start = starts["node1"]
        tool_end = tool_start + timedelta(seconds=times["node1"][-1])
        for name in ("node2", "node3"):
            assert tool_start < starts[name] < tool_end, (name, starts, tool_end)
        pids = dict(stack.sql("SELECT name, pid FROM experiments_worker"))
        for name, _, samples, meta, *_, interval, _ in rows:
            t = times[name]
            # A series (a first and a closing reading at least) on the sampler's grid: one
            # reading per interval at most, besides the closing one.
            assert samples == len(t) >= 2, (name, samples, t)
            assert all(b > a for a, b in zip(t, t[1:], strict=False)), (name, t)
            assert len(t) <= math.floor(t[-1] / interval) + 2, (name, interval, t)
            # Every node measured its clock against the database server's: one kernel clock
            # in the namespaces, so the offset found is within half the probe's round trip
            # (each rounded to 0.1 ms).
            clock = meta["clock"]
            assert abs(clock["offset_s"]) <= clock["rtt_s"] / 2 + 1e-4, (name, clock)
            # The sampler's CPU time is its thread's: part of its worker process's.
            cpu = cpu_seconds(pids[f"{name}@{name}"])
            assert 0 <= meta["sampler_cpu_s"] <= cpu, (name, meta["sampler_cpu_s"], cpu)

        uuid = rows[0][4]
        code, page = run_page(stack, "alice", uuid)
        assert code == 200
        for name in ("node1", "node2", "node3"):
            assert f"CPU of {name}" in page, page[-3000:]
        assert 'id="telemetry-figure"' in page
        offsets = [meta["clock"]["offset_s"] for _, _, _, meta, *_ in rows]
        if max(offsets) - min(offsets) <= 1.0:
            assert "clock-note" not in page  # the clocks agree within a second: nothing to say
        lags = ", ".join(
            f"{n} {(s - tool_start).total_seconds() * 1000:+.0f} ms" for n, s in starts.items()
        )
        clocks = ", ".join(
            f"{name} {meta['clock']['offset_s'] * 1000:+.1f} ms "
            f"(rtt {meta['clock']['rtt_s'] * 1000:.1f} ms)"
            for name, _, _, meta, *_ in rows
        )
        cpu = ", ".join(f"{r[0]} {r[3]['sampler_cpu_s'] / r[2] * 100:.2f} %" for r in rows)
        spread = max(starts.values()) - min(starts.values())
        print(
            f"\ncluster up in {up:.1f} s; first readings vs the launcher's: {lags} "
            f"(spread {spread.total_seconds() * 1000:.0f} ms); clocks vs the database: {clocks}; "
            f"sampler CPU per node: {cpu}; "
            f"{time.monotonic() - began:.1f} s in all"
        )
    finally:
        stack.close()
