"""Recovery without hands (issue 11, findings 6 and 8).

- Runs whose message the broker lost are sent again by the janitor: a Redis restarted in the
  middle of a matrix (a private redis-server, killed with SIGKILL, no persistence) and every
  run still finishes, with real workers and beat, without anyone pressing Resume.
- A launch while the broker is down answers with a clear error (web message, API 503) and
  leaves the runs planned.
- A cancel is final even while the worker is gone: the janitor never sends a run with a
  cancel request again, a cancel of a run whose worker stopped sending heartbeats is final at
  once, and a worker sweeps once as it starts (no beat needed).
- A matrix with queued or running runs cannot be deleted (409 / an error message); a worker
  whose run row disappears kills its tool and goes on with the next run.

The first half drives the code in-process; the second half (``slow``) real ``manage.py``,
Celery worker and beat subprocesses on the configured database and broker.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from unittest import mock

import pytest
from django.urls import reverse
from django.utils import timezone
from kombu.exceptions import OperationalError as KombuOperationalError

from experiments.execution import dispatch as dispatching
from experiments.execution import execute
from experiments.matrices.expansion import cancel_runs, expand, launch, rerun_failed
from experiments.models import Matrix, Run, Worker
from tests.labs import LONG_FIO, Stack, wait_for, wait_for_workers

HOST = socket.gethostname()
QUEUE = f"node.{HOST}"
needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")


# --- In-process ---------------------------------------------------------------------------


@pytest.fixture
def bench(executing_bench):
    return executing_bench


def make_matrix(owner, testbed, params=None, repetitions=1, tool="fio") -> Matrix:
    matrix = Matrix.objects.create(
        owner=owner,
        name="recovery",
        tool=tool,
        fixed_params=params or {"rw": "write", "size": "1m"},
        repetitions=repetitions,
        drop_caches=False,
    )
    matrix.testbeds.set([testbed])
    expand(matrix)
    return matrix


def online_worker(queue: str, started: timedelta = timedelta(hours=1)) -> Worker:
    now = timezone.now()
    return Worker.objects.create(
        name=f"w@{queue}", hostname="stor1", queues=[queue], started_at=now - started, last_seen=now
    )


@pytest.mark.django_db
def test_janitor_never_sends_a_run_with_a_cancel_request_again(alice, bench):
    run = make_matrix(alice, bench).runs.get()
    old = timezone.now() - timedelta(minutes=10)
    Run.objects.filter(pk=run.pk).update(
        status="running", attempts=1, heartbeat_at=old, worker="gone@stor1", cancel_requested=True
    )
    with mock.patch("experiments.execution.tasks.execute_run.apply_async") as send:
        counts = dispatching.janitor()
    assert counts == {"requeued": 0, "failed": 0, "cancelled": 1, "redispatched": 0}
    send.assert_not_called()
    run.refresh_from_db()
    assert run.status == "cancelled" and run.dispatch_token is None
    assert "cancelled as requested, not run again" in run.error


@pytest.mark.django_db
def test_cancel_of_a_run_whose_worker_is_gone_is_final_at_once(alice, bench, settings):
    settings.RUN_STALE_SECONDS = 60
    gone, alive = make_matrix(alice, bench, repetitions=2).runs.order_by("repetition")
    Run.objects.filter(pk=gone.pk).update(
        status="running", heartbeat_at=timezone.now() - timedelta(minutes=5)
    )
    Run.objects.filter(pk=alive.pk).update(status="running", heartbeat_at=timezone.now())
    assert cancel_runs(Run.objects.all()) == {"cancelled": 1, "stopping": 1}
    gone.refresh_from_db()
    alive.refresh_from_db()
    assert gone.status == "cancelled" and "worker was gone" in gone.error
    assert alive.status == "running" and alive.cancel_requested  # its worker stops it
    # A worker restarted under the same name finds the cancel request at once.
    Run.objects.filter(pk=alive.pk).update(worker="node@stor1")
    assert dispatching.janitor(restarted_worker="node@stor1")["cancelled"] == 1
    assert Run.objects.get(pk=alive.pk).status == "cancelled"


@pytest.mark.django_db
def test_restarted_worker_requeues_its_own_run_without_waiting_for_staleness(alice, bench):
    run = make_matrix(alice, bench).runs.get()
    Run.objects.filter(pk=run.pk).update(
        status="running", attempts=1, heartbeat_at=timezone.now(), worker="node@stor1"
    )
    with mock.patch("experiments.execution.tasks.execute_run.apply_async"):
        assert dispatching.janitor(restarted_worker="other@stor1")["requeued"] == 0
        assert dispatching.janitor(restarted_worker="node@stor1")["requeued"] == 1
    run.refresh_from_db()
    assert run.status == "queued" and "node@stor1 restarted during attempt 1" in run.error


@pytest.mark.django_db
def test_janitor_sends_again_runs_whose_message_was_lost(
    alice, alice_client, bench, settings, django_capture_on_commit_callbacks
):
    settings.RUN_REDISPATCH_SECONDS = 120
    matrix = make_matrix(alice, bench, repetitions=3)
    with mock.patch("experiments.execution.tasks.execute_run.apply_async"):
        dispatching.dispatch(list(matrix.runs.values_list("pk", flat=True)))
    queue = matrix.runs.first().queue
    long_ago = timezone.now() - timedelta(minutes=5)
    matrix.runs.update(queued_at=long_ago)
    tokens = dict(matrix.runs.values_list("pk", "dispatch_token"))

    def sweep() -> tuple[dict, list]:
        with (
            mock.patch("experiments.execution.tasks.execute_run.apply_async") as send,
            django_capture_on_commit_callbacks(execute=True),
        ):
            counts = dispatching.janitor()
        return counts, [c.kwargs["queue"] for c in send.call_args_list]

    # No worker online for the queue: its messages wait in the broker; nothing is sent.
    assert sweep() == ({"requeued": 0, "failed": 0, "cancelled": 0, "redispatched": 0}, [])
    # A worker that has just started may not have taken its first message yet.
    worker = online_worker(queue, started=timedelta(seconds=5))
    assert sweep()[0]["redispatched"] == 0
    # A worker online for long, busy with another run of the queue: the runs wait their turn.
    Worker.objects.filter(pk=worker.pk).update(started_at=long_ago)
    busy = make_matrix(alice, bench, params={"rw": "read", "size": "1m"}).runs.get()
    Run.objects.filter(pk=busy.pk).update(status="running", heartbeat_at=timezone.now())
    assert sweep()[0]["redispatched"] == 0
    # The same worker idle for longer than the threshold: the messages were lost.
    Run.objects.filter(pk=busy.pk).update(status="succeeded", heartbeat_at=long_ago)
    counts, queues = sweep()
    assert counts["redispatched"] == 3 and queues == [queue] * 3
    for run in matrix.runs.all():
        assert run.status == "queued" and run.dispatch_token != tokens[run.pk]
        assert run.launch["redispatched"]["count"] == 1
    # At most once per threshold: the next sweep sends nothing.
    assert sweep()[0]["redispatched"] == 0
    page = alice_client.get(matrix.runs.first().get_absolute_url()).content.decode()
    assert "the janitor sent it again 1 time" in page
    # Disabled with 0.
    matrix.runs.update(queued_at=long_ago)
    settings.RUN_REDISPATCH_SECONDS = 0
    assert sweep()[0]["redispatched"] == 0


def _broker_down(*args, **kwargs):
    raise KombuOperationalError("Error 111 connecting to 127.0.0.1:1. Connection refused.")


@pytest.mark.django_db(transaction=True)
def test_launch_while_the_broker_is_down_leaves_runs_planned(alice, alice_client, bench):
    matrix = make_matrix(alice, bench, repetitions=2)
    with mock.patch(
        "experiments.execution.tasks.execute_run.apply_async", side_effect=_broker_down
    ):
        page = alice_client.post(
            reverse("experiments:matrix_launch", args=[matrix.uuid]), follow=True
        )
        api = alice_client.post(f"/api/matrices/{matrix.uuid}/launch/")
    assert page.status_code == 200
    assert "message broker is unreachable" in page.content.decode()
    assert api.status_code == 503 and "broker is unreachable" in api.json()["detail"]
    assert set(matrix.runs.values_list("status", flat=True)) == {"planned"}
    assert set(matrix.runs.values_list("dispatch_token", flat=True)) == {None}
    # Re-run keeps failed runs failed when nothing could be sent.
    matrix.runs.update(status="failed", error="fio exited with 1")
    with mock.patch(
        "experiments.execution.tasks.execute_run.apply_async", side_effect=_broker_down
    ):
        with pytest.raises(dispatching.BrokerUnavailable, match="2 of 2 runs were not queued"):
            rerun_failed(matrix)
    assert set(matrix.runs.values_list("status", flat=True)) == {"failed"}
    # The broker back: the same launch sends them.
    matrix.runs.update(status="planned", error="")
    with mock.patch("experiments.execution.tasks.execute_run.apply_async") as send:
        assert alice_client.post(f"/api/matrices/{matrix.uuid}/launch/").status_code == 200
    assert send.call_count == 2
    assert set(matrix.runs.values_list("status", flat=True)) == {"queued"}


@pytest.mark.django_db(transaction=True)
def test_a_send_failing_half_way_unqueues_only_the_unsent_runs(alice, bench):
    matrix = make_matrix(alice, bench, repetitions=3)
    calls = []

    def flaky(*args, **kwargs):
        calls.append(kwargs)
        if len(calls) > 1:
            _broker_down()

    with mock.patch("experiments.execution.tasks.execute_run.apply_async", side_effect=flaky):
        with pytest.raises(dispatching.BrokerUnavailable) as caught:
            launch(matrix)
    assert (caught.value.unsent, caught.value.total) == (2, 3)
    assert sorted(matrix.runs.values_list("status", flat=True)) == ["planned", "planned", "queued"]


@pytest.mark.django_db
def test_matrix_with_active_runs_cannot_be_deleted(alice, alice_client, bench):
    matrix = make_matrix(alice, bench, repetitions=2)
    Run.objects.filter(pk=matrix.runs.first().pk).update(
        status="running", heartbeat_at=timezone.now()
    )
    api = alice_client.delete(f"/api/matrices/{matrix.uuid}/")
    assert api.status_code == 409 and "cancel them first" in api.json()["detail"]
    page = alice_client.post(
        reverse("experiments:matrix_delete", args=[matrix.uuid]), follow=True
    ).content.decode()
    assert "Not deleted" in page and "cancel them first" in page
    assert Matrix.objects.filter(pk=matrix.pk).exists()
    assert cancel_runs(matrix.runs.all()) == {"cancelled": 1, "stopping": 1}
    assert alice_client.delete(f"/api/matrices/{matrix.uuid}/").status_code == 409
    Run.objects.filter(matrix=matrix, status="running").update(status="cancelled")
    assert alice_client.delete(f"/api/matrices/{matrix.uuid}/").status_code == 204
    assert not Run.objects.filter(matrix_id=matrix.pk).exists()


@needs_fio
@pytest.mark.django_db(transaction=True)
def test_worker_kills_the_tool_when_its_run_is_deleted(alice, bench):
    matrix = make_matrix(
        alice, bench, params={"rw": "write", "size": "8m", "runtime": 60, "time_based": True}
    )
    run = matrix.runs.get()
    with mock.patch("experiments.execution.tasks.execute_run.apply_async"):
        dispatching.dispatch([run.pk])
    token = str(Run.objects.get(pk=run.pk).dispatch_token)
    result = {}

    def work() -> None:
        from django.db import connection

        try:
            result["status"] = execute.execute(run.pk, token, "w@test")
        except Exception as exc:  # the test reports it below
            result["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=work)
    thread.start()
    assert wait_for(lambda: Run.objects.filter(pk=run.pk, pid__isnull=False).exists(), 30)
    time.sleep(1)
    pid = Run.objects.get(pk=run.pk).pid
    Run.objects.filter(pk=run.pk).delete()  # e.g. by the admin, behind the janitor's back
    thread.join(timeout=30)
    assert not thread.is_alive() and "error" not in result, result
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    """Whether the process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


