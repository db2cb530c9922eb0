"""Checks shared by the models, the forms, the API and the matrix expansion.

They are model field validators, so the web forms (ModelForm runs them) and the API
(ModelSerializer copies them onto its fields) give the same verdict with the same message.

Where benchmarks may work on a node: a testbed's benchmark directory and a target's mount point
are checked on the server (:func:`work_path_problem`), whatever the node's own confinement
(``BEEWEB_NODE_DIRS``) says afterwards.
"""

from __future__ import annotations

import ipaddress
import math
import posixpath
import re
import unicodedata

from django.core.exceptions import ValidationError
from django.utils.deconstruct import deconstructible

# System directories: neither they nor anything below them may hold benchmarks.
SYSTEM_TREES = (
    "/etc",
    "/usr",
    "/bin",
    "/sbin",
    "/boot",
    "/dev",
    "/proc",
    "/sys",
    "/run",
    "/root",
    "/var/log",
    "/var/cache",
    "/var/spool",
    "/var/mail",
    "/var/run",
    "/var/lock",
    "/var/backups",
    "/lost+found",
)
# Directories that hold other things: a subdirectory of them is fine (/home/alice/bench,
# /tmp/bench, /var/lib/beeweb/bench, /mnt/beegfs), the directory itself is not.
SYSTEM_ROOTS = (
    "/",
    "/home",
    "/tmp",
    "/var",
    "/var/lib",
    "/var/tmp",
    "/mnt",
    "/media",
    "/opt",
    "/srv",
    "/snap",
)
MAX_PATH_CHARS = 400


def work_path_problem(path: str) -> str | None:
    """Why ``path`` cannot be a directory benchmarks work in, or None when it can.

    It must be absolute, normalised (no ``.`` or ``..`` components, no doubled or trailing
    slash), free of control characters, and not a system directory (``/``, ``/etc``, ``/usr``,
    ``/lib*``, ``/proc``, ...; ``/home``, ``/tmp`` and ``/var`` themselves, though directories
    below them are fine)."""
    if not isinstance(path, str) or not path:
        return "give a directory"
    if len(path) > MAX_PATH_CHARS:
        return f"at most {MAX_PATH_CHARS} characters"
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in path):
        return "must not contain control characters"
    if not path.startswith("/"):
        return f"{path!r} is not an absolute path (start it with /)"
    parts = path.split("/")[1:]
    if ".." in parts:
        return f"{path!r} must not contain '..'"
    if posixpath.normpath(path) != path or path.startswith("//"):
        return f"{path!r} is not normalised (write {posixpath.normpath(path)!r})"
    top = parts[0]
    if top.startswith("lib"):
        return f"{path!r} is a system directory ({'/' + top})"
    for tree in SYSTEM_TREES:
        if path == tree or path.startswith(tree + "/"):
            return f"{path!r} is a system directory ({tree})"
    if path in SYSTEM_ROOTS:
        return f"{path!r} is a system directory: use a directory below it"
    return None


def validate_work_path(value: str) -> None:
    """Django validator of :func:`work_path_problem` (benchmark directories, mount points)."""
    problem = work_path_problem(value)
    if problem:
        raise ValidationError(problem, code="work_path")


# --- Hostnames and addresses --------------------------------------------------------------
# RFC 1123 host names: dot-separated labels of 1-63 letters, digits and hyphens, none starting
# or ending with a hyphen, 253 characters in all. A node's hostname names its worker queue
# (runners.launch.queue_for), its MPI host entry and its lease, so anything else ("bad host
# name!", "node_1") would only fail later, on a worker or in mpirun.
MAX_HOSTNAME = 253
_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)\Z")


def hostname_problem(name: str) -> str | None:
    """Why ``name`` is not an RFC 1123 host name, or None when it is."""
    if not isinstance(name, str) or not name:
        return "give a host name"
    if len(name) > MAX_HOSTNAME:
        return f"{name[:40]!r}… is longer than {MAX_HOSTNAME} characters"
    for label in name.split("."):
        if not label:
            return f"{name!r} has an empty label (two dots, or a dot at an end)"
        if len(label) > 63:
            return f"{name!r}: the label {label[:20]!r}… is longer than 63 characters"
        if not _LABEL.match(label):
            return (
                f"{name!r} is not a host name: labels are letters, digits and hyphens "
                "(no spaces, underscores or other signs), not starting or ending with a hyphen"
            )
    return None


