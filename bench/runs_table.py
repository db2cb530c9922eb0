"""The runs table (/runs/table/) at 100,000 runs, in-process against the bench database
(bench/generate.py first): median time of the page's query and of the whole page for the
default view and sorts by a metric, a parameter and a field, with and without filters, on the
first page and deep in the list (50 "more" links in, or the last page); the CSV export of
every run; and, on request, PostgreSQL's plans of named views.

    .venv/bin/python bench/runs_table.py [--repeat 9] [--explain "sort -metric:write_bw"]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common  # noqa: E402
from bench.queries import timed  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--explain", nargs="*", default=[], help="print these views' plans")
    args = parser.parse_args()
    common.setup_django()

    from django.conf import settings
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from rest_framework.authtoken.models import Token

    from experiments.comparison import runs_table
    from experiments.models import Matrix, Metric, Run

    settings.ALLOWED_HOSTS = ["*"]
    user = Token.objects.get(user__username="bench").user
    matrix = Matrix.objects.order_by("name")[len(Matrix.objects.all()) // 2]
    testbed = matrix.testbeds.get()
    runs, metrics = Run.objects.count(), Metric.objects.count()
    print(f"database {common.DB_NAME}: {runs:,} runs, {metrics:,} metrics")
    cols = "param:threads,param:bs,metric:write_bw,metric:read_iops,created"
    views = {
        "default columns, newest first": {},
        "sort -metric:write_bw": {"cols": cols, "sort": "-metric:write_bw"},
        "sort metric:read_iops": {"cols": cols, "sort": "metric:read_iops"},
        "sort -param:threads": {"cols": cols, "sort": "-param:threads"},
        "sort testbed": {"cols": cols, "sort": "testbed"},
        "tool=ior, sort -metric:write_bw": {
            "cols": cols,
            "sort": "-metric:write_bw",
            "tool": "ior",
        },
        "testbed=<one>, sort -metric:write_bw": {
            "cols": cols,
            "sort": "-metric:write_bw",
            "testbed": str(testbed.uuid),
        },
        "matrix=<one>, sort -metric:write_bw": {
            "cols": cols,
            "sort": "-metric:write_bw",
            "matrix": str(matrix.uuid),
        },
        "m.write_bw=5..6 (GB/s), sort -created": {"cols": cols, "m.write_bw": "5..6"},
        "p.threads=16, sort -metric:write_bw": {
            "cols": cols,
            "sort": "-metric:write_bw",
            "p.threads": "16",
        },
    }
    web = Client()
    web.force_login(user)
    for label, query in views.items():

        def page(query=query):
            spec, runs = runs_table.TableSpec.parse(query, user)
            return runs_table.fetch_page(spec, runs)

        ms, (rows, after) = timed(page, args.repeat)
        # 50 pages in: follow the "more" cursors, then time that page.
        deep = dict(query)
        for _ in range(50):
            if after is None:
                break
            deep = {**query, "after": after}
            rows, after = runs_table.fetch_page(*runs_table.TableSpec.parse(deep, user))
        deep_ms, _ = timed(
            lambda deep=deep: runs_table.fetch_page(*runs_table.TableSpec.parse(deep, user)),
            args.repeat,
        )
        page_ms, response = timed(lambda q=query: web.get("/runs/table/", q), args.repeat)
        assert response.status_code == 200, response.content[:300]
        with CaptureQueriesContext(connection) as ctx:
            web.get("/runs/table/", query)
        print(
            f"{label}: query {ms:.1f} ms, page 51 {deep_ms:.1f} ms; "
            f"whole page {page_ms:.1f} ms, {len(ctx.captured_queries)} queries"
        )
    # The export streams every run: time to the last byte and its size.
    for label in ("sort -metric:write_bw", "matrix=<one>, sort -metric:write_bw"):
        t = time.perf_counter()
        response = web.get("/runs/table/runs.csv", views[label])
        size = sum(len(chunk) for chunk in response.streaming_content)
        ms = (time.perf_counter() - t) * 1000
        print(f"CSV export, {label}: {size / 1e6:.1f} MB in {ms:.0f} ms")
    for label in args.explain:
        with CaptureQueriesContext(connection) as ctx:
            spec, runs = runs_table.TableSpec.parse(views[label], user)
            runs_table.fetch_page(spec, runs)
        with connection.cursor() as cursor:
            for q in ctx.captured_queries:
                cursor.execute("EXPLAIN ANALYZE " + q["sql"])
                print(q["sql"][:300])
                print("\n".join(row[0] for row in cursor.fetchall()))


if __name__ == "__main__":
    main()
