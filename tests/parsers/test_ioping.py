"""ioping parser: real ioping 1.3 outputs (fixtures/ioping/README.md gives each command) in its
normal, raw (-B, -p) and JSON (-J) formats; detection, errors, robustness."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runners.parsers import detect_tool, ioping, parse
from runners.parsers.base import ParseError
from tests.helpers.samples import SAMPLES, metric
from tests.parsers.properties import check_mangled, check_truncated

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "ioping"
MIB = 2**20
US = 1e-6
NS = 1e-9


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_normal_output_direct_read():
    r = parse(fixture("read_direct.txt"), tool="ioping")
    # "19 requests completed in 1.60 ms, 76 KiB read, 11.9 k iops, 46.4 MiB/s"
    # "generated 20 requests in 1.70 ms, 80 KiB, 11.7 k iops, 45.8 MiB/s"
    # "min/avg/max/mdev = 34.3 us / 84.2 us / 933.9 us / 200.3 us"
    assert metric(r, "read_lat", "mean") == pytest.approx(84.2 * US)
    assert metric(r, "read_lat", "min") == pytest.approx(34.3 * US)
    assert metric(r, "read_lat", "max") == pytest.approx(933.9 * US)
    assert metric(r, "read_lat", "stddev") == pytest.approx(200.3 * US)
    assert metric(r, "read_iops") == pytest.approx(11900)
    assert metric(r, "read_bw") == pytest.approx(46.4 * MIB)
    assert metric(r, "elapsed") == pytest.approx(1.70e-3)
    # Percentiles of the 19 valid request lines (request 1 is the warmup, 38.3 us … 37.6 us):
    # p50 is the 10th smallest (36.4 us), p90 the 18th (51.5 us); 19 requests give no p99.
    assert metric(r, "read_lat", "p50") == pytest.approx(36.4 * US)
    assert metric(r, "read_lat", "p90") == pytest.approx(51.5 * US)
    assert not [m for m in r.metrics if m.stat == "p99"]
    assert r.params == {"rw": "read", "transfer_size": 4096, "threads": 1, "count": 20}
    assert r.extra["target"] == {"path": "bench", "fstype": "ext4", "device": "/dev/vda"}
    assert r.extra["valid_requests"] == 19
    assert r.extra["ignored_requests"] == [1]
    units = {"read_lat": "s", "read_iops": "op/s", "read_bw": "B/s", "elapsed": "s"}
    assert all(m.unit == units[m.name] for m in r.metrics)
    assert {m.name for m in r.metrics} == {"read_lat", "read_iops", "read_bw", "elapsed"}


def test_normal_output_cached_read_with_a_slow_request():
    r = ioping.parse(fixture("read_cached.txt"))
    # "19 requests completed in 8.19 ms, 76 KiB read, 2.32 k iops, 9.06 MiB/s"
    # "min/avg/max/mdev = 56.4 us / 431.2 us / 6.98 ms / 1.54 ms"; request 15 "6.98 ms (slow)"
    assert metric(r, "read_lat", "mean") == 431.2e-6  # read as decimals, not 0.00043119999…
    assert metric(r, "read_lat", "max") == pytest.approx(6.98e-3)
    assert metric(r, "read_lat", "stddev") == pytest.approx(1.54e-3)
    assert metric(r, "read_iops") == pytest.approx(2320)
    assert metric(r, "read_bw") == pytest.approx(9.06 * MIB)
    assert metric(r, "elapsed") == pytest.approx(8.51e-3)
    assert r.extra["ignored_requests"] == [1]  # "(slow)" and "(fast)" requests count


def test_normal_output_write_64k():
    r = ioping.parse(fixture("write_direct_64k.txt"))
    # ">>>" requests; "9 requests completed in 684.6 us, 576 KiB written, 13.1 k iops,
    # 821.7 MiB/s"; "min/avg/max/mdev = 71.4 us / 76.1 us / 86.7 us / 4.52 us"
    assert metric(r, "write_lat", "mean") == pytest.approx(76.1 * US)
    assert metric(r, "write_lat", "min") == pytest.approx(71.4 * US)
    assert metric(r, "write_lat", "max") == pytest.approx(86.7 * US)
    assert metric(r, "write_lat", "stddev") == pytest.approx(4.52 * US)
    assert metric(r, "write_iops") == pytest.approx(13100)
    assert metric(r, "write_bw") == pytest.approx(821.7 * MIB)
    assert r.params["rw"] == "write" and r.params["transfer_size"] == 64 * 1024
    assert not [m for m in r.metrics if m.name.startswith("read_")]


def test_json_read_exact_nanoseconds():
    r = parse(fixture("read_direct.json"), tool="ioping")
    # final "stat": count 7, time 552722, iops 12664.594498, bps 51874179, min 60991,
    # avg 78960, max 125066, mdev 20118; "load": count 8, time 1081049
    assert metric(r, "read_lat", "mean") == pytest.approx(78960 * NS)
    assert metric(r, "read_lat", "min") == pytest.approx(60991 * NS)
    assert metric(r, "read_lat", "max") == pytest.approx(125066 * NS)
    assert metric(r, "read_lat", "stddev") == pytest.approx(20118 * NS)
    assert metric(r, "read_iops") == pytest.approx(12664.594498)
    assert metric(r, "read_bw") == pytest.approx(51874179)
    assert metric(r, "elapsed") == pytest.approx(1081049 * NS)
    # valid request times 125066, 85247, 75853, 66408, 60991, 70515, 68642 ns: p50 = 70515
    assert metric(r, "read_lat", "p50") == pytest.approx(70515 * NS)
    assert r.params == {"rw": "read", "transfer_size": 4096, "threads": 1, "count": 8}
    assert r.extra["format"] == "json"
    assert r.extra["ignored_requests"] == [1]


def test_json_percentiles_over_120_requests():
    r = ioping.parse(fixture("read_direct_120.json"))
    # stat: count 119, avg 403980, min 69854, max 15387242 ns; the 119 valid times sorted:
    # 60th = 90946 (p50), 108th = 180849 (p90), 118th = 13864907 (p99)
    assert metric(r, "read_lat", "mean") == pytest.approx(403980 * NS)
    assert metric(r, "read_lat", "p50") == pytest.approx(90946 * NS)
    assert metric(r, "read_lat", "p90") == pytest.approx(180849 * NS)
    assert metric(r, "read_lat", "p99") == pytest.approx(13864907 * NS)
    assert metric(r, "read_iops") == pytest.approx(2475.367184)
    assert r.params["count"] == 120


def test_json_write():
    r = ioping.parse(fixture("write_direct.json"))
    # "operation": "write"; stat: count 9, iops 5080.159269, bps 20808332, avg 196844 ns
    assert metric(r, "write_lat", "mean") == pytest.approx(196844 * NS)
    assert metric(r, "write_iops") == pytest.approx(5080.159269)
    assert metric(r, "write_bw") == pytest.approx(20808332)
    assert r.params["rw"] == "write"
    # JSON states the operation: a contradicting op option does not override it.
    assert ioping.parse(fixture("write_direct.json"), op="read").params["rw"] == "write"


def test_batch_raw_line():
    r = parse(fixture("read_direct_batch.txt"), tool="ioping")
    # "19 1083608 17534 71819329 51076 57032 64176 4236 20 1224332"
    assert metric(r, "read_lat", "mean") == pytest.approx(57032 * NS)
    assert metric(r, "read_lat", "min") == pytest.approx(51076 * NS)
    assert metric(r, "read_lat", "max") == pytest.approx(64176 * NS)
    assert metric(r, "read_lat", "stddev") == pytest.approx(4236 * NS)
    assert metric(r, "read_iops") == 17534
    assert metric(r, "read_bw") == 71819329
    assert metric(r, "elapsed") == pytest.approx(1224332 * NS)
    assert r.params == {"rw": "read", "transfer_size": 4096, "threads": 1, "count": 20}
    # Raw lines do not say the operation: op tells it.
    w = ioping.parse(fixture("read_direct_batch.txt"), op="write")
    assert metric(w, "write_lat", "mean") == pytest.approx(57032 * NS)


def test_batch_with_intervals_takes_the_last_line_as_the_run():
    r = ioping.parse(fixture("read_direct_batch_print4.txt"))
    # intervals "4 523790 7637 …" and "4 2891183 1384 …", then the run:
    # "10 3576945 2796 11451113 55042 357694 2711225 786479 11 5262353"
    assert metric(r, "read_lat", "mean") == pytest.approx(357694 * NS)
    assert metric(r, "read_iops") == 2796
    assert r.extra["valid_requests"] == 10
    assert [i["requests"] for i in r.extra["intervals"]] == [4, 4]


def test_quiet_intervals_are_merged_into_the_run():
    r = ioping.parse(fixture("read_direct_quiet_print4.txt"))
    # three intervals of 4 valid requests; summed times 995622 + 207929 + 183182 ns
    assert r.extra["format"] == "raw intervals"
    assert r.extra["valid_requests"] == 12
    assert metric(r, "read_lat", "mean") == pytest.approx(1386733 / 12 * NS)
    assert metric(r, "read_iops") == pytest.approx(12 / (1386733 * NS))
    assert metric(r, "read_lat", "min") == pytest.approx(43004 * NS)
    assert metric(r, "read_lat", "max") == pytest.approx(801193 * NS)
    assert metric(r, "read_bw") == pytest.approx(12 / (1386733 * NS) * 4096)
    assert r.params["count"] == 13 and r.params["transfer_size"] == 4096


def test_requests_with_interval_lines_between_them():
    r = ioping.parse(fixture("read_direct_print4.txt"))
    # "12 requests completed in 2.19 ms, 48 KiB read, 5.47 k iops, 21.4 MiB/s"
    # "min/avg/max/mdev = 37.0 us / 182.7 us / 1.70 ms / 458.4 us"
    assert metric(r, "read_lat", "mean") == pytest.approx(182.7 * US)
    assert metric(r, "read_lat", "max") == pytest.approx(1.70e-3)
    assert metric(r, "read_iops") == pytest.approx(5470)
    assert [i["requests"] for i in r.extra["intervals"]] == [4, 4, 4]


def test_statistics_cut_off_fall_back_to_the_request_lines():
    text = fixture("read_direct.txt").split("\n---")[0]
    r = ioping.parse(text)
    assert r.extra["computed_from_requests"] is True
    assert metric(r, "read_lat", "min") == pytest.approx(34.3 * US)
    assert metric(r, "read_lat", "max") == pytest.approx(933.9 * US)
    assert r.params["count"] == 20


def test_read_write_mode_splits_by_request():
    r = ioping.parse(fixture("read_write_direct.txt"))
    # ioping -G alternates: odd requests write (">>>"), even ones read ("<<<"); the summary
    # ("6 requests completed in 12.3 ms, 24 KiB, 487 iops") mixes both, so each operation is
    # read from its own requests. Reads: 68.0 us, 3.71 ms, 81.6 us; writes (request 1 is the
    # warmup): 3.96 ms, 4.08 ms, 412.3 us.
    assert r.params["rw"] == "readwrite"
    assert metric(r, "read_lat", "mean") == pytest.approx((68.0e-6 + 3.71e-3 + 81.6e-6) / 3)
    assert metric(r, "read_lat", "min") == pytest.approx(68.0 * US)
    assert metric(r, "write_lat", "max") == pytest.approx(4.08e-3)
    assert metric(r, "write_lat", "min") == pytest.approx(412.3 * US)
    assert metric(r, "write_iops") == pytest.approx(3 / (3.96e-3 + 4.08e-3 + 412.3e-6))
    assert metric(r, "elapsed") == pytest.approx(22.2e-3)
    assert r.extra["ignored_requests"] == [1]


def test_detection():
    for name in sorted(p.name for p in FIXTURES.iterdir() if p.suffix != ".md"):
        assert detect_tool(fixture(name)) == "ioping", name
    assert ioping.detect("") == 0.0
    assert ioping.detect("hello\n1 2 3\n") == 0.0


OTHER_SAMPLES = sorted(p for p in SAMPLES.rglob("*") if p.is_file() and p.suffix != ".md")


@pytest.mark.parametrize("path", OTHER_SAMPLES, ids=lambda p: str(p.relative_to(SAMPLES)))
def test_other_tools_outputs_are_not_ioping(path):
    assert ioping.detect(path.read_text(encoding="utf-8", errors="replace")) == 0.0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("   ", "empty"),
        ('ioping: stat "/nope" failed: No such file or directory\n', "no ioping statistics"),
        ('[{"target": {"fstype": "ext4"}, "io": {', "not valid JSON"),
        ("19 1083608 17534 71819329 51076 90000 64176 4236 20 1224332\n", "out of order"),
        ("19 1083608 99999 71819329 51076 57032 64176 4236 20 1224332\n", "disagree"),
        ("0 0 0 0 0 0 0 0 20 1224332\n", "no valid request"),
        (fixture("read_direct.txt").replace("min/avg/max/mdev", "mdev"), "cut off"),
    ],
)
def test_errors(text, message):
    with pytest.raises(ParseError, match=message):
        ioping.parse(text)


def test_op_must_be_read_or_write():
    with pytest.raises(ParseError, match="op must be"):
        ioping.parse(fixture("read_direct_batch.txt"), op="trim")


ALL = [fixture(p.name) for p in sorted(FIXTURES.iterdir()) if p.suffix != ".md"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(index=st.integers(0, len(ALL) - 1), cut=st.integers(0, 4000))
def test_truncated_outputs_raise_only_parse_errors(index, cut):
    check_truncated(ioping.parse, ALL[index], cut, needs_metrics=True)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(index=st.integers(0, len(ALL) - 1), data=st.data())
def test_mangled_numbers_raise_only_parse_errors(index, data):
    check_mangled(ioping.parse, ALL[index], data)
