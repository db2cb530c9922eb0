"""BeeGFS StorageBench adapter: the storage targets' own streaming benchmark, via a driver."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from runners.tools.base import (
    Adapter,
    Command,
    LaunchContext,
    Param,
    format_size,
    params_dict,
)

# The directory holding the ``runners`` package, so ``python -m`` finds the driver anywhere.
PROJECT_ROOT = Path(__file__).resolve().parents[2]
DRIVER = "runners.tools.storagebench_driver"


class StoragebenchAdapter(Adapter):
    """``beegfs-ctl --storagebench`` (BeeGFS 7.x) is asynchronous, so the argv runs
    ``python -m runners.tools.storagebench_driver``: start, poll ``--status`` every
    ``interval`` seconds, print the final ``--status --verbose`` report, then ``--cleanup``.

    A read benchmark reads what an earlier write left behind: run the write with ``keep``.
    The files live inside the storage targets, not in the workdir.
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
        Param("keep", "bool", "skip --cleanup so a read benchmark can follow", default=False),
    )

    def _build(self, p: dict[str, Any], ctx: LaunchContext) -> Command:
        argv = [sys.executable, "-m", DRIVER, "--ctl", self.binary]
        argv += ["--interval", str(p["interval"]), "--timeout", str(p["timeout"])]
        if p["targetids"]:
            argv.append("--targetids=" + ",".join(str(t) for t in p["targetids"]))
        else:
            argv.append("--alltargets")
        argv += [
            f"--{p['direction']}",
            f"--blocksize={format_size(p['blocksize'], upper=True)}",
            f"--size={format_size(p['size'], upper=True)}",
            f"--threads={p['threads']}",
        ]
        if p["direct"]:
            argv.append("--odirect")
        if p["keep"]:
            argv.append("--keep")
        data = None
        if p["targetids"]:
            data = p["size"] * p["threads"] * len(p["targetids"])
        return Command(
            argv=argv,
            files={},
            env={"PYTHONPATH": str(PROJECT_ROOT)},
            cwd=ctx.scratch,
            parse_options={},
            data_bytes=data,
        )


ADAPTER = StoragebenchAdapter()
