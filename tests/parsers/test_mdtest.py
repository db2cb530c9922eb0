"""mdtest parser against the real samples in shared/samples/mdtest (values read from the files)."""

from __future__ import annotations

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

approx = pytest.approx

MDTEST_SAMPLES = sorted(p.name for p in (SAMPLES / "mdtest").iterdir())
PHASES = (
    "dir_create",
    "dir_stat",
    "dir_rename",
    "dir_remove",
    "file_create",
    "file_stat",
    "file_read",
    "file_remove",
    "tree_create",
    "tree_remove",
)


def _names(result):
    return {m.name for m in result.metrics}


def test_mdtest_1_9_3_shared_dir(sample):
    r = mdtest.parse(sample("mdtest/mdtest-1.9.3-verbose-shared-dir-96tasks-2iter.txt"))
    assert r.tool_version == "1.9.3"
    assert r.command == (
        "/projects/ccrstaff/general/appker/edge12core/execs/mdtest/mdtest -v -I 32 -z 0 -b 0 -i 2"
    )
    # "mdtest-1.9.3 was launched with 96 total task(s) on 8 node(s)", "96 tasks, 3072 ..."
    assert r.params["threads"] == 96
    assert r.params["nodes"] == 8
    assert r.params["iterations"] == 2
    assert r.params["items"] == 32
    assert r.params["unique_dir"] is False
    # SUMMARY: (of 2 iterations)
    assert r.get("dir_create", "max") == approx(104.022)
    assert r.get("dir_create", "min") == approx(96.640)
    assert r.get("file_stat", "mean") == approx(1483281.640)
    assert r.get("tree_remove", "stddev") == approx(27.206)
    # V-1 per-iteration lines
    assert r.get("dir_create", iteration=0) == approx(96.639)
    assert r.get("dir_create", iteration=1) == approx(104.022)
    assert r.get("file_read", iteration=1) == approx(166235.349)
    assert r.get("tree_create", iteration=0) == approx(4782.559)
    assert r.get("tree_remove", iteration=1) == approx(159.619)
    seconds = next(m for m in r.metrics if m.name == "dir_remove" and m.iteration == 0)
    assert seconds.extra["seconds"] == approx(37.651)


def test_mdtest_1_9_3_unique_dir(sample):
    r = mdtest.parse(sample("mdtest/mdtest-1.9.3-verbose-unique-dir-u-96tasks-2iter.txt"))
    assert r.params["unique_dir"] is True
    assert r.get("dir_create", "max") == approx(39353.426)
    assert r.get("file_read", "max") == approx(299530.462)
    assert r.get("tree_create", "mean") == approx(2.446)
    assert r.get("dir_stat", iteration=1) == approx(1312776.555)
    assert r.get("file_create", iteration=0) == approx(34653.135)


def test_mdtest_3_3_0_azure(sample):
    r = mdtest.parse(sample("mdtest/mdtest-3.3.0-64tasks-4nodes-3iter-lustre-azure.txt"))
    assert r.tool_version == "3.3.0"
    assert r.command == "/usr/bin/mdtest '-n' '2048' '-i' '3' '-d' '/mnt/exacloud/5a7b7a42728be0b5'"
    assert r.params["threads"] == 64
    assert r.params["nodes"] == 4
    assert r.params["items"] == 2048
    assert r.params["iterations"] == 3
    assert r.get("dir_create", "max") == approx(7345.338)
    assert r.get("tree_remove", "stddev") == approx(10.312)
    assert r.get("file_read", "mean") == approx(26512.201)
    assert all(m.iteration is None for m in r.metrics)  # not verbose: no per-iteration rows


def test_mdtest_3_3_0_gcp(sample):
    r = mdtest.parse(sample("mdtest/mdtest-3.3.0-64tasks-8nodes-3iter-lustre-gcp.txt"))
    assert r.params["nodes"] == 8
    assert r.get("file_stat", "max") == approx(47499.280)
    assert r.get("dir_remove", "min") == approx(24667.200)
    assert r.get("tree_create", "mean") == approx(1728.448)
    assert _names(r) == set(PHASES) - {"dir_rename"}


def test_mdtest_3_4_0dev_create_only_skips_zero_rows(sample):
    r = mdtest.parse(sample("mdtest/mdtest-3.4.0dev-create-only-C-daos-dfuse.txt"))
    assert r.tool_version == "3.4.0+dev"
    assert r.get("file_create", "max") == approx(2943.697)
    assert r.get("file_create", "min") == approx(2943.674)
    assert r.get("file_create", "stddev") == approx(0.006)
    assert r.get("tree_create", "max") == approx(1079.858)
    assert _names(r) == {"file_create", "tree_create"}  # zero rows of skipped phases dropped
    with pytest.raises(KeyError):
        r.get("file_stat", "max")
    assert "file stat" in r.extra["skipped_phases"]
    assert r.params["items"] == 3334
    assert r.params["threads"] == 10 and r.params["nodes"] == 3
    assert r.params["create_only"] is True


