"""Waiting for what other nodes' agents answer on a run's leases (a cache drop, a BeeGFS
config), the run's heartbeat going on meanwhile: one loop for every kind of request."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings


def await_answers(
    pending: Iterable[str],
    read: Callable[[set[str]], Iterable[tuple[str, Any]]],
    beat: Callable[[], bool],
    timeout: float,
    no_answer: Callable[[str], Any],
    poll: float,
    last_beat: float | None = None,
) -> tuple[dict[str, Any], bool]:
    """Poll ``read(still pending)`` (the ``(hostname, answer)`` pairs of the nodes that have
    answered) every ``poll`` seconds until every node in ``pending`` answered, ``timeout``
    seconds passed (each silent node gets ``no_answer(hostname)``) or ``beat()``, called every
    RUN_PROGRESS_SECONDS from ``last_beat`` (monotonic; default now), says the run was
    cancelled or deleted; (answers by hostname, cancelled)."""
    waiting = set(pending)
    answers: dict[str, Any] = {}
    started = time.monotonic()
    last_beat = started if last_beat is None else last_beat
    while waiting:
        for hostname, result in read(waiting):
            answers[hostname] = result
            waiting.discard(hostname)
        if not waiting:
            break
        # The beat before the end of the wait: a loop that wakes late (a starved worker) may
        # find the wait over at its first look again, and must have beaten by then.
        now = time.monotonic()
        if now - last_beat >= settings.RUN_PROGRESS_SECONDS:
            last_beat = now
            if not beat():
                return answers, True
        if now - started >= timeout:
            for hostname in waiting:
                answers[hostname] = no_answer(hostname)
            break
        time.sleep(poll)
    return answers, False
