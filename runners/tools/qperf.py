"""qperf adapter: the client side of network bandwidth/latency tests against a qperf server."""

from __future__ import annotations

from typing import Any

from runners.tools.base import Adapter, Command, LaunchContext, Param, ParamError, params_dict

TESTS = (
    "tcp_bw",
    "tcp_lat",
    "udp_bw",
    "udp_lat",
    "sdp_bw",
    "sdp_lat",
    "rc_bw",
    "rc_lat",
    "rc_bi_bw",
    "uc_bw",
    "uc_lat",
    "ud_bw",
    "ud_lat",
    "rc_rdma_read_bw",
    "rc_rdma_read_lat",
    "rc_rdma_write_bw",
    "rc_rdma_write_lat",
    "uc_rdma_write_bw",
    "uc_rdma_write_lat",
)


class QperfAdapter(Adapter):
    """qperf client: ``qperf SERVER -t T [-m BYTES] [--listen_port P] TESTS``.

    A qperf server (``server_argv``) must already listen on ``server``. The message size is
    passed in bytes: qperf reads "m" as 10^6 and "M" as 2^20, bytes are unambiguous.
    """

    tool = "qperf"
    binary = "qperf"
    params = params_dict(
        Param("server", "host", "node running the qperf server", required=True),
        Param("tests", "list", "tests to run", default=("tcp_bw", "tcp_lat"), choices=TESTS),
        Param("time", "seconds", "duration of each test (-t)", default=10, min=1, max=3600),
        Param("msg_size", "size", "message size (-m)", min=1, max=2**30),
        Param(
            "port", "int", "server's listen port (--listen_port, default 19765)", min=1, max=65535
        ),
    )

    def server_argv(self, port: int | None = None) -> list[str]:
        """argv of the qperf server to start on the server node first."""
        if port is None:
            return [self.binary]
        return [self.binary, "--listen_port", str(self.params["port"].clean(port))]

    def _check(self, p: dict[str, Any], ctx: LaunchContext | None) -> None:
        if not p["tests"]:
            raise ParamError("tests", "give at least one test")

    def _build(self, p: dict[str, Any], ctx: LaunchContext) -> Command:
        argv = [self.binary, p["server"], "-t", str(p["time"])]
        if p["msg_size"] is not None:
            argv += ["-m", str(p["msg_size"])]
        if p["port"] is not None:
            argv += ["--listen_port", str(p["port"])]
        argv += p["tests"]
        return Command(
            argv=argv,
            files={},
            env={},
            cwd=ctx.workdir,
            parse_options={},
            data_bytes=None,
        )


ADAPTER = QperfAdapter()
