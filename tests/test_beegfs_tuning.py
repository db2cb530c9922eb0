"""A tuning set's BeeGFS server keys made true on a real BeeGFS 7.4.7 storage/metadata daemon by
the node's own worker (experiments.execution.beegfs, runners.beegfs_config; issue 26): written
into the config file, the daemon restarted, Online awaited, read back; nothing restarted when
nothing changes; the original restored byte for byte; a value that is not in force named.

The daemons are the lab's (tests/labs/beegfs.py ``beegfs_host``); beyond what BeeGFS reports
(getcfg), the tests count the running daemon's worker threads, which is what tuneNumWorkers
sets."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from experiments.execution import beegfs, nodepolicy
from experiments.models import BeegfsConfigChange, NodeLease
from tests.labs.beegfs import BeegfsLab

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

HOST = "beegfs-host"
STORAGE = "storage-storage01"


def workers(lab: BeegfsLab, name: str) -> int:
    """How many worker threads the running daemon has (``Worker<N>``; on a storage daemon
    ``Worker<N>-<queue>``, one per target queue)."""
    pid = lab.pid(name)
    names = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        comm = (task / "comm").read_text().strip()
        m = re.match(r"^Worker(\d+)(-\d+)?$", comm)
        if m:
            names.add(m.group(1))
    return len(names)


@pytest.fixture
def server(settings, tmp_path, beegfs_host):
    """This host as a storage server whose operator allows beeweb to tune it."""
    lab: BeegfsLab = beegfs_host
    settings.DATA_DIR = tmp_path
    settings.NODE_BEEGFS = "true"
    settings.NODE_BEEGFS_STORAGE_CONF = str(lab.conf(STORAGE))
    settings.NODE_BEEGFS_STORAGE_RESTART = shlex.join(lab.restart_argv(STORAGE))
    settings.NODE_BEEGFS_META_CONF = str(lab.conf("meta-meta01"))
    settings.NODE_BEEGFS_META_RESTART = shlex.join(lab.restart_argv("meta-meta01"))
    settings.NODE_BEEGFS_NODE_NAME = "storage01"
    settings.BEEGFS_CTL = shlex.join(lab.ctl_argv())
    original = lab.conf(STORAGE).read_bytes()
    yield lab
    # Whatever a test left, the next meets the lab's own file (and its daemon on it).
    beegfs.restore(HOST, "storage")
    assert lab.conf(STORAGE).read_bytes() == original


def ask(values: dict[str, str], scope: str = "storage") -> dict:
    return beegfs.answer(HOST, {"values": {scope: values}, "matrix": None, "run": None})


def test_keys_are_written_restarted_read_back_and_restored(server):
    lab = server
    conf = lab.conf(STORAGE)
    original = conf.read_bytes()
    assert workers(lab, STORAGE) == 8  # BeeGFS's default
    pid = lab.pid(STORAGE)

    result = ask({"tuneNumWorkers": "3", "tuneFileWriteSize": "1024k"})
    assert result["outcome"] == beegfs.IN_FORCE, result
    record = result["services"]["storage"]
    assert record["restarted"] and record["node_id"] == "1"
    assert record["restart_s"] > 0 and record["online_s"] >= 0
    assert record["keys"] == [
        {"key": "tuneFileWriteSize", "before": None, "asked": "1m", "in_force": "1m"},
        {"key": "tuneNumWorkers", "before": None, "asked": "3", "in_force": "3"},
    ]
    assert lab.pid(STORAGE) != pid and workers(lab, STORAGE) == 3
    assert lab.targets() == {1: "Online", 2: "Online"}
    # Only the keys changed; the original is kept beside the file.
    text = conf.read_text()
    assert text == original.decode() + "tuneNumWorkers = 3\ntuneFileWriteSize = 1m\n" or (
        text == original.decode() + "tuneFileWriteSize = 1m\ntuneNumWorkers = 3\n"
    )
    assert (conf.parent / (conf.name + ".beeweb-original")).read_bytes() == original
    change = BeegfsConfigChange.objects.get()
    assert (change.hostname, change.service, change.restored_at) == (HOST, "storage", None)
    assert change.after == {"tuneFileWriteSize": "1m", "tuneNumWorkers": "3"}
    assert change.before == {"tuneFileWriteSize": None, "tuneNumWorkers": None}

    # The same values again: nothing restarts, the values are read back all the same.
    pid = lab.pid(STORAGE)
    again = ask({"tuneNumWorkers": "3", "tuneFileWriteSize": "1m"})
    assert again["outcome"] == beegfs.IN_FORCE
    assert again["services"]["storage"]["restarted"] is False
    assert lab.pid(STORAGE) == pid
    assert BeegfsConfigChange.objects.count() == 1

    # Another value: rewritten from the original (the first original stays the original).
    other = ask({"tuneNumWorkers": "5"})
    assert other["services"]["storage"]["restarted"] and workers(lab, STORAGE) == 5
    assert "tuneFileWriteSize" not in conf.read_text()
    first, second = BeegfsConfigChange.objects.order_by("pk")
    first.refresh_from_db()
    assert first.restore_outcome == "replaced by the next tuning set's values"

    # The original back: byte for byte, restarted, Online, recorded.
    record = beegfs.restore(HOST, "storage")
    assert record["restarted"] and record["online_s"] is not None
    assert conf.read_bytes() == original
    assert workers(lab, STORAGE) == 8 and lab.targets() == {1: "Online", 2: "Online"}
    second.refresh_from_db()
    assert second.restored_at is not None and second.restore_outcome.startswith("restored")
    assert beegfs.restore(HOST, "storage") is None  # nothing left to restore


def test_nothing_asked_and_nothing_changed_touches_nothing(server):
    pid = server.pid(STORAGE)
    assert beegfs.answer(HOST, {"values": {}}) == {"outcome": beegfs.IN_FORCE, "services": {}}
    assert server.pid(STORAGE) == pid


def test_a_file_the_daemon_does_not_read_is_not_in_force(server, settings, tmp_path):
    # The operator named the wrong file: beeweb writes it, restarts the daemon, and getcfg
    # shows the daemon reads another one. The run would fail before its tool starts.
    wrong = tmp_path / "beegfs-storage.conf"
    shutil.copy(server.conf(STORAGE), wrong)
    settings.NODE_BEEGFS_STORAGE_CONF = str(wrong)
    result = ask({"tuneNumWorkers": "4"})
    assert result["outcome"].startswith("failed: storage service: not in force: ")
    assert "storage.tuneNumWorkers asked '4', the daemon's file says absent" in result["outcome"]
    assert f"is {wrong} the file this daemon reads?" in result["outcome"]
    assert workers(server, STORAGE) == 8
    beegfs.restore(HOST, "storage")  # the wrong file back as it was
    settings.NODE_BEEGFS_STORAGE_CONF = str(server.conf(STORAGE))


def test_a_restart_command_that_does_not_restart_is_caught(server, settings):
    settings.NODE_BEEGFS_STORAGE_RESTART = "true"
    result = ask({"tuneNumWorkers": "6"})
    assert "started before the file was last written (did true restart it?)" in result["outcome"]
    assert workers(server, STORAGE) == 8  # the daemon still runs with its old value
    settings.NODE_BEEGFS_STORAGE_RESTART = shlex.join(server.restart_argv(STORAGE))


def test_the_metadata_service_too(server, settings):
    settings.NODE_BEEGFS_NODE_NAME = "meta01"
    conf = server.conf("meta-meta01")
    original = conf.read_bytes()
    result = ask({"tuneNumWorkers": "3"}, scope="meta")
    assert result["outcome"] == beegfs.IN_FORCE, result
    assert result["services"]["meta"]["keys"][0]["in_force"] == "3"
    assert workers(server, "meta-meta01") == 3
    assert beegfs.restore(HOST, "meta")["restarted"]
    assert conf.read_bytes() == original
    settings.NODE_BEEGFS_NODE_NAME = "storage01"


def test_a_node_that_refuses_and_keys_it_refuses_leave_the_file_alone(server, settings):
    conf = server.conf(STORAGE)
    original = conf.read_bytes()
    settings.NODE_BEEGFS = "false"
    assert ask({"tuneNumWorkers": "2"})["outcome"] == nodepolicy.BEEGFS_REFUSED
    settings.NODE_BEEGFS = "true"
    # A request the server should never have sent (a forged lease row): the node checks too.
    refused = ask({"storeStorageDirectory": "/tmp/elsewhere", "tuneNumWorkers": "2"})
    assert refused["outcome"].startswith("refused: storage.storeStorageDirectory is never")
    assert conf.read_bytes() == original and not NodeLease.objects.exists()


def test_the_agent_restores_a_change_nothing_needs(server):
    ask({"tuneNumWorkers": "2"})
    job = beegfs.BeegfsTuning([HOST])
    job.tick([])  # a worker that starts finds its state file and the node free
    assert workers(server, STORAGE) == 8
    assert BeegfsConfigChange.objects.get().restored_at is not None


def test_a_change_stays_while_its_matrix_has_runs_to_go_and_goes_when_it_is_cancelled(
    server, alice, bench
):
    from experiments.matrices.expansion import cancel_runs
    from tests.helpers.execution import make_matrix, queue

    matrix = make_matrix(alice, bench, tool="dd", params={"bs": "1m", "count": 1}, repetitions=2)
    first, second = matrix.runs.order_by("pk")
    queue(second)
    result = beegfs.answer(
        HOST, {"values": {"storage": {"tuneNumWorkers": "2"}}, "matrix": matrix.pk, "run": first.pk}
    )
    assert result["outcome"] == beegfs.IN_FORCE
    job = beegfs.BeegfsTuning([HOST])
    job.started = True  # past the worker's first look
    job.tick([])
    assert workers(server, STORAGE) == 2  # the matrix's next run is queued: the change stays
    assert BeegfsConfigChange.objects.get().matrix_id == matrix.pk
    cancel_runs(matrix.runs.all())
    job.checked = 0.0  # the next restore check is due
    job.tick([])
    assert workers(server, STORAGE) == 8
    change = BeegfsConfigChange.objects.get()
    assert change.restored_at is not None and change.restore_outcome.startswith("restored")


def test_a_value_the_daemon_does_not_start_with_is_rolled_back(server):
    # BeeGFS refuses to start bound to a NUMA zone this machine lacks: the restart fails,
    # and the node puts its original file back and restarts the daemon on it.
    original = server.conf(STORAGE).read_bytes()
    result = ask({"tuneBindToNumaZone": "63"})
    assert result["outcome"].startswith("failed: storage service: restart "), result
    assert "the original file was put back and the storage service restarted" in (result["outcome"])
    assert server.conf(STORAGE).read_bytes() == original
    assert workers(server, STORAGE) == 8 and server.targets() == {1: "Online", 2: "Online"}
    assert not BeegfsConfigChange.objects.exists()
    assert beegfs.restore(HOST, "storage") is None  # nothing left to put back


def test_a_run_on_its_own_storage_server_has_its_values_in_force_before_the_tool(
    server, alice, executing_bench
):
    # The run executes on stor1, which is also the testbed's storage server: its executor
    # applies the keys itself (no agent involved), then runs dd.
    from experiments.execution import execute
    from experiments.models import Run, TuningSet
    from tests.helpers.execution import make_matrix, queue

    tuning = TuningSet.objects.create(owner=alice, name="workers4")
    tuning.replace_params([("storage", "tuneNumWorkers", "4")])
    matrix = make_matrix(
        alice, executing_bench, tool="dd", params={"bs": "1m", "count": 2}, apply_tuning=True
    )
    matrix.tuning_sets.set([tuning])
    Run.objects.filter(matrix=matrix).update(tuning_set=tuning)
    run = matrix.runs.get()
    assert execute.execute(run.pk, queue(run), "w@test") == Run.Status.SUCCEEDED
    run.refresh_from_db()
    answer = run.effective_config["beegfs"]["stor1"]
    assert answer["outcome"] == beegfs.IN_FORCE
    assert answer["services"]["storage"]["keys"] == [
        {"key": "tuneNumWorkers", "before": None, "asked": "4", "in_force": "4"}
    ]
    applied = {a["key"]: a["result"] for a in run.effective_config["applied"]}
    assert applied["storage.tuneNumWorkers"].startswith("not a setting of this node")
    assert workers(server, STORAGE) == 4
    assert run.metrics.get(name="write_bw", primary=True).value > 0
    # The run ended and belongs to a matrix with nothing left: the agent restores.
    job = beegfs.BeegfsTuning(["stor1"])
    job.started = True
    job.tick([])
    assert workers(server, STORAGE) == 8
    assert BeegfsConfigChange.objects.get().restored_at is not None
