"""One path from raw output to a stored run (experiments.results.store): executed, imported, pushed
and reparsed runs of the same output store the same metrics and parameters, and reparse keeps
what a run was launched with."""

from __future__ import annotations

import argparse
import os
import shutil
import uuid
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from experiments.execution import execute
from experiments.matrices.expansion import expand
from experiments.models import Matrix, Run, Target
from experiments.results.importing import import_output
from runners import push
from runners.params import normalise
from tests.helpers.api import token_client
from tests.helpers.samples import SAMPLES, read_sample

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(shutil.which("dd") is None, reason="dd is not installed"),
]


def make_matrix(owner, testbed, tool, params, axes=()):
    matrix = Matrix.objects.create(
        owner=owner,
        name=f"{tool} test",
        tool=tool,
        fixed_params=params,
        axes=list(axes),
        repetitions=1,
    )
    matrix.testbeds.set([testbed])
    expand(matrix)
    return matrix


def execute_run(run: Run) -> Run:
    """Queue ``run`` and let the executor run it here, as a worker does."""
    token = uuid.uuid4()
    Run.objects.filter(pk=run.pk).update(status=Run.Status.QUEUED, dispatch_token=token)
    assert execute.execute(run.pk, str(token), "w@test") == Run.Status.SUCCEEDED
    return Run.objects.get(pk=run.pk)


def stored(run: Run) -> tuple[dict, list[tuple]]:
    """A run's parameters and metrics (name, value, unit, stat, iteration, primary, extra)."""
    run = Run.objects.get(pk=run.pk)
    metrics = sorted(
        (m.name, m.value, m.unit, m.stat, m.iteration, m.primary, sorted(m.extra.items()))
        for m in run.metrics.all()
    )
    return run.params, metrics


def test_reparse_keeps_what_an_executed_dd_read_run_was_launched_with(alice, executing_bench):
    """Issue 13: reparse of an executed dd read run kept only what the output states (the
    direction, bs, tuning: and target values were lost) and, without the launch's op hint,
    renamed read_bw to bw."""
    Target.objects.filter(testbed=executing_bench).update(
        name="t1", path=executing_bench.benchmark_dir
    )
    matrix = make_matrix(
        alice,
        executing_bench,
        "dd",
        {"direction": "read", "bs": "64k", "count": 16, "tuning:os.vm.dirty_ratio": 20},
        axes=[{"param": "target", "values": ["t1"]}],
    )
    run = execute_run(matrix.runs.get())
    launched = {
        "direction": "read",
        "bs": "64k",
        "count": 16,
        "tuning:os.vm.dirty_ratio": 20,
        "target": "t1",
    }
    params, metrics = stored(run)
    assert params.items() >= normalise(launched).items()
    # What dd's output states: 16 blocks of 64 KiB read, one process.
    assert (params["aggregate_size"], params["transfer_size"], params["threads"]) == (
        16 * 65536,
        65536,
        1,
    )
    assert {m[0] for m in metrics} == {"read_bw", "elapsed"}

    call_command("reparse", "--run", str(run.uuid))

    assert stored(run) == (params, metrics)
    assert Run.objects.get(pk=run.pk).parse_error == ""


# --- One output, four paths ----------------------------------------------------------------

