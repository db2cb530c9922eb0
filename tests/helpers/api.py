"""API clients for tests beyond tests/api (whose fixtures ``api``, ``bob_api`` and ``staff_api``
use this)."""

from __future__ import annotations

from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient


def token_client(user) -> APIClient:
    """A DRF client authenticated by ``user``'s token (no session)."""
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client
