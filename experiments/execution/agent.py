"""The node agent: work a run asks of the nodes it holds, done by each node's own worker.

A run touches several nodes (``experiments.execution.holding``) but executes on one: its launcher's
worker.
What must happen *on* another held node (dropping its caches today; sampling its telemetry
later) cannot go through that node's Celery queue: the node's solo worker may be busy, e.g.
in another run's wait for the very lease this run holds, and a task queued behind it would
never run. So every node worker process runs a small thread beside its consumer, the agent,
which polls the database for work addressed to its own node and does it itself, as root and
under its own node's policy (``experiments.execution.nodepolicy``), never the requester's.

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
(none while it is free). The second job samples telemetry (``NodeTelemetry``): the launcher
samples itself around the tool (``experiments.results.telemetry.recording``) and sets
``sample_from`` on the run's other leases as the measured command starts; each of those
nodes' agents samples its own node from its next poll until ``sample_from`` is cleared (the
tool ended) or the lease goes, and stores the document as the run's ``RunTelemetry`` row for
that hostname. Its readings carry wall-clock times (``started_at``), which is what puts every
node on the run page's one time axis.

The third job answers node requests (``experiments.execution.noderequests``): questions a
user's action addresses to this node whatever holds it, such as its BeeGFS's live topology.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection

from experiments.execution import beegfs, nodepolicy
from experiments.execution.answers import await_answers
from experiments.execution.noderequests import NodeRequests
from experiments.models import NodeLease, Run, Worker
from experiments.shared import clock
from runners import nodeconfig
from runners.launch import queue_for
from runners.sampler import FORMAT, Sampler

log = logging.getLogger(__name__)

POLL_SECONDS = 0.25  # while this node is held
IDLE_POLL_SECONDS = 0.5  # while it is not
SEEN_SECONDS = 5.0  # how often the agent refreshes Worker.agent_seen
ALIVE_SECONDS = 15.0  # an agent not seen for this long is taken for gone
ANSWER_SECONDS = 30.0  # how long a run waits for a node's answer
ERROR_PAUSE_SECONDS = 2.0  # after a database error (the server restarting, say)
LIVE_CHECK_SECONDS = 5.0  # how often a sampling agent checks that the run still runs
# A node's sampling stops here whatever the lease says (a run's timeout is 1 h by default):
# one day of 1 s samples is what a document may hold.
MAX_SAMPLE_SECONDS = 86400.0
STORE_TRIES = 20  # writes of a finished document, one per poll
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


class _Recording:
    """One node's sampling for one attempt of a run."""

    def __init__(self, lease: NodeLease, sampler: Sampler | None):
        self.run_id, self.attempt, self.hostname = lease.run_id, lease.attempt, lease.hostname
        self.sample_from = lease.sample_from
        self.sampler = sampler
        self.began = time.monotonic()
        self.checked = self.began


