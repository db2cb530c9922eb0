"""Outputs holding several independent measurements split into parts (issue 25, finding 2):
fio jobs in different stonewall groups, several IOR or mdtest runs in one file. Each part
has its own parameters and metrics; an output of one measurement is one part.

Every number below was read from the sample files themselves (the JSON's ``bw_bytes``,
``io_bytes``, ``runtime``, ``job options``; the text's result lines), not from a parse."""

from __future__ import annotations

import pytest
from pytest import approx

from runners.parsers import ParseError, describe_parts, parse, parse_parts
from runners.parsers.base import GIB, KIB, MIB

STONEWALL = "fio/fio-3.28-json-15jobs-stonewall-seqwrite-direct-beegfs-thesis.json"
# (jobname, groupid, "bs" job option, write io_bytes, write runtime ms, write bw_bytes,
#  write total_ios), as the file's "jobs" entries state them.
STONEWALL_JOBS = [
    ("bs_1k", 0, "1k", 137252864, 16001, 8577767, 134036),
    ("bs_2k", 1, "2k", 270571520, 16001, 16909663, 132115),
    ("bs_4k", 2, "4k", 508612608, 16001, 31786301, 124173),
    ("bs_8k", 3, "8k", 917684224, 16001, 57351679, 112022),
    ("bs_16k", 4, "16k", 1388904448, 16001, 86801102, 84772),
    ("bs_32k", 5, "32k", 2113011712, 16001, 132054978, 64484),
    ("bs_64k", 6, "64k", 2835283968, 16001, 177194173, 43263),
    ("bs_128k", 7, "128k", 3553624064, 16001, 222087623, 27112),
    ("bs_256k", 8, "256k", 4657774592, 16001, 291092718, 17768),
    ("bs_512k", 9, "512k", 5636096000, 16001, 352233985, 10750),
    ("bs_1M", 10, "1M", 11466178560, 16001, 716591373, 10935),
    ("bs_2M", 11, "2M", 11708399616, 16002, 731683515, 5583),
    ("bs_4M", 12, "4M", 11618222080, 16003, 726002754, 2770),
    ("bs_8M", 13, "8M", 11601444864, 16005, 724863784, 1383),
    ("bs_16M", 14, "16M", 11727273984, 16003, 732817220, 699),
]
BS = {"1k": KIB, "2k": 2 * KIB, "4k": 4 * KIB, "8k": 8 * KIB, "16k": 16 * KIB}
BS |= {"32k": 32 * KIB, "64k": 64 * KIB, "128k": 128 * KIB, "256k": 256 * KIB}
BS |= {"512k": 512 * KIB, "1M": MIB, "2M": 2 * MIB, "4M": 4 * MIB, "8M": 8 * MIB}
BS |= {"16M": 16 * MIB}


def test_fio_stonewalled_jobs_are_fifteen_parts_each_with_its_bs(sample):
    parts = parse_parts(sample(STONEWALL))
    assert len(parts) == 15
    for index, (part, job) in enumerate(zip(parts, STONEWALL_JOBS, strict=True)):
        name, group, bs, io_bytes, runtime_ms, bw_bytes, ios = job
        assert part.tool == "fio" and part.tool_version == "fio-3.28"
        assert part.extra["part"]["index"] == index
        assert part.extra["part"]["count"] == 15
        assert part.extra["part"]["kind"] == "job"
        assert part.extra["part"]["label"] == name
        assert part.extra["part"]["options"] == {"bs": bs}
        # The job's own bs, and the global options it shares with the others.
        assert part.params["transfer_size"] == BS[bs]
        assert part.params["rw"] == "write"  # "global options": "rw" : "write"
        assert part.params["direct"] is True  # "direct" : "1"
        assert part.params["ioengine"] == "psync"
        assert part.params["iodepth"] == 1
        assert part.params["file_size"] == 8 * GIB  # "size" : "8G"
        assert part.params["runtime"] == 16.0
        assert part.params["threads"] == 1  # one job, no numjobs
        # The headline is this job's own: io_bytes / runtime (fio's bw_bytes, rounded down).
        assert part.get("write_bw") == approx(io_bytes * 1000 / runtime_ms)
        assert part.get("write_bw") == approx(bw_bytes, abs=1)
        assert part.get("write_iops") == approx(ios * 1000 / runtime_ms)
        assert {m.extra.get("group") for m in part.metrics} == {group}
    # The peak of the file is the 16M job's 732817220 B/s, no longer hidden behind bs_1k's.
    assert max(p.get("write_bw") for p in parts) == approx(732817220, abs=1)


def test_fio_part_picked_by_index_is_that_job(sample):
    text = sample(STONEWALL)
    twelve = parse(text, part=12)  # bs_4M: 11618222080 bytes in 16003 ms, 2770 I/Os
    assert twelve.params["transfer_size"] == 4 * MIB
    assert twelve.get("write_bw") == approx(11618222080 / 16.003)
    assert twelve.get("write_iops") == approx(2770 / 16.003)
    with pytest.raises(ParseError, match="part 15 .* 15 independent"):
        parse(text, part=15)


