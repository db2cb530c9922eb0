"""Known tuning keys by scope, with types and units, and value normalisation.

Unknown keys are allowed (BeeGFS grows options every release) and marked as unknown;
known keys are validated: "512k" and "1m" become bytes, booleans become true/false.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runners.parsers.base import ParseError, parse_size

SCOPES = [
    ("storage", "storage service (beegfs-storage.conf)"),
    ("meta", "metadata service (beegfs-meta.conf)"),
    ("client", "client (beegfs-client.conf)"),
    ("striping", "striping (beegfs-ctl --setpattern)"),
    ("os", "operating system (sysctl, block devices)"),
    ("localfs", "local file system (mkfs and mount options)"),
]
SCOPE_NAMES = [name for name, _ in SCOPES]


class TuningValueError(ValueError):
    """A known key got a value of the wrong type."""


@dataclass(frozen=True)
class Key:
    kind: str  # int, bytes, bool, choice, str, list
    help: str = ""
    choices: tuple[str, ...] = ()
    minimum: int | None = None


def parse_bytes(text: str) -> int:
    """BeeGFS-style sizes: "512k", "1m", "4M", "131072k", "8192" -> bytes (binary multiples,
    as the parsers read tool flags: ``runners.parsers.base.parse_size``)."""
    try:
        return parse_size(text)
    except ParseError:
        raise TuningValueError(f"expected a size such as 512k or 1m, got {text!r}") from None


def parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in {"true", "yes", "1", "on", "enabled"}:
        return True
    if value in {"false", "no", "0", "off", "disabled"}:
        return False
    raise TuningValueError(f"expected true or false, got {text!r}")


_CONN = {
    "connInterfacesList": Key("list", "preferred network interfaces"),
    "connMaxInternodeNum": Key("int", "connections to one server", minimum=1),
    "connRDMABufNum": Key("int", "RDMA buffers per connection", minimum=1),
    "connRDMABufSize": Key("bytes", "RDMA buffer size"),
    "connUseRDMA": Key("bool", "use RDMA"),
    "connNetFilterFile": Key("str", "allowed networks file"),
    "connTcpOnlyFilterFile": Key("str"),
    "sysMgmtdHost": Key("str", "management host"),
}

KNOWN_KEYS: dict[str, dict[str, Key]] = {
    "storage": {
        **_CONN,
        "tuneNumWorkers": Key("int", "worker threads", minimum=1),
        "tuneFileReadAheadSize": Key("bytes", "file read-ahead size"),
        "tuneFileReadAheadTriggerSize": Key("bytes", "read-ahead trigger size"),
        "tuneFileReadSize": Key("bytes", "file read size"),
        "tuneFileWriteSize": Key("bytes", "file write size"),
        "tuneFileWriteSyncSize": Key("bytes"),
        "tuneBindToNumaZone": Key("int", "NUMA zone to bind to", minimum=0),
        "tuneWorkerBufSize": Key("bytes"),
        "tuneUsePerTargetWorkers": Key("bool"),
        "tuneUsePerUserMsgQueues": Key("bool"),
        "storeStorageDirectory": Key("list", "target directories"),
        "storeAllowFirstRunInit": Key("bool"),
    },
    "meta": {
        **_CONN,
        "tuneNumWorkers": Key("int", "worker threads", minimum=1),
        "tuneTargetChooser": Key(
            "choice",
            "target chooser",
            ("randomized", "roundrobin", "randomrobin", "randominternode", "randomintranode"),
        ),
        "tuneBindToNumaZone": Key("int", minimum=0),
        "tuneUsePerUserMsgQueues": Key("bool"),
        "storeMetaDirectory": Key("str"),
        "storeUseExtendedAttribs": Key("bool"),
        "storeClientXAttrs": Key("bool"),
        "storeClientACLs": Key("bool"),
    },
    "client": {
        **_CONN,
        "tuneRemoteFSync": Key("bool", "forward fsync to servers"),
        "tunePreferredMetaFile": Key("str", "file with preferred metadata node IDs"),
        "tunePreferredStorageFile": Key("str"),
        "tuneFileCacheType": Key("choice", "client cache", ("buffered", "native", "none")),
        "tuneFileCacheBufSize": Key("bytes"),
        "tuneCoherentBuffers": Key("bool"),
        "tuneUseGlobalFileLocks": Key("bool"),
        "tuneUseGlobalAppendLocks": Key("bool"),
        "sysSessionCheckOnClose": Key("bool"),
    },
    "striping": {
        "chunksize": Key("bytes", "chunk size (beegfs-ctl --chunksize)"),
        "numtargets": Key("int", "storage targets per file (--numtargets)", minimum=1),
        "pattern": Key("choice", "stripe pattern", ("raid0", "buddymirror")),
        "storagepoolid": Key("int", "storage pool", minimum=0),
    },
    "os": {
        "vm.dirty_background_ratio": Key("int", minimum=0),
        "vm.dirty_ratio": Key("int", minimum=0),
        "vm.dirty_background_bytes": Key("bytes"),
        "vm.dirty_bytes": Key("bytes"),
        "vm.vfs_cache_pressure": Key("int", minimum=0),
        "vm.min_free_kbytes": Key("int", minimum=0),
        "vm.zone_reclaim_mode": Key("int", minimum=0),
        "vm.swappiness": Key("int", minimum=0),
        "kernel.numa_balancing": Key("choice", "automatic NUMA balancing", ("0", "1")),
        "net.core.rmem_max": Key("int", minimum=0),
        "net.core.wmem_max": Key("int", minimum=0),
        "net.ipv4.tcp_rmem": Key("str"),
        "net.ipv4.tcp_wmem": Key("str"),
        "scheduler": Key(
            "choice",
            "block IO scheduler",
            ("none", "noop", "deadline", "mq-deadline", "cfq", "bfq", "kyber"),
        ),
        "nr_requests": Key("int", "schedulable requests per device", minimum=1),
        "read_ahead_kb": Key("int", "device read-ahead (KiB)", minimum=0),
        "max_sectors_kb": Key("int", "largest single request (KiB)", minimum=1),
        "transparent_hugepage": Key(
            "choice", "transparent huge pages", ("always", "madvise", "never")
        ),
        "transparent_hugepage_defrag": Key(
            "choice", "THP defrag", ("always", "defer", "defer+madvise", "madvise", "never")
        ),
        "cpu_governor": Key(
            "choice",
            "CPU frequency governor",
            ("performance", "powersave", "ondemand", "schedutil"),
        ),
    },
    "localfs": {
        "filesystem": Key("choice", "local file system", ("xfs", "ext4", "zfs", "btrfs")),
        "mkfs_options": Key("str", "mkfs options"),
        "mount_options": Key("list", "mount options"),
        "raid_stripe_kb": Key("int", "RAID stripe size per disk (KiB)", minimum=1),
        "raid_level": Key("choice", "RAID level", ("0", "1", "5", "6", "10", "none")),
        "disks_per_array": Key("int", minimum=1),
    },
}


def normalise(scope: str, key: str, value: str) -> tuple[object, bool]:
    """(normalised value, known) for one parameter; TuningValueError for a bad value."""
    if scope not in KNOWN_KEYS:
        raise TuningValueError(f"unknown scope {scope!r}")
    spec = KNOWN_KEYS[scope].get(key)
    raw = value.strip()
    if spec is None:
        return raw, False
    if spec.kind == "int":
        try:
            number = int(raw)
        except ValueError:
            raise TuningValueError(f"{key} expects a whole number, got {raw!r}") from None
        if spec.minimum is not None and number < spec.minimum:
            raise TuningValueError(f"{key} must be at least {spec.minimum}, got {number}")
        return number, True
    if spec.kind in ("bytes", "bool"):
        parser = parse_bytes if spec.kind == "bytes" else parse_bool
        try:
            return parser(raw), True
        except TuningValueError as exc:
            raise TuningValueError(f"{key}: {exc}") from None
    if spec.kind == "choice":
        lowered = raw.lower()
        if lowered not in spec.choices:
            raise TuningValueError(f"{key} must be one of {', '.join(spec.choices)}; got {raw!r}")
        return lowered, True
    if spec.kind == "list":
        return [item for item in re.split(r"[,\s]+", raw) if item], True
    return raw, True


def describe(scope: str, key: str) -> Key | None:
    return KNOWN_KEYS.get(scope, {}).get(key)


_CONF_LINE = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*=\s*(.*?)\s*$")


def parse_conf(text: str) -> list[tuple[int, str, str]]:
    """BeeGFS ``key = value`` lines (``#`` comments) -> [(line number, key, value)].

    Raises TuningValueError naming the line for anything that is not a comment or key=value.
    """
    entries: list[tuple[int, str, str]] = []
    for number, line, m in _conf_lines(text):
        if not m:
            raise TuningValueError(f"line {number}: expected 'key = value', got {line.strip()!r}")
        entries.append((number, m.group(1), m.group(2)))
    return entries


def _conf_lines(text: str):
    """(line number, line, its ``key = value`` match or None) of every line that is not
    blank or a comment."""
    for number, line in enumerate(text.replace("\r\n", "\n").split("\n"), start=1):
        stripped = line.split("#", 1)[0].strip() if not line.lstrip().startswith("#") else ""
        if stripped:
            yield number, line, _CONF_LINE.match(stripped)


def check_conf(scope: str, text: str) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """``key = value`` text of one scope checked line by line: (entries, unknown keys,
    errors). Every bad line gets its message ("line 3: vm.dirty_ratio expects a whole
    number, got 'x'"), so a form lists them all at once rather than the first."""
    entries: list[tuple[str, str]] = []
    unknown: list[str] = []
    errors: list[str] = []
    seen: set[str] = set()
    for number, line, m in _conf_lines(text):
        if not m:
            errors.append(f"line {number}: expected 'key = value', got {line.strip()[:80]!r}")
            continue
        key, value = m.group(1), m.group(2)
        if key in seen:
            errors.append(f"line {number}: {key} is given twice")
            continue
        seen.add(key)
        try:
            _, known = normalise(scope, key, value)
        except TuningValueError as exc:
            errors.append(f"line {number}: {exc}")
            continue
        if not known:
            unknown.append(key)
        entries.append((key, value))
    return entries, unknown, errors


def format_conf(items: list[tuple[str, str]]) -> str:
    """Inverse of parse_conf: aligned ``key = value`` lines."""
    width = max((len(key) for key, _ in items), default=0)
    return "".join(f"{key:<{width}} = {value}\n" for key, value in items)
