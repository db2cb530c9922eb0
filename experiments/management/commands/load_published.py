"""``manage.py load_published``: store the published-study data set, idempotently."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import models, transaction
from django.db.models import ProtectedError

from experiments.models import (
    Drive,
    HardwareProfile,
    Nic,
    Node,
    Run,
    StoragePool,
    Target,
    Testbed,
    TestbedNode,
    TuningSet,
)
from experiments.published import SEEDS
from experiments.results.store import replace_metrics
from experiments.shared.tuning_keys import TuningValueError, normalise
from runners.params import normalise as normal_params
from runners.parsers.base import METRIC_UNITS

# Every field a data module may set, with the value it gets when the module leaves it out, so
# that removing a value from a module also removes it from the database.
PROFILE_FIELDS = {
    "name": "",
    "vendor": "",
    "model": "",
    "architecture": "other",
    "cpu_model": "",
    "sockets": None,
    "cores_per_socket": None,
    "threads_per_core": None,
    "clock_ghz": None,
    "numa_domains": None,
    "memory_gib": None,
    "memory_channels": None,
    "dimm_type": "",
    "raid_controller": "",
    "tdp_watts": None,
    "notes": "",
}
DRIVE_FIELDS = {
    "kind": "",
    "count": 1,
    "capacity_gb": None,
    "interface": "",
    "pcie_gen": None,
    "pcie_lanes": None,
    "seq_read_mbps": None,
    "seq_write_mbps": None,
    "rand_read_iops": None,
    "rand_write_iops": None,
}
NIC_FIELDS = {
    "rate_gbps": None,
    "ports": 1,
    "count": 1,
    "usable_gbytes": None,
    "usable_source": "",
}
NODE_FIELDS = {"hostname": "", "address": "", "os": "", "kernel": "", "notes": ""}
TESTBED_FIELDS = {
    "name": "",
    "description": "",
    "beegfs_version": "",
    "fabric": "",
    "switch": "",
    "network_notes": "",
    "benchmark_dir": "",
}
MEMBER_FIELDS = {role: False for role in TestbedNode.ROLES} | {"storage_links": None}
TARGET_FIELDS = {
    "kind": "storage",
    "target_id": None,
    "numa_domain": None,
    "raid_level": "",
    "disks": None,
    "filesystem": "",
    "mount_options": "",
    "capacity_gb": None,
    "count": 1,
}
TUNING_FIELDS = {"name": "", "description": ""}
RUN_FIELDS = {
    "tool": "",
    "tool_version": "",
    "label": "",
    "command": "",
    "argv": [],
    "params": {},
    "raw_output": "",
    "parse_error": "",
    "exit_code": None,
    "started_at": None,
    "finished_at": None,
    "notes": "",
}
PUBLISHED_MODELS = (HardwareProfile, Node, Testbed, TuningSet, Run)


def _pick(data: dict, fields: dict) -> dict:
    return {name: data.get(name, default) for name, default in fields.items()}


def _metric_row(name, value, unit, stat, iteration, extra, source_ref) -> tuple:
    """Comparable form of one metric (extra as canonical JSON)."""
    return (
        name,
        float(value),
        unit,
        stat,
        iteration,
        json.dumps(extra or {}, sort_keys=True),
        source_ref,
    )


class Loader:
    """Upserts one seed module after another; counts what it created, changed or left alone."""

    def __init__(self) -> None:
        self.stats: Counter[str] = Counter()
        self.loaded: Counter[str] = Counter()
        self.keys: dict[type[models.Model], set[str]] = {m: set() for m in PUBLISHED_MODELS}

    # -- generic helpers ------------------------------------------------------------------

    @staticmethod
    def _check_lengths(model: type[models.Model], values: dict, what: str) -> None:
        # SQLite ignores max_length and PostgreSQL rejects the row: fail early on both.
        for name, value in values.items():
            field = model._meta.get_field(name)
            limit = getattr(field, "max_length", None)
            if limit and isinstance(value, str) and len(value) > limit:
                raise CommandError(f"{what}: {name} is {len(value)} characters, max {limit}")

    def upsert(
        self, model: type[models.Model], lookup: dict, values: dict, what: str
    ) -> models.Model:
        """Create the row matching ``lookup`` or update the fields of ``values`` that differ;
        a row already equal to the data is not saved (its ``updated`` stamp stays)."""
        self._check_lengths(model, {**lookup, **values}, what)
        obj = model.objects.filter(**lookup).first()
        if obj is None:
            self.stats["created"] += 1
            return model.objects.create(**lookup, **values)
        changed = []
        for name, value in values.items():
            field = model._meta.get_field(name)
            if field.is_relation:
                current, wanted = getattr(obj, field.attname), getattr(value, "pk", value)
            else:
                current, wanted = getattr(obj, name), value
            if current != wanted:
                setattr(obj, name, value)
                changed.append(name)
        if changed:
            if any(f.name == "updated" for f in model._meta.concrete_fields):
                changed.append("updated")
            obj.save(update_fields=changed)
            self.stats["updated"] += 1
        else:
            self.stats["unchanged"] += 1
        return obj

    def published(
        self,
        model: type[models.Model],
        key: str,
        values: dict,
        source: str,
        source_ref: str,
        what: str,
    ) -> models.Model:
        """Upsert a top-level published object by its stable key."""
        if key in self.keys[model]:
            raise CommandError(f"duplicate published key {key!r}")
        if not source_ref:
            raise CommandError(f"{what}: no source_ref")
        self.keys[model].add(key)
        values = {
            **values,
            "published": True,
            "owner": None,
            "source": source,
            "source_ref": source_ref,
        }
        return self.upsert(model, {"published_key": key}, values, what)

    def prune(self, queryset: models.QuerySet, keep: set[int]) -> None:
        """Delete child rows the data no longer lists."""
        for obj in queryset.exclude(pk__in=keep):
            obj.delete()
            self.stats["deleted"] += 1

    # -- one seed -------------------------------------------------------------------------

    def load_seed(self, seed) -> None:
        prefix, source = seed.KEY, seed.SOURCE
        profiles: dict[str, HardwareProfile] = {}
        drives: dict[tuple[str, str], Drive] = {}
        for data in seed.PROFILES:
            key = f"{prefix}/profile/{data['key']}"
            profile = self.published(
                HardwareProfile,
                key,
                _pick(data, PROFILE_FIELDS),
                source,
                data.get("source_ref", ""),
                key,
            )
            profiles[data["key"]] = profile
            keep = set()
            for drive_data in data.get("drives", []):
                drive = self.upsert(
                    Drive,
                    {
                        "profile": profile,
                        "model": drive_data["model"],
                        "purpose": drive_data["purpose"],
                    },
                    _pick(drive_data, DRIVE_FIELDS),
                    f"{key} drive {drive_data['model']}",
                )
                drives[(data["key"], drive_data["key"])] = drive
                keep.add(drive.pk)
            self.prune(profile.drives.all(), keep)
            keep = set()
            for nic_data in data.get("nics", []):
                nic = self.upsert(
                    Nic,
                    {"profile": profile, "kind": nic_data["kind"], "model": nic_data["model"]},
                    _pick(nic_data, NIC_FIELDS),
                    f"{key} NIC {nic_data['model']}",
                )
                keep.add(nic.pk)
            self.prune(profile.nics.all(), keep)
            self.loaded["profiles"] += 1

        nodes: dict[str, Node] = {}
        for data in seed.NODES:
            key = f"{prefix}/node/{data['key']}"
            values = _pick(data, NODE_FIELDS) | {"profile": profiles[data["profile"]]}
            nodes[data["key"]] = self.published(
                Node, key, values, source, data.get("source_ref", ""), key
            )
            self.loaded["nodes"] += 1

        testbeds: dict[str, Testbed] = {}
        targets: dict[tuple[str, str], Target] = {}
        for data in seed.TESTBEDS:
            key = f"{prefix}/testbed/{data['key']}"
            testbed = self.published(
                Testbed, key, _pick(data, TESTBED_FIELDS), source, data.get("source_ref", ""), key
            )
            testbeds[data["key"]] = testbed
            pools, keep = {}, set()
            for pool_data in data.get("pools", []):
                pool = self.upsert(
                    StoragePool,
                    {"testbed": testbed, "pool_id": pool_data["pool_id"]},
                    {"name": pool_data["name"]},
                    f"{key} pool",
                )
                pools[pool_data["pool_id"]] = pool
                keep.add(pool.pk)
            self.prune(testbed.pools.all(), keep)
            keep = set()
            for member in data.get("members", []):
                row = self.upsert(
                    TestbedNode,
                    {"testbed": testbed, "node": nodes[member["node"]]},
                    _pick(member, MEMBER_FIELDS),
                    f"{key} member {member['node']}",
                )
                keep.add(row.pk)
            self.prune(testbed.members.all(), keep)
            keep = set()
            for target_data in data.get("targets", []):
                drive_ref = target_data.get("drive")
                values = _pick(target_data, TARGET_FIELDS) | {
                    "node": nodes[target_data["node"]] if target_data.get("node") else None,
                    "drive": drives[drive_ref] if drive_ref else None,
                    "pool": pools[target_data["pool"]] if target_data.get("pool") else None,
                }
                target = self.upsert(
                    Target,
                    {"testbed": testbed, "name": target_data["name"]},
                    values,
                    f"{key} target {target_data['name']}",
                )
                targets[(data["key"], target_data["key"])] = target
                keep.add(target.pk)
            self.prune(testbed.targets.all(), keep)
            self.loaded["testbeds"] += 1

        tuning_sets: dict[str, TuningSet] = {}
        for data in seed.TUNING_SETS:
            key = f"{prefix}/tuning/{data['key']}"
            parent_key = data.get("parent")
            if parent_key and parent_key not in tuning_sets:
                raise CommandError(f"{key}: parent {parent_key!r} must come first")
            values = _pick(data, TUNING_FIELDS) | {
                "parent": tuning_sets[parent_key] if parent_key else None,
            }
            tuning_set = self.published(
                TuningSet, key, values, source, data.get("source_ref", ""), key
            )
            self.sync_params(tuning_set, data["params"], key)
            tuning_sets[data["key"]] = tuning_set
            self.loaded["tuning sets"] += 1

        for data in seed.RUNS:
            key = f"{prefix}/run/{data['key']}"
            values = _pick(data, RUN_FIELDS) | {
                "testbed": testbeds[data["testbed"]],
                "tuning_set": tuning_sets[data["tuning_set"]] if data.get("tuning_set") else None,
                "target": targets[(data["testbed"], data["target"])]
                if data.get("target")
                else None,
                "status": Run.Status.PUBLISHED,
            }
            # Stored as every run's parameters are: in their normal forms (8e12 -> an int).
            values["params"] = normal_params(values["params"])
            run = self.published(Run, key, values, source, data.get("source_ref", ""), key)
            self.sync_metrics(run, data["metrics"], key)
            self.loaded["runs"] += 1
            self.loaded["metrics"] += len(data["metrics"])

    def sync_params(self, tuning_set: TuningSet, params: list[tuple], what: str) -> None:
        """Replace the set's own parameters only when they differ (a replacement records a
        revision), then bring source references and inherited values up to date."""
        entries, refs = [], {}
        for scope, key, value, source_ref in params:
            try:
                normalise(scope, key, value)
            except TuningValueError as exc:
                raise CommandError(f"{what}: {scope}.{key}: {exc}") from None
            if (scope, key) in refs:
                raise CommandError(f"{what}: {scope}.{key} given twice")
            if not source_ref:
                raise CommandError(f"{what}: {scope}.{key} has no source_ref")
            entries.append((scope, key, value.strip()))
            refs[(scope, key)] = source_ref
        current = sorted(tuning_set.params.values_list("scope", "key", "value"))
        if current != sorted(entries):
            tuning_set.replace_params(entries)
            self.stats["tuning revisions"] += 1
        for param in tuning_set.params.all():
            wanted = refs[(param.scope, param.key)]
            if param.source_ref != wanted:
                param.source_ref = wanted
                param.save(update_fields=["source_ref"])
        tuning_set.refresh_from_db()
        effective = {f"{s}.{k}": v for (s, k), (v, _) in tuning_set.effective_params().items()}
        if tuning_set.effective != effective:
            tuning_set.refresh_effective()

    def sync_metrics(self, run: Run, metrics: list[dict], what: str) -> None:
        """Replace the run's metrics when they differ from the data."""
        for metric in metrics:
            expected = METRIC_UNITS.get(metric["name"])
            if expected != metric["unit"]:
                raise CommandError(
                    f"{what}: metric {metric['name']} in {metric['unit']}, expected {expected}"
                )
            if not metric.get("source_ref"):
                raise CommandError(f"{what}: metric {metric['name']} has no source_ref")
        wanted = sorted(
            _metric_row(
                m["name"],
                m["value"],
                m["unit"],
                m.get("stat", "value"),
                m.get("iteration"),
                m.get("extra"),
                m["source_ref"],
            )
            for m in metrics
        )
        current = sorted(
            _metric_row(m.name, m.value, m.unit, m.stat, m.iteration, m.extra, m.source_ref)
            for m in run.metrics.all()
        )
        if current != wanted:
            replace_metrics(run, metrics)
            self.stats["metric sets replaced"] += 1

    def prune_published(self, prefixes: list[str]) -> None:
        """Delete published objects of these seeds whose key the data no longer has; objects
        that user data still points at (PROTECT) stay and are reported."""
        for model in PUBLISHED_MODELS:
            for prefix in prefixes:
                stale = model.objects.filter(
                    published=True, published_key__startswith=prefix
                ).exclude(published_key__in=self.keys[model])
                for obj in stale:
                    try:
                        with transaction.atomic():
                            obj.delete()
                        self.stats["deleted"] += 1
                    except ProtectedError:
                        self.stats["stale kept (in use)"] += 1

    def load(self, seeds) -> None:
        for seed in seeds:
            self.load_seed(seed)
        self.prune_published([f"{seed.KEY}/" for seed in seeds])


def load_published(seeds=None) -> Loader:
    """Load ``seeds`` (default: all of experiments.published) in one transaction."""
    loader = Loader()
    with transaction.atomic():
        loader.load(SEEDS if seeds is None else seeds)
    return loader


class Command(BaseCommand):
    help = "Load the published-study data set (experiments/published); safe to run again."

    def handle(self, *args: Any, **options: Any) -> None:
        loader = load_published()
        loaded = ", ".join(
            f"{loader.loaded[what]} {what}"
            for what in ("profiles", "nodes", "testbeds", "tuning sets", "runs", "metrics")
        )
        stats = loader.stats
        changes = ", ".join(
            f"{stats[what]} {what}" for what in ("created", "updated", "unchanged", "deleted")
        )
        extra = "".join(
            f", {n} {what}"
            for what, n in stats.items()
            if what not in {"created", "updated", "unchanged", "deleted"}
        )
        self.stdout.write(f"load_published: {len(SEEDS)} studies, {loaded} ({changes}{extra})")
