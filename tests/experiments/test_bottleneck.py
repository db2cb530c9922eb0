"""experiments.shared.bottleneck on synthetic series: each kind of saturation, phases from the
tool's
series, nodes on one time axis, and the latency-bound verdict."""

from __future__ import annotations

from experiments.shared.bottleneck import LATENCY_BOUND, phases, summary, verdicts
from tests.helpers.telemetry import node

GB = 1e9


def test_a_saturated_disk_during_the_write_phase():
    storage = node("storage02", **{"disk_util:sdb": [0.1, 0.99, 0.98, 0.97, 0.99, 0.5] + [0] * 4})
    client = node()
    client["tool"] = {"t": [2.0, 3.0, 4.0, 5.0, 6.0], "series": {"write_bw": [1, 2, 2, 2, 1]}}
    assert phases([client, storage]) == [("write", 1.0, 6.0)]
    (v,) = verdicts([client, storage])
    assert v.phase == "write" and (v.start, v.end) == (1.0, 6.0)
    # Samples at t=2..6 fall in the phase; four of five are at >= 90 %.
    assert v.headline == "sdb on storage02 at 98% utilisation during 80% of the write phase"
    assert [f.resource for f in v.saturated] == ["disk"]


def test_one_core_of_the_client_and_the_tool_process():
    busy = node(tool_cpu_top=[1.0] * 10, tool_cpu_wait=[0.0] * 10, tool_cpu=[1.0] * 10)
    (v,) = verdicts([busy])
    assert v.phase == "run"
    assert v.headline == (
        "one core of client01 at 100% (fio, the tool's busiest process; running 100%) "
        "during 100% of the run"
    )
    # Running 60 % and waiting 40 %: as CPU-bound, and the wait is named.
    shared = node(tool_cpu_top=[0.6] * 10, tool_cpu_wait=[0.4] * 10)
    (v,) = verdicts([shared])
    assert v.saturated[0].resource == "cpu"
    assert "waiting for a CPU 40%: other processes share the cores" in v.headline
    # Without the tool's processes (another node): the busiest core of /proc/stat.
    other = node(**{"cpu_busy:cpu1": [0.2, 0.99, 1.0, 0.98, 1.0, 0.97, 0.99, 1.0, 0.2, 0.2]})
    (v,) = verdicts([other])
    assert v.headline == "one core of client01 at 99% during 70% of the run"


def test_network_against_the_link_rate():
    n = node(
        "storage01",
        **{"net_tx_bw:ib0": [12.1e9] * 8 + [0, 0], "net_rx_bw:ib0": [1e6] * 10},
    )
    # The kernel states no speed for ib0: the hardware profile's 100 Gb/s applies.
    (v,) = verdicts([n], {"storage01": 100 / 8 * GB})
    assert v.headline == "network of storage01 at 97% of 100 Gb/s (ib0 tx) during 80% of the run"
    # The kernel's own link speed wins over the profile's.
    n["meta"]["nic_speed_mbps"] = {"ib0": 200000}
    (v,) = verdicts([n], {"storage01": 100 / 8 * GB})
    assert v.headline == LATENCY_BOUND
    assert "ib0 tx on storage01 at 39% of 200 Gb/s" in v.busiest


def test_nothing_saturated_is_latency_bound_with_the_busiest_named():
    (v,) = verdicts([node(tool_cpu_top=[0.3] * 10)])
    assert v.headline == LATENCY_BOUND and not v.saturated
    assert v.busiest[0] == "sdb on client01 30% busy"
    assert "fio on client01 at 30% of one core" in v.busiest


def test_a_node_loaded_by_others_is_a_cpu_verdict_that_says_so():
    # Before issue 25 this read "no resource saturated" beside the saturated CPU.
    n = node(cpu_busy=[0.97] * 10, tool_cpu=[0.1] * 10, tool_cpu_top=[0.1] * 10)
    (v,) = verdicts([n])
    assert (
        v.headline
        == v.saturated[0].text
        == (
            "all 2 cores of client01 at 97% during 100% of the run (the tool used 0.1 of them: "
            "other processes loaded the node)"
        )
    )
    assert not v.saturated[0].by_tool
    # With the disk saturated too, the disk leads.
    n["series"]["disk_util:sdb"] = [1.0] * 10
    (v,) = verdicts([n])
    assert v.headline.startswith("sdb on client01 at 100%")


