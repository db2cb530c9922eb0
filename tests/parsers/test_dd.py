"""dd parser: every sample under shared/samples/dd, direction, detection, errors, robustness."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runners.parsers import dd, elbencho, fio, parse, parse_parts
from runners.parsers.base import ParseError
from tests.helpers.samples import SAMPLES, read_sample

MIB = 1024**2

DD_SAMPLES = sorted(p.name for p in (SAMPLES / "dd").iterdir())
OTHER_SAMPLES = sorted(
    f"{tool}/{p.name}" for tool in ("fio", "elbencho") for p in (SAMPLES / tool).iterdir()
)


def test_new_coreutils_format_with_gib(sample):
    r = dd.parse(sample("dd/dd-bs1G-count1-beegfs-buddymirror-dir.txt"))
    # "1073741824 bytes (1.1 GB, 1.0 GiB) copied, 1.59144 s, 675 MB/s"
    assert r.get("bw") == pytest.approx(1073741824 / 1.59144)
    assert r.get("bw") == pytest.approx(675e6, rel=1e-3)  # what dd printed, rounded
    assert r.get("elapsed") == pytest.approx(1.59144)
    assert r.extra["printed_rate"] == pytest.approx(675e6)
    assert r.extra["human_size"] == "1.1 GB, 1.0 GiB"
    assert r.extra["records_in"] == "1+0"
    assert r.extra["records_out"] == "1+0"
    assert r.params["aggregate_size"] == 1073741824
    assert r.params["block_size"] == 1073741824
    assert r.params["transfer_size"] == 1073741824  # one full record of 1073741824 bytes
    assert r.params["threads"] == 1
    with pytest.raises(KeyError):
        r.get("write_bw")  # direction unknown: the command line is not in the output


def test_status_progress_final_summary_is_the_result(sample):
    r = dd.parse(sample("dd/dd-oflag-direct-4M-status-progress-issue75.txt"))
    # final: "10737418240 bytes (11 GB, 10 GiB) copied, 5.5149 s, 1.9 GB/s"
    assert r.get("bw") == pytest.approx(10737418240 / 5.5149)
    assert r.get("bw") == pytest.approx(1.9e9, rel=0.05)  # dd rounds to two digits
    assert r.get("elapsed") == pytest.approx(5.5149)
    assert r.params["aggregate_size"] == 10737418240
    assert r.params["transfer_size"] == 4 * MIB  # 2560 records for 10737418240 bytes
    # the earlier progress line "9739173888 bytes (9.7 GB, 9.1 GiB) copied, 5 s, 1.9 GB/s"
    assert r.extra["progress"] == [{"bytes": 9739173888, "seconds": 5.0, "rate": 1.9e9}]
    assert r.extra["records_out"] == "2560+0"


def test_status_progress_with_carriage_returns(sample):
    text = sample("dd/dd-oflag-direct-4M-status-progress-issue75.txt")
    first, rest = text.split("\n", 1)
    # dd rewrites the progress line in place with "\r"; the newline comes only at the end
    raw = "1048576 bytes (1.0 MB, 1.0 MiB) copied, 1 s, 1.0 MB/s\r" + first + "\r\n" + rest
    r = dd.parse(raw)
    assert r.get("elapsed") == pytest.approx(5.5149)
    assert len(r.extra["progress"]) == 2


def test_old_coreutils_read_to_dev_null(sample):
    text = sample("dd/dd-old-coreutils-1G-read-to-dev-null-no-GiB.txt")
    r = dd.parse(text)
    # "1073741824 bytes (1.1 GB) copied, 12.4397 s, 86.3 MB/s"
    assert r.get("bw") == pytest.approx(1073741824 / 12.4397)
    assert r.get("bw") == pytest.approx(86.3e6, rel=1e-3)
    assert r.get("elapsed") == pytest.approx(12.4397)
    assert r.extra["human_size"] == "1.1 GB"
    assert r.params["transfer_size"] == MIB  # 1024+0 records
    # the sample is a read into /dev/null: the caller may say so …
    r = dd.parse(text, op="read")
    assert r.get("read_bw") == pytest.approx(1073741824 / 12.4397)
    assert r.params["rw"] == "read"
    # … or the command line in the output does
    r = dd.parse("# dd if=/mnt/beegfs/big of=/dev/null bs=1M\n" + text)
    assert r.get("read_bw") == pytest.approx(86.3e6, rel=1e-3)
    assert r.command == "dd if=/mnt/beegfs/big of=/dev/null bs=1M"


def test_old_coreutils_write_from_dev_zero(sample):
    text = sample("dd/dd-old-coreutils-1G-write-dev-zero-no-GiB.txt")
    r = dd.parse(text)
    # "1073741824 bytes (1.1 GB) copied, 7.11324 s, 151 MB/s"
    assert r.get("bw") == pytest.approx(1073741824 / 7.11324)
    assert r.get("bw") == pytest.approx(151e6, rel=1e-3)
    assert r.get("elapsed") == pytest.approx(7.11324)
    r = dd.parse(text, command="dd if=/dev/zero of=/mnt/test bs=1M count=1024 oflag=direct")
    assert r.get("write_bw") == pytest.approx(1073741824 / 7.11324)
    assert r.params["direct"] is True
    assert r.params["transfer_size"] == MIB  # bs=1M
    assert r.extra["count"] == "1024"
    r = dd.parse(text, op="write")
    assert r.get("write_bw") == pytest.approx(151e6, rel=1e-3)


def test_direction_rules():
    text = "1+0 records in\n1+0 records out\n1000 bytes (1.0 kB) copied, 0.5 s, 2.0 kB/s\n"
    assert dd.parse(text, command=["dd", "if=/dev/zero", "of=/dev/null"]).get("bw") == 2000
    assert dd.parse(text, command="dd if=/dev/urandom of=/x").get("write_bw") == 2000
    assert dd.parse(text, command="dd if=/x of=/dev/null").get("read_bw") == 2000
    # bs=1kB is decimal for dd, bs=1K binary, bs=2b counts 512-byte blocks
    assert dd.parse(text, command="dd bs=1kB if=/x").params["transfer_size"] == 1000
    assert dd.parse(text, command="dd bs=1K if=/x").params["transfer_size"] == 1024
    assert dd.parse(text, command="dd bs=2b if=/x").params["transfer_size"] == 1024
    with pytest.raises(ParseError, match="op must be"):
        dd.parse(text, op="sideways")


def test_bsd_and_busybox_summaries():
    bsd = (
        "1+0 records in\n1+0 records out\n"
        "1048576 bytes transferred in 0.5 secs (2097152 bytes/sec)\n"
    )
    assert dd.parse(bsd).get("bw") == pytest.approx(2097152)
    busybox = (
        "1+0 records in\n1+0 records out\n1048576 bytes (1.0MB) copied, 0.5 seconds, 2.1MB/s\n"
    )
    assert dd.parse(busybox).get("elapsed") == pytest.approx(0.5)


def test_several_runs(sample):
    one = sample("dd/dd-old-coreutils-1G-write-dev-zero-no-GiB.txt")
    two = sample("dd/dd-old-coreutils-1G-read-to-dev-null-no-GiB.txt")
    results = dd.parse_many(one + two)
    assert [r.get("elapsed") for r in results] == [pytest.approx(7.11324), pytest.approx(12.4397)]
    last = dd.parse(one + two)
    assert last.get("elapsed") == pytest.approx(12.4397)
    assert last.extra["other_runs"] == 1


@pytest.mark.parametrize("name", DD_SAMPLES)
def test_output_of_one_invocation_is_one_part(sample, name):
    parts = dd.parse_parts(sample(f"dd/{name}"))
    assert len(parts) == 1
    assert "part" not in parts[0].extra


def test_progress_line_is_not_a_part_of_its_own(sample):
    (part,) = dd.parse_parts(sample("dd/dd-oflag-direct-4M-status-progress-issue75.txt"))
    # "10737418240 bytes (11 GB, 10 GiB) copied, 5.5149 s, 1.9 GB/s" after "2560+0 records out"
    assert part.get("elapsed") == pytest.approx(5.5149)
    assert part.get("bw") == pytest.approx(10737418240 / 5.5149)
    assert part.params["transfer_size"] == 4 * MIB  # 10737418240 bytes / 2560 records


def test_several_invocations_are_one_part_each(sample):
    # No sample holds two dd invocations: two real outputs appended, as `2>>log` would.
    one = sample("dd/dd-bs1G-count1-beegfs-buddymirror-dir.txt")
    two = sample("dd/dd-old-coreutils-1G-write-dev-zero-no-GiB.txt")
    parts = dd.parse_parts(one + two)
    assert [p.extra["part"] for p in parts] == [
        {"index": 0, "count": 2, "kind": "run", "label": "run 1"},
        {"index": 1, "count": 2, "kind": "run", "label": "run 2"},
    ]
    # "1+0 records out" / "1073741824 bytes (1.1 GB, 1.0 GiB) copied, 1.59144 s, 675 MB/s"
    assert parts[0].get("elapsed") == pytest.approx(1.59144)
    assert parts[0].get("bw") == pytest.approx(1073741824 / 1.59144)
    assert parts[0].params["transfer_size"] == 1024 * MIB
    assert parts[0].extra["records_out"] == "1+0"
    # "1024+0 records out" / "1073741824 bytes (1.1 GB) copied, 7.11324 s, 151 MB/s"
    assert parts[1].get("elapsed") == pytest.approx(7.11324)
    assert parts[1].get("bw") == pytest.approx(1073741824 / 7.11324)
    assert parts[1].params["transfer_size"] == MIB
    assert parts[1].extra["records_out"] == "1024+0"
    # the dispatcher: parts, and part=N the N-th
    assert len(parse_parts(one + two, "dd")) == 2
    assert parse(one + two, "dd", part=0).get("elapsed") == pytest.approx(1.59144)


# --- detection and errors --------------------------------------------------------------------


@pytest.mark.parametrize("name", DD_SAMPLES)
def test_detect_own_samples_high(name):
    assert dd.detect(read_sample(f"dd/{name}")) >= 0.9


@pytest.mark.parametrize("name", OTHER_SAMPLES)
def test_detect_other_tools_low(name):
    assert dd.detect(read_sample(name)) < 0.3


@pytest.mark.parametrize("name", DD_SAMPLES)
def test_dd_samples_are_not_taken_for_fio_or_elbencho(name):
    text = read_sample(f"dd/{name}")
    assert fio.detect(text) < 0.3
    assert elbencho.detect(text) < 0.3


def test_empty_output():
    with pytest.raises(ParseError, match="empty"):
        dd.parse("")
    with pytest.raises(ParseError, match="empty"):
        dd.parse_many("\n\n")


def test_records_without_summary_names_the_line(sample):
    text = sample("dd/dd-bs1G-count1-beegfs-buddymirror-dir.txt")
    head = "\n".join(text.splitlines()[:2]) + "\n"  # "1+0 records in", "1+0 records out"
    with pytest.raises(ParseError) as err:
        dd.parse(head)
    assert err.value.line == 2
    assert "no 'bytes … copied' summary" in str(err.value)


def test_summary_cut_mid_line(sample):
    text = sample("dd/dd-old-coreutils-1G-write-dev-zero-no-GiB.txt")
    with pytest.raises(ParseError) as err:
        dd.parse(text[: text.index(" copied")])
    assert err.value.line == 2


def test_unrelated_text():
    with pytest.raises(ParseError, match="no dd"):
        dd.parse("nothing to see here\n")


# --- robustness ------------------------------------------------------------------------------

ALL_SAMPLES = [f"dd/{n}" for n in DD_SAMPLES] + OTHER_SAMPLES


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(ALL_SAMPLES), cut=st.floats(min_value=0.0, max_value=1.0))
def test_truncated_prefixes_raise_only_parse_error(name, cut):
    text = read_sample(name)
    try:
        result = dd.parse(text[: int(len(text) * cut)])
    except ParseError:
        return
    assert result.metrics


@settings(max_examples=200, deadline=None)
@given(text=st.text())
def test_random_text_raises_only_parse_error(text):
    assert 0.0 <= dd.detect(text) <= 1.0
    try:
        dd.parse(text)
    except ParseError:
        pass


@settings(max_examples=200, deadline=None)
@given(
    nbytes=st.sampled_from(["0", "1", "9" * 400, "1073741824"]),
    secs=st.sampled_from(["0", "0.0", "1e999", "12.4397", "9" * 400, "1,5"]),
    rate=st.sampled_from(["0", "Infinity", "86.3", "9" * 400, "1e999"]),
    unit=st.sampled_from(["B/s", "kB/s", "MB/s", "GB/s", "MiB/s"]),
)
def test_hostile_numbers_raise_only_parse_error(nbytes, secs, rate, unit):
    text = (
        f"1+0 records in\n1+0 records out\n{nbytes} bytes (1 GB) copied, {secs} s, {rate} {unit}\n"
    )
    try:
        dd.parse(text)
    except ParseError:
        pass
