"""IOR adapter: argv alone and under mpirun, preparation, validation; and the real IOR 4.0.0
(built from ../shared/tools/ior by .ci/run) run from the adapter's commands, alone and under
mpirun on this host, its output parsed."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from runners.parsers import parse
from runners.tools import ParamError, build_command
from tests.helpers.ior import need_ior
from tests.helpers.tools import run

GIB = 1024**3


def test_typical_study_command(ctx):
    """The seed studies' N-N run: ior -w -r -t 1m -b 4g -F -e -C -o <dir>/ior_file."""
    cmd = build_command(
        "ior",
        {"transfer_size": "1m", "block_size": "4g", "file_per_proc": True, "fsync": True,
         "reorder": True, "test_file": "ior_file"},
        ctx,
    )  # fmt: skip
    assert cmd.argv == ["ior", "-w", "-r", "-t", "1m", "-b", "4g", "-F", "-e", "-C",
                        "-o", f"{ctx.workdir}/ior_file"]  # fmt: skip
    assert cmd.files == {}
    assert cmd.data_bytes == 4 * GIB
    assert cmd.dirs == [ctx.workdir] and cmd.prepare == []


def test_n1_odirect_command_from_seed_001(ctx):
    """ior -w -r -i 3 --posix.odirect -t 8m -b 16g -g -d 3 -e -E -o $outfile -s 1."""
    cmd = build_command(
        "ior",
        {"iterations": 3, "direct": True, "transfer_size": "8m", "block_size": "16g",
         "barriers": True, "delay": 3, "fsync": True, "use_existing": True,
         "test_file": "n1/outfile", "segments": 1},
        ctx,
    )  # fmt: skip
    assert cmd.argv == ["ior", "-w", "-r", "-t", "8m", "-b", "16g", "-i", "3", "-e", "-g",
                        "-E", "--posix.odirect", "-d", "3",
                        "-o", f"{ctx.workdir}/n1/outfile"]  # fmt: skip
    assert cmd.dirs == [ctx.workdir / "n1"]  # the executor makes the parent directory


def test_other_api_segments_write_only(ctx):
    cmd = build_command(
        "ior",
        {"api": "mpiio", "read": False, "segments": 4, "random": True,
         "block_size": "64m", "transfer_size": "64k"},
        ctx,
    )  # fmt: skip
    assert cmd.argv == ["ior", "-a", "MPIIO", "-w", "-t", "64k", "-b", "64m", "-s", "4",
                        "-z", "-o", f"{ctx.workdir}/ior_file"]  # fmt: skip
    assert cmd.data_bytes == 4 * 64 * 1024**2
    assert cmd.prepare == []
    with pytest.raises(ParamError, match="^keep: is no longer supported"):
        build_command("ior", {"keep": True}, ctx)


def test_read_only_run_writes_its_file_first(ctx, mpi_ctx):
    cmd = build_command("ior", {"write": False, "iterations": 3, "block_size": "4m"}, ctx)
    assert cmd.argv == ["ior", "-r", "-t", "1m", "-b", "4m", "-i", "3",
                        "-o", f"{ctx.workdir}/ior_file"]  # fmt: skip
    assert cmd.prepare == [["ior", "-w", "-t", "1m", "-b", "4m", "-k",
                            "-o", f"{ctx.workdir}/ior_file"]]  # fmt: skip
    mpi = build_command("ior", {"write": False}, mpi_ctx)
    assert mpi.prepare[0][:8] == mpi.argv[:8] and mpi.prepare[0][8:10] == ["ior", "-w"]


def test_under_mpirun(mpi_ctx):
    cmd = build_command("ior", {"block_size": "4g", "file_per_proc": True}, mpi_ctx)
    hostfile = mpi_ctx.scratch / "hostfile"
    assert cmd.argv == [
        "mpirun", "--allow-run-as-root", "--hostfile", str(hostfile), "-np", "8",
        "--map-by", "ppr:4:node",
        "ior", "-w", "-r", "-t", "1m", "-b", "4g", "-F", "-o", "/mnt/beegfs/bench/ior_file",
    ]  # fmt: skip
    assert cmd.files == {str(hostfile): "10.0.0.1 slots=4\nc2.ib.example slots=4\n"}
    assert cmd.data_bytes == 8 * 4 * GIB
    assert cmd.dirs == [Path("/mnt/beegfs/bench")]


