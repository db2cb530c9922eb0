"""mdtest adapter: argv alone and under mpirun, validation; and the real mdtest 4.0.0 (built
from ../shared/tools/ior by .ci/run) run from the adapter's commands, alone and under mpirun on
this host, its output parsed."""

from __future__ import annotations

import os

import pytest

from runners.parsers import parse
from runners.tools import ParamError, build_command
from tests.helpers.ior import need_ior
from tests.helpers.tools import run


def test_typical_command(ctx):
    cmd = build_command(
        "mdtest", {"items": 1000, "iterations": 3, "unique_dir": True, "files_only": True}, ctx
    )
    assert cmd.argv == ["mdtest", "-n", "1000", "-i", "3", "-u", "-F",
                        "-d", str(ctx.workdir / "mdtest")]  # fmt: skip
    assert cmd.data_bytes == 0
    assert cmd.dirs == [ctx.workdir]  # mdtest makes -d itself; the executor its parents
    assert cmd.parse_options == {}


def test_tree_items_per_dir_phases_and_bytes(ctx):
    """Seed 001: mdtest -i 3 -b $dirs -z 1 -L -I 1024 -y -u -F (plus -w/-e and phases)."""
    cmd = build_command(
        "mdtest",
        {"iterations": 3, "branch": 40, "depth": 1, "leaf_only": True, "items_per_dir": 1024,
         "sync": True, "unique_dir": True, "files_only": True, "write_bytes": "3901",
         "read_bytes": "3901", "phases": "create,stat", "directory": "md/run"},
        ctx,
    )  # fmt: skip
    assert cmd.argv == ["mdtest", "-I", "1024", "-i", "3", "-z", "1", "-b", "40", "-u", "-F",
                        "-L", "-y", "-w", "3901", "-e", "3901", "-C", "-T",
                        "-d", str(ctx.workdir / "md/run")]  # fmt: skip
    assert cmd.data_bytes == 40 * 1024 * 3901  # 40 leaves x 1024 files x 3901 bytes, 1 task


def test_the_runs_own_directory_may_be_the_test_directory(ctx):
    # The workdir is the run's own fresh directory, so mdtest may work in it directly.
    cmd = build_command("mdtest", {"directory": "."}, ctx)
    assert cmd.argv[-2:] == ["-d", str(ctx.workdir)]
    assert cmd.dirs == []


def test_under_mpirun(mpi_ctx):
    cmd = build_command("mdtest", {"items": 10, "write_bytes": "4k"}, mpi_ctx)
    assert cmd.argv[:9] == ["mpirun", "--allow-run-as-root", "--hostfile",
                            str(mpi_ctx.scratch / "hostfile"), "-np",
                            "8", "--map-by", "ppr:4:node", "mdtest"]  # fmt: skip
    assert cmd.argv[9:] == ["-n", "10", "-i", "1", "-w", "4096", "-d",
                            "/mnt/beegfs/bench/mdtest"]  # fmt: skip
    assert cmd.data_bytes == 10 * 8 * 4096
    assert len(cmd.files) == 1


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"items": 10, "items_per_dir": 10}, "items_per_dir"),
        ({"files_only": True, "dirs_only": True}, "dirs_only"),
        ({"read_bytes": "8k", "write_bytes": "4k"}, "read_bytes"),
        ({"phases": ["create", "rename"]}, "phases"),
        ({"items": 0}, "items"),
        ({"depth": 100}, "depth"),
    ],
)
def test_rejected(params, param, ctx):
    with pytest.raises(ParamError) as exc:
        build_command("mdtest", params, ctx)
    assert exc.value.param == param


# --- the real mdtest -----------------------------------------------------------------------

PHASES = ("file_create", "file_stat", "file_read", "file_remove")


def test_real_mdtest_alone(ctx):
    need_ior("mdtest")
    cmd = build_command("mdtest", {"items": 40, "iterations": 2, "files_only": True}, ctx)
    done = run(cmd)
    assert done.returncode == 0, done.stdout + done.stderr
    result = parse(done.stdout, tool="mdtest", **cmd.parse_options)
    assert result.tool_version == "4.0.0"
    assert result.params["threads"] == 1 and result.params["nodes"] == 1
    assert result.params["items"] == 40 and result.params["iterations"] == 2
    for phase in PHASES:
        stats = {m.stat: m.value for m in result.metrics if m.name == phase}
        assert set(stats) == {"max", "min", "mean", "stddev"}, phase
        assert 0 < stats["min"] <= stats["mean"] <= stats["max"]
    assert not [m for m in result.metrics if m.name.startswith("dir_")]  # -F: files only
    assert result.extra["complete"] is True
    assert os.listdir(ctx.workdir) == []  # mdtest removed its tree and its -d directory


def test_real_mdtest_under_mpirun_on_this_host(local_mpi_ctx):
    need_ior("mdtest", "mpirun")
    cmd = build_command(
        "mdtest", {"items": 25, "unique_dir": True, "write_bytes": "4k", "read_bytes": "4k"},
        local_mpi_ctx,
    )  # fmt: skip
    for directory in cmd.dirs:
        directory.mkdir(parents=True, exist_ok=True)
    done = run(cmd)
    assert done.returncode == 0, done.stdout + done.stderr
    result = parse(done.stdout, tool="mdtest", **cmd.parse_options)
    assert result.params["threads"] == 2 and result.params["nodes"] == 1
    assert result.params["items"] == 25 and result.params["unique_dir"] is True
    assert result.params["write_bytes"] == 4096
    assert cmd.data_bytes == 25 * 2 * 4096
    for phase in PHASES + ("dir_create", "dir_stat", "dir_remove"):
        assert result.get(phase, "mean") > 0, phase


def test_real_mdtest_reading_files_that_are_not_there_fails(ctx):
    """What a broken run looks like: the read phase alone, on files never created."""
    need_ior("mdtest")
    cmd = build_command(
        "mdtest", {"items": 10, "phases": ["read"], "write_bytes": 8, "read_bytes": 8}, ctx
    )
    done = run(cmd)
    assert done.returncode != 0
    assert "No such file or directory" in done.stdout + done.stderr
