"""What differs between the runs before a change point and the runs after it.

Every run records what it ran on (``Run.effective_config``, experiments.execution.execute):
the launcher's kernel, sysctls, transparent huge pages, CPU governor, the benchmark
directory's mount (file system, options) and device queue (I/O scheduler, read-ahead), BeeGFS
striping, the tuning it applied and each held BeeGFS server's service settings in force; the
run row adds the tool's version and the nodes it held. These facts are collected per run,
pooled per side, and told apart by the comparison's own difference table
(experiments.comparison.comparability.difference_rows). The tuning set's revision in force
when each run started is a fact too (an edited tuning set keeps its identity).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from experiments.comparison.comparability import difference_rows
from experiments.models import Run, TuningRevision

# Runs of each side whose facts are compared: those nearest the change.
SIDE_RUNS = 10

# Lines of BeeGFS's entry info that describe striping (the rest names the run's directory).
_STRIPING_WORDS = ("pattern", "chunk", "targets", "pool", "raid")


def _text(value: Any) -> str:
    if isinstance(value, dict | list):
        import json

        return json.dumps(value, sort_keys=True)
    return str(value)


def node_facts(config: dict, host: str = "") -> dict[tuple[str, str], str]:
    """The facts of one run's ``effective_config`` (its launcher's), keyed (group, what)."""
    host = str(config.get("hostname") or host or "launcher")
    facts: dict[tuple[str, str], str] = {}

    def put(group: str, what: str, value: Any) -> None:
        if value not in (None, ""):
            facts[(group, f"{host}: {what}")] = _text(value)

    put("hardware", "machine", config.get("machine"))
    put("hardware", "CPUs", config.get("cpus"))
    put("node", "kernel", config.get("kernel"))
    for key, value in sorted((config.get("sysctl") or {}).items()):
        put("node", f"sysctl {key}", value)
    for key in ("transparent_hugepage", "transparent_hugepage_defrag", "cpu_governor"):
        put("node", key.replace("_", " "), config.get(key))
    mount = config.get("mount") or {}
    if isinstance(mount, dict):
        put("node", "file system", mount.get("fstype"))
        put("node", "mount options", mount.get("options"))
        put("node", "mount source", mount.get("source"))
    device = config.get("device") or {}
    if isinstance(device, dict):
        for key, value in sorted(device.items()):
            what = "I/O scheduler" if key == "scheduler" else f"device {key}"
            put("node", what, value)
    entry = config.get("beegfs_entry")
    if isinstance(entry, str) and not entry.startswith("not available"):
        lines = [
            " ".join(line.split())
            for line in entry.splitlines()
            if any(word in line.lower() for word in _STRIPING_WORDS)
        ]
        put("node", "BeeGFS striping", "; ".join(lines))
    for record in config.get("applied") or []:
        if isinstance(record, dict) and record.get("key"):
            outcome = f"{record.get('value')} ({record.get('result')})"
            put("tuning", f"applied {record['key']}", outcome)
    for server, answer in sorted((config.get("beegfs") or {}).items()):
        if not isinstance(answer, dict):
            continue
        for scope, record in sorted((answer.get("services") or {}).items()):
            for k in (record or {}).get("keys", []):
                if isinstance(k, dict) and k.get("key"):
                    facts[("node", f"{server}: BeeGFS {scope}.{k['key']}")] = _text(
                        k.get("in_force")
                    )
    return facts


def run_facts(run: Run, revisions: dict[int, list[TuningRevision]]) -> dict[tuple[str, str], str]:
    """Every fact recorded of ``run`` (``node_facts`` of its effective configuration, the tool
    version, the nodes held, the tuning set's revision when it started)."""
    facts = node_facts(run.effective_config or {})
    facts[("run", "tool version")] = run.tool_version or "—"
    held = sorted(str(h) for h in (run.nodes_held or []))
    facts[("testbed", "nodes held")] = ", ".join(held) if held else "—"
    if run.slurm_nodes:
        facts[("testbed", "Slurm nodes")] = _text(run.slurm_nodes)
    if run.tuning_set_id:
        when = run.started_at or run.created
        revision = next(
            (r for r in revisions.get(run.tuning_set_id, []) if r.created <= when), None
        )
        if revision is not None:
            facts[("tuning", "tuning set revision")] = f"r{revision.number}"
            for entry in revision.params or []:
                if isinstance(entry, list | tuple) and len(entry) >= 3:
                    facts[("tuning", f"{entry[0]}.{entry[1]}")] = str(entry[2])
                elif isinstance(entry, dict) and entry.get("key"):
                    scope = entry.get("scope", "")
                    facts[("tuning", f"{scope}.{entry['key']}")] = str(entry.get("value"))
    return facts


def _pooled(runs: Iterable[Run], revisions) -> dict[tuple[str, str], set[str]]:
    pooled: dict[tuple[str, str], set[str]] = {}
    for run in runs:
        for attr, value in run_facts(run, revisions).items():
            pooled.setdefault(attr, set()).add(value)
    return pooled


def verdicts(run_ids: Iterable[int]) -> dict[str, int]:
    """Stored telemetry verdicts (``Run.bottleneck``) of these runs, counted per kind."""
    counts: Counter[str] = Counter()
    ids = list(run_ids)
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        for kind in Run.objects.filter(pk__in=chunk).values_list("bottleneck", flat=True):
            counts[kind or "unknown"] += 1
    return dict(sorted(counts.items()))


def explain(before_ids: list[int], after_ids: list[int]) -> dict[str, Any]:
    """``ChangePoint.differences`` for the runs of the segments either side (time order):
    the facts of the ``SIDE_RUNS`` runs nearest the change on each side, pooled per side,
    and the verdicts of every run of each segment."""
    near_before, near_after = before_ids[-SIDE_RUNS:], after_ids[:SIDE_RUNS]
    runs = {
        r.pk: r
        for r in Run.objects.filter(pk__in=near_before + near_after).only(
            "pk",
            "effective_config",
            "tool_version",
            "nodes_held",
            "slurm_nodes",
            "tuning_set_id",
            "started_at",
            "created",
        )
    }
    sets = {r.tuning_set_id for r in runs.values() if r.tuning_set_id}
    revisions: dict[int, list[TuningRevision]] = {}
    for revision in TuningRevision.objects.filter(tuning_set_id__in=sets).order_by(
        "tuning_set_id", "-number"
    ):
        revisions.setdefault(revision.tuning_set_id, []).append(revision)
    before = _pooled((runs[i] for i in near_before if i in runs), revisions)
    after = _pooled((runs[i] for i in near_after if i in runs), revisions)
    rows = difference_rows(before, after)
    items = [{"area": g, "what": what, "before": b, "after": a} for g, what, b, a in rows]
    return {
        "items": items,
        "nothing_changed": not items,
        "summary": summary(items),
        "verdicts": {"before": verdicts(before_ids), "after": verdicts(after_ids)},
        "runs_compared": {"before": len(near_before), "after": len(near_after)},
    }


def summary(items: list[dict]) -> str:
    """One line naming what changed ("nothing recorded changed" when nothing did)."""
    if not items:
        return "nothing recorded changed"
    parts = [f"{i['what']}: {i['before']} → {i['after']}" for i in items[:4]]
    more = len(items) - len(parts)
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")
