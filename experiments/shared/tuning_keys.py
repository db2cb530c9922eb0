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


# --- BeeGFS service keys a node's worker may write (issue 26) -------------------------------
#
# A tuning set's ``storage.*`` and ``meta.*`` keys are written into the service's config file
# by the server node's own worker (experiments.execution.beegfs). Only known keys of those two
# scopes are written, and not all of them: a key that would move the service's data or change
# its identity or its place on the network is refused, whatever the node's policy says, so a
# tuning set can change how a server performs, never what it serves or where.

SERVICE_SCOPES = ("storage", "meta")

DENIED: dict[str, str] = {
    "storeStorageDirectory": "names the target directories: changing it moves the data",
    "storeMetaDirectory": "names the metadata directory: changing it moves the metadata",
    "storeAllowFirstRunInit": "lets a daemon initialise an empty directory as a new target",
    "storeFsUUID": "binds the daemon to one file system",
    "storeUseExtendedAttribs": "changes how metadata is laid out on disk",
    "storeClientXAttrs": "changes what clients may store, not how fast",
    "storeClientACLs": "changes what clients may store, not how fast",
    "sysMgmtdHost": "names the management daemon: the server would join another file system",
    "connInterfacesList": "changes the interfaces the server is reached on",
    "connInterfacesFile": "names a file of interfaces the server is reached on",
    "connNetFilterFile": "names a file of networks the server accepts",
    "connTcpOnlyFilterFile": "names a file of networks the server accepts",
    "connAuthFile": "the shared secret that authenticates the file system's daemons",
    "connDisableAuthentication": "turns authentication between daemons on or off",
    "logStdFile": "a path the daemon writes to",
    "pidFile": "a path the daemon writes to",
    "runDaemonized": "how the daemon runs, which its service manager decides",
}
_PORT_KEY = re.compile(r"^conn\w*Port\w*$")


def service_refusal(scope: str, key: str) -> str | None:
    """Why ``scope.key`` may not be written into a BeeGFS service's config file, or None."""
    if scope not in SERVICE_SCOPES:
        return f"{scope}.{key} is not a BeeGFS server setting"
    if key in DENIED:
        return f"{scope}.{key} is never written by beeweb: it {DENIED[key]}"
    if _PORT_KEY.match(key):
        return f"{scope}.{key} is never written by beeweb: it changes a port the server uses"
    if key not in KNOWN_KEYS[scope]:
        return (
            f"{scope}.{key} is not a known BeeGFS {scope} setting: only known keys are written "
            "(a key the daemon does not know stops it at start)"
        )
    return None


def render(scope: str, key: str, value: object) -> str:
    """A normalised value (``normalise``) in BeeGFS's own syntax: sizes as ``4m``/``512k``
    when they are whole mebi/kibibytes (as BeeGFS's shipped files write them), booleans as
    true/false, lists comma-separated."""
    spec = KNOWN_KEYS[scope][key]
    if spec.kind == "bool":
        return "true" if value else "false"
    if spec.kind == "bytes":
        number = int(value)  # type: ignore[call-overload]
        for suffix, unit in (("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10)):
            if number and number % unit == 0:
                return f"{number // unit}{suffix}"
        return str(number)
    if spec.kind == "list":
        return ",".join(str(item) for item in value)  # type: ignore[attr-defined]
    return str(value)


def service_values(values: dict[str, object]) -> tuple[dict[str, dict[str, str]], list[str]]:
    """A tuning set's ``storage.*`` and ``meta.*`` keys checked and rendered for the config
    files: ({scope: {key: text}}, errors). Other scopes are left out."""
    out: dict[str, dict[str, str]] = {}
    errors: list[str] = []
    for full_key, raw in sorted(values.items()):
        scope, _, key = full_key.partition(".")
        if scope not in SERVICE_SCOPES:
            continue
        refusal = service_refusal(scope, key)
        if refusal:
            errors.append(refusal)
            continue
        try:
            value, _ = normalise(scope, key, str(raw))
        except TuningValueError as exc:
            errors.append(f"{full_key}: {exc}")
            continue
        out.setdefault(scope, {})[key] = render(scope, key, value)
    return out, errors


def same_value(scope: str, key: str, a: str | None, b: str | None) -> bool:
    """Whether two texts of ``scope.key`` mean the same value ("1m" and "1024k" do)."""
    if a is None or b is None:
        return a is b
    try:
        return normalise(scope, key, a)[0] == normalise(scope, key, b)[0]
    except TuningValueError:
        return a.strip() == b.strip()
