"""perftest parser against the real samples in shared/samples/perftest (values from the files)."""

from __future__ import annotations

from statistics import fmean

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runners.parsers import get_parser, perftest
from runners.parsers.base import ParseError
from tests.helpers.samples import SAMPLES, read_sample
from tests.parsers.properties import check_only_parse_error, check_truncated

GBIT = 1e9 / 8  # perftest --report_gbits: Gb/sec = 125,000,000 B/s
MB = 2**20  # perftest MB/sec (and MiB/sec): format_factor 0x100000
approx = pytest.approx

PERFTEST_SAMPLES = sorted(p.name for p in (SAMPLES / "perftest").iterdir())
OTHER_SAMPLES = sorted(
    f"{d.name}/{p.name}"
    for d in SAMPLES.iterdir()
    if d.is_dir() and d.name != "perftest"
    for p in d.iterdir()
)

LINK1_AVG = [92.57, 92.57, 92.57, 92.56, 92.57]  # "BW average[Gb/sec]" column of link1
LINK2_AVG = [97.28, 97.28, 97.28, 97.28, 97.29, 97.28]  # ... of link2


# --- one test per sample file ------------------------------------------------------------


def test_post_list_8b_tab_separated_header(sample):
    r = perftest.parse(sample("perftest/ib_write_bw-post-list-8B-60s-gbits-tabs-issue273.txt"))
    assert r.tool == "perftest"
    # " 8          224958464        0.00               0.48   \t\t   7.498617"
    assert r.get("ib_write_bw") == approx(0.48 * GBIT)
    assert r.get("ib_write_msg_rate") == approx(7.498617e6)
    with pytest.raises(KeyError):
        r.get("ib_write_bw", "max")  # BW peak printed as 0.00: not measured
    assert r.params["transfer_size"] == 8
    assert r.params["test"] == "ib_write_bw"
    # header fields, some tab-separated: "Dual-port : OFF\t\tDevice : ib0"
    assert r.params["device"] == "ib0"
    assert r.params["post_list"] == 128
    assert r.params["tx_depth"] == 256
    assert r.params["mtu"] == 4096
    assert r.params["transport"] == "IB"
    assert r.params["connection"] == "RC"
    assert r.extra["header"]["rdma_cm_qps"] is False
    assert r.extra["header"]["pcie_relax_order"] == "Unsupported"
    assert r.extra["rows"][0]["iterations"] == 224958464
    assert r.extra["title"] == "RDMA_Write Post List BW Test"


def test_run_infinitely_link1_rows_mean_last_min_max(sample):
    r = perftest.parse(
        sample("perftest/ib_write_bw-roce-run_infinitely-report_gbits-dgx-spark-link1.txt")
    )
    for i, avg in enumerate(LINK1_AVG):
        assert r.get("ib_write_bw", iteration=i) == approx(avg * GBIT)
    assert r.get("ib_write_bw") == approx(92.57 * GBIT)  # last row is the value
    assert r.get("ib_write_bw", "mean") == approx(fmean(LINK1_AVG) * GBIT)
    assert r.get("ib_write_bw", "min") == approx(92.56 * GBIT)
    assert r.get("ib_write_bw", "max") == approx(92.57 * GBIT)
    # MsgRate column: 0.176554 0.176554 0.176554 0.176552 0.176555
    assert r.get("ib_write_msg_rate") == approx(0.176555e6)
    assert r.get("ib_write_msg_rate", "min") == approx(0.176552e6)
    assert r.params["run_infinitely"] is True
    assert r.params["device"] == "rocep1s0f0"
    assert r.params["transfer_size"] == 65536
    assert r.extra["warnings"] == ["WARNING: BW peak won't be measured in this run."]
    assert r.extra["peak_measured"] is False
    assert [row["iterations"] for row in r.extra["rows"]] == [
        882805, 882802, 882791, 882791, 882821,
    ]  # fmt: skip


def test_run_infinitely_link2_leading_space_warning(sample):
    r = perftest.parse(
        sample("perftest/ib_write_bw-roce-run_infinitely-report_gbits-dgx-spark-link2.txt")
    )
    assert len([m for m in r.metrics if m.name == "ib_write_bw" and m.iteration is not None]) == 6
    assert r.get("ib_write_bw", iteration=4) == approx(97.29 * GBIT)
    assert r.get("ib_write_bw") == approx(97.28 * GBIT)
    assert r.get("ib_write_bw", "mean") == approx(fmean(LINK2_AVG) * GBIT)
    assert r.get("ib_write_bw", "max") == approx(97.29 * GBIT)
    assert r.get("ib_write_msg_rate", iteration=0) == approx(0.185548e6)
    assert r.params["device"] == "roceP2p1s0f0"
    assert r.params["mtu"] == 1024
    assert r.params["tx_depth"] == 128
    assert r.extra["header"]["gid_index"] == 3
    assert r.extra["warnings"] == ["WARNING: BW peak won't be measured in this run."]


