"""Synthetic telemetry documents of nodes (beeweb-telemetry/1, docs/telemetry.md), as the
launcher and node agents send them: for the verdict, ingest, import, push and run-page tests."""

from __future__ import annotations


def node(host="client01", n=10, start="2026-01-01T10:00:00+00:00", **series):
    """A node's telemetry document of ``n`` one-second samples from ``start``: two idle-ish
    cores and a disk at 30 %; ``series`` adds or replaces series."""
    base = {
        "cpu_busy": [0.2] * n,
        "cpu_busy:cpu0": [0.2] * n,
        "cpu_busy:cpu1": [0.2] * n,
        "disk_util:sdb": [0.3] * n,
    }
    base.update(series)
    return {
        "format": "beeweb-telemetry/1",
        "hostname": host,
        "started_at": start,
        "interval_s": 1.0,
        "t": [float(i + 1) for i in range(n)],
        "series": base,
        "meta": {"cores": 2, "nic_speed_mbps": {}, "tool_top_comm": "fio"},
    }


def with_tool(doc, write_bw, t0=1.0):
    """``doc`` with the tool's own write_bw series, one sample a second from ``t0``."""
    doc["tool"] = {
        "t": [t0 + i for i in range(len(write_bw))],
        "series": {"write_bw": write_bw},
    }
    return doc


def documents():
    """Two nodes' documents of one run: a client whose write_bw collapses after three seconds,
    and a storage server whose disk sdb is saturated throughout."""
    client = node("client01", tool_cpu_top=[0.3] * 10)
    client["tool"] = {"t": [float(i + 1) for i in range(9)],
                      "series": {"write_bw": [3e9] * 3 + [1e9] * 6}}  # fmt: skip
    storage = node("storage02", start="2026-01-01T10:00:01+00:00",
                   **{"disk_util:sdb": [0.99] * 10})  # fmt: skip
    return [client, storage]


def telemetry_doc(host, start, n=10, **series):
    """A node's telemetry document (beeweb-telemetry/1) of ``n`` one-second samples from
    ``start``; ``series`` adds or replaces series."""
    return {
        "format": "beeweb-telemetry/1",
        "hostname": host,
        "started_at": start,
        "interval_s": 1.0,
        "t": [float(i + 1) for i in range(n)],
        "series": {
            "cpu_busy": [0.2] * n,
            "cpu_busy:cpu0": [0.3] * n,
            "cpu_iowait": [0.1] * n,
            "mem_used": [2e9] * n,
            "page_cache": [1e9] * n,
            "disk_write_bw:sdb": [5e8] * n,
            "net_tx_bw:ib0": [1e9] * n,
            **series,
        },
        "meta": {"cores": 1, "nic_speed_mbps": {}, "unavailable": {"beegfs": "not installed"}},
    }
