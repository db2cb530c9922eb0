"""IOzone adapter: throughput mode (-t) on one node, or over clients with -+m."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from runners.tools.base import (
    KEEP_RETIRED,
    KIB,
    Adapter,
    Command,
    LaunchContext,
    Param,
    ParamError,
    params_dict,
)

# -i numbers: 0 write/rewrite, 1 read/reread, 2 random read/write, 3 backwards read,
# 4 record rewrite, 5 stride read, 6 fwrite/refwrite, 7 fread/refread, 8 random mix,
# 9 pwrite/repwrite, 10 pread/repread, 11 pwritev/repwritev, 12 preadv/repreadv.
TESTS = tuple(str(n) for n in range(13))


def iozone_size(nbytes: int) -> str:
    """IOzone -r/-s syntax: a bare number means kB, so always give a k/m/g suffix."""
    for power, suffix in ((3, "g"), (2, "m")):
        if nbytes % KIB**power == 0:
            return f"{nbytes // KIB**power}{suffix}"
    return f"{nbytes // KIB}k"


class IozoneAdapter(Adapter):
    """IOzone 3.4xx in throughput mode: ``-t N`` children, each with its own file.

    Single mode names the files with ``-F`` inside ``directory``. Multihost mode writes the
    ``-+m`` client file (``client workdir iozone file`` per child, the 4-field format) to
    scratch with ``tasks_per_node`` lines per host, runs ``-t hosts x tasks_per_node`` and sets
    ``RSH=ssh`` so the master reaches the clients through ssh. The clients' iozone path is this
    node's (``shutil.which``), as cluster nodes usually share one image.
    """

    tool = "iozone"
    binary = "iozone"
    retired = {"keep": KEEP_RETIRED}
    params = params_dict(
        Param(
            "tests",
            "list",
            "tests to run (-i): 0 write, 1 read, 2 random, ... 12",
            default=("0", "1"),
            choices=TESTS,
        ),
        Param(
            "record_size",
            "size",
            "bytes per I/O call (-r), a multiple of 1k",
            default="1m",
            min=KIB,
            max=2**34,
        ),
        Param(
            "file_size",
            "size",
            "bytes per file/child (-s), a multiple of 1k",
            default="1g",
            min=KIB,
        ),
        Param("threads", "int", "children in single mode (-t)", default=1, min=1, max=4096),
        Param("direct", "bool", "O_DIRECT (-I)", default=False),
        Param("include_flush", "bool", "include fsync/fflush in the timing (-e)", default=False),
        Param("include_close", "bool", "include close() in the timing (-c)", default=False),
        Param("ops", "bool", "results in operations/s (-O)", default=False),
        Param("no_retests", "bool", "skip rewrite/reread (-+n)", default=False),
        Param("directory", "path", "directory for the files, relative to the workdir", default="."),
    )

    def _check(self, p: dict[str, Any], ctx: LaunchContext | None) -> None:
        if not p["tests"]:
            raise ParamError("tests", "give at least one test")
        for name in ("record_size", "file_size"):
            if p[name] % KIB:
                raise ParamError(name, "must be a multiple of 1k (IOzone counts in kB)")
        if p["record_size"] > p["file_size"]:
            raise ParamError("record_size", "is larger than file_size")
        if ctx is not None and ctx.mode == "multihost" and p["threads"] != 1:
            raise ParamError(
                "threads", "multihost mode runs tasks_per_node children per host; leave threads"
            )

    def _build(self, p: dict[str, Any], ctx: LaunchContext) -> Command:
        argv = [self.binary]
        for test in p["tests"]:
            argv += ["-i", test]
        argv += ["-r", iozone_size(p["record_size"]), "-s", iozone_size(p["file_size"])]
        flags = (
            ("direct", "-I"),
            ("include_flush", "-e"),
            ("include_close", "-c"),
            ("ops", "-O"),
            ("no_retests", "-+n"),
        )
        argv_flags = [flag for name, flag in flags if p[name]]
        directory = self.abspath(p["directory"], ctx)
        files: dict[str, str] = {}
        env: dict[str, str] = {}
        if ctx.mode == "multihost":
            remote = shutil.which(self.binary) or f"/usr/bin/{self.binary}"
            data_files: list[Path] = []
            lines = []
            for host in ctx.hosts:
                for task in range(ctx.tasks_per_node):
                    path = directory / f"iozone.{host.name}.{task}.tmp"
                    data_files.append(path)
                    lines.append(f"{host.address} {ctx.workdir} {remote} {path}\n")
            clients = ctx.scratch / "clients"
            files[str(clients)] = "".join(lines)
            env["RSH"] = "ssh"
            argv += ["-t", str(len(data_files))] + argv_flags + ["-+m", str(clients)]
        else:
            data_files = [directory / f"iozone.{n}.tmp" for n in range(p["threads"])]
            argv += ["-t", str(len(data_files))] + argv_flags
            argv += ["-F"] + [str(f) for f in data_files]
        return Command(
            argv=argv,
            files=files,
            env=env,
            cwd=ctx.workdir,
            parse_options={},
            data_bytes=p["file_size"] * len(data_files),
            dirs=[directory],
        )


ADAPTER = IozoneAdapter()
