"""beegfs-ctl as this node runs it: the argv prefix its operator configures.

``BEEWEB_BEEGFS_CTL`` (the worker's environment, never the database) is split as a shell would
split it, and never run by one; unset or blank, it is ``beegfs-ctl`` on PATH. A site with
several BeeGFS instances, or a client config elsewhere than /etc/beegfs, says e.g.
``/opt/beegfs/sbin/beegfs-ctl --cfgFile=/etc/beegfs/lab-client.conf``. Every beegfs-ctl a
worker starts (StorageBench, the live topology, server statistics, a service's read-back)
begins with this prefix. Standard library only: the StorageBench driver runs it outside Django.
"""

from __future__ import annotations

import os
import shlex

CTL_VAR = "BEEWEB_BEEGFS_CTL"
DEFAULT_CTL = "beegfs-ctl"


class CtlConfigError(ValueError):
    """BEEWEB_BEEGFS_CTL cannot be split into an argv."""


def ctl_prefix(environ: dict[str, str] | None = None) -> list[str]:
    """The node's beegfs-ctl argv prefix, from ``environ`` (default: this process's)."""
    text = (environ if environ is not None else os.environ).get(CTL_VAR, "").strip()
    try:
        argv = shlex.split(text or DEFAULT_CTL)
    except ValueError as exc:
        raise CtlConfigError(f"{CTL_VAR} is not a command line: {exc}") from None
    return argv or [DEFAULT_CTL]
