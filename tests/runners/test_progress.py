"""runners.progress: the current throughput from output captured from real runs here (fio
3.33, IOzone 3.489 on this machine) and from the IOR samples in shared/samples/ior."""

from __future__ import annotations

import pytest

from runners.progress import fio, ior, iozone, progress
from runners.tools import build_command
from tests.helpers.samples import FIO_WRITE, read_sample
from tests.helpers.tools import need, run

MIB = 2**20

# fio as for FIO_WRITE (tests/helpers/samples.py) with --rw=randrw --bs=4k --rate_iops=300:
# both directions, no percentage.
FIO_RANDRW = (
    "Jobs: 1 (f=1), 0-600 IOPS\r"
    "Jobs: 1 (f=1), 0-600 IOPS: [m(1)][-.-%][r=1200KiB/s,w=1204KiB/s][r=300,w=301 IOPS]"
    "[eta 00m:00s]\r"
)
# iozone -i 0 -i 1 -r 1m -s 512m -t 1 -F ... with stdout to a file, after two of its tests.
IOZONE_KB = (
    "\tChildren see throughput for  1 initial writers \t=  241741.84 kB/sec\n"
    "\tParent sees throughput for  1 initial writers \t=  155399.70 kB/sec\n"
    "\tChildren see throughput for  1 rewriters \t= 1612315.12 kB/sec\n"
)
# ... and with -O (operations per second).
IOZONE_OPS = "\tChildren see throughput for  1 initial writers \t=   48297.34 ops/sec\n"


def test_fio_latest_eta_line():
    assert fio(FIO_WRITE) == {
        "op": "write",
        "bytes_per_s": 20.0 * MIB,
        "iops": 20.0,
        "percent": 57.1,
        "text": "write 21.0 MB/s · 20 IOPS · 57%",
    }
    # Only the first line of a run: the rate limit, no interval report yet.
    assert fio("Jobs: 1 (f=1), 0B/s-20.0MiB/s\r") is None
    assert fio("") is None
    # A line cut in the middle (the tail as streamed) falls back to the previous one.
    cut = FIO_WRITE + "Jobs: 1 (f=1), 0B/s-20.0MiB/s: [W(1)][75.0%][w=20.0Mi"
    assert fio(cut)["percent"] == 57.1


def test_fio_mixed_directions():
    live = fio(FIO_RANDRW)
    assert live["op"] == "write"  # 1204 KiB/s > 1200 KiB/s
    assert live["bytes_per_s"] == (1200 + 1204) * 1024
    assert live["iops"] == 601
    assert live["percent"] is None
    assert live["text"] == "read 1.2 MB/s · write 1.2 MB/s · 601 IOPS"


def test_fio_units_and_prefixed_iops():
    line = "Jobs: 4 (f=4): [R(4)][20.0%][r=2516MiB/s][r=644k IOPS][eta 00m:08s]"
    live = fio(line)
    assert live["bytes_per_s"] == 2516 * MIB
    assert live["iops"] == 644000
    assert (
        fio("Jobs: 1 (f=1): [W(1)][50.0%][w=1.5GiB/s][w=1536 IOPS][eta 00m:01s]")["text"]
        == "write 1.61 GB/s · 1536 IOPS · 50%"
    )


def test_iozone_latest_finished_test():
    live = iozone(IOZONE_KB)
    assert live["op"] == "rewriters"
    assert live["bytes_per_s"] == pytest.approx(1612315.12 * 1024)
    assert live["text"] == "rewriters 1.65 GB/s"
    ops = iozone(IOZONE_OPS)
    assert ops["iops"] == 48297.34 and ops["bytes_per_s"] is None
    assert ops["text"] == "initial writers 48297.3 op/s"
    assert iozone("\tIozone: Performance Test of File I/O\n") is None


def test_iozone_sample_tabs():
    text = read_sample("iozone/iozone-3.424-throughput-t4-write-read-parent-sees-tabs.txt")
    head = text[: text.index("Children see throughput for  4 readers")]
    assert iozone(head)["op"] == "rewriters"
    assert iozone(head)["bytes_per_s"] == pytest.approx(142730.68 * 1024)
    assert iozone(text)["op"] == "re-readers"
    assert iozone(text)["bytes_per_s"] == pytest.approx(138993.81 * 1024)


def test_ior_rows_from_samples():
    text = read_sample("ior/ior-4.0.0-posix-ssf-verify-daos-dfuse.txt")
    # While it verifies what it wrote, the write row is the latest.
    head = text[: text.index("Verifying contents")]
    assert ior(head) == {
        "op": "write",
        "bytes_per_s": 101.04 * MIB,
        "iops": None,
        "percent": None,
        "text": "write 105.9 MB/s",
    }
    # The summary's read row (Max 30911.67 MiB/s) ends the file.
    assert ior(text)["op"] == "read"
    assert ior(text)["bytes_per_s"] == pytest.approx(30911.67 * MIB)
    old = read_sample("ior/ior-3.3.0-posix-ssf-random-z-64k-beegfs.txt")
    assert ior(old[: old.index("\nread ")])["bytes_per_s"] == pytest.approx(129.65 * MIB)
    # The header ("access    bw(MiB/s) ...") and option lines are not rows.
    assert ior(old[: old.index("\n------")]) is None


def test_dispatch():
    assert progress("fio", FIO_WRITE)["op"] == "write"
    assert progress("dd", "1048576 bytes copied") is None
    assert progress("fio", "") is None


def test_real_iozone_streams_a_line_per_test(ctx):
    """IOzone's throughput lines reach a file as each test ends (what the live tail reads)."""
    need("iozone")
    cmd = build_command(
        "iozone", {"tests": ["0", "1"], "record_size": "64k", "file_size": "8m"}, ctx
    )
    for path in cmd.dirs:
        path.mkdir(parents=True, exist_ok=True)
    done = run(cmd)
    assert done.returncode == 0, done.stderr
    live = progress("iozone", done.stdout)
    assert live["op"] in ("readers", "re-readers") and live["bytes_per_s"] > 0