class NodeTelemetry:
    """Sample this node for every run launched elsewhere that holds it while its tool runs
    (``sample_from`` set on the lease), and store the document once, when the tool ends or
    the lease goes: atomic, and a node that dies meanwhile stores nothing (the run page shows
    the nodes that answered). Sampling also stops when the run no longer runs (this attempt
    ended or its heartbeats stopped) or after MAX_SAMPLE_SECONDS, so a lease left behind by
    a dead launcher cannot grow a document without bound. A node whose policy refuses
    (BEEWEB_NODE_TELEMETRY=false) stores a document without samples that says so."""

    def __init__(self, interval: float = 1.0):
        self.interval = interval
        self.active: dict[tuple[int, int, str], _Recording] = {}
        self.done: set[tuple[int, int, str]] = set()
        # Documents whose write failed, retried at the next polls (STORE_TRIES in all).
        self.unsaved: list[tuple[_Recording, dict[str, Any], int]] = []

    def tick(self, leases: list[NodeLease]) -> None:
        if self.unsaved:
            self._store()
        wanted = {
            (lease.run_id, lease.attempt, lease.hostname): lease
            for lease in leases
            if lease.sample_from is not None
        }
        for key in list(self.active):
            if key not in wanted:
                self._finish(self.active.pop(key))
        self.done &= set(wanted)
        now = time.monotonic()
        for key, lease in wanted.items():
            rec = self.active.get(key)
            if rec is None:
                if key not in self.done:
                    self.active[key] = self._start(lease)
                continue
            if now - rec.began >= MAX_SAMPLE_SECONDS or (
                now - rec.checked >= LIVE_CHECK_SECONDS and not self._live(rec)
            ):
                self._finish(self.active.pop(key))
                self.done.add(key)
            elif now - rec.checked >= LIVE_CHECK_SECONDS:
                rec.checked = now

    def stop(self) -> None:
        """The agent stops (its worker shuts down): what was sampled is stored (one try)."""
        for key in list(self.active):
            self._finish(self.active.pop(key))
        self.unsaved = []

    def _start(self, lease: NodeLease) -> _Recording:
        if not nodepolicy.current().telemetry:
            return _Recording(lease, None)
        try:
            # A held node may be a BeeGFS server: its daemons' own statistics are sampled
            # beside its counters (runners.beegfs_stats; nothing where none runs).
            sampler = Sampler(self.interval, beegfs=True).start()
        except Exception:
            log.exception("node agent: telemetry of %s could not start", lease.hostname)
            sampler = None
        rec = _Recording(lease, sampler)
        if sampler is None:
            rec.sample_from = None  # nothing to store, not even a refusal
        log.info("node agent: sampling %s for run %s", lease.hostname, lease.run_id)
        return rec

    def _live(self, rec: _Recording) -> bool:
        since = clock.now() - timedelta(seconds=settings.RUN_STALE_SECONDS)
        return Run.objects.filter(
            pk=rec.run_id, attempts=rec.attempt, status=Run.Status.RUNNING, heartbeat_at__gte=since
        ).exists()

    def _finish(self, rec: _Recording) -> None:
        """Stop sampling and store the document (or keep it for the next polls when the
        database refused the write: a server restarting, SQLite's lock)."""
        try:
            if rec.sampler is None:
                if rec.sample_from is None:
                    return
                doc = refused_document(rec.hostname, rec.sample_from)
            else:
                doc = rec.sampler.stop()
                if not doc["t"]:
                    return  # the tool ended within one reading: nothing worth a row
                # The node as the run knows it (the lease), whatever its kernel calls itself.
                doc["hostname"] = rec.hostname
                # Its clock against the database's, which the launcher measures too: the
                # run page checks that the nodes' clocks agree within a second.
                from experiments.results.telemetry import with_clock

                with_clock(doc)
        except Exception:
            log.exception("node agent: telemetry of %s for run %s", rec.hostname, rec.run_id)
            return
        self.unsaved.append((rec, doc, 0))
        self._store()

    def _store(self) -> None:
        from experiments.results import telemetry

        waiting, self.unsaved = self.unsaved, []
        for rec, doc, tries in waiting:
            try:
                if Run.objects.filter(pk=rec.run_id, attempts=rec.attempt).exists():
                    telemetry.save(Run(pk=rec.run_id), doc)
                    log.info(
                        "node agent: %s telemetry stored for run %s (%d samples)",
                        rec.hostname,
                        rec.run_id,
                        len(doc["t"]),
                    )
            except Exception:
                if tries + 1 < STORE_TRIES:
                    self.unsaved.append((rec, doc, tries + 1))
                    continue
                log.exception("node agent: telemetry of %s for run %s", rec.hostname, rec.run_id)


def refused_document(hostname: str, sample_from: Any) -> dict[str, Any]:
    """What a node whose policy refuses sampling stores: no samples, and why."""
    return {
        "format": FORMAT,
        "hostname": hostname,
        "started_at": sample_from.isoformat(),
        "interval_s": 1.0,
        "t": [],
        "series": {},
        "meta": {"unavailable": {"telemetry": nodepolicy.TELEMETRY_REFUSED}},
    }


