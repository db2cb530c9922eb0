"""fio parser: every sample under shared/samples/fio, detection, errors and robustness."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runners.parsers import dd, elbencho, fio
from runners.parsers.base import ParseError
from tests.helpers.samples import SAMPLES, metric, read_sample

# fio 3.33 outputs generated here (tests/parsers/fixtures/fio/README.md gives each command):
# no public sample has numjobs > 1 with group_reporting in JSON, json+ or terse.
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "fio"

KIB = 1024
MIB = 1024**2
GIB = 1024**3

FIO_SAMPLES = sorted(p.name for p in (SAMPLES / "fio").iterdir())
OTHER_SAMPLES = sorted(
    f"{tool}/{p.name}" for tool in ("dd", "elbencho") for p in (SAMPLES / tool).iterdir()
)


# --- normal text ---------------------------------------------------------------------------


def test_fio_1_57_four_groups_crlf(sample):
    r = fio.parse(sample("fio/fio-1.57-text-4groups-20procs-crlf.txt"))
    assert r.tool_version == "fio-1.57"
    # "WRITE: io=596856KB, aggrb=56946KB/s, …" — fio 1.x KB are 1024 bytes.
    assert metric(r, "write_bw", group=0, job=None) == pytest.approx(56946 * KIB)
    assert metric(r, "write_bw", group=1, job=None) == pytest.approx(472902 * KIB)
    assert metric(r, "write_bw", group=2, job=None) == pytest.approx(279 * KIB)
    assert metric(r, "write_bw", group=3, job=None) == pytest.approx(19933 * KIB)
    # "clat (usec): min=67 , max=944937 , avg=645.32, stdev=4647.69"
    assert metric(r, "write_lat", "mean", group=0) == pytest.approx(645.32e-6)
    assert metric(r, "write_lat", "max", group=0) == pytest.approx(0.944937)
    assert metric(r, "write_lat", "stddev", group=0) == pytest.approx(4647.69e-6)
    # group 1 "max=4490.8K" usec: fio's K suffix is x1000
    assert metric(r, "write_lat", "max", group=1) == pytest.approx(4.4908)
    # "issued r/w/d: total=0/74607/0" over "runt= 10481msec" (printed "iops=7118")
    assert metric(r, "write_iops", group=0) == pytest.approx(74607 / 10.481)
    assert metric(r, "write_iops", group=0) == pytest.approx(7118, rel=1e-3)
    assert r.params["transfer_size"] == 8 * KIB  # bs=8K-8K/8K-8K
    assert r.params["ioengine"] == "sync"
    assert r.params["threads"] == 5  # (groupid=0, jobs=5) … each group
    assert "rw" not in r.params  # randwrite and write groups differ
    assert [g["params"]["rw"] for g in r.extra["groups"]] == [
        "randwrite",
        "randwrite",
        "write",
        "write",
    ]
    assert r.params["file_size"] == 5120 * MIB  # "(1 file(s) / 5120MB)"
    assert r.extra["processes_started"] == 20
    assert r.extra["disk_util"][0]["device"] == "cciss!c0d0"


def test_fio_1_57_keeps_working_with_raw_crlf_bytes():
    # The fixture opens files in text mode, which turns CRLF into LF; read the raw bytes too.
    path = SAMPLES / "fio" / "fio-1.57-text-4groups-20procs-crlf.txt"
    with open(path, encoding="utf-8", newline="") as fh:
        raw = fh.read()
    assert "\r\n" in raw
    r = fio.parse(raw)
    assert metric(r, "write_bw", group=3) == pytest.approx(19933 * KIB)
    assert metric(r, "write_lat", "mean", group=3) == pytest.approx(1443.28e-6)
    assert metric(r, "write_iops", group=2) == pytest.approx(354 / 10.136)  # total=0/354/0


def test_fio_3_1_seqread(sample):
    r = fio.parse(sample("fio/fio-3.1-text-seqread-4k-libaio-qd4-aws.txt"))
    assert r.tool_version == "fio-3.1"
    # "READ: bw=11.0MiB/s (12.6MB/s), …, io=3598MiB (3773MB), run=300002-300002msec".
    # 3598 MiB in 300.002 s is 11.99 MiB/s: fio 3.1's num2str dropped the carry and printed
    # "11.0MiB/s"; the decimal "12.6MB/s" and io/runtime agree, so they are the value.
    assert r.get("read_bw") == pytest.approx(3598 * MIB / 300.002)
    assert r.get("read_bw") == pytest.approx(12.6e6, rel=5e-3)
    assert "11.0MiB/s" in r.extra["warnings"][0]
    # "issued rwt: total=921030,0,0" over 300002 msec; the job line says "IOPS=3070"
    assert r.get("read_iops") == pytest.approx(921030 / 300.002)
    assert r.get("read_lat", "mean") == pytest.approx(1295.46e-6)  # clat avg=1295.46 usec
    assert r.get("read_lat", "p99") == pytest.approx(3392e-6)  # 99.00th=[ 3392]
    assert r.get("read_lat", "p99.99") == pytest.approx(11994e-6)  # 99.99th=[11994]
    assert r.params == {
        "rw": "read",
        "transfer_size": 4096,
        "ioengine": "libaio",
        "iodepth": 4,
        "threads": 1,
    }
    with pytest.raises(KeyError):
        r.get("write_bw")


def test_fio_3_1_seqwrite(sample):
    r = fio.parse(sample("fio/fio-3.1-text-seqwrite-4k-libaio-qd4-aws.txt"))
    # "WRITE: bw=11.0MiB/s (12.6MB/s), …, io=4096MiB (4295MB), run=341704-341704msec":
    # the same num2str rounding bug as the read run (4096 MiB / 341.704 s = 11.99 MiB/s)
    assert r.get("write_bw") == pytest.approx(4096 * MIB / 341.704)
    assert r.get("write_bw") == pytest.approx(12.6e6, rel=5e-3)
    assert r.get("write_iops") == pytest.approx(1048576 / 341.704)  # total=0,1048576,0
    assert r.get("write_lat", "max") == pytest.approx(45445e-6)  # clat … max=45445
    assert r.get("write_lat", "p50") == pytest.approx(1188e-6)  # 50.00th=[ 1188]
    assert r.params["file_size"] == 4096 * MIB  # "Laying out IO file (1 file / 4096MiB)"
    assert r.params["rw"] == "write"


def test_fio_3_28_group_reporting_16_jobs(sample):
    r = fio.parse(sample("fio/fio-3.28-text-16jobs-group-reporting-beegfs.txt"))
    assert r.tool_version == "fio-3.28"
    assert r.get("write_bw") == pytest.approx(113 * MIB)  # WRITE: bw=113MiB/s (119MB/s)
    assert r.get("write_iops") == pytest.approx(262144 / 577.738)  # total=0,262144,0,0
    assert r.get("write_lat", "mean") == pytest.approx(0.03518)  # clat (msec): avg=35.18
    assert r.get("write_lat", "p99") == pytest.approx(0.061)  # 99.00th=[   61] msec
    assert r.params["threads"] == 16  # (groupid=0, jobs=16)
    assert r.params["transfer_size"] == 256 * KIB  # (W) 256KiB-256KiB
    assert r.params["ioengine"] == "psync"
    # group_reporting prints one report for the group: no separate per-job metrics.
    assert not [m for m in r.metrics if "job" in m.extra]
    assert r.extra["header_comments"][0].startswith("multi-seqwrite: rw=write bs=256K")


def test_fio_3_28_randrw_k_suffixed_latency(sample):
    r = fio.parse(sample("fio/fio-3.28-text-randrw-128jobs-qd128-beegfs.txt"))
    assert r.get("read_bw") == pytest.approx(109 * MIB)  # READ: bw=109MiB/s
    assert r.get("write_bw") == pytest.approx(108 * MIB)  # WRITE: bw=108MiB/s
    # "clat (usec): min=3, max=44690k, avg=15205685.91" — k is x1000
    assert r.get("read_lat", "max") == pytest.approx(44.69)
    assert r.get("read_lat", "mean") == pytest.approx(15.20568591)
    assert r.get("write_lat", "max") == pytest.approx(44.742)  # max=44742k
    # "clat percentiles (msec)": 50.00th=[13355] for reads, [13489] for writes
    assert r.get("read_lat", "p50") == pytest.approx(13.355)
    assert r.get("write_lat", "p50") == pytest.approx(13.489)
    assert r.get("read_iops") == pytest.approx(26389 / 60.275)  # total=26389,26126,0,0
    assert r.get("write_iops") == pytest.approx(26126 / 60.275)
    assert r.params["threads"] == 128
    assert r.params["iodepth"] == 128
    assert r.params["rw"] == "randrw"


def test_fio_3_28_seqwrite_with_wrapper_comments(sample):
    r = fio.parse(sample("fio/fio-3.28-text-seqwrite-256k-fsync-beegfs-with-header-comments.txt"))
    assert r.get("write_bw") == pytest.approx(58.9 * MIB)  # WRITE: bw=58.9MiB/s (61.8MB/s)
    assert r.get("write_lat", "mean") == pytest.approx(4204.17e-6)  # avg=4204.17 usec
    assert r.get("write_lat", "min") == pytest.approx(4104e-6)
    assert r.get("write_lat", "p99.99") == pytest.approx(4424e-6)  # 99.99th=[ 4424]
    assert r.get("write_iops") == pytest.approx(16384 / 69.489)
    assert r.extra["header_comments"] == [
        "seqwrite: rw=write bs=256K size=4G numjobs=1 fsync=1",
        "mode: cold, extra:",
        "date: Fri Jul  3 19:58:17 +07 2026",
    ]
    assert r.command is None  # the comments describe the job, they are not a command line


# --- JSON ------------------------------------------------------------------------------------


def test_fio_2_18_json_legacy_usec_and_kib(sample):
    r = fio.parse(sample("fio/fio-2.18-json-legacy-clat-usec-randread.json"))
    assert r.tool_version == "fio-2.18-59-g618e"
    # fio 2.x wrote KiB under "io_bytes" (2932) and "bw" (292 KiB/s); runtime 10016 ms
    assert r.get("read_bw") == pytest.approx(2932 * KIB / 10.016)
    assert r.get("read_bw") == pytest.approx(292 * KIB, rel=5e-3)
    assert r.get("read_iops") == pytest.approx(733 / 10.016)  # total_ios 733
    # pre-3.0 "clat" is in microseconds: mean 13643.395634, 99th 23168
    assert r.get("read_lat", "mean") == pytest.approx(13643.395634e-6)
    assert r.get("read_lat", "p99") == pytest.approx(23168e-6)
    assert r.get("read_lat", "min") == pytest.approx(3982e-6)
    assert r.params["runtime"] == 10.0
    assert r.params["direct"] is True
    assert r.params["transfer_size"] == 4096
    assert r.params["iodepth"] == 1  # "iodepth" : "01"
    assert r.extra["format"] == "json"


def test_fio_3_16_json_randrw(sample):
    r = fio.parse(sample("fio/fio-3.16-json-randrw-4k-libaio-direct-fsync.json"))
    assert r.tool_version == "fio-3.16"
    assert r.get("read_bw") == pytest.approx(6225920 / 60.207)  # io_bytes / runtime
    assert r.get("write_bw") == pytest.approx(6520832 / 60.207)
    assert r.get("read_iops") == pytest.approx(1520 / 60.207)
    assert r.get("write_iops") == pytest.approx(26.442108, rel=1e-6)  # "iops" : 26.442108
    assert r.get("read_lat", "mean") == pytest.approx(15451145.305263e-9)  # clat_ns mean
    assert r.get("write_lat", "p99") == pytest.approx(113770496e-9)
    assert r.get("write_lat", "p99.9") == pytest.approx(217055232e-9)
    assert r.params["file_size"] == 50000 * MIB  # "size" : "50000Mi"
    assert r.params["rw"] == "randrw"
    assert r.params["runtime"] == 60.0


def test_fio_3_28_json_fifteen_stonewalled_groups_randread(sample):
    r = fio.parse(sample("fio/fio-3.28-json-15jobs-randread-buffered-beegfs-thesis.json"))
    assert r.tool_version == "fio-3.28"
    groups = r.extra["groups"]
    assert [g["jobs"] for g in groups][:2] == [["bs_1k"], ["bs_2k"]]
    assert len(groups) == 15
    # bs_1k (group 0): io_bytes 127183872 in 16001 ms; bs_16M (group 14): 26625441792 / 16008
    assert metric(r, "read_bw", group=0) == pytest.approx(127183872 / 16.001)
    assert metric(r, "read_bw", group=14) == pytest.approx(26625441792 / 16.008)
    assert metric(r, "read_iops", group=0) == pytest.approx(124203 / 16.001)
    assert metric(r, "read_lat", "p50", group=14) == pytest.approx(10027008e-9)
    assert metric(r, "read_lat", "mean", group=0) == pytest.approx(128407.795303e-9)
    # The global options hold for every group; bs differs, so it stays per group.
    assert r.params["rw"] == "randread"
    assert r.params["direct"] is False
    assert r.params["file_size"] == 8 * GIB
    assert "transfer_size" not in r.params
    assert groups[14]["params"]["transfer_size"] == 16 * MIB
    assert r.params["threads"] == 1


def test_fio_3_28_json_stonewalled_seqwrite_direct(sample):
    r = fio.parse(sample("fio/fio-3.28-json-15jobs-stonewall-seqwrite-direct-beegfs-thesis.json"))
    assert metric(r, "write_bw", group=0) == pytest.approx(137252864 / 16.001)
    assert metric(r, "write_bw", group=12) == pytest.approx(11618222080 / 16.003)  # bs_4M
    assert metric(r, "write_iops", group=12) == pytest.approx(2770 / 16.003)
    assert metric(r, "write_lat", "max", group=0) == pytest.approx(34343230e-9)
    assert metric(r, "write_lat", "p99.9", group=12) == pytest.approx(38010880e-9)
    assert r.params["direct"] is True
    assert r.params["ioengine"] == "psync"
    assert r.params["runtime"] == 16.0
    with pytest.raises(KeyError):
        r.get("read_bw")


def test_fio_3_39_json_plus_bins(sample):
    r = fio.parse(sample("fio/fio-3.39-jsonplus-clat-bins-randwrite-1k-posixaio-macos.json"))
    assert r.tool_version == "fio-3.39"
    assert r.extra["format"] == "json+"
    assert r.get("write_bw") == pytest.approx(16777216 / 0.835)
    assert r.get("write_iops") == pytest.approx(16384 / 0.835)
    assert r.get("write_lat", "mean") == pytest.approx(406584.472656e-9)
    assert r.get("write_lat", "p50") == pytest.approx(189440e-9)
    assert r.get("write_lat", "max") == pytest.approx(9112000e-9)
    bins = r.extra["jobs"][0]["write"]["clat_bins_ns"]
    assert bins["2008"] == 1 and bins["4016"] == 1
    assert r.params["transfer_size"] == 1024  # "bs" : "1K"
    assert r.params["iodepth"] == 8
    assert r.params["file_size"] == 16 * MIB  # "size" : "16Mi"


def test_fio_3_6_json_git_version(sample):
    r = fio.parse(sample("fio/fio-3.6-json-randread-4k-qd1-ceph.json"))
    assert r.tool_version == "fio-3.6-31-g4386"
    assert r.get("read_bw") == pytest.approx(351502336 / 60.001)
    assert r.get("read_iops") == pytest.approx(85816 / 60.001)
    assert r.get("read_lat", "mean") == pytest.approx(644742.954682e-9)
    assert r.get("read_lat", "p99") == pytest.approx(864256e-9)
    assert r.params["rw"] == "randread"
    assert r.params["iodepth"] == 1


# --- aggregation over several jobs of one group ------------------------------------------------


def test_json_group_aggregate_is_total_bytes_over_longest_runtime(sample):
    data = json.loads(sample("fio/fio-3.6-json-randread-4k-qd1-ceph.json"))
    second = copy.deepcopy(data["jobs"][0])
    second["jobname"] = "random-read-2"
    second["read"]["runtime"] = 30000
    second["read"]["io_bytes"] = 100 * MIB
    second["read"]["total_ios"] = 25600
    data["jobs"].append(second)
    r = fio.parse(json.dumps(data))
    # total bytes / longest runtime, as fio's "Run status group" line does
    assert metric(r, "read_bw", group=0, job=None) == pytest.approx(
        (351502336 + 100 * MIB) / 60.001
    )
    assert metric(r, "read_iops", group=0, job=None) == pytest.approx((85816 + 25600) / 60.001)
    # per-job values are kept, marked with the job name
    assert metric(r, "read_bw", job="random-read") == pytest.approx(351502336 / 60.001)
    assert metric(r, "read_bw", job="random-read-2") == pytest.approx(100 * MIB / 30.0)
    assert metric(r, "read_lat", "p99", job="random-read") == pytest.approx(864256e-9)
    # the group's min and max latency span both jobs (here they are equal copies)
    assert metric(r, "read_lat", "max", group=0, job=None) == pytest.approx(2498223e-9)
    assert r.params["threads"] == 2


def test_json_plus_bins_are_merged_for_group_percentiles(sample):
    data = json.loads(sample("fio/fio-3.39-jsonplus-clat-bins-randwrite-1k-posixaio-macos.json"))
    second = copy.deepcopy(data["jobs"][0])
    second["jobname"] = "copy"
    data["jobs"].append(second)
    r = fio.parse(json.dumps(data))
    bins = {int(k): v for k, v in data["jobs"][0]["write"]["clat_ns"]["bins"].items()}
    total, running, p50 = sum(bins.values()), 0, None
    for value in sorted(bins):
        running += bins[value]
        if running >= total / 2:
            p50 = value
            break
    # two identical histograms merge into the same distribution
    assert metric(r, "write_lat", "p50", group=0, job=None) == pytest.approx(p50 * 1e-9)
    assert metric(r, "write_bw", group=0, job=None) == pytest.approx(2 * 16777216 / 0.835)


def test_text_without_group_reporting_keeps_per_job_values(sample):
    text = sample("fio/fio-3.28-text-seqwrite-256k-fsync-beegfs-with-header-comments.txt")
    head, _, tail = text.partition("\nRun status group 0 (all jobs):")
    start = head.index("seqwrite: (groupid=0")
    second = head[start:].replace("seqwrite: (groupid=0", "seqwrite2: (groupid=0")
    second = second.replace("(4096MiB/69489msec)", "(2048MiB/50000msec)")
    second = second.replace("total=0,16384,0,0", "total=0,8192,0,0")
    text = head + "\n" + second + "\nRun status group 0 (all jobs):" + tail
    r = fio.parse(text)
    assert metric(r, "write_bw", group=0, job=None) == pytest.approx(58.9 * MIB)  # group line
    assert metric(r, "write_iops", group=0, job=None) == pytest.approx((16384 + 8192) / 69.489)
    assert metric(r, "write_iops", job="seqwrite2") == pytest.approx(8192 / 50.0)
    assert metric(r, "write_bw", job="seqwrite") == pytest.approx(58.9 * MIB)
    assert r.params["threads"] == 2


# --- terse -------------------------------------------------------------------------------------

# fio-3.32 "rw" run printed with --output-format=terse,normal, from a public fio tutorial
# (search-index file id 43355710949, CentOS 8, /dev/sdc1); the terse line is verbatim.
TERSE_332 = (
    "name: (g=0): rw=rw, bs=(R) 4096B-4096B, (W) 4096B-4096B, (T) 4096B-4096B, "
    "ioengine=psync, iodepth=1\n"
    "fio-3.32\n"
    "Starting 1 process\n"
    "3;fio-3.32;name;0;0;65592;6558;1639;10001;0;0;0.000000;0.000000;104;10993;347.669977;"
    "795.991522;1.000000%=109;5.000000%=114;10.000000%=117;20.000000%=120;30.000000%=124;"
    "40.000000%=127;50.000000%=132;60.000000%=140;70.000000%=164;80.000000%=199;"
    "90.000000%=333;95.000000%=2023;99.000000%=4227;99.500000%=5472;99.900000%=6651;"
    "99.950000%=7372;99.990000%=9502;0%=0;0%=0;0%=0;104;10993;347.776933;795.998578;3472;"
    "11912;100.000000%;6618.947368;2283.989041;65572;6556;1639;10001;0;0;0.000000;0.000000;"
    "139;12143;260.127496;626.014086;1.000000%=144;5.000000%=148;10.000000%=152;"
    "20.000000%=156;30.000000%=158;40.000000%=162;50.000000%=166;60.000000%=173;"
    "70.000000%=181;80.000000%=189;90.000000%=207;95.000000%=257;99.000000%=4079;"
    "99.500000%=5472;99.900000%=6979;99.950000%=8585;99.990000%=11337;0%=0;0%=0;0%=0;140;"
    "12143;260.289793;626.018167;3744;12136;100.000000%;6594.052632;2297.365653;0.650000%;"
    "3.420000%;32791;0;15;100.0%;0.0%;0.0%;0.0%;0.0%;0.0%;0.0%;0.00%;0.00%;0.00%;0.00%;"
    "0.00%;0.00%;90.51%;3.88%;0.67%;1.02%;0.55%;2.27%;1.08%;0.01%;0.00%;0.00%;0.00%;0.00%;"
    "0.00%;0.00%;0.00%;0.00%;vda;16314;16279;0;0;5087;3625;8711;93.07%\n"
)
NORMAL_332 = """
name: (groupid=0, jobs=1): err= 0: pid=1305489: Fri Sep 30 11:46:50 2022
  read: IOPS=1639, BW=6559KiB/s (6716kB/s)(64.1MiB/10001msec)
    clat (usec): min=104, max=10993, avg=347.67, stdev=795.99
     lat (usec): min=104, max=10993, avg=347.78, stdev=796.00
  write: IOPS=1639, BW=6557KiB/s (6714kB/s)(64.0MiB/10001msec); 0 zone resets
    clat (usec): min=139, max=12143, avg=260.13, stdev=626.01
     issued rwts: total=16398,16393,0,0 short=0,0,0,0 dropped=0,0,0,0

