"""End to end: real fio runs on the localhost testbed, launched again and again by
``manage.py launch_matrix`` through a real worker; halfway, the tuning set the matrix applies is
edited (the device's read-ahead cut to nothing, which the node's policy lets runs apply).
The change point is found at the first run under the new tuning, and its differences name
what changed. (Scheduled launches and the e-mail/webhook delivery are the alerts' side.)"""

from __future__ import annotations

import json
import shutil
import socket

import pytest

from tests.helpers.changes import READ_MATRIX, change_points
from tests.labs import Stack

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed"),
]
HOST = socket.gethostname()
QUEUE = f"node.{HOST}"

LAUNCHES = 4  # two before the edit, two after: 12 runs either side
# Six runs a launch, not READ_MATRIX's four: buffered reads with read-ahead vary fourfold on
# some virtual disks (466-2,097 MB/s seen: the host's cache), and 8 such runs against 8
# without read-ahead (71-91 MB/s) left the permutation test at p = 0.01, the edge of alpha.
REPETITIONS = 6


def run_uuids(stack: Stack) -> list[tuple[str, float]]:
    """(uuid, read_bw) of every run, in the order they started."""
    return [
        tuple(row)
        for row in json.loads(
            stack.shell(
                "import json; from experiments.models import Metric\n"
                "rows = Metric.objects.filter(primary=True, name='read_bw')"
                ".order_by('run__started_at').values_list('run__uuid', 'value')\n"
                "print(json.dumps([[str(u), v] for u, v in rows]))"
            )
        )
    ]


def test_a_tuning_edit_halfway_is_found_and_named(localhost_stack, read_ahead, tmp_path):
    stack = localhost_stack
    path, before = read_ahead
    stack.shell(
        "from django.contrib.auth import get_user_model\n"
        "from experiments.models import TuningSet\n"
        "owner = get_user_model().objects.get(is_superuser=True)\n"
        "TuningSet.objects.create(owner=owner, name='nightly')"
        ".replace_params([('os', 'read_ahead_kb', '4096')])"
    )
    stack.worker(QUEUE, f"node@{HOST}", env={"BEEWEB_NODE_TUNING": "os.read_ahead_kb"})
    matrix = tmp_path / "nightly.yaml"
    matrix.write_text(READ_MATRIX.replace("repetitions: 4", f"repetitions: {REPETITIONS}"))
    for launch in range(LAUNCHES):
        if launch == LAUNCHES // 2:
            stack.shell(
                "from experiments.models import TuningSet\n"
                "TuningSet.objects.get(name='nightly')"
                ".replace_params([('os', 'read_ahead_kb', '0')])"
            )
        result = stack.manage(
            "launch_matrix", str(matrix), "--wait", "--timeout", "600", check=False, timeout=700
        )
        assert result.returncode == 0, (
            result.stdout + result.stderr + stack.worker_log(f"node@{HOST}")[-3000:]
        )
    assert path.read_text().strip() == before, "the read-ahead is restored after every run"
    runs = run_uuids(stack)
    assert len(runs) == LAUNCHES * REPETITIONS

    found = stack.manage("detect_changes", "--pending")
    # read_bw, read_iops and the mean latency: each headline metric of the runs.
    assert "analysed 3 configuration metrics" in found.stdout, found.stdout
    changes = change_points(stack)
    (cp,) = [c for c in changes if c["metric"] == "read_bw"]
    assert {c["run"] for c in changes} == {cp["run"]}, changes
    first_after = runs[len(runs) // 2]
    values = [v for _, v in runs]
    assert cp["run"] == first_after[0], (cp, values)
    assert cp["metric"] == "read_bw" and cp["state"] == "new"
    assert cp["before"]["n"] == cp["after"]["n"] == len(runs) // 2
    assert cp["after"]["mean"] < cp["before"]["mean"]
    items = {i["what"]: i for i in cp["differences"]["items"]}
    assert items["tuning set revision"]["before"] == "r1"
    assert items["tuning set revision"]["after"] == "r2"
    assert items["os.read_ahead_kb"] == {
        "area": "tuning", "what": "os.read_ahead_kb", "before": "4096", "after": "0"
    }  # fmt: skip
    # What the worker applied on its node, as the run recorded it.
    assert items[f"{HOST}: applied os.read_ahead_kb"]["before"] == "4096 (applied)"
    assert items[f"{HOST}: applied os.read_ahead_kb"]["after"] == "0 (applied)"
    assert "read_ahead_kb" in cp["differences"]["summary"]
    print(
        f"\nread_bw before {cp['before']['mean'] / 1e6:.0f} MB/s (n {cp['before']['n']}), "
        f"after {cp['after']['mean'] / 1e6:.0f} MB/s (n {cp['after']['n']}), "
        f"p {cp['p_value']}; differences: {cp['differences']['summary']}"
    )
    # A run landing later is analysed by the same sweep; the change is not found twice.
    again = stack.manage("detect_changes", "--pending")
    assert "analysed 0" in again.stdout
