"""Issue 29 end to end: a scheduled fio matrix on the localhost testbed fires again and again
(beat with django-celery-beat's database scheduler, real workers); halfway, the tuning set it
applies is edited (the device's read-ahead cut to nothing). Beat's detection sweep finds the
change point at the first run under the new tuning and announces it by e-mail to a real SMTP
server and by a signed webhook to a real HTTP server, both started here and both naming what
changed; once it is acknowledged, later firings and sweeps alert it no more."""

from __future__ import annotations

import shutil
import socket
import time

import pytest

from tests.helpers.changes import READ_MATRIX, change_points
from tests.helpers.receivers import SmtpReceiver, WebhookReceiver
from tests.labs import wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed"),
]
HOST = socket.gethostname()
EVERY_S = 10


def finished_firings(stack) -> list[tuple]:
    """(id, succeeded, failed) of every launched firing whose runs have all ended."""
    return stack.sql(
        "SELECT id, succeeded, failed FROM experiments_schedulefiring "
        "WHERE outcome = 'launched' AND finished_at IS NOT NULL ORDER BY fired_at, id"
    )


def set_schedule(stack, matrix: str, enabled: bool) -> None:
    data = {"every_s": str(EVERY_S), "deadline_s": "900"}
    if enabled:
        data["enabled"] = "on"
    status, body, _ = stack.call("post", "admin", f"/matrices/{matrix}/schedule/", data)
    assert status == 302, body


def fire(stack, matrix: str, firings: int, logs) -> None:
    """Enable the schedule until ``firings`` launched firings in all have finished, then
    pause it and wait for a firing already on its way to end too."""
    set_schedule(stack, matrix, enabled=True)
    assert wait_for(lambda: len(finished_firings(stack)) >= firings, timeout=900, interval=1), (
        finished_firings(stack),
        logs(),
    )
    set_schedule(stack, matrix, enabled=False)
    time.sleep(2)  # a message beat sent just before the pause
    assert wait_for(
        lambda: (
            not stack.sql(
                "SELECT 1 FROM experiments_run WHERE status IN ('planned', 'queued', 'running')"
            )
        ),
        timeout=600,
        interval=1,
    ), logs()


def change_alerts(hook: WebhookReceiver, smtp: SmtpReceiver) -> tuple[list, list]:
    hooks = [r for r in hook.received if r.json.get("kind") == "change_point"]
    mails = [m for m in smtp.messages if str(m["X-Beeweb-Alert"]).startswith("change:")]
    return hooks, mails


