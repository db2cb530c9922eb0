"""``notify``: record an alert once per key and queue its deliveries to the subscribers of its
testbed or matrix."""

from __future__ import annotations

import json
import logging

from django.db import IntegrityError, transaction
from django.db.models import Q

from experiments.alerts import tasks
from experiments.alerts.access import subscribe_refused
from experiments.models import Alert, Delivery, Matrix, Subscription, Testbed

log = logging.getLogger(__name__)

MAX_KEY = 200
MAX_KIND = 40
MAX_SUBJECT = 200


def subscriptions_for(testbed: Testbed | None, matrix: Matrix | None) -> list[Subscription]:
    """The subscriptions an alert of ``testbed`` and/or ``matrix`` reaches: those of the
    testbed, those of the matrix and, for a matrix's alert naming no testbed, those of the
    matrix's testbeds; each only while its user may still subscribe to it."""
    scope = Q(pk__in=[])
    if testbed is not None:
        scope |= Q(testbed=testbed)
    if matrix is not None:
        scope |= Q(matrix=matrix)
        if testbed is None:
            scope |= Q(testbed__in=matrix.testbeds.all())
    found = Subscription.objects.filter(scope).select_related("user", "testbed__owner", "matrix")
    return [
        s
        for s in found.order_by("pk")
        if subscribe_refused(s.user, testbed=s.testbed, matrix=s.matrix) is None
    ]


def notify(
    key: str,
    kind: str,
    *,
    testbed: Testbed | None = None,
    matrix: Matrix | None = None,
    subject: str,
    text: str,
    data: dict,
) -> Alert | None:
    """Record the alert ``key`` (e.g. ``change:<uuid>``, ``firing:<id>:not_run``) of ``kind``
    about ``testbed`` and/or ``matrix`` and deliver it, once per e-mail address and webhook
    URL, to their subscribers; ``data`` (JSON-ready: a change point's API dict) travels
    in the webhook's payload. A key already recorded is never delivered again: None then,
    else the new Alert. Deliveries are sent by a Celery task after the transaction commits
    (bounded retries; a broker that is down leaves them pending for the sweep)."""
    if not key or len(key) > MAX_KEY:
        raise ValueError(f"an alert key has 1 to {MAX_KEY} characters")
    if not kind or len(kind) > MAX_KIND:
        raise ValueError(f"an alert kind has 1 to {MAX_KIND} characters")
    if not isinstance(data, dict):
        raise ValueError("an alert's data is a dict")
    # JSON-ready, as the webhook sends it (raises on what json cannot hold).
    data = json.loads(json.dumps(data, allow_nan=False))
    # One line (a mail header): no newline from a matrix's name reaches it.
    subject = " ".join(str(subject).split())
    if len(subject) > MAX_SUBJECT:
        subject = subject[: MAX_SUBJECT - 1] + "…"
    with transaction.atomic():
        try:
            with transaction.atomic():
                alert = Alert.objects.create(
                    key=key,
                    kind=kind,
                    testbed=testbed,
                    matrix=matrix,
                    subject=subject,
                    text=text,
                    data=data,
                )
        except IntegrityError:
            return None  # this key was alerted already
        deliveries: dict[tuple[str, str], Delivery] = {}
        for sub in subscriptions_for(testbed, matrix):
            if sub.email:
                deliveries.setdefault(
                    (Delivery.Channel.EMAIL, sub.email.lower()),
                    Delivery(
                        alert=alert,
                        subscription=sub,
                        user=sub.user,
                        channel=Delivery.Channel.EMAIL,
                        target=sub.email,
                    ),
                )
            if sub.webhook_url:
                deliveries.setdefault(
                    (Delivery.Channel.WEBHOOK, sub.webhook_url),
                    Delivery(
                        alert=alert,
                        subscription=sub,
                        user=sub.user,
                        channel=Delivery.Channel.WEBHOOK,
                        target=sub.webhook_url,
                    ),
                )
        made = Delivery.objects.bulk_create(deliveries.values())
        ids = [d.pk for d in made]
        transaction.on_commit(lambda: tasks.send_all(ids))
    log.info("alert %s (%s): %d deliveries", key, kind, len(ids))
    return alert