def test_every_perftest_sample_is_covered():
    covered = {
        "ib_write_bw-post-list-8B-60s-gbits-tabs-issue273.txt",
        "ib_write_bw-roce-run_infinitely-report_gbits-dgx-spark-link1.txt",
        "ib_write_bw-roce-run_infinitely-report_gbits-dgx-spark-link2.txt",
    }
    assert set(PERFTEST_SAMPLES) == covered


@pytest.mark.parametrize("name", PERFTEST_SAMPLES)
def test_every_sample_validates_and_serialises(name):
    data = get_parser("perftest").parse(read_sample(f"perftest/{name}")).to_dict()
    assert data["tool"] == "perftest"
    assert {m["unit"] for m in data["metrics"]} == {"B/s", "op/s"}


# --- other printed forms -----------------------------------------------------------------

# Rows of a real `-a` sweep without --report_gbits (public issue); the test name line was
# not part of the excerpt.
SWEEP = (
    " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
    " 2          50000            0.00               10.43                5.467546\n"
    " 4          50000            0.00               20.74                5.437201\n"
    " 8          50000            0.00               41.68                5.462932\n"
)


def test_mb_per_sec_sweep_rows_carry_msg_size():
    r = perftest.parse(SWEEP, test="ib_send_bw")
    sizes = {m.extra["msg_size"]: m.value for m in r.metrics if m.name == "ib_send_bw" and m.extra}
    assert sizes == {2: approx(10.43 * MB), 4: approx(20.74 * MB), 8: approx(41.68 * MB)}
    assert r.get("ib_send_bw", "max") == approx(41.68 * MB)
    assert r.get("ib_send_msg_rate", "max") == approx(5.467546e6)
    assert "transfer_size" not in r.params


def test_table_without_test_name_needs_the_test_option():
    with pytest.raises(ParseError, match="cannot tell which perftest ran") as e:
        perftest.parse(SWEEP)
    assert e.value.line == 1


def test_latency_output_is_refused():
    # Title and table header of a real ib_write_lat run (public notes; rows not quoted).
    text = (
        "                    RDMA_Write Latency Test\n"
        " #bytes        #iterations       t_avg[usec]    t_stdev[usec]\n"
    )
    with pytest.raises(ParseError, match="latency") as e:
        perftest.parse(text)
    assert e.value.line == 2


# --- detection ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", PERFTEST_SAMPLES)
def test_detect_own_samples(name):
    assert perftest.detect(read_sample(f"perftest/{name}")) >= 0.8


@pytest.mark.parametrize("name", OTHER_SAMPLES)
def test_detect_low_on_other_tools(name):
    assert perftest.detect(read_sample(name)) < 0.3


# --- errors ------------------------------------------------------------------------------


def test_empty_input_is_a_parse_error():
    with pytest.raises(ParseError, match="empty"):
        perftest.parse("\n\n")


def test_header_only_names_the_test_line(sample):
    text = sample("perftest/ib_write_bw-post-list-8B-60s-gbits-tabs-issue273.txt")
    header = "".join(text.splitlines(keepends=True)[:16])  # title .. dashes before the table
    with pytest.raises(ParseError, match="no result table .* after the test header at line 1"):
        perftest.parse(header)


def test_table_header_without_rows_names_its_line(sample):
    text = sample("perftest/ib_write_bw-roce-run_infinitely-report_gbits-dgx-spark-link1.txt")
    truncated = "".join(text.splitlines(keepends=True)[:23])  # ends with the "#bytes" line
    with pytest.raises(ParseError, match="table header at line 23 has no data rows") as e:
        perftest.parse(truncated)
    assert e.value.line == 23


def test_row_cut_before_msg_rate_is_dropped(sample):
    text = sample("perftest/ib_write_bw-roce-run_infinitely-report_gbits-dgx-spark-link2.txt")
    cut = text[: text.index("97.29") + len("97.29")]  # 5th row without its MsgRate
    r = perftest.parse(cut)
    assert len([m for m in r.metrics if m.name == "ib_write_bw" and m.iteration is not None]) == 4
    assert r.get("ib_write_bw") == approx(97.28 * GBIT)


# --- properties --------------------------------------------------------------------------


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(PERFTEST_SAMPLES), data=st.data())
def test_truncated_prefixes_parse_or_raise_parse_error(name, data):
    text = read_sample(f"perftest/{name}")
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    check_truncated(perftest.parse, text, cut)


@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_random_text_only_raises_parse_error(text):
    check_only_parse_error(perftest.parse, text)


@settings(max_examples=200, deadline=None)
@given(rows=st.text(alphabet=st.sampled_from(list("0123456789. \t\n")), max_size=200))
def test_table_like_noise_only_raises_parse_error(rows):
    check_only_parse_error(
        perftest.parse, "RDMA_Read BW Test\n" + SWEEP.split("\n")[0] + "\n" + rows
    )
