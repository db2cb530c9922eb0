"""The worker's reaper process (runners.reaper) with real processes: it starts tools in their
own process group with exactly the environment given, reports their exit codes, refuses what
cannot start, and stops every group it started when its worker dies, however it dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runners import reaper

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def spawner():
    spawner = reaper.Reaper()
    yield spawner
    spawner.close()


def _group(pgid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True).stdout
    return [int(pid) for pid in out.split()]


def _wait_until(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_a_tool_runs_in_its_own_group_with_its_output_in_its_log(spawner, tmp_path):
    log = tmp_path / "output.log"
    pid = spawner.spawn(
        ["sh", "-c", 'echo "$GREETING from $(pwd)"; ps -o pgid= -p $$; echo oops >&2; exit 3'],
        str(tmp_path),
        {"PATH": os.environ["PATH"], "GREETING": "hello"},
        str(log),
    )
    assert spawner.wait(pid, 10) == 3
    lines = log.read_text().splitlines()
    assert lines[0] == f"hello from {tmp_path}"
    assert int(lines[1]) == pid  # the leader of its own process group
    assert lines[2] == "oops"  # stderr too


def test_wait_times_out_while_the_tool_runs_and_reports_a_signal(spawner, tmp_path):
    pid = spawner.spawn(["sleep", "30"], str(tmp_path), dict(os.environ), str(tmp_path / "log"))
    started = time.monotonic()
    assert spawner.wait(pid, 0.3) is None
    # It waited its timeout (never less), then returned while the tool still ran.
    assert time.monotonic() - started >= 0.25
    assert _group(pid) == [pid]
    os.killpg(pid, signal.SIGTERM)
    assert spawner.wait(pid, 10) == -signal.SIGTERM


def test_a_tool_that_cannot_start_is_refused_with_the_reason(spawner, tmp_path):
    with pytest.raises(reaper.SpawnError) as missing:
        spawner.spawn(["no-such-tool-xyz"], str(tmp_path), dict(os.environ), str(tmp_path / "l"))
    assert str(missing.value).startswith("could not start no-such-tool-xyz: [Errno 2]")
    with pytest.raises(reaper.SpawnError, match="could not start true"):
        spawner.spawn(["true"], str(tmp_path / "gone"), dict(os.environ), str(tmp_path / "l"))
    # The reaper goes on serving after a refusal.
    pid = spawner.spawn(["true"], str(tmp_path), dict(os.environ), str(tmp_path / "l"))
    assert spawner.wait(pid, 10) == 0


WORKER = """
import sys, time
sys.path.insert(0, {root!r})
from runners.reaper import reaper
spawner = reaper()
pid = spawner.spawn(["sh", "-c", "sleep 60 & sleep 60"], "/", {{"PATH": {path!r}}}, {log!r})
print(pid, spawner.pid, flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_the_tools_group_does_not_outlive_its_worker(tmp_path, how):
    """The worker dies (SIGKILL: nothing of it runs again): its reaper sees its socket
    close and stops the tool's whole group, the tool's own children included."""
    code = WORKER.format(root=str(ROOT), path=os.environ["PATH"], log=str(tmp_path / "log"))
    worker = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        pid, reaper_pid = map(int, worker.stdout.readline().split())
        assert _wait_until(lambda: len(_group(pid)) == 3), _group(pid)  # sh and two sleeps
        worker.send_signal(how)
        worker.wait(timeout=10)
        assert _wait_until(lambda: not _group(pid)), f"{_group(pid)} outlived the worker"
        assert _wait_until(lambda: not Path(f"/proc/{reaper_pid}").exists())
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()


def test_the_worker_process_keeps_one_reaper():
    first = reaper.reaper()
    assert reaper.reaper() is first and first.alive()
    first.close()
    second = reaper.reaper()  # started again once the first ended
    assert second is not first and second.alive()


DEATH_SIGNAL_AFTER_EOF = """
import json, os, signal, socket, sys, time
sys.path.insert(0, {root!r})
from runners import reaper

real = reaper._stop_all


def late(children):
    # The worker's death signal (PR_SET_PDEATHSIG) arriving just after its end-of-file.
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.2)
    real(children)


reaper._stop_all = late
ours, theirs = socket.socketpair()
request = {{"argv": ["sleep", "300"], "cwd": "/", "env": {{"PATH": {path!r}}}, "log": {log!r}}}
ours.sendall(json.dumps(request).encode() + b"\\n")
ours.shutdown(socket.SHUT_WR)  # the worker is gone once its request is read
try:
    outcome = "returned %s" % reaper.serve(theirs.fileno())
except reaper._Stop:
    outcome = "interrupted"
pid = json.loads(ours.makefile().readline())["spawned"]
try:
    os.kill(pid, 0)
    alive = True
    os.killpg(pid, signal.SIGKILL)
except ProcessLookupError:
    alive = False
print(outcome, "tool alive" if alive else "tool stopped")
"""


def test_the_worker_death_signal_after_its_end_of_file_does_not_stop_the_stop(tmp_path):
    """A worker's death closes the reaper's socket and sends it SIGTERM at once: when the
    signal comes just after the end-of-file, the reaper still stops the tools it started
    (before, the signal's exception ended the reaper with the tool running)."""
    code = DEATH_SIGNAL_AFTER_EOF.format(
        root=str(ROOT), path=os.environ["PATH"], log=str(tmp_path / "log")
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["returned", "0", "tool", "stopped"], out.stderr
