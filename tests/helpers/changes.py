"""Stored run histories for the change-point tests (tests/changes, the API, hostile and
browser tests), and what the end-to-end tests with real fio runs share."""

from __future__ import annotations

import json
from datetime import timedelta

import numpy as np
from django.utils import timezone

from experiments.models import Run
from experiments.results.store import replace_metrics

T0 = timezone.now() - timedelta(days=60)


def node_config(kernel: str = "6.1.0-18-amd64", scheduler: str = "mq-deadline", **sysctl) -> dict:
    return {
        "hostname": "stor1",
        "kernel": kernel,
        "machine": "x86_64",
        "cpus": 48,
        "sysctl": {"vm.dirty_ratio": "20", **sysctl},
        "mount": {"mount_point": "/mnt/beegfs", "fstype": "beegfs", "source": "beegfs_nodev",
                  "options": "rw,relatime"},
        "device": {"name": "nvme0n1", "scheduler": scheduler, "read_ahead_kb": "128"},
        "run_dir": "/tmp/run-x",
    }  # fmt: skip


def make_history(testbed, owner, values, configs, *, tuning_set=None, matrix=None, order=None,
                 start=T0, params=None, metric="write_bw", tool_versions=None):  # fmt: skip
    """Runs of one configuration, the i-th started at ``start`` + i hours with ``values[i]``
    (B/s) and ``configs[i]`` as its effective configuration; created in ``order`` (an import
    of an old history arrives in any order). The runs in time order."""
    runs = [None] * len(values)
    for i in order if order is not None else range(len(values)):
        run = Run.objects.create(
            owner=owner,
            testbed=testbed,
            tool="fio",
            status="succeeded",
            params=params or {"rw": "write", "bs": "1m", "numjobs": 4},
            tuning_set=tuning_set,
            matrix=matrix,
            started_at=start + timedelta(hours=i),
            finished_at=start + timedelta(hours=i, minutes=5),
            effective_config=configs[i],
            tool_version=(tool_versions or {}).get(i, "fio-3.33"),
            nodes_held=["stor1"],
            bottleneck="disk" if values[i] > 1.5e9 else "network",
        )
        replace_metrics(run, [{"name": metric, "value": float(values[i]), "unit": "B/s"}])
        runs[i] = run
    return runs


def noisy(seed: int, *parts: tuple[float, int], cv: float = 0.03) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(v) for mean, n in parts for v in rng.normal(mean, mean * cv, n)]


# Sequential 4 KiB buffered reads (fio drops the file's cached pages before reading:
# invalidate=1): with read-ahead the disk sees large requests, without it one per 4 KiB.
READ_MATRIX = """\
name: nightly read
tool: fio
testbeds: [localhost]
tuning_sets: [nightly]
apply_tuning: true
repetitions: 4
drop_caches: false
timeout_s: 300
params: {rw: read, bs: 4k, size: 32m, direct: false}
"""


def change_points(stack) -> list[dict]:
    return json.loads(
        stack.shell(
            "import json; from experiments.models import ChangePoint\n"
            "print(json.dumps([c.as_api() for c in ChangePoint.objects.order_by('at')]))"
        )
    )
