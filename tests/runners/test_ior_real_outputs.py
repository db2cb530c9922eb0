"""IOR and mdtest 4.0.0 outputs without a summary (as the io500 application runs IOR, IOR's
CSV, an mdtest job ended before its SUMMARY) give run-level values: one iteration's row is the
run's value, several rows give their mean. The files are real outputs of IOR 4.0.0 built from
../shared/tools/ior (tests/runners/fixtures/ior_real/README.md says how each was made); the
expected numbers are read from the files by eye."""

from __future__ import annotations

from pathlib import Path

import pytest

from runners.parsers import ior, mdtest

FIXTURES = Path(__file__).parent / "fixtures" / "ior_real"
MIB = 1048576
approx = pytest.approx


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def run_level(result, name: str) -> list[tuple[str, float]]:
    """(stat, value) of the run-level metrics called ``name`` (no iteration)."""
    return [(m.stat, m.value) for m in result.metrics if m.name == name and m.iteration is None]


# --- IOR through its library (io500's ior_run): rows only --------------------------------


def test_ior_library_one_iteration_row_is_the_run_value():
    r = ior.parse(read("ior-4.0.0-lib-fpp-1iter.txt"))
    assert r.tool_version == "4.0.0"
    # "write     3779       3842       0.000510    16384      1024.00    0.000223   0.008330
    #  0.000172   0.008467   0"
    assert run_level(r, "write_bw") == [("value", approx(3779 * MIB))]
    assert r.get("write_iops") == approx(3842)
    assert r.get("write_lat") == approx(0.000510)
    assert r.get("write_open_lat") == approx(0.000223)
    assert r.get("write_close_lat") == approx(0.000172)
    assert r.get("write_time") == approx(0.008467)
    # "read      8484       8508       0.000069    16384      1024.00    0.000007   0.003761
    #  0.002659   0.003772   0"
    assert run_level(r, "read_bw") == [("value", approx(8484 * MIB))]
    assert r.get("read_iops") == approx(8508)
    assert r.get("read_time") == approx(0.003772)
    assert r.get("read_bw", iteration=0) == approx(8484 * MIB)
    # "access : file-per-process", "tasks : 2", "clients per node : 2", "repetitions : 1"
    assert r.params["file_per_process"] is True
    assert r.params["threads"] == 2
    assert r.params["tasks_per_node"] == 2
    assert r.params["nodes"] == 1
    assert r.params["iterations"] == 1
    assert r.params["block_size"] == 16 * MIB
    # No "Finished" line, but the row of the one repetition announced is there.
    assert r.extra["complete"] is True


def test_ior_library_three_iterations_mean_of_the_rows():
    r = ior.parse(read("ior-4.0.0-lib-ssf-3iter.txt"))
    # write rows 5324, 5754, 3811 MiB/s; read rows 28097, 29466, 10603 MiB/s
    assert run_level(r, "write_bw") == [("mean", approx((5324 + 5754 + 3811) / 3 * MIB))]
    assert run_level(r, "read_bw") == [("mean", approx((28097 + 29466 + 10603) / 3 * MIB))]
    # write IOPS 5473, 5919, 3883; write total(s) 0.006011, 0.005562, 0.008396
    assert r.get("write_iops", "mean") == approx((5473 + 5919 + 3883) / 3)
    assert r.get("write_time", "mean") == approx((0.006011 + 0.005562 + 0.008396) / 3)
    assert r.get("write_bw", iteration=2) == approx(3811 * MIB)
    assert r.params["file_per_process"] is False  # "access : single-shared-file"
    assert r.params["iterations"] == 3
    assert r.extra["complete"] is True
    assert not [m for m in r.metrics if m.stat in ("max", "min", "stddev")]


def test_ior_library_output_cut_short_is_not_complete():
    # The same real output ending after iteration 0's rows (a job killed mid-run): the two
    # rows it holds are the run's values, and the run says it is incomplete.
    lines = read("ior-4.0.0-lib-ssf-3iter.txt").splitlines(keepends=True)
    cut = "".join(lines[: next(i for i, x in enumerate(lines) if x.startswith("write     5754"))])
    r = ior.parse(cut)
    assert r.get("write_bw") == approx(5324 * MIB)
    assert r.get("read_bw") == approx(28097 * MIB)
    assert r.extra["complete"] is False


