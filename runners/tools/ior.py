"""IOR adapter: N-1 or N-N bandwidth runs, alone or under mpirun."""

from __future__ import annotations

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
    mpi_launch,
    params_dict,
)


class IorAdapter(Adapter):
    """IOR 3.3/4.x, text output (runners.parsers.ior reads it, including -vv).

    ``-a``, ``-s`` and ``-i`` are left out at IOR's own defaults (POSIX, 1, 1) so the argv reads
    like the command lines in the studies. The executor creates the test file's parent directory.
    """

    tool = "ior"
    binary = "ior"
    retired = {"keep": KEEP_RETIRED}
    params = params_dict(
        Param(
            "api",
            "choice",
            "I/O interface (-a)",
            default="POSIX",
            choices=("POSIX", "MPIIO", "HDF5"),
        ),
        Param("write", "bool", "write phase (-w)", default=True),
        Param("read", "bool", "read phase (-r)", default=True),
        Param("transfer_size", "size", "bytes per I/O call (-t)", default="1m", min=8, max=2**34),
        Param("block_size", "size", "bytes per task per segment (-b)", default="1g", min=8),
        Param("segments", "int", "segment count (-s)", default=1, min=1, max=2**31),
        Param("file_per_proc", "bool", "one file per task, N-N (-F)", default=False),
        Param("iterations", "int", "repetitions (-i)", default=1, min=1, max=1000),
        Param("fsync", "bool", "fsync after the write phase (-e)", default=False),
        Param("reorder", "bool", "read what another node wrote (-C)", default=False),
        Param("random", "bool", "random offsets (-z)", default=False),
        Param("barriers", "bool", "barrier between open, I/O and close (-g)", default=False),
        Param("delay", "seconds", "pause between iterations (-d)", min=1, max=3600),
        Param("use_existing", "bool", "reuse an existing test file (-E)", default=False),
        Param("direct", "bool", "O_DIRECT, POSIX only (--posix.odirect)", default=False),
        Param("test_file", "path", "test file, relative to the workdir (-o)", default="ior_file"),
    )

    def _check(self, p: dict[str, Any], ctx: LaunchContext | None) -> None:
        if not p["write"] and not p["read"]:
            raise ParamError("write", "IOR needs a write and/or a read phase")
        if p["block_size"] % p["transfer_size"]:
            raise ParamError("block_size", "must be a multiple of transfer_size")
        if p["direct"] and p["api"] != "POSIX":
            raise ParamError("direct", "--posix.odirect needs api=POSIX")
        if p["test_file"] == ".":
            raise ParamError("test_file", "must name a file inside the workdir, not the workdir")

    def _argv(self, p: dict[str, Any], test_file: Path, prepare: bool = False) -> list[str]:
        """The measured command, or (``prepare``) one write pass that keeps its file."""
        argv = [self.binary]
        if p["api"] != "POSIX":
            argv += ["-a", p["api"]]
        argv += ["-w"] if p["write"] or prepare else []
        argv += ["-r"] if p["read"] and not prepare else []
        argv += ["-t", format_size(p["transfer_size"]), "-b", format_size(p["block_size"])]
        if p["segments"] != 1:
            argv += ["-s", str(p["segments"])]
        if p["iterations"] != 1 and not prepare:
            argv += ["-i", str(p["iterations"])]
        flags = (
            ("file_per_proc", "-F"),
            ("fsync", "-e"),
            ("reorder", "-C"),
            ("random", "-z"),
            ("barriers", "-g"),
            ("use_existing", "-E"),
            ("direct", "--posix.odirect"),
        )
        argv += [flag for name, flag in flags if p[name]]
        if prepare:
            argv.append("-k")  # keep the file for the measured read
        if p["delay"] is not None:
            argv += ["-d", str(p["delay"])]
        return argv + ["-o", str(test_file)]

    def _build(self, p: dict[str, Any], ctx: LaunchContext) -> Command:
        test_file = self.abspath(p["test_file"], ctx)
        argv = self._argv(p, test_file)
        # A read-only run starts in an empty directory of its own: it writes its file first.
        prepare = [] if p["write"] else [self._argv(p, test_file, prepare=True)]
        files: dict[str, str] = {}
        if ctx.mode == "mpi":
            argv, files = mpi_launch(argv, ctx)
            prepare = [mpi_launch(step, ctx)[0] for step in prepare]
        tasks = ctx.tasks
        return Command(
            argv=argv,
            files=files,
            env={},
            cwd=ctx.workdir,
            parse_options={},
            data_bytes=p["block_size"] * p["segments"] * tasks,
            dirs=[test_file.parent],
            prepare=prepare,
        )


ADAPTER = IorAdapter()