def validate_hostname(value: str) -> None:
    """Django validator of :func:`hostname_problem` (``Node.hostname``)."""
    problem = hostname_problem(value)
    if problem:
        raise ValidationError(problem, code="hostname")


def validate_address(value: str) -> None:
    """A node's address: an IPv4 or IPv6 address, or an RFC 1123 host name."""
    try:
        ipaddress.ip_address(value)
    except ValueError:
        problem = hostname_problem(value)
        if problem:
            raise ValidationError(
                f"{value!r} is neither an IP address nor a host name", code="address"
            ) from None


# --- Bounds of datasheet numbers ----------------------------------------------------------
# Empty means "not known"; a number given must make sense, because the limits
# (experiments/inventory/limits.py) multiply them: a drive of -100 MB/s would lower a testbed's
# ceiling, a profile of zero sockets would give it no cores.


def validate_positive(value: float) -> None:
    """Strictly above zero: bandwidths, IOPS, capacities and clocks of zero mean nothing."""
    if value is not None and not value > 0:
        raise ValidationError(f"must be greater than zero (got {value:g})", code="min_value")


def validate_count(value: int) -> None:
    """Counts (sockets, cores, drives, NICs, links) are at least one; leave it empty when
    not known."""
    if value is not None and value < 1:
        raise ValidationError(
            f"must be at least 1 (got {value}); leave it empty when not known",
            code="min_value",
        )


SLURM_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")


def validate_slurm_name(value: str) -> None:
    """A Slurm partition or account name: it becomes ``--partition=<name>`` of an argv, so
    letters, digits and ._- only, not starting with '-'."""
    if value and not SLURM_NAME_RE.match(value):
        raise ValidationError(
            "a Slurm name holds letters, digits and ._- only (at most 64, not starting with "
            "'-' or '.')",
            code="slurm_name",
        )


# --- What datasheets allow ------------------------------------------------------------------
# The largest value a real datasheet states, with headroom (docs/design-notes.md, "Datasheet
# bounds", says why each): a number beyond it is a typo or a unit slip (MHz for GHz, MB for
# GB), and the limits would multiply it into a testbed's ceiling.


@deconstructible
class AtMost:
    """``value <= limit`` (and finite), with the reason in the message: "at most 10 GHz: no
    CPU runs faster (got 500)"."""

    def __init__(self, limit: float, unit: str, why: str) -> None:
        self.limit, self.unit, self.why = limit, unit, why

    def __call__(self, value) -> None:
        if value is None:
            return
        if not math.isfinite(value) or value > self.limit:
            raise ValidationError(
                f"at most {_number(self.limit)}{' ' + self.unit if self.unit else ''}: "
                f"{self.why} (got {_number(value)})",
                code="max_value",
            )

    def __eq__(self, other) -> bool:
        return isinstance(other, AtMost) and (self.limit, self.unit, self.why) == (
            other.limit,
            other.unit,
            other.why,
        )

    def __hash__(self) -> int:
        return hash((self.limit, self.unit, self.why))