def test_nodes_on_one_time_axis_and_two_phases():
    """storage02 started sampling 3 s after the client: its t=1 is the client's t=4."""
    client = node(n=12)
    client["tool"] = {
        "t": [float(i) for i in range(1, 13)],
        "series": {"write_bw": [5] * 6 + [0] * 6, "read_bw": [0] * 6 + [5] * 6},
    }
    late = node("storage02", n=9, start="2026-01-01T10:00:03+00:00",
                **{"disk_util:sdb": [0.1, 0.1, 0.1, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]})  # fmt: skip
    assert phases([client, late]) == [("write", 0.0, 6.0), ("read", 6.0, 12.0)]
    write, read = verdicts([client, late])
    assert write.headline == LATENCY_BOUND  # its busy seconds are 7..12: the read phase
    assert read.headline == "sdb on storage02 at 100% utilisation during 100% of the read phase"


# -- issue 25, finding 4: a verdict that contradicts its own charts ------------------------------


def test_every_core_busy_with_other_work_is_a_cpu_verdict_not_latency():
    """The finding: "no resource saturated: likely latency-bound" above a CPU panel with every
    core at 100% and fio waiting for a CPU 10-55% of the time (another job on the machine)."""
    wait = [0.1, 0.2, 0.55, 0.3, 0.4, 0.25, 0.5, 0.35, 0.45, 0.2]
    n = node(
        cpu_busy=[1.0] * 10,
        **{"cpu_busy:cpu0": [1.0] * 10, "cpu_busy:cpu1": [1.0] * 10},
        tool_cpu=[0.4] * 10,
        tool_cpu_top=[0.3] * 10,
        tool_cpu_wait=wait,
    )
    n["tool"] = {"t": [float(i + 1) for i in range(10)], "series": {"write_bw": [5] * 10}}
    (v,) = verdicts([n])
    assert v.headline != LATENCY_BOUND and "no resource saturated" not in v.headline
    assert v.saturated and v.saturated[0].resource == "cpu"
    assert v.headline.startswith("all 2 cores of client01 at 100% during 100% of the write phase")
    assert "other processes loaded the node" in v.headline
    assert "fio waited for a CPU 33% of the time" in v.headline
    assert summary([n])["bottleneck"] == "cpu"


def test_steal_counts_as_a_busy_cpu():
    """Half the node busy, the other half stolen by the hypervisor: no CPU left for the tool."""
    n = node(cpu_busy=[0.5] * 10, cpu_steal=[0.48] * 10, tool_cpu=[0.9] * 10)
    (v,) = verdicts([n])
    assert v.saturated and v.saturated[0].resource == "cpu"
    assert "48% stolen by the hypervisor" in v.headline
    assert summary([n])["bottleneck"] == "cpu"


def test_a_tool_waiting_in_the_run_queue_is_cpu_contention():
    """No core at 90%, yet fio waited for a CPU a third of the time: the CPU, not latency."""
    n = node(cpu_busy=[0.8] * 10, tool_cpu=[0.5] * 10, tool_cpu_top=[0.5] * 10,
             tool_cpu_wait=[0.3] * 10)  # fmt: skip
    (v,) = verdicts([n])
    assert v.saturated and v.saturated[0].resource == "cpu"
    assert v.headline == (
        "fio on client01 waited for a CPU 30% of the time (the run queue) during 100% of the "
        "run: other work held the cores"
    )


def test_no_resource_saturated_is_never_said_beside_a_saturated_one():
    """A disk saturated for 40% of the run is not 'no resource saturated'."""
    n = node(**{"disk_util:sdb": [1.0] * 4 + [0.1] * 6})
    (v,) = verdicts([n])
    assert not v.saturated
    assert v.headline == (
        "no resource saturated during half of the run; sdb on client01 at 100% utilisation "
        "during 40% of it"
    )
