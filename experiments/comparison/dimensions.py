"""Attributes a comparison can put on the x axis or split series by, as SQL expressions.

Every expression is relative to ``Metric`` (so ``run__…`` paths) and is evaluated by the
database: grouping and aggregation never loop over runs in Python.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.db.models import (
    Case,
    CharField,
    F,
    Field,
    FloatField,
    IntegerField,
    OuterRef,
    Subquery,
    Value,
    When,
)
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce

from experiments.models.runs import OWN_RUNS as OWN_RUNS
from experiments.models.runs import source_expression
from runners.params import human


@dataclass(frozen=True)
class Dimension:
    key: str
    label: str
    group: str  # "hardware", "testbed", "tuning", "run"


def _storage_member(field: str) -> Subquery:
    from experiments.models import TestbedNode

    return Subquery(
        TestbedNode.objects.filter(testbed=OuterRef("run__testbed"), storage=True)
        .order_by("node__hostname", "pk")
        .values(field)[:1]
    )


def _storage_target(field: str) -> Subquery:
    from experiments.models import Target

    return Subquery(
        Target.objects.filter(testbed=OuterRef("run__testbed"), kind="storage")
        .order_by("id")
        .values(field)[:1]
    )


def _storage_member_cores() -> Subquery:
    from experiments.models import TestbedNode

    return Subquery(
        TestbedNode.objects.filter(testbed=OuterRef("run__testbed"), storage=True)
        .order_by("node__hostname", "pk")
        .annotate(cores=F("node__profile__sockets") * F("node__profile__cores_per_socket"))
        .values("cores")[:1]
    )


# Profile fields of the storage servers a dimension can read (arch, cpu, hardware, hw:…).
STORAGE_PROFILE_FIELDS = (
    "architecture",
    "cpu_model",
    "name",
    "vendor",
    "model",
    "sockets",
    "cores_per_socket",
    "threads_per_core",
    "clock_ghz",
    "numa_domains",
    "memory_gib",
    "memory_channels",
    "dimm_type",
    "raid_controller",
)


class TestbedLookup:
    """Storage-side attributes of every testbed, looked up once and put into SQL as constants.

    A dimension such as ``arch`` is an attribute of the testbed's first storage server (by
    hostname) unless the run measured one target. As a correlated subquery it is evaluated
    once per metric row (most of the comparison's time at 10,000 runs and more). Here the
    testbeds' members and storage targets are read in one small query each (on first use,
    whatever the number of runs) and each attribute becomes ``CASE WHEN run.testbed_id IN
    (…) THEN <value> … END``, cast to the attribute's own type: the same value per row as the
    subquery gives, so grouping, medians and filters are exactly those of the subquery form.

    One instance serves one computation (it is not a cache: it reads the inventory as it is
    now); ``expression(key)`` without a lookup keeps the self-contained subquery form."""

    def __init__(self) -> None:
        self._members: dict[str, dict[int, Any]] | None = None
        self._targets: dict[str, dict[int, Any]] | None = None

    def members(self) -> dict[str, dict[int, Any]]:
        """testbed id -> value, per profile field of the first storage server and for
        ``cores`` (its sockets x cores per socket), ``servers``, ``clients`` (member counts)
        and ``server_cores`` (sum over the storage servers)."""
        if self._members is None:
            from experiments.models import TestbedNode

            out: dict[str, dict[int, Any]] = defaultdict(dict)
            rows = TestbedNode.objects.order_by("testbed_id", "node__hostname", "pk").values_list(
                "testbed_id",
                "storage",
                "client",
                *(f"node__profile__{f}" for f in STORAGE_PROFILE_FIELDS),
            )
            for testbed_id, storage, client, *profile in rows:
                if client:
                    out["clients"][testbed_id] = out["clients"].get(testbed_id, 0) + 1
                if not storage:
                    continue
                values = dict(zip(STORAGE_PROFILE_FIELDS, profile, strict=True))
                sockets, cores = values["sockets"], values["cores_per_socket"]
                product = None if sockets is None or cores is None else sockets * cores
                out["servers"][testbed_id] = out["servers"].get(testbed_id, 0) + 1
                if product is not None:  # SUM skips NULLs, and is NULL without any value
                    out["server_cores"][testbed_id] = (
                        out["server_cores"].get(testbed_id, 0) + product
                    )
                if testbed_id in out["cores"]:
                    continue  # not the first storage server
                out["cores"][testbed_id] = product
                for name, value in values.items():
                    out[name][testbed_id] = value
            self._members = out
        return self._members

    def targets(self) -> dict[str, dict[int, Any]]:
        """testbed id -> raid_level / filesystem of its first storage target (by id), and
        ``count`` (storage targets in all)."""
        if self._targets is None:
            from experiments.models import Target

            out: dict[str, dict[int, Any]] = defaultdict(dict)
            rows = (
                Target.objects.filter(kind="storage")
                .order_by("testbed_id", "id")
                .values_list("testbed_id", "raid_level", "filesystem", "count")
            )
            for testbed_id, raid_level, filesystem, count in rows:
                if testbed_id not in out["count"]:
                    out["raid_level"][testbed_id] = raid_level
                    out["filesystem"][testbed_id] = filesystem
                    out["count"][testbed_id] = 0
                if count is not None:
                    out["count"][testbed_id] += count
            self._targets = out
        return self._targets

    @staticmethod
    def by_testbed(values: dict[int, Any], output_field: Field) -> Cast:
        """``CASE WHEN run.testbed_id IN (…) THEN value … END`` (NULL for other testbeds), one
        branch per distinct value, cast to ``output_field``'s type."""
        testbeds: dict[Any, list[int]] = defaultdict(list)
        for testbed_id, value in values.items():
            if value is not None:
                testbeds[value].append(testbed_id)
        whens = [
            When(run__testbed_id__in=sorted(ids), then=Value(value))
            for value, ids in sorted(testbeds.items(), key=lambda kv: min(kv[1]))
        ]
        if not whens:
            return Cast(Value(None), output_field)
        return Cast(Case(*whens, default=Value(None), output_field=output_field), output_field)

    def member(self, field: str) -> Cast:
        from experiments.models import HardwareProfile

        # ``cores`` is a product of two columns, an IntegerField to Django.
        output = (
            IntegerField()
            if field == "cores"
            else (HardwareProfile._meta.get_field(field).__class__())
        )
        return self.by_testbed(self.members()[field], output)

    def target(self, field: str) -> Cast:
        return self.by_testbed(self.targets()[field], CharField())

    def count(self, what: str) -> Cast:
        """Per testbed, as a float: ``servers``, ``clients``, ``server_cores`` (sum of the
        storage servers' cores) or ``targets`` (storage targets); NULL when none."""
        source = self.targets()["count"] if what == "targets" else self.members()[what]
        return self.by_testbed(
            {tb: float(v) for tb, v in source.items() if v is not None}, FloatField()
        )


