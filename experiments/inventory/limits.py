"""Theoretical limits of a testbed from its inventory (../shared/DESIGN.md, "Theoretical limits").

network = storage servers x links x bandwidth per link (none where the one client is the one
storage server; x n/(n-1) where n clients are the n storage servers: 1/n of the data stays on
its node); drives = datasheet bandwidth x drives by RAID level (without a datasheet figure: at
most the interface's rate, and 300 MB/s for a SATA or SAS hard disk); PCIe = lanes x
generation rate. The lowest limit is the bottleneck.

Bandwidth per link, in this order: what the testbed's own qperf/perftest runs measured (one
stream between two nodes is one link), what a study states for the NIC (``Nic.usable_gbytes``
with ``usable_source``), else the line rate / 8. The limit's detail names which one it uses.

Storage targets, beside the datasheet: what the testbed's own succeeded StorageBench runs
measured per target (``measured_targets``), when it has such runs. Rule: per target and
direction, the best figure of the runs that finished within MEASURED_WINDOW_DAYS of the
testbed's latest StorageBench run (a ceiling is what a target was shown to sustain: its best
recent figure, not a mean; an older figure may predate a change of disks). A run over several
targets gives each its own line of the verbose status (``extra.target``: the BeeGFS target id,
matched to ``Target.target_id``); a run on one target (``run.target``) gives that target its
headline value. The limit "storage targets (StorageBench)" says which run and date each figure
comes from ("measured by StorageBench run 12 on 2026-11-28"); targets without a measurement
count with their datasheet figure, named as such. The datasheet "drives" limit stays beside it.

A run's limit follows its scope (``run_scope``): a run on one target (``run.target``; it runs
on the target's server, so no network), a run on one raw drive (``params["drives"] == 1``), a
run through BeeGFS on one target (``params["storage_targets"] == 1``: that target's drives and
its server's links), StorageBench (on the servers, no network), else the whole testbed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from runners import registry

# Usable GB/s per lane after encoding (PCIe 1/2: 8b/10b, 3 to 5: 128b/130b, 6: FLIT).
PCIE_GBPS_PER_LANE = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}

GB = 1e9

# A value up to this much above a limit is "at the limit", not impossible: line rates,
# datasheets and measurements each carry a few percent (seed 000 reads 48.1 GB/s over a
# 48.0 GB/s qperf baseline, "100% bandwidth utilization", and 3.1 GB/s over one drive's
# 3.06 GB/s fio figure, "utilization values slightly above 100%").
TOLERANCE = 0.02

# A drive whose datasheet bandwidth the inventory lacks still bounds what it streams: its
# interface's rate (SATA 3: 6 Gb/s with 8b/10b; SAS up to SAS-4's 22.5 Gb/s, the generation
# is not recorded) and, for a hard disk on SATA or SAS, the media rate of a single-actuator
# disk's outer tracks (the fastest 3.5-inch disks stream 270-285 MB/s). Upper bounds, as a
# theoretical limit must be, named as such in the limit's detail. A virtual disk ("other")
# states no interface and its rotational flag says nothing: it stays uncounted.
INTERFACE_MBPS = {"sata": 600.0, "sas": 2400.0}
HDD_MAX_MBPS = 300.0

# Tools that run on the storage servers themselves: their data crosses no network.
LOCAL_TOOLS = registry.on_servers()

# Link bandwidth measured by network benchmarks, per tool; RDMA metrics for RDMA fabrics.
LINK_METRICS = {
    "qperf": ("rc_bw", "rc_rdma_write_bw", "rc_rdma_read_bw", "tcp_bw", "udp_bw"),
    "perftest": ("ib_write_bw", "ib_read_bw", "ib_send_bw"),
}
RDMA_FABRICS = {"infiniband", "omnipath", "roce"}
IP_METRICS = {"tcp_bw", "udp_bw"}


@dataclass
class Limit:
    name: str
    read: float | None  # bytes/s
    write: float | None
    detail: str
    notes: list[str] = field(default_factory=list)
    # What sets it, in a few words a sentence can compare ("1 link per server x 12.0 GB/s").
    basis: str = ""


@dataclass
class Limits:
    limits: list[Limit]
    missing: list[str]
    scope: str = "testbed"
    notes: list[str] = field(default_factory=list)  # what is left out and why

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


# Measured target ceilings: StorageBench runs finished within this many days of the testbed's
# latest one count (see the module docstring).
MEASURED_WINDOW_DAYS = 90
BENCH_TOOL = "storagebench"
BENCH_METRICS = {"read_bw": "read", "write_bw": "write"}


@dataclass(frozen=True)
class MeasuredTarget:
    """One direction's ceiling of one storage target, as a StorageBench run measured it."""

    bytes_per_s: float
    run_id: int
    finished: Any  # datetime (or None for a run without one)

    @property
    def basis(self) -> str:
        when = f" on {self.finished:%Y-%m-%d}" if self.finished else ""
        return f"measured by StorageBench run {self.run_id}{when}"


