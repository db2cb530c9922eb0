"""Exclusive use of every node a run touches (issue 14, item 1).

Before its tool starts, a run holds its nodes (``nodes_for``): the launcher, the clients of an
MPI or multi-host run (not of a Slurm-mode run: Slurm gives its job the clients exclusively),
its target's node and, unless its testbed says its storage is independent, the testbed's
storage and metadata servers. The holding lives in the database,
one ``NodeLease`` row per held node (unique on the hostname), taken in one transaction:

- all or nothing: the Node rows are locked (select_for_update, pk order, so two acquirers of
  overlapping nodes take turns and never deadlock), then every lease is inserted or none;
- first launched, first served: a run does not take a node that an earlier-queued run
  (``queued_at``, then pk) is waiting for, whatever its matrix or user;
- a lease whose run is no longer running, is in another attempt or stopped sending
  heartbeats (RUN_STALE_SECONDS) counts as free, so a worker's death frees its nodes;
- visible: a waiting run stores which nodes it waits for and which run holds them
  (``Run.waiting_for``).

SQLite (the embedded default) has no row locks; its writes are serialised and the unique
constraint still keeps a node to one run.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.db.models.signals import post_delete, post_save

from experiments.models import (
    BeegfsConfigChange,
    Node,
    NodeLease,
    Run,
    Target,
    Testbed,
    TestbedNode,
)
from experiments.shared import clock, prepared
from runners import registry
from runners.launch import LaunchError, LaunchSpec

POLL_SECONDS = 0.5


def nodes_for(run: Run) -> list[str]:
    """Hostnames of the nodes ``run`` uses, sorted."""
    names: set[str] = set()
    try:
        spec = LaunchSpec.read(run.launch)
    except LaunchError:
        spec = None
    if spec is not None and spec.launcher:
        names.add(spec.launcher)
    elif run.node_id:
        names.add(run.node.hostname)
    # Slurm owns the clients of a Slurm-mode run (its job is --exclusive): not held here.
    if spec is not None and spec.mode not in ("single", "slurm"):
        names.update(host.name for host in spec.hosts)
    if run.target_id and run.target.node_id:
        names.add(run.target.node.hostname)
    names.update(servers_of(run.testbed_id))
    if run.tool in ON_SERVERS and not run.target_id:
        names.update(benchmarked_servers(run))
    return sorted(n for n in names if n)


# Tools whose benchmark runs inside the storage servers (StorageBench): a run holds the servers
# it benchmarks even where the testbed's storage is independent (the servers_of rule).
ON_SERVERS = registry.on_servers()


def benchmarked_servers(run: Run) -> set[str]:
    """Hostnames of the storage servers a StorageBench-like run benchmarks: those of the
    targets its ``targetids`` name (inventory ``Target.target_id``), else every storage
    server of its testbed (``--alltargets``). A run on a target holds that target's node."""
    ids = run.params.get("targetids") if isinstance(run.params, dict) else None
    targets = Target.objects.filter(testbed_id=run.testbed_id, kind="storage")
    if isinstance(ids, list) and ids:
        targets = targets.filter(target_id__in=[i for i in ids if isinstance(i, int)])
        return set(targets.exclude(node=None).values_list("node__hostname", flat=True))
    members = TestbedNode.objects.filter(testbed_id=run.testbed_id, storage=True)
    return set(members.values_list("node__hostname", flat=True)) | set(
        targets.exclude(node=None).values_list("node__hostname", flat=True)
    )


# A testbed's storage and metadata servers (inventory, not the run's) are reused by this
# process for at most this long (seconds); a change to the testbed's nodes made in this
# process is seen at once (``forget_servers``, connected to TestbedNode's save and delete).
SERVERS_MAX_AGE_S = 30.0
_servers: dict[int, tuple[float, tuple[str, ...]]] = {}


def servers_of(testbed_id: int, max_age_s: float | None = None) -> tuple[str, ...]:
    """Hostnames of the storage and metadata servers a run on the testbed holds (none when
    the testbed says its storage is independent), read again when this process's last
    reading is older than ``max_age_s`` (default SERVERS_MAX_AGE_S)."""
    max_age = SERVERS_MAX_AGE_S if max_age_s is None else max_age_s
    cached = _servers.get(testbed_id)
    now = time.monotonic()
    if cached is not None and now - cached[0] <= max_age:
        return cached[1]
    names: tuple[str, ...] = ()
    if not Testbed.objects.filter(pk=testbed_id, independent_storage=True).exists():
        names = tuple(
            TestbedNode.objects.filter(testbed_id=testbed_id)
            .filter(Q(storage=True) | Q(metadata=True))
            .values_list("node__hostname", flat=True)
        )
    _servers[testbed_id] = (now, names)
    return names


def forget_servers(sender=None, **kwargs) -> None:
    """Drop what ``servers_of`` kept (a testbed's nodes or a node's name changed here)."""
    _servers.clear()


