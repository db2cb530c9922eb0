"""mdtest adapter (not installable here): argv alone and under mpirun, validation."""

from __future__ import annotations

import pytest

from runners.tools import ParamError, build_command


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
