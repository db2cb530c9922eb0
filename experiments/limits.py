"""Theoretical limits of a testbed from its inventory (../shared/DESIGN.md, "Theoretical limits").

network = storage servers x links x link rate; drives = datasheet bandwidth x drives by RAID
level; PCIe = lanes x generation rate. The lowest limit is the bottleneck.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

# Usable GB/s per lane after encoding (PCIe 1/2: 8b/10b, 3 to 5: 128b/130b, 6: FLIT).
PCIE_GBPS_PER_LANE = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}

GB = 1e9


@dataclass
class Limit:
    name: str
    read: float | None  # bytes/s
    write: float | None
    detail: str
    notes: list[str] = field(default_factory=list)


@dataclass
class Limits:
    limits: list[Limit]
    missing: list[str]

    def bottleneck(self, op: str) -> Limit | None:
        candidates = [lim for lim in self.limits if getattr(lim, op) is not None]
        return min(candidates, key=lambda lim: getattr(lim, op), default=None)

    @property
    def read_bottleneck(self) -> Limit | None:
        return self.bottleneck("read")

    @property
    def write_bottleneck(self) -> Limit | None:
        return self.bottleneck("write")


def raid_factors(level: str, disks: int) -> tuple[float, float]:
    """(read, write) streaming bandwidth of an array in units of one drive."""
    if level == "0":
        return disks, disks
    if level == "1":
        return disks, 1
    if level == "10":
        return disks, disks / 2
    if level == "5":
        return disks - 1, disks - 1
    if level == "6":
        return disks - 2, disks - 2
    return 1, 1


def _node_links(member, fabric: str) -> tuple[int, float | None]:
    """(links, Gb/s per link) of a testbed member, preferring NICs of the testbed's fabric."""
    nics = list(member.node.profile.nics.all())
    matching = [nic for nic in nics if not fabric or fabric == "mixed" or nic.kind == fabric]
    nics = matching or nics
    if not nics:
        return 0, None
    rate = max(nic.rate_gbps for nic in nics)
    fast = [nic for nic in nics if nic.rate_gbps == rate]
    links = member.storage_links or sum(nic.links for nic in fast)
    return links, rate


def _network(members, fabric: str, role: str, missing: list[str]) -> Limit | None:
    total_links, total = 0, 0.0
    shapes: Counter[tuple[int, float]] = Counter()
    servers = [m for m in members if getattr(m, role)]
    if not servers:
        return None
    for member in servers:
        links, rate = _node_links(member, fabric)
        if rate is None:
            missing.append(f"{member.node}: no NICs in its hardware profile")
            continue
        total_links += links
        total += links * rate * GB / 8
        shapes[(links, rate)] += 1
    if not total:
        return None
    label = "storage servers" if role == "storage" else "clients"
    parts = [
        f"{n} x {links} link{'s' if links > 1 else ''} of {rate:g} Gb/s"
        for (links, rate), n in sorted(shapes.items(), reverse=True)
    ]
    detail = f"{len(servers)} {label}, {total_links} links: " + ", ".join(parts)
    name = "network (storage servers)" if role == "storage" else "network (clients)"
    return Limit(name, total, total, detail)


def _target_drive(target):
    if target.drive_id:
        return target.drive
    if target.node_id is None:
        return None
    drives = list(target.node.profile.drives.all())
    wanted = "metadata" if target.kind == "metadata" else "data"
    for drive in drives:
        if drive.purpose == wanted:
            return drive
    return next((d for d in drives if d.purpose != "os"), None)


def compute_limits(testbed, members=None, targets=None) -> Limits:
    """Network, drive and PCIe limits of a testbed's storage side.

    ``members`` and ``targets`` may be given already loaded (the comparison loads those of
    every testbed it shows in a fixed number of queries)."""
    if members is None:
        members = list(
            testbed.members.select_related("node__profile").prefetch_related(
                "node__profile__nics", "node__profile__drives"
            )
        )
    missing: list[str] = []
    limits: list[Limit] = []
    for role in ("storage", "client"):
        lim = _network(members, testbed.fabric, role, missing)
        if lim:
            limits.append(lim)

    read = write = pcie = 0.0
    drives_total = 0
    pcie_known = True
    if targets is None:
        targets = list(
            testbed.targets.filter(kind="storage")
            .select_related("drive", "node__profile")
            .prefetch_related("node__profile__drives")
        )
    for target in targets:
        drive = _target_drive(target)
        disks = target.disks or (1 if target.raid_level == "none" else None)
        if drive is None or disks is None:
            missing.append(f"{target}: drive model or disks per array unknown")
            continue
        if not (drive.seq_read_mbps and drive.seq_write_mbps):
            missing.append(f"{drive}: datasheet sequential bandwidth unknown")
            continue
        r_factor, w_factor = raid_factors(target.raid_level, disks)
        read += target.count * r_factor * drive.seq_read_mbps * 1e6
        write += target.count * w_factor * drive.seq_write_mbps * 1e6
        drives_total += target.count * disks
        if drive.pcie_gen and drive.pcie_lanes:
            lane = PCIE_GBPS_PER_LANE.get(drive.pcie_gen)
            pcie += target.count * disks * drive.pcie_lanes * (lane or 0) * GB
        else:
            pcie_known = False
    if read:
        levels = sorted(
            {f"RAID{t.raid_level}" if t.raid_level != "none" else "no RAID" for t in targets}
        )
        limits.append(
            Limit(
                "drives",
                read,
                write,
                f"{drives_total} drives in {sum(t.count for t in targets)} storage targets "
                f"({', '.join(levels)}), datasheet sequential bandwidth",
            )
        )
    if pcie and pcie_known:
        limits.append(
            Limit(
                "PCIe (drive links)", pcie, pcie, f"{drives_total} drives, lanes x generation rate"
            )
        )
    if not targets:
        missing.append("no storage targets")
    return Limits(limits, missing)


def compute_target_limits(target) -> Limits:
    """Drive and PCIe limits of one array (a run that measured one target: dd on a device,
    StorageBench per target). ``target.count`` is ignored: the run measured one of them."""
    missing: list[str] = []
    limits: list[Limit] = []
    drive = _target_drive(target)
    disks = target.disks or (1 if target.raid_level == "none" else None)
    if drive is None or disks is None:
        missing.append(f"{target}: drive model or disks per array unknown")
        return Limits(limits, missing)
    if drive.seq_read_mbps and drive.seq_write_mbps:
        r_factor, w_factor = raid_factors(target.raid_level, disks)
        level = f"RAID{target.raid_level}" if target.raid_level != "none" else "no RAID"
        limits.append(
            Limit(
                "drives",
                r_factor * drive.seq_read_mbps * 1e6,
                w_factor * drive.seq_write_mbps * 1e6,
                f"{disks} drive{'s' if disks > 1 else ''} in {level}, "
                "datasheet sequential bandwidth",
            )
        )
    else:
        missing.append(f"{drive}: datasheet sequential bandwidth unknown")
    lane = PCIE_GBPS_PER_LANE.get(drive.pcie_gen or 0)
    if lane and drive.pcie_lanes:
        limits.append(
            Limit(
                "PCIe (drive links)",
                disks * drive.pcie_lanes * lane * GB,
                disks * drive.pcie_lanes * lane * GB,
                f"{disks} drives, lanes x generation rate",
            )
        )
    return Limits(limits, missing)
