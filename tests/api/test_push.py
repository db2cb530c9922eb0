"""beeweb-push, the installed console script, against a live server: a real fio output is
stored and parsed; pushing it again creates nothing; a bad token fails with one line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from rest_framework.authtoken.models import Token

from experiments.models import Run, Testbed
from runners import push
from tests.helpers.samples import SAMPLES

pytestmark = pytest.mark.django_db(transaction=True)

FIO = "fio/fio-3.28-json-15jobs-stonewall-seqwrite-direct-beegfs-thesis.json"


def push_command() -> list[str]:
    script = shutil.which("beeweb-push", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.fail("beeweb-push is not installed: pip install -e . installs the console script")
    return [script]


def run_push(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BEEWEB_")}
    # This checkout's client first (an environment shared by several checkouts has its
    # editable install pointing at another one).
    root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (root, clean.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [*push_command(), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**clean, "PYTHONPATH": path, **(env or {})},
    )


def _close_server_connections() -> None:
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )


@pytest.fixture
def server(live_server, django_user_model):
    user = django_user_model.objects.create_user("pusher", password="pusher-pw")
    Testbed.objects.create(owner=user, name="site-b")
    token = Token.objects.create(user=user)
    yield live_server.url, token.key
    _close_server_connections()


def test_push_stores_and_parses_a_real_fio_output(server, tmp_path):
    sample = SAMPLES / FIO
    if not sample.exists():
        if os.environ.get("CI"):
            pytest.fail(f"sample {sample} is missing")
        pytest.skip(f"no sample {sample}")
    url, token = server
    result = run_push(
        "--url", url, "--token", token, "--testbed", "site-b", "--tool", "fio", str(sample)
    )
    assert result.returncode == 0, result.stderr
    # 15 stonewalled jobs (bs 1k to 16M), each its own measurement: 15 runs (issue 25).
    assert "stored as 15 runs: 15 independent jobs (bs 1k … 16M)" in result.stdout
    assert Run.objects.count() == 15
    run = Run.objects.get(client_key__startswith="sha256:", launch__parse_options__part=0)
    assert run.tool == "fio" and run.owner.username == "pusher"
    assert run.raw_output == sample.read_text(encoding="utf-8", errors="replace")
    assert not run.parse_error and run.params["transfer_size"] == 1024  # "bs" : "1k"
    # bs_16M: "io_bytes" : 11727273984 in "runtime" : 16003 ms
    last = Run.objects.get(launch__parse_options__part=14)
    assert last.params["transfer_size"] == 16 * 1024**2
    assert last.metrics.get(name="write_bw", primary=True).value == pytest.approx(
        11727273984 / 16.003
    )

    # The same file again (env configuration this time): nothing new.
    again = run_push(
        "--testbed", "site-b", str(sample), env={"BEEWEB_URL": url, "BEEWEB_TOKEN": token}
    )
    assert again.returncode == 0, again.stderr
    assert "already stored as 15 runs" in again.stdout
    assert Run.objects.count() == 15

    # Unparsable output is kept with its error; the push itself succeeds.
    junk = tmp_path / "junk.txt"
    junk.write_text("no benchmark here\n")
    kept = run_push("--url", url, "--token", token, "--testbed", "site-b", "--key", "j1", str(junk))
    assert kept.returncode == 0
    assert "could not be parsed" in kept.stderr
    assert Run.objects.get(client_key="j1").parse_error


def test_bad_token_fails_with_one_clear_line(server, tmp_path):
    url, _ = server
    out = tmp_path / "out.txt"
    out.write_text("x\n")
    result = run_push("--url", url, "--token", "wrong", "--testbed", "site-b", str(out))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines == ["beeweb-push: error: the server refused the token (HTTP 401): Invalid token."]
    assert not Run.objects.exists()


def test_unknown_testbed_is_rejected(server, tmp_path):
    url, token = server
    out = tmp_path / "out.txt"
    out.write_text("x\n")
    result = run_push("--url", url, "--token", token, "--testbed", "nowhere", str(out))
    assert result.returncode == 1
    assert "no testbed 'nowhere'" in result.stderr


def test_missing_configuration_is_one_line():
    result = run_push("--testbed", "x", "file")
    assert result.returncode == 1
    assert result.stderr.strip() == "beeweb-push: error: no server: give --url or set BEEWEB_URL"


class Flaky(BaseHTTPRequestHandler):
    """Answers 503 twice, then a bulk result."""

    calls = 0

    def do_POST(self):  # noqa: N802 - http.server's name
        Flaky.calls += 1
        self.rfile.read(int(self.headers["Content-Length"]))
        if Flaky.calls <= 2:
            self.send_response(503)
            self.end_headers()
            self.wfile.write(b'{"detail": "busy"}')
            return
        body = json.dumps(
            {
                "created": 1,
                "existing": 0,
                "invalid": 0,
                "results": [{"index": 0, "status": "created", "uuid": "u", "metrics": 3}],
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_retries_on_5xx_then_gives_up(tmp_path, capsys):
    httpd = HTTPServer(("127.0.0.1", 0), Flaky)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    out = tmp_path / "out.txt"
    out.write_text("x\n")
    url = f"http://127.0.0.1:{httpd.server_port}"
    try:
        sleeps: list[float] = []
        answer = push.post(
            f"{url}/api/runs/bulk/",
            "t",
            [{}],
            retries=3,
            timeout=5,
            context=None,
            sleep=sleeps.append,
        )
        assert answer["created"] == 1 and Flaky.calls == 3 and sleeps == [1.0, 2.0]
        Flaky.calls = -10
        with pytest.raises(push.PushError, match=r"HTTP 503.*gave up after 2 attempts"):
            push.post(
                f"{url}/api/runs/bulk/",
                "t",
                [{}],
                retries=1,
                timeout=5,
                context=None,
                sleep=sleeps.append,
            )
    finally:
        httpd.shutdown()
    with pytest.raises(push.PushError, match="cannot reach"):
        push.post(
            "http://127.0.0.1:9/api/runs/bulk/", "t", [{}], retries=0, timeout=2, context=None
        )


def test_batches_stay_within_the_servers_limits():
    """Batches are cut by the size of the JSON actually sent (escapes included) and by count,
    so none exceeds what the bulk API accepts in one request."""
    from experiments.results import ingest

    assert push.MAX_BATCH_BYTES <= ingest.MAX_REQUEST_BYTES
    assert push.MAX_BATCH_FILES <= ingest.MAX_ITEMS
    quoted = '"\\\n' * 50_000  # 150 KB of text, 300 KB as JSON
    items = [(f"f{i}", {"raw_output": quoted, "key": str(i)}) for i in range(30)]
    items += [(f"s{i}", {"raw_output": "x", "key": f"s{i}"}) for i in range(1200)]
    sent = list(push.batches(items))
    assert [name for batch in sent for name, _ in batch] == [name for name, _ in items]
    for batch in sent:
        body = json.dumps([item for _, item in batch]).encode()
        assert len(body) <= push.MAX_BATCH_BYTES and len(batch) <= push.MAX_BATCH_FILES


class Limited(BaseHTTPRequestHandler):
    """A bulk API that takes at most two items per request and no item named "huge"."""

    requests: list[int] = []

    def do_POST(self):
        items = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Limited.requests.append(len(items))
        if len(items) > 2 or any(i["key"] == "huge" for i in items):
            body, code = b'{"detail": "at most 2 runs per request"}', 413
        else:
            results = [{"status": "created", "uuid": i["key"], "metrics": 1} for i in items]
            body, code = json.dumps({"results": results}).encode(), 200
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_batch_the_server_finds_too_large_is_split(tmp_path, capsys, monkeypatch):
    httpd = HTTPServer(("127.0.0.1", 0), Limited)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    files = []
    for i in range(5):
        path = tmp_path / f"out{i}.txt"
        path.write_text(f"output {i}\n")
        files.append(str(path))
    real_build = push.build_items

    def keyed(args):
        items = real_build(args)
        name, item = items[2]
        items[2] = (name, {**item, "key": "huge"})
        return items

    monkeypatch.setattr(push, "build_items", keyed)
    url = f"http://127.0.0.1:{httpd.server_port}"
    try:
        code = push.main(["--url", url, "--token", "t", "--testbed", "b", *files])
    finally:
        httpd.shutdown()
    out, err = capsys.readouterr()
    assert code == 1 and "1 of 5 files were rejected" in err
    assert "out2.txt: too large for one request (HTTP 413): at most 2 runs" in err
    assert out.count("stored as run") == 4
    # 5 -> 413, split into 2 (stored) + 3 -> 413, split into the huge one alone + 2 (stored).
    assert Limited.requests == [5, 2, 3, 1, 2]


def test_push_sends_the_runs_telemetry_when_asked(server, tmp_path):
    from experiments.models import RunTelemetry
    from tests.helpers.telemetry import node

    url, token = server
    out = tmp_path / "out.txt"
    out.write_text("no benchmark here\n")
    doc = node("client01", tool_cpu_top=[1.0] * 10)
    single = tmp_path / "telemetry.json"
    single.write_text(json.dumps(doc))  # one document: one node
    args = ["--url", url, "--token", token, "--testbed", "site-b", "--key", "t1"]
    result = run_push(*args, "--telemetry", str(single), str(out))
    assert result.returncode == 0, result.stderr
    run = Run.objects.get(client_key="t1")
    assert RunTelemetry.objects.get(run=run).hostname == "client01"
    assert run.bottleneck == "cpu"

    # Refused on the client: not telemetry, or with several files.
    wrong = tmp_path / "wrong.json"
    wrong.write_text('[{"format": "other"}]')
    bad = run_push(*args, "--key", "t2", "--telemetry", str(wrong), str(out))
    assert bad.returncode == 1 and "not beeweb-telemetry/1 documents" in bad.stderr
    two = run_push(*args, "--key", "t3", "--telemetry", str(single), str(out), str(out))
    assert two.returncode == 1 and "give one FILE with it" in two.stderr
    # Refused by the server: said in one line, nothing stored.
    doc["t"][4] = 1.0
    single.write_text(json.dumps([doc]))
    refused = run_push(*args, "--key", "t4", "--telemetry", str(single), str(out))
    assert refused.returncode == 1 and "times must increase" in refused.stderr
    assert not Run.objects.filter(client_key="t4").exists()
