"""Lists of runs at a million runs (issue 17), in-process against the bench database
(``bench/generate.py --runs 1000000`` first): the run list page (/runs/) and the API lists of
runs and metrics, first page and deep in the list (the page after the 50,000th row, whose
cursor is made from that row), unfiltered and filtered by a testbed or a tool. Target: every
page <= 100 ms.

Beside each figure, its floor measured in the same run: the page's own SQL statements
(captured from one request) executed as plain SQL on the same connection and fetched, with
no ORM, serializer or template; the difference is what Django and the page add.

    .venv/bin/python bench/lists.py [--repeat 15] [--explain]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common  # noqa: E402
from bench.queries import timed  # noqa: E402

DEEP = 50_000  # rows before the deep page


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--explain", action="store_true", help="print each page's plans")
    args = parser.parse_args()
    common.setup_django()

    from django.conf import settings
    from django.db import connection
    from django.test import Client
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    from experiments.models import Matrix, Metric, Run, Testbed
    from experiments.shared import keyset

    settings.ALLOWED_HOSTS = ["*"]
    user = Token.objects.get(user__username="bench").user
    testbed = Testbed.objects.get(uuid=Matrix.objects.order_by("name")[0].testbeds.get().uuid)
    total = keyset.total(Run.objects.all())
    print(
        f"database {common.DB_NAME}: about {total.rounded:,} runs (planner estimate), "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    newest = keyset.Key.of(("-created", "-id"))
    by_id = keyset.Key.of(("id",))

    def deep_cursor(runs, key, n: int = DEEP) -> str:
        """The cursor of the page after the ``n``-th row (as a client gets it, page by
        page, without walking there)."""
        row = runs.order_by(*key.order_by()).only(*key.fields)[n - 1]
        return key.encode(key.values(row))

    tool_runs = Run.objects.filter(tool="ior")
    testbed_runs = Run.objects.filter(testbed=testbed)
    pages = {
        "/runs/ first page": ("web", "/runs/", {}),
        f"/runs/ after {DEEP:,} runs": (
            "web",
            "/runs/",
            {"cursor": deep_cursor(Run.objects.all(), newest)},
        ),
        "/runs/?testbed=<one> first page": ("web", "/runs/", {"testbed": str(testbed.uuid)}),
        f"/runs/?testbed=<one> after {DEEP:,} runs": (
            "web",
            "/runs/",
            {"testbed": str(testbed.uuid), "cursor": deep_cursor(testbed_runs, newest)},
        ),
        "/runs/?tool=ior first page": ("web", "/runs/", {"tool": "ior"}),
        "GET /api/runs/ first page": ("api", "/api/runs/", {}),
        f"GET /api/runs/ after {DEEP:,} runs": (
            "api",
            "/api/runs/",
            {"cursor": deep_cursor(Run.objects.all(), newest)},
        ),
        "GET /api/runs/?tool=ior, half-way": (
            "api",
            "/api/runs/",
            {"tool": "ior", "cursor": deep_cursor(tool_runs, newest, tool_runs.count() // 2)},
        ),
        f"GET /api/metrics/ after {DEEP:,} metrics": (
            "api",
            "/api/metrics/",
            {"cursor": deep_cursor(Metric.objects.all(), by_id)},
        ),
    }
    web = Client()
    web.force_login(user)
    api = APIClient()
    api.force_authenticate(user)
    clients = {"web": web, "api": api}
    for label, (kind, url, query) in pages.items():
        client = clients[kind]
        ms, response = timed(lambda c=client, u=url, q=query: c.get(u, q), args.repeat)
        assert response.status_code == 200, (label, response.content[:300])
        statements = common.page_statements(client, url, query)

        floor_ms, _ = timed(lambda s=statements: common.run_plain(s), args.repeat)
        print(
            f"{label}: median {ms:.1f} ms, {len(statements)} queries; "
            f"plain SQL of those queries {floor_ms:.1f} ms [target <= 100 ms]"
        )
        if args.explain:
            with connection.cursor() as cursor:
                for sql in statements:
                    if not sql.lstrip().upper().startswith("SELECT"):
                        continue
                    t = time.perf_counter()
                    cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
                    plan = "\n    ".join(row[0] for row in cursor.fetchall())
                    ms = (time.perf_counter() - t) * 1000
                    print(f"  {sql[:160]}\n    [{ms:.1f} ms]\n    {plan}")


if __name__ == "__main__":
    main()
