"""qperf adapter: client argv, validation, and a real run against a local server."""

from __future__ import annotations

import socket
import subprocess

import pytest

from runners.parsers import parse
from runners.tools import ParamError, build_command
from runners.tools.qperf import ADAPTER
from tests.helpers.tools import need, run


def test_argv(ctx):
    cmd = build_command(
        "qperf",
        {"server": "stor1.ib", "tests": ["tcp_bw", "tcp_lat", "rc_rdma_write_bw"], "time": "30s",
         "msg_size": "64k", "port": 19766},
        ctx,
    )  # fmt: skip
    assert cmd.argv == ["qperf", "stor1.ib", "-t", "30", "-m", "65536", "--listen_port",
                        "19766", "tcp_bw", "tcp_lat", "rc_rdma_write_bw"]  # fmt: skip
    assert cmd.data_bytes is None
    assert cmd.dirs == [] and cmd.prepare == []
    assert build_command("qperf", {"server": "10.0.0.9"}, ctx).argv == [
        "qperf", "10.0.0.9", "-t", "10", "tcp_bw", "tcp_lat",
    ]  # fmt: skip


def test_server_argv():
    assert ADAPTER.server_argv() == ["qperf"]
    assert ADAPTER.server_argv(19766) == ["qperf", "--listen_port", "19766"]
    with pytest.raises(ParamError, match="^port: "):
        ADAPTER.server_argv(0)


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({}, "server"),
        ({"server": "h", "tests": ["tcp_bw", "quit"]}, "tests"),
        ({"server": "h", "tests": []}, "tests"),
        ({"server": "h", "port": 70000}, "port"),
        ({"server": "h", "time": 0}, "time"),
        ({"server": "h", "loop": "msg_size:1:64K:*2"}, "loop"),
    ],
)
def test_rejected(params, param, ctx):
    with pytest.raises(ParamError) as exc:
        build_command("qperf", params, ctx)
    assert exc.value.param == param


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_real_tcp_bw_and_lat(ctx):
    need("qperf")
    port = _free_port()
    server = subprocess.Popen(
        ADAPTER.server_argv(port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        cmd = build_command(
            "qperf", {"server": "127.0.0.1", "port": port, "time": 1,
                      "tests": "tcp_bw,tcp_lat"}, ctx,
        )  # fmt: skip
        done = run(cmd, timeout=60)
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert done.returncode == 0, done.stderr
    result = parse(done.stdout, tool="qperf", **cmd.parse_options)
    assert result.get("tcp_bw") > 0
    assert result.get("tcp_lat") > 0
