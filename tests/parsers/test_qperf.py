"""qperf parser against the real samples in shared/samples/qperf (values read from the files)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runners.parsers import get_parser, qperf
from runners.parsers.base import ParseError
from tests.helpers.samples import SAMPLES, read_sample
from tests.parsers.properties import check_only_parse_error, check_truncated

approx = pytest.approx

QPERF_SAMPLES = sorted(p.name for p in (SAMPLES / "qperf").iterdir())
OTHER_SAMPLES = sorted(
    f"{d.name}/{p.name}"
    for d in SAMPLES.iterdir()
    if d.is_dir() and d.name != "qperf"
    for p in d.iterdir()
)


# --- one test per sample file ------------------------------------------------------------


def test_rc_bw_three_rdma_bandwidth_tests(sample):
    r = qperf.parse(sample("qperf/qperf-rc_bw-rc_rdma_write_bw-rc_rdma_read_bw-ntrdma.txt"))
    assert r.tool == "qperf"
    # qperf's GB/sec is decimal (DESIGN.md)
    assert r.get("rc_bw") == approx(4.67e9)
    assert r.get("rc_rdma_write_bw") == approx(4.67e9)
    assert r.get("rc_rdma_read_bw") == approx(4.62e9)
    assert [m.unit for m in r.metrics] == ["B/s"] * 3
    assert r.params["tests"] == ["rc_bw", "rc_rdma_write_bw", "rc_rdma_read_bw"]


def test_rc_lat_three_rdma_latency_tests(sample):
    r = qperf.parse(sample("qperf/qperf-rc_lat-rc_rdma_write_lat-rc_rdma_read_lat-ntrdma.txt"))
    assert r.get("rc_lat") == approx(12.2e-6)
    assert r.get("rc_rdma_write_lat") == approx(12.8e-6)
    assert r.get("rc_rdma_read_lat") == approx(21.4e-6)
    assert {m.unit for m in r.metrics} == {"s"}


def test_tcp_bw_and_tcp_lat(sample):
    r = qperf.parse(sample("qperf/qperf-tcp_bw-tcp_lat-vm.txt"))
    assert r.get("tcp_bw") == approx(5.78e9)  # "bw  =  5.78 GB/sec"
    assert r.get("tcp_lat") == approx(26.1e-6)  # "latency  =  26.1 us"
    assert len(r.metrics) == 2
    assert r.extra["tests"][0]["fields"]["bw"] == approx(5.78e9)


def test_udp_bw_send_recv_mb_per_sec(sample):
    r = qperf.parse(sample("qperf/qperf-udp_bw-udp_lat-send-recv-vm.txt"))
    # "send_bw  =  846 MB/sec", "recv_bw  =  846 MB/sec" (decimal MB)
    assert r.get("udp_send_bw") == approx(846e6)
    assert r.get("udp_recv_bw") == approx(846e6)
    assert r.get("udp_bw") == approx(846e6)  # udp_bw takes what was received
    assert r.get("udp_lat") == approx(25.8e-6)
    assert r.params["tests"] == ["udp_bw", "udp_lat"]


def test_every_qperf_sample_is_covered():
    covered = {
        "qperf-rc_bw-rc_rdma_write_bw-rc_rdma_read_bw-ntrdma.txt",
        "qperf-rc_lat-rc_rdma_write_lat-rc_rdma_read_lat-ntrdma.txt",
        "qperf-tcp_bw-tcp_lat-vm.txt",
        "qperf-udp_bw-udp_lat-send-recv-vm.txt",
    }
    assert set(QPERF_SAMPLES) == covered


@pytest.mark.parametrize("name", QPERF_SAMPLES)
def test_every_sample_validates_and_serialises(name):
    data = get_parser("qperf").parse(read_sample(f"qperf/{name}")).to_dict()
    assert data["tool"] == "qperf"
    assert data["metrics"] and all(m["stat"] == "value" for m in data["metrics"])


# --- other printed forms -----------------------------------------------------------------


def test_bits_per_sec_verbose_fields_and_version():
    # Real `qperf -vvs --use_bits_per_sec ... tcp_bw tcp_lat` output (public notes), plus the
    # -vc loc_qperf line.
    text = (
        "tcp_bw:\n"
        "    bw          =      968 Mb/sec\n"
        "    msg_rate    =     1.85 K/sec\n"
        "    send_bytes  =     7.26 GB\n"
        "    send_msgs   =  110,808\n"
        "tcp_lat:\n"
        "    latency         =    1.65 ms\n"
        "    msg_rate        =     607 /sec\n"
        "    loc_qperf       =  0.4.9\n"
    )
    r = qperf.parse(text)
    assert r.get("tcp_bw") == approx(968e6 / 8)  # Mb/sec is bits
    assert r.get("tcp_lat") == approx(1.65e-3)
    fields = r.extra["tests"][0]["fields"]
    assert fields["msg_rate"] == approx(1850)
    assert fields["send_bytes"] == approx(7.26e9)
    assert fields["send_msgs"] == 110808
    assert r.tool_version == "0.4.9"


def test_repeated_test_blocks_are_iterations_with_msg_size():
    # Constructed input in qperf's -v layout (no real -oo msg_size sweep sample exists).
    text = (
        "tcp_bw:\n    bw        =  1.1 GB/sec\n    msg_size  =     4 KiB (4,096)\n"
        "tcp_bw:\n    bw        =  2.2 GB/sec\n    msg_size  =    64 KiB (65,536)\n"
    )
    r = qperf.parse(text)
    assert r.get("tcp_bw", iteration=0) == approx(1.1e9)
    assert r.get("tcp_bw", iteration=1) == approx(2.2e9)
    assert r.get("tcp_bw", "max") == approx(2.2e9)
    assert [m.extra.get("msg_size") for m in r.metrics if m.iteration is not None] == [4096, 65536]


def test_indented_paste_is_dedented(sample):
    text = sample("qperf/qperf-tcp_bw-tcp_lat-vm.txt")
    indented = "".join("    " + line for line in text.splitlines(keepends=True))
    assert qperf.parse(indented).get("tcp_bw") == approx(5.78e9)


# --- detection ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", QPERF_SAMPLES)
def test_detect_own_samples(name):
    assert qperf.detect(read_sample(f"qperf/{name}")) >= 0.8


@pytest.mark.parametrize("name", OTHER_SAMPLES)
def test_detect_low_on_other_tools(name):
    assert qperf.detect(read_sample(name)) < 0.3


# --- errors ------------------------------------------------------------------------------


def test_empty_input_is_a_parse_error():
    with pytest.raises(ParseError, match="empty"):
        qperf.parse("")


def test_test_header_without_result_line_names_it(sample):
    with pytest.raises(ParseError, match="'tcp_bw' at line 1 has no readable") as e:
        qperf.parse("tcp_bw:\n")
    assert e.value.line == 1


def test_result_cut_before_its_unit_is_not_a_result(sample):
    text = sample("qperf/qperf-tcp_bw-tcp_lat-vm.txt")
    cut = text[: text.index("5.78") + 4]  # "bw  =  5.78" without "GB/sec"
    with pytest.raises(ParseError, match="no readable bw/latency line"):
        qperf.parse(cut)


def test_truncated_keeps_complete_tests(sample):
    text = sample("qperf/qperf-udp_bw-udp_lat-send-recv-vm.txt")
    r = qperf.parse(text[: text.index("udp_lat:")])
    assert r.get("udp_bw") == approx(846e6)
    with pytest.raises(KeyError):
        r.get("udp_lat")


def test_no_test_block_is_a_parse_error(sample):
    with pytest.raises(ParseError, match="no qperf test block"):
        qperf.parse(sample("iozone/iozone-3.420-throughput-t1-write-rewrite-nfs-home.txt"))


# --- properties --------------------------------------------------------------------------


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(QPERF_SAMPLES), data=st.data())
def test_truncated_prefixes_parse_or_raise_parse_error(name, data):
    text = read_sample(f"qperf/{name}")
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    check_truncated(qperf.parse, text, cut)


@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_random_text_only_raises_parse_error(text):
    check_only_parse_error(qperf.parse, text)


@settings(max_examples=200, deadline=None)
@given(
    body=st.text(alphabet=st.sampled_from(list("0123456789., =KMGTBbitsecyu/%()\n ")), max_size=120)
)
def test_qperf_like_noise_only_raises_parse_error(body):
    check_only_parse_error(qperf.parse, "tcp_bw:\n    bw  =  " + body)
