"""Schedules, subscriptions and alerts against a hostile colleague: bob can neither see nor
change alice's schedule, subscribe to her testbed or matrix (until she makes him an operator
of the testbed), see or delete her subscriptions, nor read her alerts; bad schedules and
webhook URLs answer 400 with the reason on the page and in the API, never a 500, and store
nothing."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from django_celery_beat.models import PeriodicTask

from experiments.alerts import notify
from experiments.matrices import schedules
from experiments.models import Alert, Matrix, MatrixSchedule, Subscription

pytestmark = pytest.mark.django_db


@pytest.fixture
def matrix(alice, bench):
    m = Matrix.objects.create(
        owner=alice, name="nightly", tool="fio", fixed_params={"rw": "write", "size": "1m"}
    )
    m.testbeds.set([bench])
    return m


@pytest.fixture
def schedule(matrix):
    return schedules.save_schedule(matrix, cron="30 2 * * *")


def schedule_url(matrix) -> str:
    return reverse("experiments:matrix_schedule", args=[matrix.uuid])


def test_the_owner_sets_pauses_and_removes_the_schedule_on_the_page(alice_client, matrix):
    page = alice_client.get(matrix.get_absolute_url()).content.decode()
    assert 'id="schedule-form"' in page and "Not scheduled" in page
    answer = alice_client.post(
        schedule_url(matrix),
        {"cron": "@nightly", "deadline_s": "3600", "enabled": "on"},
        headers={"HX-Request": "true"},
    )
    assert answer.status_code == 200
    assert "cron @nightly" in answer.content.decode()
    task = PeriodicTask.objects.get(task=schedules.FIRE_TASK)
    assert task.enabled and (task.crontab.minute, task.crontab.hour) == ("0", "2")
    alice_client.post(schedule_url(matrix), {"cron": "@nightly", "deadline_s": "3600"})
    assert not PeriodicTask.objects.get(task=schedules.FIRE_TASK).enabled
    assert "(paused)" in alice_client.get(matrix.get_absolute_url()).content.decode()
    alice_client.post(schedule_url(matrix), {"delete": "1"})
    assert (
        not MatrixSchedule.objects.exists()
        and not PeriodicTask.objects.filter(task=schedules.FIRE_TASK).exists()
    )


@pytest.mark.parametrize(
    "data, words",
    [
        ({"cron": "61 * * * *", "deadline_s": "60"}, "is not valid"),
        ({"cron": "every night", "deadline_s": "60"}, "five fields"),
        ({"cron": "* * * * *", "every_s": "60", "deadline_s": "60"}, "either a cron"),
        ({"every_s": "1", "deadline_s": "60"}, "greater than or equal to 10"),
        ({"every_s": "abc", "deadline_s": "60"}, "whole number"),
        ({"every_s": "99999999999999999999", "deadline_s": "60"}, "less than or equal"),
        ({"cron": "x" * 5000, "deadline_s": "60"}, "at most 100 characters"),
        ({"cron": "@daily", "deadline_s": "0"}, "greater than or equal to 1"),
    ],
)
def test_bad_schedules_answer_400_with_the_reason(alice_client, matrix, data, words):
    page = alice_client.post(schedule_url(matrix), data, headers={"HX-Request": "true"})
    assert page.status_code == 400 and words in page.content.decode()
    api = alice_client.put(
        f"/api/matrices/{matrix.uuid}/schedule/",
        {k: v for k, v in data.items()},
        content_type="application/json",
    )
    assert api.status_code == 400, api.content
    assert not MatrixSchedule.objects.exists()


def test_the_api_sets_reads_and_removes_a_schedule(alice_client, matrix):
    url = f"/api/matrices/{matrix.uuid}/schedule/"
    assert alice_client.get(url).status_code == 404
    answer = alice_client.put(
        url, {"every_s": 3600, "enabled": False}, content_type="application/json"
    )
    assert answer.status_code == 200
    assert answer.json() == {
        "cron": "",
        "every_s": 3600,
        "enabled": False,
        "deadline_s": 21600,
        "firings": [],
    }
    bad = alice_client.put(url, {"cron": "* * * 13 *"}, content_type="application/json")
    assert bad.status_code == 400 and "cron" in bad.json()
    assert alice_client.get(url).json()["every_s"] == 3600
    assert alice_client.delete(url).status_code == 204
    assert not MatrixSchedule.objects.exists()


def test_bob_can_neither_see_nor_change_alices_schedule(bob_client, matrix, schedule):
    page = bob_client.get(matrix.get_absolute_url()).content.decode()
    assert 'id="schedule-form"' not in page and "30 2 * * *" not in page
    assert bob_client.get(schedule_url(matrix)).status_code == 403
    post = bob_client.post(schedule_url(matrix), {"cron": "* * * * *", "deadline_s": "60"})
    assert post.status_code == 403
    assert bob_client.post(schedule_url(matrix), {"delete": "1"}).status_code == 403
    url = f"/api/matrices/{matrix.uuid}/schedule/"
    assert bob_client.get(url).status_code == 403
    put = bob_client.put(url, {"every_s": 10}, content_type="application/json")
    assert put.status_code == 403
    assert bob_client.delete(url).status_code == 403
    schedule.refresh_from_db()
    assert schedule.cron == "30 2 * * *" and schedule.enabled


def test_anonymous_visitors_get_nothing(client, matrix, schedule):
    for path in (schedule_url(matrix), reverse("experiments:alert_list"),
                 reverse("experiments:subscription_list")):  # fmt: skip
        answer = client.get(path)
        assert answer.status_code == 302 and "/login" in answer["Location"]
    for path in (f"/api/matrices/{matrix.uuid}/schedule/", "/api/subscriptions/", "/api/alerts/"):
        assert client.get(path).status_code in (401, 403)


def test_bob_cannot_subscribe_to_alices_testbed_or_matrix(bob, bob_client, matrix, bench):
    url = reverse("experiments:subscription_list")
    for data in ({"testbed": str(bench.uuid)}, {"matrix": str(matrix.uuid)}):
        page = bob_client.post(url, {**data, "email": "bob@example.org"})
        assert page.status_code == 400
        assert "Select a valid choice" in page.content.decode()
        api = bob_client.post(
            "/api/subscriptions/", {**data, "email": "bob@example.org"},
            content_type="application/json",
        )  # fmt: skip
        assert api.status_code == 403 and "cannot subscribe" in api.json()["detail"]
    assert not Subscription.objects.exists()
    # alice makes bob an operator of her testbed: he may subscribe to it, and to her matrix
    # (he operates every testbed it names).
    bench.operators.add(bob)
    for data in ({"testbed": str(bench.uuid)}, {"matrix": str(matrix.uuid)}):
        api = bob_client.post(
            "/api/subscriptions/", {**data, "webhook_url": "https://hooks.example.org/b"},
            content_type="application/json",
        )  # fmt: skip
        assert api.status_code == 201, api.content
    assert Subscription.objects.filter(user=bob).count() == 2


def test_bob_cannot_see_or_delete_alices_subscriptions_or_alerts(
    alice, alice_client, bob_client, bench, matrix
):
    sub = Subscription.objects.create(
        user=alice, testbed=bench, webhook_url="https://hooks.example.org/alice"
    )
    notify("k", "schedule.not_run", matrix=matrix, subject="alice secret alert", text="t",
           data={})  # fmt: skip
    assert Alert.objects.get().deliveries.count() == 1
    page = bob_client.get(reverse("experiments:subscription_list")).content.decode()
    assert sub.secret not in page and "hooks.example.org/alice" not in page
    delete = reverse("experiments:subscription_delete", args=[sub.uuid])
    assert bob_client.post(delete).status_code == 404
    assert bob_client.get(f"/api/subscriptions/{sub.uuid}/").status_code == 404
    assert bob_client.delete(f"/api/subscriptions/{sub.uuid}/").status_code == 404
    assert bob_client.get("/api/subscriptions/").json()["results"] == []
    assert Subscription.objects.filter(pk=sub.pk).exists()
    assert (
        "alice secret alert"
        not in bob_client.get(reverse("experiments:alert_list")).content.decode()
    )
    assert bob_client.get("/api/alerts/").json()["results"] == []
    # alice sees hers, with the delivery's status.
    page = alice_client.get(reverse("experiments:alert_list")).content.decode()
    assert "alice secret alert" in page and "pending" in page
    (mine,) = alice_client.get("/api/alerts/").json()["results"]
    assert mine["deliveries"][0]["target"] == "https://hooks.example.org/alice"
    assert sub.secret in alice_client.get(reverse("experiments:subscription_list")).content.decode()


@pytest.mark.parametrize(
    "url",
    ["ftp://example.org/x", "javascript:alert(1)", "file:///etc/passwd", "http://", "x" * 600,
     "http://exa mple.org/"],
)  # fmt: skip
def test_a_webhook_url_must_be_http_or_https(alice_client, bench, url):
    page = alice_client.post(
        reverse("experiments:subscription_list"), {"testbed": str(bench.uuid), "webhook_url": url}
    )
    assert page.status_code == 400
    api = alice_client.post(
        "/api/subscriptions/", {"testbed": str(bench.uuid), "webhook_url": url},
        content_type="application/json",
    )  # fmt: skip
    assert api.status_code == 400, api.content
    assert not Subscription.objects.exists()


def test_a_subscription_needs_one_subject_and_a_channel(alice_client, bench, matrix):
    url = "/api/subscriptions/"
    for data in (
        {"email": "a@example.org"},
        {"testbed": str(bench.uuid), "matrix": str(matrix.uuid), "email": "a@example.org"},
        {"testbed": str(bench.uuid)},
        {"testbed": "not-a-uuid", "email": "a@example.org"},
        {"testbed": str(bench.uuid), "email": "not an address"},
    ):
        assert alice_client.post(url, data, content_type="application/json").status_code == 400
    assert not Subscription.objects.exists()
    signed_out = Client()
    assert signed_out.post(url, {"testbed": str(bench.uuid)}).status_code in (401, 403)