Run status group 0 (all jobs):
   READ: bw=6559KiB/s (6716kB/s), 6559KiB/s-6559KiB/s (6716kB/s-6716kB/s), io=64.1MiB (67.2MB), run=10001-10001msec
  WRITE: bw=6557KiB/s (6714kB/s), 6557KiB/s-6557KiB/s (6714kB/s-6714kB/s), io=64.0MiB (67.1MB), run=10001-10001msec
"""  # noqa: E501


def test_terse_v3_line_mixed_into_text():
    r = fio.parse(TERSE_332)
    assert r.extra["format"] == "terse"
    assert r.tool_version == "fio-3.32"
    # read: 65592 KiB in 10001 ms, write: 65572 KiB; group value = bytes / longest runtime
    assert r.get("read_bw") == pytest.approx(65592 * KIB / 10.001)
    assert r.get("write_bw") == pytest.approx(65572 * KIB / 10.001)
    assert r.get("read_iops") == 1639
    assert r.get("read_lat", "mean") == pytest.approx(347.669977e-6)  # clat mean, usec
    assert r.get("read_lat", "p99") == pytest.approx(4227e-6)  # 99.000000%=4227
    assert r.get("write_lat", "p99.99") == pytest.approx(11337e-6)
    assert r.params["rw"] == "rw"  # from the "(g=0): rw=rw" header line
    assert r.params["transfer_size"] == 4096


def test_normal_output_wins_over_terse_line_of_the_same_job():
    r = fio.parse(TERSE_332 + NORMAL_332)
    assert r.extra["format"] == "text"
    assert r.get("read_bw") == pytest.approx(6559 * KIB)  # READ: bw=6559KiB/s
    assert r.get("write_bw") == pytest.approx(6557 * KIB)
    assert r.get("read_iops") == pytest.approx(16398 / 10.001)  # issued total=16398,…


def test_truncated_terse_line_is_a_parse_error_naming_the_line():
    line = TERSE_332.splitlines()[3]
    with pytest.raises(ParseError) as err:
        fio.parse(line[:200])
    assert err.value.line == 1
    assert "truncated" in str(err.value)


# --- numjobs under group_reporting: how many processes a result stands for --------------------


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


# Read from the samples themselves: the "(groupid=N, jobs=M)" report lines of the text samples,
# "numjobs" in the JSON options ("01" in the fio 2.18 file; the 3.28 thesis files set none).
@pytest.mark.parametrize(
    ("name", "group_threads"),
    [
        ("fio-1.57-text-4groups-20procs-crlf.txt", [5, 5, 5, 5]),  # jobs=5 in each group
        ("fio-3.28-text-16jobs-group-reporting-beegfs.txt", [16]),  # (groupid=0, jobs=16)
        ("fio-3.28-text-randrw-128jobs-qd128-beegfs.txt", [128]),  # (groupid=0, jobs=128)
        ("fio-3.28-text-seqwrite-256k-fsync-beegfs-with-header-comments.txt", [1]),
        ("fio-3.1-text-seqread-4k-libaio-qd4-aws.txt", [1]),
        ("fio-3.1-text-seqwrite-4k-libaio-qd4-aws.txt", [1]),
        ("fio-2.18-json-legacy-clat-usec-randread.json", [1]),  # "numjobs" : "01"
        ("fio-3.16-json-randrw-4k-libaio-direct-fsync.json", [1]),  # "numjobs" : "1"
        ("fio-3.6-json-randread-4k-qd1-ceph.json", [1]),  # "numjobs" : "1"
        ("fio-3.39-jsonplus-clat-bins-randwrite-1k-posixaio-macos.json", [1]),  # global "1"
        ("fio-3.28-json-15jobs-randread-buffered-beegfs-thesis.json", [1] * 15),  # no numjobs
        ("fio-3.28-json-15jobs-stonewall-seqwrite-direct-beegfs-thesis.json", [1] * 15),
    ],
)
def test_threads_of_every_real_sample(sample, name, group_threads):
    r = fio.parse(sample(f"fio/{name}"))
    assert [g["threads"] for g in r.extra["groups"]] == group_threads
    assert r.params["threads"] == group_threads[0]


def test_text_16_processes_group_reporting_is_16_threads(sample):
    r = fio.parse(sample("fio/fio-3.28-text-16jobs-group-reporting-beegfs.txt"))
    assert r.extra["processes_started"] == 16  # "Starting 16 processes"
    assert r.extra["jobs"][0]["jobs"] == 16  # one combined report for 16 processes
    assert metric(r, "write_bw", group=0) == pytest.approx(113 * MIB)  # WRITE: bw=113MiB/s


def test_text_with_only_run_status_lines_counts_starting_processes(sample):
    lines = sample("fio/fio-3.28-text-16jobs-group-reporting-beegfs.txt").splitlines()
    assert lines[24].startswith("multi-seqwrite: (groupid=0, jobs=16)")
    assert lines[44] == "Run status group 0 (all jobs):"
    r = fio.parse("\n".join(lines[:24] + lines[44:]))  # the job report cut out
    assert r.params["threads"] == 16  # "Starting 16 processes", the only group


def test_json_numjobs_2_group_reporting_is_2_threads():
    text = fixture("fio-3.33-json-numjobs2-group-reporting.json")
    # A bare --group_reporting is not echoed in the job options: one entry is the only sign.
    assert "group_reporting" not in text and '"numjobs" : "2"' in text
    r = fio.parse(text)
    assert r.extra["format"] == "json"
    assert r.params["threads"] == 2
    assert r.extra["jobs"][0]["jobs"] == 2
    # "io_bytes" : 8388608 (2 x 4 MiB) in "runtime" : 4 ms: both processes in one entry
    assert r.get("write_bw") == pytest.approx(8388608 / 0.004)
    assert r.get("write_iops") == pytest.approx(2048 / 0.004)


def test_json_plus_numjobs_2_group_reporting_is_2_threads():
    r = fio.parse(fixture("fio-3.33-jsonplus-numjobs2-group-reporting.json"))
    assert r.extra["format"] == "json+"
    assert r.params["threads"] == 2
    assert r.get("write_bw") == pytest.approx(8388608 / 0.007)  # 8388608 bytes in 7 ms


def test_json_job_file_global_numjobs_2_group_reporting_is_2_threads():
    text = fixture("fio-3.33-json-jobfile-global-numjobs2-group-reporting.json")
    data = json.loads(text)
    assert data["global options"]["numjobs"] == "2" and "job options" not in data["jobs"][0]
    r = fio.parse(text)
    assert r.params["threads"] == 2


def test_json_group_reporting_1_is_2_threads_too():
    data = json.loads(fixture("fio-3.33-json-numjobs2-group-reporting.json"))
    data["jobs"][0]["job options"]["group_reporting"] = "1"  # as --group_reporting=1 writes it
    assert fio.parse(json.dumps(data)).params["threads"] == 2


def test_json_numjobs_2_without_group_reporting_is_2_threads_not_4():
    r = fio.parse(fixture("fio-3.33-json-numjobs2-per-job.json"))
    # two entries named "t", each with "numjobs" : "2": one process each
    assert [j["jobs"] for j in r.extra["jobs"]] == [1, 1]
    assert r.params["threads"] == 2
    # 4194304 bytes each, runtimes 4 and 5 ms: total bytes over the longest runtime
    assert metric(r, "write_bw", group=0, job=None) == pytest.approx(2 * 4194304 / 0.005)


def test_json_client_two_hosts_numjobs_2_group_reporting_is_4_threads():
    r = fio.parse(fixture("fio-3.33-json-client-2hosts-numjobs2-group-reporting.txt"))
    assert r.extra["hosts"] == ["127.0.0.1", "127.0.0.2"]
    assert r.params["nodes"] == 2
    assert r.params["threads"] == 4  # numjobs 2 on each of the 2 clients
    # 8388608 bytes per host, runtimes 9 and 13 ms ("All clients": 16777216 in 13 ms)
    assert r.get("write_bw") == pytest.approx(16777216 / 0.013)


def test_json_without_numjobs_takes_it_from_the_command():
    data = json.loads(fixture("fio-3.33-json-numjobs2-group-reporting.json"))
    del data["jobs"][0]["job options"]["numjobs"]  # as fio 2.x left a global numjobs out
    text = json.dumps(data)
    assert fio.parse(text).params["threads"] == 1  # nothing says otherwise: fio's default
    command = "fio --name=t --rw=write --numjobs=2 --group_reporting --output-format=json"
    assert fio.parse(text, command=command).params["threads"] == 2


def test_json_group_of_two_jobs_records_no_threads_where_text_says_5():
    text = fixture("fio-3.33-json-two-jobs-one-group-group-reporting.json")
    # --name=a --numjobs=2 --name=b --numjobs=3: one entry "a" holding b's options
    data = json.loads(text[text.index("{") :])
    assert data["jobs"][0]["jobname"] == "a"
    assert data["jobs"][0]["job options"] == {"name": "b", "numjobs": "3"}
    r = fio.parse(text)
    assert "threads" not in r.params  # neither 2 nor 3: the JSON cannot say 5
    assert any("combines several fio jobs" in w for w in r.extra["warnings"])
    assert r.get("write_bw") == pytest.approx(
        20971520 / (data["jobs"][0]["write"]["runtime"] / 1e3)
    )
    # The same run in normal output: "a: (groupid=0, jobs=5)", "Starting 5 processes"
    r = fio.parse(fixture("fio-3.33-text-two-jobs-one-group-group-reporting.txt"))
    assert r.params["threads"] == 5


def test_terse_group_reporting_line_without_a_count_records_no_threads():
    r = fio.parse(fixture("fio-3.33-terse-numjobs2-group-reporting.txt"))
    assert r.extra["format"] == "terse"
    assert "threads" not in r.params
    assert r.extra["groups"][0]["threads"] is None
    assert any("terse output does not say" in w for w in r.extra["warnings"])
    # the line itself: write 8192 KiB in 8 ms
    assert r.get("write_bw") == pytest.approx(1024000 * KIB)


def test_terse_group_reporting_line_with_the_command_is_2_threads():
    text = fixture("fio-3.33-terse-numjobs2-group-reporting.txt")
    command = (
        "fio --name=t --rw=write --bs=4k --size=4m --numjobs=2 --group_reporting "
        "--directory=/tmp/i7/x --output-format=terse"
    )
    r = fio.parse(text, command=command.split())
    assert r.params["threads"] == 2
    assert "warnings" not in r.extra
    # the command kept in the output, as a wrapper's prompt line
    r = fio.parse(f"$ {command}\n{text}")
    assert r.command == command
    assert r.params["threads"] == 2


def test_terse_lines_per_process_are_2_threads():
    r = fio.parse(fixture("fio-3.33-terse-numjobs2-per-job.txt"))
    assert r.params["threads"] == 2
    # write 4096 KiB in 4 ms and 4096 KiB in 5 ms
    assert metric(r, "write_bw", group=0, job=None) == pytest.approx(8192 * KIB / 0.005)


def test_terse_line_with_starting_line():
    r = fio.parse(TERSE_332)  # "Starting 1 process"
    assert r.params["threads"] == 1
    text = TERSE_332.replace("Starting 1 process", "Starting 2 processes")
    assert fio.parse(text).params["threads"] == 2


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("fio --name=t --numjobs=2", {"t": 2}),
        ("fio --numjobs=4 --name=a --name=b --numjobs 3", {"a": 4, "b": 3}),
        ("fio --name=a --rw=write", {"a": 1}),
        ("fio -name=x -numjobs=8", {"x": 8}),
        ("fio job.fio --output-format=terse", {}),
        ("fio --name='unbalanced", {}),
        (None, {}),
    ],
)
def test_command_numjobs(command, expected):
    assert fio._command_numjobs(command) == expected


# --- command, detection, errors ----------------------------------------------------------------


def test_command_from_option_and_from_prompt_line(sample):
    text = sample("fio/fio-3.1-text-seqread-4k-libaio-qd4-aws.txt")
    r = fio.parse(text, command=["fio", "--name=myjob", "--rw=read"])
    assert r.command == "fio --name=myjob --rw=read"
    r = fio.parse("[root@host ~]# fio --name=myjob --rw=read --bs=4k\n" + text)
    assert r.command == "fio --name=myjob --rw=read --bs=4k"


@pytest.mark.parametrize("name", FIO_SAMPLES)
def test_detect_own_samples_high(name):
    assert fio.detect(read_sample(f"fio/{name}")) >= 0.9


@pytest.mark.parametrize("name", OTHER_SAMPLES)
def test_detect_other_tools_low(name):
    assert fio.detect(read_sample(name)) < 0.3


@pytest.mark.parametrize("name", FIO_SAMPLES)
def test_fio_samples_are_not_taken_for_dd_or_elbencho(name):
    text = read_sample(f"fio/{name}")
    assert dd.detect(text) < 0.3
    assert elbencho.detect(text) < 0.3


def test_empty_output():
    with pytest.raises(ParseError, match="empty"):
        fio.parse("")
    with pytest.raises(ParseError, match="empty"):
        fio.parse(" \n\r\n")


def test_header_only_names_the_last_line(sample):
    text = sample("fio/fio-3.28-text-seqwrite-256k-fsync-beegfs-with-header-comments.txt")
    head = "\n".join(text.splitlines()[:7]) + "\n"  # up to "seqwrite: Laying out IO file"
    with pytest.raises(ParseError) as err:
        fio.parse(head)
    assert err.value.line == 7
    assert "no job report" in str(err.value)


def test_report_cut_before_its_result_line(sample):
    text = sample("fio/fio-3.28-text-seqwrite-256k-fsync-beegfs-with-header-comments.txt")
    head = "\n".join(text.splitlines()[:9])  # ends with "seqwrite: (groupid=0, jobs=1): …"
    with pytest.raises(ParseError) as err:
        fio.parse(head)
    assert err.value.line == 9
    assert "truncated" in str(err.value)


def test_truncated_json_names_the_line(sample):
    text = sample("fio/fio-3.6-json-randread-4k-qd1-ceph.json")
    with pytest.raises(ParseError) as err:
        fio.parse(text[:3000])
    assert err.value.line is not None
    assert "JSON" in str(err.value)


def test_json_without_jobs():
    with pytest.raises(ParseError):
        fio.parse('{"fio version": "fio-3.28", "jobs": []}')
    with pytest.raises(ParseError):
        fio.parse('{"fio version": "fio-3.28"}')


def test_unrelated_text():
    with pytest.raises(ParseError, match="no fio result"):
        fio.parse("hello world\nthis is not fio\n")


# --- robustness --------------------------------------------------------------------------------

ALL_SAMPLES = [f"fio/{n}" for n in FIO_SAMPLES] + OTHER_SAMPLES


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(ALL_SAMPLES), cut=st.floats(min_value=0.0, max_value=1.0))
def test_truncated_prefixes_raise_only_parse_error(name, cut):
    text = read_sample(name)
    prefix = text[: int(len(text) * cut)]
    try:
        result = fio.parse(prefix)
    except ParseError:
        return
    assert result.metrics


@settings(max_examples=200, deadline=None)
@given(text=st.text())
def test_random_text_raises_only_parse_error(text):
    assert 0.0 <= fio.detect(text) <= 1.0
    try:
        fio.parse(text)
    except ParseError:
        pass


@settings(max_examples=150, deadline=None)
@given(
    lines=st.lists(
        st.sampled_from(
            [
                "Run status group 0 (all jobs):",
                "  WRITE: bw=113MiB/s (119MB/s), io=64.0GiB (68.7GB), run=5-9msec",
                "   READ: io=1KB, aggrb=0KB/s, minb=0KB/s, maxb=0KB/s, mint=0msec, maxt=0msec",
                "x: (groupid=0, jobs=1): err= 0: pid=1",
                "  write: IOPS=0, BW=0KiB/s (0kB/s)(0KiB/0msec)",
                "    clat (usec): min=1, max=9e9999k, avg=nan, stdev=1",
                "    clat percentiles (usec):",
                "     |  1.00th=[99999999999999999999999999999999], 50.00th=[  1k]",
                "     issued rwts: total=999999999999999999999999999999,0,0,0",
                "3;fio-3.1;x;0;0;" + ";".join(["9" * 400] * 90),
                '{"jobs": [{"read": {"io_bytes": 1e999, "runtime": 0}}]}',
            ]
        ),
        max_size=12,
    )
)
def test_hostile_fragments_raise_only_parse_error(lines):
    try:
        fio.parse("\n".join(lines))
    except ParseError:
        pass
