"""What this node lets beeweb do, read from the worker's own environment and never from the
database: the directories runs may work in and the OS settings a run may change.

The server decides what a run asks for; a node's operator decides what the node grants. A
server that is wrong (or a user who found a way around its checks) cannot make a worker write
outside ``BEEWEB_NODE_DIRS`` or change a setting ``BEEWEB_NODE_TUNING`` does not list: the
executor checks every run against this policy before anything is created or started.

``BEEWEB_NODE_DIRS``
    Colon-separated absolute directories (symlinks resolved) a run's benchmark directory must
    lie in. Unset or empty: beeweb's own data directory (``BEEWEB_DATA_DIR``) only.
``BEEWEB_NODE_TUNING``
    ``false`` (the default: no OS setting or striping is applied), ``true`` (everything in
    ``runners.nodeconfig``'s allowlist) or a comma-separated list of tuning keys, e.g.
    ``os.vm.dirty_ratio,os.read_ahead_kb,striping.chunksize``.
``BEEWEB_NODE_DROP_CACHES``
    ``true`` (the default: a run that holds this node and asks for it gets the node's page
    cache, dentries and inodes dropped, by the executor or by this worker's node agent for a
    run launched elsewhere) or ``false`` (never; such runs record the drop as refused).
``BEEWEB_NODE_TELEMETRY``
    ``true`` (the default: while a run launched elsewhere holds this node and its tool runs,
    this worker's node agent samples the node's counters for it, ``experiments.execution.agent``) or
    ``false`` (never; such runs record the node's telemetry as refused).
``BEEWEB_NODE_BEEGFS``
    ``false`` (the default: this node's BeeGFS services are never touched; a run whose tuning
    set has ``storage.*``/``meta.*`` keys for this server records them as refused and fails
    before its tool starts, since the set cannot be in force) or ``true``: beeweb may rewrite
    the keys of a tuning set in this node's BeeGFS service config files and restart the
    services (``experiments.execution.beegfs``; the original files come back afterwards).
``BEEWEB_NODE_BEEGFS_STORAGE_CONF`` / ``BEEWEB_NODE_BEEGFS_META_CONF``
    The services' config files (absolute; default /etc/beegfs/beegfs-storage.conf and
    /etc/beegfs/beegfs-meta.conf).
``BEEWEB_NODE_BEEGFS_STORAGE_RESTART`` / ``BEEWEB_NODE_BEEGFS_META_RESTART``
    The argv that restarts each service (shlex-split, never a shell; default ``systemctl
    restart beegfs-storage`` / ``beegfs-meta``).
``BEEWEB_BEEGFS_CTL``
    The argv prefix of beegfs-ctl on this node (shlex-split; default ``beegfs-ctl``), e.g.
    ``/opt/beegfs/sbin/beegfs-ctl --cfgFile=/etc/beegfs/lab-client.conf``.
``BEEWEB_NODE_BEEGFS_NODE_NAME``
    This node's name in ``beegfs-ctl --listnodes`` (default: its hostname).
"""

from __future__ import annotations

import functools
import logging
import os
import shlex
import socket
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from runners import nodeconfig

log = logging.getLogger(__name__)

DIRS_VAR = "BEEWEB_NODE_DIRS"
TUNING_VAR = "BEEWEB_NODE_TUNING"
DROP_VAR = "BEEWEB_NODE_DROP_CACHES"
# What a run records for a node whose policy refuses to drop its caches.
DROP_REFUSED = f"refused by the node's policy ({DROP_VAR}=false)"
TELEMETRY_VAR = "BEEWEB_NODE_TELEMETRY"
TELEMETRY_REFUSED = f"refused by the node's policy ({TELEMETRY_VAR}=false)"
BEEGFS_VAR = "BEEWEB_NODE_BEEGFS"
BEEGFS_REFUSED = f"refused by the node's policy ({BEEGFS_VAR}=false)"
# Each run works in a directory of its own, created inside the benchmark directory.
RUN_DIR_PREFIX = "beeweb-run-"


def tuning_keys() -> tuple[str, ...]:
    """Every key ``nodeconfig.apply_tuning`` knows how to apply (``scope.key``)."""
    keys = [f"os.{k}" for k in (*nodeconfig.SYSCTLS, *nodeconfig.QUEUE_KEYS, *nodeconfig.THP)]
    keys += [f"striping.{k}" for k in nodeconfig.STRIPING_FLAGS]
    return tuple(keys)


