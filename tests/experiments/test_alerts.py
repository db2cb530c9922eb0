"""Alerts (experiments.alerts): notify records an alert once per key and delivers it to a real
SMTP server and a real webhook receiver started by the test, signed with the subscription's
secret; a failing webhook is retried, then recorded as failed; only those who may subscribe
are told."""

from __future__ import annotations

import pytest

from experiments.alerts import notify, tasks
from experiments.models import Alert, Delivery, Matrix, Subscription, Testbed
from tests.helpers.receivers import SmtpReceiver, WebhookReceiver


@pytest.fixture
def mail(settings):
    with SmtpReceiver() as smtp:
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST = "127.0.0.1"
        settings.EMAIL_PORT = smtp.port
        settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
        settings.WEBHOOK_ALLOW_PRIVATE = True
        settings.ALERT_RETRY_SECONDS = 0
        yield smtp


@pytest.fixture
def testbed(alice):
    return Testbed.objects.create(owner=alice, name="lab")


def deliver_all(alert: Alert) -> list[str]:
    """Each delivery of the alert sent as its Celery task does (in this process; a retry runs
    again at once)."""
    return [tasks.deliver.apply(args=[d.pk]).get() for d in alert.deliveries.order_by("pk")]


def test_it_delivers_an_email_and_a_signed_webhook(alice, testbed, mail, settings):
    settings.BASE_URL = "https://beeweb.example.org"
    with WebhookReceiver() as hook:
        sub = Subscription.objects.create(
            user=alice, testbed=testbed, email="alice@example.org", webhook_url=hook.url
        )
        data = {"metric": "write_bw", "before": {"mean": 1.0e9, "n": 5}, "state": "new"}
        alert = notify(
            "change:1",
            "change_point",
            testbed=testbed,
            subject="write_bw fell 30% on lab",
            text="write_bw fell from 1.0 GB/s to 0.7 GB/s: tuning set base → slow",
            data=data,
        )
        assert alert is not None and alert.deliveries.count() == 2
        assert deliver_all(alert) == ["sent", "sent"]
        (message,) = mail.wait(1)
        assert mail.envelopes[0][1] == ["alice@example.org"]
        assert message["Subject"] == "[beeweb] write_bw fell 30% on lab"
        assert message["X-Beeweb-Alert"] == "change:1"
        assert "tuning set base → slow" in SmtpReceiver.text(message)
        (received,) = hook.wait(1)
        assert WebhookReceiver.signed(received, sub.secret)
        assert not WebhookReceiver.signed(received, "another secret")
        assert received.headers["X-Beeweb-Event"] == "change_point"
        body = received.json
        assert body["version"] == 1 and body["key"] == "change:1"
        assert body["kind"] == "change_point" and body["data"] == data
        assert body["testbed"]["name"] == "lab"
        assert body["testbed"]["url"].startswith("https://beeweb.example.org/testbeds/")
        assert body["matrix"] is None
    statuses = set(alert.deliveries.values_list("status", "attempts"))
    assert statuses == {("sent", 1)}


def test_the_same_key_is_never_delivered_twice(alice, testbed, mail):
    Subscription.objects.create(user=alice, testbed=testbed, email="alice@example.org")
    first = notify("firing:7:not_run", "schedule.not_run", testbed=testbed, subject="s",
                   text="t", data={})  # fmt: skip
    again = notify("firing:7:not_run", "schedule.not_run", testbed=testbed, subject="s",
                   text="t", data={})  # fmt: skip
    assert first is not None and again is None
    assert Alert.objects.count() == 1 and Delivery.objects.count() == 1
    deliver_all(first)
    # A second run of the task (a duplicate message) sends nothing more.
    assert deliver_all(first) == ["skip"]
    assert len(mail.wait(1)) == 1


def test_a_failing_webhook_is_retried_then_recorded_as_failed(alice, testbed, mail, settings):
    settings.ALERT_MAX_ATTEMPTS = 3
    with WebhookReceiver(statuses=[500] * 10) as hook:
        Subscription.objects.create(user=alice, testbed=testbed, webhook_url=hook.url)
        alert = notify("k", "schedule.not_run", testbed=testbed, subject="s", text="t", data={})
        assert deliver_all(alert) == ["failed"]
        assert len(hook.received) == 3
    delivery = alert.deliveries.get()
    assert (delivery.status, delivery.attempts) == ("failed", 3)
    assert "HTTP 500" in delivery.last_error and "receiver says no" in delivery.last_error


def test_a_webhook_that_recovers_is_sent_on_a_retry(alice, testbed, mail):
    with WebhookReceiver(statuses=[503]) as hook:
        Subscription.objects.create(user=alice, testbed=testbed, webhook_url=hook.url)
        alert = notify("k", "schedule.not_run", testbed=testbed, subject="s", text="t", data={})
        assert deliver_all(alert) == ["sent"]
        assert len(hook.received) == 2
    assert alert.deliveries.get().attempts == 2


def test_an_unreachable_smtp_server_fails_without_raising(alice, testbed, settings):
    from tests.helpers.receivers import free_port

    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", free_port()
    settings.ALERT_MAX_ATTEMPTS, settings.ALERT_RETRY_SECONDS = 2, 0
    Subscription.objects.create(user=alice, testbed=testbed, email="alice@example.org")
    alert = notify("k", "kind", testbed=testbed, subject="s", text="t", data={})
    assert deliver_all(alert) == ["failed"]
    delivery = alert.deliveries.get()
    assert delivery.attempts == 2 and "Connection refused" in delivery.last_error


