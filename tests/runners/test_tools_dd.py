"""dd adapter: argv for both directions, validation, and a real write then read."""

from __future__ import annotations

import subprocess

import pytest

from runners.parsers import parse
from runners.tools import ParamError, build_command
from tests.helpers.tools import need, run

MIB = 1024**2


def test_write_argv(ctx):
    cmd = build_command(
        "dd", {"bs": "1M", "count": 1000, "file": "write_tmp", "fdatasync": True}, ctx
    )
    path = ctx.workdir / "write_tmp"
    assert cmd.argv == ["dd", "if=/dev/zero", f"of={path}", "bs=1M", "count=1000",
                        "conv=fdatasync"]  # fmt: skip
    assert cmd.parse_options == {"op": "write"}
    assert cmd.data_bytes == 1000 * MIB
    assert cmd.prepare == []
    assert cmd.dirs == [ctx.workdir]


def test_read_writes_its_own_file_first(ctx):
    cmd = build_command(
        "dd", {"direction": "read", "bs": "4m", "count": 256, "direct": True, "file": "d/f"}, ctx
    )
    path = ctx.workdir / "d/f"
    assert cmd.argv == ["dd", f"if={path}", "of=/dev/null", "bs=4M", "count=256",
                        "iflag=direct"]  # fmt: skip
    # Never overwriting (excl), on disk before the caches are dropped (fsync).
    assert cmd.prepare == [["dd", "if=/dev/zero", f"of={path}", "bs=4M", "count=256",
                            "conv=excl,fsync"]]  # fmt: skip
    assert cmd.dirs == [ctx.workdir / "d"]
    assert cmd.parse_options == {"op": "read"}


def test_keep_is_gone_and_says_why(ctx):
    with pytest.raises(ParamError, match="^keep: is no longer supported: each run works in a"):
        build_command("dd", {"keep": True}, ctx)


def test_write_direct_and_odd_block_size(ctx):
    cmd = build_command("dd", {"direct": 1, "bs": 1536 * 1024, "count": 1}, ctx)
    assert "oflag=direct" in cmd.argv
    assert "bs=1536K" in cmd.argv


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"direction": "read", "fdatasync": True}, "fdatasync"),
        ({"count": 0}, "count"),
        ({"bs": "100"}, "bs"),
        ({"file": "."}, "file"),
        ({"of": "/dev/sda"}, "of"),
    ],
)
def test_rejected(params, param, ctx):
    with pytest.raises(ParamError) as exc:
        build_command("dd", params, ctx)
    assert exc.value.param == param


def test_real_write_then_read(ctx):
    need("dd")
    write = build_command("dd", {"bs": "1m", "count": 4, "fdatasync": True}, ctx)
    done = run(write)
    assert done.returncode == 0, done.stderr
    assert (ctx.workdir / "dd.tmp").stat().st_size == 4 * MIB
    # dd reports on stderr.
    assert parse(done.stderr, tool="dd", **write.parse_options).get("write_bw") > 0

    read = build_command("dd", {"direction": "read", "bs": "1m", "count": 4}, ctx)
    (prepare,) = read.prepare
    refused = subprocess.run(prepare, capture_output=True, text=True, check=False)
    assert refused.returncode == 1 and "File exists" in refused.stderr  # conv=excl
    (ctx.workdir / "dd.tmp").unlink()  # as in the run's own fresh directory
    assert subprocess.run(prepare, capture_output=True, check=False).returncode == 0
    done = run(read)
    assert done.returncode == 0, done.stderr
    assert parse(done.stderr, tool="dd", **read.parse_options).get("read_bw") > 0
