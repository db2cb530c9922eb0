"""elbencho parser: every sample under shared/samples/elbencho, detection, errors, robustness."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runners.parsers import dd, elbencho, fio, parse, parse_parts
from runners.parsers.base import ParseError
from tests.helpers.samples import SAMPLES, metric, read_sample

MIB = 1024**2
GIB = 1024**3

ELBENCHO_SAMPLES = sorted(p.name for p in (SAMPLES / "elbencho").iterdir())
OTHER_SAMPLES = sorted(
    f"{tool}/{p.name}" for tool in ("fio", "dd") for p in (SAMPLES / tool).iterdir()
)


# --- mtelbencho sweeps (elbencho 1.x "Elapsed ms" format) ------------------------------------


def test_sweep_large_files(sample):
    text = sample("elbencho/elbencho-1.x-ms-format-sweep-large-files-write.txt")
    r = elbencho.parse(text)
    assert r.extra["format"] == "sweep"
    assert len(r.extra["blocks"]) == 11  # 1024x1GiB … 1x1024GiB
    # block 0, "WRITE Elapsed ms : 85656 99973", "IOPS : 660 655",
    # "Throughput MiB/s : 10572 10488"
    assert metric(r, "elapsed", phase="WRITE", block=0) == pytest.approx(99.973)
    assert metric(r, "elapsed", "first", phase="WRITE", block=0) == pytest.approx(85.656)
    assert metric(r, "write_iops", phase="WRITE", block=0) == 655
    assert metric(r, "write_iops", "first", phase="WRITE", block=0) == 660
    assert metric(r, "write_bw", phase="WRITE", block=0) == 10488 * MIB
    assert metric(r, "write_bw", "first", phase="WRITE", block=0) == 10572 * MIB
    # last block (1x1024GiB): "Throughput MiB/s : 9457 9443", "Elapsed ms : 98592 111032"
    assert metric(r, "write_bw", phase="WRITE", block=10) == 9443 * MIB
    assert metric(r, "elapsed", phase="WRITE", block=10) == pytest.approx(111.032)
    # "RMFILES Elapsed ms : 41 60" (block 0)
    assert metric(r, "elapsed", phase="RMFILES", block=0) == pytest.approx(0.060)
    # DROPCACHE is housekeeping: kept in extra, not a metric
    assert not [m for m in r.metrics if m.extra.get("phase") == "DROPCACHE"]
    phases = [p["phase"] for p in r.extra["blocks"][0]["phases"]]
    assert phases == ["DROPCACHE", "WRITE", "DROPCACHE", "RMFILES", "DROPCACHE"]
    # header "threads : 56", "block_size : 16m"; data set "…/sweep/1024x1GiB"
    assert r.params["threads"] == 56
    assert r.params["transfer_size"] == 16 * MIB
    assert "file_size" not in r.params  # differs per step
    assert r.extra["blocks"][0]["params"]["file_size"] == GIB
    assert r.extra["blocks"][0]["dataset"] == "1024x1GiB"
    assert r.extra["blocks"][0]["file_count"] == 1024
    assert r.extra["blocks"][10]["params"]["file_size"] == 1024 * GIB
    assert r.extra["notes"][0].startswith("NOTE: File size is not a multiple")


def test_sweep_parse_many_gives_one_result_per_step(sample):
    text = sample("elbencho/elbencho-1.x-ms-format-sweep-large-files-write.txt")
    results = elbencho.parse_many(text)
    assert len(results) == 11
    # "Working on /data/zettar/zx/src/sweep/512x2GiB with 56 threads..." (second step)
    second = results[1]
    assert second.params["file_size"] == 2 * GIB
    assert second.params["threads"] == 56
    assert metric(second, "write_bw", phase="WRITE", block=None) == 10456 * MIB
    assert metric(second, "write_iops", "first", phase="WRITE") == 658


# --- parts: one run per sweep step / resfile entry (issue 25, finding 2) --------------------

# The 11 steps of the large-files sweep, as the file prints them: "Working on …/sweep/<set>",
# the WRITE row's LAST DONE "Throughput MiB/s" and "Elapsed ms".
LARGE_STEPS = [
    ("1024x1GiB", GIB, 10488, 99973),
    ("512x2GiB", 2 * GIB, 10456, 100279),
    ("256x4GiB", 4 * GIB, 9285, 112924),
    ("128x8GiB", 8 * GIB, 9740, 107652),
    ("64x16GiB", 16 * GIB, 9303, 112703),
    ("32x32GiB", 32 * GIB, 9484, 110558),
    ("16x64GiB", 64 * GIB, 9646, 108696),
    ("8x128GiB", 128 * GIB, 9421, 111292),
    ("4x256GiB", 256 * GIB, 9478, 110626),
    ("2x512GiB", 512 * GIB, 9649, 54333),
    ("1x1024GiB", 1024 * GIB, 9443, 111032),
]


def test_sweep_parse_parts_gives_one_part_per_step(sample):
    text = sample("elbencho/elbencho-1.x-ms-format-sweep-large-files-write.txt")
    parts = elbencho.parse_parts(text)
    assert len(parts) == 11
    for index, (part, (dataset, size, mib_s, ms)) in enumerate(
        zip(parts, LARGE_STEPS, strict=True)
    ):
        assert part.extra["part"] == {
            "index": index,
            "count": 11,
            "kind": "run",
            "label": dataset,
        }
        # each step's own file size, the header's "threads : 56" and "block_size : 16m"
        assert part.params["file_size"] == size
        assert part.params["threads"] == 56
        assert part.params["transfer_size"] == 16 * MIB
        assert metric(part, "write_bw", phase="WRITE") == mib_s * MIB
        assert metric(part, "elapsed", phase="WRITE") == pytest.approx(ms / 1000)
    # "WRITE … IOPS : 585 580" of the third step (256x4GiB)
    assert metric(parts[2], "write_iops", phase="WRITE") == 580
    assert metric(parts[2], "write_iops", "first", phase="WRITE") == 585


def test_small_files_sweep_parts_keep_each_steps_metadata_phases(sample):
    text = sample("elbencho/elbencho-1.x-ms-format-sweep-small-files-mkdirs-write-rm.txt")
    parts = elbencho.parse_parts(text)
    # 1048576x1KiB … 1048576x512KiB: ten steps
    assert [p.extra["part"]["label"] for p in parts] == [
        f"1048576x{k}KiB" for k in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
    ]
    assert [p.params["file_size"] for p in parts] == [
        k * 1024 for k in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
    ]
    # WRITE "Throughput MiB/s" LAST DONE of each step
    assert [metric(p, "write_bw", phase="WRITE") for p in parts] == [
        v * MIB for v in (52, 111, 203, 403, 834, 1634, 3307, 6689, 9502, 9215)
    ]
    # first step: "MKDIRS Dirs/s : 21201 18716", "RMFILES Files/s : 77300 77381"
    assert metric(parts[0], "dir_create", phase="MKDIRS") == 18716
    assert metric(parts[0], "file_remove", phase="RMFILES") == 77381
    # last step: "WRITE Files/s : 18440 18430", "Elapsed ms : 56042 56893"
    assert metric(parts[9], "file_create", phase="WRITE") == 18430
    assert metric(parts[9], "elapsed", phase="WRITE") == pytest.approx(56.893)


@pytest.mark.parametrize(
    "name",
    [
        "elbencho-3.0-26-single-thread-direct-write-issue75.txt",
        "elbencho-3.0-29-csvfile-4hosts-read-64K-direct.csv",
        "elbencho-3.0-29-livecsvex-4hosts-read-64K.csv",
        "elbencho-3.0-29-resfile-4hosts-read-64K-direct-lat.txt",
        "elbencho-3.0-29-resfile-windows-smb-write-4K-label.txt",
        "elbencho-3.x-multihost-write-doc-example.txt",
    ],
)
def test_output_of_one_run_is_one_part(sample, name):
    parts = elbencho.parse_parts(sample(f"elbencho/{name}"))
    assert len(parts) == 1
    assert "part" not in parts[0].extra


def test_one_run_part_has_the_runs_values(sample):
    text = sample("elbencho/elbencho-3.0-26-single-thread-direct-write-issue75.txt")
    (part,) = elbencho.parse_parts(text)
    # "Throughput MiB/s : 885 885", "Elapsed time : 11.559s 11.559s"
    assert metric(part, "write_bw", phase="WRITE") == 885 * MIB
    assert metric(part, "elapsed", phase="WRITE") == pytest.approx(11.559)


def test_dispatcher_splits_an_elbencho_sweep(sample):
    text = sample("elbencho/elbencho-1.x-ms-format-sweep-large-files-write.txt")
    parts = parse_parts(text)
    assert len(parts) == 11 and parts[0].tool == "elbencho"
    # "Working on /data/zettar/zx/src/sweep/128x8GiB" step: "Throughput MiB/s : 9924 9740"
    fourth = parse(text, part=3)
    assert fourth.extra["part"]["label"] == "128x8GiB"
    assert metric(fourth, "write_bw", phase="WRITE") == 9740 * MIB
    assert metric(fourth, "write_bw", "first", phase="WRITE") == 9924 * MIB


def test_sweep_small_files_metadata_phases(sample):
    r = elbencho.parse(
        sample("elbencho/elbencho-1.x-ms-format-sweep-small-files-mkdirs-write-rm.txt")
    )
    blocks = r.extra["blocks"]
    assert blocks[0]["dataset"] == "1048576x1KiB"
    assert blocks[-1]["dataset"] == "1048576x512KiB"
    # block 0: "MKDIRS … Dirs/s : 21201 18716"
    assert metric(r, "dir_create", phase="MKDIRS", block=0) == 18716
    assert metric(r, "dir_create", "first", phase="MKDIRS", block=0) == 21201
    # "WRITE … Files/s : 53679 53757", "Throughput MiB/s : 52 52"
    assert metric(r, "file_create", phase="WRITE", block=0) == 53757
    assert metric(r, "file_create", "first", phase="WRITE", block=0) == 53679
    assert metric(r, "write_bw", phase="WRITE", block=0) == 52 * MIB
    # "RMFILES … Files/s : 77300 77381"
    assert metric(r, "file_remove", phase="RMFILES", block=0) == 77381
    assert metric(r, "elapsed", phase="WRITE", block=0) == pytest.approx(19.506)
    # last step: "Files/s : 18440 18430", "Throughput MiB/s : 9220 9215"
    last = len(blocks) - 1
    assert metric(r, "file_create", phase="WRITE", block=last) == 18430
    assert metric(r, "write_bw", phase="WRITE", block=last) == 9215 * MIB
    # "Total files : 999438 1048600" stays in the phase extras
    write = blocks[0]["phases"][3]
    assert write["phase"] == "WRITE"
    assert write["extra"]["Total files"] == [999438, 1048600]


# --- elbencho 2.x/3.x console and --resfile ---------------------------------------------------


def test_single_thread_direct_write_with_terminator(sample):
    r = elbencho.parse(sample("elbencho/elbencho-3.0-26-single-thread-direct-write-issue75.txt"))
    assert r.extra["format"] == "text"
    # "WRITE Elapsed time : 11.559s 11.559s", "IOPS : 221 221", "Throughput MiB/s : 885 885"
    assert r.get("elapsed") == pytest.approx(11.559)
    assert r.get("elapsed", "first") == pytest.approx(11.559)
    assert r.get("write_iops") == 221
    assert r.get("write_bw") == 885 * MIB
    assert r.extra["phases"][0]["extra"]["Total bytes"] == [10240 * MIB, 10240 * MIB]
    assert all(m.extra == {"phase": "WRITE"} for m in r.metrics)


def test_multihost_doc_example_minutes(sample):
    text = sample("elbencho/elbencho-3.x-multihost-write-doc-example.txt")
    r = elbencho.parse(text)
    # "Elapsed time : 2m3.241s 2m5.755s"
    assert r.get("elapsed", "first") == pytest.approx(123.241)
    assert r.get("elapsed") == pytest.approx(125.755)
    assert r.get("write_iops") == 33352  # "IOPS : 33395 33352"
    assert r.get("write_bw") == 33352 * MIB  # "Throughput MiB/s : 33395 33352"
    assert r.get("write_bw", "first") == 33395 * MIB
    assert r.params == {}  # the command line is not part of the output
    # … the runner knows it (PROVENANCE gives the one the doc used)
    cmd = "elbencho --hosts 192.168.0.[1,3,5] -w --direct -b 1m -s 16g -t 96 /data/testdir"
    r = elbencho.parse(text, command=cmd)
    assert r.command == cmd
    assert r.params["nodes"] == 3
    assert r.params["threads"] == 3 * 96
    assert r.params["transfer_size"] == MIB
    assert r.params["block_size"] == 16 * GIB
    assert r.params["direct"] is True
    assert r.params["ops"] == ["WRITE"]


def test_resfile_four_hosts_read_with_latency(sample):
    r = elbencho.parse(sample("elbencho/elbencho-3.0-29-resfile-4hosts-read-64K-direct-lat.txt"))
    assert r.extra["format"] == "resfile"
    assert r.extra["iso_date"] == "2025-07-26T11:50:47-0400"
    assert r.params["label"] == "SR_LF_HOSTS[4]_THREADS[1]_BLOCKSIZE[64K]_FILESIZE[1G]_IODEPTH[1]"
    assert r.command.startswith('"/usr/bin/elbencho" "--hosts" "centos01.beastmode.local.net,')
    # "READ Elapsed time : 4.647s 22.260s", "IOPS : 1398 736", "Throughput MiB/s : 87 46"
    assert r.get("elapsed") == pytest.approx(22.260)
    assert r.get("elapsed", "first") == pytest.approx(4.647)
    assert r.get("read_iops") == 736
    assert r.get("read_iops", "first") == 1398
    assert r.get("read_bw") == 46 * MIB
    assert r.get("cpu_util") == 4  # "CPU util % : 4 4"
    # "IO latency : [ min=229us avg=4.34ms max=209ms ]"
    assert r.get("read_lat", "min") == pytest.approx(229e-6)
    assert r.get("read_lat", "mean") == pytest.approx(4.34e-3)
    assert r.get("read_lat", "max") == pytest.approx(0.209)
    # COMMAND LINE: --hosts with 4 hosts, --threads=1, --block=64K, --size=1G, --direct
    assert r.params["nodes"] == 4
    assert r.params["threads"] == 4
    assert r.params["tasks_per_node"] == 1
    assert r.params["transfer_size"] == 64 * 1024
    assert r.params["block_size"] == GIB
    assert r.params["file_size"] == GIB
    assert r.params["iodepth"] == 1
    assert r.params["direct"] is True


def test_resfile_windows_write_label(sample):
    r = elbencho.parse(sample("elbencho/elbencho-3.0-29-resfile-windows-smb-write-4K-label.txt"))
    assert r.params["label"] == "001_SEQ_WRITE_LF_1G_4K_1T_1IOD"
    # "WRITE Elapsed time : 1.544s 1.544s", "IOPS : 169673 169673", "Throughput MiB/s : 662"
    assert r.get("elapsed") == pytest.approx(1.544)
    assert r.get("write_iops") == 169673
    assert r.get("write_bw") == 662 * MIB
    assert r.get("cpu_util") == 9
    # "IO latency : [ min=4us avg=5us max=14.1ms ]"
    assert r.get("write_lat", "min") == pytest.approx(4e-6)
    assert r.get("write_lat", "mean") == pytest.approx(5e-6)
    assert r.get("write_lat", "max") == pytest.approx(14.1e-3)
    assert r.params["transfer_size"] == 4096  # "--block=4K"
    assert r.params["threads"] == 1
    assert r.params["nodes"] == 1
    assert r.params["direct"] is False


def test_appended_resfiles_are_separate_runs(sample):
    one = sample("elbencho/elbencho-3.0-29-resfile-4hosts-read-64K-direct-lat.txt")
    two = sample("elbencho/elbencho-3.0-29-resfile-windows-smb-write-4K-label.txt")
    results = elbencho.parse_many(one + two)
    assert [r.params["label"] for r in results] == [
        "SR_LF_HOSTS[4]_THREADS[1]_BLOCKSIZE[64K]_FILESIZE[1G]_IODEPTH[1]",
        "001_SEQ_WRITE_LF_1G_4K_1T_1IOD",
    ]
    combined = elbencho.parse(one + two)
    assert metric(combined, "read_bw", phase="READ", block=0) == 46 * MIB
    assert metric(combined, "write_bw", phase="WRITE", block=1) == 662 * MIB
    assert "label" not in combined.params  # differs between the runs
    assert combined.command is None


def test_iterations_and_rwmix_rows():
    # Rows as elbencho 3.x prints them (Statistics.cpp printPhaseResultsToStream) for an
    # rwmix write phase run twice with --iterations 2.
    block = (
        "WRITE       Elapsed time     :        59ms        1.001s\n"
        "            IOPS write       :         100         200\n"
        "            IOPS read        :          10          20\n"
        "            MiB/s write      :           1           2\n"
        "            MiB/s read       :           3           4\n"
        "            MiB/s total      :           4           6\n"
        "            IO wr latency    : [ min=1us avg=2us max=3ms ]\n"
        "            IO rd latency    : [ min=4us avg=5us max=6s ]\n"
        "            IO lat % us      : [ 1%<=7 50%<=8 75%<=9 99%<=10 99.9%<=11 ]\n"
        "---\n"
    )
    r = elbencho.parse(
        "OPERATION   RESULT TYPE         FIRST DONE   LAST DONE\n"
        "=========== ================    ==========   =========\n" + block + block
    )
    assert metric(r, "elapsed", "first", iteration=0, phase="WRITE") == pytest.approx(0.059)
    assert metric(r, "elapsed", iteration=1, phase="WRITE") == pytest.approx(1.001)
    assert metric(r, "write_iops", iteration=0) == 200
    assert metric(r, "read_iops", iteration=0) == 20
    assert metric(r, "read_bw", iteration=1) == 4 * MIB
    assert metric(r, "read_lat", "max", iteration=0) == pytest.approx(6.0)
    assert metric(r, "write_lat", "max", iteration=0) == pytest.approx(3e-3)
    assert metric(r, "write_lat", "p99.9", iteration=0) == pytest.approx(11e-6)
    assert not [m for m in r.metrics if m.iteration is None]


# --- --csvfile and --livecsv --------------------------------------------------------------------


def test_csvfile_row(sample):
    r = elbencho.parse(sample("elbencho/elbencho-3.0-29-csvfile-4hosts-read-64K-direct.csv"))
    assert r.extra["format"] == "csv"
    assert r.tool_version == "3.0-29"
    # operation READ: time ms 4647/22260, IOPS 1398/736, MiB/s 87/46, CPU% 4/4
    assert r.get("elapsed") == pytest.approx(22.260)
    assert r.get("elapsed", "first") == pytest.approx(4.647)
    assert r.get("read_iops") == 736
    assert r.get("read_bw") == 46 * MIB
    assert r.get("read_bw", "first") == 87 * MIB
    assert r.get("cpu_util", "first") == 4
    # IO lat us [min]/[avg]/[max]: 229, 4340, 208626
    assert r.get("read_lat", "min") == pytest.approx(229e-6)
    assert r.get("read_lat", "mean") == pytest.approx(4340e-6)
    assert r.get("read_lat", "max") == pytest.approx(208626e-6)
    # hosts 4, threads 1, file size 1073741824, block size 65536, direct IO 1, IO depth 1
    assert r.params["nodes"] == 4
    assert r.params["threads"] == 4
    assert r.params["file_size"] == 1073741824
    assert r.params["transfer_size"] == 65536
    assert r.params["direct"] is True
    assert r.params["iodepth"] == 1
    assert r.params["label"] == "SR_LF_HOSTS[4]_THREADS[1]_BLOCKSIZE[64K]_FILESIZE[1G]_IODEPTH[1]"
    assert r.command.startswith('"/usr/bin/elbencho" "--hosts" "centos01.beastmode.local.net ')
    assert r.command.endswith(
        '"/mnt/elcrapo_ssd/20250726_1150_CFC5165F-EB4F-48C6-B57D-DD830FD644FE.BIN"'
    )


def test_livecsvex_last_total_row_is_the_result(sample):
    r = elbencho.parse(sample("elbencho/elbencho-3.0-29-livecsvex-4hosts-read-64K.csv"))
    assert r.extra["format"] == "livecsv"
    # last Total row: "READ,22000,Total,,98,1061224448,34,554,0,0,0,5326,3,1"
    assert r.get("read_bw") == 34 * MIB
    assert r.get("read_iops") == 554
    assert r.get("read_lat", "mean") == pytest.approx(5326e-6)
    assert r.get("elapsed") == pytest.approx(22.0)
    assert r.get("cpu_util") == 1
    series = r.extra["phases"][0]["extra"]["live_series"]
    assert len(series) == 11  # Total rows at 2000 … 22000 ms
    # first Total row: "READ,2000,Total,,15,165871616,79,1265,…"
    assert series[0]["mib_s"] == 79 and series[0]["iops"] == 1265
    assert series[0]["done_bytes"] == 165871616
    services = r.extra["phases"][0]["extra"]["live_services"]
    assert services[0]["service"] == "centos01.beastmode.local.net:1611"
    assert r.params["nodes"] == 4
    assert r.extra["services"][-1] == "centos04.beastmode.local.net:1611"


# --- helpers ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("559ms", 0.559), ("11.559s", 11.559), ("2m3.241s", 123.241), ("1h2m3s", 3723.0)],
)
def test_elapsed_strings(text, seconds):
    assert elbencho._elapsed_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("spec", "count"),
    [("a,b,c", 3), ("a b", 2), ("node[1-4]", 4), ("10.0.0.[1,3,5]", 3), ("n[01-02],x", 3)],
)
def test_host_lists(spec, count):
    assert elbencho._count_hosts(spec) == count


# --- detection and errors --------------------------------------------------------------------


@pytest.mark.parametrize("name", ELBENCHO_SAMPLES)
def test_detect_own_samples_high(name):
    assert elbencho.detect(read_sample(f"elbencho/{name}")) >= 0.9


@pytest.mark.parametrize("name", OTHER_SAMPLES)
def test_detect_other_tools_low(name):
    assert elbencho.detect(read_sample(name)) < 0.3


@pytest.mark.parametrize("name", ELBENCHO_SAMPLES)
def test_elbencho_samples_are_not_taken_for_fio_or_dd(name):
    text = read_sample(f"elbencho/{name}")
    assert fio.detect(text) < 0.3
    assert dd.detect(text) < 0.3


def test_empty_output():
    with pytest.raises(ParseError, match="empty"):
        elbencho.parse("")
    with pytest.raises(ParseError, match="empty"):
        elbencho.parse_many("  \n")


def test_table_header_only_names_the_header_line(sample):
    text = sample("elbencho/elbencho-3.0-26-single-thread-direct-write-issue75.txt")
    head = "\n".join(text.splitlines()[:2]) + "\n"
    with pytest.raises(ParseError) as err:
        elbencho.parse(head)
    assert err.value.line == 1
    assert "no phase rows" in str(err.value)


def test_resfile_cut_before_the_table(sample):
    text = sample("elbencho/elbencho-3.0-29-resfile-4hosts-read-64K-direct-lat.txt")
    head = "\n".join(text.splitlines()[:3]) + "\n"  # ISO DATE, LABEL, COMMAND LINE
    with pytest.raises(ParseError, match="no elbencho result"):
        elbencho.parse(head)


def test_csv_header_only(sample):
    text = sample("elbencho/elbencho-3.0-29-csvfile-4hosts-read-64K-direct.csv")
    with pytest.raises(ParseError, match="header but no result rows"):
        elbencho.parse(text.splitlines()[0] + "\n")
    live = sample("elbencho/elbencho-3.0-29-livecsvex-4hosts-read-64K.csv")
    with pytest.raises(ParseError, match="header but no rows"):
        elbencho.parse(live.splitlines()[0] + "\n")


def test_only_housekeeping_phases(sample):
    text = sample("elbencho/elbencho-1.x-ms-format-sweep-large-files-write.txt")
    lines = text.splitlines()
    head = "\n".join(lines[: lines.index("---")]) + "\n"  # ends after the first DROPCACHE
    with pytest.raises(ParseError, match="housekeeping"):
        elbencho.parse(head)


def test_unrelated_text():
    with pytest.raises(ParseError, match="no elbencho result"):
        elbencho.parse("just some words\nand: more\n")


# --- robustness ------------------------------------------------------------------------------

ALL_SAMPLES = [f"elbencho/{n}" for n in ELBENCHO_SAMPLES] + OTHER_SAMPLES


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(ALL_SAMPLES), cut=st.floats(min_value=0.0, max_value=1.0))
def test_truncated_prefixes_raise_only_parse_error(name, cut):
    text = read_sample(name)
    prefix = text[: int(len(text) * cut)]
    for func in (elbencho.parse, elbencho.parse_many):
        try:
            func(prefix)
        except ParseError:
            pass


@settings(max_examples=200, deadline=None)
@given(text=st.text())
def test_random_text_raises_only_parse_error(text):
    assert 0.0 <= elbencho.detect(text) <= 1.0
    try:
        elbencho.parse(text)
    except ParseError:
        pass


@settings(max_examples=200, deadline=None)
@given(
    label=st.sampled_from(
        [
            "Elapsed time",
            "Elapsed ms",
            "IOPS",
            "Throughput MiB/s",
            "Files/s",
            "IO latency",
            "CPU util %",
            "IO lat % us",
        ]
    ),
    first=st.sampled_from(["0", "9" * 400, "1e999", "nan", "2m", "1h2m3.4s", "-", "12ms"]),
    last=st.sampled_from(["1", "inf", "9" * 400, "[ min=1e999us avg=x max=9ms ]", "3.5s"]),
    phase=st.sampled_from(["WRITE", "READ", "MKDIRS", "RMFILES", "DROPCACHE", "STAT"]),
)
def test_hostile_rows_raise_only_parse_error(label, first, last, phase):
    text = f"OPERATION RESULT TYPE FIRST DONE LAST DONE\n{phase}  {label} : {first} {last}\n---\n"
    try:
        elbencho.parse(text)
    except ParseError:
        pass
