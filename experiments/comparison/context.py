"""The testbeds, targets, tuning sets and configurations behind a result, loaded in bulk."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet

from experiments.comparison.result import Point

# Points whose coefficient of variation is above this are flagged as noisy.
NOISY_CV = 0.05
ALPHA = 0.05
MAX_METRICS = 6
MAX_REPETITION_POINTS = 5000
MAX_CONFIGS = 5000


def raw(value: Any) -> str:
    """A grouped value as the string the URL carries (baseline, filters): what the database's
    CAST(… AS text) gives, so that filtering by it finds the same rows."""
    return "" if value is None else str(value)


@dataclass
class Context:
    """Testbeds, targets and tuning sets of the runs in a result, loaded in bulk."""

    testbeds: dict[int, Any]
    members: dict[int, list]
    targets: dict[int, list]
    target_by_id: dict[int, Any]
    limits: dict[tuple[str, int], Any]
    by_group: dict[tuple, list[dict]]
    configs: list[dict]
    tunings: dict[int, Any]
    warnings: list[str]
    measured: dict[int, Any] = field(default_factory=dict)  # limits.measured_links

    @classmethod
    def load(cls, rows: list[dict], groups: dict[str, Any], qs: QuerySet) -> Context:
        ctx = cls({}, defaultdict(list), defaultdict(list), {}, {}, defaultdict(list), [], {}, [])
        if rows:
            ctx._load(rows, groups, qs)
        return ctx

    def _load(self, rows: list[dict], groups: dict[str, Any], qs: QuerySet) -> None:
        """A fixed number of queries, whatever the number of runs or testbeds."""
        from experiments.models import Target, Testbed, TestbedNode, TuningSet

        testbed_ids = {r["tb_lo"] for r in rows} | {r["tb_hi"] for r in rows}
        # Configurations per group: (testbed, tuning set, target) and, for the working-set
        # check, the distinct parameter sets (cells of a matrix, not its repetitions).
        self.configs = list(
            qs.annotate(**groups)
            .values(
                "name",
                "series",
                "x",
                "y",
                "run__testbed_id",
                "run__tuning_set_id",
                "run__target_id",
                "run__tool",
                "run__params",
            )
            .order_by()
            .distinct()[: MAX_CONFIGS + 1]
        )
        if len(self.configs) > MAX_CONFIGS:
            self.warnings.append(
                "Too many distinct configurations: working-set and "
                "configuration checks are skipped."
            )
            self.configs = []
        testbed_ids |= {c["run__testbed_id"] for c in self.configs}
        self.testbeds = Testbed.objects.in_bulk(testbed_ids)
        from experiments.limits import measured_links

        self.measured = measured_links(self.testbeds.values())
        for member in (
            TestbedNode.objects.filter(testbed_id__in=testbed_ids)
            .select_related("node__profile")
            .prefetch_related("node__profile__nics", "node__profile__drives")
        ):
            self.members[member.testbed_id].append(member)
        for target in (
            Target.objects.filter(testbed_id__in=testbed_ids, kind="storage")
            .select_related("drive", "node__profile")
            .prefetch_related("node__profile__drives", "node__profile__nics")
        ):
            self.targets[target.testbed_id].append(target)
            self.target_by_id[target.pk] = target
        target_ids = {r["tg_lo"] for r in rows if r["tg_lo"]} | {
            c["run__target_id"] for c in self.configs if c["run__target_id"]
        }
        missing = target_ids - set(self.target_by_id)
        if missing:
            for target in (
                Target.objects.filter(pk__in=missing)
                .select_related("drive", "node__profile")
                .prefetch_related("node__profile__drives", "node__profile__nics")
            ):
                self.target_by_id[target.pk] = target
        tuning_ids = {c["run__tuning_set_id"] for c in self.configs if c["run__tuning_set_id"]}
        self.tunings = TuningSet.objects.in_bulk(tuning_ids) if tuning_ids else {}
        for c in self.configs:
            self.by_group[(c["name"], raw(c["series"]), raw(c["x"]), raw(c["y"]))].append(c)

    def testbed_names(self, metric: str, points: list[Point]) -> list[str]:
        """Names of the testbeds whose runs a metric's points hold (for exported images)."""
        ids = {c["run__testbed_id"] for c in self.configs if c["name"] == metric}
        names = {self.testbeds[i].name for i in ids if i in self.testbeds}
        if not self.configs:  # too many configurations: the points' own testbeds
            names = {p.testbed for p in points if p.metric == metric and p.testbed}
            names.discard("(several)")
        return sorted(names)

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
