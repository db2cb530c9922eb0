"""runners.beegfs_stats: BeeGFS 7.4.7's own per-second server statistics in a node's telemetry.

The parser tests read output captured from the real daemons (tests/runners/fixtures/
beegfs_serverstats/, see its README: beegfs-lab.sh on this machine, with the commands that
printed it); the values asserted were read from those files. The component tests sample a real
daemon of the ``beegfs_host`` lab (tests/labs/beegfs.py) while beegfs-ctl sends it requests:
zeros are legitimate values (no client can mount here, and StorageBench's I/O is not counted as
client requests), so they check that the series exist, one value per sampler interval, and that
requests the daemon counted show; nothing depends on the machine's speed.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from runners import beegfs_stats
from runners.beegfs_stats import (
    Source,
    StatsReader,
    on_grid,
    parse_getcfg,
    parse_listnodes,
    parse_serverstats,
    worker_count,
)
from runners.sampler import Sampler, sig4
from tests.helpers.samples import read_sample

FIXTURES = Path(__file__).parent / "fixtures" / "beegfs_serverstats"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# --- the parsers, on the real daemons' output ----------------------------------------------------


def test_the_storage_daemons_statistics_by_second():
    rows = parse_serverstats(fixture("serverstats-storage-node1-interval1.txt"))
    # Six refreshes of a 10-second history: the seconds 1795831525 … 1795831539, each once.
    assert sorted(rows) == list(range(1795831525, 1795831540))
    assert rows[1795831536] == {"write_KiB": 0, "read_KiB": 0, "reqs": 131, "qlen": 0, "bsy": 0}
    assert rows[1795831537]["reqs"] == 133
    assert [rows[s]["reqs"] for s in range(1795831534, 1795831540)] == [0, 2, 131, 133, 3, 1]
    assert all(r["bsy"] == 0 and r["qlen"] == 0 for r in rows.values())


def test_the_metadata_daemons_statistics_have_no_byte_columns():
    rows = parse_serverstats(fixture("serverstats-meta-node1-interval1-history5.txt"))
    assert sorted(rows) == list(range(1795831619, 1795831628))
    assert rows[1795831624] == {"reqs": 2, "qlen": 0, "bsy": 0}
    assert [rows[s]["reqs"] for s in range(1795831623, 1795831628)] == [0, 2, 1, 1, 1]


def test_output_fed_in_pieces_reads_as_a_whole():
    """The pipe delivers 4 KiB blocks that cut lines anywhere."""
    text = fixture("serverstats-storage-node1-interval1.txt")
    reader = StatsReader()
    for i in range(0, len(text), 37):
        reader.feed(text[i : i + 37])
    reader.close()
    assert reader.rows == parse_serverstats(text)


def test_a_later_printing_of_a_second_wins():
    text = (
        " time_index   reqs   qlen bsy\n 100 1 0 0\n 101 5 0 0\n\n time_index   reqs   qlen bsy\n"
    )
    assert parse_serverstats(text + " 101 7 2 3\n") == {
        100: {"reqs": 1, "qlen": 0, "bsy": 0},
        101: {"reqs": 7, "qlen": 2, "bsy": 3},
    }
    # A row that does not fit its header, or one before any header, is no row.
    assert parse_serverstats(" 100 1 0 0\n") == {}
    assert parse_serverstats(" time_index   reqs   qlen bsy\n 100 1 0\n 101 x 0 0\n") == {}


def test_own_node_id_from_listnodes():
    assert parse_listnodes(fixture("listnodes-storage.txt")) == {"storage01": 1}
    assert parse_listnodes(fixture("listnodes-meta.txt")) == {"meta01": 1}
    # Several nodes, as a production cluster lists them (the shared samples, BeeGFS 7.x): a
    # host that runs both services has a different id in each.
    storage = parse_listnodes(read_sample("beegfs/listnodes-nodetype-storage.txt"))
    meta = parse_listnodes(read_sample("beegfs/listnodes-nodetype-meta.txt"))
    assert storage == {"beegfs-slave1": 101, "beegfs-slave2": 102, "beegfs-slave3": 103}
    assert meta["beegfs-slave1"] == 2 and meta["oneasia-c1-cpu-node10"] == 1


def test_worker_count_in_force_from_getcfg_and_the_defaults_of_7_4_7():
    storage = parse_getcfg(fixture("getcfg-storage-2targets.txt"))
    assert storage["connStoragePortTCP"] == "24023"
    assert "tuneNumWorkers" not in storage  # the lab's file leaves it at its default
    # Default 8 (storage/source/app/config/Config.cpp), per target (tuneUsePerTargetWorkers).
    assert worker_count("storage", storage, cpus=2) == (
        16,
        "tuneNumWorkers 8 (the default) × 2 targets (tuneUsePerTargetWorkers)",
    )
    assert worker_count("storage", {**storage, "tuneNumWorkers": "4"}, 2)[0] == 8
    assert worker_count("storage", {**storage, "tuneUsePerTargetWorkers": "false"}, 2)[0] == 8
    meta = parse_getcfg(fixture("getcfg-meta.txt"))
    assert meta["storeMetaDirectory"].endswith("meta-meta01")
    # 0 (the default): twice the online cores, at least 4 (meta/source/app/config/Config.cpp).
    assert worker_count("meta", meta, cpus=2)[0] == 4
    assert worker_count("meta", meta, cpus=16)[0] == 32
    assert worker_count("meta", {"tuneNumWorkers": "6"}, 16) == (6, "tuneNumWorkers = 6")


def test_seconds_go_onto_the_samplers_intervals_by_overlap():
    rows = parse_serverstats(fixture("serverstats-storage-node1-interval1.txt"))
    # A sampler whose first reading came half a second into 1795831535: each interval is one
    # daemon second (time_index ± 0.5 s).
    start = 1795831535.5
    series = on_grid(rows, start, [1.0, 2.0, 3.0, 4.0], sig4)
    assert series["beegfs_reqs"] == [131, 133, 3, 1]
    assert series["beegfs_write_bw"] == [0, 0, 0, 0]
    assert set(series) == {
        "beegfs_write_bw",
        "beegfs_read_bw",
        "beegfs_reqs",
        "beegfs_queue",
        "beegfs_busy_workers",
    }
    # On the whole second: half of each of two daemon seconds; an interval past the last
    # second the daemon closed reads 0.
    assert on_grid(rows, 1795831536.0, [1.0], sig4)["beegfs_reqs"] == [132]
    assert on_grid(rows, 1795831536.0, [1.0, 3.5], sig4)["beegfs_reqs"] == [132, 28]
    assert on_grid(rows, 1795831538.5, [1.0, 2.0], sig4)["beegfs_reqs"] == [1, 0]
    # KiB become B/s; levels are means.
    two = {10: {"write_KiB": 1000, "read_KiB": 0, "reqs": 5, "qlen": 4, "bsy": 8}}
    grid = on_grid({**two, 11: {**two[10], "qlen": 0, "bsy": 2}}, 10.0, [1.0], sig4)
    assert grid["beegfs_write_bw"] == [1024000]
    assert grid["beegfs_queue"] == [2.0] and grid["beegfs_busy_workers"] == [5.0]


def test_a_node_without_beegfs_ctl_says_so_and_samples_the_rest():
    source = Source({beegfs_stats.CTL_VAR: "/nonexistent/beegfs-ctl"}).start()
    assert beegfs_stats.wait_started(source)
    source.stop()
    assert source.services == []
    assert "not installed" in source.unavailable["beegfs"]


# --- a real daemon -------------------------------------------------------------------------


def _requests(lab, seconds: float) -> None:
    """beegfs-ctl requests that the storage daemon counts (StorageBench's start and status)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        lab.ctl("--storagebench", "--alltargets", "--status")
        lab.ctl("--listtargets", "--state")


def _env(lab, name: str) -> dict[str, str]:
    return {
        **os.environ,
        beegfs_stats.CTL_VAR: " ".join(lab.ctl_argv()),
        beegfs_stats.NODE_NAME_VAR: name,
    }


@pytest.mark.slow
def test_a_sampler_samples_the_storage_daemon_of_its_node(beegfs_host, monkeypatch):
    monkeypatch.setattr(os, "environ", _env(beegfs_host, "storage01"))
    sampler = Sampler(1.0, beegfs=True).start()
    assert beegfs_stats.wait_started(sampler.beegfs)
    # Requests until the sampler has at least four intervals (the machine's pace, not a bound).
    while len(sampler.t) < 4:
        _requests(beegfs_host, 0.5)
    (proc,) = [s.proc for s in sampler.beegfs.services]
    doc = sampler.stop()
    assert proc.poll() is not None  # the beegfs-ctl process ended with the sampling
    n = len(doc["t"])
    names = [f"beegfs_{k}:storage" for k in ("write_bw", "read_bw", "reqs", "queue")]
    for name in [*names, "beegfs_busy_workers:storage"]:
        assert len(doc["series"][name]) == n, (name, doc["series"][name], doc["t"])
    assert not any(k.endswith(":meta") for k in doc["series"])  # no metadata daemon named so
    # The daemon counted the StorageBench requests: some second of the run has some.
    assert any(doc["series"]["beegfs_reqs:storage"]), doc["series"]["beegfs_reqs:storage"]
    meta = doc["meta"]["beegfs"]["storage"]
    assert meta["node_name"] == "storage01" and meta["node_id"] >= 1
    assert meta["workers"] == 16  # 8 (7.4.7's default) per target, two targets
    assert meta["seconds"] >= n - 1
    assert "beegfs" not in doc["meta"]["unavailable"]
    print(
        f"\n{n} samples; sampler thread {doc['meta']['sampler_cpu_s'] * 1000:.1f} ms CPU, "
        f"beegfs-ctl --serverstats {meta.get('ctl_cpu_s', 0) * 1000:.0f} ms CPU "
        f"over {doc['t'][-1]:.1f} s"
    )


@pytest.mark.slow
def test_the_metadata_daemon_and_a_node_that_runs_none(beegfs_host, monkeypatch):
    monkeypatch.setattr(os, "environ", _env(beegfs_host, "meta01"))
    sampler = Sampler(1.0, beegfs=True).start()
    assert beegfs_stats.wait_started(sampler.beegfs)
    while len(sampler.t) < 2:
        _requests(beegfs_host, 0.5)
    doc = sampler.stop()
    n = len(doc["t"])
    assert [len(doc["series"][f"beegfs_{k}:meta"]) for k in ("reqs", "queue", "busy_workers")] == [
        n
    ] * 3
    assert "beegfs_write_bw:meta" not in doc["series"]
    # 0 in the lab's file: twice the online cores, at least 4.
    assert doc["meta"]["beegfs"]["meta"]["workers"] == max(2 * os.cpu_count(), 4)

    # A node whose name no daemon has: nothing sampled, nothing said.
    monkeypatch.setattr(os, "environ", _env(beegfs_host, "client99"))
    doc = Sampler(1.0, beegfs=True).start().stop()
    assert not any(k.startswith("beegfs_") for k in doc["series"])
    assert "beegfs" not in doc["meta"] and "beegfs" not in doc["meta"]["unavailable"]


@pytest.mark.slow
def test_a_daemon_gone_is_recorded_as_unavailable(beegfs_host, tmp_path, monkeypatch):
    """beegfs-ctl that cannot reach the management daemon: the sampler records why."""
    conf = tmp_path / "client.conf"
    conf.write_text(
        "sysMgmtdHost = 127.0.0.1\nconnMgmtdPortTCP = 9\nconnMgmtdPortUDP = 9\n"
        "connDisableAuthentication = true\n"
    )
    ctl = beegfs_host.ctl_argv()[0]
    monkeypatch.setattr(
        os, "environ", {**os.environ, beegfs_stats.CTL_VAR: f"{ctl} --cfgFile={conf}"}
    )
    sampler = Sampler(1.0, beegfs=True).start()
    assert beegfs_stats.wait_started(sampler.beegfs, 60)
    doc = sampler.stop()
    assert "--listnodes" in doc["meta"]["unavailable"]["beegfs"], doc["meta"]["unavailable"]


def test_the_captures_are_the_real_daemons():
    """The README names how each fixture was captured (no hand-made file among them)."""
    readme = (FIXTURES / "README.md").read_text()
    for path in FIXTURES.glob("*.txt"):
        assert path.name in readme, path.name
