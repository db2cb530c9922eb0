"""The node agent: work a run asks of the nodes it holds, done by each node's own worker.

A run touches several nodes (``runners.holding``) but executes on one: its launcher's worker.
What must happen *on* another held node (dropping its caches today; sampling its telemetry
later) cannot go through that node's Celery queue: the node's solo worker may be busy, e.g.
in another run's wait for the very lease this run holds, and a task queued behind it would
never run. So every node worker process runs a small thread beside its consumer, the agent,
which polls the database for work addressed to its own node and does it itself, as root and
under its own node's policy (``runners.nodepolicy``), never the requester's.

The protocol lives on the lease (``NodeLease``), so work exists only while a run holds the
node and goes with the lease when the run ends:

- the run sets ``drop_requested_at`` on its other leases and drops its own node's caches
  directly (``drop_caches``);
- each node's agent sees the request at its next poll (POLL_SECONDS while its node is held),
  drops, or refuses when its node's BEEWEB_NODE_DROP_CACHES is false, and writes
  ``drop_result``;
- the run waits (heartbeats, cancel) until every node answered or ANSWER_SECONDS passed, and
  records one outcome per node in ``effective_config["drop_caches"]``. A node whose worker has
  no live agent (``Worker.agent_seen`` older than ALIVE_SECONDS: no worker, an older worker,
  or a dead one) is not waited for.

A job is an object with ``tick(leases)``, called at every poll with the leases on this node
(none while it is free). A per-node telemetry sampler fits the same shape: start sampling when
a lease appears, stop and store when it goes.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from experiments.models import NodeLease, Run, Worker
from runners import nodeconfig, nodepolicy
from runners.launch import queue_for

log = logging.getLogger(__name__)

POLL_SECONDS = 0.25  # while this node is held
IDLE_POLL_SECONDS = 0.5  # while it is not
SEEN_SECONDS = 5.0  # how often the agent refreshes Worker.agent_seen
ALIVE_SECONDS = 15.0  # an agent not seen for this long is taken for gone
ANSWER_SECONDS = 30.0  # how long a run waits for a node's answer
ERROR_PAUSE_SECONDS = 2.0  # after a database error (the server restarting, say)
QUEUE_PREFIX = queue_for("")


def node_names(queues: Iterable[str]) -> list[str]:
    """The nodes a worker serves: the hostnames of its ``node.<hostname>`` queues."""
    names = {q[len(QUEUE_PREFIX) :] for q in queues if q.startswith(QUEUE_PREFIX)}
    return sorted(name for name in names if name)


def drop_here() -> str:
    """Drop this node's caches if its policy allows; the outcome a run records."""
    if not nodepolicy.current().drop_caches:
        return nodepolicy.DROP_REFUSED
    return nodeconfig.drop_caches()


# --- The node's side ----------------------------------------------------------------------


class CacheDrop:
    """Answer every pending drop request on this node's leases."""

    def tick(self, leases: list[NodeLease]) -> None:
        for lease in leases:
            if lease.drop_requested_at is None or lease.drop_result:
                continue
            try:
                result = drop_here()
            except Exception as exc:  # an answer, whatever happened: the run waits for one
                log.exception("cache drop on %s failed", lease.hostname)
                result = f"failed: {exc}"
            # Only the request seen: a lease taken over meanwhile is another run's.
            NodeLease.objects.filter(
                pk=lease.pk, drop_requested_at=lease.drop_requested_at, drop_result=""
            ).update(drop_result=result)
            log.info("node agent: caches of %s: %s (run %s)", lease.hostname, result, lease.run_id)


