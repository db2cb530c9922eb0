"""The Celery application; configuration comes from Django settings (CELERY_* names).

A bootstep records each worker in the database when it starts and every 30 seconds after,
so the dashboard (and the janitor of later issues) knows which workers are alive.
"""

from __future__ import annotations

import os
import socket

from celery import Celery, bootsteps

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "beeweb.settings")

app = Celery("beeweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

HEARTBEAT_SECONDS = 30.0


def record_heartbeat(worker, started: bool = False) -> None:
    from django.db import close_old_connections
    from django.utils import timezone

    from experiments.models import Worker

    close_old_connections()
    now = timezone.now()
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
    requires = {"celery.worker.components:Timer"}

    def start(self, worker):
        record_heartbeat(worker, started=True)
        self.timer = worker.timer.call_repeatedly(
            HEARTBEAT_SECONDS, record_heartbeat, (worker,), priority=10
        )

    def stop(self, worker):
        if getattr(self, "timer", None):
            self.timer.cancel()


class NodePolicy(bootsteps.Step):
    """Check this node's BEEWEB_NODE_DIRS / BEEWEB_NODE_TUNING as the worker starts: a
    malformed value stops it with ImproperlyConfigured instead of failing every run."""

    def __init__(self, worker, **kwargs):
        from runners import nodepolicy

        nodepolicy.check()
        super().__init__(worker, **kwargs)


app.steps["worker"].add(NodePolicy)
app.steps["worker"].add(Heartbeat)
