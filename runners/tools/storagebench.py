"""BeeGFS StorageBench adapter: the storage targets' own streaming benchmark, via a driver."""

from __future__ import annotations

import sys
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

# The directory holding the ``runners`` package, so ``python -m`` finds the driver anywhere.
PROJECT_ROOT = Path(__file__).resolve().parents[2]
DRIVER = "runners.tools.storagebench_driver"
REASON_FILE = "storagebench-reason.txt"


class StoragebenchAdapter(Adapter):
    """``beegfs-ctl --storagebench`` (BeeGFS 7.x) is asynchronous, so the argv runs
    ``python -m runners.tools.storagebench_driver``: start, poll ``--status`` every
    ``interval`` seconds, print the final ``--status --verbose`` report, then ``--cleanup``.
    Which beegfs-ctl, and against which management daemon, is the node's own setting
    (BEEWEB_BEEGFS_CTL in its worker's environment), never the run's.

    Targets: ``targetids``, else the run's target (a matrix's ``target`` axis: the target's
    BeeGFS id from the inventory), else all of them. A read run is self-contained, as dd's and
    IOR's are: its ``prepare`` step writes the data unmeasured and keeps it (the executor drops
    the held servers' caches in between when the matrix asks), then the measured read runs and
    cleans up. The files live inside the storage targets, not in the workdir, and every exit
    but a preparing write's success removes them (``--cleanup``).
    """

    tool = "storagebench"
    binary = "beegfs-ctl"
    params = params_dict(
        Param(
            "direction",
            "choice",
            "write or read benchmark",
            default="write",
            choices=("write", "read"),
        ),
        Param(
            "blocksize",
            "size",
            "bytes per I/O call (--blocksize)",
            default="512k",
            min=1024,
            max=2**30,
        ),
        Param("size", "size", "bytes per thread per target (--size)", default="1g", min=1024),
        Param("threads", "int", "threads per target (--threads)", default=1, min=1, max=1024),
        Param(
            "targetids",
            "list",
            "storage target ids; empty: all targets (--alltargets)",
            default=(),
            item="int",
            min=1,
            max=65535,
        ),
        Param("direct", "bool", "O_DIRECT on the targets (--odirect)", default=False),
        Param("interval", "seconds", "seconds between status polls", default=5, min=1, max=600),
        Param(
            "timeout",
            "seconds",
            "give up (and stop the benchmark) after this long",
            default=3600,
            min=10,
        ),
    )
    retired = {"keep": KEEP_RETIRED}

    def _check(self, p: dict[str, Any], ctx: LaunchContext | None) -> None:
        if ctx is not None and ctx.target_ids and p["targetids"]:
            if sorted(p["targetids"]) != sorted(ctx.target_ids):
                ids = ",".join(map(str, ctx.target_ids))
                raise ParamError(
                    "targetids",
                    f"the run is on one target (BeeGFS target id {ids}): leave targetids "
                    "empty or name that target",
                )

    def _build(self, p: dict[str, Any], ctx: LaunchContext) -> Command:
        ids = list(p["targetids"]) or list(ctx.target_ids)
        reason = ctx.scratch / REASON_FILE
        base = [sys.executable, "-m", DRIVER]
        base += ["--interval", str(p["interval"]), "--timeout", str(p["timeout"])]
        base += ["--reason-file", str(reason)]
        base.append("--targetids=" + ",".join(map(str, ids)) if ids else "--alltargets")
        shape = [
            f"--blocksize={format_size(p['blocksize'], upper=True)}",
            f"--size={format_size(p['size'], upper=True)}",
            f"--threads={p['threads']}",
        ]
        if p["direct"]:
            shape.append("--odirect")
        argv = [*base, f"--{p['direction']}", *shape]
        prepare = [] if p["direction"] == "write" else [[*base, "--write", *shape, "--keep"]]
        return Command(
            argv=argv,
            files={},
            env={"PYTHONPATH": str(PROJECT_ROOT)},
            cwd=ctx.scratch,
            parse_options={},
            data_bytes=p["size"] * p["threads"] * len(ids) if ids else None,
            prepare=prepare,
            reason_file=reason,
        )


ADAPTER = StoragebenchAdapter()