@dataclass(frozen=True)
class NodePolicy:
    """Allowed directories (resolved, absolute), allowed tuning keys of this node, whether
    runs may drop its caches and whether its agent samples it for runs launched elsewhere."""

    dirs: tuple[str, ...]
    tuning: frozenset[str]
    drop_caches: bool = True
    telemetry: bool = True
    beegfs: bool = False
    beegfs_conf: tuple[tuple[str, str], ...] = (
        ("storage", "/etc/beegfs/beegfs-storage.conf"),
        ("meta", "/etc/beegfs/beegfs-meta.conf"),
    )
    beegfs_restart: tuple[tuple[str, tuple[str, ...]], ...] = (
        ("storage", ("systemctl", "restart", "beegfs-storage")),
        ("meta", ("systemctl", "restart", "beegfs-meta")),
    )
    beegfs_ctl: tuple[str, ...] = ("beegfs-ctl",)
    beegfs_node_name: str = ""

    def beegfs_service(self, scope: str) -> tuple[str, tuple[str, ...], str]:
        """(config file, restart argv, BeeGFS node name) of this node's ``scope`` service."""
        return (
            dict(self.beegfs_conf)[scope],
            dict(self.beegfs_restart)[scope],
            self.beegfs_node_name or socket.gethostname(),
        )

    def allows_dir(self, path: str | Path) -> bool:
        """Whether ``path``, symlinks resolved, lies in (or is) an allowed directory."""
        real = os.path.realpath(path)
        return any(os.path.commonpath([real, root]) == root for root in self.dirs)

    def allows_key(self, key: str) -> bool:
        return key in self.tuning

    def describe_dirs(self) -> str:
        return ", ".join(self.dirs)


def parse(
    dirs_text: str,
    tuning_text: str,
    default_dir: str | Path,
    drop_text: str = "true",
    telemetry_text: str = "true",
    beegfs: dict[str, str] | None = None,
) -> NodePolicy:
    """The policy from the variables' text; ImproperlyConfigured for malformed values."""
    entries = [d.strip() for d in (dirs_text or "").split(":") if d.strip()]
    if not entries:
        entries = [str(default_dir)]
    dirs: list[str] = []
    for entry in entries:
        if not os.path.isabs(entry):
            raise ImproperlyConfigured(
                f"{DIRS_VAR}: {entry!r} is not an absolute path (colon-separated absolute "
                "directories where beeweb may benchmark on this node)"
            )
        real = os.path.realpath(entry)
        if real not in dirs:
            dirs.append(real)
    return NodePolicy(
        dirs=tuple(dirs),
        tuning=_parse_tuning(tuning_text),
        drop_caches=_parse_flag(drop_text, DROP_VAR),
        telemetry=_parse_flag(telemetry_text, TELEMETRY_VAR),
        **_parse_beegfs(beegfs or {}),
    )


def _parse_beegfs(texts: dict[str, str]) -> dict:
    """The BeeGFS service settings (``texts`` by variable name; absent: the defaults)."""
    return dict(_beegfs_settings(tuple(sorted(texts.items()))))


@functools.lru_cache(maxsize=16)
def _beegfs_settings(items: tuple[tuple[str, str], ...]) -> dict:
    """``_parse_beegfs`` of ``items``: text alone decides it (no file is read), so a worker,
    which works out its policy for every run, splits the same commands once."""
    texts = dict(items)
    out: dict = {"beegfs": _parse_flag(texts.get(BEEGFS_VAR, "false") or "false", BEEGFS_VAR)}
    confs, restarts = [], []
    for scope, conf_default, unit in (
        ("storage", "/etc/beegfs/beegfs-storage.conf", "beegfs-storage"),
        ("meta", "/etc/beegfs/beegfs-meta.conf", "beegfs-meta"),
    ):
        var = f"{BEEGFS_VAR}_{scope.upper()}_CONF"
        conf = (texts.get(var) or conf_default).strip()
        if not os.path.isabs(conf):
            raise ImproperlyConfigured(f"{var}: {conf!r} is not an absolute path")
        confs.append((scope, conf))
        var = f"{BEEGFS_VAR}_{scope.upper()}_RESTART"
        restarts.append(
            (scope, _argv((texts.get(var) or "").strip() or f"systemctl restart {unit}", var))
        )
    out["beegfs_conf"] = tuple(confs)
    out["beegfs_restart"] = tuple(restarts)
    out["beegfs_ctl"] = _argv(
        (texts.get("BEEWEB_BEEGFS_CTL") or "").strip() or "beegfs-ctl", "BEEWEB_BEEGFS_CTL"
    )
    name = (texts.get(f"{BEEGFS_VAR}_NODE_NAME") or "").strip()
    if name and not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise ImproperlyConfigured(f"{BEEGFS_VAR}_NODE_NAME: {name!r} is not a BeeGFS node name")
    out["beegfs_node_name"] = name
    return out


