"""Server time and page weight of the comparison page, on the published data and on 10,000
runs. Standalone (imports nothing else from bench/).

    .venv/bin/python bench/compare_page.py                  # throwaway SQLite database
    .venv/bin/python bench/compare_page.py --configured     # the configured database
    .venv/bin/python bench/compare_page.py --database-url postgres://beeweb@127.0.0.1/x
    .venv/bin/python bench/compare_page.py --markdown       # also a table for RESULTS.md

By default everything happens in a throwaway SQLite database in a temporary directory.
``--configured`` uses the database of the environment (DATABASE_URL or the embedded
default): the published data is loaded (idempotent) and the generated runs, labelled
``bench-compare``, are deleted at the end unless ``--keep``. ``--database-url`` names a
dedicated database to use the same way (never the dev database "beeweb").

For each scenario it prints the median server time of N GET requests made in-process with
django.test.Client (a signed-in user, full page, no network), the bytes of the HTML (which
carries the chart data inline) and of the chart data alone, and the number of SQL queries.
On PostgreSQL the generated rows are ANALYZEd before measuring, as autovacuum would.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
LABEL = "bench-compare"

SCENARIOS = [
    (
        "Arm vs x86 vs POWER, write by threads, baseline x86",
        "metric=write_bw&x=param:threads&series=arch&baseline=x86_64",
    ),
    (
        "RAID0 vs RAID10, dd per device, baseline RAID10",
        "metric=write_bw&x=tool&series=raid&tool=dd&baseline=10",
    ),
    (
        "write+read by threads, per storage server, Arm vs x86 filter",
        "metric=write_bw&metric=read_bw&x=param:threads&series=arch&f=arch:aarch64"
        "&f=arch:x86_64&norm=server&baseline=x86_64",
    ),
    (
        "as the first, every run drawn as a point",
        "metric=write_bw&x=param:threads&series=arch&baseline=x86_64&reps=1",
    ),
]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=15, help="timed requests per page")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--configured",
        action="store_true",
        help="use the configured database instead of a throwaway one",
    )
    where.add_argument("--database-url", help="a dedicated database to use")
    parser.add_argument("--keep", action="store_true", help="keep the generated runs")
    parser.add_argument(
        "--markdown",
        action="store_true",
        help="also print the figures as a Markdown table (bench/RESULTS.md)",
    )
    return parser.parse_args()


def setup(args: argparse.Namespace) -> str:
    sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = "beeweb.settings"
    os.environ.setdefault("SECRET_KEY", "bench-compare-page")
    if args.database_url:
        name = urlparse(args.database_url).path.strip("/").rsplit("/", 1)[-1]
        if name in {"beeweb", "postgres", "template0", "template1"}:
            raise SystemExit(f"refusing to use database {name!r}: give a dedicated one")
        os.environ["DATABASE_URL"] = args.database_url
        where = args.database_url
    elif not args.configured:
        tmp = tempfile.mkdtemp(prefix="beeweb-compare-bench-")
        os.environ.pop("DATABASE_URL", None)
        os.environ["BEEWEB_DATA_DIR"] = tmp
        where = f"throwaway SQLite in {tmp}"
    else:
        where = "configured database"
    import django

    django.setup()
    from django.core.management import call_command
    from django.test.utils import setup_test_environment

    setup_test_environment()
    call_command("migrate", verbosity=0, interactive=False)
    call_command("load_published", verbosity=0)
    return where


def generate(n: int) -> None:
    """n finished runs over the published testbeds' storage-server architectures: threads
    1..256, three repetitions per cell, write_bw and read_bw as headline values plus per-job
    details (as fio stores them)."""
    import random

    from django.db import connection, transaction

    from experiments.models import Metric, Run, Testbed
    from experiments.results.store import mark_primary

    rng = random.Random(42)
    testbeds = list(Testbed.objects.filter(members__storage=True).distinct().order_by("pk"))
    threads = [2**k for k in range(9)]
    runs = []
    for i in range(n):
        tb = testbeds[i % len(testbeds)]
        runs.append(
            Run(
                testbed=tb,
                tool="fio",
                status="succeeded",
                label=LABEL,
                params={
                    "threads": threads[(i // len(testbeds)) % len(threads)],
                    "numjobs": 1 + i % 4,
                    "size": "8g",
                    "bs": "1m",
                    "direct": True,
                    "repetition": i % 3,
                },
            )
        )
    with transaction.atomic():
        Run.objects.bulk_create(runs, batch_size=1000)
        created = Run.objects.filter(label=LABEL).values_list("pk", "params")
        metrics = []
        for pk, params in created:
            base = 1e9 * (1 + params["threads"] ** 0.5) * rng.uniform(0.9, 1.1)
            rows = [
                Metric(run_id=pk, name="write_bw", value=base, unit="B/s"),
                Metric(run_id=pk, name="read_bw", value=base * 1.3, unit="B/s"),
                Metric(run_id=pk, name="write_bw", value=base / 2, unit="B/s", extra={"job": "j0"}),
                Metric(run_id=pk, name="read_bw", value=base / 2, unit="B/s", extra={"job": "j0"}),
            ]
            metrics += mark_primary(rows)
        Metric.objects.bulk_create(metrics, batch_size=2000)
    if connection.vendor == "postgresql":
        # Planner statistics for the new rows, as autovacuum would gather after a bulk load
        # (and bench/generate.py does): without them PostgreSQL plans for ~15 rows.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE experiments_run")
            cursor.execute("ANALYZE experiments_metric")


def measure(client, query: str, repeat: int) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    url = f"/compare/?{query}"
    response = client.get(url)  # warm-up: templates, URL resolver, database caches
    assert response.status_code == 200, response.status_code
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(url)
        samples.append(time.perf_counter() - started)
    with CaptureQueriesContext(connection) as queries:
        client.get(url)
    html = response.content
    match = re.search(
        rb'<script id="chart-data" type="application/json">(.*?)</script>', html, re.S
    )
    return {
        "ms": statistics.median(samples) * 1000,
        "html": len(html),
        "chart": len(match.group(1)) if match else 0,
        "queries": len(queries),
    }


def report(title: str, client, repeat: int, runs: int) -> list[tuple[str, dict]]:
    print(f"\n{title} ({runs:,} runs with metrics)")
    print(
        f"  {'scenario':<62} {'median ms':>9} {'HTML bytes':>11} {'chart bytes':>11} {'queries':>7}"
    )
    rows = []
    for name, query in SCENARIOS:
        m = measure(client, query, repeat)
        rows.append((name, m))
        print(f"  {name:<62} {m['ms']:>9.1f} {m['html']:>11,} {m['chart']:>11,} {m['queries']:>7}")
    return rows


def markdown(tables: list[tuple[str, list[tuple[str, dict]]]], vendor: str) -> None:
    """The figures as one Markdown table, ready to paste into bench/RESULTS.md."""
    print(f"\n| Data ({vendor}) | Scenario | Median ms | HTML bytes | Chart bytes | Queries |")
    print("|---|---|---:|---:|---:|---:|")
    for title, rows in tables:
        for name, m in rows:
            print(
                f"| {title} | {name} | **{m['ms']:,.0f}** | {m['html']:,} | {m['chart']:,} "
                f"| {m['queries']} |"
            )


def main() -> None:
    args = parse_args()
    where = setup(args)
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from experiments.models import Run

    print(
        f"beeweb comparison page bench: {where} ({connection.vendor}), "
        f"median of {args.requests} requests, django.test.Client in-process"
    )
    user, _ = get_user_model().objects.get_or_create(username="bench-compare")
    client = Client()
    client.force_login(user)
    Run.objects.filter(label=LABEL).delete()
    with_metrics = Run.objects.filter(metrics__primary=True).distinct().count
    tables = [("published", report("Published data", client, args.requests, with_metrics()))]
    started = time.perf_counter()
    generate(args.runs)
    print(f"\n(generated {args.runs:,} runs in {time.perf_counter() - started:.1f} s)")
    tables.append(
        (
            f"+ {args.runs:,} runs",
            report(
                f"Published data + {args.runs:,} generated runs",
                client,
                args.requests,
                with_metrics(),
            ),
        )
    )
    if args.markdown:
        markdown(tables, connection.vendor)
    if (args.configured or args.database_url) and not args.keep:
        Run.objects.filter(label=LABEL).delete()
        user.delete()


if __name__ == "__main__":
    main()