# Each case: a real output, the tool, the direction a dd import names, the matrix parameters
# of an executed run, and what the output states, read from the file by hand.
#
# dd-old-coreutils-1G-read-to-dev-null-no-GiB.txt:
#   1024+0 records in / 1024+0 records out
#   1073741824 bytes (1.1 GB) copied, 12.4397 s, 86.3 MB/s
DD_READ = {
    "file": "dd/dd-old-coreutils-1G-read-to-dev-null-no-GiB.txt",
    "tool": "dd",
    "op": "read",
    "launched": {"direction": "read", "bs": "1m", "count": 1024},
    "stated": {
        "threads": 1,
        "block_size": 1073741824,
        "aggregate_size": 1073741824,
        "file_size": 1073741824,
        "transfer_size": 1073741824 // 1024,
        "rw": "read",
    },
    # (name, unit, stat): value; all primary
    "metrics": {
        ("read_bw", "B/s", "value"): 1073741824 / 12.4397,
        ("elapsed", "s", "value"): 12.4397,
    },
}
# fio-3.6-json-randread-4k-qd1-ceph.json, job "random-read": job options rw=randread, bs=4k,
# ioengine=libaio, iodepth=1, direct=1, runtime=60, numjobs=1; read: io_bytes 351502336,
# runtime 60001 ms, iops 1430.242829, clat_ns mean 644742.954682, max 2498223.
FIO_RANDREAD = {
    "file": "fio/fio-3.6-json-randread-4k-qd1-ceph.json",
    "tool": "fio",
    "op": None,
    "launched": {"rw": "randread", "bs": "4k", "iodepth": 1, "direct": True, "runtime": 60},
    "stated": {
        "threads": 1,
        "direct": True,
        "iodepth": 1,
        "ioengine": "libaio",
        "runtime": 60.0,
        "rw": "randread",
        "transfer_size": 4096,
    },
    "metrics": {
        ("read_bw", "B/s", "value"): 351502336 / 60.001,
        ("read_iops", "op/s", "value"): 1430.242829,
        ("read_lat", "s", "mean"): 644742.954682e-9,
        ("read_lat", "s", "max"): 2498223e-9,
    },
}
PRIMARY = {"dd": {"read_bw", "elapsed"}, "fio": {"read_bw", "read_iops", "read_lat"}}

FAKE_TOOL = """#!/bin/sh
# Stands in for {tool}: prints a real output of it ({sample}).
if [ "$1" = "--version" ]; then echo "{tool} (stand-in)"; exit 0; fi
cat '{sample}' >&{fd}
"""


