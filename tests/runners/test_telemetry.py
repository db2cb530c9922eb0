"""runners.sampler: the /proc readers on text read from this kernel, the sampler's
document from real readings, fio's per-second logs; experiments.results.telemetry's storage."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
import zlib
from datetime import datetime
from pathlib import Path

import pytest

from experiments.models import RunTelemetry
from experiments.results import telemetry as stored
from runners.sampler import (
    FORMAT,
    Sampler,
    fio_log_options,
    read_cpu,
    read_diskstats,
    read_fio_logs,
    read_meminfo,
    read_netdev,
    sig4,
)
from tests.helpers.comparison import add_run

STAT = """cpu  100 5 50 800 20 3 2 10 0 0
cpu0 60 5 30 400 10 2 1 5 0 0
cpu1 40 0 20 400 10 1 1 5 0 0
intr 12345
"""
MEMINFO = """MemTotal:        4000000 kB
MemFree:          500000 kB
MemAvailable:    3000000 kB
Buffers:           10000 kB
Cached:          2000000 kB
"""
DISKSTATS = (
    "   7       0 loop0 272 0 11008 53 8952 4589 1152448 114660 0 15824 115954 4 0 8388608 0 "
    "76 1239\n"
    " 254       0 vda 1000 10 20000 500 300 20 6000 400 2 900 950\n"
    " 254       1 vda1 1 0 2 3\n"
)  # fmt: skip
NETDEV = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 1000      10    0    0    0     0          0         0     2000      20    0    0    0     0       0          0
  eth0: 5000      50    0    0    0     0          0         0     7000      70    0    0    0     0       0          0
"""  # noqa: E501


def test_proc_readers():
    cpu = read_cpu(STAT)
    # busy = user + nice + system + irq + softirq; total adds idle, iowait, steal
    assert cpu["cpu"] == (160, 20, 10, 990)
    assert cpu["cpu0"] == (98, 10, 5, 513)
    assert set(cpu) == {"cpu", "cpu0", "cpu1"}
    assert read_meminfo(MEMINFO) == {"mem_used": 1000000 * 1024, "page_cache": 2000000 * 1024}
    disks = read_diskstats(DISKSTATS)
    assert disks["loop0"] == (272, 11008, 8952, 1152448, 15824, 115954)
    assert disks["vda"] == (1000, 20000, 300, 6000, 900, 950)
    assert "vda1" not in disks  # an old-style 4-field partition line
    assert read_netdev(NETDEV) == {"lo": (1000, 2000), "eth0": (5000, 7000)}


def test_sig4_keeps_four_significant_digits():
    assert [sig4(v) for v in (0, -3, 1.5, 9999, 10000, 123456, 99995, 2_012_345_678)] == [
        0, 0, 2, 9999, 10000, 123500, 100000, 2_012_000_000
    ]  # fmt: skip


