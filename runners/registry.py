"""The tool registry: every benchmark tool beeweb knows, in one table.

One ``ToolSpec`` per tool names its parser (``runners.parsers.<module>``), its adapter
(``runners.tools.<module>``, None for tools whose output is imported but never launched), the
command that prints its version, the metrics a comparison of its runs opens on, the modes it
can be launched in and the Debian package that brings it. Everything else reads this table:
``runners.parsers`` (detection and ``get_parser``), ``runners.tools.ADAPTERS``, the model
choices of ``Run.tool`` and ``Matrix.tool`` (callables, so a new tool needs no migration),
the import form, the API's enums and the limits (tools that run on the storage servers).

Pure Python: no Django, and the parser and adapter modules are imported by whoever needs
them, not here. To add a tool, add one ``ToolSpec`` below (see CONTRIBUTING.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from runners import metrics

# How a tool can be launched (runners.tools.base.MODES): "single" runs it on the launcher
# node, "mpi" under mpirun over the client hosts, "multihost" through the tool's own client/
# server protocol. A tool without modes is import-only: beeweb reads its output, never runs it.
# The matrices' "slurm" mode is not listed here: it runs a tool with "mpi" (else "single") as
# steps of a Slurm job (runners.slurm.inner_mode).
LAUNCH_MODES = ("single", "mpi", "multihost")
IMPORT_ONLY = "import-only"
# The name stored for a run whose tool beeweb does not know (imported numbers).
OTHER = "other"
MAX_NAME = 16  # Run.tool / Matrix.tool max_length


@dataclass(frozen=True)
class ToolSpec:
    name: str
    label: str
    parser: str | None = None  # module path; None: no parser (OTHER)
    adapter: str | None = None  # module path; None: import-only
    version: tuple[str, ...] | None = None  # argv printing the version; None: output says it
    metrics: tuple[str, ...] = ()  # default metrics, the first one is what comparisons open on
    modes: tuple[str, ...] = ()  # launch modes (LAUNCH_MODES); () with an adapter is an error
    package: str | None = None  # Debian package ("" or None: built by the site)
    on_servers: bool = False  # runs on the storage servers: its data crosses no network

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or self.name != self.name.lower():
            raise ValueError(f"{self.name!r}: a tool name is a lowercase identifier")
        if len(self.name) > MAX_NAME:
            raise ValueError(f"{self.name!r}: at most {MAX_NAME} characters (Run.tool)")
        unknown = [m for m in self.metrics if m not in metrics.UNITS]
        if unknown:
            raise ValueError(f"{self.name}: metrics outside the vocabulary: {unknown}")
        if not set(self.modes) <= set(LAUNCH_MODES):
            raise ValueError(f"{self.name}: unknown launch modes {self.modes}")
        if bool(self.adapter) != bool(self.modes):
            raise ValueError(f"{self.name}: an adapter needs launch modes and modes an adapter")

    @property
    def runnable(self) -> bool:
        return self.adapter is not None

    @property
    def launch_modes(self) -> tuple[str, ...]:
        """Its modes, or ("import-only",)."""
        return self.modes or (IMPORT_ONLY,)

    @property
    def default_metric(self) -> str | None:
        return self.metrics[0] if self.metrics else None


def _tool(name: str, label: str, *, runs: bool = True, **fields) -> ToolSpec:
    """A tool whose parser is ``runners.parsers.<name>`` and, when it ``runs``, whose adapter
    is ``runners.tools.<name>``."""
    fields.setdefault("parser", f"runners.parsers.{name}")
    if runs:
        fields.setdefault("adapter", f"runners.tools.{name}")
    return ToolSpec(name, label, **fields)


# Output detection asks the parsers in this order (the first of equal confidences wins).
TOOLS: tuple[ToolSpec, ...] = (
    _tool(
        "ior",
        "IOR",
        version=("ior", "--version"),
        metrics=("write_bw", "read_bw", "write_iops", "read_iops"),
        modes=("single", "mpi"),
    ),
    _tool(
        "mdtest",
        "mdtest",
        version=None,  # its banner names the version
        metrics=("file_create", "file_stat", "file_read", "file_remove", "dir_create"),
        modes=("single", "mpi"),
    ),
    _tool(
        "io500",
        "IO500",
        runs=False,
        metrics=("io500_score", "io500_bw_score", "io500_md_score"),
    ),
    _tool(
        "fio",
        "fio",
        version=("fio", "--version"),
        metrics=("write_bw", "read_bw", "write_iops", "read_iops", "write_lat", "read_lat"),
        modes=("single", "multihost"),
        package="fio",
    ),
    _tool(
        "dd",
        "dd",
        version=("dd", "--version"),
        metrics=("write_bw", "read_bw", "bw"),
        modes=("single",),
        package="coreutils",
    ),
    _tool(
        "elbencho",
        "elbencho",
        version=("elbencho", "--version"),
        metrics=("write_bw", "read_bw", "write_iops", "read_iops", "file_create"),
        modes=("single", "multihost"),
    ),
    _tool(
        "iozone",
        "IOzone",
        version=("iozone", "-v"),
        metrics=("write_bw", "read_bw", "rewrite_bw", "reread_bw", "randwrite_bw", "randread_bw"),
        modes=("single", "multihost"),
        package="iozone3",  # Debian non-free
    ),
    _tool(
        "qperf",
        "qperf",
        version=("qperf", "--version"),
        metrics=("tcp_bw", "tcp_lat", "rc_bw", "rc_lat"),
        modes=("single",),
        package="qperf",
    ),
    _tool(
        "perftest",
        "perftest",
        runs=False,
        metrics=("ib_write_bw", "ib_read_bw", "ib_send_bw"),
        package="perftest",
    ),
    _tool(
        "storagebench",
        "BeeGFS StorageBench",
        version=None,  # beegfs-ctl has no --version; the testbed records the BeeGFS version
        metrics=("write_bw", "read_bw"),
        modes=("single",),
        on_servers=True,
    ),
    _tool(
        "ioping",
        "ioping",
        version=("ioping", "-v"),
        metrics=("read_lat", "read_iops", "write_lat", "write_iops"),
        modes=("single",),
        package="ioping",
    ),
    ToolSpec(OTHER, "other"),
)

BY_NAME: dict[str, ToolSpec] = {t.name: t for t in TOOLS}
if len(BY_NAME) != len(TOOLS):  # pragma: no cover - caught by the tests at once
    raise ValueError("a tool is registered twice")


def get(name: str) -> ToolSpec:
    """The tool called ``name``; KeyError for an unknown one."""
    return BY_NAME[name]


def names() -> list[str]:
    """Every tool's name (``Tool.values``)."""
    return [t.name for t in TOOLS]