def measured_targets(testbeds) -> dict[int, dict[int, dict[str, MeasuredTarget]]]:
    """Per testbed id, per storage ``Target`` pk, per direction ("read"/"write"): the best
    recent StorageBench figure (module docstring), in one query for all ``testbeds``."""
    from datetime import timedelta

    from experiments.models import Metric, Run, Target

    testbeds = list(testbeds)
    if not testbeds:
        return {}
    ids = [tb.pk for tb in testbeds]
    rows = list(
        Metric.objects.filter(
            name__in=list(BENCH_METRICS),
            stat="value",
            iteration=None,
            run__testbed_id__in=ids,
            run__tool=BENCH_TOOL,
            run__status=Run.Status.SUCCEEDED,
        )
        .values(
            "name",
            "value",
            "extra",
            "primary",
            "run_id",
            "run__testbed_id",
            "run__target_id",
            "run__params",
            "run__finished_at",
            "run__created",
        )
        .order_by()
    )
    if not rows:
        return {}
    by_id = {
        (t["testbed_id"], t["target_id"]): t["pk"]
        for t in Target.objects.filter(testbed_id__in=ids, kind="storage")
        .exclude(target_id=None)
        .values("pk", "testbed_id", "target_id")
    }
    latest: dict[int, Any] = {}
    for row in rows:
        when = row["run__finished_at"] or row["run__created"]
        tb = row["run__testbed_id"]
        if tb not in latest or when > latest[tb]:
            latest[tb] = when
    out: dict[int, dict[int, dict[str, MeasuredTarget]]] = {}
    for row in rows:
        tb, when = row["run__testbed_id"], row["run__finished_at"] or row["run__created"]
        if when < latest[tb] - timedelta(days=MEASURED_WINDOW_DAYS) or row["value"] <= 0:
            continue
        extra = row["extra"] if isinstance(row["extra"], dict) else {}
        if "target" in extra:
            target = by_id.get((tb, extra["target"]))
        elif row["primary"] and row["run__target_id"] and _one_target(row["run__params"]):
            target = row["run__target_id"]
        else:
            continue  # an aggregate over several targets: not one target's ceiling
        if target is None:
            continue
        op = BENCH_METRICS[row["name"]]
        have = out.setdefault(tb, {}).setdefault(target, {}).get(op)
        if have is None or (row["value"], when) > (have.bytes_per_s, have.finished):
            out[tb][target][op] = MeasuredTarget(row["value"], row["run_id"], when)
    return out


def _one_target(params) -> bool:
    """Whether a run on a target states that it benchmarked one target (or states nothing)."""
    count = _count(params if isinstance(params, dict) else {}, "targets")
    return count in (None, 1)