# --- Real workers, beat and brokers --------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Probe:
    """Reads the stack's database directly (a manage.py shell costs a second or two)."""

    def __init__(self, stack: Stack):
        self.stack = stack

    def rows(self, sql: str) -> list[tuple]:
        return self.stack.sql(sql)

    def statuses(self) -> list[str]:
        return [r[0] for r in self.rows("SELECT status FROM experiments_run ORDER BY id")]

    def run(self, *fields: str) -> tuple:
        return self.rows(f"SELECT {', '.join(fields)} FROM experiments_run ORDER BY id")[-1]


@pytest.fixture
def stack(tmp_path):
    s = Stack(tmp_path)
    s.env["BEEWEB_RUN_STALE_SECONDS"] = "3"
    s.call("inventory", {"users": {"alice": "alice-pw-recovery"}})
    s.manage("ensure_localhost", "--owner", "alice")
    yield s
    s.close()


def launch_file(stack: Stack, text: str) -> str:
    path = stack.tmp / f"matrix-{time.monotonic_ns()}.yaml"
    path.write_text(text)
    out = stack.manage("launch_matrix", str(path), "--owner", "alice").stdout
    return out.split("(", 1)[1].split(")", 1)[0]  # the matrix's uuid


def as_alice(stack: Stack, code: str, env: dict | None = None) -> dict:
    """Run ``code`` in a manage.py shell with ``web`` (a signed-in browser) and ``api``
    clients of alice; it sets ``out`` (printed as JSON)."""
    prelude = (
        "import json\n"
        "from django.contrib.auth import get_user_model\n"
        "from django.test import Client\n"
        "from rest_framework.test import APIClient\n"
        "from experiments.models import Matrix, Run\n"
        "alice = get_user_model().objects.get(username='alice')\n"
        "web = Client(); web.force_login(alice)\n"
        "api = APIClient(); api.force_authenticate(alice)\n"
        "out = {}\n"
    )
    text = stack.shell(prelude + code + "\nprint(json.dumps(out))", env=env)
    return json.loads(text.splitlines()[-1])


