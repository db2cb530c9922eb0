"""A testbed's inventory from BeeGFS CLI output: nodes, roles, pools, targets, buddy groups.

``plan_topology`` parses pasted listings (beegfs-ctl 7.x, beegfs-df, BeeGFS 8 ``beegfs``) and
merges them into one ``TopologyPlan`` without touching the database. ``apply_topology`` writes
the plan in one transaction and reports what it created, updated or left unchanged; with
``dry_run=True`` it rolls back, which is how the preview shows exactly what a save would do.

Importing the same output twice changes nothing the second time. BeeGFS owns node placement,
pools, capacities and buddy groups; everything else a user entered on a target (RAID level,
disks, file system, mount point, …) is kept.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from experiments.models import (
    Architecture,
    HardwareProfile,
    MirrorGroup,
    Node,
    StoragePool,
    Target,
    Testbed,
    TestbedNode,
)
from runners.parsers import beegfs
from runners.parsers.base import ParseError, split_lines

IMPORTED_PROFILE_NAME = "Unknown (imported from BeeGFS)"
MAX_TOPOLOGY_BYTES = 2 * 1024 * 1024  # listings of thousands of targets stay far below this

# BeeGFS node type -> TestbedNode role, and -> Target kind for the types that own targets.
NODE_ROLES = {
    "meta": "metadata",
    "storage": "storage",
    "client": "client",
    "management": "management",
}
TARGET_KINDS = {"meta": "metadata", "storage": "storage"}
NODE_TYPE_CHOICES = [
    ("", "auto (from the output)"),
    ("meta", "metadata"),
    ("storage", "storage"),
    ("client", "client"),
    ("management", "management"),
]
_NODE_ORDER = {"management": 0, "meta": 1, "storage": 2, "client": 3}

# A command line kept in the paste: it separates outputs and may carry --nodetype. Optional
# shell prompt ("[root@mgmt ~]# ", "$ "), then beegfs-ctl/beegfs-df or a BeeGFS 8 subcommand.
# The look-aheads keep node names such as "beegfs-df-1 [ID: 3]" from passing as commands.
_COMMAND_RE = re.compile(
    r"^\s*(?:.*?[$#>%]\s*)?(?:sudo\s+)?"
    r"(?P<cmd>(?:beegfs-ctl\s+--\w|beegfs-df(?=\s|$)|"
    r"beegfs\s+(?:node|target|pool|mirror|health|entry|quota|stats)(?=\s|$)).*)$"
)
_NODETYPE_RE = re.compile(r"--node-?type[=\s]+(\w+)", re.I)
_PROMPT_ONLY_RE = re.compile(r"^\s*(?:\[[^\]]*\]|\S+@\S+)?\s*[$#]\s*$")
# BeeGFS client node IDs are "<hex>-<hex>-<hostname>" (BeeGFS 8 aliases add a "c" in front).
_CLIENT_ID_RE = re.compile(r"^c?[0-9A-Fa-f]+-[0-9A-Fa-f]+-(?P<host>.+)$")


class TopologyError(Exception):
    """The plan does not belong to the testbed it is applied to."""


# --- the plan --------------------------------------------------------------------------------


@dataclass
class PlanNode:
    """A BeeGFS node: its type and numeric ID, and the machine it runs on."""

    type: str
    beegfs_id: int
    name: str  # the node ID string (7.x) or alias (8.x) as printed
    hostname: str
    address: str = ""

    @property
    def label(self) -> str:
        return f"{self.type} {self.beegfs_id}"


@dataclass
class PlanTarget:
    """A storage or metadata target. Only the attributes some output showed are set."""

    kind: str  # TargetKind value
    target_id: int
    node_key: tuple[str, int] | None = None  # (BeeGFS node type, node ID)
    name: str = ""
    pool_id: int | None = None
    capacity_gb: float | None = None
    implied_by: str = ""  # "pool list", "buddy group" when only a reference proves it exists

    @property
    def label(self) -> str:
        return f"{self.kind} target {self.target_id}"


@dataclass
class PlanPool:
    pool_id: int
    name: str
    name_known: bool  # False: only a target's pool ID was seen, the name is a placeholder


@dataclass
class PlanMirrorGroup:
    kind: str  # TargetKind value of its members
    group_id: int
    primary: int  # target IDs (metadata: the meta node IDs, which equal their target IDs)
    secondary: int


@dataclass
class SourceInfo:
    """What one pasted output turned out to be, for the preview."""

    index: int  # of the text in plan_topology's ``texts``
    label: str
    listing: str
    node_type: str | None
    summary: str


@dataclass
class InputError:
    """An output that could not be read: shown beside its text box, never as a traceback."""

    index: int
    label: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{where}{self.message}"


@dataclass
class TopologyPlan:
    testbed: Testbed
    sources: list[SourceInfo] = field(default_factory=list)
    nodes: dict[tuple[str, int], PlanNode] = field(default_factory=dict)
    targets: dict[tuple[str, int], PlanTarget] = field(default_factory=dict)
    pools: dict[int, PlanPool] = field(default_factory=dict)
    mirror_groups: dict[tuple[str, int], PlanMirrorGroup] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        return not (self.nodes or self.targets or self.pools or self.mirror_groups)


# --- splitting a paste into outputs ----------------------------------------------------------


@dataclass
class _Section:
    text: str
    node_type: str | None
    first_line: int  # 1-based line of the section's first line in the pasted text
    command: str = ""


def split_outputs(text: str, node_type: str | None = None) -> list[_Section]:
    """Cut a paste at the BeeGFS command lines it keeps (``$ beegfs-ctl --listnodes
    --nodetype=meta``), so one box can hold a whole terminal session. A command's --nodetype
    is the node type of its output; without one, ``node_type`` applies."""
    lines = split_lines(text)
    sections: list[_Section] = []
    current: list[str] = []
    start, command, section_type = 1, "", node_type

    def close() -> None:
        if any(ln.strip() for ln in current):
            sections.append(_Section("\n".join(current), section_type, start, command))

    for number, line in enumerate(lines, start=1):
        m = _COMMAND_RE.match(line)
        if m:
            close()
            command = m.group("cmd").strip()
            typed = _NODETYPE_RE.search(command)
            section_type = beegfs.NODE_TYPES.get(typed.group(1).lower()) if typed else None
            section_type = section_type or node_type
            current, start = [], number + 1
            continue
        # A bare prompt between outputs is no table row; blank it so line numbers still hold.
        current.append("" if _PROMPT_ONLY_RE.match(line) else line)
    close()
    return sections


# --- parsing and merging ---------------------------------------------------------------------


def plan_topology(
    testbed: Testbed, texts: list[tuple[str, str | None]], *, labels: list[str] | None = None
) -> TopologyPlan:
    """Parse each ``(text, node_type)`` and merge everything into one plan.

    ``node_type`` ("meta", "storage", "client", "management" or None for auto) matters for
    beegfs-ctl 7.x ``--listnodes``/``--listtargets``, which do not print node types; BeeGFS 8
    and beegfs-df output carry their own. Unreadable outputs land in ``plan.errors`` with the
    line number and reason, and the rest of the plan is still built.
    """
    plan = TopologyPlan(testbed=testbed)
    for index, (text, node_type) in enumerate(texts):
        label = labels[index] if labels else f"Output {index + 1}"
        sections = split_outputs(text, node_type or None)
        if not sections:
            plan.errors.append(InputError(index, label, None, "the output is empty"))
        for section in sections:
            _read_section(plan, index, label, section)
    _finish(plan)
    return plan


def _read_section(plan: TopologyPlan, index: int, label: str, section: _Section) -> None:
    name = f"{label} ({section.command})" if section.command else label
    offset = section.first_line - 1
    try:
        result = beegfs.parse(section.text, node_type=section.node_type)
    except ParseError as exc:
        line = exc.line + offset if exc.line is not None else None
        plan.errors.append(InputError(index, name, line, _shift_lines(exc.message, offset)))
        return
    topo = result.extra["topology"]
    kind = topo["kind"]
    if kind in ("entry_info", "migrate"):
        what = "one entry's stripe pattern" if kind == "entry_info" else "a migration summary"
        plan.errors.append(
            InputError(
                index,
                name,
                section.first_line,
                f"this output is {what}, not a listing of nodes, targets, pools or buddy groups",
            )
        )
        return
    untyped_nodes = [n for n in topo["nodes"] if n.get("type") is None]
    if untyped_nodes:
        plan.errors.append(
            InputError(
                index,
                name,
                section.first_line,
                "beegfs-ctl --listnodes does not print node types: choose the node type this "
                "output is for (or keep its command line with --nodetype=…)",
            )
        )
        return
    wrong = sorted(
        {
            t["type"]
            for t in topo["targets"] + topo["mirror_groups"]
            if t.get("type") not in (None, *TARGET_KINDS)
        }
    )
    if wrong:
        plan.errors.append(
            InputError(
                index,
                name,
                section.first_line,
                f"{' and '.join(wrong)} nodes have no targets or buddy groups: choose the node "
                "type this output is for",
            )
        )
        return

    counts = []
    for key in ("nodes", "targets", "pools", "mirror_groups"):
        if topo[key]:
            counts.append(f"{len(topo[key])} {key.replace('_', ' ')}")
    types = {item.get("type") for item in topo["nodes"] + topo["targets"]} - {None}
    plan.sources.append(
        SourceInfo(
            index=index,
            label=name,
            listing=f"{topo['cli']} {kind.replace('_', ' ')}",
            node_type=", ".join(sorted(types)) or section.node_type,
            summary=", ".join(counts),
        )
    )
    plan.warnings.extend(f"{name}: {_shift_lines(w, offset)}" for w in topo.get("warnings", []))
    for node in topo["nodes"]:
        _add_node(plan, node["type"], node["id"], node.get("name"), node)
    for target in topo["targets"]:
        _add_target(plan, target)
    for pool in topo["pools"]:
        _add_pool(plan, pool)
    for group in topo["mirror_groups"]:
        _add_mirror_group(plan, group, name)


def _shift_lines(message: str, offset: int) -> str:
    """The parser counts lines from the start of a section; the user, from the paste."""
    if not offset:
        return message
    return re.sub(r"\bline (\d+)", lambda m: f"line {int(m.group(1)) + offset}", message)


def _hostname(node_type: str, name: str) -> str:
    """The machine behind a BeeGFS node name: a client's ID ends in its hostname."""
    if node_type == "client" and (m := _CLIENT_ID_RE.match(name)):
        return m.group("host")
    return name


