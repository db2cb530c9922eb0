"""elbencho adapter: directory-mode file benchmarks, locally or through elbencho services."""

from __future__ import annotations

import ipaddress
from pathlib import Path
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

# beeweb parameter -> elbencho phase flag, in elbencho's own phase order.
PHASES = (
    ("mkdirs", "--mkdirs"),
    ("write", "--write"),
    ("read", "--read"),
    ("stat", "--stat"),
    ("delfiles", "--delfiles"),
    ("deldirs", "--deldirs"),
)


def _is_ipv6(address: str) -> bool:
    """True for an IPv6 literal, which elbencho's host:port syntax cannot carry."""
    try:
        return ipaddress.ip_address(address).version == 6
    except ValueError:
        return False


class ElbenchoAdapter(Adapter):
    """elbencho 2.x/3.x in directory mode: each thread works in ``<path>/r<rank>/d<n>/``
    (``<path>/r<rank>-f<n>`` with dirs=0). The executor creates the paths; the default is the
    workdir.

    Results go to ``--resfile`` in scratch (``Command.output_file``), which runners.parsers
    .elbencho reads. Multihost mode coordinates ``elbencho --service`` instances already
    running on the clients (``--hosts a,b``); threads, dirs and files are then per host.
    """

    tool = "elbencho"
    binary = "elbencho"
    retired = {"keep": KEEP_RETIRED}
    params = params_dict(
        Param("mkdirs", "bool", "create the directories first (-d)", default=True),
        Param("write", "bool", "write phase (-w)", default=True),
        Param("read", "bool", "read phase (-r)", default=False),
        Param("stat", "bool", "stat phase (--stat)", default=False),
        Param("delfiles", "bool", "delete the files at the end (-F)", default=False),
        Param("deldirs", "bool", "delete the directories at the end (-D)", default=False),
        Param("threads", "int", "I/O threads per host (-t)", default=1, min=1, max=4096),
        Param(
            "dirs",
            "int",
            "directories per thread (-n); 0: threads share the path",
            default=1,
            min=0,
            max=10**6,
        ),
        Param("files", "int", "files per thread per directory (-N)", default=1, min=1, max=10**8),
        Param("size", "size", "bytes per file (-s)", default="1g", min=0),
        Param("block", "size", "bytes per I/O call (-b)", default="1m", min=1, max=2**34),
        Param(
            "iodepth",
            "int",
            "async I/O queue depth per thread (--iodepth)",
            default=1,
            min=1,
            max=65536,
        ),
        Param("direct", "bool", "O_DIRECT (--direct)", default=False),
        Param(
            "paths",
            "list",
            "benchmark directories, relative to the workdir",
            default=(".",),
            item="path",
        ),
    )

    def _check(self, p: dict[str, Any], ctx: LaunchContext | None) -> None:
        if not any(p[name] for name, _ in PHASES):
            raise ParamError("write", "choose at least one phase")
        if not p["paths"]:
            raise ParamError("paths", "give at least one benchmark directory")
        if p["dirs"] == 0 and (p["mkdirs"] or p["deldirs"]):
            name = "mkdirs" if p["mkdirs"] else "deldirs"
            raise ParamError(name, "needs dirs >= 1")
        if p["size"] and p["block"] > p["size"]:
            raise ParamError("block", "is larger than size")
        if ctx is None or ctx.mode != "multihost":
            return
        if ctx.tasks_per_node not in (1, p["threads"]):
            raise ParamError(
                "tasks_per_node", "elbencho takes threads per host from 'threads'; leave it at 1"
            )
        for host in ctx.hosts:
            if _is_ipv6(host.address):
                raise ParamError("hosts", f"elbencho --hosts cannot take IPv6 {host.address}")

    def _argv(
        self, p: dict[str, Any], ctx: LaunchContext, phases: list[str], resfile: Path | None
    ) -> list[str]:
        argv = [self.binary]
        if ctx.mode == "multihost":
            argv.append("--hosts=" + ",".join(h.address for h in ctx.hosts))
        argv += [flag for name, flag in PHASES if name in phases]
        argv += [
            f"--threads={p['threads']}",
            f"--dirs={p['dirs']}",
            f"--files={p['files']}",
            f"--size={format_size(p['size'], upper=True)}",
            f"--block={format_size(p['block'], upper=True)}",
        ]
        if p["iodepth"] != 1:
            argv.append(f"--iodepth={p['iodepth']}")
        if p["direct"]:
            argv.append("--direct")
        argv += ["--nolive"] + ([f"--resfile={resfile}"] if resfile else [])
        return argv + [str(self.abspath(path, ctx)) for path in p["paths"]]

    def _build(self, p: dict[str, Any], ctx: LaunchContext) -> Command:
        resfile = ctx.scratch / "elbencho-results.txt"
        argv = self._argv(p, ctx, [name for name, _ in PHASES if p[name]], resfile)
        # A run that reads, stats or deletes without writing starts in an empty directory of
        # its own: it writes the files first (not into the result file, which is parsed).
        phases = []
        if not p["write"] and (p["read"] or p["stat"] or p["delfiles"]):
            phases = ["mkdirs", "write"] if p["dirs"] else ["write"]
        elif p["deldirs"] and not p["mkdirs"]:
            phases = ["mkdirs"]
        prepare = [self._argv(p, ctx, phases, None)] if phases else []
        ranks = p["threads"] * ctx.nodes
        data = p["size"] * p["files"] * max(p["dirs"], 1) * ranks
        return Command(
            argv=argv,
            files={},
            env={},
            cwd=ctx.workdir,
            parse_options={},
            data_bytes=data,
            dirs=[self.abspath(path, ctx) for path in p["paths"]],
            output_file=resfile,
            prepare=prepare,
        )


ADAPTER = ElbenchoAdapter()
