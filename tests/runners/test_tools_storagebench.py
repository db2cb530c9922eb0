"""StorageBench adapter and driver: argv, and the driver against the real BeeGFS 7.4.7
servers of ``beegfs_host`` (tests/labs/beegfs.py): write, read after an unmeasured write,
chosen targets, a read without data, SIGTERM (--stop, --cleanup), a storage daemon killed
mid-run. Nothing here stands in for beegfs-ctl."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runners.parsers import ParseError, parse
from runners.tools import ParamError, build_command
from runners.tools import storagebench_driver as driver
from runners.tools.base import LaunchContext
from runners.tools.storagebench import PROJECT_ROOT, REASON_FILE
from tests.helpers.tools import run

DRIVER = [sys.executable, "-m", "runners.tools.storagebench_driver"]


def test_argv(ctx):
    cmd = build_command(
        "storagebench",
        {"direction": "write", "blocksize": "512k", "size": "20g", "threads": 16,
         "targetids": "101,102", "direct": True, "interval": 10, "timeout": "2h"},
        ctx,
    )  # fmt: skip
    reason = ctx.scratch / REASON_FILE
    assert cmd.argv == [
        *DRIVER, "--interval", "10", "--timeout", "7200", "--reason-file", str(reason),
        "--targetids=101,102", "--write", "--blocksize=512K", "--size=20G", "--threads=16",
        "--odirect",
    ]  # fmt: skip
    assert cmd.env == {"PYTHONPATH": str(PROJECT_ROOT)}
    assert cmd.cwd == ctx.scratch and cmd.reason_file == reason
    assert cmd.data_bytes == 2 * 16 * 20 * 1024**3
    assert cmd.dirs == [] and cmd.prepare == []
    assert "beegfs-ctl" not in cmd.argv  # the node's BEEWEB_BEEGFS_CTL says which one


def test_a_read_writes_its_data_first_unmeasured(ctx):
    cmd = build_command("storagebench", {"direction": "read"}, ctx)
    shape = ["--blocksize=512K", "--size=1G", "--threads=1"]
    assert cmd.argv[9:] == ["--alltargets", "--read", *shape]
    (prepare,) = cmd.prepare
    assert prepare[:10] == cmd.argv[:10]
    assert prepare[10:] == ["--write", *shape, "--keep"]
    assert cmd.data_bytes is None  # the target count is not known here


def test_a_run_on_a_target_benchmarks_that_target(tmp_path):
    ctx = LaunchContext(workdir=tmp_path, scratch=tmp_path, target_ids=(3,))
    cmd = build_command("storagebench", {}, ctx)
    assert "--targetids=3" in cmd.argv and "--alltargets" not in cmd.argv
    assert "--targetids=3" in build_command("storagebench", {"targetids": [3]}, ctx).argv
    with pytest.raises(ParamError, match="BeeGFS target id 3") as exc:
        build_command("storagebench", {"targetids": [4]}, ctx)
    assert exc.value.param == "targetids"


def test_keep_is_retired(ctx):
    with pytest.raises(ParamError, match="no longer supported"):
        build_command("storagebench", {"keep": True}, ctx)


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
    # BeeGFS 7.4.7's words for a server that knows no benchmark (it restarted).
    assert driver.states("Server benchmark status:\nDidn't run:   1\n") == {"didn't run": 1}
    assert not driver.is_done({"running": 3, "finished": 7})
    assert not driver.is_done({"idle": 10})
    assert driver.is_done({"finished": 10})
    assert driver.is_done({"error": 1, "finished": 9})


def test_the_node_says_which_beegfs_ctl():
    assert driver.ctl_prefix({}) == ["beegfs-ctl"]
    assert driver.ctl_prefix({"BEEWEB_BEEGFS_CTL": "  "}) == ["beegfs-ctl"]
    line = "ip netns exec n1 /opt/beegfs/sbin/beegfs-ctl '--cfgFile=/etc/a b.conf'"
    assert driver.ctl_prefix({"BEEWEB_BEEGFS_CTL": line}) == [
        "ip", "netns", "exec", "n1", "/opt/beegfs/sbin/beegfs-ctl", "--cfgFile=/etc/a b.conf"
    ]  # fmt: skip
    with pytest.raises(SystemExit, match="BEEWEB_BEEGFS_CTL is not a command line"):
        driver.ctl_prefix({"BEEWEB_BEEGFS_CTL": "beegfs-ctl 'unclosed"})


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


def test_project_root_holds_the_driver():
    assert (Path(PROJECT_ROOT) / "runners" / "tools" / "storagebench_driver.py").is_file()


# --- against the real servers ------------------------------------------------------------------

SMALL = {"blocksize": "1m", "size": "16m", "threads": 2, "interval": 1}


@pytest.fixture
def lab(beegfs_host, monkeypatch):
    """``beegfs_host`` as this node's beegfs-ctl (BEEWEB_BEEGFS_CTL, as a worker inherits it),
    its targets Online and free of benchmark files before and after each test."""
    monkeypatch.setenv("BEEWEB_BEEGFS_CTL", " ".join(beegfs_host.ctl_argv()))
    beegfs_host.wait_online(2)
    beegfs_host.ctl("--storagebench", "--alltargets", "--cleanup")
    yield beegfs_host
    beegfs_host.ctl("--storagebench", "--alltargets", "--cleanup")


def bench_files(lab) -> list[str]:
    """The files StorageBench keeps in the host lab's targets (``<target>/benchmark/<n>``)."""
    return sorted(str(p) for p in (lab.base / "data").glob("target*/benchmark/*"))