# Hardware attributes of the storage servers' profile a comparison can filter or split by,
# as ``hw:<field>`` (the arch, cpu and hardware keys above are the common ones).
HARDWARE_FIELDS: dict[str, str] = {
    "vendor": "vendor",
    "model": "model",
    "sockets": "sockets",
    "cores_per_socket": "cores per socket",
    "cores": "cores (sockets x cores per socket)",
    "threads_per_core": "threads per core",
    "clock_ghz": "clock (GHz)",
    "numa_domains": "NUMA domains",
    "memory_gib": "memory (GiB)",
    "memory_channels": "memory channels",
    "dimm_type": "DIMM type",
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
        Dimension("source", "Data source (published study or own runs)", "run"),
    ]
}


def expression(key: str, lookup: TestbedLookup | None = None):
    """SQL expression for a dimension key: a fixed name, ``param:<name>`` (a run parameter)
    or ``tuning:<scope>.<key>`` (an effective tuning value). ValueError for anything else.

    With a ``lookup`` the storage servers' and targets' attributes are per-testbed constants
    (``TestbedLookup``); without one they are correlated subqueries (one self-contained
    query, slower over many runs)."""

    def member(field: str):
        if lookup is not None:
            return lookup.member(field)
        if field == "cores":
            return _storage_member_cores()
        return _storage_member(f"node__profile__{field}")

    def target(field: str):
        return _storage_target(field) if lookup is None else lookup.target(field)

    if key == "arch":
        return Coalesce(F("run__target__node__profile__architecture"), member("architecture"))
    if key == "cpu":
        return Coalesce(F("run__target__node__profile__cpu_model"), member("cpu_model"))
    if key == "hardware":
        return Coalesce(F("run__target__node__profile__name"), member("name"))
    if key == "raid":
        return Coalesce(F("run__target__raid_level"), target("raid_level"))
    if key == "fs":
        return Coalesce(F("run__target__filesystem"), target("filesystem"))
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
                member("cores"),
            )
        return Coalesce(F(f"run__target__node__profile__{field}"), member(field))
    if key == "source":
        return source_expression()
    if key.startswith("param:") and safe_name(key[6:]):
        return KeyTextTransform(key[6:], "run__params")
    if key.startswith("tuning:") and safe_name(key[7:]):
        return KeyTextTransform(key[7:], "run__tuning_set__effective")
    if key.startswith(("param:", "tuning:")):
        raise ValueError(
            f"unknown dimension {key!r}: a parameter name or tuning key is ASCII letters, "
            "digits, '.', '_' and '-', starts with a letter and has at most 80 characters"
        )
    raise ValueError(f"unknown dimension {key!r}")