def _add_node(
    plan: TopologyPlan,
    node_type: str,
    node_id: int,
    name: str | None,
    detail: dict[str, Any] | None = None,
) -> None:
    if not name:
        return
    key = (node_type, node_id)
    hostname = _hostname(node_type, name)[:253]
    known = plan.nodes.get(key)
    if known is not None and known.hostname != hostname:
        plan.warnings.append(
            f"{node_type} node {node_id} is {known.name!r} in one output and "
            f"{name!r} in another; using {name!r}"
        )
    address = next((i["ip"] for i in (detail or {}).get("interfaces", []) if i.get("ip")), "")
    plan.nodes[key] = PlanNode(
        node_type, node_id, name, hostname, address or (known.address if known else "")
    )


def _target(plan: TopologyPlan, kind: str, target_id: int, implied_by: str = "") -> PlanTarget:
    key = (kind, target_id)
    if key not in plan.targets:
        plan.targets[key] = PlanTarget(kind, target_id, implied_by=implied_by)
    elif not implied_by:
        plan.targets[key].implied_by = ""  # a listing of targets shows it for real
    return plan.targets[key]


def _add_target(plan: TopologyPlan, row: dict[str, Any]) -> None:
    # beegfs-ctl --listtargets lists storage targets unless told --nodetype=meta.
    node_type = row.get("type") or "storage"
    target = _target(plan, TARGET_KINDS[node_type], row["id"])
    if row.get("node_id") is not None:
        target.node_key = (node_type, row["node_id"])
        # --longnodes and some BeeGFS 8 tables name the node beside its ID.
        _add_node(plan, node_type, row["node_id"], row.get("node_name"))
    if row.get("name"):
        target.name = row["name"][:160]
    if row.get("pool") is not None:
        target.pool_id = row["pool"]
        _add_pool(plan, {"id": row["pool"], "name": row.get("pool_name")})
    if row.get("total_bytes") is not None:
        target.capacity_gb = round(row["total_bytes"] / 1e9, 2)