def _bench_limit(targets, bench: dict[int, dict[str, MeasuredTarget]]) -> Limit | None:
    """The limit "storage targets (StorageBench)": the sum over ``targets`` of each one's
    measured ceiling (x its count), a target without one by its datasheet figure; None when
    none of them was measured."""
    if not any(t.pk in bench for t in targets):
        return None
    totals: dict[str, float | None] = {}
    phrases: list[str] = []
    for op in ("read", "write"):
        total: float | None = 0.0
        runs: dict[str, int] = {}
        datasheet = 0
        for target in targets:
            m = bench.get(target.pk, {}).get(op)
            if m is not None:
                total += m.bytes_per_s * target.count
                runs[m.basis] = runs.get(m.basis, 0) + target.count
                continue
            rate = _datasheet_rate(target, op)
            if rate is None:
                total = None
                break
            total += rate * target.count
            datasheet += target.count
        totals[op] = total or None
        if total and runs:
            said = "; ".join(f"{_plural(n, 'target')} {basis}" for basis, n in sorted(runs.items()))
            if datasheet:
                said += f"; {_plural(datasheet, 'target')} by datasheet"
            phrases.append(f"{op}: {said}")
    if not phrases:
        return None
    n = sum(t.count for t in targets)
    return Limit(
        "storage targets (StorageBench)",
        totals["read"] if any(p.startswith("read") for p in phrases) else None,
        totals["write"] if any(p.startswith("write") for p in phrases) else None,
        f"{_plural(n, 'storage target')}, {' | '.join(phrases)}",
        basis="measured by StorageBench",
    )


def _datasheet_rate(target, op: str) -> float | None:
    """One target's datasheet bandwidth in ``op`` (bytes/s), by RAID level, or None."""
    drive = _target_drive(target)
    disks = target.disks or (1 if target.raid_level == "none" else None)
    rates = _drive_rates(drive) if drive is not None and disks else None
    if rates is None:
        return None
    r_factor, w_factor = raid_factors(target.raid_level, disks)
    return (r_factor * rates[0] if op == "read" else w_factor * rates[1]) * 1e6


@dataclass(frozen=True)
class MeasuredLink:
    """Bandwidth of one link as the testbed's network benchmarks measured it."""

    bytes_per_s: float
    tool: str
    metric: str
    runs: int

    @property
    def basis(self) -> str:
        runs = f"{self.runs} run{'s' if self.runs != 1 else ''}"
        return f"measured with {self.tool} ({self.metric}, mean of {runs})"


def measured_links(testbeds) -> dict[int, MeasuredLink]:
    """Per testbed id, the best link bandwidth its qperf/perftest runs measured (mean over
    runs of each metric, the highest metric), in one query. RDMA fabrics use RDMA tests only,
    Ethernet only TCP/UDP tests."""
    from django.db.models import Avg, Count

    from experiments.models import Metric, Run

    testbeds = list(testbeds)
    if not testbeds:
        return {}
    fabrics = {tb.pk: tb.fabric for tb in testbeds}
    names = [name for names in LINK_METRICS.values() for name in names]
    rows = (
        Metric.objects.filter(
            primary=True,
            name__in=names,
            run__testbed_id__in=list(fabrics),
            run__tool__in=list(LINK_METRICS),
            run__status__in=[Run.Status.SUCCEEDED, Run.Status.IMPORTED, Run.Status.PUBLISHED],
        )
        .values("run__testbed_id", "run__tool", "name")
        .annotate(mean=Avg("value"), runs=Count("run", distinct=True))
        .order_by()
    )
    best: dict[int, MeasuredLink] = {}
    for row in rows:
        testbed_id, name = row["run__testbed_id"], row["name"]
        fabric = fabrics.get(testbed_id, "")
        if name not in LINK_METRICS.get(row["run__tool"], ()):
            continue
        if fabric in RDMA_FABRICS and name in IP_METRICS:
            continue
        if fabric == "ethernet" and name not in IP_METRICS:
            continue
        if not row["mean"] or row["mean"] <= 0:
            continue
        link = MeasuredLink(row["mean"], row["run__tool"], name, row["runs"])
        if testbed_id not in best or link.bytes_per_s > best[testbed_id].bytes_per_s:
            best[testbed_id] = link
    return best