def test_a_tuning_edit_between_scheduled_firings_is_alerted_once(localhost_stack, read_ahead):
    stack = localhost_stack
    path, before = read_ahead
    with SmtpReceiver() as smtp, WebhookReceiver() as hook:
        stack.env.update(
            {
                "BEEWEB_SCHEDULE_CHECK_SECONDS": "2",
                "BEEWEB_CHANGES_SECONDS": "3",
                "BEEWEB_WEBHOOK_ALLOW_PRIVATE": "true",
                "BEEWEB_ALERT_RETRY_SECONDS": "1",
                "EMAIL_HOST": "127.0.0.1",
                "EMAIL_PORT": str(smtp.port),
            }
        )
        stack.shell(
            "from django.contrib.auth import get_user_model\n"
            "from experiments.models import TuningSet\n"
            "owner = get_user_model().objects.get(is_superuser=True)\n"
            "TuningSet.objects.create(owner=owner, name='nightly')"
            ".replace_params([('os', 'read_ahead_kb', '4096')])"
        )
        matrix = stack.call("matrix", "admin", READ_MATRIX)
        status, body, _ = stack.call(
            "post",
            "admin",
            "/alerts/subscriptions/",
            {"matrix": matrix, "email": "ops@example.org", "webhook_url": hook.url},
        )
        assert status == 302, body
        secret = stack.sql("SELECT secret FROM experiments_subscription")[0][0]
        stack.worker(f"node.{HOST}", f"node@{HOST}", env={"BEEWEB_NODE_TUNING": "os.read_ahead_kb"})
        stack.worker("default", f"default@{HOST}")
        stack.beat()

        def logs() -> str:
            return (
                stack.worker_log("beat")[-2000:]
                + stack.worker_log(f"default@{HOST}")[-3000:]
                + stack.worker_log(f"node@{HOST}")[-3000:]
            )

        # Two firings under read-ahead 4096, the edit, two firings under 0.
        fire(stack, matrix, 2, logs)
        assert not change_points(stack), "no change point in the runs before the edit"
        # (A firing beat sent just before the pause ran under the old tuning too.)
        edited_after = len(finished_firings(stack))
        stack.shell(
            "from experiments.models import TuningSet\n"
            "TuningSet.objects.get(name='nightly').replace_params([('os', 'read_ahead_kb', '0')])"
        )
        fire(stack, matrix, edited_after + 2, logs)
        assert path.read_text().strip() == before, "the read-ahead is restored after every run"
        runs = stack.sql(
            "SELECT r.uuid::text FROM experiments_run r WHERE r.status = 'succeeded' "
            "ORDER BY r.started_at"
        )
        assert len(runs) >= 16, runs
        firings = finished_firings(stack)
        assert all(f[2] == 0 for f in firings), firings
        first_after = stack.sql(
            "SELECT r.uuid::text FROM experiments_run r JOIN experiments_schedulefiring f "
            "ON r.repetition BETWEEN f.first_repetition AND f.last_repetition "
            f"WHERE f.id = {firings[edited_after][0]} "
            "ORDER BY r.started_at LIMIT 1"
        )[0][0]

        # Beat's sweep finds it at the first run under the new tuning and announces it.
        def announced() -> bool:
            hooks, mails = change_alerts(hook, smtp)
            return bool(hooks and mails)

        assert wait_for(announced, timeout=300, interval=1), (change_points(stack), logs())
        (cp,) = [c for c in change_points(stack) if c["metric"] == "read_bw"]
        assert cp["run"] == first_after, (cp, runs)
        assert cp["after"]["mean"] < cp["before"]["mean"]
        hooks, mails = change_alerts(hook, smtp)
        read_bw = [r for r in hooks if r.json["data"]["metric"] == "read_bw"]
        assert len(read_bw) == 1, [r.json["subject"] for r in hooks]
        (received,) = read_bw
        assert WebhookReceiver.signed(received, secret)
        payload = received.json
        assert payload["version"] == 1 and payload["key"] == f"change:{cp['id']}"
        assert payload["matrix"]["uuid"] == matrix
        assert payload["data"]["run"] == first_after
        whats = {i["what"] for i in payload["data"]["differences"]["items"]}
        assert "os.read_ahead_kb" in whats, payload["data"]["differences"]
        (mail,) = [m for m in mails if m["X-Beeweb-Alert"] == f"change:{cp['id']}"]
        text = SmtpReceiver.text(mail)
        assert "read_ahead_kb" in text and "4096" in text, text
        assert "read_bw" in mail["Subject"], mail["Subject"]

        # Acknowledged: the firings and sweeps after it do not alert it again.
        status, body, _ = stack.call(
            "post", "admin", f"/changes/{cp['id']}/state/", {"state": "acknowledged", "note": "ra"}
        )
        assert status == 302, body
        alerted = [len(x) for x in change_alerts(hook, smtp)]
        count = len(finished_firings(stack))
        fire(stack, matrix, count + 1, logs)
        n_runs = stack.sql("SELECT count(*) FROM experiments_run WHERE status = 'succeeded'")[0][0]
        # The sweep has analysed every run: its watermark holds the configuration's run count.
        assert wait_for(
            lambda: (
                stack.sql(
                    "SELECT n FROM experiments_changescan "
                    "WHERE metric = 'read_bw' AND config_key <> ''"
                )
                == [(n_runs,)]
            ),
            timeout=120,
            interval=1,
        ), stack.sql("SELECT config_key, metric, n FROM experiments_changescan")
        time.sleep(5)  # a delivery queued by that sweep would have arrived
        # The acknowledged change is found again at its run, still acknowledged, and is not
        # announced again. The firing after it may hold a change of its own (a busy machine
        # reads slower for a while; that is a new change, at another run, with its own alert):
        # the claim here is only that this one is not repeated.
        points = [c for c in change_points(stack) if c["metric"] == "read_bw"]
        (after,) = [c for c in points if c["id"] == cp["id"]]
        assert after["state"] == "acknowledged", after
        assert not [c for c in points if c["run"] == first_after and c["id"] != cp["id"]], points
        # (Other metrics' change points, at the edit or later, are alerted on their own.)
        others = {f"change:{c['id']}" for c in change_points(stack) if c["id"] != cp["id"]}
        hooks, mails = change_alerts(hook, smtp)
        key = f"change:{cp['id']}"
        assert [r.json["key"] for r in hooks].count(key) == 1, [r.json["key"] for r in hooks]
        assert [str(m["X-Beeweb-Alert"]) for m in mails].count(key) == 1
        new_keys = {r.json["key"] for r in hooks[alerted[0] :]}
        new_keys |= {str(m["X-Beeweb-Alert"]) for m in mails[alerted[1] :]}
        assert new_keys <= others, (new_keys, points)
    print(
        f"\nchange point at run {cp['run']}: read_bw {cp['before']['mean'] / 1e6:.0f} → "
        f"{cp['after']['mean'] / 1e6:.0f} MB/s, p {cp['p_value']}; "
        f"{len(finished_firings(stack))} firings"
    )