def _add_pool(plan: TopologyPlan, row: dict[str, Any]) -> None:
    pool_id, name = row["id"], row.get("name")
    known = plan.pools.get(pool_id)
    if name:
        plan.pools[pool_id] = PlanPool(pool_id, name[:120], True)
    elif known is None:
        # BeeGFS calls its first pool "Default"; others get a name to rename by hand.
        placeholder = "Default" if pool_id == 1 else f"pool {pool_id}"
        plan.pools[pool_id] = PlanPool(pool_id, placeholder, False)
    for target_id in row.get("targets", []):
        _target(plan, "storage", target_id, implied_by="pool list").pool_id = pool_id


def _add_mirror_group(plan: TopologyPlan, row: dict[str, Any], source: str) -> None:
    if row.get("primary") is None or row.get("secondary") is None:
        plan.warnings.append(f"{source}: buddy group {row['id']} lists only one member")
        return
    node_type = row.get("type") or "storage"  # beegfs-ctl's default node type
    kind = TARGET_KINDS[node_type]
    plan.mirror_groups[(kind, row["id"])] = PlanMirrorGroup(
        kind, row["id"], row["primary"], row["secondary"]
    )
    for role in ("primary", "secondary"):
        target = _target(plan, kind, row[role], implied_by="buddy group")
        if kind == "metadata":
            # BeeGFS 7 metadata buddy groups pair meta nodes, each with one target of its ID.
            target.node_key = target.node_key or ("meta", row[role])
        elif row.get(f"{role}_node_id") is not None:
            target.node_key = ("storage", row[f"{role}_node_id"])


