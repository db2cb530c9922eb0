"""elbencho adapter (not installable here): argv, --hosts, result file, preparation, validation."""

from __future__ import annotations

import pytest

from runners.tools import Host, ParamError, build_command

MIB, GIB = 1024**2, 1024**3


def test_single_host_write_read(ctx):
    cmd = build_command(
        "elbencho",
        {"write": True, "read": True, "threads": 4, "dirs": 2, "files": 8, "size": "16m",
         "block": "1m", "direct": True, "iodepth": 4, "paths": ["a", "b"]},
        ctx,
    )  # fmt: skip
    resfile = ctx.scratch / "elbencho-results.txt"
    assert cmd.argv == [
        "elbencho", "--mkdirs", "--write", "--read", "--threads=4", "--dirs=2", "--files=8",
        "--size=16M", "--block=1M", "--iodepth=4", "--direct", "--nolive",
        f"--resfile={resfile}", str(ctx.workdir / "a"), str(ctx.workdir / "b"),
    ]  # fmt: skip
    assert cmd.output_file == resfile
    assert cmd.data_bytes == 4 * 2 * 8 * 16 * MIB
    assert cmd.dirs == [ctx.workdir / "a", ctx.workdir / "b"]  # the executor makes them
    assert cmd.prepare == []  # it writes its own files


def test_shared_dir_files_and_delete_phases(ctx):
    cmd = build_command(
        "elbencho",
        {"mkdirs": False, "write": False, "stat": True, "delfiles": True, "dirs": 0,
         "files": 3, "threads": 2, "size": "4k", "block": "4k"},
        ctx,
    )  # fmt: skip
    assert cmd.argv[1:4] == ["--stat", "--delfiles", "--threads=2"]
    assert cmd.argv[-1] == str(ctx.workdir)
    # Nothing outlives a run, so a run without a write phase writes its files first.
    assert cmd.prepare == [["elbencho", "--write", *cmd.argv[3:-2], str(ctx.workdir)]]
    assert "--resfile" not in " ".join(cmd.prepare[0])
    with pytest.raises(ParamError, match="^keep: is no longer supported: each run works"):
        build_command("elbencho", {"keep": True}, ctx)


def test_read_only_run_makes_its_directories_and_files_first(ctx):
    cmd = build_command("elbencho", {"write": False, "read": True, "dirs": 2}, ctx)
    assert cmd.argv[1:3] == ["--mkdirs", "--read"]
    assert cmd.prepare[0][1:3] == ["--mkdirs", "--write"]
    deldirs = build_command("elbencho", {"write": False, "mkdirs": False, "deldirs": True}, ctx)
    assert deldirs.prepare[0][1:3] == ["--mkdirs", "--threads=1"]


def test_multihost_uses_elbencho_services(multihost_ctx):
    cmd = build_command("elbencho", {"threads": 8, "size": "1g"}, multihost_ctx)
    assert cmd.argv[:3] == ["elbencho", "--hosts=10.0.0.1,c2.ib.example", "--mkdirs"]
    assert cmd.data_bytes == 2 * 8 * GIB  # threads are per host
    assert cmd.output_file == multihost_ctx.scratch / "elbencho-results.txt"


def test_multihost_refuses_ipv6_and_tasks_per_node(multihost_ctx):
    multihost_ctx.tasks_per_node = 4
    with pytest.raises(ParamError, match="^tasks_per_node: "):
        build_command("elbencho", {"threads": 2}, multihost_ctx)
    assert build_command("elbencho", {"threads": 4}, multihost_ctx).argv[0] == "elbencho"
    multihost_ctx.tasks_per_node = 1
    multihost_ctx.hosts = (Host("c1", "fd00::1"),)
    with pytest.raises(ParamError, match="^hosts: "):
        build_command("elbencho", {}, multihost_ctx)


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"mkdirs": False, "write": False}, "write"),
        ({"dirs": 0}, "mkdirs"),
        ({"mkdirs": False, "dirs": 0, "deldirs": True}, "deldirs"),
        ({"block": "2m", "size": "1m"}, "block"),
        ({"paths": []}, "paths"),
        ({"threads": 0}, "threads"),
        ({"hosts": "h1,h2"}, "hosts"),
    ],
)
def test_rejected(params, param, ctx):
    with pytest.raises(ParamError) as exc:
        build_command("elbencho", params, ctx)
    assert exc.value.param == param