def _argv(text: str, var: str) -> tuple[str, ...]:
    """An argv from the variable's text (shlex-split, as a shell would split it, but never
    given to a shell)."""
    try:
        argv = tuple(shlex.split(text))
    except ValueError as exc:
        raise ImproperlyConfigured(
            f"{var}: {text!r} cannot be split into arguments: {exc}"
        ) from None
    if not argv:
        raise ImproperlyConfigured(f"{var} is empty: give the command as arguments")
    return argv


def _parse_flag(text: str, var: str) -> bool:
    value = (text or "").strip().lower()
    if value in ("", "true", "yes", "1", "on"):
        return True
    if value in ("false", "no", "0", "off"):
        return False
    raise ImproperlyConfigured(f"{var}: {text!r} is neither true nor false")


@functools.lru_cache(maxsize=16)
def _parse_tuning(text: str) -> frozenset[str]:
    value = (text or "").strip()
    if value.lower() in ("", "false", "no", "0", "off"):
        return frozenset()
    known = tuning_keys()
    if value.lower() in ("true", "yes", "1", "on"):
        return frozenset(known)
    keys = [k.strip() for k in value.split(",") if k.strip()]
    unknown = [k for k in keys if k not in known]
    if unknown:
        raise ImproperlyConfigured(
            f"{TUNING_VAR}: {', '.join(unknown)} cannot be applied by beeweb; give false, true "
            f"or a comma-separated list of: {', '.join(known)}"
        )
    return frozenset(keys)


def current() -> NodePolicy:
    """This worker's policy (settings.NODE_DIRS / NODE_TUNING come from its environment)."""
    return parse(
        settings.NODE_DIRS,
        settings.NODE_TUNING,
        settings.DATA_DIR,
        settings.NODE_DROP_CACHES,
        settings.NODE_TELEMETRY,
        {
            BEEGFS_VAR: settings.NODE_BEEGFS,
            f"{BEEGFS_VAR}_STORAGE_CONF": settings.NODE_BEEGFS_STORAGE_CONF,
            f"{BEEGFS_VAR}_STORAGE_RESTART": settings.NODE_BEEGFS_STORAGE_RESTART,
            f"{BEEGFS_VAR}_META_CONF": settings.NODE_BEEGFS_META_CONF,
            f"{BEEGFS_VAR}_META_RESTART": settings.NODE_BEEGFS_META_RESTART,
            f"{BEEGFS_VAR}_NODE_NAME": settings.NODE_BEEGFS_NODE_NAME,
            "BEEWEB_BEEGFS_CTL": settings.BEEGFS_CTL,
        },
    )


def check() -> NodePolicy:
    """The policy, checked when a worker starts: ImproperlyConfigured stops a worker with a
    malformed value; a directory that does not exist (yet) is only worth a warning."""
    policy = current()
    for directory in policy.dirs:
        if not os.path.isdir(directory):
            log.warning("%s: %s does not exist (yet); runs there will fail", DIRS_VAR, directory)
    tuning = ", ".join(sorted(policy.tuning)) or "none"
    log.info(
        "node policy: runs may work in %s; OS tuning allowed: %s; cache drops %s; "
        "telemetry for runs launched elsewhere %s; BeeGFS service configs %s",
        policy.describe_dirs(),
        tuning,
        "allowed" if policy.drop_caches else "refused",
        "sampled" if policy.telemetry else "refused",
        "may be changed and restarted" if policy.beegfs else "never touched",
    )
    return policy


def run_dir_name(run_uuid: object, attempt: int) -> str:
    """Name of the fresh directory one attempt of a run works in."""
    return f"{RUN_DIR_PREFIX}{run_uuid}-{attempt}"