def _finish(plan: TopologyPlan) -> None:
    # Every meta node has exactly one metadata target, with the node's numeric ID: that is
    # also how beegfs-df's metadata rows (which name no node) find theirs.
    for node_type, node_id in list(plan.nodes):
        if node_type == "meta":
            _target(plan, "metadata", node_id)
    for (kind, target_id), target in plan.targets.items():
        if kind == "metadata" and target.node_key is None:
            target.node_key = ("meta", target_id)


# --- applying --------------------------------------------------------------------------------


@dataclass
class Change:
    """One row of the import summary."""

    model: str  # "profile", "node", "role", "pool", "target", "buddy group"
    label: str
    action: str  # "created" | "updated" | "unchanged"
    details: list[str] = field(default_factory=list)


@dataclass
class TopologySummary:
    changes: list[Change] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def count(self, action: str, model: str | None = None) -> int:
        return sum(
            1 for c in self.changes if c.action == action and (model is None or c.model == model)
        )

    @property
    def created(self) -> int:
        return self.count("created")

    @property
    def updated(self) -> int:
        return self.count("updated")

    @property
    def unchanged(self) -> int:
        return self.count("unchanged")

    @property
    def counts(self) -> dict[str, dict[str, int]]:
        """{model: {"created": n, "updated": n, "unchanged": n}} in the order models appear."""
        table: dict[str, dict[str, int]] = {}
        for c in self.changes:
            row = table.setdefault(c.model, {"created": 0, "updated": 0, "unchanged": 0})
            row[c.action] += 1
        return table

    def describe(self) -> str:
        return f"{self.created} created, {self.updated} updated, {self.unchanged} unchanged"


