"""Slurm launch mode (runners.slurm) without a cluster: the argv of allocation and steps,
reading ``scontrol show job -o`` and salloc's messages (real output of Debian's slurm-wlm
22.05, captured from tests/labs/slurm-cluster.sh), what a Slurm-mode matrix may be (every
testbed needs a partition; only MPI tools span nodes), its launch spec and preview, and the
nodes such a run holds. The runs against a real slurmctld/slurmd: tests/test_slurm_e2e.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.execution import holding
from experiments.matrices.expansion import expand
from experiments.matrices.files import from_yaml
from experiments.matrices.preview import plan
from experiments.matrices.validation import MatrixInvalid
from experiments.models import Run, TestbedNode
from runners import slurm
from runners.launch import LaunchError, LaunchSpec
from runners.tools import get_adapter
from runners.tools.base import Host, LaunchContext, ParamError, mpi_launch

# scontrol show job -o, as the test cluster printed it (one line each; trailing space kept).
RUNNING = (
    "JobId=1 JobName=beeweb-run-1 UserId=root(0) GroupId=root(0) MCS_label=N/A "
    "Priority=4294901759 Nice=0 Account=(null) QOS=(null) JobState=RUNNING Reason=None "
    "Dependency=(null) Requeue=1 Restarts=0 BatchFlag=0 Reboot=0 ExitCode=0:0 RunTime=00:00:00 "
    "TimeLimit=00:01:00 TimeMin=N/A SubmitTime=2026-11-24T21:43:02 "
    "EligibleTime=2026-11-24T21:43:02 AccrueTime=Unknown StartTime=2026-11-24T21:43:02 "
    "EndTime=2026-11-24T21:44:02 Deadline=N/A SuspendTime=None SecsPreSuspend=0 "
    "LastSchedEval=2026-11-24T21:43:02 Scheduler=Main Partition=debug "
    "AllocNode:Sid=localhost:8188 ReqNodeList=(null) ExcNodeList=(null) NodeList=n[1-2] "
    "BatchHost=n1 NumNodes=2 NumCPUs=4 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:* "
    "TRES=cpu=4,node=2,billing=4 Socks/Node=* NtasksPerN:B:S:C=1:0:*:* CoreSpec=* "
    "MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 "
    "OverSubscribe=NO Contiguous=0 Licenses=(null) Network=(null) Command=(null) "
    "WorkDir=/tmp/h1 Power= \n"
)
TIMEOUT = (
    "JobId=2 JobName=beeweb-run-2 UserId=root(0) GroupId=root(0) MCS_label=N/A "
    "Priority=4294901758 Nice=0 Account=(null) QOS=(null) JobState=TIMEOUT Reason=TimeLimit "
    "Dependency=(null) Requeue=1 Restarts=0 BatchFlag=0 Reboot=0 ExitCode=0:0 RunTime=00:01:19 "
    "TimeLimit=00:01:00 TimeMin=N/A SubmitTime=2026-11-24T21:43:08 "
    "EligibleTime=2026-11-24T21:43:08 AccrueTime=Unknown StartTime=2026-11-24T21:43:08 "
    "EndTime=2026-11-24T21:44:27 Deadline=N/A SuspendTime=None SecsPreSuspend=0 "
    "LastSchedEval=2026-11-24T21:43:08 Scheduler=Main Partition=debug "
    "AllocNode:Sid=localhost:8188 ReqNodeList=(null) ExcNodeList=(null) NodeList=n1 "
    "BatchHost=n1 NumNodes=1 NumCPUs=2 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* "
    "TRES=cpu=2,node=1,billing=2 Socks/Node=* NtasksPerN:B:S:C=1:0:*:* CoreSpec=* "
    "MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 "
    "OverSubscribe=NO Contiguous=0 Licenses=(null) Network=(null) Command=(null) "
    "WorkDir=/tmp/h1 Power= \n"
)
PENDING = (
    "JobId=2 JobName=beeweb-run-8 UserId=root(0) GroupId=root(0) MCS_label=N/A "
    "Priority=4294901758 Nice=0 Account=(null) QOS=(null) JobState=PENDING Reason=Resources "
    "Dependency=(null) Requeue=1 Restarts=0 BatchFlag=0 Reboot=0 ExitCode=0:0 RunTime=00:00:00 "
    "TimeLimit=00:02:00 TimeMin=N/A SubmitTime=2026-11-24T22:05:35 "
    "EligibleTime=2026-11-24T22:05:35 AccrueTime=2026-11-24T22:05:35 StartTime=Unknown "
    "EndTime=Unknown Deadline=N/A SuspendTime=None SecsPreSuspend=0 "
    "LastSchedEval=2026-11-24T22:05:36 Scheduler=Main Partition=debug "
    "AllocNode:Sid=localhost:8188 ReqNodeList=(null) ExcNodeList=(null) NodeList= NumNodes=1-1 "
    "NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=1,mem=12052M,node=1,billing=1 "
    "Socks/Node=* NtasksPerN:B:S:C=1:0:*:* CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 "
    "MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 OverSubscribe=NO Contiguous=0 "
    "Licenses=(null) Network=(null) Command=(null) WorkDir=/tmp/h1 Power= \n"
)
CANCELLED = RUNNING.replace("JobState=RUNNING", "JobState=CANCELLED")


def test_parse_show_job_reads_state_reason_and_nodes():
    job = slurm.parse_show_job(RUNNING)
    assert (job.job_id, job.state, job.reason, job.nodelist) == ("1", "RUNNING", "None", "n[1-2]")
    assert job.live and job.describe() == "RUNNING"
    job = slurm.parse_show_job(TIMEOUT)
    assert (job.job_id, job.state, job.reason, job.nodelist) == ("2", "TIMEOUT", "TimeLimit", "n1")
    assert not job.live and job.describe() == "TIMEOUT (TimeLimit)"
    job = slurm.parse_show_job(PENDING)
    assert (job.state, job.reason, job.nodelist) == ("PENDING", "Resources", "")
    assert job.live
    assert not slurm.parse_show_job(CANCELLED).live


def test_parse_show_job_refuses_what_is_not_a_job():
    with pytest.raises(slurm.SlurmError, match="printed no job"):
        slurm.parse_show_job("slurm_load_jobs error: Invalid job id specified\n")
    with pytest.raises(slurm.SlurmError):
        slurm.parse_show_job("")


def test_job_id_from_sallocs_messages():
    assert slurm.job_id_in("salloc: Granted job allocation 1\n") == "1"
    assert slurm.job_id_in("salloc: Pending job allocation 2\n") == "2"
    assert slurm.job_id_in("salloc: job 2 queued and waiting for resources\n") is None


def test_salloc_argv():
    argv = slurm.salloc_argv(
        42, nodes=2, tasks_per_node=4, partition="debug", account="io-lab", timeout_s=61
    )
    assert argv == [
        "salloc",
        "--job-name=beeweb-run-42",
        "--nodes=2",
        "--ntasks-per-node=4",
        "--exclusive",
        "--partition=debug",
        "--account=io-lab",
        "--time=2",
        "cat",
    ]
    no_account = slurm.salloc_argv(1, nodes=1, tasks_per_node=1, partition="p", timeout_s=60)
    assert "--time=1" in no_account and not any(a.startswith("--account") for a in no_account)


@pytest.mark.parametrize(
    "field, value", [("partition", "-x"), ("partition", "a b"), ("account", "--uid=0")]
)
def test_salloc_argv_refuses_what_would_become_an_option(field, value):
    settings = {"nodes": 1, "tasks_per_node": 1, "partition": "debug", "timeout_s": 60}
    settings[field] = value
    with pytest.raises(ParamError):
        slurm.salloc_argv(1, **settings)


def test_minutes_round_up():
    assert [slurm.minutes(s) for s in (1, 59, 60, 61, 3600)] == [1, 1, 1, 2, 60]


def test_steps_of_single_and_mpi_tools(tmp_path: Path):
    step = slurm.step_argv("42", ["sync"], nodelist="n2")
    assert step == [
        "srun",
        "--jobid=42",
        "--nodes=1",
        "--ntasks=1",
        "--kill-on-bad-exit=1",
        "--nodelist=n2",
        "sync",
    ]
    with pytest.raises(ParamError):
        slurm.step_argv("42; rm", ["sync"])
    hosts = (Host("n1", "n1"), Host("n2", "n2"))
    ctx = LaunchContext(
        workdir=tmp_path,
        scratch=tmp_path,
        mode="mpi",
        hosts=hosts,
        tasks_per_node=4,
        slurm_job="42",
    )
    argv, files = mpi_launch(["ior", "-w"], ctx)
    assert argv == [
        "srun",
        "--jobid=42",
        "--mpi=pmix",
        "--nodes=2",
        "--ntasks-per-node=4",
        "--kill-on-bad-exit=1",
        "ior",
        "-w",
    ]
    assert files == {}  # no hostfile: Slurm places the ranks


def test_inner_modes():
    assert slurm.inner_mode(get_adapter("ior").modes) == "mpi"
    assert slurm.inner_mode(get_adapter("fio").modes) == "single"
    assert slurm.inner_mode(("multihost",)) is None


def test_a_dd_read_prepares_and_reads_as_steps(tmp_path: Path):
    ctx = LaunchContext(workdir=tmp_path, scratch=tmp_path, slurm_job="7")
    command = get_adapter("dd").build({"direction": "read", "bs": "1m", "count": 1}, ctx)
    stepped = slurm.as_steps(command, "7", "single")
    assert stepped.argv[:5] == [
        "srun",
        "--jobid=7",
        "--nodes=1",
        "--ntasks=1",
        "--kill-on-bad-exit=1",
    ]
    assert stepped.argv[5:] == command.argv
    assert [p[:2] for p in stepped.prepare] == [["srun", "--jobid=7"]]


def test_launch_spec_keeps_slurm_settings():
    spec = LaunchSpec(
        workdir="/mnt/b", launcher="l1", mode="slurm", partition="debug", account="a", nodes=3
    )
    again = LaunchSpec.read(spec.to_json())
    assert (again.mode, again.partition, again.account, again.nodes) == ("slurm", "debug", "a", 3)
    with pytest.raises(LaunchError, match="no partition"):
        LaunchSpec.read({"workdir": "/mnt/b", "mode": "slurm"})


SLURM_FIO = """\
name: slurm fio
tool: {tool}
launch_mode: slurm
testbeds: [bench]
repetitions: 1
params: {params}
"""


def test_slurm_mode_needs_a_partition_on_the_testbed(alice, bench):
    with pytest.raises(MatrixInvalid) as err:
        from_yaml(SLURM_FIO.format(tool="fio", params="{size: 8m}"), alice)
    assert err.value.errors == {
        "launch_mode": [
            "testbed 'bench' has no Slurm partition: set one on the testbed, or choose another "
            "launch mode"
        ]
    }


def test_single_process_tools_take_one_node_and_slurm_nodes_needs_slurm(alice, bench):
    bench.slurm_partition = "debug"
    bench.save()
    with pytest.raises(MatrixInvalid) as err:
        from_yaml(
            SLURM_FIO.format(tool="fio", params="{size: 8m}") + "axes: {slurm_nodes: [1, 2]}", alice
        )
    assert err.value.errors["axes"] == [
        "slurm_nodes: fio runs as one process in Slurm mode: one node only (MPI tools such as "
        "ior and mdtest span several)"
    ]
    text = SLURM_FIO.format(tool="fio", params="{size: 8m, slurm_nodes: 1}")
    with pytest.raises(MatrixInvalid) as err:
        from_yaml(text.replace("launch_mode: slurm", "launch_mode: single"), alice)
    assert err.value.errors["axes"] == ["slurm_nodes: applies to the Slurm launch mode only"]
    with pytest.raises(MatrixInvalid) as err:
        from_yaml(SLURM_FIO.format(tool="ior", params="{slurm_nodes: 0}"), alice)
    assert "slurm_nodes: 0 is below the minimum 1" in str(err.value)


def test_a_slurm_matrix_plans_runs_without_hosts_and_previews_its_steps(alice, bench):
    bench.slurm_partition = "debug"
    bench.slurm_account = "io-lab"
    bench.save()
    matrix = from_yaml(
        SLURM_FIO.format(tool="ior", params="{block_size: 4m}") + "axes: {slurm_nodes: [1, 2]}",
        alice,
    )
    planned = plan(matrix)
    assert all(not item.error for item in planned.active), [i.error for i in planned.active]
    specs = [LaunchSpec.read(item.launch) for item in planned.active]
    assert [(s.mode, s.partition, s.account, s.nodes, s.hosts) for s in specs] == [
        ("slurm", "debug", "io-lab", 1, ()),
        ("slurm", "debug", "io-lab", 2, ()),
    ]
    assert planned.active[1].argv[:7] == [
        "srun",
        "--jobid=<job>",
        "--mpi=pmix",
        "--nodes=2",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=1",
        "ior",
    ]
    expand(matrix)
    run = Run.objects.filter(matrix=matrix).order_by("pk").last()
    assert run.params["slurm_nodes"] == 2
    # The run holds its launcher (bench's client stor1), not the clients Slurm allocates,
    # even once an attempt recorded them as its hosts.
    run.launch = {**run.launch, "hosts": [["n1", "n1"], ["n2", "n2"]]}
    TestbedNode.objects.filter(testbed=bench).update(storage=False, metadata=False)
    assert holding.nodes_for(run) == ["stor1"]


def test_the_run_page_and_the_api_show_the_slurm_job(alice, alice_client, bench):
    from rest_framework.test import APIClient

    matrix = from_yaml(
        SLURM_FIO.format(tool="fio", params="{size: 8m}").replace(
            "launch_mode: slurm", "launch_mode: single"
        ),
        alice,
    )
    expand(matrix)
    run = Run.objects.get(matrix=matrix)
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.FAILED,
        error="Slurm ended job 42: TIMEOUT (TimeLimit)",
        slurm_job_id="42",
        slurm_state="TIMEOUT",
        slurm_reason="TimeLimit",
        slurm_nodes=["n1", "n2"],
    )
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert '<p id="slurm-job">Slurm job 42: TIMEOUT (TimeLimit) · allocated n1, n2</p>' in page
    api = APIClient()
    api.force_authenticate(alice)
    data = api.get(f"/api/runs/{run.uuid}/").json()
    assert (
        data["slurm_job_id"],
        data["slurm_state"],
        data["slurm_reason"],
        data["slurm_nodes"],
    ) == (
        "42",
        "TIMEOUT",
        "TimeLimit",
        ["n1", "n2"],
    )


@pytest.mark.parametrize("value", ["-p", "a b", "x;y", "--partition=all"])
def test_a_slurm_partition_that_could_become_an_option_is_a_400(alice, bench, value):
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(alice)
    url = f"/api/testbeds/{bench.uuid}/"
    response = api.patch(url, {"slurm_partition": value}, format="json")
    assert response.status_code == 400, response.content
    assert "slurm_partition" in response.json()
    response = api.patch(
        url, {"slurm_partition": "debug", "slurm_account": "io-lab"}, format="json"
    )
    assert response.status_code == 200, response.content
    bench.refresh_from_db()
    assert (bench.slurm_partition, bench.slurm_account) == ("debug", "io-lab")


def test_a_slurm_matrix_naming_an_unknown_testbed_is_a_400(alice):
    # Found by schemathesis: the Slurm check read the partition of a testbed the API had not
    # found (its raw id) and failed with a 500.
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(alice)
    response = api.post(
        "/api/matrices/",
        {
            "name": "slurm",
            "tool": "fio",
            "launch_mode": "slurm",
            "testbeds": ["05342ae1-b04b-4ec8-8f58-1b3c174ad57b"],
        },
        format="json",
    )
    assert response.status_code == 400, response.content
    assert "testbeds" in response.json()