def fio_pids(stack: Stack) -> list[int]:
    out = subprocess.run(
        ["pgrep", "-f", f"fio.*{stack.env['BEEWEB_DATA_DIR']}"], capture_output=True, text=True
    ).stdout
    return [int(p) for p in out.split()]


@pytest.mark.slow
def test_launch_while_the_broker_is_down_answers_clearly_and_leaves_runs_planned(stack):
    """(b) The broker URL points at a port where nothing listens."""
    down = {"CELERY_BROKER_URL": f"redis://127.0.0.1:{free_port()}/0"}
    matrix = (
        "from experiments.matrices.files import from_yaml\n"
        "m = from_yaml('name: dd\\ntool: dd\\ntestbeds: [localhost]\\nrepetitions: 3\\n"
        "drop_caches: false\\nparams: {bs: 64k, count: 4}\\n', alice)\n"
    )
    started = time.monotonic()
    out = as_alice(
        stack,
        matrix + "r = web.post(f'/matrices/{m.uuid}/launch/', follow=True)\n"
        "out['web'] = [r.redirect_chain[0][1], r.status_code, r.content.decode()]\n"
        "a = api.post(f'/api/matrices/{m.uuid}/launch/')\n"
        "out['api'] = [a.status_code, a.json()]\n"
        "out['statuses'] = sorted(m.runs.values_list('status', flat=True))\n"
        "out['uuid'] = str(m.uuid)\n",
        env=down,
    )
    elapsed = time.monotonic() - started
    redirect, code, page = out["web"]
    assert (redirect, code) == (302, 200)
    assert "The message broker is unreachable" in page and "3 of 3 runs were not queued" in page
    assert out["api"][0] == 503 and "broker is unreachable" in out["api"][1]["detail"]
    assert out["statuses"] == ["planned"] * 3
    # With the broker back, the same matrix launches.
    back = as_alice(
        stack,
        f"m = Matrix.objects.get(uuid='{out['uuid']}')\n"
        "a = api.post(f'/api/matrices/{m.uuid}/launch/')\n"
        "out['api'] = [a.status_code, a.json()]\n"
        "out['statuses'] = sorted(m.runs.values_list('status', flat=True))\n",
    )
    assert back["api"][0] == 200 and back["api"][1]["queued"] == 3
    assert back["statuses"] == ["queued"] * 3
    # launch_matrix says so too, and keeps the matrix with its runs planned.
    path = stack.tmp / "dd-down.yaml"
    path.write_text("name: dd down\ntool: dd\ntestbeds: [localhost]\nrepetitions: 2\n")
    result = stack.manage("launch_matrix", str(path), "--owner", "alice", check=False, env=down)
    assert result.returncode == 3 and "broker is unreachable" in result.stderr, result.stderr
    assert sorted(Probe(stack).statuses()) == ["planned"] * 2 + ["queued"] * 3
    print(f"\nbroker down: web and API answered in {elapsed:.1f} s (one shell, two requests)")


