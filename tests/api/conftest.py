"""API tests: DRF clients authenticated by token (no session), alice's world from
tests/conftest.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

SAMPLES = Path(
    os.environ.get("BEEWEB_SAMPLES_DIR")
    or Path(__file__).resolve().parents[2].parent / "shared" / "samples"
)


def sample(relative: str) -> str:
    path = SAMPLES / relative
    if not path.exists():
        if os.environ.get("CI"):
            pytest.fail(f"sample {path} is missing")
        pytest.skip(f"no sample {path} (set BEEWEB_SAMPLES_DIR)")
    return path.read_text(encoding="utf-8", errors="replace")


def token_client(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def api(alice) -> APIClient:
    return token_client(alice)


@pytest.fixture
def bob_api(bob) -> APIClient:
    return token_client(bob)


@pytest.fixture
def staff_api(django_user_model) -> APIClient:
    staff = django_user_model.objects.create_user("carol", password="carol-pw", is_staff=True)
    return token_client(staff)
