"""Shared vocabulary for the tool adapters: parameters, launch context, commands, ParamError.

Nothing here imports Django. An adapter turns a dict of user parameters into a ``Command``:
an argv list that never passes through a shell, plus the files the executor writes first.
Every value is checked against its ``Param`` before it reaches an argv, so a parameter can
never become an option, a second command or a path outside the benchmark directory.
"""

from __future__ import annotations

import ipaddress
import os
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from runners import registry

KINDS = ("int", "size", "choice", "bool", "path", "seconds", "host", "list", "str")
MODES = ("single", "mpi", "multihost")

# Caps that keep a typo from asking for an exabyte or a month-long run.
MAX_SIZE = 2**60
MAX_INT = 2**63 - 1
MAX_SECONDS = 30 * 86400
MAX_TASKS_PER_NODE = 4096
KIB = 1024
MAX_TEXT = 4096  # PATH_MAX; also keeps int() away from its digit limit


class ParamError(ValueError):
    """A parameter (or launch setting) is missing, malformed, unsafe or out of range."""

    def __init__(self, param: str, message: str):
        self.param = param
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        return f"{self.param}: {self.message}"


# --- value checks --------------------------------------------------------------------------

_INT_RE = re.compile(r"^\d+\Z", re.ASCII)
_SIZE_RE = re.compile(r"^(\d+)(?:\.(\d+))?(?:([kmgtp])(?:i?b)?|b)?\Z", re.I | re.A)
_SECONDS_RE = re.compile(r"^(\d+)(s|m|h|d)?\Z", re.I | re.A)
_SECONDS_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_CONTROL_CHARS = "control characters (newline, NUL, ...) are not allowed"
_TRUE = {"1", "true", "yes", "on", "y"}
_FALSE = {"0", "false", "no", "off", "n"}
# Path characters: no whitespace, quotes, shell syntax or controls, and none of the separators
# tools split a path on: '@' (IOR -o and mdtest -d take "a@b"), ':' (fio directory lists), ','.
_PATH_RE = re.compile(r"^[A-Za-z0-9._+=/-]+\Z")
_TOKEN_RE = re.compile(r"^[A-Za-z0-9._+@%,=:/-]+\Z")
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME_RE = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*\.?\Z")


def _text(value: Any, param: str) -> str:
    """``value`` as a stripped string without control characters (NUL, newline, ...)."""
    if not isinstance(value, str):
        raise ParamError(param, f"expected text, got {type(value).__name__}")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise ParamError(param, _CONTROL_CHARS)
    text = value.strip()
    if not text:
        raise ParamError(param, "must not be empty")
    if len(text) > MAX_TEXT:
        raise ParamError(param, f"is longer than {MAX_TEXT} characters")
    if text.startswith("-"):
        raise ParamError(param, f"{text!r} starts with '-' and would be read as an option")
    return text


def _bounds(number: int, param: str, lo: int | None, hi: int | None, unit: str = "") -> int:
    shown = f"{number}{unit}" if number < 10**20 else "the value"
    if lo is not None and number < lo:
        raise ParamError(param, f"{shown} is below the minimum {lo}{unit}")
    if hi is not None and number > hi:
        raise ParamError(param, f"{shown} is above the maximum {hi}{unit}")
    return number


def clean_int(value: Any, param: str, lo: int | None = None, hi: int | None = None) -> int:
    """A whole number (int or digits) within [lo, hi]."""
    if isinstance(value, bool):
        raise ParamError(param, "expected a whole number, got a boolean")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        text = _text(value, param) if isinstance(value, str) else value
        if not isinstance(text, str) or not _INT_RE.match(text):
            raise ParamError(param, f"expected a whole number, got {value!r}")
        value = int(text)
    return _bounds(value, param, lo, MAX_INT if hi is None else hi)


def clean_size(value: Any, param: str, lo: int | None = None, hi: int | None = None) -> int:
    """Bytes from 512, '4k', '4K', '4KiB', '1m', '2g', '1.5m' (binary multiples)."""
    if isinstance(value, bool):
        raise ParamError(param, "expected a size such as 4k, 1m or 2g, got a boolean")
    if isinstance(value, int):
        number = value
    else:
        text = _text(value, param) if isinstance(value, str) else None
        m = _SIZE_RE.match(text) if text is not None else None
        if not m:
            raise ParamError(param, f"expected a size such as 4k, 1m or 2g, got {value!r}")
        whole, frac, prefix = m.groups()
        power = "kmgtp".index(prefix.lower()) + 1 if prefix else 0
        exact = Fraction(f"{whole}.{frac or 0}") * 1024**power
        if exact.denominator != 1:
            raise ParamError(param, f"{text!r} is not a whole number of bytes")
        number = int(exact)
    if number < 0:
        raise ParamError(param, "must not be negative")
    return _bounds(number, param, lo, MAX_SIZE if hi is None else hi, " bytes")


