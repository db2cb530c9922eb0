"""dd adapter: a sequential write from /dev/zero, or a read to /dev/null of a file it writes
first."""

from __future__ import annotations

from typing import Any

from runners.tools.base import (
    KEEP_RETIRED,
    Adapter,
    Command,
    LaunchContext,
    Param,
    ParamError,
    format_size,
    params_dict,
)


class DdAdapter(Adapter):
    """GNU dd. It prints its transfer summary on **stderr**: the executor must capture stderr
    (or merge it into stdout) for runners.parsers.dd.

    A read run is self-contained: its ``prepare`` step writes the file first (``conv=excl``,
    so it never overwrites anything, and ``conv=fsync``, so it is on disk), the executor drops
    the caches when the matrix asks for it, then the measured dd reads the file. There is no
    ``keep``: the file lives in the run's own directory, which the executor removes.
    """

    tool = "dd"
    binary = "dd"
    retired = {"keep": KEEP_RETIRED}
    params = params_dict(
        Param(
            "direction",
            "choice",
            "write: /dev/zero -> file; read: writes the file, then file -> /dev/null",
            default="write",
            choices=("write", "read"),
        ),
        Param("bs", "size", "bytes per read/write call", default="1m", min=512, max=2**31),
        Param("count", "int", "number of blocks", default=1024, min=1, max=2**40),
        Param("file", "path", "data file, relative to the workdir", default="dd.tmp"),
        Param("direct", "bool", "O_DIRECT (oflag=direct / iflag=direct)", default=False),
        Param(
            "fdatasync",
            "bool",
            "conv=fdatasync: include the final flush (write only)",
            default=False,
        ),
    )

    def _check(self, p: dict[str, Any], ctx: LaunchContext | None) -> None:
        if p["fdatasync"] and p["direction"] != "write":
            raise ParamError("fdatasync", "only applies to direction=write")
        if p["file"] == ".":
            raise ParamError("file", "must name a file inside the workdir, not the workdir")

    def _build(self, p: dict[str, Any], ctx: LaunchContext) -> Command:
        path = self.abspath(p["file"], ctx)
        blocks = [f"bs={format_size(p['bs'], upper=True)}", f"count={p['count']}"]
        prepare: list[list[str]] = []
        if p["direction"] == "write":
            argv = [self.binary, "if=/dev/zero", f"of={path}", *blocks]
        else:
            prepare.append([self.binary, "if=/dev/zero", f"of={path}", *blocks, "conv=excl,fsync"])
            argv = [self.binary, f"if={path}", "of=/dev/null", *blocks]
        if p["direct"]:
            argv.append("oflag=direct" if p["direction"] == "write" else "iflag=direct")
        if p["fdatasync"]:
            argv.append("conv=fdatasync")
        return Command(
            argv=argv,
            files={},
            env={},
            cwd=ctx.workdir,
            parse_options={"op": p["direction"]},
            data_bytes=p["bs"] * p["count"],
            dirs=[path.parent],
            prepare=prepare,
        )


ADAPTER = DdAdapter()
