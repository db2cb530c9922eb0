"""One normal form per kind of parameter value, whatever a tool or a user spelled (issue 25,
finding 3).

IOR is told ``-t 1m``, fio ``bs=4k``, dd ``bs=4K``; parsers state bytes; a bulk client may
send ``"256k"`` or ``4096``. A run's stored parameters (``Run.params``) hold one normal form
per kind, so that filters, sorts, axes, configuration keys and comparisons see one value:

======== ======================= ==================================================
kind     normal form             spellings read
======== ======================= ==================================================
size     int, bytes              4096, 4096.0, "4096", "4k", "4K", "4KiB", "4 KiB",
                                 "1.5m", "1g" (binary multiples, as the adapters
                                 read them: ``runners.tools.base.clean_size``)
seconds  int (float if not whole) 30, "30", "30s", "5m", "1h", "1d", 0.25
bool     True / False            true/false, 1/0, "yes"/"no", "on"/"off", "y"/"n"
int      int                     4, 4.0, "4"
======== ======================= ==================================================

Which names have which kind: ``PARAM_KINDS`` of the canonical names
(``runners.parsers.base``) and every adapter's ``Param`` kinds (``runners.tools``), one table
(``KINDS``). A value that does not read as its kind, and any parameter of another kind
(choices, paths, lists, text) or of no known kind, is kept as given: normalising never loses
what a run stated.

The tool's own spelling is not lost either: an adapter reads the normal form as it reads
``"4k"`` and writes its argv in the tool's syntax (``format_size``: 4096 -> ``4k``, dd
``4K``), so a run's argv is the same from either.

``human`` is the one formatter of parameter values for people ("1 MiB", "30 s", "yes"):
the runs table and its exports, comparison axes and sentences use it; ``parse`` reads what
a user types in a filter (``p.bs=4 KiB``) into the normal form.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from runners.parsers.base import PARAM_KINDS
from runners.tools import ADAPTERS
from runners.tools.base import ParamError, clean_bool, clean_int, clean_seconds, clean_size

NORMALISED = ("size", "seconds", "bool", "int")
# The base unit of a kind's normal form (exports name it).
UNITS = {"size": "B", "seconds": "s"}
# Names that state one parameter twice over: an adapter's name and the canonical name its
# parser states (IOR is launched with ``file_per_proc``, its output says ``file_per_process``:
# a run's stored parameters hold both, always alike). Whatever varies one varies the other.
# A Slurm-mode run states its node count as launched (``slurm_nodes``) and as its tool
# reports it (``nodes``, as an MPI-mode run's axis names it).
SAME_PARAMETER = {
    "file_per_proc": "file_per_process",
    "file_per_process": "file_per_proc",
    "slurm_nodes": "nodes",
    "nodes": "slurm_nodes",
}
# Names whose kind differs between tools: the parsers' meaning wins in the shared table
# (IOzone's adapter takes ``ops`` as -O, a flag; parsers state ``ops`` as a list of phases).
_AMBIGUOUS = {"ops"}


def _kinds() -> dict[str, str]:
    kinds: dict[str, str] = {}
    for adapter in ADAPTERS.values():
        for param in adapter.params.values():
            if param.kind in NORMALISED and param.name not in _AMBIGUOUS:
                kinds.setdefault(param.name, param.kind)
    kinds.update(PARAM_KINDS)
    return kinds


# Parameter name -> kind, for every name whose values have a normal form.
KINDS: dict[str, str] = _kinds()


def kind(name: str) -> str | None:
    """The kind of parameter ``name`` ("size", "seconds", "bool", "int"), None when its values
    are kept as given."""
    return KINDS.get(name)


# No cap: stored values are what runs did, not requests to check.
_HUGE = 2**63 - 1
_SPACED = re.compile(r"^\s*([0-9.]+)\s+([A-Za-z]+)\s*$")
_FLOAT_SECONDS = re.compile(r"^\s*(\d+\.\d+)\s*s?\s*$")


def convert(kind_: str, value: Any) -> Any:
    """``value`` in the normal form of ``kind_``; ValueError when it does not read as one."""
    if value is None:
        raise ValueError("no value")
    try:
        if kind_ == "size":
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, str):
                value = _SPACED.sub(r"\1\2", value)
            return clean_size(value, "value", 0, _HUGE)
        if kind_ == "seconds":
            if isinstance(value, float) and not isinstance(value, bool):
                if not math.isfinite(value) or value < 0:
                    raise ValueError(f"{value!r} is not a duration")
                return int(value) if value.is_integer() else value
            if isinstance(value, str):
                m = _FLOAT_SECONDS.match(value)
                if m:
                    return convert("seconds", float(m.group(1)))
                value = _SPACED.sub(r"\1\2", value)
            return clean_seconds(value, "value", 0, _HUGE)
        if kind_ == "bool":
            return clean_bool(value, "value")
        if kind_ == "int":
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(f"{value!r} is not a whole number")
            if isinstance(value, str) and value.strip().startswith("-"):
                return -clean_int(value.strip()[1:], "value")
            if isinstance(value, int) and not isinstance(value, bool) and value < 0:
                return value
            return clean_int(value, "value")
    except ParamError as exc:
        raise ValueError(exc.message) from None
    raise ValueError(f"unknown kind {kind_!r}")


def normal(name: str, value: Any) -> Any:
    """``value`` of parameter ``name`` in its kind's normal form; as given when the name has
    no kind or the value does not read as one."""
    kind_ = KINDS.get(name)
    if kind_ is None:
        return value
    # The common case, already normal: no conversion.
    if type(value) is int and kind_ != "bool" and value >= 0:
        return value
    if type(value) is bool and kind_ == "bool":
        return value
    try:
        return convert(kind_, value)
    except ValueError:
        return value


def normalise(params: Any) -> Any:
    """A run's parameters with every value in its normal form (a new dict); anything but a
    mapping as given. (A copy when every value is ``normal``'s own already, found without a
    call per value: nearly always so, and half the time; the bulk ingest normalises 500
    runs' parameters per request.)"""
    if not isinstance(params, Mapping):
        return params
    kinds = KINDS
    for name, value in params.items():
        kind_ = kinds.get(name)
        if kind_ is not None and not (
            (type(value) is int and kind_ != "bool" and value >= 0)
            or (type(value) is bool and kind_ == "bool")
        ):
            return {name: normal(name, value) for name, value in params.items()}
    return dict(params)


def parse(name: str, text: str) -> Any:
    """What a user typed for parameter ``name`` (a filter: ``4k``, ``4096``, ``4 KiB``,
    ``yes``) in its normal form; ValueError when the name has a kind the text does not read
    as, the text itself for a name without a kind."""
    kind_ = KINDS.get(name)
    if kind_ is None:
        return text
    return convert(kind_, text)


# --- for people ----------------------------------------------------------------------------

_BINARY = (("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))
_DECIMAL = (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3))
_DURATIONS = (("d", 86400), ("h", 3600), ("min", 60))
# Words of parameter names outside the table whose numbers are byte counts (published data,
# a bulk client's own names): shown in units too.
_SIZE_WORDS = ("size", "bs", "block", "record", "transfer", "xfer", "chunk")


def format_bytes(number: float) -> str:
    """A byte count for people: the largest unit it is a whole number of (binary or decimal:
    4096 -> "4 KiB", 8e12 -> "8 TB"), else binary to 4 digits; "512 B" below 1 kB."""
    if number < 1000 or not math.isfinite(number):
        return f"{number:g} B"
    if float(number).is_integer():
        exact = [(number / s, u) for u, s in (*_BINARY, *_DECIMAL) if number % s == 0]
        if exact:
            value, unit = min(exact)
            return f"{value:g} {unit}"
    unit, scale = next(((u, s) for u, s in _BINARY if number >= s), ("B", 1))
    return f"{number / scale:.4g} {unit}"


def format_seconds(number: float) -> str:
    """A duration for people: "30 s", "5 min", "2 h", "1 d" (the largest whole unit)."""
    for unit, scale in _DURATIONS:
        if number >= scale and number % scale == 0:
            return f"{number / scale:g} {unit}"
    return f"{number:g} s"


def human(name: str, value: Any) -> str:
    """A parameter's value for people, from its normal form or any spelling of it: sizes in
    units ("1 MiB"), durations ("5 min"), booleans "yes"/"no", whole floats without ".0";
    "—" for none. A number of a size-like name outside the table is shown as a size."""
    if value is None or value == "":
        return "—"
    kind_ = KINDS.get(name)
    if kind_ is None and any(w in name.lower() for w in _SIZE_WORDS):
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = None
        if number is not None and not isinstance(value, bool) and number >= 1000:
            return format_bytes(number)
    if kind_ is not None:
        try:
            value = convert(kind_, value)
        except ValueError:
            return str(value)
        if kind_ == "size":
            return format_bytes(value)
        if kind_ == "seconds":
            return format_seconds(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


__all__ = [
    "KINDS",
    "UNITS",
    "convert",
    "format_bytes",
    "format_seconds",
    "human",
    "kind",
    "normal",
    "normalise",
    "parse",
]