def clean_seconds(value: Any, param: str, lo: int | None = None, hi: int | None = None) -> int:
    """Whole seconds from 30, '30', '30s', '5m', '1h'."""
    if isinstance(value, bool):
        raise ParamError(param, "expected seconds, got a boolean")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        number = value
    else:
        text = _text(value, param) if isinstance(value, str) else None
        m = _SECONDS_RE.match(text) if text is not None else None
        if not m:
            raise ParamError(param, f"expected seconds such as 30, 30s, 5m or 1h, got {value!r}")
        number = int(m.group(1)) * _SECONDS_UNITS[(m.group(2) or "s").lower()]
    if number < 0:
        raise ParamError(param, "must not be negative")
    return _bounds(number, param, lo, MAX_SECONDS if hi is None else hi, " s")


def clean_bool(value: Any, param: str) -> bool:
    """True/False from a bool, 0/1, or yes/no/true/false/on/off."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        key = value.strip().lower()
        if key in _TRUE:
            return True
        if key in _FALSE:
            return False
    raise ParamError(param, f"expected true or false, got {value!r}")


def clean_choice(value: Any, param: str, choices: tuple[str, ...]) -> str:
    """One of ``choices`` (case-insensitive match, returned as spelled in ``choices``)."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    text = _text(value, param)
    for choice in choices:
        if text.lower() == choice.lower():
            return choice
    raise ParamError(param, f"{text!r} is not one of {', '.join(choices)}")


def clean_host(value: Any, param: str) -> str:
    """A hostname (RFC 1123) or an IPv4/IPv6 address, canonical form."""
    text = _text(value, param)
    if "%" not in text:  # no IPv6 zone ids: their text is free-form
        try:
            return str(ipaddress.ip_address(text))
        except ValueError:
            pass
    if len(text) <= 253 and _HOSTNAME_RE.match(text) and not text.replace(".", "").isdigit():
        return text.rstrip(".")
    raise ParamError(param, f"{text!r} is not a hostname or an IP address")


def clean_token(value: Any, param: str) -> str:
    """A plain word: letters, digits and ._+@%,=:/- only, not starting with '-'."""
    text = _text(value, param)
    if not _TOKEN_RE.match(text):
        raise ParamError(param, f"{text!r} holds characters other than letters, digits, ._+@%,=:/-")
    return text


def _inside(path: str, root: str) -> bool:
    return path == root or os.path.commonpath([path, root]) == root


def clean_path(value: Any, param: str, workdir: Path | None = None) -> str:
    """A path inside the benchmark directory, returned relative to it ('.' for itself).

    Relative paths are taken from ``workdir``; absolute ones must lie inside it. '..' may not
    leave it, and neither may a symlink along the path (resolved where the path exists).
    Without ``workdir`` only the text is checked (absolute paths are checked at build time).
    """
    if isinstance(value, Path):
        value = str(value)
    text = _text(value, param)
    if not _PATH_RE.match(text):
        raise ParamError(param, f"{text!r} holds characters other than letters, digits, ._+=/-")
    parts = [p for p in text.split("/") if p]
    if any(p.startswith("-") for p in parts):
        raise ParamError(param, f"{text!r} has a component starting with '-'")
    normal = posixpath.normpath(text)
    if workdir is None:
        if not posixpath.isabs(normal) and (normal == ".." or normal.startswith("../")):
            raise ParamError(param, f"{text!r} leaves the benchmark directory")
        return normal
    root = os.path.normpath(str(workdir))
    full = os.path.normpath(os.path.join(root, normal))
    if not _inside(full, root):
        raise ParamError(param, f"{text!r} is outside the benchmark directory {root}")
    if not _inside(os.path.realpath(full), os.path.realpath(root)):
        raise ParamError(param, f"{text!r} leads outside the benchmark directory through a symlink")
    return os.path.relpath(full, root)