def _node_links(member, fabric: str, measured: MeasuredLink | None = None):
    """(links, bytes/s per link, basis) of a testbed member, preferring NICs of the testbed's
    fabric; per link: the testbed's measurement, else the NIC's stated usable bandwidth, else
    its line rate."""
    nics = list(member.node.profile.nics.all())
    matching = [nic for nic in nics if not fabric or fabric == "mixed" or nic.kind == fabric]
    nics = matching or nics
    if not nics:
        return 0, None, ""
    rate = max(nic.rate_gbps for nic in nics)
    fast = [nic for nic in nics if nic.rate_gbps == rate]
    links = member.storage_links or sum(nic.links for nic in fast)
    if measured is not None:
        return links, measured.bytes_per_s, measured.basis
    stated = [nic for nic in fast if nic.usable_gbytes]
    if stated:
        nic = max(stated, key=lambda n: n.usable_gbytes)
        source = f"as stated by {nic.usable_source}" if nic.usable_source else "as stated"
        return links, nic.usable_gbytes * GB, source
    return links, rate * GB / 8, f"line rate {rate:g} Gb/s"


def _links_phrase(links: int, per_link: float, basis: str) -> str:
    rate = per_link / GB
    rate_text = f"{rate:.1f}" if rate >= 1 else f"{rate:.3g}"
    return f"{links} link{'s' if links != 1 else ''} x {rate_text} GB/s {basis}"


def _network(
    members, fabric: str, role: str, missing: list[str], measured: MeasuredLink | None = None
) -> Limit | None:
    total = 0.0
    shapes: Counter[int] = Counter()  # links per member -> members
    rates: Counter[tuple[float, str]] = Counter()  # (bytes/s per link, basis) -> links
    servers = [m for m in members if getattr(m, role)]
    if not servers:
        return None
    for member in servers:
        links, per_link, basis = _node_links(member, fabric, measured)
        if per_link is None:
            missing.append(f"{member.node}: no NICs in its hardware profile")
            continue
        total += links * per_link
        shapes[links] += 1
        rates[(per_link, basis)] += links
    if not total:
        return None
    label = "storage servers" if role == "storage" else "clients"
    detail = f"{len(servers)} {label}"
    if len(shapes) > 1:
        detail += (
            " ("
            + ", ".join(
                f"{n} x {links} link{'s' if links != 1 else ''}"
                for links, n in sorted(shapes.items(), reverse=True)
            )
            + ")"
        )
    detail += ": " + " + ".join(
        _links_phrase(links, per_link, basis)
        for (per_link, basis), links in sorted(rates.items(), reverse=True)
    )
    name = "network (storage servers)" if role == "storage" else "network (clients)"
    node = "server" if role == "storage" else "client"
    per_node = sum(links * n for links, n in shapes.items()) / sum(shapes.values())
    basis = f"{per_node:.2g} link{'s' if per_node != 1 else ''} per {node}"
    if len(rates) == 1:
        ((per_link, _),) = rates
        basis += f" x {per_link / GB:.1f} GB/s"
    return Limit(name, total, total, detail, basis=basis)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _roles(members) -> tuple[set, set]:
    """(storage server node ids, client node ids) of a testbed."""
    return (
        {m.node_id for m in members if getattr(m, "storage", False)},
        {m.node_id for m in members if getattr(m, "client", False)},
    )


def _networks(members, fabric, missing, measured, notes) -> list[Limit]:
    """The network limits of a testbed: its storage servers' links and its clients'.

    Data crosses a network only between two nodes. Where the clients are the storage servers
    (the same nodes), one client's data is striped over every server, its own included: a
    share 1/n of it stays on its node and the links carry (n-1)/n, so they bound n/(n-1)
    times their rate (one set of links, named once); on one node nothing crosses a network
    and there is no network limit (a localhost testbed: a 10 GbE NIC bounds nothing)."""
    servers, clients = _roles(members)
    if servers and servers == clients:
        n = len(servers)
        if n == 1:
            notes.append(
                "no network limit: the client is the storage server (one node), so the data "
                "crosses no network"
            )
            return []
        lim = _network(members, fabric, "storage", missing, measured)
        if lim is None:
            return []
        factor = n / (n - 1)
        lim.read, lim.write = lim.read * factor, lim.write * factor
        lim.detail += (
            f", x {n}/{n - 1}: the {n} clients are the storage servers, so 1/{n} of the data "
            "stays on its node"
        )
        return [lim]
    out = []
    for role in ("storage", "client"):
        lim = _network(members, fabric, role, missing, measured)
        if lim:
            out.append(lim)
    return out


