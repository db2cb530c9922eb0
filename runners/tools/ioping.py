"""ioping adapter: the latency of single requests to a directory in the benchmark directory."""

from __future__ import annotations

from typing import Any

from runners.tools.base import (
    Adapter,
    Command,
    LaunchContext,
    Param,
    ParamError,
    format_size,
    params_dict,
)

# ioping's JSON holds one entry (about 260 bytes) per request: 10,000 requests stay a few MB.
MAX_COUNT = 10_000


class IopingAdapter(Adapter):
    """ioping with ``-J`` (JSON: every request's time in nanoseconds, so runners.parsers.ioping
    gives exact percentiles). The target is always a directory: ioping writes its working set
    to a temporary file there first (unlinked at once), so write mode (-W) never touches
    anything but that file, and the run's directory is removed afterwards anyway.
    """

    tool = "ioping"
    binary = "ioping"
    params = params_dict(
        Param(
            "direction",
            "choice",
            "read requests, or write requests (-W)",
            default="read",
            choices=("read", "write"),
        ),
        Param(
            "count",
            "int",
            "requests, the warmup ones included (-c)",
            default=100,
            min=2,
            max=MAX_COUNT,
        ),
        Param("size", "size", "bytes per request (-s)", default="4k", min=512, max=2**26),
        Param(
            "work_size",
            "size",
            "working set: the temporary file the requests go to (-S)",
            default="1m",
            min=4096,
            max=2**36,
        ),
        Param(
            "interval",
            "seconds",
            "seconds between requests (-i); 0: back to back",
            default=0,
            min=0,
            max=3600,
        ),
        Param("warmup", "int", "first requests not counted (-a)", default=1, min=0, max=1000),
        Param("direct", "bool", "O_DIRECT (-D)", default=False),
        Param(
            "cached", "bool", "keep the page cache: no drop before each request (-C)", default=False
        ),
        Param("path", "path", "directory of the requests, relative to the workdir", default="."),
    )

    def _check(self, p: dict[str, Any], ctx: LaunchContext | None) -> None:
        if p["count"] <= p["warmup"]:
            raise ParamError("count", f"must be above warmup ({p['warmup']}): none would count")
        if p["size"] > p["work_size"]:
            raise ParamError("size", "is larger than the working set (work_size)")
        if p["direct"] and p["cached"]:
            raise ParamError("cached", "direct I/O bypasses the page cache: choose one")

    def _build(self, p: dict[str, Any], ctx: LaunchContext) -> Command:
        directory = self.abspath(p["path"], ctx)
        argv = [
            self.binary,
            "-J",
            "-c",
            str(p["count"]),
            "-i",
            f"{p['interval']}s",
            "-s",
            format_size(p["size"]),
            "-S",
            format_size(p["work_size"]),
            "-a",
            str(p["warmup"]),
        ]
        if p["direction"] == "write":
            argv.append("-W")
        if p["direct"]:
            argv.append("-D")
        if p["cached"]:
            argv.append("-C")
        argv.append(str(directory))
        return Command(
            argv=argv,
            files={},
            env={},
            cwd=ctx.workdir,
            parse_options={"op": p["direction"]},
            data_bytes=p["work_size"],
            dirs=[directory],
        )


ADAPTER = IopingAdapter()
