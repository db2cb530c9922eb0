"""The attributes that make runs alike (DESIGN.md "what makes runs alike"): their keys,
labels in sentences, and which names a comparison URL may use. Below both the comparison's
spec (which checks URLs) and comparability (which compares runs attribute by attribute)."""

from __future__ import annotations

import json

from experiments.comparison import dimensions

SETUP = ("tool", "testbed", "target", "tuning", "source", "hardware")
SETUP_LABELS = {
    "tool": "tool",
    "testbed": "testbed",
    "target": "target",
    "tuning": "tuning set",
    "source": "data source",
    "hardware": "hardware",
    "memory": "working set vs clients' memory",
}


def attribute_name(key: str) -> str:
    """ "param:threads" -> "threads", "tool" -> "tool" (for sentences)."""
    if key.startswith("param:"):
        return key[6:].replace("_", " ")
    return SETUP_LABELS.get(key, key)


def valid_attribute(key: str) -> bool:
    """An attribute name the URL may ignore: a setup attribute or ``param:<name>``."""
    if key in SETUP_LABELS:
        return True
    head, _, name = key.partition(":")
    return head == "param" and dimensions.safe_name(name)


# Series dimensions that are properties of a testbed (or of its targets): two series of
# different values are necessarily different testbeds, targets and, for published data,
# studies; those differences are what the user compares.
TESTBED_LEVEL = frozenset({"arch", "cpu", "hardware", "beegfs", "fabric", "testbed"})
TARGET_LEVEL = frozenset({"raid", "fs"})
WHOLE_TESTBED = "whole testbed"


def setup_attributes(
    ctx, tool: str, testbed_id: int, target_id: int | None, tuning_id: int | None, source: str
) -> dict[str, str]:
    """The attributes of a configuration's setup: tool, testbed, target, tuning set, data
    source and the testbed's hardware (a few per comparison: callers cache them)."""
    testbed = ctx.testbeds.get(testbed_id)
    target = ctx.target_by_id.get(target_id) if target_id else None
    tuning = ctx.tunings.get(tuning_id)
    attrs = {
        "tool": tool or "",
        "testbed": testbed.name if testbed else str(testbed_id),
        "target": (target.name or f"target {target.pk}") if target else WHOLE_TESTBED,
        "tuning": tuning.name if tuning else "(none)",
        "source": dimensions.short_source(source),
    }
    if testbed is not None:
        attrs["hardware"] = ctx.hardware(testbed.pk)
    return attrs


def param_text(value) -> str:
    """A parameter's value as the text attributes compare (yes/no, 4 not 4.0, JSON)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list | dict):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


# --- Facts: the configuration differences table's rows ---------------------------------


def facts(ctx, config: dict) -> dict[tuple[str, str], str]:
    """Hardware, testbed, run and tuning facts of a configuration, in this order (the
    configuration differences table's rows). Those of its testbed and target, and of its
    tuning set, are computed once per comparison (``ctx.facts``)."""
    testbed = ctx.testbeds.get(config["run__testbed_id"])
    if testbed is None:
        return {}
    target_id = config["run__target_id"]
    target = ctx.target_by_id.get(target_id) if target_id else None
    setup = ctx.facts.get(("setup", testbed.pk, target_id))
    if setup is None:
        setup = ctx.facts[("setup", testbed.pk, target_id)] = _setup_facts(ctx, testbed, target)
    facts = dict(setup)
    stated = _stated_targets(config["run__params"])
    if target is None and stated:
        facts[("testbed", "storage targets")] = f"{stated} (stated by the run)"
    facts[("run", "tool")] = config["run__tool"] or "—"
    for key, value in config.get("attributes", {}).items():
        if key.startswith("param:"):
            facts[("run", attribute_name(key))] = value
    tuning_id = config["run__tuning_set_id"]
    tuning = ctx.facts.get(("tuning", tuning_id))
    if tuning is None:
        tuning = ctx.facts[("tuning", tuning_id)] = _tuning_facts(ctx.tunings.get(tuning_id))
    facts.update(tuning)
    return facts


def _setup_facts(ctx, testbed, target) -> dict[tuple[str, str], str]:
    members = ctx.members.get(testbed.pk, [])
    storage = [m.node.profile for m in members if m.storage]
    if target is not None and target.node_id:
        storage = [target.node.profile]
    clients = [m.node.profile for m in members if m.client]

    def many(values) -> str:
        values = sorted({str(v) for v in values if v not in (None, "")})
        return ", ".join(values) if values else "—"

    facts: dict[tuple[str, str], str] = {}
    facts[("hardware", "storage server profile")] = many(p.name for p in storage)
    facts[("hardware", "architecture")] = many(p.architecture for p in storage)
    facts[("hardware", "CPU")] = many(p.cpu_model for p in storage)
    facts[("hardware", "cores per server")] = many(p.total_cores for p in storage)
    facts[("hardware", "memory per server (GiB)")] = many(
        f"{p.memory_gib:g}" if p.memory_gib else None for p in storage
    )
    facts[("hardware", "data drives")] = many(
        str(d) for p in storage for d in p.drives.all() if d.purpose == "data"
    )
    facts[("hardware", "network adapters")] = many(str(n) for p in storage for n in p.nics.all())
    facts[("hardware", "client profile")] = many(p.name for p in clients)
    facts[("testbed", "testbed")] = testbed.name
    facts[("testbed", "BeeGFS version")] = testbed.beegfs_version or "—"
    facts[("testbed", "fabric")] = testbed.get_fabric_display() or "—"
    facts[("testbed", "storage servers")] = str(sum(1 for m in members if m.storage))
    facts[("testbed", "clients")] = str(len(clients))
    targets = [target] if target is not None else ctx.targets.get(testbed.pk, [])
    facts[("testbed", "storage targets")] = (
        "1 (one target measured)" if target is not None else str(sum(t.count for t in targets))
    )
    facts[("testbed", "RAID level")] = many(t.get_raid_level_display() for t in targets)
    facts[("testbed", "disks per array")] = many(t.disks for t in targets)
    facts[("testbed", "local file system")] = many(t.filesystem for t in targets)
    facts[("testbed", "mount options")] = many(t.mount_options for t in targets)
    return facts


def _tuning_facts(tuning) -> dict[tuple[str, str], str]:
    facts = {("tuning", "tuning set"): tuning.name if tuning else "(none)"}
    for key, value in sorted((tuning.effective if tuning else {}).items()):
        facts[("tuning", key)] = str(value)
    return facts


def _stated_targets(params: dict) -> str:
    """The number of storage targets a run states it used ("" when it does not)."""
    for key in ("storage_targets", "targets", "num_targets", "stripe_count"):
        value = params.get(key) if isinstance(params, dict) else None
        if value not in (None, "", True, False):
            return param_text(value)
    return ""