def _drive_rates(drive) -> tuple[float, float, str] | None:
    """(read, write) MB/s of one drive and what they are: the datasheet's, else the upper
    bound its kind and interface set (INTERFACE_MBPS, HDD_MAX_MBPS), else None."""
    if drive.seq_read_mbps and drive.seq_write_mbps:
        return drive.seq_read_mbps, drive.seq_write_mbps, "datasheet sequential bandwidth"
    link = INTERFACE_MBPS.get(drive.interface)
    if link is None:
        return None
    bus = drive.get_interface_display()
    if drive.kind == "hdd" and HDD_MAX_MBPS < link:
        return (
            HDD_MAX_MBPS,
            HDD_MAX_MBPS,
            f"no datasheet bandwidth: at most {HDD_MAX_MBPS:.0f} MB/s per {bus} hard disk, "
            "a single-actuator disk's outer tracks",
        )
    return link, link, f"no datasheet bandwidth: at most {link:.0f} MB/s per {bus} link"


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


def _members(testbed) -> list:
    """A testbed's members with their nodes' profiles, NICs and drives."""
    return list(
        testbed.members.select_related("node__profile").prefetch_related(
            "node__profile__nics", "node__profile__drives"
        )
    )


def _storage_targets(testbed) -> list:
    """A testbed's storage targets with their drives and their nodes' profiles."""
    return list(
        testbed.targets.filter(kind="storage")
        .select_related("drive", "node__profile")
        .prefetch_related("node__profile__drives")
    )


def compute_limits(
    testbed, members=None, targets=None, measured=False, network: bool = True, bench=False
) -> Limits:
    """Network, drive, measured-target and PCIe limits of a testbed's storage side.

    ``members`` and ``targets`` may be given already loaded (the comparison loads those of
    every testbed it shows in a fixed number of queries); ``measured`` is the testbed's
    ``MeasuredLink`` or None (False: look it up); ``bench`` its ``measured_targets`` entry
    (False: look it up). ``network=False`` leaves the network out (tools that run on the
    storage servers)."""
    if measured is False:
        measured = measured_links([testbed]).get(testbed.pk)
    if bench is False:
        bench = measured_targets([testbed]).get(testbed.pk)
    if members is None:
        members = _members(testbed)
    missing: list[str] = []
    limits: list[Limit] = []
    notes: list[str] = []
    if network:
        limits += _networks(members, testbed.fabric, missing, measured, notes)

    read = write = pcie = 0.0
    drives_total = 0
    bases: set[str] = set()
    pcie_known = True
    if targets is None:
        targets = _storage_targets(testbed)
    for target in targets:
        drive = _target_drive(target)
        disks = target.disks or (1 if target.raid_level == "none" else None)
        if drive is None or disks is None:
            missing.append(f"{target}: drive model or disks per array unknown")
            continue
        rates = _drive_rates(drive)
        if rates is None:
            missing.append(f"{drive}: datasheet sequential bandwidth unknown")
            continue
        r_factor, w_factor = raid_factors(target.raid_level, disks)
        read += target.count * r_factor * rates[0] * 1e6
        write += target.count * w_factor * rates[1] * 1e6
        bases.add(rates[2])
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
                f"{_plural(drives_total, 'drive')} in "
                f"{_plural(sum(t.count for t in targets), 'storage target')} "
                f"({', '.join(levels)}), {'; '.join(sorted(bases))}",
            )
        )
    measured_limit = _bench_limit(targets, bench) if bench else None
    if measured_limit is not None:
        limits.append(measured_limit)
    if pcie and pcie_known:
        limits.append(
            Limit(
                "PCIe (drive links)", pcie, pcie, f"{drives_total} drives, lanes x generation rate"
            )
        )
    if not targets:
        missing.append("no storage targets")
    return Limits(limits, missing, notes=notes)


