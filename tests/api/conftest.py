"""API tests: DRF clients authenticated by token (no session), alice's world from
tests/conftest.py."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.helpers.api import token_client


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
