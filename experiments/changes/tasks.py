"""The detection sweep as a Celery task: sent by beat every CHANGES_SECONDS (beeweb.settings),
or by name (``changes.detect``) by anything that wants it sooner. (Connections are handled
as for every task: experiments.execution.tasks.fresh_connections.)"""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from experiments.changes import announce, scan


@shared_task(name="changes.detect", ignore_result=True)
def detect(limit: int | None = None) -> dict[str, int]:
    """Analyse the configurations whose runs changed since their last analysis (at most
    ``limit``, default CHANGES_BATCH), then announce the new change points (experiments.alerts)."""
    done = scan.analyse_pending(limit or settings.CHANGES_BATCH)
    done["announced"] = announce.announce_pending()
    return done