def compute_target_limits(target, bench=None) -> Limits:
    """Drive, measured and PCIe limits of one array (a run that measured one target: dd on a
    device, StorageBench per target). ``target.count`` is ignored: the run measured one of
    them. ``bench``: the testbed's ``measured_targets`` entry (None: none)."""
    missing: list[str] = []
    limits: list[Limit] = []
    ceiling = (bench or {}).get(target.pk, {})
    if ceiling:
        read, write = ceiling.get("read"), ceiling.get("write")
        said = [f"{op} {m.basis}" for op, m in (("read", read), ("write", write)) if m]
        limits.append(
            Limit(
                "target (StorageBench)",
                read.bytes_per_s if read else None,
                write.bytes_per_s if write else None,
                f"{target.name or 'this target'}: {'; '.join(said)}",
                basis="measured by StorageBench",
            )
        )
    drive = _target_drive(target)
    disks = target.disks or (1 if target.raid_level == "none" else None)
    if drive is None or disks is None:
        missing.append(f"{target}: drive model or disks per array unknown")
        return Limits(limits, missing)
    rates = _drive_rates(drive)
    if rates is not None:
        r_factor, w_factor = raid_factors(target.raid_level, disks)
        level = f"RAID{target.raid_level}" if target.raid_level != "none" else "no RAID"
        limits.append(
            Limit(
                "drives",
                r_factor * rates[0] * 1e6,
                w_factor * rates[1] * 1e6,
                f"{disks} drive{'s' if disks > 1 else ''} in {level}, {rates[2]}",
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
                f"{disks} drive{'s' if disks > 1 else ''}, lanes x generation rate",
            )
        )
    return Limits(limits, missing, "one target")


# --- Scope: what a run measured -------------------------------------------------------------


@dataclass(frozen=True)
class Scope:
    """What one run measured: ``kind`` is "testbed", "target" (``run.target``), "one target"
    (one of the testbed's targets through BeeGFS) or "drive" (one raw drive)."""

    kind: str
    testbed_id: int | None
    target_id: int | None = None
    network: bool = True

    @property
    def label(self) -> str:
        if self.kind == "target":
            return "one target, on its server"
        if self.kind == "drive":
            return "one drive"
        if self.kind == "one target":
            return "one target" if self.network else "one target, on its server"
        return "testbed" if self.network else "testbed storage, on the servers"


def _count(params: dict, name: str) -> float | None:
    value = params.get(name)
    if isinstance(value, bool) or value in (None, ""):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def run_scope(tool: str, params, target_id: int | None, testbed_id: int | None) -> Scope:
    """The scope of a run from its target and parameters: ``run.target`` set (the run works on
    that target's server: dd on a device, StorageBench per target), ``drives`` = 1 (one raw
    drive), ``storage_targets`` = 1 (StorageBench: ``targets`` = 1) for one target, else the
    testbed. StorageBench runs on the storage servers: its data crosses no network."""
    params = params if isinstance(params, dict) else {}
    local = tool in LOCAL_TOOLS
    if target_id:
        return Scope("target", testbed_id, target_id, network=False)
    if _count(params, "drives") == 1:
        return Scope("drive", testbed_id, network=False)
    targets = _count(params, "storage_targets")
    if targets is None and local:
        targets = _count(params, "targets")
    if targets == 1:
        return Scope("one target", testbed_id, network=not local)
    return Scope("testbed", testbed_id, network=not local)


def _widest(candidates: list[Limits], scope: str, note: str) -> Limits:
    """One Limits from several alternatives (targets or drives of a testbed, when the run does
    not say which): each limit the largest of the alternatives, so it holds for any of them."""
    candidates = [c for c in candidates if c.limits]
    if not candidates:
        return Limits([], ["no storage target with a known drive"], scope)
    merged: dict[str, Limit] = {}
    for limits in candidates:
        for lim in limits.limits:
            have = merged.get(lim.name)
            if have is None:
                merged[lim.name] = Limit(lim.name, lim.read, lim.write, lim.detail)
                continue
            differs = (have.read, have.write) != (lim.read, lim.write)
            have.read = max(filter(None, (have.read, lim.read)), default=None)
            have.write = max(filter(None, (have.write, lim.write)), default=None)
            if differs and note not in have.detail:
                have.detail += f" ({note})"
    return Limits(list(merged.values()), [], scope)


