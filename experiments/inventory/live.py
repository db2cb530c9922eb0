"""A testbed's topology from its running cluster, and how the stored one differs from it.

A node's worker runs the fixed beegfs-ctl listings of ``runners.beegfs_topology`` (asked
through a node request, ``experiments.execution.noderequests``) and returns what they printed.
Here that answer becomes what a paste of the same listings would: a ``TopologyPlan`` for the
import's preview and save (``experiments.inventory.topology``), so a live import and a pasted
one cannot disagree. The answer also carries what a paste's preview does not keep: each
target's state (reachability, consistency), which is what ``differences`` compares before a
launch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from experiments.inventory.topology import TopologyPlan, plan_topology
from experiments.models import Testbed
from runners import beegfs_topology
from runners.parsers import beegfs
from runners.parsers.base import ParseError

KIND_OF = {"meta": "metadata", "storage": "storage"}
# beegfs-ctl --listtargets --spaceinfo asks every server itself; one that does not answer is
# named on stderr (and its targets' sizes printed as 0), the exit status 3.
_SERVER_ERROR_RE = re.compile(r"\[ERROR from beegfs-(storage|meta) (\S+) \[ID: (\d+)\]: ([^\]]+)\]")
ROLE_OF = {"meta": "metadata", "storage": "storage", "management": "management"}
EMPTY_MARKERS = ("No mirror buddy groups defined",)


class LiveError(Exception):
    """The node's answer holds no usable topology: BeeGFS's own words, for the user."""


@dataclass
class LiveTarget:
    kind: str  # "storage" | "metadata"
    target_id: int
    node: str  # the BeeGFS node name (the hostname for servers)
    reachability: str  # lower case: "online", "probably-offline", "offline"
    consistency: str  # "good", "needs-resync", "bad"
    capacity_gb: float | None = None
    error: str = ""  # its server did not answer beegfs-ctl ("Communication error")

    @property
    def healthy(self) -> bool:
        return self.reachability == "online" and self.consistency in ("good", "") and not self.error


@dataclass
class LiveTopology:
    """What the listings say: the texts to plan from, nodes by type, targets with states."""

    items: list[tuple[str, str, str | None]] = field(default_factory=list)  # label, text, type
    nodes: dict[str, set[str]] = field(default_factory=dict)  # BeeGFS type -> node names
    targets: dict[tuple[str, int], LiveTarget] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    seconds: float | None = None
    silent: dict[tuple[str, str], str] = field(default_factory=dict)  # (type, name) -> error


def _listing_problem(listing: beegfs_topology.Listing, row: dict[str, Any]) -> str:
    words = (row.get("stderr") or "").strip() or (row.get("stdout") or "").strip()
    words = " / ".join(line.strip() for line in words.splitlines()[-3:] if line.strip())
    status = "did not finish" if row.get("rc") is None else f"exited with {row['rc']}"
    return f"{listing.command} {status}: {words or 'no output'}"


def read_answer(result: dict[str, Any] | None) -> LiveTopology:
    """The listings of a ``beegfs-topology`` answer; LiveError when a listing every cluster
    has (nodes, targets) failed or printed nothing readable. The optional ones (storage pools,
    buddy groups: Enterprise Features) only warn."""
    if not isinstance(result, dict) or not isinstance(result.get("listings"), list):
        raise LiveError("the node's answer holds no beegfs-ctl listings")
    live = LiveTopology(seconds=result.get("seconds"))
    seen = set()
    for row in result["listings"]:
        if not isinstance(row, dict):
            continue
        listing = beegfs_topology.BY_NAME.get(row.get("name"))
        if listing is None:
            continue  # a listing this server does not know: a newer worker's
        seen.add(listing.name)
        stdout = row.get("stdout") or ""
        # Servers that did not answer: their targets' rows stay (states from the management
        # daemon), without the sizes beegfs-ctl could not get.
        silent = {
            (m.group(1), m.group(2)): m.group(4).strip()
            for m in _SERVER_ERROR_RE.finditer(row.get("stderr") or "")
        }
        if row.get("rc") != 0 and not (silent and stdout.strip()):
            if listing.optional:
                live.warnings.append(_listing_problem(listing, row))
                continue
            raise LiveError(_listing_problem(listing, row))
        if not stdout.strip() or any(m in stdout for m in EMPTY_MARKERS):
            continue
        try:
            topo = beegfs.parse(stdout, node_type=listing.node_type).extra["topology"]
        except ParseError as exc:
            if listing.optional:
                live.warnings.append(f"{listing.command}: {exc}")
                continue
            raise LiveError(f"{listing.command}: {exc}") from None
        for (node_type, name), message in sorted(silent.items()):
            live.warnings.append(
                f"{node_type} server {name} did not answer beegfs-ctl ({message}): its "
                "targets' sizes are unknown"
            )
        live.items.append((listing.command, stdout, listing.node_type))
        for target in topo["targets"]:
            if (target.get("type") or listing.node_type, target.get("node_name")) in silent:
                target["total_bytes"] = None
        for node in topo["nodes"]:
            if node.get("type") and node.get("name"):
                live.nodes.setdefault(node["type"], set()).add(node["name"])
        for row_target in topo["targets"]:
            node_type = row_target.get("type") or listing.node_type
            if node_type not in KIND_OF:
                continue
            total = row_target.get("total_bytes")
            error = silent.get((node_type, row_target.get("node_name")), "")
            live.targets[(KIND_OF[node_type], row_target["id"])] = LiveTarget(
                kind=KIND_OF[node_type],
                target_id=row_target["id"],
                node=row_target.get("node_name") or "",
                reachability=row_target.get("reachability") or "",
                consistency=row_target.get("consistency") or "",
                capacity_gb=round(total / 1e9, 2) if total is not None else None,
                error=error,
            )
        live.silent.update(silent)
    missing = [
        listing.command for listing in beegfs_topology.LISTINGS[:1] if listing.name not in seen
    ]
    if missing:
        raise LiveError(f"the node's answer lacks {', '.join(missing)}")
    if not live.items:
        raise LiveError("beegfs-ctl listed no nodes or targets")
    return live


def plan_live(testbed: Testbed, live: LiveTopology) -> TopologyPlan:
    """The import plan of the listings, as a paste of the same outputs would give."""
    plan = plan_topology(
        testbed,
        [(text, node_type) for _, text, node_type in live.items],
        labels=[label for label, _, _ in live.items],
    )
    for key, target in plan.targets.items():
        known = live.targets.get(key)
        if known is not None and known.error:
            target.capacity_gb = None  # beegfs-ctl printed 0 for a server it could not ask
    plan.warnings.extend(live.warnings)
    return plan


def _short(name: str) -> str:
    return name.lower().split(".", 1)[0]


def differences(testbed: Testbed, live: LiveTopology) -> list[str]:
    """How the stored testbed differs from its running cluster, as a storage engineer would
    want to know before a benchmark: targets not online (or not in sync), targets added,
    removed or on another node, servers gone or new. Only targets with a BeeGFS ID and roles
    BeeGFS knows (management, metadata, storage) are compared; an empty list: they agree."""
    found: list[str] = []
    stored = {
        (t.kind, t.target_id): t
        for t in testbed.targets.filter(target_id__isnull=False).select_related("node")
    }
    for key in sorted(live.targets, key=lambda k: (k[0] != "metadata", k[1])):
        target = live.targets[key]
        where = f" on {target.node}" if target.node else ""
        if key not in stored:
            found.append(f"{target.kind} target {target.target_id}{where} was added")
            continue
        mine = stored[key]
        if mine.node_id and target.node and _short(mine.node.hostname) != _short(target.node):
            found.append(
                f"{target.kind} target {target.target_id} moved from {mine.node.hostname} "
                f"to {target.node}"
            )
        if not target.healthy:
            state = target.reachability or "unknown"
            if target.consistency not in ("good", ""):
                state += f", {target.consistency}"
            label = f"{target.kind} target {target.target_id}{where}"
            if target.error:
                found.append(
                    f"{label} does not answer ({target.error}; the management daemon says {state})"
                )
            else:
                found.append(f"{label} is {state}")
    for key in sorted(set(stored) - set(live.targets), key=lambda k: (k[0] != "metadata", k[1])):
        mine = stored[key]
        where = f" (on {mine.node.hostname})" if mine.node_id else ""
        found.append(f"{mine.kind} target {mine.target_id}{where} is not in the cluster any more")
    live_hosts = {
        role: {_short(n) for n in live.nodes.get(node_type, set())}
        for node_type, role in ROLE_OF.items()
    }
    members = testbed.members.select_related("node").order_by("node__hostname")
    for role in ("management", "metadata", "storage"):
        if not live_hosts[role]:
            continue  # that listing printed nothing (a failed one said so already)
        mine = {_short(m.node.hostname): m.node.hostname for m in members if getattr(m, role)}
        for short, hostname in sorted(mine.items()):
            if short not in live_hosts[role]:
                found.append(f"{role} server {hostname} is not in the cluster any more")
        for short in sorted(live_hosts[role] - set(mine)):
            found.append(f"{role} server {short} is in the cluster but not in the testbed")
    return found