def _record(
    summary: TopologySummary, model: str, label: str, created: bool, details: list[str]
) -> None:
    action = "created" if created else "updated" if details else "unchanged"
    summary.changes.append(Change(model, label, action, [] if created else details))


def apply_topology(
    testbed: Testbed,
    plan: TopologyPlan,
    user,
    *,
    profile: HardwareProfile | None = None,
    dry_run: bool = False,
) -> TopologySummary:
    """Create or update the plan's nodes, roles, pools, targets and buddy groups.

    Nodes belong to the testbed's owner (the user when it has none) and are matched by
    hostname; new ones get ``profile``, or the owner's "Unknown (imported from BeeGFS)"
    profile. Roles are only ever switched on. ``dry_run`` rolls everything back.
    """
    if plan.testbed.pk != testbed.pk:
        raise TopologyError("the plan was made for another testbed")
    summary = TopologySummary(warnings=list(plan.warnings))
    with transaction.atomic():
        nodes = _apply_nodes(testbed, plan, user, profile, summary)
        _apply_roles(testbed, plan, nodes, summary)
        pools = _apply_pools(testbed, plan, summary)
        targets = _apply_targets(testbed, plan, nodes, pools, summary)
        _apply_mirror_groups(testbed, plan, targets, summary)
        manual = testbed.targets.filter(target_id__isnull=True).count()
        if manual and targets:
            summary.warnings.append(
                f"the testbed also has {manual} target row{'s' if manual != 1 else ''} "
                "without a BeeGFS target ID (entered by hand); remove them if they describe "
                "the same arrays, or limits count those twice"
            )
        if dry_run:
            transaction.set_rollback(True)
    return summary


def _apply_nodes(
    testbed: Testbed,
    plan: TopologyPlan,
    user,
    profile: HardwareProfile | None,
    summary: TopologySummary,
) -> dict[tuple[str, int], Node]:
    owner = testbed.owner or user
    by_host: dict[str, list[PlanNode]] = defaultdict(list)
    for planned in sorted(
        plan.nodes.values(), key=lambda n: (_NODE_ORDER.get(n.type, 9), n.beegfs_id)
    ):
        by_host[planned.hostname].append(planned)
    resolved: dict[tuple[str, int], Node] = {}
    for hostname, planned_nodes in by_host.items():
        address = next((n.address for n in planned_nodes if n.address), "")
        node = _find_node(owner, hostname) or _find_shared_node(owner, hostname, summary)
        created, details = node is None, []
        if node is None:
            profile = profile or _imported_profile(owner, summary)
            node = Node.objects.create(
                owner=owner, hostname=hostname, profile=profile, address=address[:255]
            )
        elif address and not node.address and node.owner_id == owner.pk:
            node.address = address[:255]
            node.save(update_fields=["address", "updated"])
            details.append(f"address {address}")
        ids = ", ".join(n.label for n in planned_nodes)
        _record(summary, "node", f"{node.hostname} (BeeGFS {ids})", created, details)
        for planned in planned_nodes:
            resolved[(planned.type, planned.beegfs_id)] = node
    return resolved


def _find_node(owner, hostname: str) -> Node | None:
    """The owner's node of this name. Hostnames ignore case, and a node entered by its FQDN
    ("stor1.lab.example") is the one BeeGFS calls by its short name ("stor1"), and the other
    way round, as long as only one node fits."""
    nodes = Node.objects.filter(owner=owner)
    exact = nodes.filter(hostname__iexact=hostname).order_by("pk").first()
    if exact is not None:
        return exact
    short = hostname.split(".", 1)[0]
    candidates = list(nodes.filter(hostname__istartswith=f"{short}.")[:2])
    if short != hostname:
        candidates += list(nodes.filter(hostname__iexact=short)[:2])
    return candidates[0] if len(candidates) == 1 else None