def _server_network(testbed, target, members, measured, missing) -> Limit | None:
    member = next((m for m in members if target.node_id and m.node_id == target.node_id), None)
    if member is None:
        missing.append(f"{target}: its storage server is not a member of the testbed")
        return None
    links, per_link, basis = _node_links(member, testbed.fabric, measured)
    if per_link is None:
        missing.append(f"{member.node}: no NICs in its hardware profile")
        return None
    total = links * per_link
    return Limit(
        "network (one storage server)",
        total,
        total,
        f"{member.node}: " + _links_phrase(links, per_link, basis),
    )


def _one_drive(target) -> Limits:
    """One raw drive of a target's drive model (no RAID)."""
    drive = _target_drive(target)
    if drive is None:
        return Limits([], [f"{target}: drive model unknown"], "one drive")
    limits = []
    rates = _drive_rates(drive)
    if rates is not None:
        basis = "sequential bandwidth" if drive.seq_read_mbps else rates[2]
        limits.append(
            Limit(
                "drive",
                rates[0] * 1e6,
                rates[1] * 1e6,
                f"one {drive.model or drive.get_kind_display()}, {basis}",
            )
        )
    lane = PCIE_GBPS_PER_LANE.get(drive.pcie_gen or 0)
    if lane and drive.pcie_lanes:
        rate = drive.pcie_lanes * lane * GB
        limits.append(
            Limit(
                "PCIe (drive link)",
                rate,
                rate,
                f"PCIe {drive.pcie_gen} x{drive.pcie_lanes}, lanes x generation rate",
            )
        )
    return Limits(limits, [], "one drive")


def compute_scope_limits(
    scope: Scope, testbed, members=None, targets=None, target=None, measured=False, bench=False
) -> Limits:
    """The limits of what a run measured (``run_scope``): the testbed's, one target's (its
    drives by RAID level, its StorageBench ceiling and, through BeeGFS, its server's links)
    or one drive's. Without a named target or drive, the largest of the testbed's is taken
    (an upper bound). ``bench``: the testbed's ``measured_targets`` entry (False: look up)."""
    if bench is False:
        bench = measured_targets([testbed]).get(testbed.pk) if scope.kind != "drive" else None
    if scope.kind == "target":
        limits = compute_target_limits(target, bench) if target is not None else Limits([], [])
        limits.scope = scope.label
        return limits
    if members is None:
        members = _members(testbed)
    if targets is None:
        targets = _storage_targets(testbed)
    if measured is False:
        measured = measured_links([testbed]).get(testbed.pk)
    if scope.kind == "drive":
        return _widest([_one_drive(t) for t in targets], scope.label, "the largest drive")
    if scope.kind == "one target":
        servers, clients = _roles(members)
        # Clients that are the storage servers: as in _networks, one node crosses no
        # network, and n nodes keep 1/n of the data on its node (the target's server's
        # links are the clients' links: named once).
        same = bool(servers) and servers == clients
        network = scope.network and not (same and len(servers) == 1)
        candidates = []
        for t in targets:
            limits = compute_target_limits(t, bench)
            if network:
                lim = _server_network(testbed, t, members, measured, limits.missing)
                if lim and same:
                    n = len(servers)
                    lim.read, lim.write = lim.read * n / (n - 1), lim.write * n / (n - 1)
                    lim.detail += f", x {n}/{n - 1}: the clients are the storage servers"
                if lim:
                    limits.limits.append(lim)
            candidates.append(limits)
        merged = _widest(candidates, scope.label, "the largest of the testbed's targets")
        if scope.network and not network:
            merged.notes.append(
                "no network limit: the client is the storage server (one node), so the data "
                "crosses no network"
            )
        if network and not same:
            lim = _network(members, testbed.fabric, "client", merged.missing, measured)
            if lim:
                merged.limits.append(lim)
        return merged
    limits = compute_limits(testbed, members, targets, measured, network=scope.network, bench=bench)
    limits.scope = scope.label
    return limits


def above_limit(value: float, limit: float) -> bool:
    """Whether ``value`` exceeds ``limit`` by more than the limits' own uncertainty."""
    return value > limit * (1 + TOLERANCE)
