"""Sending one delivery: an e-mail through Django's mail settings, or a webhook POST of the
versioned JSON payload signed with the subscription's secret (docs/design-notes.md)."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import socket
import urllib.error
import urllib.request
from urllib.parse import urlparse

from django.conf import settings
from django.core.mail import EmailMessage, get_connection
from django.urls import reverse

from experiments.models import Delivery

PAYLOAD_VERSION = 1
SIGNATURE_HEADER = "X-Beeweb-Signature"


class PermanentError(Exception):
    """Sending again would not help (a webhook pointing where it may not)."""


def _ref(obj) -> dict | None:
    if obj is None:
        return None
    ref = {"uuid": str(obj.uuid), "name": obj.name}
    if settings.BASE_URL:
        ref["url"] = settings.BASE_URL + obj.get_absolute_url()
    return ref


def payload(delivery: Delivery) -> dict:
    """The webhook's JSON body (version 1; a stable interface, docs/design-notes.md)."""
    alert = delivery.alert
    return {
        "version": PAYLOAD_VERSION,
        "alert": str(alert.uuid),
        "delivery": str(delivery.uuid),
        "key": alert.key,
        "kind": alert.kind,
        "subject": alert.subject,
        "text": alert.text,
        "created": alert.created.isoformat(),
        "testbed": _ref(alert.testbed),
        "matrix": _ref(alert.matrix),
        "url": settings.BASE_URL + reverse("experiments:alert_list") if settings.BASE_URL else None,
        "data": alert.data,
    }


def body(delivery: Delivery) -> bytes:
    return json.dumps(payload(delivery), sort_keys=True, separators=(",", ":")).encode()


def signature(secret: str, data: bytes) -> str:
    """``sha256=<hex HMAC-SHA256 of the body with the subscription's secret>``."""
    return "sha256=" + hmac.new(secret.encode(), data, hashlib.sha256).hexdigest()


def check_url(url: str) -> None:
    """PermanentError unless ``url`` is http(s) with a host that resolves to addresses a
    webhook may reach (no loopback, private or link-local ones unless
    BEEWEB_WEBHOOK_ALLOW_PRIVATE)."""
    parsed = urlparse(url)
    if parsed.scheme not in {"http", "https"} or not parsed.hostname:
        raise PermanentError("a webhook URL starts with http:// or https:// and names a host")
    if settings.WEBHOOK_ALLOW_PRIVATE:
        return
    try:
        infos = socket.getaddrinfo(parsed.hostname, parsed.port or 443, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise OSError(f"cannot resolve {parsed.hostname}: {exc}") from exc
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if not address.is_global:
            raise PermanentError(
                f"{parsed.hostname} is {address}, a loopback, private or reserved address: "
                "webhooks may not reach it (BEEWEB_WEBHOOK_ALLOW_PRIVATE)"
            )


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise urllib.error.HTTPError(
            req.full_url, code, f"redirect to {newurl} refused", headers, fp
        )


_opener = urllib.request.build_opener(_NoRedirect)


def send_webhook(delivery: Delivery) -> None:
    """POST the payload; raises on anything but a 2xx answer (redirects are not followed)."""
    check_url(delivery.target)
    secret = delivery.subscription.secret if delivery.subscription else ""
    data = body(delivery)
    request = urllib.request.Request(
        delivery.target,
        data=data,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "User-Agent": "beeweb-alerts/1",
            "X-Beeweb-Event": delivery.alert.kind,
            "X-Beeweb-Delivery": str(delivery.uuid),
            SIGNATURE_HEADER: signature(secret, data),
        },
    )
    try:
        with _opener.open(request, timeout=settings.WEBHOOK_TIMEOUT_SECONDS) as response:
            response.read(4096)
    except urllib.error.HTTPError as exc:
        text = exc.read(300).decode(errors="replace") if exc.fp else ""
        raise OSError(f"HTTP {exc.code} {exc.reason}: {text}".strip()) from None


def send_email(delivery: Delivery) -> None:
    alert = delivery.alert
    lines = [alert.text]
    if settings.BASE_URL:
        lines += ["", f"Alerts: {settings.BASE_URL}{reverse('experiments:alert_list')}"]
    lines += [
        "",
        "You get this because you subscribed to alerts of "
        f"{alert.testbed or alert.matrix or 'this beeweb'} (manage: subscriptions page).",
    ]
    message = EmailMessage(
        subject=f"[beeweb] {alert.subject}",
        body="\n".join(lines),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[delivery.target],
        headers={"X-Beeweb-Alert": alert.key},
        connection=get_connection(timeout=settings.EMAIL_TIMEOUT),
    )
    message.send(fail_silently=False)


def send(delivery: Delivery) -> None:
    if delivery.channel == Delivery.Channel.EMAIL:
        send_email(delivery)
    else:
        send_webhook(delivery)