def _find_shared_node(owner, hostname: str, summary: TopologySummary) -> Node | None:
    """Another user's node of this name that its owner shares (the only one of that name);
    a node they do not share never joins, and the warning says why a new one was made."""
    others = (
        Node.objects.filter(hostname__iexact=hostname, published=False)
        .exclude(owner=owner)
        .exclude(owner__isnull=True)
        .select_related("owner")
        .order_by("pk")
    )
    shared = [n for n in others if n.shared]
    if len(shared) == 1:
        return shared[0]
    unshared = [n for n in others if not n.shared]
    if unshared and not shared:
        summary.warnings.append(
            f"{hostname} is also {unshared[0].owner.username}'s node, who does not share it: "
            "a node of the testbed's owner was created instead, and runs on it are refused "
            "until that node is shared"
        )
    return None


def _imported_profile(owner, summary: TopologySummary) -> HardwareProfile:
    """The owner's catch-all profile for machines BeeGFS names but nobody described yet."""
    profile = (
        HardwareProfile.objects.filter(owner=owner, name=IMPORTED_PROFILE_NAME, published=False)
        .order_by("pk")
        .first()
    )
    if profile is None:
        profile = HardwareProfile.objects.create(
            owner=owner,
            name=IMPORTED_PROFILE_NAME,
            architecture=Architecture.OTHER,
            notes="Created by the BeeGFS import for nodes without a hardware profile; move "
            "them to a real profile to get theoretical limits.",
        )
        _record(summary, "profile", IMPORTED_PROFILE_NAME, True, [])
    return profile


def _apply_roles(
    testbed: Testbed,
    plan: TopologyPlan,
    nodes: dict[tuple[str, int], Node],
    summary: TopologySummary,
) -> None:
    roles: dict[int, tuple[Node, set[str]]] = {}
    for (node_type, _), node in nodes.items():
        roles.setdefault(node.pk, (node, set()))[1].add(NODE_ROLES[node_type])
    for node, wanted in roles.values():
        member = TestbedNode.objects.filter(testbed=testbed, node=node).first()
        created = member is None
        if created:
            member = TestbedNode(testbed=testbed, node=node)
        added = sorted(role for role in wanted if not getattr(member, role))
        for role in added:
            setattr(member, role, True)
        if added:
            member.save()
        label = f"{node.hostname}: {', '.join(sorted(wanted))}"
        _record(summary, "role", label, created, [f"+{role}" for role in added])


def _apply_pools(
    testbed: Testbed, plan: TopologyPlan, summary: TopologySummary
) -> dict[int, StoragePool]:
    pools: dict[int, StoragePool] = {}
    for planned in sorted(plan.pools.values(), key=lambda p: p.pool_id):
        pool = StoragePool.objects.filter(testbed=testbed, pool_id=planned.pool_id).first()
        created, details = pool is None, []
        if pool is None:
            pool = StoragePool.objects.create(
                testbed=testbed, pool_id=planned.pool_id, name=planned.name
            )
        elif planned.name_known and pool.name != planned.name:
            details.append(f"name {pool.name} → {planned.name}")
            pool.name = planned.name
            pool.save(update_fields=["name"])
        _record(summary, "pool", f"{pool.name} ({pool.pool_id})", created, details)
        pools[planned.pool_id] = pool
    return pools