def fake_tool(tmp_path: Path, monkeypatch, tool: str, sample: Path) -> None:
    """Put a ``tool`` on PATH that prints ``sample`` as the real one prints its result (dd on
    stderr, fio on stdout), so the executor runs, stores and parses exactly that output."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / tool
    script.write_text(FAKE_TOOL.format(tool=tool, sample=sample, fd=2 if tool == "dd" else 1))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


@pytest.mark.parametrize("case", [DD_READ, FIO_RANDREAD], ids=["dd-read", "fio-randread"])
def test_one_output_stores_the_same_run_executed_imported_pushed_and_reparsed(
    case, alice, alice_client, executing_bench, tmp_path, monkeypatch
):
    path = SAMPLES / case["file"]
    text = read_sample(case["file"])
    tool, op = case["tool"], case["op"]

    # Executed: a matrix run that the executor runs, with a stand-in printing the output.
    fake_tool(tmp_path, monkeypatch, tool, path)
    matrix = make_matrix(alice, executing_bench, tool, case["launched"])
    executed = execute_run(matrix.runs.get())
    assert executed.raw_output == text

    # Imported in the browser (the direction named for dd, as a user would).
    response = alice_client.post(
        reverse("experiments:run_import"),
        {
            "action": "save",
            "testbed": executing_bench.uuid,
            "tool": "",
            "op": op or "",
            "label": "",
            "item_name": path.name,
            "item_text": text,
        },
    )
    assert response.status_code == 302
    imported = Run.objects.get(status=Run.Status.IMPORTED, owner=alice, client_key=None)

    # Pushed: the items beeweb-push sends for the file, once as they are and once with the
    # parameters the executed run was launched with, through POST /api/runs/bulk/.
    args = argparse.Namespace(
        files=[str(path)], key=None, label=None, testbed="bench", tuning=None, tool=None, op=op
    )
    ((_, item),) = push.build_items(args)
    with_params = {**item, "key": "with-params", "params": case["launched"]}
    answer = token_client(alice).post("/api/runs/bulk/", [item, with_params], format="json")
    assert answer.status_code == 200 and answer.json()["created"] == 2, answer.json()
    pushed, pushed_with_params = (Run.objects.get(uuid=r["uuid"]) for r in answer.json()["results"])

    runs = {
        "executed": (executed, case["launched"]),
        "imported": (imported, {}),
        "pushed": (pushed, {}),
        "pushed with params": (pushed_with_params, case["launched"]),
    }
    before = {}
    for name, (run, launched) in runs.items():
        params, metrics = stored(run)
        assert Run.objects.get(pk=run.pk).parse_error == "", name
        assert params == normalise({**case["stated"], **launched}), name
        headline = {(m[0], m[2], m[3]): m[1] for m in metrics if m[4] is None and m[5]}
        assert {m[0] for m in metrics if m[5]} == PRIMARY[tool], name
        for key, value in case["metrics"].items():
            found = headline.get(key) or next(
                m[1] for m in metrics if (m[0], m[2], m[3]) == key and m[4] is None
            )
            assert found == pytest.approx(value, rel=1e-9), (name, key)
        before[name] = (params, metrics)
    # The same metrics (names, values, units, stats, primary, details) whichever way.
    assert len({repr(metrics) for _, metrics in before.values()}) == 1, before
    assert before["executed"][0] == before["pushed with params"][0]

    call_command("reparse")
    for name, (run, _) in runs.items():
        assert stored(run) == before[name], name


def test_reparse_keeps_the_parameters_of_a_run_executed_before_launches_recorded_them(
    alice, executing_bench
):
    """A dd read run executed before ``launch["params"]`` existed: its parameters are the
    executor's merge (matrix over output), and reparse keeps every one of them."""
    matrix = make_matrix(alice, executing_bench, "dd", {"direction": "read", "bs": "1m"})
    text = read_sample(DD_READ["file"])
    params = {**DD_READ["stated"], "direction": "read", "bs": "1m"}
    run = matrix.runs.get()
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.SUCCEEDED,
        raw_output=text,
        params=params,
        launch={**run.launch, "parse_options": {"op": "read"}},
    )
    call_command("reparse", "--run", str(run.uuid))
    run_params, metrics = stored(run)
    assert run_params == normalise(params)
    assert [m[0] for m in metrics if m[5]] == ["elapsed", "read_bw"]


def test_explicit_metrics_are_never_replaced_by_a_reparse(alice, testbed):
    """A bulk item with both raw output and metrics: the client's metrics win, also later."""
    text = read_sample(DD_READ["file"])
    item = {
        "testbed": "bench",
        "tool": "dd",
        "raw_output": text,
        "metrics": [{"name": "read_bw", "value": 86.3e6}],
    }
    answer = token_client(alice).post("/api/runs/bulk/", [item], format="json")
    run = Run.objects.get(uuid=answer.json()["results"][0]["uuid"])
    call_command("reparse")
    assert stored(run) == ({}, [("read_bw", 86.3e6, "B/s", "value", None, True, [])])


def test_a_failed_reparse_keeps_what_the_output_yielded(testbed):
    text = read_sample(DD_READ["file"])
    run = import_output(text, testbed=testbed, op="read")
    before = stored(run)
    Run.objects.filter(pk=run.pk).update(tool="ior")  # a parser that no longer reads it
    call_command("reparse", "--run", str(run.uuid))
    assert stored(run) == before
    assert "ior" in Run.objects.get(pk=run.pk).parse_error


def test_reparse_of_a_dd_import_stored_before_launches_recorded_options_keeps_its_direction(
    testbed,
):
    """An import of dd output with op=read stored before ``launch["parse_options"]``: the
    direction its earlier parse found (rw) is parsed again, so read_bw stays read_bw."""
    run = import_output(read_sample(DD_READ["file"]), testbed=testbed, op="read")
    before = stored(run)
    Run.objects.filter(pk=run.pk).update(launch={})
    call_command("reparse", "--run", str(run.uuid))
    assert stored(run) == before
