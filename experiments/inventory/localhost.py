"""This machine as inventory: a "This machine" hardware profile read from /proc and /sys, its
node, and a "localhost" testbed on which the node holds every BeeGFS role.

Everything here is idempotent: commands (``local_raid``, running benchmarks locally) call
:func:`ensure_localhost_testbed` each time and get the same rows back, with the machine facts
refreshed.
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Case, Value, When

from experiments.models import Architecture, Drive, HardwareProfile, Node, Testbed, TestbedNode
from runners import nodeconfig

PROFILE_NAME = "This machine"
TESTBED_NAME = "localhost"
ROLES = ("storage", "client", "metadata", "management")
ARCHITECTURES = {
    "x86_64": Architecture.X86_64,
    "amd64": Architecture.X86_64,
    "aarch64": Architecture.AARCH64,
    "arm64": Architecture.AARCH64,
    "ppc64le": Architecture.PPC64LE,
    "armv7l": Architecture.ARMV7L,
}
# Firmware placeholders that say nothing about the machine.
DMI_PLACEHOLDERS = {
    "",
    "to be filled by o.e.m.",
    "default string",
    "system product name",
    "system manufacturer",
    "not specified",
    "none",
}


def _read(path: str | Path) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _cpuinfo() -> list[dict[str, str]]:
    """/proc/cpuinfo as one dict per block (per logical CPU on most architectures)."""
    blocks: list[dict[str, str]] = []
    for chunk in _read("/proc/cpuinfo").split("\n\n"):
        block = {}
        for line in chunk.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                block[key.strip()] = value.strip()
        if block:
            blocks.append(block)
    return blocks


def architecture() -> str:
    """``uname -m`` as an :class:`Architecture` choice."""
    return ARCHITECTURES.get(os.uname().machine, Architecture.OTHER)


def cpu_topology() -> dict[str, int | None]:
    """Sockets, cores per socket and threads per core from sysfs (cpuinfo as a fallback)."""
    packages: set[str] = set()
    cores: set[tuple[str, str]] = set()
    cpus = 0
    for topology in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/topology"):
        package, core = _read(topology / "physical_package_id"), _read(topology / "core_id")
        if package and core:
            cpus += 1
            packages.add(package)
            cores.add((package, core))
    if not cpus:
        info = _cpuinfo()
        for block in info:
            package, core = block.get("physical id", "0"), block.get("core id", "")
            packages.add(package)
            cores.add((package, core or str(len(cores))))
        cpus = len(info)
    if not cpus:
        return {"sockets": None, "cores_per_socket": None, "threads_per_core": None}
    return {
        "sockets": len(packages),
        "cores_per_socket": max(1, len(cores) // len(packages)),
        "threads_per_core": max(1, cpus // len(cores)),
    }


def cpu_model() -> str:
    info = _cpuinfo()
    # x86: "model name"; ppc64le: "cpu"; some Arm and MIPS kernels: "Processor", "cpu model".
    for key in ("model name", "cpu model", "cpu", "Processor", "Hardware"):
        for block in info:
            if block.get(key):
                return block[key][:160]
    return ""


def clock_ghz() -> float | None:
    """Maximum clock from cpufreq, else the fastest ``cpu MHz`` in /proc/cpuinfo."""
    max_khz = _read("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    if max_khz.isdigit() and int(max_khz) > 0:
        return round(int(max_khz) / 1e6, 2)
    mhz = []
    for block in _cpuinfo():
        try:
            mhz.append(float(block.get("cpu MHz", "")))
        except ValueError:
            continue
    # The current clock wanders; one decimal keeps repeated reads from rewriting the profile.
    return round(max(mhz) / 1000, 1) if mhz else None


def memory_gib() -> float | None:
    match = re.search(r"^MemTotal:\s+(\d+) kB", _read("/proc/meminfo"), re.MULTILINE)
    return round(int(match.group(1)) / 1024**2, 1) if match else None


def numa_domains() -> int | None:
    nodes = [p for p in Path("/sys/devices/system/node").glob("node[0-9]*") if p.is_dir()]
    return len(nodes) or None


def usable_cpus() -> int:
    """What ``nproc`` prints: CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def os_name() -> str:
    match = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', _read("/etc/os-release"), re.MULTILINE)
    return match.group(1)[:120] if match else ""


def _dmi(name: str) -> str:
    value = _read(f"/sys/class/dmi/id/{name}")
    return "" if value.lower() in DMI_PLACEHOLDERS else value


def block_disk(path: str | Path) -> str | None:
    """Name of the whole disk (``vda``, ``nvme0n1``) holding ``path``, or None (overlay, tmpfs)."""
    dev = os.stat(path).st_dev
    sys_dev = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    if not sys_dev.exists():
        # btrfs and overlay report an anonymous device; ask the mount table for the source.
        source = nodeconfig.mount_of(path).get("source", "")
        if not source.startswith("/dev/"):
            return None
        sys_dev = Path("/sys/class/block") / Path(os.path.realpath(source)).name
        if not sys_dev.exists():
            return None
    sys_dev = sys_dev.resolve()
    if (sys_dev / "partition").exists():
        sys_dev = sys_dev.parent
    # Device-mapper (LVM, crypt): describe the first disk underneath.
    for _ in range(4):
        slaves = sorted((sys_dev / "slaves").glob("*")) if (sys_dev / "slaves").is_dir() else []
        if not slaves:
            break
        sys_dev = slaves[0].resolve()
        if (sys_dev / "partition").exists():
            sys_dev = sys_dev.parent
    return sys_dev.name