class Agent:
    """The polling loop for ``names`` (this worker's nodes) on behalf of worker ``worker``."""

    def __init__(self, worker: str, names: list[str], jobs: list[Any] | None = None):
        self.worker = worker
        self.names = names
        self.jobs = jobs if jobs is not None else [CacheDrop()]
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> Agent:
        self.thread = threading.Thread(target=self.run, name="beeweb-node-agent", daemon=True)
        self.thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(timeout)

    def run(self) -> None:
        """Poll until stopped; one query per poll (the unique hostname index), plus an update
        of agent_seen every SEEN_SECONDS. Database errors pause the loop, never end it."""
        log.info("node agent of %s serves %s", self.worker, ", ".join(self.names))
        seen = 0.0
        try:
            while not self.stopping.is_set():
                try:
                    if time.monotonic() - seen >= SEEN_SECONDS:
                        Worker.objects.filter(name=self.worker).update(agent_seen=timezone.now())
                        seen = time.monotonic()
                    leases = list(NodeLease.objects.filter(hostname__in=self.names))
                    for job in self.jobs:
                        job.tick(leases)
                except Exception:
                    log.exception("node agent of %s: poll failed", self.worker)
                    connection.close()
                    seen = 0.0
                    self.stopping.wait(ERROR_PAUSE_SECONDS)
                    continue
                self.stopping.wait(POLL_SECONDS if leases else IDLE_POLL_SECONDS)
        finally:
            connection.close()


# --- The run's side -----------------------------------------------------------------------


def own_node(run: Run) -> str:
    """The node this run executes on: its queue's (the executor is that queue's worker)."""
    names = node_names([run.queue])
    return names[0] if names else socket.gethostname()


def with_agents(names: Iterable[str]) -> set[str]:
    """Those of ``names`` served by a worker whose agent was seen within ALIVE_SECONDS."""
    wanted = {queue_for(name): name for name in names}
    since = timezone.now() - timedelta(seconds=ALIVE_SECONDS)
    served: set[str] = set()
    for queues in Worker.objects.filter(agent_seen__gte=since).values_list("queues", flat=True):
        served.update(wanted[q] for q in queues or [] if q in wanted)
    return served


def drop_caches(
    run: Run, names: list[str], beat: Callable[[], bool], poll: float = 0.05
) -> dict[str, str] | None:
    """Drop the caches of every node in ``names`` (the nodes this attempt of ``run`` holds)
    and of the node it executes on: asked of the other nodes' agents first, so they drop
    while this node does; then waits for their answers, calling ``beat()`` every
    RUN_PROGRESS_SECONDS (False: the run was cancelled or deleted; None is returned). One
    outcome per node, by hostname."""
    from django.conf import settings

    own = own_node(run)
    others = sorted(set(names) - {own})
    outcomes: dict[str, str] = {}
    if others:
        asked = NodeLease.objects.filter(
            run_id=run.pk, attempt=run.attempts, hostname__in=others
        ).update(drop_requested_at=timezone.now(), drop_result="")
        if asked < len(others):
            held = set(
                NodeLease.objects.filter(run_id=run.pk, attempt=run.attempts).values_list(
                    "hostname", flat=True
                )
            )
            for name in others:
                if name not in held:
                    outcomes[name] = "not asked: the run does not hold this node"
        live = with_agents(others)
        for name in others:
            if name not in live and name not in outcomes:
                outcomes[name] = f"no answer: no beeweb worker with a node agent runs on {name}"
    outcomes[own] = drop_here()
    pending = {name for name in others if name not in outcomes}
    started = time.monotonic()
    last_beat = started
    while pending:
        answers = NodeLease.objects.filter(
            run_id=run.pk, attempt=run.attempts, hostname__in=pending
        ).exclude(drop_result="")
        for name, result in answers.values_list("hostname", "drop_result"):
            outcomes[name] = result
            pending.discard(name)
        if not pending:
            break
        now = time.monotonic()
        if now - started >= ANSWER_SECONDS:
            for name in pending:
                outcomes[name] = f"no answer from {name}'s worker within {ANSWER_SECONDS:g} s"
            break
        if now - last_beat >= settings.RUN_PROGRESS_SECONDS:
            last_beat = now
            if not beat():
                return None
        time.sleep(poll)
    return dict(sorted(outcomes.items()))