def test_fio_whole_file_parse_is_unchanged(sample):
    # The stable ``parse`` of a multi-group file still gives the whole file (parse_output).
    whole = parse(sample(STONEWALL))
    assert len(whole.extra["groups"]) == 15 and "transfer_size" not in whole.params
    assert whole.extra["parts"] == 15


def test_describe_names_the_parts_and_what_varies(sample):
    parts = parse_parts(sample(STONEWALL))
    assert describe_parts(parts) == "15 independent jobs (bs 1k … 16M)"
    assert describe_parts(parse_parts(sample("fio/fio-3.6-json-randread-4k-qd1-ceph.json"))) == ""


def test_fio_1_57_text_four_groups_are_four_parts(sample):
    parts = parse_parts(sample("fio/fio-1.57-text-4groups-20procs-crlf.txt"))
    assert len(parts) == 4
    # "random-write-direct: (groupid=0, jobs=5)" … "sequential-write-buffered: (groupid=3, …)"
    assert [p.extra["part"]["label"] for p in parts] == [
        "random-write-direct",
        "random-write-buf",
        "sequential-write-direct",
        "sequential-write-buffered",
    ]
    # "Run status group N (all jobs): WRITE: … aggrb=56946KB/s" (fio 1.x KB = 1024 bytes)
    assert [p.get("write_bw") for p in parts] == approx(
        [56946 * KIB, 472902 * KIB, 279 * KIB, 19933 * KIB]
    )
    assert [p.params["rw"] for p in parts] == ["randwrite", "randwrite", "write", "write"]
    assert [p.params["threads"] for p in parts] == [5, 5, 5, 5]  # "jobs=5" each
    assert {p.params["transfer_size"] for p in parts} == {8 * KIB}  # bs=8K-8K/8K-8K
    assert parts[0].get("write_iops") == approx(74607 / 10.481)  # total=0/74607/0, 10481msec
    assert describe_parts(parts).startswith("4 independent jobs (")
    assert "rw randwrite … write" in describe_parts(parts)


@pytest.mark.parametrize(
    "name",
    [
        "fio-3.28-text-16jobs-group-reporting-beegfs.txt",  # 16 processes, one group
        "fio-3.28-text-randrw-128jobs-qd128-beegfs.txt",
        "fio-3.16-json-randrw-4k-libaio-direct-fsync.json",
        "fio-3.39-jsonplus-clat-bins-randwrite-1k-posixaio-macos.json",
    ],
)
def test_fio_one_group_is_one_part(sample, name):
    text = sample(f"fio/{name}")
    parts = parse_parts(text)
    assert len(parts) == 1 and "part" not in parts[0].extra
    assert parts[0].to_dict() == parse(text).to_dict()


def test_ior_log_of_ten_invocations_is_ten_parts(sample):
    parts = parse_parts(sample("ior/ior-3.3.0dev-akrr-wrapped-multi-api-log.txt"))
    assert len(parts) == 10
    assert {p.extra["part"]["kind"] for p in parts} == {"run"}
    # "Command line : … ior -vv -Z -b 200m -t 20m -a POSIX -o …" then "… -a POSIX -F -o …"
    assert [p.params["api"] for p in parts[:3]] == ["POSIX", "POSIX", "MPIIO"]
    assert [p.params["file_per_process"] for p in parts[:2]] == [False, True]
    assert {p.params["transfer_size"] for p in parts} == {20 * MIB}  # "xfersize : 20 MiB"
    # Summary rows: "write 426.77 …" (run 1), "write 571.46 …" (run 2), "read 377.96" (run 3)
    assert parts[0].get("write_bw", "max") == approx(426.77 * MIB)
    assert parts[1].get("write_bw", "max") == approx(571.46 * MIB)
    assert parts[2].get("read_bw", "max") == approx(377.96 * MIB)
    assert "-a POSIX -F" in parts[1].extra["part"]["label"]


def test_mdtest_two_runs_in_one_log_are_two_parts(sample):
    text = (
        sample("mdtest/mdtest-1.9.3-verbose-shared-dir-96tasks-2iter.txt")
        + "\n"
        + sample("mdtest/mdtest-1.9.3-verbose-unique-dir-u-96tasks-2iter.txt")
    )
    parts = parse_parts(text)
    assert len(parts) == 2
    # shared dir: "Directory creation: 104.022 96.640 100.331 3.691" (max min mean stddev)
    assert parts[0].get("dir_create", "max") == approx(104.022)
    assert parts[0].get("dir_create", "mean") == approx(100.331)
    assert [p.params["unique_dir"] for p in parts] == [False, True]
    assert describe_parts(parts).startswith("2 independent runs (")
    assert "unique_dir no … yes" in describe_parts(parts)


def test_one_ior_run_is_one_part(sample):
    text = sample("ior/ior-3.2.1-posix-fpp-64tasks-wr-beegfs-aws.txt")
    parts = parse_parts(text)
    assert len(parts) == 1 and "part" not in parts[0].extra
    assert parse(text, part=0).to_dict() == parse(text).to_dict()