def runnable() -> list[ToolSpec]:
    """The tools beeweb can launch (those with an adapter)."""
    return [t for t in TOOLS if t.runnable]


def parsed() -> list[ToolSpec]:
    """The tools whose output beeweb reads, in detection order."""
    return [t for t in TOOLS if t.parser]


def tool_choices() -> list[tuple[str, str]]:
    """(name, label) of every tool: the choices of ``Run.tool`` (a callable, so adding a tool
    needs no migration)."""
    return [(t.name, t.label) for t in TOOLS]


def runnable_choices() -> list[tuple[str, str]]:
    """(name, label) of the tools a matrix can launch: the choices of ``Matrix.tool``."""
    return [(t.name, t.label) for t in runnable()]


def default_metric(name: str, fallback: str = "write_bw") -> str:
    """The metric a comparison of ``name``'s runs opens on."""
    spec = BY_NAME.get(name)
    return (spec.default_metric if spec else None) or fallback


def on_servers() -> frozenset[str]:
    """Tools that run on the storage servers themselves (their data crosses no network)."""
    return frozenset(t.name for t in TOOLS if t.on_servers)


def packages() -> list[str]:
    """Debian packages that bring the runnable tools (for CI and the worker image)."""
    return sorted({t.package for t in runnable() if t.package})
