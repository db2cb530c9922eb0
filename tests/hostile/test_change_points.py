"""Change points under attack: a colleague who does not operate the testbed changes no
state (page or API), anonymous callers get nothing, published data is out of reach, and
what runs recorded (parameters, node facts) or a note cannot inject markup."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from experiments.changes import scan
from experiments.models import ChangePoint, Testbed
from tests.helpers.api import token_client
from tests.helpers.changes import make_history, node_config, noisy

pytestmark = pytest.mark.django_db

EVIL = '<script>alert("x")</script>'


@pytest.fixture
def cp(testbed, alice) -> ChangePoint:
    values = noisy(11, (2.0e9, 20), (1.4e9, 12))
    configs = [node_config()] * 20 + [node_config(EVIL)] * 12
    make_history(testbed, alice, values, configs, params={"rw": "write", "label": EVIL})
    scan.analyse_pending()
    return ChangePoint.objects.get()


def test_bob_cannot_change_a_state_until_he_operates_the_testbed(bob, cp, testbed):
    api = token_client(bob)
    url = f"/api/changes/{cp.uuid}/state/"
    answer = api.post(url, {"state": "muted"}, format="json")
    assert answer.status_code == 403 and "operator" in answer.json()["detail"]
    cp.refresh_from_db()
    assert cp.state == "new" and cp.state_by is None
    assert api.get("/api/changes/").json()["results"][0]["id"] == str(cp.uuid)  # he reads
    testbed.operators.add(bob)
    assert api.post(url, {"state": "muted"}, format="json").status_code == 200
    cp.refresh_from_db()
    assert cp.state == "muted" and cp.state_by == bob


def test_anonymous_api_callers_get_nothing(cp):
    anonymous = APIClient()
    assert anonymous.get("/api/changes/").status_code in (401, 403)
    assert anonymous.get(f"/api/changes/{cp.uuid}/").status_code in (401, 403)
    answer = anonymous.post(f"/api/changes/{cp.uuid}/state/", {"state": "muted"}, format="json")
    assert answer.status_code in (401, 403)
    cp.refresh_from_db()
    assert cp.state == "new"


def test_a_session_post_without_csrf_is_refused(alice, cp):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    answer = client.post(reverse("experiments:change_state", args=[cp.uuid]), {"state": "muted"})
    assert answer.status_code == 403
    cp.refresh_from_db()
    assert cp.state == "new"


def test_change_points_of_a_published_testbed_are_out_of_reach(alice, cp, testbed):
    Testbed.objects.filter(pk=testbed.pk).update(published=True)
    api = token_client(alice)
    assert api.get("/api/changes/").json()["results"] == []
    assert api.get(f"/api/changes/{cp.uuid}/").status_code == 404
    answer = api.post(f"/api/changes/{cp.uuid}/state/", {"state": "muted"}, format="json")
    assert answer.status_code == 404


@pytest.mark.parametrize(
    "query",
    [
        {"state": "new' OR 1=1 --"},
        {"testbed": "'; DROP TABLE experiments_run; --"},
        {"matrix": "0" * 36},
        {"cursor": "garbage"},
        {"page_size": "-1"},
        {"metric": "\x00"},
        {"configuration": "x" * 5000},
    ],
)
def test_hostile_filters_are_4xx_or_empty(alice, cp, query):
    answer = token_client(alice).get("/api/changes/", query)
    assert answer.status_code < 500
    if answer.status_code == 200:
        assert answer.json()["results"] in ([], [cp.as_api()])


@pytest.mark.parametrize(
    "url",
    ["/changes/?cursor=garbage", "/changes/?state=<b>", "/changes/?testbed=nope",
     "/history/" + "a" * 32 + "/?metric=<b>",
     "/testbeds/00000000-0000-0000-0000-000000000000/history/"],
)  # fmt: skip
def test_hostile_page_queries_are_4xx(alice_client, cp, url):
    assert alice_client.get(url).status_code in (200, 404)


def test_recorded_facts_and_notes_cannot_inject_markup(alice_client, alice, cp):
    note = '<img src=x onerror="alert(1)">'
    alice_client.post(
        reverse("experiments:change_state", args=[cp.uuid]), {"state": "expected", "note": note}
    )
    for url in (reverse("experiments:change_list") + "?state=all", cp.get_absolute_url(),
                cp.history_url()):  # fmt: skip
        body = alice_client.get(url).content.decode()
        assert EVIL not in body and note not in body, url
        assert "&lt;script&gt;" in body or "\\u003Cscript\\u003E" in body


def test_a_note_too_long_is_refused_whole(alice_client, cp):
    answer = alice_client.post(
        reverse("experiments:change_state", args=[cp.uuid]),
        {"state": "muted", "note": "x" * 2001},
        HTTP_HX_REQUEST="true",
    )
    assert answer.status_code == 400
    cp.refresh_from_db()
    assert cp.state == "new" and cp.state_note == ""
