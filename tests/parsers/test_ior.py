"""IOR parser against the real samples in shared/samples/ior (values read from the files)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runners.parsers import io500, ior, mdtest
from runners.parsers.base import ParseError
from tests.helpers.samples import SAMPLES, read_sample
from tests.parsers.properties import (
    check_mangled,
    check_only_parse_error,
    check_shuffled,
    check_truncated,
)

MIB = 1048576
approx = pytest.approx

IOR_SAMPLES = sorted(p.name for p in (SAMPLES / "ior").iterdir())


def _metric(result, name, stat="value", iteration=None):
    return next(
        m for m in result.metrics if m.name == name and m.stat == stat and m.iteration == iteration
    )


# --- one test per sample file ------------------------------------------------------------


def test_ior_3_0_1_old_summary_block(sample):
    r = ior.parse(sample("ior/ior-3.0.1-posix-ssf-vv-96tasks-write-only.txt"))
    assert r.tool_version == "3.0.1"
    assert r.command.startswith("/projects/ccrstaff/general/appker/edge12core/execs/ior/src/ior")
    assert r.command.endswith(
        "-a POSIX -w -k -o /gpfs/scratch/xdtas/edge12core/ior.v41LZf7X4/ior_test_file__a_POSIX"
    )
    # "write     613.20     204800     20480      0.161028   31.29      13.50      31.31      0"
    assert r.get("write_bw", iteration=0) == approx(613.20 * MIB)
    assert r.get("write_open_lat", iteration=0) == approx(0.161028)
    assert r.get("write_close_lat", iteration=0) == approx(13.50)
    # "Max Write: 613.20 MiB/sec" and the summary row "write 613.20 613.20 613.20 0.00 31.31128"
    assert r.get("write_bw", "max") == approx(613.20 * MIB)
    assert r.get("write_bw", "stddev") == 0
    assert r.get("write_time", "mean") == approx(31.31128)
    # "clients = 96 (12 per node)", "blocksize = 200 MiB", "xfersize = 20 MiB", aggsize column
    assert r.params["threads"] == 96
    assert r.params["tasks_per_node"] == 12
    assert r.params["nodes"] == 8
    assert r.params["block_size"] == 209715200
    assert r.params["transfer_size"] == 20971520
    assert r.params["aggregate_size"] == 20132659200
    assert r.params["api"] == "POSIX"
    assert r.params["file_per_process"] is False
    assert r.params["iterations"] == 1
    # Write-only: no read metric at all (-vv with no IOPS column in 3.0 either).
    with pytest.raises(KeyError):
        r.get("read_bw", "max")
    with pytest.raises(KeyError):
        r.get("write_iops", iteration=0)
    assert len(r.extra["hosts"]) == 8


def test_ior_3_2_0_filesize_warning(sample):
    r = ior.parse(sample("ior/ior-3.2.0-posix-ssf-vv-filesize-warning.txt"))
    assert r.tool_version == "3.2.0"
    assert r.get("write_bw", iteration=0) == approx(91.52 * MIB)
    assert r.get("write_close_lat", iteration=0) == approx(34.82)
    assert r.get("write_iops", "max") == approx(4.58)
    assert r.get("write_time", "mean") == approx(34.96647)
    assert r.params["threads"] == 16
    assert r.params["tasks_per_node"] == 8
    assert r.params["aggregate_size"] == 3200 * MIB  # "aggs(MiB) 3200.0", exact
    assert "ior WARNING: inconsistent file size by different tasks." in r.extra["warnings"]


def test_ior_3_2_1_128_tasks_3_nodes(sample):
    r = ior.parse(sample("ior/ior-3.2.1-posix-fpp-128tasks-3nodes-beegfs-aws.txt"))
    assert r.tool_version == "3.2.1"
    assert r.command == "/mnt/beegfs/ior -t 1m -b 16m -s 16 -g -F -e -o /mnt/beegfs/test2.ior"
    assert r.get("write_bw", iteration=0) == approx(284.94 * MIB)
    assert r.get("read_bw", iteration=0) == approx(349.09 * MIB)
    assert r.get("read_time", "mean") == approx(93.86787)
    assert r.get("write_iops", "mean") == approx(284.94)
    # IOR 3.2 prints no IOPS column in the results table.
    with pytest.raises(KeyError):
        r.get("write_iops", iteration=0)
    assert r.params["threads"] == 128
    assert r.params["tasks_per_node"] == 43
    assert r.params["nodes"] == 3
    assert r.params["segments"] == 16
    assert r.params["file_per_process"] is True
    assert r.params["aggregate_size"] == 32768 * MIB
    assert r.extra["remove_time"] == [{"iteration": 0, "seconds": approx(0.711453)}]


def test_ior_3_2_1_64_tasks_write_read(sample):
    r = ior.parse(sample("ior/ior-3.2.1-posix-fpp-64tasks-wr-beegfs-aws.txt"))
    assert r.get("write_bw", "max") == approx(114.47 * MIB)
    assert r.get("read_bw", "max") == approx(115.27 * MIB)
    assert r.get("read_open_lat", iteration=0) == approx(0.156029)
    assert r.get("write_time", iteration=0) == approx(143.13)
    assert r.params["threads"] == 64
    assert r.params["tasks_per_node"] == 64
    assert r.params["nodes"] == 1
    assert r.params["transfer_size"] == 1048576


def test_ior_3_2_1_write_only(sample):
    r = ior.parse(sample("ior/ior-3.2.1-posix-fpp-64tasks-write-only-beegfs-aws.txt"))
    assert r.command == "./ior -wr -t 1m -b 16m -s 16 -g -F -e -o /mnt/beegfs/test.ior"
    assert r.get("write_bw", iteration=0) == approx(115.02 * MIB)
    assert r.get("write_close_lat", iteration=0) == approx(0.215958)
    assert r.get("write_time", "mean") == approx(142.45062)
    with pytest.raises(KeyError):
        r.get("read_bw", "max")  # no "Max Read" line, no read row
    assert r.extra["remove_time"][0]["seconds"] == approx(0.522120)


def test_ior_3_3_0_integer_formatted_bw(sample):
    r = ior.parse(sample("ior/ior-3.3.0-posix-fpp-64tasks-8nodes-lustre-gcp.txt"))
    assert r.tool_version == "3.3.0"
    # "write     6335       6335       5.44 ..." (values >= 3600 printed without decimals)
    assert r.get("write_bw", iteration=0) == approx(6335 * MIB)
    assert r.get("read_bw", iteration=0) == approx(7438 * MIB)
    assert r.get("write_iops", iteration=0) == approx(6335)
    assert r.get("write_lat", iteration=0) == approx(5.44)
    assert r.get("read_close_lat", iteration=0) == approx(20.08)
    # "Max Write: 6334.77 MiB/sec", "Max Read:  7438.33 MiB/sec"
    assert r.get("write_bw", "max") == approx(6334.77 * MIB)
    assert r.get("read_bw", "max") == approx(7438.33 * MIB)
    assert r.params["nodes"] == 8
    assert r.params["threads"] == 64
    assert r.params["segments"] == 539
    assert r.params["aggregate_size"] == 551936 * MIB
    assert r.params["file_per_process"] is True
    assert r.params["direct"] is False


def test_ior_3_3_0_odirect_shared_file(sample):
    r = ior.parse(sample("ior/ior-3.3.0-posix-ssf-48tasks-odirect-beegfs.txt"))
    assert r.params["direct"] is True  # --posix.odirect
    assert r.params["file_per_process"] is False
    assert r.params["threads"] == 48
    assert r.params["nodes"] == 2
    assert r.params["block_size"] == 134217728
    assert r.get("write_bw", iteration=0) == approx(162.26 * MIB)
    assert r.get("write_iops", iteration=0) == approx(162.33)
    assert r.get("write_lat", iteration=0) == approx(0.106653)
    assert r.get("read_lat", iteration=0) == approx(0.475794)
    assert r.get("read_iops", "max") == approx(98.81)


def test_ior_3_3_0_random_64k(sample):
    r = ior.parse(sample("ior/ior-3.3.0-posix-ssf-random-z-64k-beegfs.txt"))
    assert r.params["transfer_size"] == 65536  # "xfersize : 65536 bytes"
    assert r.params["pattern"] == "rand"  # "ordering in a file : random"
    assert r.get("write_iops", iteration=0) == approx(2075.05)
    assert r.get("write_iops", "max") == approx(2074.47)
    assert r.get("read_bw", iteration=0) == approx(31.06 * MIB)
    assert r.get("read_time", "mean") == approx(197.81096)


def test_ior_3_3_0dev_wrapped_log_ten_runs(sample):
    text = sample("ior/ior-3.3.0dev-akrr-wrapped-multi-api-log.txt")
    runs = ior.parse_many(text)
    assert len(runs) == 10
    assert [r.params["api"] for r in runs] == [
        "POSIX",
        "POSIX",
        "MPIIO",
        "MPIIO",
        "MPIIO",
        "HDF5",
        "HDF5",
        "HDF5",
        "NCMPI",
        "NCMPI",
    ]
    first = ior.parse(text)
    assert first.extra["runs_in_file"] == 10
    assert first.get("write_bw", iteration=0) == approx(426.77 * MIB)
    assert first.get("read_bw", "max") == approx(332.55 * MIB)
    assert first.extra["remove_time"][0]["seconds"] == approx(0.156993)
    # "# Starting Test: -a MPIIO -c" -> "type : collective", "Max Write: 115.87 MiB/sec"
    assert runs[3].params["collective"] is True
    assert runs[3].get("write_bw", "max") == approx(115.87 * MIB)
    assert runs[2].extra["api_version"] == "(3.1)"
    assert runs[4].get("write_bw", iteration=0) == approx(564.00 * MIB)
    assert runs[9].get("read_bw", "max") == approx(240.25 * MIB)
    assert runs[9].extra["api_version"] == "1.11.0 of 19 Dec 2018"
    assert ior.parse(text, run=9).command.endswith(
        "-a NCMPI -c -o /scratch/01482/xdtas/ior.9BzrhiNHI/ior_test_file__a_NCMPI__c"
    )


def test_ior_3_3_0dev_hdf5(sample):
    r = ior.parse(sample("ior/ior-3.3.0dev-hdf5-fpp-vv-2nodes.txt"))
    assert r.tool_version == "3.3.0+dev"
    assert r.params["api"] == "HDF5"
    assert r.extra["api_version"] == "1.10.4 (Parallel)"
    assert r.params["file_per_process"] is True
    assert r.get("write_bw", iteration=0) == approx(587.81 * MIB)
    assert r.get("read_iops", iteration=0) == approx(36.43)
    assert r.get("read_iops", "max") == approx(21.54)


def test_ior_3_3_0dev_posix_blank_line_inside_results(sample):
    r = ior.parse(sample("ior/ior-3.3.0dev-posix-fpp-vv-2nodes.txt"))
    assert r.get("write_bw", iteration=0) == approx(571.46 * MIB)
    assert r.get("read_bw", iteration=0) == approx(429.89 * MIB)
    assert r.get("read_lat", iteration=0) == approx(0.092507)
    assert r.get("write_iops", "mean") == approx(28.57)
    assert r.extra["remove_time"][0]["seconds"] == approx(0.002218)
    assert r.params["nodes"] == 2 and r.params["threads"] == 2


def test_ior_csv_summary_format_three_iterations(sample):
    r = ior.parse(sample("ior/ior-3.3dev-csv-summaryformat-3iter-pr260.csv"))
    assert r.get("write_bw", iteration=0) == approx(436.5474 * MIB)
    assert r.get("write_bw", iteration=1) == approx(576.2719 * MIB)
    assert r.get("write_bw", iteration=2) == approx(650.9370 * MIB)
    assert r.get("read_bw", iteration=2) == approx(3582.2008 * MIB)
    assert r.get("read_iops", iteration=1) == approx(1502521.5657)
    assert r.get("read_time", iteration=0) == approx(0.0008)
    assert r.params["transfer_size"] == 2048  # xfer(KiB) 2.0000
    assert r.params["block_size"] == 2048 * 1024  # block(KiB) 2048.0000
    assert r.extra["complete"] is True


def test_ior_3_4_0dev_verify_lines(sample):
    r = ior.parse(sample("ior/ior-3.4.0dev-posix-ssf-verify-daos-dfuse.txt"))
    assert r.tool_version == "3.4.0+dev"
    assert r.get("read_bw", iteration=0) == approx(5429 * MIB)  # "read      5429 ..."
    assert r.get("read_iops", iteration=0) == approx(5431)
    assert r.get("read_bw", "max") == approx(5429.38 * MIB)
    assert r.get("write_bw", iteration=0) == approx(1299.23 * MIB)
    assert r.get("write_open_lat", iteration=0) == approx(10.79)
    assert r.params["threads"] == 30
    assert r.params["nodes"] == 3
    assert r.params["tasks_per_node"] == 10
    assert r.params["block_size"] == 5 * 1024**3
    assert r.params["aggregate_size"] == 153600 * MIB


def test_ior_tail_summary_32_tasks_four_reps(sample):
    r = ior.parse(sample("ior/ior-3.x-tail-summary-fpp-32tasks-beegfs-usc.txt"))
    assert r.tool_version is None
    assert r.get("write_bw", "max") == approx(3842.11 * MIB)
    assert r.get("write_bw", "min") == approx(3595.90 * MIB)
    assert r.get("write_bw", "mean") == approx(3695.92 * MIB)
    assert r.get("write_bw", "stddev") == approx(101.02 * MIB)
    assert r.get("read_bw", "mean") == approx(5114.22 * MIB)
    assert r.get("read_time", "mean") == approx(64.23726)
    assert r.params["threads"] == 32
    assert r.params["tasks_per_node"] == 4
    assert r.params["iterations"] == 4
    assert r.params["block_size"] == 10737418240
    assert r.params["transfer_size"] == 8388608
    assert r.params["aggregate_size"] == 343597383680
    assert r.params["file_per_process"] is True


def test_ior_tail_summary_5_tasks(sample):
    r = ior.parse(sample("ior/ior-3.x-tail-summary-fpp-5tasks-beegfs-usc.txt"))
    assert r.get("read_bw", "max") == approx(10389.95 * MIB)
    assert r.get("read_bw", "min") == approx(8575.87 * MIB)
    assert r.get("write_bw", "stddev") == approx(129.37 * MIB)
    assert r.get("write_time", "mean") == approx(17.63093)
    assert r.params["threads"] == 5
    assert r.params["transfer_size"] == 2097152


def test_ior_4_0_0_integer_read_bw(sample):
    r = ior.parse(sample("ior/ior-4.0.0-posix-ssf-verify-daos-dfuse.txt"))
    assert r.tool_version == "4.0.0"
    assert r.get("read_bw", iteration=0) == approx(30912 * MIB)
    assert r.get("read_iops", iteration=0) == approx(30992)
    assert r.get("read_lat", iteration=0) == approx(0.000321)
    assert r.get("read_bw", "max") == approx(30911.67 * MIB)
    assert r.get("write_bw", iteration=0) == approx(101.04 * MIB)
    assert r.params["nodes"] == 2 and r.params["threads"] == 10


def test_ior_4_1_0dev_dfs_without_max_lines(sample):
    r = ior.parse(sample("ior/ior-4.1.0dev-dfs-api-nonverbose-no-max-lines.txt"))
    assert r.tool_version == "4.1.0+dev"
    assert r.params["api"] == "DFS"
    assert r.extra["api_version"] == "DAOS"
    assert r.get("write_bw", iteration=0) == approx(1189.47 * MIB)
    assert r.get("write_iops", iteration=0) == approx(1193.02)
    assert r.get("read_bw", "max") == approx(2273.03 * MIB)  # from the summary table
    assert r.get("read_time", "mean") == approx(0.04399)


def test_ior_4_1_0dev_verify_and_remove_row(sample):
    r = ior.parse(sample("ior/ior-4.1.0dev-posix-ssf-verbose-verify-remove-row-daos-dfuse.txt"))
    assert r.get("read_bw", iteration=0) == approx(11530 * MIB)
    assert r.get("read_iops", iteration=0) == approx(11963)
    assert r.get("read_bw", "max") == approx(11530.10 * MIB)
    assert r.get("write_lat", iteration=0) == approx(0.035106)
    assert r.extra["remove_time"][0]["seconds"] == approx(0.001194)


def test_every_ior_sample_has_a_test():
    covered = {
        "ior-3.0.1-posix-ssf-vv-96tasks-write-only.txt",
        "ior-3.2.0-posix-ssf-vv-filesize-warning.txt",
        "ior-3.2.1-posix-fpp-128tasks-3nodes-beegfs-aws.txt",
        "ior-3.2.1-posix-fpp-64tasks-wr-beegfs-aws.txt",
        "ior-3.2.1-posix-fpp-64tasks-write-only-beegfs-aws.txt",
        "ior-3.3.0-posix-fpp-64tasks-8nodes-lustre-gcp.txt",
        "ior-3.3.0-posix-ssf-48tasks-odirect-beegfs.txt",
        "ior-3.3.0-posix-ssf-random-z-64k-beegfs.txt",
        "ior-3.3.0dev-akrr-wrapped-multi-api-log.txt",
        "ior-3.3.0dev-hdf5-fpp-vv-2nodes.txt",
        "ior-3.3.0dev-posix-fpp-vv-2nodes.txt",
        "ior-3.3dev-csv-summaryformat-3iter-pr260.csv",
        "ior-3.4.0dev-posix-ssf-verify-daos-dfuse.txt",
        "ior-3.x-tail-summary-fpp-32tasks-beegfs-usc.txt",
        "ior-3.x-tail-summary-fpp-5tasks-beegfs-usc.txt",
        "ior-4.0.0-posix-ssf-verify-daos-dfuse.txt",
        "ior-4.1.0dev-dfs-api-nonverbose-no-max-lines.txt",
        "ior-4.1.0dev-posix-ssf-verbose-verify-remove-row-daos-dfuse.txt",
    }
    assert set(IOR_SAMPLES) == covered


# --- JSON (no real sample exists; layout from IOR's ior-output.c) -----------------------

IOR_JSON = {
    "Version": "3.3.0",
    "Began": "Tue Jan  5 10:00:00 2021",
    "Command line": "ior -a POSIX -b 4m -t 1m -i 2 -F -O summaryFormat=JSON",
    "Machine": "Linux node01",
    "tests": [
        {
            "TestID": 0,
            "StartTime": "Tue Jan  5 10:00:00 2021",
            "Parameters": {
                "api": "POSIX",
                "nodes": 1,
                "tasksPerNode": 4,
                "repetitions": 2,
                "filePerProc": 1,
                "useO_DIRECT": 0,
                "randomOffset": 0,
                "transferSize": 1048576,
                "blockSize": 4194304,
            },
            "Options": {
                "api": "POSIX",
                "apiVersion": "",
                "access": "file-per-process",
                "type": "independent",
                "segments": 1,
                "nodes": 1,
                "tasks": 4,
                "clients per node": 4,
                "repetitions": 2,
                "xfersize": "1 MiB",
                "blocksize": "4 MiB",
                "aggregate filesize": "16 MiB",
            },
            "Results": [
                [
                    {
                        "access": "write",
                        "bwMiB": 100.5,
                        "blockKiB": 4096.0,
                        "xferKiB": 1024.0,
                        "iops": 101.0,
                        "latency": 0.01,
                        "openTime": 0.001,
                        "wrRdTime": 0.15,
                        "closeTime": 0.002,
                        "totalTime": 0.16,
                    },
                    {
                        "access": "read",
                        "bwMiB": 200.25,
                        "blockKiB": 4096.0,
                        "xferKiB": 1024.0,
                        "iops": 201.0,
                        "latency": 0.005,
                        "openTime": 0.001,
                        "wrRdTime": 0.07,
                        "closeTime": 0.001,
                        "totalTime": 0.08,
                    },
                    {"access": "remove", "totalTime": 0.003},
                ],
                [
                    {
                        "access": "write",
                        "bwMiB": 110.5,
                        "blockKiB": 4096.0,
                        "xferKiB": 1024.0,
                        "iops": 111.0,
                        "latency": 0.009,
                        "openTime": 0.001,
                        "wrRdTime": 0.14,
                        "closeTime": 0.002,
                        "totalTime": 0.145,
                    },
                    {
                        "access": "read",
                        "bwMiB": 210.25,
                        "blockKiB": 4096.0,
                        "xferKiB": 1024.0,
                        "iops": 211.0,
                        "latency": 0.004,
                        "openTime": 0.001,
                        "wrRdTime": 0.07,
                        "closeTime": 0.001,
                        "totalTime": 0.076,
                    },
                ],
            ],
            "max": {"writeMiB": 110.5, "writeMB": 115.87, "readMiB": 210.25, "readMB": 220.46},
            "Finished": "Tue Jan  5 10:00:01 2021",
        }
    ],
    "summary": [
        {
            "operation": "write",
            "API": "POSIX",
            "TestID": 0,
            "ReferenceNumber": 0,
            "segmentCount": 1,
            "blockSize": 4194304,
            "transferSize": 1048576,
            "numTasks": 4,
            "tasksPerNode": 4,
            "repetitions": 2,
            "filePerProc": 1,
            "reorderTasks": 0,
            "bwMaxMIB": 110.5,
            "bwMinMIB": 100.5,
            "bwMeanMIB": 105.5,
            "bwStdMIB": 5.0,
            "OPsMax": 110.5,
            "OPsMin": 100.5,
            "OPsMean": 105.5,
            "OPsSD": 5.0,
            "MeanTime": 0.1525,
            "xsizeMiB": 16.0,
        },
        {
            "operation": "read",
            "API": "POSIX",
            "TestID": 0,
            "ReferenceNumber": 0,
            "segmentCount": 1,
            "blockSize": 4194304,
            "transferSize": 1048576,
            "numTasks": 4,
            "tasksPerNode": 4,
            "repetitions": 2,
            "filePerProc": 1,
            "reorderTasks": 0,
            "bwMaxMIB": 210.25,
            "bwMinMIB": 200.25,
            "bwMeanMIB": 205.25,
            "bwStdMIB": 5.0,
            "OPsMax": 210.25,
            "OPsMin": 200.25,
            "OPsMean": 205.25,
            "OPsSD": 5.0,
            "MeanTime": 0.078,
            "xsizeMiB": 16.0,
        },
    ],
}


def test_ior_json_summary_format():
    text = json.dumps(IOR_JSON, indent=2)
    assert ior.detect(text) > 0.5
    r = ior.parse(text)
    assert r.tool_version == "3.3.0"
    assert r.command == "ior -a POSIX -b 4m -t 1m -i 2 -F -O summaryFormat=JSON"
    assert r.get("write_bw", iteration=0) == approx(100.5 * MIB)
    assert r.get("write_bw", iteration=1) == approx(110.5 * MIB)
    assert r.get("read_iops", iteration=1) == approx(211.0)
    assert r.get("read_lat", iteration=0) == approx(0.005)
    assert r.get("write_bw", "mean") == approx(105.5 * MIB)
    assert r.get("read_bw", "stddev") == approx(5.0 * MIB)
    assert r.get("write_iops", "max") == approx(110.5)
    assert r.get("read_time", "mean") == approx(0.078)
    assert r.params["threads"] == 4
    assert r.params["iterations"] == 2
    assert r.params["file_per_process"] is True
    assert r.params["direct"] is False
    assert r.params["aggregate_size"] == 16 * MIB
    assert r.extra["remove_time"] == [{"iteration": 0, "seconds": 0.003}]


def test_ior_json_trailing_comma_and_flat_results():
    doc = {
        "Version": "4.0.0",
        "tests": [
            {"Results": [{"access": "write", "bwMiB": 50.0}, {"access": "write", "bwMiB": 60.0}]}
        ],
    }
    text = json.dumps(doc).replace('"bwMiB": 60.0}', '"bwMiB": 60.0,}')
    r = ior.parse(text)
    assert r.get("write_bw", iteration=0) == approx(50.0 * MIB)
    assert r.get("write_bw", iteration=1) == approx(60.0 * MIB)


def test_ior_json_errors_name_the_line():
    with pytest.raises(ParseError) as err:
        ior.parse('{\n  "Version": "3.3.0",\n  "tests": [\n')
    assert err.value.line is not None
    with pytest.raises(ParseError, match="no Results"):
        ior.parse('{"Version": "3.3.0", "tests": []}')


# --- detection ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", IOR_SAMPLES)
def test_detect_picks_ior_for_its_samples(sample, name):
    text = sample(f"ior/{name}")
    score = ior.detect(text)
    assert score > 0.5
    assert mdtest.detect(text) < score
    assert io500.detect(text) < score


def test_detect_rejects_other_output():
    assert ior.detect("") == 0.0
    assert ior.detect("hello world\n") == 0.0


# --- errors -------------------------------------------------------------------------------


def test_empty_text_raises():
    with pytest.raises(ParseError, match="empty"):
        ior.parse("")
    with pytest.raises(ParseError, match="empty"):
        ior.parse("  \n\n")


def test_header_without_results_names_the_banner_line(sample):
    text = sample("ior/ior-3.3.0-posix-ssf-48tasks-odirect-beegfs.txt")
    header = text.split("Results:")[0]
    with pytest.raises(ParseError) as err:
        ior.parse(header)
    assert err.value.line == 1
    assert "line 1" in str(err.value) and "truncated" in str(err.value)


def test_truncated_after_table_header_names_that_line(sample):
    text = sample("ior/ior-4.0.0-posix-ssf-verify-daos-dfuse.txt")
    cut = text.split("Commencing write performance test")[0]
    with pytest.raises(ParseError) as err:
        ior.parse(cut)
    header_line = (
        cut.splitlines().index(
            next(line for line in cut.splitlines() if line.startswith("access    bw(MiB/s)"))
        )
        + 1
    )
    assert err.value.line == header_line
    assert f"line {header_line}" in str(err.value)


def test_random_text_raises_parse_error():
    with pytest.raises(ParseError, match="no IOR"):
        ior.parse("Lorem ipsum\ndolor sit amet\n")


def test_unknown_run_index():
    with pytest.raises(ParseError, match="run 5 not found"):
        ior.parse(read_sample("ior/ior-4.0.0-posix-ssf-verify-daos-dfuse.txt"), run=5)


# --- property tests: only ParseError, never another exception ---------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(IOR_SAMPLES), data=st.data())
def test_truncated_prefixes_raise_only_parse_error(name, data):
    text = read_sample(f"ior/{name}")
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    check_truncated(ior.parse, text, cut, needs_metrics=True)


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(IOR_SAMPLES), data=st.data())
def test_shuffled_sample_lines_raise_only_parse_error(name, data):
    lines = read_sample(f"ior/{name}").splitlines()
    picked = data.draw(st.lists(st.sampled_from(lines), max_size=40))
    check_shuffled(ior.parse, lines, picked)


@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_random_text_raises_only_parse_error(text):
    check_only_parse_error(ior.parse, text)


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(IOR_SAMPLES), data=st.data())
def test_mangled_numbers_raise_only_parse_error(name, data):
    text = read_sample(f"ior/{name}")
    check_mangled(ior.parse, text, data)


def test_a_mean_of_iterations_near_the_largest_float_is_that_mean():
    """Two iterations of 1e308 (a mangled figure) overflowed ``fsum`` (OverflowError, not a
    ParseError, from the property test above): the mean divides first."""
    from runners.parsers.base import mean

    assert mean([1e308, 1e308]) == 1e308
    assert mean([1.0, 2.0, 4.0]) == 7 / 3
