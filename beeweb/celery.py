"""The Celery application; configuration comes from Django settings (CELERY_* names).

A bootstep records each worker in the database when it starts and every 30 seconds after,
so the dashboard (and the janitor of later issues) knows which workers are alive; another
starts the node agent of a node worker (experiments.execution.agent).
"""

from __future__ import annotations

import logging
import os
import socket

from celery import Celery, bootsteps
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "beeweb.settings")

log = logging.getLogger(__name__)
app = Celery("beeweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

HEARTBEAT_SECONDS = 30.0


def record_heartbeat(worker, started: bool = False) -> None:
    from django.db import close_old_connections

    from experiments.models import Worker
    from experiments.shared import clock

    close_old_connections()
    now = clock.now()
    queues = sorted(q.name for q in worker.app.amqp.queues.consume_from.values())
    defaults = {
        "hostname": socket.gethostname(),
        "queues": queues,
        "pid": os.getpid(),
        "last_seen": now,
    }
    if started:
        defaults["started_at"] = now
    Worker.objects.update_or_create(
        name=worker.hostname, defaults=defaults, create_defaults={**defaults, "started_at": now}
    )


class Heartbeat(bootsteps.StartStopStep):
    """Records the worker as it starts and every HEARTBEAT_SECONDS after. A failure is logged
    and the next beat tries again (as the worker's start, until one is recorded): a worker
    that started while the database was out of reach (restarting, or its node cut off) died
    of it, an "Unrecoverable error" (the chaos soak, tests/soak, found it)."""

    requires = {"celery.worker.components:Timer"}

    def start(self, worker):
        self.recorded = False
        self.beat(worker)
        self.timer = worker.timer.call_repeatedly(
            HEARTBEAT_SECONDS, self.beat, (worker,), priority=10
        )

    def beat(self, worker) -> None:
        from django.db import DatabaseError, close_old_connections

        try:
            record_heartbeat(worker, started=not self.recorded)
        except DatabaseError as exc:
            log.warning("worker %s could not record its heartbeat: %s", worker.hostname, exc)
            close_old_connections()
        else:
            self.recorded = True

    def stop(self, worker):
        if getattr(self, "timer", None):
            self.timer.cancel()


class NodePolicy(bootsteps.Step):
    """Check this node's BEEWEB_NODE_DIRS / BEEWEB_NODE_TUNING as the worker starts: a
    malformed value stops it with ImproperlyConfigured instead of failing every run."""

    def __init__(self, worker, **kwargs):
        from experiments.execution import nodepolicy

        nodepolicy.check()
        super().__init__(worker, **kwargs)


class NodeAgent(bootsteps.StartStopStep):
    """The node agent (experiments.execution.agent) of a worker that serves ``node.<hostname>``
    queues: a
    thread beside the consumer doing, on this node, what runs holding it ask for (drop its
    caches, sample its telemetry while their tool runs) even while the worker's solo pool
    is busy. Workers of other queues run none."""

    requires = {Heartbeat}

    def start(self, worker):
        from experiments.execution import agent

        queues = [q.name for q in worker.app.amqp.queues.consume_from.values()]
        names = agent.node_names(queues)
        self.agent = agent.Agent(worker.hostname, names).start() if names else None

    def stop(self, worker):
        if getattr(self, "agent", None):
            self.agent.stop()


app.steps["worker"].add(NodePolicy)
app.steps["worker"].add(Heartbeat)
app.steps["worker"].add(NodeAgent)


@worker_ready.connect
def sweep_on_start(sender=None, **kwargs) -> None:
    """One janitor sweep as the worker starts, before it takes its first message: a worker
    restarted without beat still requeues (or cancels, when a cancel was asked) the run its
    previous process was running, and runs of dead workers elsewhere; then what ended
    attempts left on this node and no attempt will take up is removed
    (``experiments.execution.execute.sweep_leftovers``)."""
    from django.db import close_old_connections

    from experiments.execution.dispatch import janitor
    from experiments.execution.execute import sweep_leftovers

    name = getattr(sender, "hostname", "") or ""
    try:
        close_old_connections()
        counts = janitor(restarted_worker=name)
        sweep_leftovers()
    except Exception:  # the worker must start even when the database is not reachable yet
        log.exception("janitor sweep at start of %s failed", name)
    else:
        log.info("janitor sweep at start of %s: %s", name, counts)
    finally:
        close_old_connections()
