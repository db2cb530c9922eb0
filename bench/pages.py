"""The pages a user opens every day at a million runs (issue 30), signed in: median time,
bytes, queries and the process's CPU time of each, and its slowest statements.

Run against a database made by ``generate.py --runs 1000000 --matrices 10000`` (the matrix
list, a matrix of 10,000 runs beside one of 10 and their progress fragments, the dashboard,
reports, tuning sets, the inventory lists, changes, alerts and a run page)::

    BENCH_DB=beeweb_1m_x .venv/bin/python bench/pages.py [--repeat 7] [--explain] [--only matrices]

Uses the Django test client in this process (no gunicorn): the figures are the view's and its
queries', without HTTP. ``--explain`` prints ``EXPLAIN (ANALYZE, BUFFERS)`` of each page's three
slowest statements.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import setup_django  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--explain", action="store_true")
    parser.add_argument("--only", default="", help="only the pages whose name contains this")
    args = parser.parse_args()
    setup_django()

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from experiments.models import Matrix, Run

    user = get_user_model().objects.get(username="bench")
    client = Client()
    client.force_login(user)

    pages: list[tuple[str, str]] = [("dashboard", "/"), ("matrices", "/matrices/")]
    deep = Matrix.objects.order_by("-created", "-id").values_list("created", "id")[5000:5001]
    if deep:
        from experiments.views.matrices import MATRIX_LIST_KEY

        cursor = MATRIX_LIST_KEY.encode(tuple(deep[0]))
        pages.append(("matrices, after the 5,000th", f"/matrices/?cursor={cursor}"))
    for name in ("fio sweep 00000", "fio sweep 00001"):
        matrix = Matrix.objects.filter(name=name).first()
        if matrix is None:
            continue
        n = matrix.runs.count()
        pages.append((f"matrix of {n:,} runs", matrix.get_absolute_url()))
        pages.append((f"its progress ({n:,} runs)", f"{matrix.get_absolute_url()}progress/"))
    pages += [
        ("reports", "/reports/"),
        ("tuning sets", "/tuning/"),
        ("hardware", "/hardware/"),
        ("nodes", "/nodes/"),
        ("testbeds", "/testbeds/"),
        ("changes", "/changes/"),
        ("alerts", "/alerts/"),
    ]
    latest = Run.objects.order_by("-created", "-id").first()
    if latest is not None:
        pages.append(("run page (newest run)", latest.get_absolute_url()))
    pages = [p for p in pages if args.only in p[0]]

    print(
        f"{'page':34} {'median ms':>9} {'cpu ms':>7} {'KB':>7} {'queries':>7}  slowest statements"
    )
    for name, url in pages:
        response = client.get(url)  # warm: caches, plans
        if response.status_code != 200:
            print(f"{name:34} HTTP {response.status_code} {url}")
            continue
        times, cpus = [], []
        for _ in range(args.repeat):
            with CaptureQueriesContext(connection) as queries:
                cpu = time.process_time()
                start = time.perf_counter()
                response = client.get(url)
                times.append((time.perf_counter() - start) * 1000)
                cpus.append((time.process_time() - cpu) * 1000)
        slowest = sorted(queries.captured_queries, key=lambda q: -float(q["time"]))[:3]
        shown = ", ".join(f"{float(q['time']) * 1000:.1f}" for q in slowest)
        print(
            f"{name:34} {statistics.median(times):9.1f} {statistics.median(cpus):7.1f} "
            f"{len(response.content) / 1024:7.1f} {len(queries.captured_queries):7d}  {shown} ms"
        )
        if args.explain:
            with connection.cursor() as cursor:
                for q in slowest:
                    print(f"  -- {float(q['time']) * 1000:.1f} ms: {q['sql'][:300]}")
                    cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {q['sql']}")
                    for (line,) in cursor.fetchall():
                        print(f"     {line}")


if __name__ == "__main__":
    main()
