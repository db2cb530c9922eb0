"""beeweb's Celery app with the configuration summaries' refresh skipped, for
``bench/dispatch.py --without-summaries`` only: what the rest of a run costs through Redis
and the worker (accounting; a real worker always keeps the summaries)."""

from __future__ import annotations

from celery.signals import worker_init

from beeweb.celery import app

__all__ = ["app"]


@worker_init.connect
def _skip_summaries(**kwargs) -> None:
    from experiments.results import summaries

    summaries._refresh = lambda run_ids, keys: None