def started(lab, target_ids=None) -> bool:
    """Whether the lab's StorageBench reports Running."""
    which = f"--targetids={target_ids}" if target_ids else "--alltargets"
    return "Running" in lab.ctl("--storagebench", which, "--status")


def wait_for(condition, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"no {what} after {timeout:.0f} s"
        time.sleep(0.1)


def test_write_on_all_targets(lab, ctx):
    cmd = build_command("storagebench", SMALL, ctx)
    done = run(cmd, timeout=120)
    assert done.returncode == 0, done.stderr
    result = parse(done.stdout, tool="storagebench")
    assert result.get("write_bw") > 0  # the aggregate
    per_target = {m.extra["target"]: m for m in result.metrics if "target" in m.extra}
    assert sorted(per_target) == [1, 2]
    assert {m.extra["node"] for m in per_target.values()} == {"storage01"}
    assert result.params["targets"] == 2 and result.params["nodes"] == 1
    assert "Write storage benchmark was started." in done.stderr
    assert bench_files(lab) == [] and not cmd.reason_file.exists()


def test_read_after_its_unmeasured_write(lab, ctx):
    cmd = build_command("storagebench", {**SMALL, "direction": "read"}, ctx)
    (prepare,) = cmd.prepare
    wrote = subprocess.run(prepare, env={**os.environ, **cmd.env}, capture_output=True, text=True)
    assert wrote.returncode == 0, wrote.stderr
    assert "Write benchmark results:" in wrote.stdout  # recorded by the executor, not parsed
    assert len(bench_files(lab)) == 4, "kept for the read: 2 threads x 2 targets"
    done = run(cmd, timeout=120)
    assert done.returncode == 0, done.stderr
    result = parse(done.stdout, tool="storagebench")
    assert result.get("read_bw") > 0 and result.params["ops"] == ["read"]
    assert bench_files(lab) == []


def test_a_read_without_data_fails_in_beegfs_words(lab, ctx):
    cmd = build_command("storagebench", {**SMALL, "direction": "read"}, ctx)
    done = run(cmd, timeout=120)  # the measured step alone: nothing was written
    assert done.returncode == driver.EXIT_FAILED
    reason = cmd.reason_file.read_text()
    assert "No (or not enough) data for read benchmark available." in reason
    assert reason.startswith("beegfs-ctl --storagebench start: Some errors occurred:")


def test_chosen_targets_only(lab, tmp_path):
    ctx = LaunchContext(workdir=tmp_path, scratch=tmp_path, target_ids=(2,))
    cmd = build_command("storagebench", SMALL, ctx)
    assert cmd.data_bytes == 2 * 16 * 2**20
    done = run(cmd, timeout=120)
    assert done.returncode == 0, done.stderr
    result = parse(done.stdout, tool="storagebench")
    assert [m.extra["target"] for m in result.metrics if "target" in m.extra] == [2]
    assert result.params["targets"] == 1


def _start_long_write(cmd):
    """A write far larger than the test waits for (stopped long before it ends)."""
    return subprocess.Popen(
        cmd.argv, cwd=cmd.cwd, env={**os.environ, **cmd.env}, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


LONG = {"blocksize": "64k", "size": "64g", "threads": 1, "interval": 1, "targetids": [1]}


def test_sigterm_stops_and_cleans_up(lab, ctx):
    """The executor's cancel: SIGTERM to the process group, SIGKILL 5 s later."""
    cmd = build_command("storagebench", LONG, ctx)
    proc = _start_long_write(cmd)
    wait_for(lambda: started(lab, 1), "Running benchmark")
    wait_for(lambda: bench_files(lab), "benchmark file")
    os.killpg(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=5)  # within the executor's grace
    assert proc.returncode == driver.EXIT_TERMINATED, err
    assert "terminated: stopping the benchmark" in err
    assert "Stopped" in lab.ctl("--storagebench", "--targetids=1", "--status")
    assert bench_files(lab) == []


def test_a_storage_daemon_killed_mid_run_fails_in_beegfs_words(lab, ctx):
    cmd = build_command("storagebench", LONG, ctx)
    proc = _start_long_write(cmd)
    try:
        wait_for(lambda: started(lab, 1), "Running benchmark")
        lab.kill("storage-storage01")
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == driver.EXIT_FAILED, err
        reason = cmd.reason_file.read_text()
        assert reason.startswith("beegfs-ctl --storagebench --status failed (exit status 3)")
        assert "Failed to communicate with node: storage01" in reason
        assert "beegfs-ctl --listtargets --state:" in reason  # and what mgmtd says of them
    finally:
        proc.kill()
        lab.sh("restart", "storage-storage01")
        lab.wait_online(2)


def test_a_status_of_a_restarted_server_is_no_result():
    """BeeGFS 7.4.7's status once a storage daemon restarted (seen here): no result to read."""
    text = "\nServer benchmark status:\nDidn't run:   1\n\nList of all targets:\n\n"
    with pytest.raises(ParseError, match="has not finished \\(didn't run: 1\\)"):
        parse(text, tool="storagebench")
