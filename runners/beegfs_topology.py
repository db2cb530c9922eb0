"""Read a running BeeGFS's topology with beegfs-ctl: a fixed set of read-only listings.

A node's worker runs these when the server asks it for its cluster's live topology
(``experiments.execution.noderequests``). The commands are fixed here, on the node's side:
nothing of the request goes into an argv, only the beegfs-ctl prefix the node itself
configures (``BEEWEB_BEEGFS_CTL``). Each listing is what the topology import reads from a paste
(``experiments.inventory.topology``): node lists with their interfaces, target lists with
their states and capacities, storage pools and buddy mirror groups.

Every output comes back as printed (stdout, stderr and the exit status), so the server parses
the same text a user would paste, and shows BeeGFS's own words when a command fails.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass

# One listing of a management daemon that answers takes well under a second; one that does
# not answers after beegfs-ctl's own connection timeouts (~30 s): bounded here below that.
COMMAND_TIMEOUT = 20.0
MAX_OUTPUT = 1024 * 1024  # per command; a listing of thousands of targets stays far below


@dataclass(frozen=True)
class Listing:
    """One read-only beegfs-ctl listing: its arguments and the node type of its rows."""

    name: str
    args: tuple[str, ...]
    node_type: str | None  # as the topology import names it ("meta", "storage", "management")
    optional: bool = False  # an Enterprise Feature listing: its failure is no error

    @property
    def command(self) -> str:
        """The command line the import keeps in front of the output (shown in the preview)."""
        return " ".join(("beegfs-ctl", *self.args))


LISTINGS: tuple[Listing, ...] = (
    Listing("mgmt nodes", ("--listnodes", "--nodetype=mgmt", "--nicdetails"), "management"),
    Listing("meta nodes", ("--listnodes", "--nodetype=meta", "--nicdetails"), "meta"),
    Listing("storage nodes", ("--listnodes", "--nodetype=storage", "--nicdetails"), "storage"),
    Listing(
        "meta targets",
        ("--listtargets", "--nodetype=meta", "--longnodes", "--state", "--spaceinfo"),
        "meta",
    ),
    Listing(
        "storage targets",
        ("--listtargets", "--nodetype=storage", "--longnodes", "--state", "--spaceinfo"),
        "storage",
    ),
    Listing("storage pools", ("--liststoragepools",), None, optional=True),
    Listing("storage buddy groups", ("--listmirrorgroups", "--nodetype=storage"), "storage", True),
    Listing("meta buddy groups", ("--listmirrorgroups", "--nodetype=meta"), "meta", True),
)
BY_NAME = {listing.name: listing for listing in LISTINGS}


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    if isinstance(data, bytes):
        data = data[:MAX_OUTPUT].decode("utf-8", "replace")
    return data[:MAX_OUTPUT]


def run_listing(prefix: list[str], listing: Listing, timeout: float = COMMAND_TIMEOUT) -> dict:
    """Run one listing; its outputs, exit status and duration, whatever happened."""
    argv = [*prefix, *listing.args]
    began = time.monotonic()
    row = {"name": listing.name, "command": listing.command, "node_type": listing.node_type}
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        row.update(rc=None, stdout="", stderr=f"{prefix[0]}: not found on this node")
    except PermissionError as exc:
        row.update(rc=None, stdout="", stderr=f"{prefix[0]}: {exc.strerror}")
    except subprocess.TimeoutExpired as exc:
        row.update(
            rc=None,
            stdout=_text(exc.stdout),
            stderr=f"no answer within {timeout:g} s (is the management daemon reachable?)",
        )
    else:
        row.update(rc=proc.returncode, stdout=_text(proc.stdout), stderr=_text(proc.stderr))
    row["seconds"] = round(time.monotonic() - began, 3)
    return row


def collect(prefix: list[str], timeout: float = COMMAND_TIMEOUT) -> dict:
    """Every listing of LISTINGS, in order. A first listing that cannot reach the management
    daemon ends the collection (the others would wait as long for the same silence)."""
    began = time.monotonic()
    rows = []
    for listing in LISTINGS:
        row = run_listing(prefix, listing, timeout)
        rows.append(row)
        if len(rows) == 1 and row["rc"] is None:
            break
    return {
        "ctl": prefix,
        "listings": rows,
        "seconds": round(time.monotonic() - began, 3),
    }