def _number(value: float) -> str:
    """1,000,000 and 2.5, not 1e+06."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if float(value).is_integer() and abs(value) < 1e18:
        return f"{int(value):,}"
    return f"{value:,.6g}" if abs(value) < 1e15 else f"{value:.3g}"


# Each bound: the value, its unit, and why (docs/design-notes.md, "Datasheet bounds").
SOCKETS = AtMost(32, "sockets", "the largest single systems (HPE Superdome Flex) have 32")
CORES_PER_SOCKET = AtMost(
    512, "cores", "the largest CPUs have 192 (AMD EPYC 9965) to 288 (Intel Xeon 6780E)"
)
THREADS_PER_CORE = AtMost(8, "threads", "SMT8 (IBM POWER) is the most any CPU runs")
CLOCK_GHZ = AtMost(10, "GHz", "no CPU runs above about 6.2 GHz (is it a value in MHz?)")
NUMA_DOMAINS = AtMost(256, "domains", "32 sockets with 8 sub-NUMA clusters each")
MEMORY_GIB = AtMost(
    65536, "GiB", "64 TiB is the most one system holds (IBM Power E1080, HPE Superdome Flex)"
)
MEMORY_CHANNELS = AtMost(512, "channels", "32 sockets with 12 channels each are 384")
TDP_WATTS = AtMost(1000, "W", "a processor's TDP; the hottest CPUs state 500 W")
DRIVES = AtMost(1024, "drives", "a server with external enclosures (106 per 4U JBOD)")
DRIVE_CAPACITY_GB = AtMost(
    1_000_000, "GB", "the largest drives hold about 250 TB (is it a value in MB?)"
)
DRIVE_MBPS = AtMost(
    100_000, "MB/s", "a PCIe 6 x16 link carries about 128 GB/s; NVMe drives state up to 15,000"
)
DRIVE_IOPS = AtMost(100_000_000, "IOPS", "the fastest drives state 3 to 6 million")
PCIE_LANES = AtMost(32, "lanes", "x32 is the widest PCIe link")
NIC_RATE_GBPS = AtMost(
    3200, "Gb/s", "the fastest links are 800 Gb/s (XDR InfiniBand, 800 GbE; is it in Mb/s?)"
)
NIC_USABLE_GBYTES = AtMost(400, "GB/s", "a 3,200 Gb/s link would carry 400 GB/s")
NIC_PORTS = AtMost(16, "ports", "adapters have 1 to 4 ports (8 on breakout cards)")
NIC_ADAPTERS = AtMost(64, "adapters", "a server has a few PCIe slots (OCP and riser cards)")
LINKS = AtMost(1024, "links", "64 adapters with 16 ports each")
TARGET_DISKS = AtMost(1024, "disks", "a RAID array or pool of a few enclosures")
TARGET_CAPACITY_GB = AtMost(100_000_000, "GB", "100 PB is beyond any one storage target")
TARGETS = AtMost(1024, "targets", "BeeGFS servers run a few to a few dozen targets")


# BeeGFS releases: 7.4.5, 8.0, 7.3.2-1 (a package revision), 7.0-beta1, and the FhGFS/BeeGFS
# releases named by date, 2015.03-r17.
BEEGFS_VERSION = re.compile(
    r"^(?:[1-9][0-9]?(?:\.[0-9]{1,3}){1,3}|20[0-9]{2}\.[0-9]{2}(?:-r[0-9]{1,3})?)"
    r"(?:[-~+][A-Za-z0-9]{1,20}(?:\.[A-Za-z0-9]{1,20})*)?\Z"
)


def validate_beegfs_version(value: str) -> None:
    """A BeeGFS version as its packages and ``beegfs-ctl --version`` state it."""
    if value and not BEEGFS_VERSION.match(value):
        raise ValidationError(
            f"{value[:40]!r} is not a BeeGFS version: write it as the release states it, "
            "e.g. 7.4.5, 8.0 or 2015.03-r17",
            code="beegfs_version",
        )


def usable_problem(rate_gbps: float | None, usable_gbytes: float | None) -> str | None:
    """Why a link's usable bandwidth (GB/s) cannot be what a link of ``rate_gbps`` carries:
    no link carries more than its line rate (100 Gb/s is 12.5 GB/s)."""
    if rate_gbps is None or usable_gbytes is None:
        return None
    if not (math.isfinite(rate_gbps) and math.isfinite(usable_gbytes)):
        return None  # the fields' own validators say why
    if usable_gbytes > rate_gbps / 8:
        return (
            f"{_number(usable_gbytes)} GB/s is more than the line rate carries "
            f"({_number(rate_gbps)} Gb/s is {_number(rate_gbps / 8)} GB/s)"
        )
    return None