class Agent:
    """The polling loop for ``names`` (this worker's nodes) on behalf of worker ``worker``."""

    def __init__(self, worker: str, names: list[str], jobs: list[Any] | None = None):
        self.worker = worker
        self.names = names
        if jobs is None:
            # The BeeGFS tuning last: a restart holds the loop for seconds.
            jobs = [
                CacheDrop(),
                NodeTelemetry(),
                NodeRequests(names, worker),
                beegfs.BeegfsTuning(names),
            ]
        self.jobs = jobs
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
                        Worker.objects.filter(name=self.worker).update(agent_seen=clock.now())
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
            for job in self.jobs:
                try:
                    if hasattr(job, "stop"):
                        job.stop()
                except Exception:
                    log.exception("node agent of %s: stopping a job failed", self.worker)
            connection.close()


# --- The run's side -----------------------------------------------------------------------


def own_node(run: Run) -> str:
    """The node this run executes on: its queue's (the executor is that queue's worker)."""
    names = node_names([run.queue])
    return names[0] if names else socket.gethostname()


def with_agents(names: Iterable[str]) -> set[str]:
    """Those of ``names`` served by a worker whose agent was seen within ALIVE_SECONDS."""
    wanted = {queue_for(name): name for name in names}
    since = clock.now() - timedelta(seconds=ALIVE_SECONDS)
    served: set[str] = set()
    for queues in Worker.objects.filter(agent_seen__gte=since).values_list("queues", flat=True):
        served.update(wanted[q] for q in queues or [] if q in wanted)
    return served


def others_held(run: Run) -> bool:
    """Whether this attempt holds a node besides its own (its leases are ``nodes_held``)."""
    return bool(set(run.nodes_held or []) - {own_node(run)})


def start_sampling(run: Run) -> int:
    """The measured command starts: ask every other node this attempt holds to sample its
    telemetry (their agents start at their next poll, within POLL_SECONDS); how many. No
    query for a run that holds its own node only."""
    if not others_held(run):
        return 0
    return (
        NodeLease.objects.filter(run_id=run.pk, attempt=run.attempts)
        .exclude(hostname=own_node(run))
        .update(sample_from=clock.now())
    )


def stop_sampling(run: Run) -> int:
    """The measured command ended: the other nodes stop sampling and store what they have."""
    if not others_held(run):
        return 0
    return NodeLease.objects.filter(
        run_id=run.pk, attempt=run.attempts, sample_from__isnull=False
    ).update(sample_from=None)


def drop_caches(
    run: Run, names: list[str], beat: Callable[[], bool], poll: float = 0.05
) -> dict[str, str] | None:
    """Drop the caches of every node in ``names`` (the nodes this attempt of ``run`` holds)
    and of the node it executes on: asked of the other nodes' agents first, so they drop
    while this node does; then waits for their answers, calling ``beat()`` every
    RUN_PROGRESS_SECONDS (False: the run was cancelled or deleted; None is returned). One
    outcome per node, by hostname."""
    # A beat is due RUN_PROGRESS_SECONDS from here, not from the end of this node's own
    # drop (which can take long itself).
    last_beat = time.monotonic()
    own = own_node(run)
    others = sorted(set(names) - {own})
    outcomes: dict[str, str] = {}
    if others:
        asked = NodeLease.objects.filter(
            run_id=run.pk, attempt=run.attempts, hostname__in=others
        ).update(drop_requested_at=clock.now(), drop_result="")
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
    answers, cancelled = await_answers(
        {name for name in others if name not in outcomes},
        lambda pending: (
            NodeLease.objects.filter(run_id=run.pk, attempt=run.attempts, hostname__in=pending)
            .exclude(drop_result="")
            .values_list("hostname", "drop_result")
        ),
        beat,
        ANSWER_SECONDS,
        lambda name: f"no answer from {name}'s worker within {ANSWER_SECONDS:g} s",
        poll,
        last_beat,
    )
    if cancelled:
        return None
    outcomes.update(answers)
    return dict(sorted(outcomes.items()))