# --- parameters ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """One parameter an adapter accepts, with what ``clean`` needs to check it.

    ``min``/``max`` bound ints, sizes (bytes) and seconds, and the items of a list of ints.
    ``item`` is the kind of a list's items ("str" items must be one of ``choices`` when given).
    """

    name: str
    kind: str
    help: str
    default: Any = None
    required: bool = False
    choices: tuple[str, ...] = ()
    min: int | None = None
    max: int | None = None
    item: str = "str"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: unknown parameter kind {self.kind!r}")
        if self.kind == "choice" and not self.choices:
            raise ValueError(f"{self.name}: a choice parameter needs choices")

    def clean(self, value: Any, ctx: LaunchContext | None = None) -> Any:
        """``value`` normalised (bytes for sizes, seconds, bool, relative path...)."""
        return self._clean_one(self.kind, value, ctx, self.name)

    def _clean_one(self, kind: str, value: Any, ctx: LaunchContext | None, where: str) -> Any:
        if kind == "int":
            return clean_int(value, where, self.min, self.max)
        if kind == "size":
            return clean_size(value, where, self.min, self.max)
        if kind == "seconds":
            return clean_seconds(value, where, self.min, self.max)
        if kind == "bool":
            return clean_bool(value, where)
        if kind == "choice":
            return clean_choice(value, where, self.choices)
        if kind == "host":
            return clean_host(value, where)
        if kind == "path":
            return clean_path(value, where, ctx.workdir if ctx is not None else None)
        if kind == "str":
            if self.choices:
                return clean_choice(value, where, self.choices)
            return clean_token(value, where)
        if kind == "list":
            return self._clean_list(value, ctx)
        raise ParamError(where, f"unknown kind {kind!r}")  # pragma: no cover - __post_init__

    def _clean_list(self, value: Any, ctx: LaunchContext | None) -> list[Any]:
        if isinstance(value, str):
            if any(ord(ch) < 32 for ch in value):
                raise ParamError(self.name, _CONTROL_CHARS)
            items: list[Any] = [v.strip() for v in value.split(",")]
        elif isinstance(value, (list, tuple)):
            items = list(value)
        elif isinstance(value, int) and not isinstance(value, bool):
            items = [value]
        else:
            raise ParamError(self.name, f"expected a list, got {type(value).__name__}")
        kind = "choice" if self.item == "str" and self.choices else self.item
        cleaned: list[Any] = []
        for item in items:
            one = self._clean_one(kind, item, ctx, self.name)
            if one not in cleaned:
                cleaned.append(one)
        return cleaned

    def describe(self) -> dict[str, Any]:
        """What a form or the docs need to present this parameter."""
        data: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "help": self.help,
            "default": list(self.default) if isinstance(self.default, tuple) else self.default,
            "required": self.required,
            "choices": list(self.choices),
            "min": self.min,
            "max": self.max,
        }
        if self.kind == "list":
            data["item"] = self.item
        return data


# --- launch --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Host:
    """A client node: its inventory name and the address that reaches it (both checked)."""

    name: str
    address: str

    def __post_init__(self) -> None:
        clean_host(self.name, "hosts")
        object.__setattr__(self, "address", clean_host(self.address, "hosts"))


@dataclass
class LaunchContext:
    """Where and how a command runs; built by the executor, not by users."""

    workdir: Path  # the run's own fresh directory; every path parameter resolves inside it
    scratch: Path  # per-run private dir (hostfiles, job files, result files), made by the executor
    mode: str = "single"  # "single" | "mpi" | "multihost"
    hosts: tuple[Host, ...] = ()  # client nodes for mpi / multihost
    tasks_per_node: int = 1
    mpirun: str = "mpirun"
    # Slurm launch mode (runners.slurm): the job whose allocation the command runs in; MPI
    # tools then start their ranks as a job step (srun --mpi=pmix) instead of under mpirun.
    slurm_job: str = ""
    # BeeGFS target ids of the run's target (inventory ``Target.target_id``): a tool that runs
    # on the storage servers (StorageBench) benchmarks these when its parameters name none.
    target_ids: tuple[int, ...] = ()

    @property
    def nodes(self) -> int:
        """Client nodes the command spans (1 in single mode)."""
        return len(self.hosts) if self.mode != "single" else 1

    @property
    def tasks(self) -> int:
        """MPI ranks in mpi mode, else 1."""
        return len(self.hosts) * self.tasks_per_node if self.mode == "mpi" else 1


@dataclass
class Command:
    """Everything the executor needs to launch one run and read its result.

    The executor runs each command in a fresh directory of its own (``LaunchContext.workdir``)
    and removes that directory afterwards, so a command names no files to clean up and no
    data outlives its run: a run that reads data writes it first (``prepare``).
    """

    argv: list[str]
    files: dict[str, str]  # absolute path (in scratch) -> content, written before launch
    env: dict[str, str]  # variables added to the executor's environment
    cwd: Path
    parse_options: dict[str, Any]  # runners.parsers.parse(text, tool=..., **parse_options)
    data_bytes: int | None  # bytes the run writes (data-set size), None when unknown
    output_file: Path | None = None  # parseable result written to a file instead of stdout
    # Directories inside the workdir the tool expects to exist; the executor creates them.
    dirs: list[Path] = field(default_factory=list)
    # argv lists run before ``argv`` in the same directory (their output is recorded with the
    # run, not parsed), e.g. writing the file a read benchmark then reads.
    prepare: list[list[str]] = field(default_factory=list)
    # A file (in scratch) where the tool writes why it failed, in the words of what it drives
    # (StorageBench's driver: BeeGFS's); the executor adds it to the run's error.
    reason_file: Path | None = None


def check_context(ctx: Any, modes: tuple[str, ...], tool: str) -> LaunchContext:
    """ParamError unless ``ctx`` is a usable LaunchContext for a tool with ``modes``."""
    if not isinstance(ctx, LaunchContext):
        raise ParamError("context", f"expected a LaunchContext, got {type(ctx).__name__}")
    for name in ("workdir", "scratch"):
        value = getattr(ctx, name)
        if not isinstance(value, Path) or not value.is_absolute():
            raise ParamError(name, f"must be an absolute Path, got {value!r}")
        if not _PATH_RE.match(str(value)):
            raise ParamError(name, f"{str(value)!r} holds characters other than ._+=/- and alnum")
    if ctx.mode not in MODES:
        raise ParamError("mode", f"{ctx.mode!r} is not one of {', '.join(MODES)}")
    if ctx.mode not in modes:
        known = ", ".join(modes)
        raise ParamError("mode", f"{tool} cannot run in {ctx.mode} mode (modes: {known})")
    clean_int(ctx.tasks_per_node, "tasks_per_node", 1, MAX_TASKS_PER_NODE)
    clean_token(ctx.mpirun, "mpirun")
    if ctx.mode != "single":
        if not ctx.hosts:
            raise ParamError("hosts", f"{ctx.mode} mode needs at least one client host")
        if not all(isinstance(h, Host) for h in ctx.hosts):
            raise ParamError("hosts", "expected Host entries")
        names = [h.name for h in ctx.hosts]
        if len(set(names)) != len(names):
            raise ParamError("hosts", "a host is listed twice")
    return ctx


def mpi_launch(tool_argv: list[str], ctx: LaunchContext) -> tuple[list[str], dict[str, str]]:
    """``tool_argv`` under mpirun with a hostfile in scratch: (argv, files to write). In a
    Slurm allocation (``ctx.slurm_job``) a job step over its nodes instead: Slurm places the
    ranks and PMIx wires them up (Debian's Open MPI has no Slurm PMI; pmix works)."""
    if ctx.slurm_job:
        job = clean_int(ctx.slurm_job, "slurm job", 1)
        return [
            "srun",
            f"--jobid={job}",
            "--mpi=pmix",
            f"--nodes={len(ctx.hosts)}",
            f"--ntasks-per-node={ctx.tasks_per_node}",
            "--kill-on-bad-exit=1",
        ] + tool_argv, {}
    hostfile = ctx.scratch / "hostfile"
    # Open MPI's mpirun refuses to start as root without --allow-run-as-root and ignores it
    # otherwise. beeweb's workers usually run as root (SECURITY.md): every mpirun line carries
    # it, so the line does not depend on who the worker runs as and the matrix preview, built
    # on the web server, shows the very argv the worker runs.
    argv = [
        ctx.mpirun,
        "--allow-run-as-root",
        "--hostfile",
        str(hostfile),
        "-np",
        str(len(ctx.hosts) * ctx.tasks_per_node),
        "--map-by",
        f"ppr:{ctx.tasks_per_node}:node",
    ]
    content = "".join(f"{h.address} slots={ctx.tasks_per_node}\n" for h in ctx.hosts)
    return argv + tool_argv, {str(hostfile): content}


def format_size(nbytes: int, upper: bool = False) -> str:
    """Bytes in the largest binary unit that divides them exactly: 4096 -> '4k', 1536 -> '1536'."""
    for power, suffix in ((4, "t"), (3, "g"), (2, "m"), (1, "k")):
        unit = 1024**power
        if nbytes >= unit and nbytes % unit == 0:
            return f"{nbytes // unit}{suffix.upper() if upper else suffix}"
    return str(nbytes)


# --- adapters ------------------------------------------------------------------------------

# Why ``keep`` is gone: leaving data for a later run meant a run started in, and a later run
# removed, files it had not created; on a shared node that is how a run overwrote or deleted
# files that were not beeweb's.
KEEP_RETIRED = (
    "each run works in a fresh directory that is removed after it, so nothing outlives a run "
    "(a read benchmark writes its own data first)"
)


class Adapter:
    """One benchmark tool: its parameters and how they become a Command.

    Subclasses set ``tool``, ``binary`` and ``params``, implement ``_build`` and may override
    ``_check`` for rules that span several parameters. The launch modes and the version
    command are the tool's entry in ``runners.registry``.
    """

    tool: str = ""
    binary: str = ""
    params: dict[str, Param] = {}
    # Parameters an adapter no longer takes -> why (shown instead of "unknown parameter").
    retired: dict[str, str] = {}

    def validate(self, params: Mapping[str, Any] | None, ctx: LaunchContext | None = None) -> dict:
        """Checked parameters with defaults filled in; ParamError naming the parameter."""
        if params is None:
            params = {}
        if not isinstance(params, Mapping):
            raise ParamError("params", f"expected a mapping, got {type(params).__name__}")
        if ctx is not None:
            check_context(ctx, self.modes, self.tool)
        for name in params:
            if name in self.retired:
                raise ParamError(str(name), f"is no longer supported: {self.retired[name]}")
            if name not in self.params:
                known = ", ".join(self.params)
                raise ParamError(str(name), f"unknown parameter for {self.tool} (known: {known})")
        clean: dict[str, Any] = {}
        for name, param in self.params.items():
            value = params.get(name)
            if value is None:
                value = param.default
            if value is None:
                if param.required:
                    raise ParamError(name, "is required")
                clean[name] = None
                continue
            clean[name] = param.clean(value, ctx)
        self._check(clean, ctx)
        return clean

    def _check(self, p: dict[str, Any], ctx: LaunchContext | None) -> None:
        """Rules spanning parameters (or the context); raise ParamError. Default: none."""

    def build(self, params: Mapping[str, Any] | None, ctx: LaunchContext) -> Command:
        """The Command for ``params`` launched as ``ctx`` says (validates first)."""
        check_context(ctx, self.modes, self.tool)
        return self._build(self.validate(params, ctx), ctx)

    def _build(self, p: dict[str, Any], ctx: LaunchContext) -> Command:
        raise NotImplementedError

    @property
    def modes(self) -> tuple[str, ...]:
        """The modes it can be launched in (``runners.registry``)."""
        return registry.get(self.tool).modes

    def version_argv(self) -> list[str] | None:
        """argv that prints the tool's version (``runners.registry``), or None when its output
        already shows it."""
        version = registry.get(self.tool).version
        return list(version) if version else None

    def describe(self) -> list[dict[str, Any]]:
        """Parameter descriptions for forms and docs, in declaration order."""
        return [p.describe() for p in self.params.values()]

    # helpers for subclasses

    @staticmethod
    def abspath(relative: str, ctx: LaunchContext) -> Path:
        """A cleaned (relative) path parameter as an absolute path in the benchmark directory."""
        return Path(os.path.normpath(os.path.join(ctx.workdir, relative)))


def params_dict(*params: Param) -> dict[str, Param]:
    """Declaration-ordered name -> Param mapping."""
    return {p.name: p for p in params}


__all__ = [
    "Adapter",
    "Command",
    "Host",
    "LaunchContext",
    "Param",
    "ParamError",
    "check_context",
    "format_size",
    "mpi_launch",
    "params_dict",
]
