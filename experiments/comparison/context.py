"""The testbeds, targets, tuning sets and configurations behind a result, loaded in bulk."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from experiments.comparison.result import Point


def raw(value: Any) -> str:
    """A grouped value as the string the URL carries (baseline, filters): what the database's
    CAST(… AS text) gives, so that filtering by it finds the same rows."""
    return "" if value is None else str(value)


# A comparison reads every configuration (tool, parameters, testbed, target, tuning set,
# source) of the runs it selects; beyond this many it asks for a narrower selection.
MAX_CONFIGS = 20000


@dataclass
class Context:
    """Testbeds, targets and tuning sets of the runs in a result, loaded in bulk, and the
    configurations behind each point."""

    testbeds: dict[int, Any] = field(default_factory=dict)
    members: dict[int, list] = field(default_factory=lambda: defaultdict(list))
    targets: dict[int, list] = field(default_factory=lambda: defaultdict(list))
    target_by_id: dict[int, Any] = field(default_factory=dict)
    limits: dict[tuple[str, int], Any] = field(default_factory=dict)
    configs: list[dict] = field(default_factory=list)
    tunings: dict[int, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    links: dict[int, Any] | None = None  # limits.measured_links, read when first needed
    benched: dict[int, Any] | None = None  # limits.measured_targets, read when first needed
    machines: dict[int, str] = field(default_factory=dict)  # testbed id -> hardware()
    facts: dict[tuple, dict] = field(default_factory=dict)  # comparability.facts, in parts

    @classmethod
    def load(cls, testbed_ids: set[int], target_ids: set[int], tuning_ids: set[int]) -> Context:
        """For the testbeds, targets and tuning sets of a result's configurations; a fixed
        number of queries, whatever the number of runs or testbeds."""
        from django.db.models import prefetch_related_objects

        from experiments.models import Target, Testbed, TestbedNode, TuningSet

        ctx = cls()
        if not testbed_ids:
            return ctx
        ctx.testbeds = Testbed.objects.in_bulk(testbed_ids)
        for member in TestbedNode.objects.filter(testbed_id__in=testbed_ids).select_related(
            "node__profile"
        ):
            ctx.members[member.testbed_id].append(member)
        related = ("drive", "node__profile")
        for target in Target.objects.filter(
            testbed_id__in=testbed_ids, kind="storage"
        ).select_related(*related):
            ctx.targets[target.testbed_id].append(target)
            ctx.target_by_id[target.pk] = target
        missing = set(target_ids) - set(ctx.target_by_id)
        if missing:
            for target in Target.objects.filter(pk__in=missing).select_related(*related):
                ctx.target_by_id[target.pk] = target
        # One instance per hardware profile, its NICs and drives read once (two queries).
        nodes = [m.node for members in ctx.members.values() for m in members]
        nodes += [t.node for t in ctx.target_by_id.values() if t.node is not None]
        profiles: dict[int, Any] = {}
        for node in nodes:
            node.profile = profiles.setdefault(node.profile.pk, node.profile)
        prefetch_related_objects(list(profiles.values()), "nics", "drives")
        ctx.tunings = TuningSet.objects.in_bulk(tuning_ids) if tuning_ids else {}
        return ctx

    @property
    def measured(self) -> dict[int, Any]:
        """The testbeds' measured link rates (experiments.inventory.limits.measured_links), one
        query
        on first use: a comparison whose points are not shown needs none."""
        if self.links is None:
            from experiments.inventory.limits import measured_links

            self.links = measured_links(self.testbeds.values())
        return self.links

    @property
    def bench(self) -> dict[int, Any]:
        """The testbeds' StorageBench ceilings per target
        (experiments.inventory.limits.measured_targets), one query on first use."""
        if self.benched is None:
            from experiments.inventory.limits import measured_targets

            self.benched = measured_targets(self.testbeds.values())
        return self.benched

    def testbed_names(self, metric: str, points: list[Point]) -> list[str]:
        """Names of the testbeds whose runs a metric's points hold (for exported images)."""
        ids = {c["run__testbed_id"] for c in self.configs if c["name"] == metric}
        names = {self.testbeds[i].name for i in ids if i in self.testbeds}
        return sorted(names)

    def hardware(self, testbed_id: int) -> str:
        """The machines of a testbed as a comparison tells them apart: storage servers (count,
        architecture, CPU, cores, memory, drives, network) and clients (count, memory), by
        what they are, not by their profiles' names."""
        if testbed_id not in self.machines:
            members = self.members.get(testbed_id, [])
            servers = sorted(_machine(m.node.profile) for m in members if m.storage)
            clients = sorted(f"{m.node.profile.memory_gib or '?'} GiB" for m in members if m.client)
            parts = [f"{len(servers)} servers: " + " + ".join(sorted(set(servers)))]
            if clients:
                parts.append(f"{len(clients)} clients ({', '.join(sorted(set(clients)))})")
            self.machines[testbed_id] = "; ".join(parts)
        return self.machines[testbed_id]

    def client_memory(self, testbed_id: int, params: dict) -> float | None:
        clients = [m for m in self.members.get(testbed_id, []) if m.client]
        memories = [m.node.profile.memory_gib for m in clients if m.node.profile.memory_gib]
        if not memories:
            return None
        per_client = sum(memories) / len(memories)
        try:
            used = int(params.get("nodes") or len(clients))
        except (TypeError, ValueError):
            used = len(clients)
        return per_client * min(max(used, 1), len(clients)) * 2**30


def _machine(profile) -> str:
    drives = ", ".join(sorted(str(d) for d in profile.drives.all() if d.purpose == "data"))
    nics = ", ".join(sorted(str(n) for n in profile.nics.all()))
    cores = profile.total_cores or "?"
    return (
        f"{profile.architecture or '?'} {profile.cpu_model or '?'} ({cores} cores, "
        f"{profile.memory_gib or '?'} GiB; {drives or 'no data drives'}; {nics or 'no NICs'})"
    )
