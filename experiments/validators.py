"""Checks shared by the models, the forms, the API and the matrix expansion.

Where benchmarks may work on a node: a testbed's benchmark directory and a target's mount point
are checked on the server (:func:`work_path_problem`), whatever the node's own confinement
(``BEEWEB_NODE_DIRS``) says afterwards.
"""

from __future__ import annotations

import posixpath
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
