"""mdtest adapter: metadata rates (create, stat, read, remove), alone or under mpirun."""

from __future__ import annotations

from typing import Any

from runners.tools.base import (
    Adapter,
    Command,
    LaunchContext,
    Param,
    ParamError,
    mpi_launch,
    params_dict,
)

# beeweb phase name -> mdtest flag; none given runs them all.
PHASES = {"create": "-C", "stat": "-T", "read": "-E", "remove": "-r"}


class MdtestAdapter(Adapter):
    """mdtest 1.9/3.x/4.x. mdtest creates ``directory`` itself (the executor creates its
    parents) inside the run's own directory, which the executor removes afterwards. Its version
    shows in its own output banner."""

    tool = "mdtest"
    binary = "mdtest"
    params = params_dict(
        Param(
            "items",
            "int",
            "files/dirs per task (-n); default 1000 unless items_per_dir",
            min=1,
            max=2**31,
        ),
        Param("items_per_dir", "int", "items per tree directory (-I)", min=1, max=2**31),
        Param("iterations", "int", "repetitions (-i)", default=1, min=1, max=1000),
        Param("depth", "int", "depth of the directory tree (-z)", default=0, min=0, max=32),
        Param(
            "branch", "int", "subdirectories per tree directory (-b)", default=1, min=1, max=1024
        ),
        Param("unique_dir", "bool", "a working directory per task (-u)", default=False),
        Param("files_only", "bool", "files only (-F)", default=False),
        Param("dirs_only", "bool", "directories only (-D)", default=False),
        Param("leaf_only", "bool", "items in the leaves of the tree only (-L)", default=False),
        Param("sync", "bool", "sync each file after writing it (-y)", default=False),
        Param("write_bytes", "size", "bytes written to each file on create (-w)", min=0, max=2**34),
        Param("read_bytes", "size", "bytes read from each file (-e)", min=0, max=2**34),
        Param(
            "phases",
            "list",
            "phases to run (create, stat, read, remove); empty: all",
            default=(),
            choices=tuple(PHASES),
        ),
        Param(
            "directory",
            "path",
            "test directory (-d), relative to the workdir",
            default="mdtest",
        ),
    )

    def _check(self, p: dict[str, Any], ctx: LaunchContext | None) -> None:
        if p["items"] is not None and p["items_per_dir"] is not None:
            raise ParamError("items_per_dir", "give items or items_per_dir, not both")
        if p["items"] is None and p["items_per_dir"] is None:
            p["items"] = 1000
        if p["files_only"] and p["dirs_only"]:
            raise ParamError("dirs_only", "files_only and dirs_only exclude each other")
        if p["read_bytes"] and (p["write_bytes"] or 0) < p["read_bytes"]:
            raise ParamError("read_bytes", "cannot be larger than write_bytes")

    def _items_per_task(self, p: dict[str, Any]) -> int:
        if p["items"] is not None:
            return p["items"]
        depth, branch = p["depth"], p["branch"]
        dirs = branch**depth if p["leaf_only"] else sum(branch**k for k in range(depth + 1))
        return p["items_per_dir"] * dirs

    def _build(self, p: dict[str, Any], ctx: LaunchContext) -> Command:
        directory = self.abspath(p["directory"], ctx)
        argv = [self.binary]
        if p["items"] is not None:
            argv += ["-n", str(p["items"])]
        else:
            argv += ["-I", str(p["items_per_dir"])]
        argv += ["-i", str(p["iterations"])]
        if p["depth"]:
            argv += ["-z", str(p["depth"]), "-b", str(p["branch"])]
        flags = (
            ("unique_dir", "-u"),
            ("files_only", "-F"),
            ("dirs_only", "-D"),
            ("leaf_only", "-L"),
            ("sync", "-y"),
        )
        argv += [flag for name, flag in flags if p[name]]
        if p["write_bytes"]:
            argv += ["-w", str(p["write_bytes"])]
        if p["read_bytes"]:
            argv += ["-e", str(p["read_bytes"])]
        argv += [PHASES[phase] for phase in p["phases"]]
        argv += ["-d", str(directory)]

        files: dict[str, str] = {}
        if ctx.mode == "mpi":
            argv, files = mpi_launch(argv, ctx)
        data = 0
        if p["write_bytes"] and not p["dirs_only"]:
            data = self._items_per_task(p) * ctx.tasks * p["write_bytes"]
        return Command(
            argv=argv,
            files=files,
            env={},
            cwd=ctx.workdir,
            parse_options={},
            data_bytes=data,
            dirs=[directory.parent] if directory != ctx.workdir else [],
        )


ADAPTER = MdtestAdapter()
