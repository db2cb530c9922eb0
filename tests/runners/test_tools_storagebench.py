"""StorageBench adapter and driver: argv, and the driver against a fake beegfs-ctl on PATH."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runners.parsers import parse
from runners.tools import ParamError, build_command
from runners.tools import storagebench_driver as driver
from runners.tools.storagebench import PROJECT_ROOT
from tests.helpers.samples import SAMPLES
from tests.helpers.tools import run

SAMPLE = SAMPLES / "beegfs" / "storagebench-status-verbose-write-10targets-usc.txt"

# A stand-in for beegfs-ctl: logs each call, reports "Running" for FAKE_RUNNING polls, then
# "Finished"; --status --verbose prints FAKE_FINAL (the real sample).
FAKE_CTL = """\
#!{python}
import json, os, sys
state = os.environ["FAKE_STATE"]
args = sys.argv[1:]
with open(os.path.join(state, "calls.jsonl"), "a") as log:
    log.write(json.dumps(args) + "\\n")
if os.environ.get("FAKE_FAIL") and os.environ["FAKE_FAIL"] in args:
    print("Error: communication with storage server failed", file=sys.stderr)
    sys.exit(1)
if "--status" in args:
    if "--verbose" in args:
        sys.stdout.write(open(os.environ["FAKE_FINAL"]).read())
        sys.exit(0)
    polls_file = os.path.join(state, "polls")
    polls = int(open(polls_file).read()) if os.path.exists(polls_file) else 0
    open(polls_file, "w").write(str(polls + 1))
    if polls < int(os.environ.get("FAKE_RUNNING", "1")):
        print("Server benchmark status:\\nRunning:     10")
    else:
        print("Server benchmark status:\\nFinished:    10")
elif "--write" in args or "--read" in args:
    print("Write storage benchmark was started.")
elif "--cleanup" in args:
    print("Cleanup of benchmark files was started.")
elif "--stop" in args:
    print("Benchmark was stopped.")
