"""IOR adapter (not installable here): argv alone and under mpirun, preparation, validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from runners.tools import ParamError, build_command

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
