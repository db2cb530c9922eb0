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
"""

from __future__ import annotations

import logging
import os
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
    )


def _parse_flag(text: str, var: str) -> bool:
    value = (text or "").strip().lower()
    if value in ("", "true", "yes", "1", "on"):
        return True
    if value in ("false", "no", "0", "off"):
        return False
    raise ImproperlyConfigured(f"{var}: {text!r} is neither true nor false")


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
        "telemetry for runs launched elsewhere %s",
        policy.describe_dirs(),
        tuning,
        "allowed" if policy.drop_caches else "refused",
        "sampled" if policy.telemetry else "refused",
    )
    return policy


def run_dir_name(run_uuid: object, attempt: int) -> str:
    """Name of the fresh directory one attempt of a run works in."""
    return f"{RUN_DIR_PREFIX}{run_uuid}-{attempt}"
