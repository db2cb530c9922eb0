"""The database server's clock, as this process reads it without a query per reading: what
every time that another machine compares goes by (heartbeats, node leases, the janitor's
staleness, workers' last-seen times, queue times).

A node's own wall clock can step (an operator's ``date -s``, an NTP step after a long
drift, a VM restored from a snapshot): a node whose clock jumped an hour back wrote
heartbeats an hour old and its runs were reaped while they ran; one that jumped an hour
ahead wrote heartbeats from the future, so its runs outlived a dead worker by an hour and
its holding code took other runs' live leases for stale. ``now()`` is the database's clock
at the last synchronisation plus the time the monotonic clock (which no step moves) has
counted since; it synchronises (one ``SELECT statement_timestamp()``) once per process and
again every SYNC_SECONDS. Where the database is SQLite (one machine), it is this machine's
clock (``django.utils.timezone.now``).
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timedelta

from django.db import DatabaseError, connection
from django.utils import timezone

log = logging.getLogger(__name__)

# Seconds between two synchronisations of a process with the database's clock.
SYNC_SECONDS = 300.0
# A step of this process's wall clock against the database's larger than this is logged.
STEP_LOG_SECONDS = 5.0

_lock = threading.Lock()
_base: tuple[datetime, float] | None = None  # (database time, monotonic time) at a sync
_wall_at_sync: float | None = None  # this process's wall minus monotonic clock then


def now() -> datetime:
    """The database server's current time (aware, UTC)."""
    if connection.vendor != "postgresql":
        return timezone.now()
    base = _base
    tick = time.monotonic()
    # Synchronised again when due, or when this node's wall clock stepped since (which
    # changes nothing here, but is logged with what it did).
    stepped = _wall_at_sync is not None and (
        abs(time.time() - tick - _wall_at_sync) > STEP_LOG_SECONDS
    )
    if base is None or tick - base[1] >= SYNC_SECONDS or stepped:
        base = sync() or base
    if base is None:  # the database unreachable and never read: the best there is
        return timezone.now()
    return base[0] + timedelta(seconds=time.monotonic() - base[1])


def sync() -> tuple[datetime, float] | None:
    """Read the database's clock now (a query on this thread's connection); the new base,
    or None when the database cannot be reached (the old base, if any, stays)."""
    global _base, _wall_at_sync
    try:
        with connection.cursor() as cursor:
            before = time.monotonic()
            cursor.execute("SELECT statement_timestamp()")
            (server,) = cursor.fetchone()
            after = time.monotonic()
    except DatabaseError as exc:
        log.debug("clock: the database's clock could not be read: %s", exc)
        return None
    base = (server, (before + after) / 2)
    offset = (server - timezone.now()).total_seconds()
    if abs(offset) > STEP_LOG_SECONDS:
        log.warning(
            "clock: this node's wall clock is %.1f s %s the database's; beeweb goes by the "
            "database's",
            abs(offset),
            "behind" if offset > 0 else "ahead of",
        )
    with _lock:
        _base = base
        _wall_at_sync = time.time() - time.monotonic()
    return base


def offset_s() -> float:
    """The database's clock minus this process's wall clock, in seconds (0 on SQLite)."""
    if connection.vendor != "postgresql":
        return 0.0
    return (now() - timezone.now()).total_seconds()
