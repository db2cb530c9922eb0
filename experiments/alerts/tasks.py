"""The Celery task that sends one delivery, with bounded retries, and the sweep that sends
again deliveries whose message was lost (a broker down when the alert was made)."""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db.models import F
from django.utils import timezone

from experiments.alerts import channels
from experiments.models import Delivery

log = logging.getLogger(__name__)


def retry_delay(attempts: int) -> int:
    """Seconds before the next attempt after ``attempts`` failed ones (doubling)."""
    return settings.ALERT_RETRY_SECONDS * 2 ** max(attempts - 1, 0)


def attempt(delivery_id: int) -> str:
    """One attempt at a pending delivery: ``sent``, ``failed`` (for good), ``retry`` or
    ``skip`` (not pending, or another attempt claimed it). Never raises for a send error:
    it is stored on the delivery."""
    delivery = (
        Delivery.objects.select_related("alert__testbed", "alert__matrix", "subscription")
        .filter(pk=delivery_id, status=Delivery.Status.PENDING)
        .first()
    )
    if delivery is None:
        return "skip"
    now = timezone.now()
    claimed = Delivery.objects.filter(
        pk=delivery.pk, status=Delivery.Status.PENDING, attempts=delivery.attempts
    ).update(attempts=F("attempts") + 1, last_attempt_at=now)
    if not claimed:
        return "skip"
    attempts = delivery.attempts + 1
    try:
        channels.send(delivery)
    except channels.PermanentError as exc:
        error, final = str(exc), True
    except Exception as exc:  # network, SMTP, HTTP status: stored, tried again
        error, final = (
            f"{type(exc).__name__}: {exc}"[:2000],
            attempts >= settings.ALERT_MAX_ATTEMPTS,
        )
    else:
        Delivery.objects.filter(pk=delivery.pk).update(
            status=Delivery.Status.SENT, sent_at=timezone.now(), last_error=""
        )
        return "sent"
    status = Delivery.Status.FAILED if final else Delivery.Status.PENDING
    Delivery.objects.filter(pk=delivery.pk).update(status=status, last_error=error)
    log.warning("delivery %s attempt %d: %s", delivery.uuid, attempts, error)
    return "failed" if final else "retry"


@shared_task(name="alerts.deliver", bind=True, max_retries=None, ignore_result=True, time_limit=300)
def deliver(self, delivery_id: int) -> str:
    outcome = attempt(delivery_id)
    if outcome == "retry":
        attempts = Delivery.objects.values_list("attempts", flat=True).get(pk=delivery_id)
        raise self.retry(countdown=retry_delay(attempts))
    return outcome


def send_all(ids: list[int]) -> None:
    """Queue the deliveries; a broker that cannot be reached leaves them pending for the
    sweep (``resend_lost``)."""
    for pk in ids:
        try:
            deliver.delay(pk)
        except Exception:
            log.exception("could not queue delivery %s; the sweep sends it later", pk)
            return


def resend_lost() -> int:
    """Queue again the pending deliveries whose message is overdue: never tried for a minute,
    or not tried again well after their retry was due. How many were sent."""
    now = timezone.now()
    grace = timedelta(seconds=60)
    lost = []
    for pk, attempts, last, created in Delivery.objects.filter(
        status=Delivery.Status.PENDING
    ).values_list("pk", "attempts", "last_attempt_at", "created")[:1000]:
        since = last or created
        if now - since > grace + timedelta(seconds=retry_delay(attempts) if attempts else 0):
            lost.append(pk)
    send_all(lost)
    return len(lost)
