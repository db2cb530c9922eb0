"""Attributes a comparison can put on the x axis or split series by, as SQL expressions.

Every expression is relative to ``Metric`` (so ``run__…`` paths) and is evaluated by the
database: grouping and aggregation never loop over runs in Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import F, OuterRef, Subquery, Value
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Coalesce


@dataclass(frozen=True)
class Dimension:
    key: str
    label: str
    group: str  # "hardware", "testbed", "tuning", "run"


def _storage_member(field: str) -> Subquery:
    from experiments.models import TestbedNode

    return Subquery(
        TestbedNode.objects.filter(testbed=OuterRef("run__testbed"), storage=True)
        .order_by("node__hostname").values(field)[:1]
    )


def _storage_target(field: str) -> Subquery:
    from experiments.models import Target

    return Subquery(
        Target.objects.filter(testbed=OuterRef("run__testbed"), kind="storage")
        .order_by("id").values(field)[:1]
    )


def _storage_member_cores() -> Subquery:
    from experiments.models import TestbedNode

    return Subquery(
        TestbedNode.objects.filter(testbed=OuterRef("run__testbed"), storage=True)
        .order_by("node__hostname")
        .annotate(cores=F("node__profile__sockets") * F("node__profile__cores_per_socket"))
        .values("cores")[:1]
    )


# Hardware attributes of the storage servers' profile a comparison can filter or split by,
# as ``hw:<field>`` (the arch, cpu and hardware keys above are the common ones).
HARDWARE_FIELDS: dict[str, str] = {
    "vendor": "vendor", "model": "model", "sockets": "sockets",
    "cores_per_socket": "cores per socket", "cores": "cores (sockets x cores per socket)",
    "threads_per_core": "threads per core", "clock_ghz": "clock (GHz)",
    "numa_domains": "NUMA domains", "memory_gib": "memory (GiB)",
    "memory_channels": "memory channels", "dimm_type": "DIMM type",
    "raid_controller": "RAID controller",
}

FIXED: dict[str, Dimension] = {
    d.key: d
    for d in [
        Dimension("arch", "Architecture (storage servers)", "hardware"),
        Dimension("cpu", "CPU model (storage servers)", "hardware"),
        Dimension("hardware", "Hardware profile (storage servers)", "hardware"),
        Dimension("raid", "RAID level (storage targets)", "testbed"),
        Dimension("fs", "Local file system (storage targets)", "testbed"),
        Dimension("testbed", "Testbed", "testbed"),
        Dimension("beegfs", "BeeGFS version", "testbed"),
        Dimension("fabric", "Network fabric", "testbed"),
        Dimension("tuning", "Tuning set", "tuning"),
        Dimension("matrix", "Matrix", "run"),
        Dimension("tool", "Tool", "run"),
        Dimension("source", "Source (study)", "run"),
    ]
}


def expression(key: str):
    """SQL expression for a dimension key: a fixed name, ``param:<name>`` (a run parameter)
    or ``tuning:<scope>.<key>`` (an effective tuning value). ValueError for anything else."""
    if key == "arch":
        return Coalesce(F("run__target__node__profile__architecture"),
                        _storage_member("node__profile__architecture"))
    if key == "cpu":
        return Coalesce(F("run__target__node__profile__cpu_model"),
                        _storage_member("node__profile__cpu_model"))
    if key == "hardware":
        return Coalesce(F("run__target__node__profile__name"),
                        _storage_member("node__profile__name"))
    if key == "raid":
        return Coalesce(F("run__target__raid_level"), _storage_target("raid_level"))
    if key == "fs":
        return Coalesce(F("run__target__filesystem"), _storage_target("filesystem"))
    if key == "testbed":
        return F("run__testbed__name")
    if key == "beegfs":
        return F("run__testbed__beegfs_version")
    if key == "fabric":
        return F("run__testbed__fabric")
    if key == "tuning":
        return Coalesce(F("run__tuning_set__name"), Value("(none)"))
    if key == "tool":
        return F("run__tool")
    if key == "matrix":
        return Coalesce(F("run__matrix__name"), Value("(none)"))
    if key.startswith("hw:") and key[3:] in HARDWARE_FIELDS:
        field = key[3:]
        if field == "cores":
            return Coalesce(
                F("run__target__node__profile__sockets")
                * F("run__target__node__profile__cores_per_socket"),
                _storage_member_cores(),
            )
        return Coalesce(F(f"run__target__node__profile__{field}"),
                        _storage_member(f"node__profile__{field}"))
    if key == "source":
        return F("run__source")
    if key.startswith("param:") and _safe_name(key[6:]):
        return KeyTextTransform(key[6:], "run__params")
    if key.startswith("tuning:") and _safe_name(key[7:]):
        return KeyTextTransform(key[7:], "run__tuning_set__effective")
    raise ValueError(f"unknown dimension {key!r}")


def _safe_name(name: str) -> bool:
    return bool(name) and len(name) <= 80 and all(c.isalnum() or c in "._-" for c in name)


def label(key: str) -> str:
    if key in FIXED:
        return FIXED[key].label
    if key.startswith("param:"):
        return key[6:].replace("_", " ")
    if key.startswith("tuning:"):
        return f"tuning {key[7:]}"
    if key.startswith("hw:") and key[3:] in HARDWARE_FIELDS:
        return f"storage servers' {HARDWARE_FIELDS[key[3:]]}"
    return key


UNKNOWN = "(unknown)"


def display_value(key: str, value: Any) -> str:
    """Human label for a raw grouped value (RAID level '10' -> 'RAID10')."""
    if value is None or value == "":
        return UNKNOWN
    if key == "raid":
        return "no RAID" if value == "none" else f"RAID{value}"
    if key == "arch":
        from experiments.models import Architecture

        return dict(Architecture.choices).get(value, value)
    return str(value)