# --- the ior program: CSV (rows only) and text (summary) ---------------------------------


def test_ior_csv_three_iterations_mean_of_the_rows():
    r = ior.parse(read("ior-4.0.0-csv-ssf-3iter.csv"))
    # write,4967.3474,... / write,2522.0837,... / write,3601.9034,...
    assert r.get("write_bw", "mean") == approx((4967.3474 + 2522.0837 + 3601.9034) / 3 * MIB)
    assert r.get("read_bw", "mean") == approx((17895.6971 + 26291.4257 + 24845.9326) / 3 * MIB)
    assert r.get("read_iops", "mean") == approx((17977.1937 + 26446.8430 + 25059.3219) / 3)
    assert r.get("write_bw", iteration=1) == approx(2522.0837 * MIB)
    assert r.params["threads"] == 2  # the numTasks column
    assert r.params["block_size"] == 16 * MIB  # block(KiB) 16384.0000


def test_ior_program_summary_stays_the_run_value():
    r = ior.parse(read("ior-4.0.0-cli-fpp-2iter.txt"))
    # Summary: "write 4542.98 2936.35 3739.66 803.31 ... 0.00897"; rows 4543 and 2936.35
    assert run_level(r, "write_bw") == [
        ("max", approx(4542.98 * MIB)),
        ("min", approx(2936.35 * MIB)),
        ("mean", approx(3739.66 * MIB)),
        ("stddev", approx(803.31 * MIB)),
    ]
    assert r.get("read_bw", "mean") == approx(6947.67 * MIB)
    assert r.get("write_time", "mean") == approx(0.00897)
    assert run_level(r, "write_lat") == []  # the summary has no latency: none made up
    assert r.params["iterations"] == 2


# --- mdtest without SUMMARY ---------------------------------------------------------------


def test_mdtest_one_task_one_iteration_line_is_the_run_value():
    r = mdtest.parse(read("mdtest-4.0.0-v-1task-killed-1iter.txt"))
    assert r.tool_version == "4.0.0"
    assert r.params["threads"] == 1
    # "File creation     :          0.484 sec,       1032.350 ops/sec" (iteration 1 only)
    assert run_level(r, "file_create") == [("value", approx(1032.350))]
    assert r.get("file_stat") == approx(518071.146)
    assert r.get("file_read") == approx(323634.568)
    assert r.get("file_remove") == approx(148187.677)
    # Tree creation ran in iterations 1 and 2: 7397.362 and 8322.032 ops/sec
    assert r.get("tree_create", "mean") == approx((7397.362 + 8322.032) / 2)
    assert r.get("tree_create", iteration=1) == approx(8322.032)
    assert r.extra["complete"] is False


def test_mdtest_one_task_two_iterations_mean_of_the_lines():
    r = mdtest.parse(read("mdtest-4.0.0-v-1task-killed-2iter.txt"))
    # File creation 1042.770 and 1099.953; File stat 532002.029 and 464691.336 ops/sec
    assert run_level(r, "file_create") == [("mean", approx((1042.770 + 1099.953) / 2))]
    assert r.get("file_stat", "mean") == approx((532002.029 + 464691.336) / 2)
    assert r.get("file_remove", "mean") == approx((150010.873 + 118176.040) / 2)
    assert r.get("file_create", iteration=1) == approx(1099.953)
    assert r.params["items"] == 500
    assert r.params["iterations"] == 50  # asked for; the job ended in the third
    assert r.extra["complete"] is False


def test_mdtest_4_several_tasks_lines_are_task_0s():
    r = mdtest.parse(read("mdtest-4.0.0-v-2tasks-killed-1iter.txt"))
    assert r.params["threads"] == 2
    # "File creation : 0.786 sec, 317.955 ops/sec" is task 0's 250 files / 0.786 s: kept as
    # task 0's, no run value made of it.
    create = [m for m in r.metrics if m.name == "file_create"]
    assert [(m.iteration, m.value) for m in create] == [(0, approx(317.955))]
    assert create[0].extra == {"seconds": approx(0.786), "per_process": True, "rank": 0}
    assert run_level(r, "file_stat") == []
    # Tree creation and removal are task 0's alone: the run's (1071.890, 84.811; 134.735).
    assert r.get("tree_create", "mean") == approx((1071.890 + 84.811) / 2)
    assert r.get("tree_remove") == approx(134.735)