def disk_facts(name: str) -> dict:
    """Drive fields for ``/sys/block/<name>`` as the kernel reports them."""
    base = Path("/sys/block") / name
    sectors = _read(base / "size")
    device = os.path.realpath(base / "device") if (base / "device").exists() else ""
    if name.startswith("nvme"):
        kind, interface = "nvme", "pcie"
    else:
        kind = "ssd" if _read(base / "queue/rotational") == "0" else "hdd"
        if "/virtio" in device:
            interface = "other"
        elif "/ata" in device:
            interface = "sata"
        elif "/end_device" in device or "/sas" in device:
            interface = "sas"
        else:
            interface = ""
    model = _read(base / "device/model")
    if not model and "/virtio" in device:
        model = "virtio disk"
    return {
        "kind": kind,
        "model": (model or f"/dev/{name}")[:160],
        "count": 1,
        "capacity_gb": round(int(sectors) * 512 / 1e9, 1) if sectors.isdigit() else None,
        "interface": interface,
    }


def machine_profile_fields() -> dict:
    """HardwareProfile fields of this machine."""
    fields = {
        "architecture": architecture(),
        "cpu_model": cpu_model(),
        "clock_ghz": clock_ghz(),
        "numa_domains": numa_domains(),
        "memory_gib": memory_gib(),
        **cpu_topology(),
        "notes": f"Read from this machine by beeweb: {usable_cpus()} usable CPUs (nproc), "
        f"{os.uname().machine}, kernel {os.uname().release}.",
    }
    vendor, model = _dmi("sys_vendor"), _dmi("product_name")
    if vendor:
        fields["vendor"] = vendor[:80]
    if model:
        fields["model"] = model[:120]
    return fields


def data_dir() -> Path:
    return Path(settings.DATA_DIR)


@transaction.atomic
def ensure_localhost_node(owner) -> Node:
    """The owner's Node for this machine (``socket.gethostname()``), with fresh facts.

    A node created here gets a "This machine" profile. If the owner already pointed the node at
    another profile (a real datasheet), that profile is left alone.
    """
    hostname = socket.gethostname()
    node = Node.objects.filter(owner=owner, hostname=hostname).select_related("profile").first()
    if node is None:
        profile = (
            HardwareProfile.objects.filter(owner=owner, name=PROFILE_NAME, published=False)
            .order_by("pk")
            .first()
        )
        if profile is None:
            profile = HardwareProfile(owner=owner, name=PROFILE_NAME)
        node = Node(owner=owner, hostname=hostname, address="127.0.0.1")
    else:
        profile = node.profile
    if profile.pk is None or (profile.name == PROFILE_NAME and not profile.published):
        if _assign(profile, machine_profile_fields()):
            profile.save()
        _ensure_data_drive(profile)
    node.profile = profile
    if _assign(node, {"os": os_name(), "kernel": os.uname().release[:120]}):
        node.save()
    return node


def _assign(obj, fields: dict) -> list[str]:
    """Set ``fields`` on ``obj``; the names that changed (unchanged rows are not saved)."""
    changed = [name for name, value in fields.items() if getattr(obj, name) != value]
    for name in changed:
        setattr(obj, name, fields[name])
    if obj.pk is None:
        return list(fields)
    return changed


def _ensure_data_drive(profile: HardwareProfile) -> None:
    # The disk under the data directory: it holds the loop files and local benchmark data
    # (normally the root disk).
    target = data_dir() if data_dir().exists() else Path("/")
    name = block_disk(target)
    if name is None:
        return
    facts = disk_facts(name)
    drive = profile.drives.filter(purpose="data").order_by("pk").first()
    if drive is None:
        Drive.objects.create(profile=profile, purpose="data", **facts)
        return
    changed = _assign(drive, facts)
    if changed:
        drive.save(update_fields=changed)


@transaction.atomic
def ensure_localhost_testbed(owner, name: str = TESTBED_NAME) -> Testbed:
    """The owner's testbed ``name`` with this machine in every role; created if missing.

    A new (or blank) ``benchmark_dir`` becomes ``$BEEWEB_DATA_DIR/bench``, which is created; a
    directory the owner set is kept.
    """
    node = ensure_localhost_node(owner)
    bench = data_dir() / "bench"
    bench.mkdir(parents=True, exist_ok=True)
    testbed = Testbed.objects.filter(owner=owner, name=name, published=False).order_by("pk").first()
    if testbed is None:
        testbed = Testbed.objects.create(
            owner=owner,
            name=name,
            benchmark_dir=str(bench),
            description=f"This machine ({node.hostname}) in every BeeGFS role; local benchmarks "
            "write below the beeweb data directory.",
        )
    elif not testbed.benchmark_dir:
        testbed.benchmark_dir = str(bench)
        testbed.save(update_fields=["benchmark_dir", "updated"])
    member, _ = TestbedNode.objects.get_or_create(testbed=testbed, node=node)
    missing = [role for role in ROLES if not getattr(member, role)]
    if missing:
        for role in missing:
            setattr(member, role, True)
        member.save(update_fields=missing)
    return testbed


def local_testbed(user) -> Testbed | None:
    """The "localhost" testbed (manage.py ensure_localhost) the user may run on, if any."""
    return (
        Testbed.objects.operable_by(user)
        .filter(name=TESTBED_NAME)
        .order_by(Case(When(owner=user, then=Value(0)), default=Value(1)), "pk")
        .first()
    )


def localhost_node(owner) -> Node | None:
    """This machine's node for ``owner`` if :func:`ensure_localhost_node` made it already."""
    return Node.objects.filter(owner=owner, hostname=socket.gethostname()).first()