def test_multihost_is_not_an_ior_mode(multihost_ctx):
    with pytest.raises(ParamError, match="^mode: ior cannot run in multihost mode"):
        build_command("ior", {}, multihost_ctx)


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"write": False, "read": False}, "write"),
        ({"block_size": "3m", "transfer_size": "2m"}, "block_size"),
        ({"direct": True, "api": "HDF5"}, "direct"),
        ({"api": "S3"}, "api"),
        ({"iterations": 0}, "iterations"),
        ({"test_file": "."}, "test_file"),
        ({"summaryFormat": "JSON"}, "summaryFormat"),
    ],
)
def test_rejected(params, param, ctx):
    with pytest.raises(ParamError) as exc:
        build_command("ior", params, ctx)
    assert exc.value.param == param


# --- the real IOR --------------------------------------------------------------------------


def run_all(cmd):
    """The command's preparation steps, then the command, as the executor runs them."""
    for step in cmd.prepare:
        done = run(dataclasses.replace(cmd, argv=step, prepare=[]))
        assert done.returncode == 0, done.stdout + done.stderr
    return run(cmd)


@pytest.mark.parametrize("file_per_proc", [True, False], ids=["N-N", "N-1"])
def test_real_ior_alone(ctx, file_per_proc):
    need_ior("ior")
    cmd = build_command(
        "ior",
        {"block_size": "4m", "transfer_size": "1m", "iterations": 2,
         "file_per_proc": file_per_proc, "test_file": "sub/ior_file"},
        ctx,
    )  # fmt: skip
    for directory in cmd.dirs:
        directory.mkdir(parents=True, exist_ok=True)
    done = run_all(cmd)
    assert done.returncode == 0, done.stdout + done.stderr
    result = parse(done.stdout, tool="ior", **cmd.parse_options)
    assert result.tool_version == "4.0.0"
    assert result.command == " ".join(cmd.argv)
    assert result.params["threads"] == 1 and result.params["nodes"] == 1
    assert result.params["file_per_process"] is file_per_proc
    assert result.params["block_size"] == 4 * 1024**2
    assert result.params["transfer_size"] == 1024**2
    assert result.params["iterations"] == 2
    for op in ("write", "read"):
        assert {m.iteration for m in result.metrics if m.name == f"{op}_bw"} == {None, 0, 1}
        stats = {m.stat: m.value for m in result.metrics if m.name == f"{op}_bw" and
                 m.iteration is None}  # fmt: skip
        assert set(stats) == {"max", "min", "mean", "stddev"}
        assert 0 < stats["min"] <= stats["mean"] <= stats["max"]
    assert result.extra["complete"] is True
    assert list((ctx.workdir / "sub").iterdir()) == []  # IOR removed its file(s)


def test_real_ior_under_mpirun_on_this_host(local_mpi_ctx):
    need_ior("ior", "mpirun")
    ctx = local_mpi_ctx
    # A read-only run: the adapter's preparation writes the file (-k) under mpirun first.
    cmd = build_command(
        "ior", {"write": False, "block_size": "2m", "transfer_size": "256k", "file_per_proc": True},
        ctx,
    )  # fmt: skip
    assert cmd.argv[0] == "mpirun" and cmd.prepare[0][0] == "mpirun"
    done = run_all(cmd)
    assert done.returncode == 0, done.stdout + done.stderr
    result = parse(done.stdout, tool="ior", **cmd.parse_options)
    assert result.params["threads"] == 2
    assert result.params["tasks_per_node"] == 2
    assert result.params["nodes"] == 1
    assert result.params["file_per_process"] is True
    assert result.params["aggregate_size"] == 2 * 2 * 1024**2
    assert cmd.data_bytes == result.params["aggregate_size"]
    assert result.get("read_bw", "mean") > 0
    assert not [m for m in result.metrics if m.name.startswith("write_")]
    assert os.listdir(ctx.workdir) == []