def test_mdtest_4_0_0_rows_without_colons(sample):
    r = mdtest.parse(sample("mdtest/mdtest-4.0.0-create-only-C-daos-dfuse.txt"))
    assert r.tool_version == "4.0.0"
    assert r.get("file_create", "mean") == approx(2568.636)
    assert r.get("tree_create", "max") == approx(496.015)
    assert r.params["nodes"] == 2
    assert r.extra["path"] == "/tmp/daos_dfuse_test"
    with pytest.raises(KeyError):
        r.get("file_remove", "max")


def test_mdtest_4_1_0dev_in_ops_sec_header(sample):
    r = mdtest.parse(sample("mdtest/mdtest-4.1.0dev-libnfs-128tasks-10iter-in-ops-sec-header.txt"))
    assert r.tool_version == "4.1.0+dev"
    assert r.get("file_create", "max") == approx(7147.432)
    assert r.get("tree_remove", "mean") == approx(97.632)
    assert r.get("file_read", "min") == approx(48234.620)
    assert r.params["api"] == "LIBNFS"
    assert r.params["items"] == 128
    assert r.params["iterations"] == 10
    assert r.params["threads"] == 128 and r.params["nodes"] == 1


def test_mdtest_4_1_0dev_without_command_line(sample):
    r = mdtest.parse(sample("mdtest/mdtest-4.1.0dev-nfs-kernel-client-no-cmdline-line-10iter.txt"))
    assert r.command is None
    assert "unique_dir" not in r.params
    assert r.params["items"] == 128  # "128 tasks, 16384 files"
    assert r.get("file_create", "mean") == approx(2203.859)
    assert r.get("file_remove", "stddev") == approx(153.959)
    assert r.get("tree_create", "min") == approx(253.739)


def test_mdtest_4_x_excerpt_with_rename(sample):
    r = mdtest.parse(sample("mdtest/mdtest-4.x-summary-rate-excerpt-with-rename.txt"))
    assert r.tool_version is None
    assert r.params["iterations"] == 1
    assert r.get("dir_rename", "max") == approx(24125.994)
    assert r.get("tree_remove", "mean") == approx(6168.094)
    assert r.get("file_read", "min") == approx(36759.895)
    assert _names(r) == set(PHASES)


def test_mdtest_bundled_with_ior_3_2_summary_rate(sample):
    r = mdtest.parse(sample("mdtest/mdtest-ior3.2.0-bundled-verbose-summary-rate-10iter.txt"))
    assert r.tool_version == "1.9.3"
    assert r.params["threads"] == 16 and r.params["nodes"] == 2
    assert r.params["iterations"] == 10
    assert r.params["items"] == 32  # "16 tasks, 512 files/directories"
    assert r.get("dir_create", "max") == approx(670.590)
    assert r.get("file_stat", "mean") == approx(28997.226)
    assert r.get("tree_create", iteration=0) == approx(132.891)
    assert r.get("file_remove", iteration=4) == approx(601.847)
    assert r.get("dir_create", iteration=9) == approx(521.492)  # "* iteration 10 *"


def test_every_mdtest_sample_has_a_test():
    assert set(MDTEST_SAMPLES) == {
        "mdtest-1.9.3-verbose-shared-dir-96tasks-2iter.txt",
        "mdtest-1.9.3-verbose-unique-dir-u-96tasks-2iter.txt",
        "mdtest-3.3.0-64tasks-4nodes-3iter-lustre-azure.txt",
        "mdtest-3.3.0-64tasks-8nodes-3iter-lustre-gcp.txt",
        "mdtest-3.4.0dev-create-only-C-daos-dfuse.txt",
        "mdtest-4.0.0-create-only-C-daos-dfuse.txt",
        "mdtest-4.1.0dev-libnfs-128tasks-10iter-in-ops-sec-header.txt",
        "mdtest-4.1.0dev-nfs-kernel-client-no-cmdline-line-10iter.txt",
        "mdtest-4.x-summary-rate-excerpt-with-rename.txt",
        "mdtest-ior3.2.0-bundled-verbose-summary-rate-10iter.txt",
    }


def test_two_runs_in_one_log(sample):
    text = (
        sample("mdtest/mdtest-1.9.3-verbose-shared-dir-96tasks-2iter.txt")
        + "\n"
        + sample("mdtest/mdtest-1.9.3-verbose-unique-dir-u-96tasks-2iter.txt")
    )
    runs = mdtest.parse_many(text)
    assert [r.params["unique_dir"] for r in runs] == [False, True]
    assert runs[1].get("dir_create", "max") == approx(39353.426)
    assert mdtest.parse(text).extra["runs_in_file"] == 2