@pytest.mark.slow
@needs_fio
def test_cancel_while_the_worker_is_dead_is_final(stack):
    """(c) No beat: a cancel made while the worker is dead holds when the worker comes back."""
    probe = Probe(stack)
    name = f"node@{HOST}"
    worker = stack.worker(QUEUE, name)
    launch_file(stack, LONG_FIO)
    assert wait_for(lambda: probe.statuses() == ["running"] and fio_pids(stack), 90), (
        stack.worker_log(name)[-3000:]
    )
    Stack.stop(worker, signal.SIGKILL)
    assert wait_for(lambda: not fio_pids(stack), 15), "fio outlived its worker"
    # Cancelled while the heartbeat still looks fresh (the web process's threshold is long):
    # only a request, and no worker left to act on it.
    out = as_alice(
        stack,
        "r = Run.objects.get()\nweb.post(f'/runs/{r.uuid}/cancel/')\n",
        env={"BEEWEB_RUN_STALE_SECONDS": "600"},
    )
    assert out == {} and probe.run("status", "cancel_requested")[0] == "running"
    # The same worker starts again (no beat): its start-up sweep finishes the cancel.
    stack.worker(QUEUE, name)
    assert wait_for(lambda: probe.statuses() == ["cancelled"], 60), stack.worker_log(name)[-3000:]
    time.sleep(4)
    status, attempts, error = probe.run("status", "attempts", "error")
    assert (status, attempts) == ("cancelled", 1) and "cancelled as requested" in error
    assert not fio_pids(stack)

    # Killed again, and cancelled once the heartbeat is stale: cancelled at once.
    launch_file(stack, LONG_FIO.replace("long fio", "long fio 2"))
    assert wait_for(lambda: probe.statuses()[-1] == "running" and fio_pids(stack), 90)
    for proc in stack.procs:
        if proc.poll() is None:
            Stack.stop(proc, signal.SIGKILL)
    time.sleep(4)  # BEEWEB_RUN_STALE_SECONDS=3
    out = as_alice(
        stack,
        "r = Run.objects.order_by('id').last()\n"
        "p = web.post(f'/runs/{r.uuid}/cancel/', follow=True)\n"
        "r.refresh_from_db()\nout['status'] = r.status\nout['page'] = p.content.decode()\n",
    )
    assert out["status"] == "cancelled" and "worker was gone" in out["page"]
    stack.worker(QUEUE, f"other@{HOST}")
    time.sleep(6)
    assert probe.run("status", "attempts") == ("cancelled", 1)
    assert not fio_pids(stack)


