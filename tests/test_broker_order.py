"""The embedded default's broker (beeweb/broker.py) hands out messages in the order they were
sent: dispatch sends a matrix's runs in its order, several within one millisecond, and kombu's
own file names (milliseconds, then a random uuid) took those in a random order."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kombu import Connection

from beeweb import broker

ROOT = Path(__file__).resolve().parents[1]


def test_names_sort_in_the_order_they_were_made():
    names = [broker.message_name("node.a") for _ in range(2000)]
    assert sorted(names) == names and len(set(names)) == len(names)
    assert all(name.partition(".")[2] == "node.a.msg" for name in names)  # kombu's queue part


def test_a_burst_of_messages_is_consumed_in_the_order_it_was_sent(tmp_path):
    folder = tmp_path / "queue"
    folder.mkdir()
    options = {
        "data_folder_in": str(folder),
        "data_folder_out": str(folder),
        "processed_folder": str(tmp_path),
        "control_folder": str(tmp_path / "control"),
        "store_processed": False,
    }
    with Connection("filesystem://", transport=broker.Transport, transport_options=options) as c:
        queue = c.SimpleQueue("node.a")
        for n in range(300):  # far more than one a millisecond
            queue.put({"n": n})
        got = []
        for _ in range(300):
            message = queue.get(timeout=5)
            got.append(message.payload["n"])
            message.ack()
        queue.close()
    assert got == list(range(300))


def test_the_embedded_default_uses_it(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL"}}
    code = (
        "from beeweb.celery import app; c = app.connection_for_write(); "
        "print(type(c.transport).__module__, app.conf.broker_url)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**env, "BEEWEB_DATA_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "beeweb.settings"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == ["beeweb.broker", "filesystem://"]
