"""StorageBench parser against the real samples in shared/samples/beegfs (values from the files)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runners.parsers import get_parser, storagebench
from runners.parsers.base import ParseError
from tests.helpers.samples import SAMPLES, read_sample
from tests.parsers.properties import check_only_parse_error, check_truncated

KIB = 1024  # beegfs-ctl prints KiB/s
approx = pytest.approx

SB_SAMPLES = sorted(p.name for p in (SAMPLES / "beegfs").iterdir() if "storagebench" in p.name)
OTHER_SAMPLES = sorted(
    f"{d.name}/{p.name}"
    for d in SAMPLES.iterdir()
    if d.is_dir()
    for p in d.iterdir()
    if "storagebench" not in p.name
)


def per_target(result, name):
    return {
        m.extra["target"]: (m.value, m.extra["node"], m.extra["node_id"])
        for m in result.metrics
        if m.name == name and "target" in m.extra
    }


# --- one test per sample file ------------------------------------------------------------


def test_read_status_verbose_10_targets(sample):
    r = storagebench.parse(sample("beegfs/storagebench-status-verbose-read-10targets-usc.txt"))
    assert r.tool == "storagebench"
    # "Aggregate throughput:     24452273  KiB/s"
    assert r.get("read_bw") == 24452273 * KIB
    assert r.get("read_bw", "min") == 2342299 * KIB
    assert r.get("read_bw", "max") == 2506096 * KIB
    assert r.get("read_bw", "mean") == 2445227 * KIB
    targets = per_target(r, "read_bw")
    assert len(targets) == 10
    # "10                         2375138  KiB/s   nodeID: ddn01.hpc.usc.edu [ID: 1]"
    assert targets[10] == (2375138 * KIB, "ddn01.hpc.usc.edu", 1)
    assert targets[100] == (2506096 * KIB, "ddn10.hpc.usc.edu", 10)
    info = r.extra["storagebench"]
    assert info["states"] == {"finished": 10}  # "Finished:    10"
    assert info["read_min_target"] == {"node": "ddn03.hpc.usc.edu", "node_id": 3, "target": 30}
    assert r.params == {"ops": ["read"], "targets": 10, "nodes": 10}
    assert not any(m.name == "write_bw" for m in r.metrics)


def test_write_status_verbose_10_targets(sample):
    r = storagebench.parse(sample("beegfs/storagebench-status-verbose-write-10targets-usc.txt"))
    assert r.get("write_bw") == 19848771 * KIB
    assert r.get("write_bw", "min") == 1674695 * KIB
    assert r.get("write_bw", "max") == 2671112 * KIB
    assert r.get("write_bw", "mean") == 1984877 * KIB
    targets = per_target(r, "write_bw")
    assert targets[30] == (1674695 * KIB, "ddn03.hpc.usc.edu", 3)
    assert targets[60] == (1921547 * KIB, "ddn06.hpc.usc.edu", 6)
    assert r.extra["storagebench"]["write_max_target"]["target"] == 10
    assert {m.unit for m in r.metrics} == {"B/s"}


def test_every_storagebench_sample_is_covered():
    assert set(SB_SAMPLES) == {
        "storagebench-status-verbose-read-10targets-usc.txt",
        "storagebench-status-verbose-write-10targets-usc.txt",
    }


@pytest.mark.parametrize("name", SB_SAMPLES)
def test_every_sample_validates_and_serialises(name):
    data = get_parser("storagebench").parse(read_sample(f"beegfs/{name}")).to_dict()
    assert data["tool"] == "storagebench"
    assert sum(1 for m in data["metrics"] if "extra" not in m) == 4


def test_without_verbose_only_the_summary(sample):
    text = sample("beegfs/storagebench-status-verbose-read-10targets-usc.txt")
    summary = text[: text.index("List of all targets:")]
    r = storagebench.parse(summary)
    assert r.get("read_bw") == 24452273 * KIB
    assert per_target(r, "read_bw") == {}
    assert r.params["targets"] == 10  # from "Finished:    10"


# --- detection ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", SB_SAMPLES)
def test_detect_own_samples(name):
    assert storagebench.detect(read_sample(f"beegfs/{name}")) >= 0.8


@pytest.mark.parametrize("name", OTHER_SAMPLES)
def test_detect_low_on_other_tools(name):
    assert storagebench.detect(read_sample(name)) < 0.3


# --- errors ------------------------------------------------------------------------------


def test_empty_input_is_a_parse_error():
    with pytest.raises(ParseError, match="empty"):
        storagebench.parse("")


def test_status_header_only_names_its_line(sample):
    text = sample("beegfs/storagebench-status-verbose-write-10targets-usc.txt")
    header = "".join(text.splitlines(keepends=True)[:5])  # up to "Write benchmark results:"
    with pytest.raises(ParseError, match="after the status at line 2") as e:
        storagebench.parse(header)
    assert e.value.line == 2


def test_running_benchmark_has_no_results():
    with pytest.raises(ParseError, match="has not finished") as e:
        storagebench.parse("\nServer benchmark status:\nRunning:     10\n")
    assert e.value.line == 2


def test_throughput_cut_before_its_unit_is_not_a_result(sample):
    text = sample("beegfs/storagebench-status-verbose-write-10targets-usc.txt")
    cut = text[: text.index("1674695")]  # "Min throughput:" without its value
    with pytest.raises(ParseError, match="no 'Write/Read benchmark results:'"):
        storagebench.parse(cut)


def test_truncated_target_list_keeps_complete_rows(sample):
    text = sample("beegfs/storagebench-status-verbose-write-10targets-usc.txt")
    cut = text[: text.index("[ID: 3]\n40") + len("[ID: 3]\n40  ")]
    r = storagebench.parse(cut)
    assert sorted(per_target(r, "write_bw")) == [10, 20, 30]


# --- properties --------------------------------------------------------------------------


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(SB_SAMPLES), data=st.data())
def test_truncated_prefixes_parse_or_raise_parse_error(name, data):
    text = read_sample(f"beegfs/{name}")
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    check_truncated(storagebench.parse, text, cut)


@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_random_text_only_raises_parse_error(text):
    check_only_parse_error(storagebench.parse, text)