for _model in (TestbedNode, Node, Testbed):
    post_save.connect(forget_servers, sender=_model, dispatch_uid=f"holding-{_model.__name__}")
    post_delete.connect(forget_servers, sender=_model, dispatch_uid=f"holding-{_model.__name__}")


def _stale_before():
    return clock.now() - timedelta(seconds=settings.RUN_STALE_SECONDS)


def _live(run: Run, attempt: int, cutoff) -> bool:
    return (
        run.status == Run.Status.RUNNING
        and run.attempts == attempt
        and run.heartbeat_at is not None
        and run.heartbeat_at >= cutoff
    )


def _in(values: list) -> str:
    return ", ".join(["%s"] * len(values))


def _json_list(value) -> list:
    """A JSON column as a raw cursor returns it: decoded (psycopg's jsonb) or text."""
    if isinstance(value, str):
        return json.loads(value)
    return value or []


def try_acquire(run: Run, names: list[str]) -> tuple[bool, str]:
    """Hold all of ``names`` for this attempt of ``run`` or none; (held, why not). A run
    that cannot hold them is marked as waiting (``waiting_for``, ``nodes_held``) in the same
    transaction.

    Plain SQL statements (the ORM's compilation of these costs more CPU than the database
    spends on them, on every run): the node locks; the leases with whether their holder is
    live and the earlier runs waiting, in one; the insert."""
    if not names:
        return True, ""
    ops = connection.ops
    lease_table = ops.quote_name(NodeLease._meta.db_table)
    run_table = ops.quote_name(Run._meta.db_table)
    node_table = ops.quote_name(Node._meta.db_table)
    # No savepoint inside the claim's transaction: a node taken meanwhile (no row lock on
    # SQLite, or a node without a Node row) shows as a conflict the insert skips, not as an
    # error to roll back.
    with transaction.atomic(savepoint=False), prepared.cursor() as cursor:
        # Lock the nodes in pk order: acquirers of overlapping nodes take turns. The same
        # statement reads the BeeGFS roles of those that are servers of the run's testbed
        # (``server_roles``: what experiments.execution.beegfs.roles reads before the tool
        # starts, then one statement of its own).
        member_table = ops.quote_name(TestbedNode._meta.db_table)
        change_table = ops.quote_name(BeegfsConfigChange._meta.db_table)
        lock = " FOR UPDATE OF n" if connection.features.has_select_for_update else ""
        cursor.execute(
            f"SELECT n.hostname, n.id, m.storage, m.metadata, EXISTS(SELECT 1 FROM "
            f"{change_table} c WHERE c.hostname = n.hostname AND c.restored_at IS NULL) "
            f"FROM {node_table} n LEFT JOIN {member_table} m ON m.node_id = n.id AND "
            f"m.testbed_id = %s WHERE n.hostname IN ({_in(names)}) ORDER BY n.id{lock}",
            [run.testbed_id, *names],
        )
        locked = cursor.fetchall()
        nodes = {hostname: pk for hostname, pk, *_ in locked}
        roles = {
            hostname: (
                (["storage"] if storage else []) + (["meta"] if metadata else []),
                bool(changed),
            )
            for hostname, _, storage, metadata, changed in locked
            if storage or metadata
        }
        cutoff = ops.adapt_datetimefield_value(_stale_before())
        if run.queued_at is None:
            earlier, params = "r.id < %s", [run.pk]
        else:
            queued = ops.adapt_datetimefield_value(run.queued_at)
            earlier = "(r.queued_at < %s OR (r.queued_at = %s AND r.id < %s))"
            params = [queued, queued, run.pk]
        # One statement, two answers (kind 0, then 1): the nodes' leases with whether each
        # holder still holds it (``_live``, decided in the query: a holder's raw output can
        # be megabytes, and only its liveness matters here), and the runs queued earlier
        # that wait, earliest first.
        cursor.execute(
            f"SELECT 0, l.id, l.hostname, l.attempt, l.run_id, CASE WHEN r.status = %s AND "
            f"r.attempts = l.attempt AND r.heartbeat_at IS NOT NULL AND r.heartbeat_at "
            f">= %s THEN 1 ELSE 0 END, NULL, NULL FROM {lease_table} l INNER JOIN "
            f"{run_table} r ON r.id = l.run_id WHERE l.hostname IN ({_in(names)}) "
            f"UNION ALL SELECT 1, r.id, NULL, NULL, NULL, NULL, r.nodes_held, r.queued_at "
            f"FROM {run_table} r WHERE {earlier} AND r.status = %s AND r.waiting_for <> '' "
            f"AND r.id <> %s AND r.heartbeat_at >= %s ORDER BY 1, 8, 2",
            [Run.Status.RUNNING, cutoff, *names, *params, Run.Status.RUNNING, run.pk, cutoff],
        )
        found = cursor.fetchall()
        holders: dict[str, int] = {}
        stale: list[int] = []
        for kind, pk, hostname, attempt, run_id, live, _, _ in found:
            if kind or (run_id == run.pk and attempt == run.attempts):
                continue
            if not live:
                stale.append(pk)
                continue
            holders[hostname] = run_id
        if stale:
            cursor.execute(f"DELETE FROM {lease_table} WHERE id IN ({_in(stale)})", stale)
        waiters = [(row[1], row[6]) for row in found if row[0]]
        busy = _busy(holders, waiters, set(names))
        if busy:
            why = "waiting for " + "; ".join(f"node {name} ({busy[name]})" for name in sorted(busy))
            if why != run.waiting_for or run.nodes_held != names:
                # Marked as waiting under the same locks: a later run that locks these
                # nodes next sees this run waiting for them.
                Run.objects.filter(pk=run.pk).update(waiting_for=why, nodes_held=names)
                run.waiting_for, run.nodes_held = why, names
            return False, why
        now = ops.adapt_datetimefield_value(clock.now())
        rows = [(name, nodes.get(name), run.pk, run.attempts, now, "") for name in names]
        cursor.execute(
            f"INSERT INTO {lease_table} (hostname, node_id, run_id, attempt, acquired_at, "
            "drop_result) VALUES "
            + ", ".join(["(%s, %s, %s, %s, %s, %s)"] * len(rows))
            + " ON CONFLICT (hostname) DO NOTHING RETURNING hostname",
            [value for row in rows for value in row],
        )
        if len(cursor.fetchall()) < len(rows):
            # Another run took one of the nodes meanwhile: nothing is taken (the leases
            # just inserted go again).
            cursor.execute(
                f"DELETE FROM {lease_table} WHERE run_id = %s AND attempt = %s AND "
                f"acquired_at = %s AND hostname IN ({_in(names)})",
                [run.pk, run.attempts, now, *names],
            )
            return False, "waiting for " + ", ".join(names) + " (taken meanwhile)"
    _ROLES[(run.pk, run.attempts)] = (list(names), roles)
    while len(_ROLES) > ROLES_MAX:
        _ROLES.pop(next(iter(_ROLES)), None)
    return True, ""


