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

from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from experiments.models import Node, NodeLease, Run, TestbedNode
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
    if not run.testbed.independent_storage:
        names.update(
            TestbedNode.objects.filter(testbed_id=run.testbed_id)
            .filter(Q(storage=True) | Q(metadata=True))
            .values_list("node__hostname", flat=True)
        )
    return sorted(n for n in names if n)


def _stale_before():
    return timezone.now() - timedelta(seconds=settings.RUN_STALE_SECONDS)


def _live(run: Run, attempt: int, cutoff) -> bool:
    return (
        run.status == Run.Status.RUNNING
        and run.attempts == attempt
        and run.heartbeat_at is not None
        and run.heartbeat_at >= cutoff
    )


def _earlier(run: Run) -> Q:
    if run.queued_at is None:
        return Q(pk__lt=run.pk)
    return Q(queued_at__lt=run.queued_at) | Q(queued_at=run.queued_at, pk__lt=run.pk)


def try_acquire(run: Run, names: list[str]) -> tuple[bool, str]:
    """Hold all of ``names`` for this attempt of ``run`` or none; (held, why not). A run
    that cannot hold them is marked as waiting (``waiting_for``, ``nodes_held``) in the same
    transaction."""
    if not names:
        return True, ""
    try:
        with transaction.atomic():
            # Lock the nodes in pk order: acquirers of overlapping nodes take turns.
            nodes = dict(
                Node.objects.select_for_update()
                .filter(hostname__in=names)
                .order_by("pk")
                .values_list("hostname", "pk")
            )
            cutoff = _stale_before()
            busy: dict[str, str] = {}
            stale: list[int] = []
            # Only what deciding and saying why needs: a holder's raw output can be megabytes.
            leases = (
                NodeLease.objects.select_related("run", "run__testbed")
                .filter(hostname__in=names)
                .only(
                    "pk",
                    "hostname",
                    "attempt",
                    "run__status",
                    "run__attempts",
                    "run__heartbeat_at",
                    "run__label",
                    "run__tool",
                    "run__testbed__name",
                )
            )
            for lease in leases:
                holder = lease.run
                if holder.pk == run.pk and lease.attempt == run.attempts:
                    continue
                if not _live(holder, lease.attempt, cutoff):
                    stale.append(lease.pk)
                    continue
                busy[lease.hostname] = f"held by run {holder.pk} ({holder})"
            if stale:
                NodeLease.objects.filter(pk__in=stale).delete()
            wanted = set(names)
            earlier = (
                Run.objects.filter(_earlier(run), status=Run.Status.RUNNING)
                .exclude(waiting_for="")
                .exclude(pk=run.pk)
                .filter(heartbeat_at__gte=cutoff)
                .order_by("queued_at", "pk")
                .only("pk", "nodes_held", "label", "tool", "testbed_id")
            )
            for waiter in earlier:
                for name in wanted.intersection(waiter.nodes_held or []):
                    busy.setdefault(name, f"run {waiter.pk}, queued earlier, waits for it")
            if busy:
                why = "waiting for " + "; ".join(
                    f"node {name} ({busy[name]})" for name in sorted(busy)
                )
                if why != run.waiting_for or run.nodes_held != names:
                    # Marked as waiting under the same locks: a later run that locks these
                    # nodes next sees this run waiting for them.
                    Run.objects.filter(pk=run.pk).update(waiting_for=why, nodes_held=names)
                    run.waiting_for, run.nodes_held = why, names
                return False, why
            now = timezone.now()
            NodeLease.objects.bulk_create(
                [
                    NodeLease(
                        hostname=name,
                        node_id=nodes.get(name),
                        run_id=run.pk,
                        attempt=run.attempts,
                        acquired_at=now,
                    )
                    for name in names
                ]
            )
    except IntegrityError:
        # Another run took one of the nodes meanwhile (no row lock on SQLite, or a node
        # without a Node row): nothing was taken.
        return False, "waiting for " + ", ".join(names) + " (taken meanwhile)"
    return True, ""


def release(run: Run) -> int:
    """Free the nodes this attempt of ``run`` holds; how many."""
    count, _ = NodeLease.objects.filter(run_id=run.pk, attempt=run.attempts).delete()
    return count


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
