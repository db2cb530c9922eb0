"""The runs table (/runs/table/) at a million runs (``bench/generate.py --runs 1000000``),
in-process against the bench database: every sort and filter the page offers (the default
view; sorts by a metric, a parameter and the testbed, both ways; filters by tool, testbed,
matrix, a metric range and a parameter, alone and with those sorts), first page and 50
"more" links in; the whole page (signed in, median of ``--repeat``), its size and queries,
beside its floor: the page's own SQL statements (captured from one request) run as plain SQL
on the same connection and fetched, as bench/lists.py does. Target: <= 100 ms, <= 300 KB.

Then the CSV export, which streams every run of a view a keyset page of 1,000 at a time:
its rate, the time to its first 1,000 rows, and how much the process grew while it ran
(it must not hold the export: ``--export-runs`` runs of it, all by default).

    .venv/bin/python bench/runs_table.py [--repeat 9] [--only TEXT] [--export-runs N]
        [--explain TEXT]   # plans of the views whose label contains TEXT
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common  # noqa: E402
from bench.queries import timed  # noqa: E402

DEEP = 50  # "more" links followed before the deep page


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--only", default="", help="only the views whose label contains this")
    parser.add_argument("--explain", default="", help="print the plans of these views")
    parser.add_argument("--export-runs", type=int, default=0, help="stop the export after N")
    parser.add_argument("--no-export", action="store_true")
    args = parser.parse_args()
    common.setup_django()

    from django.conf import settings
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from rest_framework.authtoken.models import Token

    from experiments.models import Matrix, Run, Testbed
    from experiments.shared import keyset

    settings.ALLOWED_HOSTS = ["*"]
    user = Token.objects.get(user__username="bench").user
    matrix = Matrix.objects.order_by("name")[len(Matrix.objects.all()) // 2]
    testbed = matrix.testbeds.get()
    print(
        f"database {common.DB_NAME}: about {keyset.estimate(Run.objects.all()):,} runs "
        f"(planner estimate), {Testbed.objects.count()} testbeds, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    cols = "param:threads,param:bs,metric:write_bw,metric:read_iops,testbed,created"
    one_tb, one_matrix = str(testbed.uuid), str(matrix.uuid)
    views: dict[str, dict] = {"default columns, newest first": {}}
    for sort in (
        "-metric:write_bw",
        "metric:read_iops",
        "-param:threads",
        "param:threads",
        "param:bs",
        "testbed",
        "-testbed",
        "-created",
    ):
        views[f"sort {sort}"] = {"cols": cols, "sort": sort}
    for label, filters in (
        ("tool=ior", {"tool": "ior"}),
        ("testbed=<one>", {"testbed": one_tb}),
        ("matrix=<one>", {"matrix": one_matrix}),
        ("m.write_bw=5..6 GB/s", {"m.write_bw": "5..6"}),
        ("p.threads=16", {"p.threads": "16"}),
        ("p.rw=read", {"p.rw": "read"}),
    ):
        for sort in ("-created", "-metric:write_bw", "-param:threads", "testbed"):
            views[f"{label}, sort {sort}"] = {"cols": cols, "sort": sort, **filters}
    views["p.threads=16 p.iodepth=4 tool=fio, sort -created"] = {
        "cols": cols,
        "p.threads": "16",
        "p.iodepth": "4",
        "tool": "fio",
    }
    views = {k: v for k, v in views.items() if args.only in k}

    web = Client()
    web.force_login(user)
    url = "/runs/table/"

    def measure(query: dict) -> tuple[float, float, int, int, list[str]]:
        ms, response = timed(lambda: web.get(url, query), args.repeat)
        assert response.status_code == 200, response.content[:300]
        with CaptureQueriesContext(connection) as ctx:
            web.get(url, query)
        statements = [q["sql"] for q in ctx.captured_queries]
        skip = ("SAVEPOINT", "RELEASE", "SET ")
        statements = [s for s in statements if not s.lstrip().upper().startswith(skip)]

        def plain():
            with connection.cursor() as cursor:
                for sql in statements:
                    cursor.execute(sql)
                    cursor.fetchall()

        floor_ms, _ = timed(plain, args.repeat)
        return ms, floor_ms, len(response.content), len(statements), statements

    def more(query: dict) -> dict | None:
        """The view 50 "more" links in, as the page's links lead there."""
        deep = dict(query)
        for _ in range(DEEP):
            body = web.get(url, deep).content.decode()
            marker = 'id="runs-more"'
            if marker not in body:
                return None
            href = body[: body.index(marker)]
            href = href[href.rindex('<a href="') + 9 :]
            href = href[: href.index('"')].replace("&amp;", "&")
            deep = dict(parse_qsl(urlsplit(href).query))
        return deep

    print(
        f"{'view':<52} {'page':>8} {'floor':>8} {'KB':>6} {'q':>3}   "
        f"{'page 51':>8} {'floor':>8}  target <= 100 ms, <= 300 KB"
    )
    worst = 0.0
    for label, query in views.items():
        ms, floor_ms, size, n, statements = measure(query)
        deep = more(query)
        deep_text = f"{'(end)':>8} {'':>8}"
        if deep is not None:
            deep_ms, deep_floor, _, _, _ = measure(deep)
            worst = max(worst, deep_ms)
            deep_text = f"{deep_ms:8.1f} {deep_floor:8.1f}"
        worst = max(worst, ms)
        print(
            f"{label:<52} {ms:8.1f} {floor_ms:8.1f} {size / 1000:6.0f} {n:3d}   {deep_text}",
            flush=True,
        )
        if args.explain and args.explain in label:
            with connection.cursor() as cursor:
                for sql in statements:
                    if not sql.lstrip().upper().startswith(("SELECT", "WITH")):
                        continue
                    cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
                    plan = "\n    ".join(row[0] for row in cursor.fetchall())
                    print(f"  {sql[:200]}\n    {plan}")
    print(f"slowest page: {worst:.1f} ms; load average {os.getloadavg()[0]:.1f}")
    if args.no_export:
        return
    # The export streams every run of a view: its rate, the time to its first 1,000 rows and
    # how much this process grew meanwhile (its peak RSS, from /proc and getrusage).
    for label in ("sort -param:threads", "p.threads=16, sort -created", "sort testbed"):
        if label not in views:
            continue
        started, before = time.perf_counter(), rss_mb()
        peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1000
        response = web.get("/runs/table/runs.csv", views[label])
        size = lines = 0
        first = None
        for chunk in response.streaming_content:
            size += len(chunk)
            lines += chunk.count(b"\n")
            if first is None and lines > 1000:
                first = time.perf_counter() - started
            if args.export_runs and lines > args.export_runs:
                break
        elapsed = time.perf_counter() - started
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1000
        print(
            f"CSV export, {label}: {lines - 1:,} runs, {size / 1e6:.1f} MB in {elapsed:.1f} s "
            f"({(lines - 1) / elapsed:,.0f} runs/s; first 1,000 after "
            f"{(first or 0) * 1000:.0f} ms); RSS {before:.0f} -> {rss_mb():.0f} MB, "
            f"peak {peak_before:.0f} -> {peak:.0f} MB"
        )


if __name__ == "__main__":
    main()
