"""Getting an API token: manage.py api_token and the /api/token/ page."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def test_api_token_command_prints_a_working_token(alice, testbed):
    out = StringIO()
    call_command("api_token", "alice", stdout=out)
    key = out.getvalue().strip()
    assert Token.objects.get(user=alice).key == key
    out2 = StringIO()
    call_command("api_token", "alice", stdout=out2)
    assert out2.getvalue().strip() == key  # stable
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/testbeds/").status_code == 200
    out3 = StringIO()
    call_command("api_token", "alice", "--rotate", stdout=out3)
    assert out3.getvalue().strip() != key
    assert client.get("/api/testbeds/").status_code == 401
    with pytest.raises(CommandError):
        call_command("api_token", "nobody")


def test_token_page(alice_client, alice, client):
    page = alice_client.get("/api/token/")
    assert page.status_code == 200 and b"no API token yet" in page.content
    assert alice_client.post("/api/token/", {"action": "create"}).status_code == 302
    key = Token.objects.get(user=alice).key
    assert key in alice_client.get("/api/token/").content.decode()
    alice_client.post("/api/token/", {"action": "create"})
    assert Token.objects.get(user=alice).key != key
    alice_client.post("/api/token/", {"action": "revoke"})
    assert not Token.objects.filter(user=alice).exists()


def test_token_page_needs_a_session(client):
    response = client.get("/api/token/")
    assert response.status_code == 302 and "/login/" in response["Location"]
