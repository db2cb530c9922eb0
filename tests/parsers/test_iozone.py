"""IOzone parser against the real samples in shared/samples/iozone (values read from the files)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runners.parsers import get_parser, iozone
from runners.parsers.base import ParseError
from tests.helpers.samples import SAMPLES, read_sample
from tests.parsers.properties import check_only_parse_error, check_truncated

KB = 1024  # IOzone's kB / KB / kBytes/sec are 1024 bytes (DESIGN.md)
approx = pytest.approx

IOZONE_SAMPLES = sorted(p.name for p in (SAMPLES / "iozone").iterdir())
OTHER_SAMPLES = sorted(
    f"{d.name}/{p.name}"
    for d in SAMPLES.iterdir()
    if d.is_dir() and d.name != "iozone"
    for p in d.iterdir()
)


def cell(result, name, file_kb, rec_kb):
    """The auto-mode table cell of one test at one file size / record size, in B/s."""
    return next(
        m.value
        for m in result.metrics
        if m.name == name
        and m.stat == "value"
        and m.extra == {"file_size": file_kb * KB, "record_size": rec_kb * KB}
    )


def per_process(result, name, stat):
    return next(
        m.value
        for m in result.metrics
        if m.name == name and m.stat == stat and m.extra == {"per_process": True}
    )


def children(result, name):
    return sorted(
        (m.extra["child"], m.value, m.extra["xfer_bytes"])
        for m in result.metrics
        if m.name == name and "child" in m.extra
    )


# --- one test per sample file ------------------------------------------------------------


def test_3_247_legacy_auto_table_uppercase_kb(sample):
    r = iozone.parse(sample("iozone/iozone-3.247-auto-mode-ext3-2006.txt"))
    assert r.tool == "iozone"
    assert r.tool_version == "3.247"
    assert r.command == "./iozone -a -g 128m -q 16m -M -f /tmp/iozone.dat"
    # first row: "64  4  303383  913649  1304314  2662899 1722886  710511 1734015 ..."
    assert cell(r, "write_bw", 64, 4) == 303383 * KB
    assert cell(r, "read_bw", 64, 4) == 1304314 * KB
    # the "random read" column (under "random"), not the plain "read" column
    assert cell(r, "randread_bw", 64, 4) == 1722886 * KB
    assert cell(r, "bkwdread_bw", 64, 4) == 1734015 * KB
    assert cell(r, "recwrite_bw", 64, 4) == 863676 * KB
    # last row: "131072  16384  302244  689268 ... 594352 1096625  1102409"
    assert cell(r, "write_bw", 131072, 16384) == 302244 * KB
    assert cell(r, "freread_bw", 131072, 16384) == 1102409 * KB
    assert cell(r, "fread_bw", 131072, 16384) == 1096625 * KB
    # run level: best write cell is "64  64  365812", best random read "64 32 ... 3738358"
    assert r.get("write_bw", "max") == 365812 * KB
    assert r.get("randread_bw", "max") == 3738358 * KB
    # 120 table rows x 13 columns, plus 13 run-level maxima
    assert sum(1 for m in r.metrics if m.name == "write_bw" and m.extra) == 120
    assert len(r.metrics) == 120 * 13 + 13
    assert r.params["threads"] == 1
    assert r.params["direct"] is False
    assert r.params["ops"][:4] == ["write", "rewrite", "read", "reread"]
    assert r.extra["machine"].startswith("Linux dino2.ccrl-nece.de 2.6.9-11.ELsmp")
    assert r.extra["mode"] == "auto"


def test_3_420_throughput_t1_write_rewrite(sample):
    r = iozone.parse(sample("iozone/iozone-3.420-throughput-t1-write-rewrite-nfs-home.txt"))
    assert r.tool_version == "3.420"
    assert r.command == "iozone -i 0 -e -r 1M -s 8G -t 1"
    # "Children see throughput for  1 initial writers  =  363782.66 KB/sec"
    assert r.get("write_bw") == approx(363782.66 * KB)
    # "Parent sees throughput for  1 initial writers   =  363772.88 KB/sec"
    assert r.get("write_bw", "parent") == approx(363772.88 * KB)
    assert r.get("rewrite_bw") == approx(351427.81 * KB)
    assert r.get("rewrite_bw", "parent") == approx(351421.89 * KB)
    assert per_process(r, "write_bw", "mean") == approx(363782.66 * KB)
    # "Record Size 1024 KB", "File size set to 8388608 KB", "Throughput test with 1 process"
    assert r.params["record_size"] == 1024 * KB
    assert r.params["file_size"] == 8388608 * KB
    assert r.params["threads"] == 1
    assert r.params["ops"] == ["write", "rewrite"]
    # "Min xfer = 8388608.00 KB"
    assert r.extra["min_xfer_bytes"]["write"] == 8388608 * KB


def test_3_424_throughput_t4_tabs_parent_min_max_avg(sample):
    r = iozone.parse(sample("iozone/iozone-3.424-throughput-t4-write-read-parent-sees-tabs.txt"))
    assert r.tool_version == "3.424"
    assert r.get("write_bw") == approx(138676.27 * KB)
    assert r.get("write_bw", "parent") == approx(132773.25 * KB)
    assert per_process(r, "write_bw", "min") == approx(31613.57 * KB)
    assert per_process(r, "write_bw", "max") == approx(35972.43 * KB)
    assert per_process(r, "write_bw", "mean") == approx(34669.07 * KB)
    assert r.get("read_bw") == approx(157483.26 * KB)
    assert r.get("read_bw", "parent") == approx(156489.71 * KB)
    # "Children see throughput for 4 re-readers \t=  138993.81 kB/sec"
    assert r.get("reread_bw") == approx(138993.81 * KB)
    assert r.params["threads"] == 4
    assert r.params["record_size"] == 1024 * KB
    assert r.params["file_size"] == 131072 * KB
    assert r.params["ops"] == ["write", "rewrite", "read", "reread"]
    assert r.extra["min_xfer_bytes"]["rewrite"] == 129024 * KB


def test_3_465_auto_table_odirect_tab_header(sample):
    r = iozone.parse(sample("iozone/iozone-3.465-auto-mode-odirect-srp-xfs.txt"))
    assert r.tool_version == "3.465"
    assert r.command == "/root/iozone -I -a"
    assert r.params["direct"] is True  # "O_DIRECT feature enabled"
    # "64  4  20433  24205  16732  18017  17982  24643  9717  24428  10897  842003 ..."
    assert cell(r, "write_bw", 64, 4) == 20433 * KB
    assert cell(r, "reread_bw", 64, 4) == 18017 * KB
    assert cell(r, "randwrite_bw", 64, 4) == 24643 * KB
    assert cell(r, "strideread_bw", 64, 4) == 10897 * KB
    assert cell(r, "fwrite_bw", 64, 4) == 842003 * KB
    # "262144  64  134576  152765  93219 ..." (large files start at 64 kB records)
    assert cell(r, "write_bw", 262144, 64) == 134576 * KB
    assert cell(r, "freread_bw", 524288, 16384) == 2248543 * KB
    assert r.get("write_bw", "max") == 391569 * KB  # "8192  4096  391569 ..."
    assert sum(1 for m in r.metrics if m.name == "freread_bw" and m.extra) == 126


def test_3_471_cluster_mode_child_xfer_counts(sample):
    r = iozone.parse(sample("iozone/iozone-3.471-distributed-t3-plus-m-C-child-xfer-gpfs.txt"))
    assert r.tool_version == "3.471"
    assert r.command == "./iozone -i 0 -i 1 -s 200M -r 4k -t 3 -+m /tmp/nodelist -C"
    assert r.params["network_distribution"] is True
    assert r.params["threads"] == 3
    assert r.params["file_size"] == 204800 * KB
    assert r.params["record_size"] == 4 * KB
    assert r.get("write_bw") == approx(393197.84 * KB)
    assert r.get("read_bw") == approx(4044318.38 * KB)
    assert r.get("reread_bw") == approx(3972303.62 * KB)
    # cluster mode prints no "Parent sees" line
    assert not any(m.stat == "parent" for m in r.metrics)
    assert per_process(r, "rewrite_bw", "max") == approx(440644.44 * KB)
    # "Child[2] xfer count =  183548.00 kB, Throughput =  121949.16 kB/sec"
    assert children(r, "write_bw") == [
        (0, approx(135029.22 * KB), 204116 * KB),
        (1, approx(136219.47 * KB), 204800 * KB),
        (2, approx(121949.16 * KB), 183548 * KB),
    ]
    assert children(r, "read_bw")[0] == (0, approx(1125264.00 * KB), 163780 * KB)


def test_3_489_auto_100m_with_excel_report_and_wrapper(sample):
    r = iozone.parse(sample("iozone/iozone-3.489-auto-mode-100m-excel-report-beegfs.log"))
    assert r.tool_version == "3.489"
    assert r.params["file_size"] == 102400 * KB  # "File size set to 102400 kB"
    # "102400  4  15104  177983  208635  237828  10973  12537  10285  13629  15939 ..."
    assert cell(r, "write_bw", 102400, 4) == 15104 * KB
    assert cell(r, "randread_bw", 102400, 4) == 10973 * KB
    assert cell(r, "frewrite_bw", 102400, 16384) == 410117 * KB
    assert r.get("write_bw", "max") == 321623 * KB  # "102400  128  321623"
    assert r.get("fread_bw", "max") == 668266 * KB  # "102400  16384 ... 668266"
    # 13 rows x 13 columns; the Excel report repeats them and adds nothing
    assert sum(1 for m in r.metrics if m.extra) == 13 * 13
    assert r.extra["excel_report"] is True
    assert "warnings" not in r.extra
    wrapper = r.extra["wrapper"]
    assert wrapper["file"] == "/mnt/beegfs/IOZone-after-tune/IOZone-100m"
    assert wrapper["excel_file"] == "/mnt/beegfs/IOZone-after-tune/IOZone-100m.xls"
    assert wrapper["date"] == "Tue Jul 11 06:28:22 UTC 2023"


def test_3_489_auto_1m_excel_rows_shorter_than_header(sample):
    r = iozone.parse(sample("iozone/iozone-3.489-auto-mode-1m-excel-report-beegfs.log"))
    assert r.params["file_size"] == 1024 * KB
    assert cell(r, "write_bw", 1024, 4) == 211701 * KB
    assert cell(r, "rewrite_bw", 1024, 16) == 78503 * KB
    assert cell(r, "freread_bw", 1024, 1024) == 294079 * KB
    assert r.get("strideread_bw", "max") == 580808 * KB  # "1024  128 ... 580808"
    assert sum(1 for m in r.metrics if m.name == "write_bw" and m.extra) == 9
    assert "warnings" not in r.extra


def test_excel_report_alone_stands_in_for_the_table(sample):
    # Only the Excel section of the 1m log: 9 values under 13 record-size headers.
    text = sample("iozone/iozone-3.489-auto-mode-1m-excel-report-beegfs.log")
    excel = text[text.index("Excel output is below:") :]
    r = iozone.parse(excel)
    assert cell(r, "write_bw", 1024, 4) == 211701 * KB  # '"1024"   211701  283818 ...'
    assert cell(r, "freread_bw", 1024, 1024) == 294079 * KB
    assert cell(r, "bkwdread_bw", 1024, 512) == 177839 * KB
    assert not any(m.extra.get("record_size") == 2048 * KB for m in r.metrics)


def test_excel_throughput_report_fills_lost_tests():
    # Lines from the Excel throughput summary of a real `iozone -t 5 ... -R` run (public notes);
    # its "Children see" lines are left out to show the summary standing in for them.
    text = (
        '"Throughput report Y-axis is type of test X-axis is number of processes"\n'
        '"Record size = 4 Kbytes "\n'
        '"Output is in Kbytes/sec"\n\n'
        '"  Initial write "  246059.19 \n\n'
        '"    Random read " 1850449.30 \n\n'
        '" Mixed workload " 1135221.11 \n\n'
        '"   Random write "   88760.41 \n\n'
    )
    r = iozone.parse(text)
    assert r.get("write_bw") == approx(246059.19 * KB)
    assert r.get("randread_bw") == approx(1850449.30 * KB)
    assert r.get("randwrite_bw") == approx(88760.41 * KB)


def test_ops_per_sec_output_is_converted_with_the_record_size():
    # -O lines of a real run with -r 4k (public notes, iozone 3.507): ops are record-size I/Os.
    text = (
        "\tRecord Size 4 kB\n"
        "\tChildren see throughput for 1 re-readers        =    2603.66 ops/sec\n"
        "\tParent sees throughput for 1 re-readers         =    2603.64 ops/sec\n"
    )
    r = iozone.parse(text)
    assert r.get("reread_bw") == approx(2603.66 * 4 * KB)
    assert r.get("reread_bw", "parent") == approx(2603.64 * 4 * KB)


def test_every_iozone_sample_is_covered():
    covered = {
        "iozone-3.247-auto-mode-ext3-2006.txt",
        "iozone-3.420-throughput-t1-write-rewrite-nfs-home.txt",
        "iozone-3.424-throughput-t4-write-read-parent-sees-tabs.txt",
        "iozone-3.465-auto-mode-odirect-srp-xfs.txt",
        "iozone-3.471-distributed-t3-plus-m-C-child-xfer-gpfs.txt",
        "iozone-3.489-auto-mode-100m-excel-report-beegfs.log",
        "iozone-3.489-auto-mode-1m-excel-report-beegfs.log",
    }
    assert set(IOZONE_SAMPLES) == covered


@pytest.mark.parametrize("name", IOZONE_SAMPLES)
def test_every_sample_validates_and_serialises(name):
    r = get_parser("iozone").parse(read_sample(f"iozone/{name}"))
    data = r.to_dict()
    assert data["tool"] == "iozone"
    assert all(m["unit"] in ("B/s", "%") for m in data["metrics"])
    assert r.tool_version and r.command


# --- detection ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", IOZONE_SAMPLES)
def test_detect_own_samples(name):
    assert iozone.detect(read_sample(f"iozone/{name}")) >= 0.8


@pytest.mark.parametrize("name", OTHER_SAMPLES)
def test_detect_low_on_other_tools(name):
    assert iozone.detect(read_sample(name)) < 0.3


# --- errors ------------------------------------------------------------------------------


def test_empty_input_is_a_parse_error():
    for text in ("", "   \n\t\n"):
        with pytest.raises(ParseError, match="empty"):
            iozone.parse(text)


def test_header_only_names_the_header_line(sample):
    text = sample("iozone/iozone-3.465-auto-mode-odirect-srp-xfs.txt")
    header = "\n".join(text.split("\n")[:25]) + "\n"  # up to "File stride size ..."
    with pytest.raises(ParseError, match="IOzone header at line 1 is followed by no results") as e:
        iozone.parse(header)
    assert e.value.line == 1


def test_table_header_without_rows_names_its_line(sample):
    text = sample("iozone/iozone-3.465-auto-mode-odirect-srp-xfs.txt")
    truncated = "\n".join(text.split("\n")[:27]) + "\n"  # ends with the "kB  reclen" line
    with pytest.raises(ParseError, match="table header at line 27 has no data rows") as e:
        iozone.parse(truncated)
    assert e.value.line == 27


def test_throughput_line_cut_before_its_unit_is_not_a_result(sample):
    text = sample("iozone/iozone-3.420-throughput-t1-write-rewrite-nfs-home.txt")
    cut = text[: text.index("363782.66") + 6]  # "... =  363782" without "KB/sec"
    with pytest.raises(ParseError, match="no results"):
        iozone.parse(cut)


def test_truncated_table_keeps_whole_rows_and_drops_a_cut_row(sample):
    text = sample("iozone/iozone-3.247-auto-mode-ext3-2006.txt")
    cut = text[: text.index("303383  913649") + len("303383  913649")]  # row cut after 2 values
    with pytest.raises(ParseError):
        iozone.parse(cut)  # the only row is incomplete: nothing trustworthy is left
    two_rows = text[: text.index("313664 1033216") + len("313664 1033216")]
    r = iozone.parse(two_rows)
    assert cell(r, "write_bw", 64, 4) == 303383 * KB
    assert not any(m.extra.get("record_size") == 8 * KB for m in r.metrics)
    assert r.extra["complete"] is False


def test_other_tools_output_is_a_parse_error(sample):
    with pytest.raises(ParseError):
        iozone.parse(sample("qperf/qperf-tcp_bw-tcp_lat-vm.txt"))


# --- properties --------------------------------------------------------------------------


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(IOZONE_SAMPLES), data=st.data())
def test_truncated_prefixes_parse_or_raise_parse_error(name, data):
    text = read_sample(f"iozone/{name}")
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    check_truncated(iozone.parse, text, cut)


@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_random_text_only_raises_parse_error(text):
    check_only_parse_error(iozone.parse, text)


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(
        alphabet=st.sampled_from(list('0123456789 .\t\n=kKBsec/ChildrensthroughputfrwiIozne:[]"')),
        max_size=400,
    )
)
def test_iozone_like_noise_only_raises_parse_error(text):
    check_only_parse_error(iozone.parse, "\tIozone: Performance Test of File I/O\n" + text)
