"""Login and API throttling: the client address, django-axes' backend, token failures.

Settings (``beeweb/settings.py``) name these by path: ``AXES_CLIENT_IP_CALLABLE``,
``AUTHENTICATION_BACKENDS`` and the REST framework's ``DEFAULT_AUTHENTICATION_CLASSES``.
"""

from __future__ import annotations

import math

from axes.backends import AxesStandaloneBackend
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from rest_framework.authentication import TokenAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, Throttled
from rest_framework.throttling import SimpleRateThrottle


def client_ip(request: HttpRequest) -> str:
    """The address a request came from: REMOTE_ADDR, or behind beeweb's reverse proxy
    (BEEWEB_BEHIND_PROXY) the last X-Forwarded-For hop, the one that proxy appended. Earlier
    hops are the client's own say and are not trusted."""
    remote = request.META.get("REMOTE_ADDR", "") or ""
    if settings.BEHIND_PROXY:
        hops = [h.strip() for h in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
        hops = [h for h in hops if h]
        if hops:
            return hops[-1]
    return remote


class LoginThrottleBackend(AxesStandaloneBackend):
    """django-axes' lockout check for every login over HTTP (the login page, the admin's).

    ``authenticate()`` without a request (the test client's ``login()``, a shell) is no HTTP
    login attempt and has no client address to throttle by: it goes on to ModelBackend."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def lockout_response(request: HttpRequest, original_response=None, credentials=None):
    """django-axes' answer to a locked-out login: the lockout page with status 429."""
    username = (credentials or {}).get(settings.AXES_USERNAME_FORM_FIELD) or request.POST.get(
        settings.AXES_USERNAME_FORM_FIELD, ""
    )
    seconds = settings.AXES_COOLOFF_TIME.total_seconds()
    response: HttpResponse = render(
        request,
        "registration/locked_out.html",
        {
            "username": username,
            "failure_limit": settings.AXES_FAILURE_LIMIT,
            "minutes": math.ceil(seconds / 60),
        },
        status=429,
    )
    response["Retry-After"] = str(int(seconds))
    return response


class TokenFailureThrottle(SimpleRateThrottle):
    """Counts requests with a wrong API token per client address (rate ``token_failure``)."""

    scope = "token_failure"

    def get_cache_key(self, request, view) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def exhausted(self, request) -> bool:
        self.key = self.get_cache_key(request, None)
        self.history = self.cache.get(self.key, [])
        self.now = self.timer()
        while self.history and self.history[-1] <= self.now - self.duration:
            self.history.pop()
        return len(self.history) >= self.num_requests

    def record_failure(self) -> None:
        self.history.insert(0, self.now)
        self.cache.set(self.key, self.history, self.duration)


class ThrottledTokenAuthentication(TokenAuthentication):
    """Token authentication that answers 429 to an address after too many wrong tokens,
    before looking the token up (a right token then waits too: no oracle while throttled)."""

    def authenticate(self, request):
        auth = get_authorization_header(request).split()
        if not auth or auth[0].lower() != self.keyword.lower().encode():
            return None
        throttle = TokenFailureThrottle()
        if throttle.exhausted(request):
            raise Throttled(
                wait=throttle.wait(), detail="Too many requests with a wrong API token."
            )
        try:
            return super().authenticate(request)
        except AuthenticationFailed:
            throttle.record_failure()
            raise
