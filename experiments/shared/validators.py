"""Checks shared by the models, the forms, the API and the matrix expansion.

They are model field validators, so the web forms (ModelForm runs them) and the API
(ModelSerializer copies them onto its fields) give the same verdict with the same message.

Where benchmarks may work on a node: a testbed's benchmark directory and a target's mount point
are checked on the server (:func:`work_path_problem`), whatever the node's own confinement
(``BEEWEB_NODE_DIRS``) says afterwards.
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
import unicodedata

from django.core.exceptions import ValidationError

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