def test_a_private_webhook_address_is_refused_by_default(alice, testbed, settings):
    settings.WEBHOOK_ALLOW_PRIVATE = False
    with WebhookReceiver() as hook:
        Subscription.objects.create(user=alice, testbed=testbed, webhook_url=hook.url)
        alert = notify("k", "kind", testbed=testbed, subject="s", text="t", data={})
        assert deliver_all(alert) == ["failed"]
        assert hook.received == []
    delivery = alert.deliveries.get()
    assert delivery.attempts == 1 and "loopback, private or reserved" in delivery.last_error


def test_only_those_who_may_subscribe_are_told(alice, bob, testbed, mail):
    """bob subscribed while an operator; once no longer one, his subscription is skipped.
    A matrix's alert reaches its own subscribers and those of its testbeds."""
    testbed.operators.add(bob)
    Subscription.objects.create(user=bob, testbed=testbed, email="bob@example.org")
    Subscription.objects.create(user=alice, testbed=testbed, email="alice@example.org")
    matrix = Matrix.objects.create(owner=alice, name="m", tool="fio")
    matrix.testbeds.set([testbed])
    Subscription.objects.create(user=alice, matrix=matrix, email="ALICE@example.org")
    alert = notify("one", "kind", matrix=matrix, subject="s", text="t", data={})
    # alice's two subscriptions name the same address: one e-mail.
    assert sorted(alert.deliveries.values_list("target", flat=True)) == [
        "alice@example.org",
        "bob@example.org",
    ]
    testbed.operators.remove(bob)
    alert = notify("two", "kind", testbed=testbed, subject="s", text="t", data={})
    assert list(alert.deliveries.values_list("target", flat=True)) == ["alice@example.org"]


def test_notify_refuses_what_json_cannot_carry(alice, testbed):
    with pytest.raises(ValueError):
        notify("k", "kind", testbed=testbed, subject="s", text="t", data={"x": float("nan")})
    with pytest.raises(ValueError):
        notify("", "kind", testbed=testbed, subject="s", text="t", data={})
    assert not Alert.objects.exists()


def test_the_subscriptions_page_subscribes_and_unsubscribes(alice, alice_client, testbed):
    from django.urls import reverse

    alice.email = "alice@example.org"
    alice.save()
    url = reverse("experiments:subscription_list")
    page = alice_client.get(f"{url}?testbed={testbed.uuid}").content.decode()
    assert f'<option value="{testbed.uuid}" selected>' in page and "alice@example.org" in page
    assert alice_client.get(f"{url}?testbed=<script>").status_code == 200
    answer = alice_client.post(
        url, {"testbed": str(testbed.uuid), "webhook_url": "https://hooks.example.org/x"}
    )
    assert answer.status_code == 302
    sub = Subscription.objects.get()
    assert answer.has_header("Location")
    page = alice_client.get(url)
    assert sub.secret in page.content.decode() and "no-store" in page["Cache-Control"]
    alice_client.post(reverse("experiments:subscription_delete", args=[sub.uuid]))
    assert not Subscription.objects.exists()


def test_the_alerts_page_costs_the_same_for_many_alerts(
    alice, alice_client, testbed, django_assert_max_num_queries
):
    from django.urls import reverse

    Subscription.objects.create(user=alice, testbed=testbed, email="alice@example.org",
                                webhook_url="https://hooks.example.org/a")  # fmt: skip
    for i in range(30):
        notify(f"k{i}", "kind", testbed=testbed, subject=f"alert {i}", text="t", data={})
    with django_assert_max_num_queries(12):
        page = alice_client.get(reverse("experiments:alert_list")).content.decode()
    assert page.count("<tr>") == 31 and "alert 29" in page


def test_the_subscriptions_form_lists_the_newest_matrices_and_accepts_any_of_ones_own(
    alice, bob, alice_client, monkeypatch
):
    """A lab's thousands of matrices are not all options of the form (issue 30: 10,000 were
    2 s and 800 KB): the newest MATRIX_CHOICES and the chosen one are listed, the page says
    how many there are, and an older matrix of one's own is still accepted; another's never."""
    from django.urls import reverse

    from experiments.views import alerts

    monkeypatch.setattr(alerts, "MATRIX_CHOICES", 3)
    mine = [Matrix.objects.create(owner=alice, name=f"sweep {i}", tool="dd") for i in range(6)]
    theirs = Matrix.objects.create(owner=bob, name="bob's", tool="dd")
    url = reverse("experiments:subscription_list")
    page = alice_client.get(url).content.decode()
    assert {m.name for m in mine if f'value="{m.uuid}"' in page} == {
        "sweep 5",
        "sweep 4",
        "sweep 3",
    }
    assert "The newest 3 of the 6 matrices" in page and "bob&#x27;s" not in page
    page = alice_client.get(f"{url}?matrix={mine[0].uuid}").content.decode()
    assert f'<option value="{mine[0].uuid}" selected>' in page
    answer = alice_client.post(url, {"matrix": str(mine[0].uuid), "email": "a@example.org"})
    assert answer.status_code == 302
    assert Subscription.objects.get().matrix == mine[0]
    answer = alice_client.post(url, {"matrix": str(theirs.uuid), "email": "a@example.org"})
    assert answer.status_code == 400 and Subscription.objects.count() == 1