@pytest.mark.slow
@needs_fio
def test_a_running_matrix_cannot_be_deleted_and_a_deleted_run_stops_its_tool(stack):
    """(d) 409 from the API and an error on the page while fio runs; deletable once
    cancelled. A run row deleted behind the app's back: the worker kills fio, survives and
    runs the next run."""
    probe = Probe(stack)
    name = f"node@{HOST}"
    stack.worker(QUEUE, name)
    uuid = launch_file(stack, LONG_FIO)
    assert wait_for(lambda: probe.statuses() == ["running"] and fio_pids(stack), 90), (
        stack.worker_log(name)[-3000:]
    )
    out = as_alice(
        stack,
        f"m = Matrix.objects.get(uuid='{uuid}')\n"
        "a = api.delete(f'/api/matrices/{m.uuid}/')\n"
        "out['api'] = [a.status_code, a.json()]\n"
        "p = web.post(f'/matrices/{m.uuid}/delete/', follow=True)\n"
        "out['page'] = p.content.decode()\n"
        "out['exists'] = Matrix.objects.filter(pk=m.pk).exists()\n",
    )
    assert out["api"][0] == 409 and "cancel them first" in out["api"][1]["detail"]
    assert "Not deleted" in out["page"] and out["exists"]
    assert fio_pids(stack) and probe.statuses() == ["running"]
    as_alice(stack, f"web.post('/matrices/{uuid}/cancel/')\n")
    assert wait_for(lambda: probe.statuses() == ["cancelled"] and not fio_pids(stack), 30)
    out = as_alice(stack, f"out['code'] = api.delete('/api/matrices/{uuid}/').status_code\n")
    assert out["code"] == 204 and probe.statuses() == []

    # The row of a running run deleted directly: fio is killed, the worker takes the next run.
    launch_file(stack, LONG_FIO)
    assert wait_for(lambda: probe.statuses() == ["running"] and fio_pids(stack), 90), (
        probe.statuses()
    )
    stack.shell("from experiments.models import Run; Run.objects.all().delete()")
    assert wait_for(lambda: not fio_pids(stack), 20), "fio outlived its deleted run"
    launch_file(
        stack,
        "name: dd\ntool: dd\ntestbeds: [localhost]\nrepetitions: 1\nparams: {bs: 64k, count: 4}\n",
    )
    assert wait_for(lambda: probe.statuses() == ["succeeded"], 60), stack.worker_log(name)[-3000:]
    assert all(p.poll() is None for p in stack.procs), "the worker survives"
    assert "IntegrityError" not in stack.worker_log(name)