def test_summary_time_block_is_not_a_rate():
    text = (
        "SUMMARY rate: (of 1 iterations)\n"
        "   Operation                     Max            Min           Mean        Std Dev\n"
        "   File creation               24392.579      24392.579      24392.579          0.000\n"
        "SUMMARY time: (of 1 iterations)\n"
        "   Operation                     Max            Min           Mean        Std Dev\n"
        "   File creation                   0.041          0.041          0.041          0.000\n"
    )
    r = mdtest.parse(text)
    assert r.get("file_create", "max") == approx(24392.579)
    assert r.extra["summary_time"]["file_create"]["max"] == approx(0.041)
    assert len(r.metrics) == 4


# --- detection ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", MDTEST_SAMPLES)
def test_detect_picks_mdtest_for_its_samples(sample, name):
    text = sample(f"mdtest/{name}")
    score = mdtest.detect(text)
    assert score > 0.5
    assert ior.detect(text) < score
    assert io500.detect(text) < score


# --- errors -------------------------------------------------------------------------------


def test_empty_text_raises():
    with pytest.raises(ParseError, match="empty"):
        mdtest.parse("")


def test_header_without_summary_names_the_banner_line(sample):
    text = sample("mdtest/mdtest-3.3.0-64tasks-8nodes-3iter-lustre-gcp.txt")
    header = text.split("SUMMARY rate")[0]
    with pytest.raises(ParseError) as err:
        mdtest.parse(header)
    assert err.value.line == 3  # "mdtest-3.3.0 was launched with ..." is line 3
    assert "line 3" in str(err.value) and "truncated" in str(err.value)


def test_truncated_in_summary_header_names_the_summary_line(sample):
    text = sample("mdtest/mdtest-3.3.0-64tasks-4nodes-3iter-lustre-azure.txt")
    cut = text.split("   Directory creation")[0]
    with pytest.raises(ParseError) as err:
        mdtest.parse(cut)
    summary_line = next(
        n for n, line in enumerate(cut.splitlines(), 1) if line.startswith("SUMMARY rate")
    )
    assert err.value.line == summary_line


def test_only_zero_rows_is_an_error():
    text = (
        "SUMMARY rate: (of 1 iterations)\n"
        "   File stat                 0.000          0.000          0.000          0.000\n"
    )
    with pytest.raises(ParseError, match="line 1"):
        mdtest.parse(text)


def test_random_text_raises_parse_error():
    with pytest.raises(ParseError, match="no mdtest"):
        mdtest.parse("Lorem ipsum\n")


# --- property tests -----------------------------------------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(MDTEST_SAMPLES), data=st.data())
def test_truncated_prefixes_raise_only_parse_error(name, data):
    text = read_sample(f"mdtest/{name}")
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    check_truncated(mdtest.parse, text, cut, needs_metrics=True)


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(MDTEST_SAMPLES), data=st.data())
def test_shuffled_sample_lines_raise_only_parse_error(name, data):
    lines = read_sample(f"mdtest/{name}").splitlines()
    picked = data.draw(st.lists(st.sampled_from(lines), max_size=40))
    check_shuffled(mdtest.parse, lines, picked)


@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_random_text_raises_only_parse_error(text):
    check_only_parse_error(mdtest.parse, text)


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(MDTEST_SAMPLES), data=st.data())
def test_mangled_numbers_raise_only_parse_error(name, data):
    text = read_sample(f"mdtest/{name}")
    check_mangled(mdtest.parse, text, data)


@pytest.mark.parametrize(
    ("name", "tasks_per_node"),
    [
        # "launched with 10 total task(s) on 2 node(s)", "Nodemap: 1010101010": 5 + 5
        ("mdtest-4.0.0-create-only-C-daos-dfuse.txt", 5),
        # "64 total task(s) on 8 node(s)", "Nodemap: 11111111" then 56 zeros: 8 each
        ("mdtest-3.3.0-64tasks-8nodes-3iter-lustre-gcp.txt", 8),
        # "128 total task(s) on 1 node(s)", 128 ones
        ("mdtest-4.1.0dev-libnfs-128tasks-10iter-in-ops-sec-header.txt", 128),
        # "10 total task(s) on 3 node(s)", "Nodemap: 1001001001": 4 on task 0's node, not even
        ("mdtest-3.4.0dev-create-only-C-daos-dfuse.txt", None),
    ],
)
def test_tasks_per_node_from_the_nodemap(sample, name, tasks_per_node):
    r = mdtest.parse(sample(f"mdtest/{name}"))
    assert r.params.get("tasks_per_node") == tasks_per_node
