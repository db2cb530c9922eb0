"""Cost of keeping the configuration summaries (experiments.results.summaries) as runs land, on the
bench database (issue 17):

- an executed run: ``--runs`` runs appended one at a time (``replace_metrics``, what the
  executor's parse does) to ONE configuration that already holds ``--history`` runs (the
  1,000 identical dd runs of bench/dispatch.py);
- a bulk-ingest batch: ``--batches`` batches of ``--batch`` runs (``experiments.results.ingest``
  in process, 7 metrics each) into configurations that already hold runs.

    .venv/bin/python bench/summaries.py [--history 1000] [--runs 200] [--batch 500] [--batches 4]

For each, the CPU time and queries of the summaries' maintenance alone (the calls into
experiments.results.summaries, timed around them: this process's CPU and its PostgreSQL backend's,
from /proc) and of the whole store call, per run or per batch. The machine is shared: CPU
times, not the wall clock, are the figures. The runs it adds (testbed "bench-summaries")
are deleted at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common  # noqa: E402

TESTBED = "bench-summaries"
METRICS = [
    ("write_bw", "B/s"),
    ("read_bw", "B/s"),
    ("write_iops", "op/s"),
    ("read_iops", "op/s"),
    ("write_lat", "s"),
    ("read_lat", "s"),
    ("elapsed", "s"),
]


def _ticks(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Meter:
    """CPU (this process by time.process_time, the backend by /proc ticks) and queries of
    the calls wrapped, summed."""

    def __init__(self, backend: int) -> None:
        self.backend = backend
        self.cpu = self.db = 0.0
        self.queries = 0
        self.depth = 0

    def wrap(self, module, name: str) -> None:
        original = getattr(module, name)
        meter = self

        def timed(*args, **kwargs):
            from django.db import connection

            if meter.depth:
                return original(*args, **kwargs)
            meter.depth += 1
            before = (time.process_time(), _ticks(meter.backend), len(connection.queries))
            try:
                return original(*args, **kwargs)
            finally:
                meter.cpu += time.process_time() - before[0]
                meter.db += _ticks(meter.backend) - before[1]
                meter.queries += len(connection.queries) - before[2]
                meter.depth -= 1

        setattr(module, name, timed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--batches", type=int, default=4)
    args = parser.parse_args()
    common.ensure_database()
    common.setup_django()

    from django.contrib.auth import get_user_model
    from django.db import connection, reset_queries
    from django.test.utils import CaptureQueriesContext

    from experiments.models import Run, Testbed
    from experiments.results import summaries
    from experiments.results.ingest import ingest
    from experiments.results.store import replace_metrics

    user, _ = get_user_model().objects.get_or_create(username="bench-summaries")
    Run.objects.filter(testbed__name=TESTBED).delete()
    testbed, _ = Testbed.objects.get_or_create(owner=user, name=TESTBED)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    meter = Meter(backend)
    for name in ("_flush", "add", "refresh", "settle"):
        if hasattr(summaries, name):
            meter.wrap(summaries, name)

    def dd(i: int) -> list[dict]:
        return [
            {"name": "write_bw", "value": 1.0e9 + (i % 7) * 1e6, "unit": "B/s"},
            {"name": "elapsed", "value": 1.0 + (i % 3) * 0.01, "unit": "s"},
        ]

    params = {"bs": "1M", "count": 64, "oflag": "direct"}
    # The configuration's history, stored in batches (bulk ingest).
    history = [
        {"testbed": TESTBED, "tool": "dd", "params": params, "metrics": dd(i)}
        for i in range(args.history)
    ]
    for start in range(0, len(history), 500):
        ingest(history[start : start + 500], user)
    print(
        f"one configuration of {args.history:,} dd runs; load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )

    # Executed runs: one replace_metrics per run, as the executor's parse stores them.
    with CaptureQueriesContext(connection):
        meter.cpu = meter.db = 0.0
        meter.queries = 0
        whole_cpu = whole_db = 0.0
        whole_queries = 0
        walls = []
        for i in range(args.runs):
            run = Run.objects.create(
                owner=user, testbed=testbed, tool="dd", status="succeeded", params=params
            )
            reset_queries()
            before = (time.process_time(), _ticks(backend), time.perf_counter())
            replace_metrics(run, dd(i))
            whole_cpu += time.process_time() - before[0]
            whole_db += _ticks(backend) - before[1]
            walls.append(time.perf_counter() - before[2])
            whole_queries += len(connection.queries)
    n = args.runs
    print(
        f"executed runs ({n}, appended to the configuration): summaries "
        f"{meter.cpu / n * 1e3:.2f} ms CPU + {meter.db / n * 1e3:.2f} ms PostgreSQL backend, "
        f"{meter.queries / n:.1f} queries per run; whole replace_metrics "
        f"{whole_cpu / n * 1e3:.2f} + {whole_db / n * 1e3:.2f} ms CPU, "
        f"{whole_queries / n:.1f} queries, median wall {statistics.median(walls) * 1e3:.1f} ms; "
        f"load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )

    # Bulk ingest: batches into configurations that already hold runs (the same 70 keys).
    def batch(b: int) -> list[dict]:
        return [
            {
                "testbed": TESTBED,
                "tool": "fio",
                "params": {"threads": 2 ** (i % 7), "nodes": 1 + i % 10, "bs": "1m"},
                "metrics": [
                    {"name": name, "value": 1e9 + ((b * 31 + i * 7 + k) % 97) * 1e6, "unit": unit}
                    for k, (name, unit) in enumerate(METRICS)
                ],
            }
            for i in range(args.batch)
        ]

    results = ingest(batch(-1), user)  # the configurations exist
    if {r["status"] for r in results} != {"created"}:
        raise SystemExit(f"ingest failed: {results[:2]}")
    with CaptureQueriesContext(connection):
        meter.cpu = meter.db = 0.0
        meter.queries = 0
        whole_cpu = whole_db = 0.0
        for b in range(args.batches):
            items = batch(b)
            before = (time.process_time(), _ticks(backend))
            ingest(items, user)
            whole_cpu += time.process_time() - before[0]
            whole_db += _ticks(backend) - before[1]
    n = args.batches
    print(
        f"ingest batches ({n} x {args.batch} runs, 7 metrics, 70 configurations): summaries "
        f"{meter.cpu / n * 1e3:.1f} ms CPU + {meter.db / n * 1e3:.1f} ms PostgreSQL backend, "
        f"{meter.queries / n:.1f} queries per batch; whole ingest() "
        f"{whole_cpu / n * 1e3:.1f} + {whole_db / n * 1e3:.1f} ms CPU per batch; "
        f"load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    if hasattr(summaries, "settle"):
        before = (time.process_time(), _ticks(backend), time.perf_counter())
        settled = summaries.settle()
        print(
            f"settle: {settled} pending medians filled, "
            f"{(time.process_time() - before[0]) * 1e3:.1f} + "
            f"{(_ticks(backend) - before[1]) * 1e3:.1f} ms CPU",
            flush=True,
        )
    problems = summaries.differences(limit=5)
    print("summaries match the runs" if not problems else f"DIFFERENCES: {problems}")
    Run.objects.filter(testbed=testbed).delete()


if __name__ == "__main__":
    main()