# The first run lasts five seconds whatever the disk's speed (time_based), so the test can
# kill Redis while it runs; a dd of 512 MB ended in 0.4 s once per-run overhead fell, before
# the test's launch command had even exited.
FIO_MATRIX = """\
name: fio across a Redis restart
tool: fio
testbeds: [localhost]
repetitions: 1
drop_caches: false
timeout_s: 120
params: {rw: write, bs: 1m, size: 8m, time_based: true}
axes:
  runtime: [5, 1, 2, 3, 4, 6]
"""


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")),
    reason="the Redis-restart test runs on PostgreSQL + Redis",
)
@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")
@needs_fio
def test_redis_restarted_mid_matrix_every_run_finishes_without_resume(stack, tmp_path):
    """(a) A private Redis without persistence, killed with SIGKILL while the first fio runs
    (the other five messages are lost), started again empty on the same port: the janitor
    (beat every second) sends the lost runs again and all six succeed."""
    port = free_port()
    redis_cmd = [
        "redis-server",
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--daemonize",
        "no",
    ]

    def start_redis() -> subprocess.Popen:
        proc = subprocess.Popen(
            redis_cmd,
            stdout=open(tmp_path / "redis.log", "ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        stack.procs.append(proc)
        import redis

        client = redis.Redis(port=port)
        assert wait_for(lambda: _ping(client), 20), "redis-server did not start"
        return proc

    redis_proc = start_redis()
    stack.env.update(
        {
            "CELERY_BROKER_URL": f"redis://127.0.0.1:{port}/0",
            "BEEWEB_RUN_REDISPATCH_SECONDS": "4",
            "BEEWEB_JANITOR_SECONDS": "1",
        }
    )
    probe = Probe(stack)
    node = f"node@{HOST}"
    stack.worker(QUEUE, node)
    stack.worker("default", f"janitor@{HOST}")
    beat_log = open(tmp_path / "beat.log", "ab")
    stack.procs.append(
        subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "beeweb", "beat", "--loglevel=INFO"],
            cwd=Path(__file__).resolve().parents[2],
            env=stack.env,
            stdout=beat_log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    )
    # The node worker must be online for longer than the threshold before it is trusted.
    wait_for_workers(stack, node, f"janitor@{HOST}", timeout=60)
    time.sleep(4)

    launch_file(stack, FIO_MATRIX)
    started = time.monotonic()
    assert wait_for(lambda: "running" in probe.statuses(), 60, interval=0.05), stack.worker_log(
        node
    )[-3000:]
    os.killpg(redis_proc.pid, signal.SIGKILL)  # the five waiting messages are gone
    redis_proc.wait(timeout=10)
    at_kill = probe.statuses()
    assert at_kill.count("queued") >= 1, f"the matrix ended before Redis was killed: {at_kill}"
    time.sleep(2)
    start_redis()  # empty: no persistence
    restarted = time.monotonic()
    done = wait_for(lambda: probe.statuses() == ["succeeded"] * 6, 120, interval=0.5)
    finished = time.monotonic()
    assert done, (
        f"{probe.statuses()}\n{stack.worker_log(node)[-3000:]}\n"
        f"{stack.worker_log(f'janitor@{HOST}')[-3000:]}"
    )
    resent = probe.rows(
        "SELECT count(*) FROM experiments_run WHERE launch::jsonb ? 'redispatched'"
    )[0][0]
    assert resent == at_kill.count("queued")
    assert probe.rows("SELECT max(attempts) FROM experiments_run")[0][0] == 1
    print(
        f"\nRedis killed mid-matrix ({at_kill.count('queued')} of 6 runs lost): all 6 succeeded "
        f"{finished - restarted:.1f} s after Redis came back ({finished - started:.1f} s "
        "from the launch), re-sent by the janitor"
    )


def _ping(client) -> bool:
    try:
        return bool(client.ping())
    except Exception:
        return False
