"""End to end: a scheduled fio matrix on the localhost testbed fires for real (beat with
django-celery-beat's database scheduler, a default worker, the node's worker), each firing a
new launch of the same cells whose runs succeed; a firing while the testbed's node is held by
another run is recorded as not run and alerted by e-mail to a real SMTP server and by a signed
webhook to a real HTTP server, both started here, and so is every firing of a matrix whose
testbed's node has no worker; a paused schedule fires no more."""

from __future__ import annotations

import shutil
import socket
import time

import pytest

from tests.helpers.receivers import SmtpReceiver, WebhookReceiver
from tests.labs import LONG_FIO, Stack, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed"),
]
HOST = socket.gethostname()
EVERY_S = 10

FIO = """\
name: scheduled fio
tool: fio
testbeds: [localhost]
repetitions: 1
drop_caches: false
timeout_s: 300
params: {rw: write, size: 4m, bs: 1m}
axes:
  numjobs: [1, 2]
"""


# The same matrix on a testbed whose only node has no worker at all.
OFFLINE = FIO.replace("name: scheduled fio", "name: offline fio").replace(
    "testbeds: [localhost]", "testbeds: [offline]"
)


def firings(stack, matrix: str = "scheduled fio") -> list[tuple]:
    return stack.sql(
        "SELECT f.id, f.outcome, f.reason, f.runs, f.first_repetition, f.last_repetition, "
        "f.finished_at IS NOT NULL, f.succeeded, f.failed FROM experiments_schedulefiring f "
        "JOIN experiments_matrixschedule s ON f.schedule_id = s.id "
        f"JOIN experiments_matrix m ON s.matrix_id = m.id WHERE m.name = '{matrix}' "
        "ORDER BY f.fired_at, f.id"
    )


def schedule(stack, matrix: str, enabled: bool = True) -> None:
    data = {"every_s": str(EVERY_S), "deadline_s": "600"}
    status, body, _ = stack.call(
        "post", "admin", f"/matrices/{matrix}/schedule/", {**data, "enabled": "on"} if enabled
        else data
    )  # fmt: skip
    assert status == 302, body


@pytest.fixture(params=["production", "embedded"])
def stack(request, tmp_path):
    """PostgreSQL and Redis (as the environment names them), then the embedded default:
    SQLite and the filesystem broker, which beat's database scheduler shares with the web
    and the workers."""
    stack = Stack(tmp_path, embedded=request.param == "embedded")
    try:
        stack.manage("ensure_localhost")
        yield stack
    finally:
        stack.close()


def test_a_scheduled_fio_matrix_fires_again_and_again(stack):
    with SmtpReceiver() as smtp, WebhookReceiver() as hook:
        stack.env.update(
            {
                "BEEWEB_SCHEDULE_CHECK_SECONDS": "2",
                "BEEWEB_SCHEDULE_HOLD_WAIT_SECONDS": "3",
                "BEEWEB_WEBHOOK_ALLOW_PRIVATE": "true",
                "BEEWEB_ALERT_RETRY_SECONDS": "1",
                "EMAIL_HOST": "127.0.0.1",
                "EMAIL_PORT": str(smtp.port),
            }
        )
        stack.call(
            "inventory",
            {
                "nodes": {"offline-node": {"owner": "admin"}},
                "testbeds": [
                    {"name": "offline", "owner": "admin", "benchmark_dir": "/tmp/offline",
                     "members": {"offline-node": ["client"]}}
                ],
            },
        )  # fmt: skip
        matrix = stack.call("matrix", "admin", FIO)
        offline = stack.call("matrix", "admin", OFFLINE)
        for which in (matrix, offline):
            schedule(stack, which)
            status, body, _ = stack.call(
                "post",
                "admin",
                "/alerts/subscriptions/",
                {"matrix": which, "email": "ops@example.org", "webhook_url": hook.url},
            )
            assert status == 302, body
        secret = stack.sql("SELECT secret FROM experiments_subscription ORDER BY id")[0][0]
        stack.worker(f"node.{HOST}", f"node@{HOST}")
        stack.worker("default", f"default@{HOST}")
        stack.beat()

        def done() -> list[tuple]:
            return [f for f in firings(stack) if f[1] == "launched" and f[6]]

        def logs() -> str:
            beat = stack.worker_log("beat")[-2000:]
            return beat + stack.worker_log(f"default@{HOST}")[-3000:]

        assert wait_for(lambda: len(done()) >= 3, timeout=900, interval=1), (
            firings(stack),
            logs(),
        )
        # The testbed without a worker: its firings are not run, and alerted.
        missing = [f for f in firings(stack, "offline fio") if "no worker online" in f[2]]
        assert missing and missing[0][1] == "not_run", firings(stack, "offline fio")
        assert "nobody serves queue node.offline-node" in missing[0][2]
        key = f"firing:{missing[0][0]}:not_run"
        assert wait_for(lambda: any(r.json.get("key") == key for r in hook.received), 120)
        schedule(stack, offline, enabled=False)
        launched = done()[:3]
        # Each firing a new launch of both cells, numbered after the last, all succeeded.
        assert [(f[4], f[5]) for f in launched] == [(1, 1), (2, 2), (3, 3)]
        assert all(f[3] == 2 and f[7] == 2 and f[8] == 0 for f in launched), launched
        rows = stack.sql(
            "SELECT repetition, cell_key, status FROM experiments_run "
            "WHERE repetition <= 3 ORDER BY repetition, cell_key"
        )
        assert len(rows) == 6 and {r[2] for r in rows} == {"succeeded"}
        assert {r[1] for r in rows if r[0] == 1} == {r[1] for r in rows if r[0] == 3}

        # The node held by another run (a long fio of the same owner): the firing waits its
        # 3 s, then is recorded as not run and alerted.
        (long_matrix,) = stack.call("launch", [["admin", LONG_FIO]])
        assert wait_for(
            lambda: any("nodes held too long" in f[2] for f in firings(stack)),
            timeout=600,
            interval=1,
        ), (firings(stack), logs())
        held = next(f for f in firings(stack) if "nodes held too long" in f[2])
        assert held[1] == "not_run" and f"{HOST} held by run" in held[2]
        key = f"firing:{held[0]}:not_run"
        # On the embedded default one default worker runs the firings (each waiting for the
        # held nodes) and the deliveries, in turn: on a busy machine that takes minutes.
        assert wait_for(
            lambda: any(r.json.get("key") == key for r in hook.received), timeout=400
        ), ([r.json.get("key") for r in hook.received], logs())
        received = next(r for r in hook.received if r.json.get("key") == key)
        assert WebhookReceiver.signed(received, secret)
        assert received.json["version"] == 1 and received.json["kind"] == "schedule.not_run"
        assert received.json["matrix"]["uuid"] == matrix
        assert "nodes held too long" in received.json["data"]["reason"]
        assert wait_for(lambda: any(m["X-Beeweb-Alert"] == key for m in smtp.messages), timeout=400)
        mail = next(m for m in smtp.messages if m["X-Beeweb-Alert"] == key)
        assert "could not run: nodes held too long" in SmtpReceiver.text(mail)
        assert stack.sql(
            f"SELECT status FROM experiments_delivery d JOIN experiments_alert a "
            f"ON d.alert_id = a.id WHERE a.key = '{key}'"
        ) == [("sent",), ("sent",)]
        stack.call("cancel", long_matrix)

        # Paused: no firing more (one already on its way may still land).
        schedule(stack, matrix, enabled=False)
        time.sleep(EVERY_S)
        before = len(firings(stack))
        time.sleep(3 * EVERY_S)
        assert len(firings(stack)) == before, firings(stack)
