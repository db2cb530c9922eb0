"""Cost of change-point detection as runs land, and of the history pages, on the bench
database (issue 29; ``generate.py --runs 1000000`` for the million runs):

- steady state: every configuration already analysed (its watermark, ChangeScan, written for
  every summary by one INSERT … SELECT, as a full ``detect_changes`` would leave it);
- one configuration of ``--history`` runs (fio, with a 30 % drop two thirds in) stored
  by the bulk ingest, analysed once;
- then ``--runs`` runs stored one at a time (``replace_metrics``, as the executor does) into
  it, each followed by the beat task's sweep (``scan.analyse_pending``): CPU (process and
  PostgreSQL backend, /proc) and wall time of the store and of the sweep, per run, and the
  sweep's query to find pending configurations alone (``scan.pending``) with nothing pending;
- the configuration's history page and its testbed's (Django test client, signed in), median
  of 9, and their query counts.

    BENCH_DB=beeweb_bench .venv/bin/python bench/changes.py [--history 1000] [--runs 20]

The runs, change points and watermarks it adds are deleted at the end.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common  # noqa: E402
from bench.summaries import _ticks  # noqa: E402

TESTBED = "bench-changes"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--keep", action="store_true", help="keep the runs it adds")
    args = parser.parse_args()
    common.ensure_database()
    common.setup_django()

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from experiments.changes import scan
    from experiments.models import ChangePoint, ChangeScan, ConfigSummary, Run, Testbed
    from experiments.results.ingest import ingest
    from experiments.results.store import replace_metrics

    user, _ = get_user_model().objects.get_or_create(username="bench-changes")
    Run.objects.filter(testbed__name=TESTBED).delete()
    testbed, _ = Testbed.objects.get_or_create(owner=user, name=TESTBED)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM experiments_run")
        total_runs = cursor.fetchone()[0]
        # Steady state: every configuration analysed up to its current count.
        cursor.execute("DELETE FROM experiments_changescan")
        cursor.execute(
            "INSERT INTO experiments_changescan (config_key, metric, n, scanned_at) "
            "SELECT config_key, name, n, now() FROM experiments_configsummary"
        )
    summaries = ConfigSummary.objects.count()
    print(
        f"{total_runs:,} runs, {summaries:,} configuration summaries (all analysed); "
        f"{common.machine()}",
        flush=True,
    )

    params = {"rw": "write", "bs": "1m", "numjobs": 4, "size": "1g"}

    def value(i: int) -> float:
        base = 2.0e9 if i < args.history * 2 // 3 else 1.4e9
        return base * (1 + ((i * 7919) % 61 - 30) / 1000)

    history = [
        {
            "testbed": TESTBED,
            "tool": "fio",
            "params": params,
            "metrics": [{"name": "write_bw", "value": value(i), "unit": "B/s"}],
        }
        for i in range(args.history)
    ]
    for start in range(0, len(history), 500):
        ingest(history[start : start + 500], user)
    # Their own start times, one hour apart (as an import of old output gives them).
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE experiments_run SET started_at = created - (interval '1 hour' * (%s - id))"
            " WHERE testbed_id = %s",
            [Run.objects.filter(testbed=testbed).order_by("-id").values_list("id")[0][0],
             testbed.pk],
        )  # fmt: skip
    # The parameters as stored (their normal form): the runs landing below join the
    # configuration.
    params = Run.objects.filter(testbed=testbed).values_list("params", flat=True).first()
    started = time.perf_counter()
    first = scan.analyse_pending()
    print(
        f"one configuration of {args.history:,} runs analysed: {first} in "
        f"{(time.perf_counter() - started) * 1e3:.0f} ms",
        flush=True,
    )

    for name, since in (("every summary", None), ("values since the watermark", scan._watermark())):
        walls = []
        for _ in range(9):
            t = time.perf_counter()
            scan.pending(None, since)
            walls.append(time.perf_counter() - t)
        print(
            f"finding pending configurations, nothing pending ({name}, {summaries:,} summaries):"
            f" median {common.median_ms(walls):.1f} ms",
            flush=True,
        )

    key0 = Run.objects.filter(testbed=testbed).values_list("config_key", flat=True).first()
    store = {"cpu": 0.0, "db": 0.0, "wall": []}
    sweep = {"cpu": 0.0, "db": 0.0, "wall": [], "queries": 0}
    for i in range(args.runs):
        run = Run.objects.create(
            owner=user, testbed=testbed, tool="fio", status="succeeded", params=params
        )
        before = (time.process_time(), _ticks(backend), time.perf_counter())
        replace_metrics(run, [{"name": "write_bw", "value": value(10**6 + i), "unit": "B/s"}])
        store["cpu"] += time.process_time() - before[0]
        store["db"] += _ticks(backend) - before[1]
        store["wall"].append(time.perf_counter() - before[2])
        with CaptureQueriesContext(connection) as queries:
            before = (time.process_time(), _ticks(backend), time.perf_counter())
            done = scan.analyse_pending()
            sweep["cpu"] += time.process_time() - before[0]
            sweep["db"] += _ticks(backend) - before[1]
            sweep["wall"].append(time.perf_counter() - before[2])
        sweep["queries"] += len(queries)
        if done["analysed"] != 1 or Run.objects.get(pk=run.pk).config_key != key0:
            raise SystemExit(f"expected one configuration analysed, got {done}")
    n = args.runs
    print(
        f"per run landed ({n}): store (replace_metrics) {store['cpu'] / n * 1e3:.1f} ms CPU + "
        f"{store['db'] / n * 1e3:.1f} ms PostgreSQL, median wall "
        f"{common.median_ms(store['wall']):.1f} ms; detection sweep "
        f"{sweep['cpu'] / n * 1e3:.1f} ms CPU + {sweep['db'] / n * 1e3:.1f} ms PostgreSQL, "
        f"{sweep['queries'] / n:.0f} queries, median wall {common.median_ms(sweep['wall']):.1f} ms;"
        f" load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )

    client = Client()
    client.force_login(user)
    key = (
        ConfigSummary.objects.filter(run__testbed=testbed)
        .order_by("-n")
        .values_list("config_key", flat=True)
        .first()
    )
    for name, url in (
        ("configuration history", f"/history/{key}/?metric=write_bw"),
        ("testbed history", f"/testbeds/{testbed.uuid}/history/"),
        ("inbox", "/changes/?state=all"),
    ):
        walls = []
        for _ in range(9):
            with CaptureQueriesContext(connection) as queries:
                t = time.perf_counter()
                answer = client.get(url)
                walls.append(time.perf_counter() - t)
            if answer.status_code != 200:
                raise SystemExit(f"{url}: {answer.status_code}")
        print(
            f"{name} page ({args.history + n:,} runs of the configuration): median "
            f"{common.median_ms(walls):.0f} ms, {len(queries)} queries, "
            f"{len(answer.content) // 1024} KB",
            flush=True,
        )
    found = ChangePoint.objects.filter(testbed=testbed).values_list("before_n", "after_n")
    print(f"change points (runs before, after): {list(found)}")

    if args.keep:
        print(f"kept: testbed {TESTBED}, configuration {key}")
        return
    ChangePoint.objects.filter(testbed=testbed).delete()
    Run.objects.filter(testbed=testbed).delete()
    ChangeScan.objects.all().delete()
    testbed.delete()


if __name__ == "__main__":
    main()