def short_source(value: str) -> str:
    """ "000 Huawei/ThinkParQ: Performance Evaluation …" -> "000 Huawei/ThinkParQ" (the
    study's number and authors, for sentences and notes)."""
    head, sep, _ = value.partition(": ")
    return head if sep and head else value


# A run parameter or tuning key as a dimension: ASCII, starting with a letter or "_" (a name
# such as "-1" or "0" would be read as an array index in SQLite's JSON path, "$[-1]", which
# SQLite rejects), at most 80 characters.
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,79}\Z")


def safe_name(name: str) -> bool:
    return _NAME_RE.match(name) is not None


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
    """Human label for a raw grouped value (RAID level '10' -> 'RAID10'); a parameter's as
    ``runners.params.human`` shows it by its kind ("1048576" -> "1 MiB", "true" -> "yes",
    "300" -> "5 min"): series, legends, table labels, filter options and chips. An axis keeps
    the raw number (``axis_value``)."""
    if value is None or value == "":
        return UNKNOWN
    if key.startswith("param:"):
        return human(key[6:], value)
    if key == "raid":
        return "no RAID" if value == "none" else f"RAID{value}"
    if key == "arch":
        from experiments.models import Architecture

        return dict(Architecture.choices).get(value, value)
    return str(value)


def axis_value(key: str, value: Any) -> str:
    """A raw grouped value as an axis holds it: a parameter's as the number it is ("1048576",
    so that a sweep is drawn on a numeric axis whose ticks ``charts`` labels in units), any
    other dimension's as ``display_value`` shows it."""
    if key.startswith("param:") and value not in (None, ""):
        return str(value)
    return display_value(key, value)


def label_order(value: Any, label: str) -> tuple:
    """Order of a dimension's values by their labels: values that are numbers in numeric
    order first (sizes 4 KiB < 128 KiB < 1 MiB, RAID levels), then the labels as text."""
    number = sort_key(value)
    return (0, number[1], label) if number[0] == 0 else (1, 0.0, label)


def sort_key(value: Any) -> tuple:
    """Dimension values: numbers in numeric order first ("4" < "16"), then text."""
    try:
        return (0, float(value), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(value))
