"""io500 parser against the real samples in shared/samples/io500 (values read from the files)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
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

GIB = 1024**3
approx = pytest.approx

IO500_SAMPLES = sorted(p.name for p in (SAMPLES / "io500").iterdir())


def _metric(result, name):
    return next(m for m in result.metrics if m.name == name)


def test_io500_isc22_invalid_and_timestamp_line(sample):
    r = io500.parse(sample("io500/io500-isc22_v1-summary-s3-invalid-timestamp-line.txt"))
    assert r.tool_version == "io500-isc22_v1"
    assert r.extra["mode"] == "standard"
    assert r.get("ior_easy_write") == approx(0.002189 * GIB)
    assert _metric(r, "ior_easy_write").extra == {"time": approx(303.523)}
    assert r.get("mdtest_easy_write") == approx(5.847)  # 0.005847 kIOPS
    assert r.get("mdtest_hard_delete") == approx(2.956)
    # "[RESULT] find 0.000000 kIOPS : time 0.000 seconds [INVALID]"
    assert r.get("find") == 0
    assert _metric(r, "find").extra["invalid"] is True
    # "[SCORE ] Bandwidth 0.000931 GiB/s : IOPS 0.003778 kiops : TOTAL 0.001875 [INVALID]"
    assert r.get("io500_score") == approx(0.001875)
    assert r.get("io500_bw_score") == approx(0.000931 * GIB)
    assert r.get("io500_md_score") == approx(3.778)
    assert _metric(r, "io500_score").extra == {"invalid": True}
    assert r.extra["invalid"] is True
    # "[      ] timestamp" is not a scored phase.
    assert "timestamp" not in {m.name for m in r.metrics}
    assert r.extra["unscored_phases"][0]["phase"] == "timestamp"
    assert r.extra["phases"] == 12


def test_io500_sc20_azure(sample):
    r = io500.parse(sample("io500/io500-sc20_v3-summary-lustre-azure-64tasks.txt"))
    assert r.tool_version == "io500-sc20_v3"
    assert r.get("io500_score") == approx(2.724124)
    assert r.get("io500_md_score") == approx(10694.340)
    assert r.get("find") == approx(364668.060)
    assert r.get("ior_hard_read") == approx(0.331565 * GIB)
    assert _metric(r, "mdtest_hard_delete").extra == {"time": approx(422.224)}
    assert "invalid" not in r.extra
    assert all("invalid" not in m.extra for m in r.metrics)


def test_io500_sc20_gcp(sample):
    r = io500.parse(sample("io500/io500-sc20_v3-summary-lustre-gcp-64tasks.txt"))
    assert r.get("io500_score") == approx(6.548076)
    assert r.get("io500_bw_score") == approx(1.868072 * GIB)
    assert r.get("ior_easy_write") == approx(6.173493 * GIB)
    assert r.get("mdtest_hard_delete") == approx(7021.386)
    assert _metric(r, "mdtest_easy_delete").extra["time"] == approx(719.628)
    assert len([m for m in r.metrics if not m.name.startswith("io500_")]) == 12


def test_every_io500_sample_has_a_test():
    assert set(IO500_SAMPLES) == {
        "io500-isc22_v1-summary-s3-invalid-timestamp-line.txt",
        "io500-sc20_v3-summary-lustre-azure-64tasks.txt",
        "io500-sc20_v3-summary-lustre-gcp-64tasks.txt",
    }


def test_io500_legacy_bash_script_lines():
    # Line format of the pre-2020 io500.sh summary (BW in "GB/s" that are GiB/s).
    text = (
        "[RESULT] BW   phase 1            ior_easy_write                8.581 GB/s : "
        "time  58.27 seconds\n"
        "[RESULT] IOPS phase 3                      find              305.930 kiops : "
        "time  24.64 seconds\n"
        "[SCORE] Bandwidth 1.61907 GB/s : IOPS 14.8749 kiops : TOTAL 4.90749\n"
    )
    assert io500.detect(text) > 0.5
    r = io500.parse(text)
    assert r.get("ior_easy_write") == approx(8.581 * GIB)
    assert r.get("find") == approx(305930)
    assert r.get("io500_score") == approx(4.90749)


def test_io500_result_txt_layout():
    text = (
        "[run]\nprocs                = 64\nversion              = io500-sc20_v3\n\n"
        "[ior-easy-write]\nt_start              = 2021-12-01 17:00:00\n"
        "score                = 6.173493\nt_delta              = 329.2280\n\n"
        "[mdtest-easy-write]\nscore                = 21.002955\nt_delta              = 401.2470\n"
        "\n[SCORE]\nBW                   = 1.868072\nMD                   = 22.952705\n"
        "SCORE                = 6.548076 [INVALID]\n"
    )
    assert io500.detect(text) > 0.5
    r = io500.parse(text)
    assert r.params["threads"] == 64
    assert r.tool_version == "io500-sc20_v3"
    assert r.get("ior_easy_write") == approx(6.173493 * GIB)
    assert r.get("mdtest_easy_write") == approx(21002.955)
    assert r.get("io500_score") == approx(6.548076)
    assert _metric(r, "io500_score").extra == {"invalid": True}


def test_io500_extended_phase_kept_as_extra():
    text = (
        "IO500 version io500-sc22_v2 (extended)\n"
        "[RESULT]       ior-easy-write        1.000000 GiB/s : time 300.000 seconds\n"
        "[RESULT]    mdworkbench-bench        1.234000 kIOPS : time 300.100 seconds\n"
        "[SCORE ] Bandwidth 1.000000 GiB/s : IOPS 2.000000 kiops : TOTAL 1.414214\n"
        "[SCOREX] Bandwidth 1.000000 GiB/s : IOPS 3.000000 kiops : TOTAL 1.732051\n"
    )
    r = io500.parse(text)
    assert r.extra["mode"] == "extended"
    assert r.get("io500_score") == approx(1.414214)
    assert r.extra["other_phases"][0]["phase"] == "mdworkbench-bench"
    assert r.extra["extended_score"]["total"] == approx(1.732051)
    # An extended-only phase alone is no result.
    with pytest.raises(ParseError):
        io500.parse("[RESULT]    mdworkbench-bench        1.234000 kIOPS : time 300.100 seconds\n")


# --- detection ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", IO500_SAMPLES)
def test_detect_picks_io500_for_its_samples(sample, name):
    text = sample(f"io500/{name}")
    score = io500.detect(text)
    assert score > 0.5
    assert ior.detect(text) < score
    assert mdtest.detect(text) < score


# --- errors -------------------------------------------------------------------------------


def test_empty_text_raises():
    with pytest.raises(ParseError, match="empty"):
        io500.parse("")


def test_version_line_without_results_names_the_line():
    with pytest.raises(ParseError) as err:
        io500.parse("IO500 version io500-sc20_v3\n")
    assert err.value.line == 1
    assert "line 1" in str(err.value)


def test_truncated_file_raises(sample):
    text = sample("io500/io500-sc20_v3-summary-lustre-gcp-64tasks.txt")
    cut = text.split("[RESULT]")[0] + "[RESULT]       ior-easy-wr"
    with pytest.raises(ParseError, match="line 1"):
        io500.parse(cut)


def test_random_text_raises_parse_error():
    with pytest.raises(ParseError, match="no io500"):
        io500.parse("Lorem ipsum\n")


# --- property tests -----------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(IO500_SAMPLES), data=st.data())
def test_truncated_prefixes_raise_only_parse_error(name, data):
    text = read_sample(f"io500/{name}")
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    check_truncated(io500.parse, text, cut, needs_metrics=True)


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(IO500_SAMPLES), data=st.data())
def test_shuffled_sample_lines_raise_only_parse_error(name, data):
    lines = read_sample(f"io500/{name}").splitlines()
    picked = data.draw(st.lists(st.sampled_from(lines), max_size=30))
    check_shuffled(io500.parse, lines, picked)


@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_random_text_raises_only_parse_error(text):
    check_only_parse_error(io500.parse, text)


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(IO500_SAMPLES), data=st.data())
def test_mangled_numbers_raise_only_parse_error(name, data):
    text = read_sample(f"io500/{name}")
    check_mangled(io500.parse, text, data)