"""


@pytest.fixture
def fake_ctl(tmp_path, monkeypatch):
    """A fake beegfs-ctl first on PATH; returns the list of its calls (read lazily)."""
    if not SAMPLE.exists():
        pytest.skip(f"no StorageBench sample at {SAMPLE} (set BEEWEB_SAMPLES_DIR)")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    ctl = bindir / "beegfs-ctl"
    ctl.write_text(FAKE_CTL.format(python=sys.executable))
    ctl.chmod(0o755)
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_STATE", str(state))
    monkeypatch.setenv("FAKE_FINAL", str(SAMPLE))

    def calls() -> list[list[str]]:
        log = state / "calls.jsonl"
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines()]

    return calls


def test_argv(ctx):
    cmd = build_command(
        "storagebench",
        {"direction": "write", "blocksize": "512k", "size": "20g", "threads": 16,
         "targetids": "101,102", "direct": True, "interval": 10, "timeout": "2h"},
        ctx,
    )  # fmt: skip
    assert cmd.argv == [
        sys.executable, "-m", "runners.tools.storagebench_driver", "--ctl", "beegfs-ctl",
        "--interval", "10", "--timeout", "7200", "--targetids=101,102", "--write",
        "--blocksize=512K", "--size=20G", "--threads=16", "--odirect",
    ]  # fmt: skip
    assert cmd.env == {"PYTHONPATH": str(PROJECT_ROOT)}
    assert cmd.cwd == ctx.scratch
    assert cmd.data_bytes == 2 * 16 * 20 * 1024**3
    assert cmd.dirs == [] and cmd.prepare == []


def test_argv_all_targets_read_keep(ctx):
    cmd = build_command("storagebench", {"direction": "read", "keep": True}, ctx)
    assert cmd.argv[9:] == ["--alltargets", "--read", "--blocksize=512K", "--size=1G",
                            "--threads=1", "--keep"]  # fmt: skip
    assert cmd.data_bytes is None  # the target count is not known here


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"targetids": [0]}, "targetids"),
        ({"targetids": "1;2"}, "targetids"),
        ({"threads": 0}, "threads"),
        ({"interval": 0}, "interval"),
        ({"direction": "both"}, "direction"),
        ({"mount": "/mnt/beegfs"}, "mount"),
    ],
)
def test_rejected(params, param, ctx):
    with pytest.raises(ParamError) as exc:
        build_command("storagebench", params, ctx)
    assert exc.value.param == param


def test_status_reading():
    assert driver.states("Server benchmark status:\nRunning:     10\n") == {"running": 10}
    assert not driver.is_done({"running": 3, "finished": 7})
    assert not driver.is_done({"idle": 10})
    assert driver.is_done({"finished": 10})
    assert driver.is_done({"error": 1, "finished": 9})


def test_built_command_runs_the_driver_end_to_end(ctx, fake_ctl):
    cmd = build_command("storagebench", {"threads": 4, "size": "1g", "interval": 1}, ctx)
    done = run(cmd, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == SAMPLE.read_text()
    result = parse(done.stdout, tool="storagebench", **cmd.parse_options)
    assert result.get("write_bw") == pytest.approx(19848771 * 1024)
    calls = fake_ctl()
    assert calls[0] == ["--storagebench", "--alltargets", "--write", "--blocksize=512K",
                        "--size=1G", "--threads=4"]  # fmt: skip
    assert calls[1:] == [
        ["--storagebench", "--alltargets", "--status"],  # Running
        ["--storagebench", "--alltargets", "--status"],  # Finished
        ["--storagebench", "--alltargets", "--status", "--verbose"],
        ["--storagebench", "--alltargets", "--cleanup"],
    ]
    assert "running 10" in done.stderr


def test_keep_skips_cleanup(fake_ctl, capsys):
    code = driver.main(["--targetids=1,2", "--read", "--blocksize", "1M", "--size", "1G",
                        "--threads", "2", "--interval", "0.01", "--keep"])  # fmt: skip
    assert code == 0
    calls = fake_ctl()
    assert calls[0][:3] == ["--storagebench", "--targetids=1,2", "--read"]
    assert not any("--cleanup" in c for c in calls)
    assert "Aggregate throughput" in capsys.readouterr().out


def test_timeout_stops_the_benchmark(fake_ctl, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_RUNNING", "100000")
    code = driver.main(["--alltargets", "--write", "--blocksize", "512K", "--size", "1G",
                        "--threads", "1", "--interval", "0.05", "--timeout", "0.3"])  # fmt: skip
    assert code == driver.EXIT_TIMEOUT
    tails = [c[2:] for c in fake_ctl()]
    assert tails[-3:] == [["--stop"], ["--status", "--verbose"], ["--cleanup"]]
    assert "stopping the benchmark" in capsys.readouterr().err


def test_failed_start_is_reported(fake_ctl, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_FAIL", "--write")
    code = driver.main(["--alltargets", "--write", "--blocksize", "512K", "--size", "1G",
                        "--threads", "1", "--interval", "0.01"])  # fmt: skip
    assert code == driver.EXIT_FAILED
    assert len(fake_ctl()) == 1
    assert "communication with storage server failed" in capsys.readouterr().err


def test_error_state_fails_the_run(fake_ctl, monkeypatch, tmp_path):
    final = tmp_path / "final.txt"
    final.write_text(SAMPLE.read_text().replace("Finished:    10", "Finished:    9\nError: 1"))
    monkeypatch.setenv("FAKE_FINAL", str(final))
    code = driver.main(["--alltargets", "--write", "--blocksize", "512K", "--size", "1G",
                        "--threads", "1", "--interval", "0.01"])  # fmt: skip
    assert code == driver.EXIT_FAILED
    assert fake_ctl()[-1][2:] == ["--cleanup"]


def test_driver_rejects_bad_arguments(capsys):
    for argv in (
        ["--alltargets", "--write", "--blocksize", "512K; reboot", "--size", "1G",
         "--threads", "1"],
        ["--targetids", "1,$(id)", "--write", "--blocksize", "512K", "--size", "1G",
         "--threads", "1"],
        ["--alltargets", "--write", "--read", "--blocksize", "1M", "--size", "1G",
         "--threads", "1"],
    ):  # fmt: skip
        with pytest.raises(SystemExit) as exc:
            driver.main(argv)
        assert exc.value.code == 2


def test_sigterm_stops_and_cleans_up(ctx, fake_ctl, monkeypatch):
    monkeypatch.setenv("FAKE_RUNNING", "100000")
    cmd = build_command("storagebench", {"interval": 1}, ctx)
    proc = subprocess.Popen(
        cmd.argv, cwd=cmd.cwd, env={**os.environ, **cmd.env},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not any("--status" in c for c in fake_ctl()) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == driver.EXIT_TERMINATED, err
    tails = [c[2:] for c in fake_ctl()]
    assert tails[-2:] == [["--stop"], ["--cleanup"]]


def test_project_root_holds_the_driver():
    assert (Path(PROJECT_ROOT) / "runners" / "tools" / "storagebench_driver.py").is_file()