def busy_child(sampler: Sampler, readings: int) -> None:
    """A child process that burns CPU (dd copying zeros, without end) until ``sampler`` has
    taken ``readings`` more readings, then ends: it lives across those intervals whatever
    the machine's speed (a fixed amount of work may end within one interval, and a process
    that never lives through a reading is never seen)."""
    child = subprocess.Popen(
        ["dd", "if=/dev/zero", "of=/dev/null", "bs=1M"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wanted = len(sampler.t) + readings
        deadline = time.monotonic() + 60  # only against a sampler that stopped sampling
        while len(sampler.t) < wanted:
            assert child.poll() is None, "dd ended by itself"
            assert time.monotonic() < deadline, f"{len(sampler.t)} readings of {wanted}"
            time.sleep(0.02)
    finally:
        child.terminate()
        child.wait()


def test_sampler_document_from_real_readings(tmp_path):
    """Readings of this machine while dd writes a file, then while a dd burns CPU across
    three readings: rates per interval, cores, memory, the writing disk, the tool's CPU;
    idle devices left out and named."""
    cpu_before = time.process_time()
    sampler = Sampler(interval=0.3, watch_pid=os.getpid()).start()
    target = tmp_path / "f"
    subprocess.run(
        ["dd", "if=/dev/zero", f"of={target}", "bs=1M", "count=64", "oflag=direct"],
        check=True,
        capture_output=True,
    )
    busy_child(sampler, readings=3)
    doc = sampler.stop()
    process_cpu = time.process_time() - cpu_before
    assert doc["format"] == FORMAT and doc["hostname"] == os.uname().nodename
    assert doc["interval_s"] == 0.3 and doc["started_at"].endswith("+00:00")
    t = doc["t"]
    n = len(t)
    assert n >= 3 and all(a < b for a, b in zip(t, t[1:], strict=False))
    # Readings on the grid of the first one, never before their time (a loaded machine may
    # take them late); the last may be the closing reading of a shorter interval.
    assert all(t[i] >= (i + 1) * 0.3 - 0.002 for i in range(n - 1)), t
    series = doc["series"]
    cores = os.cpu_count()
    assert doc["meta"]["cores"] == cores
    for name in ("cpu_busy", "cpu_iowait", "cpu_steal", "mem_used", "page_cache"):
        assert len(series[name]) == n
    assert all(0 <= v <= 1 for v in series["cpu_busy"] + series["cpu_busy:cpu0"])
    assert len([k for k in series if k.startswith("cpu_busy:")]) == cores
    assert min(series["mem_used"]) > 0
    spans = [b - a for a, b in zip([0.0, *t], t, strict=False)]
    written = sum(
        sum(rate * span for rate, span in zip(v, spans, strict=True))
        for k, v in series.items()
        if k.startswith("disk_write_bw:")
    )  # the bytes dd wrote (each rate times its interval), plus the file system's own
    assert written >= 0.5 * 64 * 2**20
    assert all(len(v) == n for v in series.values())
    assert not any(k.endswith(":ram0") for k in series)
    assert all(any(v) for k, v in series.items() if k.startswith(("disk_", "net_")))
    assert "tool_cpu" in series and max(series["tool_cpu"]) > 0  # dd was a child of ours
    assert doc["meta"]["tool_top_comm"] == "dd"
    # The executor's sampler (a client's) does not look for BeeGFS daemons: nothing to say.
    assert "beegfs" not in doc["meta"]["unavailable"]
    # The sampler's own CPU: counted, and part of what this process used meanwhile.
    assert 0 < doc["meta"]["sampler_cpu_s"] <= process_cpu


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_fio_logs_on_one_time_axis(tmp_path):
    """Two jobs for 3 s: their per-second bandwidth adds up, latency averages."""
    subprocess.run(
        ["fio", "--name=x", "--rw=write", "--bs=64k", "--size=32m", "--numjobs=2",
         "--runtime=3", "--time_based", f"--directory={tmp_path}", "--output=/dev/null",
         *fio_log_options(tmp_path)],
        check=True,
    )  # fmt: skip
    logs = sorted(p.name for p in tmp_path.glob("fio_*.log"))
    assert "fio_bw.1.log" in logs and "fio_clat.2.log" in logs
    jobs = []
    for job in (1, 2):
        first = (tmp_path / f"fio_bw.{job}.log").read_text().splitlines()[0].split(",")
        jobs.append(int(first[1]) * 1024)  # KiB/s in fio's log
    series = read_fio_logs(tmp_path, offset_s=0.25)
    assert series["t"][:3] == [1.25, 2.25, 3.25]
    assert series["series"]["write_bw"][0] == sum(jobs)
    assert set(series["series"]) == {"write_bw", "write_iops", "write_lat"}
    assert all(0 < v < 1 for v in series["series"]["write_lat"])  # seconds
    assert read_fio_logs(tmp_path / "nothing") == {"t": [], "series": {}}


def test_fio_log_reader_on_written_lines(tmp_path):
    (tmp_path / "fio_bw.1.log").write_text("1000, 1024, 1, 0, 0\n2001, 2048, 0, 0, 0\nbad\n")
    (tmp_path / "fio_bw.2.log").write_text("999, 1024, 1, 0, 0\n")
    (tmp_path / "fio_clat.1.log").write_text("1000, 2000000, 1, 0, 0\n")
    (tmp_path / "fio_clat.2.log").write_text("1000, 4000000, 1, 0, 0\n")
    got = read_fio_logs(tmp_path)
    assert got["t"] == [1, 2]
    assert got["series"]["write_bw"] == [2 * 1024 * 1024, 0]
    assert got["series"]["read_bw"] == [0, 2048 * 1024]
    assert got["series"]["write_lat"] == [0.003, 0]


def test_fio_log_reader_on_wall_clock_lines(tmp_path):
    """--log_unix_epoch logs: placed by fio's clock against the sampler's first reading
    (``started_at``), on fio's own grid of seconds; without ``started_at``, or with a first
    sample before it (the wall clock stepped back), at ``offset_s`` as before."""
    e = 1_795_000_000_000  # ms, Unix time
    (tmp_path / "fio_bw.1.log").write_text(
        f"{e + 1000}, 1024, 1, 0, 0\n{e + 2001}, 1024, 1, 0, 0\n"
    )
    (tmp_path / "fio_bw.2.log").write_text(f"{e + 999}, 1024, 1, 0, 0\n")
    (tmp_path / "fio_clat.1.log").write_text(f"{e + 1000}, 2000000, 1, 0, 0\n")
    # The sampler's first reading came 2.5 s before fio's start (e - 1, one second before
    # its first sample): fio's start-up and layout.
    got = read_fio_logs(tmp_path, offset_s=0.25, started_at=(e - 2501) / 1000)
    assert got["t"] == [3.5, 4.5]  # its first sample where fio's clock put it
    assert got["series"]["write_bw"] == [2 * 1024 * 1024, 1024 * 1024]
    assert got["series"]["write_lat"] == [0.002, 0]
    assert read_fio_logs(tmp_path, offset_s=0.25)["t"] == [1.25, 2.25]
    assert read_fio_logs(tmp_path, offset_s=0.25, started_at=(e + 2000) / 1000)["t"] == [1.25, 2.25]
    # Logs in ms from fio's start (runs before --log_unix_epoch) ignore ``started_at``.
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "fio_bw.1.log").write_text("1000, 1024, 1, 0, 0\n2001, 2048, 1, 0, 0\n")
    old = read_fio_logs(tmp_path / "old", offset_s=0.25, started_at=(e - 2501) / 1000)
    assert old == read_fio_logs(tmp_path / "old", offset_s=0.25)
    assert old["t"] == [1.25, 2.25]


def test_a_block_shorter_than_one_interval_has_readings_at_start_and_end():
    """A run of a few milliseconds: no thread wakes in between, stop() takes the closing
    reading at once, and the document holds one sample covering the whole run."""
    before = time.monotonic()
    # An interval of an hour: a stop() that waited for it, or a reading in between, shows.
    sampler = Sampler(interval=3600.0, watch_pid=os.getpid()).start()
    subprocess.run(["dd", "if=/dev/zero", "of=/dev/null", "bs=4k", "count=1"], check=True)
    docs = []
    stopping = threading.Thread(target=lambda: docs.append(sampler.stop()))
    stopping.start()
    stopping.join(60)  # only against a stop() that waits for the interval
    assert not stopping.is_alive(), "stop() waited for the interval"
    span = time.monotonic() - before
    (doc,) = docs
    (t,) = doc["t"]
    assert 0 < t <= span
    assert all(len(values) == 1 for values in doc["series"].values())
    assert 0 <= doc["series"]["cpu_busy"][0] <= 1 and doc["series"]["mem_used"][0] > 0
    assert "tool_cpu" in doc["series"]


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_fios_series_starts_after_fios_own_start_however_long_its_start_up(tmp_path):
    """fio lays out its file, then (exec_prerun) waits until the sampler around it has taken
    two readings, so its job starts at least two intervals after the tool was started,
    whatever the machine's speed: its first sample must not be placed before that start
    (placed where the tool was started, it came one second after the first reading)."""
    from types import SimpleNamespace

    go = tmp_path / "go"
    argv = [
        "fio", "--name=x", "--rw=read", "--bs=64k", "--size=16m", "--runtime=2",
        "--time_based", f"--directory={tmp_path}", "--output=/dev/null",
        f"--exec_prerun=sh -c 'while [ ! -e {go} ]; do sleep 0.01; done'",
        *fio_log_options(tmp_path),
    ]  # fmt: skip
    kept: list[dict] = []
    run = SimpleNamespace(tool="fio", pk=0)
    with stored.recording(run, tmp_path, watch_pid=os.getpid(), keep=kept.append) as sampling:
        sampler = sampling.__self__
        fio = subprocess.Popen(argv, cwd=tmp_path)
        try:
            deadline = time.monotonic() + 60  # only against a sampler that stopped sampling
            while len(sampler.t) < 2 or not (tmp_path / "x.0.0").exists():
                assert fio.poll() is None, "fio ended before its start"
                assert time.monotonic() < deadline, "two readings and fio's file"
                time.sleep(0.02)
            go.touch()
            go_at = time.time()  # fio's job starts after this
        finally:
            assert fio.wait(60) == 0
    (doc,) = kept
    began = datetime.fromisoformat(doc["started_at"]).timestamp()
    start = go_at - began  # fio's start on the sampler's axis: after its second reading
    assert start >= doc["t"][1] >= 2.0, (start, doc["t"])
    tool = doc["tool"]["t"]
    assert tool and tool[0] > start, (tool, start)
    # Its samples within the sampled span (fio's grid of seconds rounds by under half of one).
    assert tool[-1] < doc["t"][-1] + 0.5, (tool, doc["t"])


@pytest.mark.django_db
def test_the_page_form_of_a_document_is_what_its_row_exports(alice, bench):
    """The executor computes a lone document's verdict from ``page_form`` without reading
    the row back: it must be exactly what the run page reads."""
    run = add_run(bench, 1e9)
    sampler = Sampler(interval=0.2, watch_pid=os.getpid()).start()
    busy_child(sampler, readings=2)
    doc = sampler.stop()
    doc["tool"] = {"t": [0.2], "series": {"write_bw": [1e9]}}
    row = stored.save(run, doc, alone=True)
    alone = (run.bottleneck, run.bottleneck_evidence, run.steady)
    assert stored.page_form(doc) == stored.export(row, cores=False)
    stored.refresh_verdict(run)  # read back from the rows
    assert (run.bottleneck, run.bottleneck_evidence, run.steady) == alone and alone[0]


@pytest.mark.django_db
def test_store_and_export_round_trip(alice, bench):
    run = add_run(bench, 1e9)
    doc = {
        "format": FORMAT,
        "hostname": "stor1",
        "started_at": "2026-01-01T10:00:00+00:00",
        "interval_s": 1.0,
        "t": [1.0, 2.0, 3.0],
        "series": {"cpu_busy": [0.5, 0.9, 0.7], "disk_util:sdb": [0.2, 0.99, 0.98]},
        "meta": {"cores": 1},
        "tool": {"t": [1.1, 2.1], "series": {"write_bw": [1e9, 2e9]}},
    }
    row = stored.save(run, doc)
    assert row.samples == 3 and row.summary["max"]["disk_util:sdb"] == 0.99
    assert stored.export(RunTelemetry.objects.get()) == doc
    assert len(zlib.decompress(bytes(row.data))) > len(bytes(row.data)) > 0
    doc["series"]["cpu_busy"] = [0.1, 0.1, 0.1]
    stored.save(run, doc)  # a second attempt replaces the node's row
    assert RunTelemetry.objects.count() == 1
    assert stored.for_run(run)[0]["series"]["cpu_busy"] == [0.1, 0.1, 0.1]
    with pytest.raises(ValueError):
        stored.save(run, {**doc, "format": "other"})


@pytest.mark.django_db
@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_executor_stores_the_launchers_telemetry_with_fios_series(alice, executing_bench):
    """Any user, any file system: a 3-second fio run through the executor keeps one row for
    this node, its samples and fio's per-second series on the same axis."""
    from experiments.execution import execute
    from experiments.models import Run
    from tests.helpers.execution import make_matrix, queue

    matrix = make_matrix(
        alice,
        executing_bench,
        params={"rw": "write", "bs": "64k", "size": "8m", "runtime": "3", "time_based": True},
    )
    run = matrix.runs.get()
    assert execute.execute(run.pk, queue(run), "w@test") == Run.Status.SUCCEEDED
    (row,) = RunTelemetry.objects.filter(run=run)
    assert row.hostname == os.uname().nodename and row.samples >= 3
    (doc,) = stored.for_run(run)
    assert doc["meta"]["tool_top_comm"] == "fio"
    # Its clock against the database server's (the same machine's clock here); SQLite
    # shares this process's clock: nothing to measure.
    from django.db import connection

    if connection.vendor == "postgresql":
        clock = doc["meta"]["clock"]
        assert clock["against"] == "database" and abs(clock["offset_s"]) < 0.5, clock
    else:
        assert "clock" not in doc["meta"]
    tool = doc["tool"]
    # fio's seconds put onto the sampler's axis by fio's own clock (--log_unix_epoch):
    # whole seconds apart, the first after one second and within the sampled span.
    assert len(tool["t"]) >= 2 and 1.0 <= tool["t"][0] < doc["t"][-1], (tool["t"], doc["t"])
    steps = [b - a for a, b in zip(tool["t"], tool["t"][1:], strict=False)]
    assert all(round(step) >= 1 and abs(step - round(step)) <= 0.002 for step in steps), steps
    assert all(v > 0 for v in tool["series"]["write_bw"][:2])
    assert set(tool["series"]) == {"write_bw", "write_iops", "write_lat"}
    assert row.summary["max"]["cpu_busy"] > 0
    assert list(Path(execute.settings.RUN_DIR).iterdir()) == []  # fio's logs went with scratch


@pytest.mark.django_db
def test_stated_nic_rates_are_reused_until_their_reading_is_too_old(alice, node, monkeypatch):
    """The executor's verdict of a lone run reads its node's stated NIC rate (inventory) at
    most every RATES_MAX_AGE_S: a changed rate shows once the reading is older."""
    from experiments.models import Nic

    stored._rates_cache.clear()
    nic = Nic.objects.filter(profile=node.profile).order_by("-rate_gbps").first()
    before = stored.recent_stated_rates([node.hostname])
    assert (
        before == stored.stated_rates([node.hostname]) == {node.hostname: nic.rate_gbps * 1e9 / 8}
    )
    Nic.objects.filter(profile=node.profile).update(rate_gbps=nic.rate_gbps * 2)
    assert stored.recent_stated_rates([node.hostname]) == before  # reused
    monkeypatch.setattr(stored, "RATES_MAX_AGE_S", 0.0)
    assert stored.recent_stated_rates([node.hostname]) == {
        node.hostname: nic.rate_gbps * 2 * 1e9 / 8
    }
