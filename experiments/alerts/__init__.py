"""Alerts: who subscribes to a testbed's or a matrix's news, ``notify`` recording an alert once
per key, and its delivery by e-mail and signed webhook through a Celery task with bounded
retries (docs/design-notes.md, "Alerts")."""

from experiments.alerts.notify import notify

__all__ = ["notify"]