# The BeeGFS roles of the nodes a run's attempt just took (``try_acquire``), read under their
# locks: {(run, attempt): (the nodes, {hostname: (services, changed)})}, taken once by
# ``server_roles``. While the attempt holds them no other run changes a server's
# configuration (a change needs the server held), so they stay true until its tool starts.
_ROLES: dict[tuple[int, int], tuple[list[str], dict[str, tuple[list[str], bool]]]] = {}
ROLES_MAX = 100


def server_roles(run: Run, held: list[str]) -> dict[str, tuple[list[str], bool]] | None:
    """What ``try_acquire`` read of the nodes ``held`` as this attempt of ``run`` took them:
    {hostname: (its services, whether beeweb changed a config of it that is not restored
    yet)} for the testbed's servers among them; None when it did not take exactly those
    (the caller reads them itself). Taken once."""
    kept = _ROLES.pop((run.pk, run.attempts), None)
    if kept is None or kept[0] != list(held):
        return None
    return kept[1]


def _busy(holders: dict[str, int], waiters: list, wanted: set[str]) -> dict[str, str]:
    """Why each busy node of ``wanted`` is busy: held by a live run (``holders``), or wanted
    by a run queued earlier that waits for it (``waiters``, earliest first)."""
    busy: dict[str, str] = {}
    if holders:
        runs = (
            Run.objects.select_related("testbed")
            .only("pk", "label", "tool", "testbed__name")
            .in_bulk(set(holders.values()))
        )
        for hostname, run_id in holders.items():
            holder = runs.get(run_id)
            busy[hostname] = f"held by run {run_id} ({holder if holder else 'deleted'})"
    for pk, held in waiters:
        for name in wanted.intersection(_json_list(held)):
            busy.setdefault(name, f"run {pk}, queued earlier, waits for it")
    return busy


def release(run: Run) -> int:
    """Free the nodes this attempt of ``run`` holds; how many. (One DELETE: nothing refers
    to a lease, so the ORM's delete would add only its collector's work.)"""
    with prepared.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {connection.ops.quote_name(NodeLease._meta.db_table)} "
            "WHERE run_id = %s AND attempt = %s",
            [run.pk, run.attempts],
        )
        return cursor.rowcount


def sweep() -> int:
    """Delete leases whose run no longer holds them (ended, in another attempt, or without a
    heartbeat for RUN_STALE_SECONDS); how many. The acquire does the same for its nodes."""
    cutoff = _stale_before()
    stale = [
        lease.pk
        for lease in NodeLease.objects.select_related("run").only(
            "pk", "attempt", "run__status", "run__attempts", "run__heartbeat_at"
        )
        if not _live(lease.run, lease.attempt, cutoff)
    ]
    if stale:
        NodeLease.objects.filter(pk__in=stale).delete()
    return len(stale)