def _apply_targets(
    testbed: Testbed,
    plan: TopologyPlan,
    nodes: dict[tuple[str, int], Node],
    pools: dict[int, StoragePool],
    summary: TopologySummary,
) -> dict[tuple[str, int], Target]:
    targets: dict[tuple[str, int], Target] = {}
    unknown_nodes: dict[tuple[str, int], list[int]] = defaultdict(list)
    no_node: dict[str, list[str]] = defaultdict(list)
    for key in sorted(plan.targets, key=lambda k: (k[0] != "metadata", k[1])):
        planned = plan.targets[key]
        node = nodes.get(planned.node_key) if planned.node_key else None
        pool = pools.get(planned.pool_id) if planned.pool_id is not None else None
        target = (
            Target.objects.filter(testbed=testbed, kind=planned.kind, target_id=planned.target_id)
            .select_related("node", "pool")
            .order_by("pk")
            .first()
        )
        created, details = target is None, []
        if target is None:
            # A new target's RAID level is not in any listing; "none" until the user says.
            target = Target.objects.create(
                testbed=testbed,
                kind=planned.kind,
                target_id=planned.target_id,
                node=node,
                name=planned.name,
                pool=pool,
                capacity_gb=planned.capacity_gb,
                raid_level="none",
            )
        else:
            if node is not None and target.node_id != node.pk:
                details.append(f"node {target.node or '—'} → {node}")
                target.node = node
            if planned.name and not target.name:  # a name typed by hand stays
                details.append(f"name {planned.name}")
                target.name = planned.name
            if pool is not None and target.pool_id != pool.pk:
                details.append(f"pool {target.pool or '—'} → {pool}")
                target.pool = pool
            if planned.capacity_gb is not None and target.capacity_gb != planned.capacity_gb:
                before = "—" if target.capacity_gb is None else f"{target.capacity_gb:g}"
                details.append(f"capacity {before} → {planned.capacity_gb:g} GB")
                target.capacity_gb = planned.capacity_gb
            if details:
                target.save()
        if target.node_id is None:
            if planned.node_key and node is None:
                unknown_nodes[planned.node_key].append(planned.target_id)
            elif planned.implied_by:
                no_node[planned.implied_by].append(f"{planned.kind} {planned.target_id}")
        where = f" on {target.node}" if target.node_id else ""
        _record(summary, "target", f"{planned.label}{where}", created, details)
        targets[key] = target
    for (node_type, node_id), ids in sorted(unknown_nodes.items()):
        many = len(ids) > 1
        summary.warnings.append(
            f"{TARGET_KINDS[node_type]} target{'s' if many else ''} "
            f"{', '.join(map(str, ids))} {'are' if many else 'is'} on {node_type} node "
            f"{node_id}, which no pasted node list names: paste the output of "
            f"'beegfs-ctl --listnodes --nodetype={node_type}' (7.x) or 'beegfs node list' "
            "(8.x) too"
        )
    for source, labels in no_node.items():
        summary.warnings.append(
            f"{', '.join(labels)} (seen only in the {source}) "
            f"{'have' if len(labels) > 1 else 'has'} no node; paste the target list too"
        )
    return targets


def _apply_mirror_groups(
    testbed: Testbed,
    plan: TopologyPlan,
    targets: dict[tuple[str, int], Target],
    summary: TopologySummary,
) -> None:
    for key in sorted(plan.mirror_groups, key=lambda k: (k[0] != "metadata", k[1])):
        planned = plan.mirror_groups[key]
        primary = targets[(planned.kind, planned.primary)]
        secondary = targets[(planned.kind, planned.secondary)]
        group = MirrorGroup.objects.filter(
            testbed=testbed, kind=planned.kind, group_id=planned.group_id
        ).first()
        created, details = group is None, []
        if group is None:
            group = MirrorGroup.objects.create(
                testbed=testbed,
                kind=planned.kind,
                group_id=planned.group_id,
                primary=primary,
                secondary=secondary,
            )
        else:
            for role, target in (("primary", primary), ("secondary", secondary)):
                if getattr(group, f"{role}_id") != target.pk:
                    details.append(f"{role} → {planned.kind} target {target.target_id}")
                    setattr(group, role, target)
            if details:
                group.save()
        label = (
            f"{planned.kind} buddy group {planned.group_id}: "
            f"{planned.primary} + {planned.secondary}"
        )
        _record(summary, "buddy group", label, created, details)
