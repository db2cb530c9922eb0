"""Every page a user opens, at a million runs and ten thousand matrices (issue 30), in-process
against the bench database (``bench/generate.py --runs 1000000 --matrices 10000`` first),
signed in as the bench user: the dashboard, the lists (matrices, runs, runs table with each
sort and filter it offers, tuning sets, inventory, reports, changes, alerts), a matrix page
of 10,000 runs, of 10 and of about 100 and their progress fragments, a run page, the
comparison, a report, its share link (no login) and the API lists. Target: every page
<= 100 ms and <= 300 KB.

For each page: the median wall time and this process's CPU time over ``--repeat`` requests,
the response's size, its number of queries, and beside it the floor measured in the same
run: the page's own SQL statements (captured from one request) executed as plain SQL on the
same connection and fetched, with no ORM, view or template. The difference is what Django
and the page add; the floor is what the page's queries cost.

    .venv/bin/python bench/pages.py [--repeat 5] [--only SUBSTRING] [--explain]

A report and a share link of it are created for the bench user if there is none.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common  # noqa: E402
from bench.queries import timed_cpu  # noqa: E402

TARGET_MS = 100
TARGET_KB = 300
REPORT_QUERY = "metric=write_bw&x=param:threads&series=arch&tool=fio"


def run_config(run) -> str:
    """The run's configuration key (the history page of its configuration)."""
    return type(run).objects.values_list("config_key", flat=True).get(pk=run.pk)


def tuning_pair(tunings: list) -> dict:
    """The tuning diff's query for two sets (empty when there are fewer)."""
    return {"a": str(tunings[0].uuid), "b": str(tunings[1].uuid)} if len(tunings) > 1 else {}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", default="", help="only the pages whose label contains this")
    parser.add_argument("--explain", action="store_true", help="print each page's plans")
    args = parser.parse_args()
    common.setup_django()

    from django.conf import settings
    from django.db import connection
    from django.db.models import Count
    from django.test import Client
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    from experiments.models import (
        ChangePoint,
        HardwareProfile,
        Matrix,
        Node,
        Report,
        Run,
        ShareLink,
        Testbed,
        TuningSet,
    )
    from experiments.shared import keyset

    settings.ALLOWED_HOSTS = ["*"]
    user = Token.objects.get(user__username="bench").user
    web = Client()
    web.force_login(user)
    anonymous = Client()
    api = APIClient()
    api.force_authenticate(user)

    total = keyset.total(Run.objects.all())
    n_matrices = Matrix.objects.count()
    print(
        f"database {common.DB_NAME}: about {total.rounded:,} runs (planner estimate), "
        f"{n_matrices:,} matrices; {common.machine()}; load average {os.getloadavg()[0]:.1f}"
    )

    # Matrices by size: the largest, the smallest with runs, one of the typical size.
    by_name = Matrix.objects.order_by("name")
    sized = {}
    for name in ("fio sweep 00000", "fio sweep 00001", "fio sweep 05000"):
        m = by_name.filter(name=name).first()
        if m is not None:
            sized[name] = m
    if not sized:  # a database made without --matrices: matrices of 1,000 runs
        sized = {m.name: m for m in by_name[:1]}
    counts = dict(
        Run.objects.filter(matrix__in=sized.values())
        .values_list("matrix_id")
        .annotate(n=Count("id"))
        .values_list("matrix_id", "n")
    )
    run = Run.objects.filter(matrix__isnull=False).order_by("-created", "-id").only("uuid").first()
    testbed = Testbed.objects.order_by("name").first()
    tuning = TuningSet.objects.order_by("name").first()
    change = ChangePoint.objects.order_by("-at").first()

    report = Report.objects.filter(owner=user).order_by("created").first()
    if report is None:
        response = web.post(
            "/reports/new/", {"query": REPORT_QUERY, "title": "Threads by architecture"}
        )
        assert response.status_code == 302, response.content[:300]
        report = Report.objects.filter(owner=user).order_by("-created").first()
    share = ShareLink.objects.active().filter(report=report).first()
    if share is None:
        response = web.post(f"/reports/{report.uuid}/share/", {})
        assert response.status_code in (200, 302), response.content[:300]
        share = ShareLink.objects.active().filter(report=report).first()

    pages: list[tuple[str, str, str, dict]] = [
        ("/ (dashboard)", "web", "/", {}),
        ("/matrices/", "web", "/matrices/", {}),
    ]
    deep = Matrix.objects.order_by("-created", "-id").values_list("created", "id")[5000:5001]
    if deep:
        try:
            from experiments.views.matrices import MATRIX_LIST_KEY
        except ImportError:  # before the list was paged (issue 30)
            MATRIX_LIST_KEY = None
        if MATRIX_LIST_KEY is not None:
            cursor = MATRIX_LIST_KEY.encode(tuple(deep[0]))
            pages.append(("/matrices/ after the 5,000th", "web", "/matrices/", {"cursor": cursor}))
    for m in sized.values():
        n = counts.get(m.pk, 0)
        pages += [
            (f"matrix page, {n:,} runs", "web", f"/matrices/{m.uuid}/", {}),
            (f"matrix progress, {n:,} runs", "web", f"/matrices/{m.uuid}/progress/", {}),
        ]
    cols = {"cols": "param:threads,param:bs,metric:write_bw,metric:read_iops,created"}
    pages += [
        ("/runs/", "web", "/runs/", {}),
        ("/runs/table/ (newest first)", "web", "/runs/table/", {}),
        (
            "/runs/table/ sort -param:threads",
            "web",
            "/runs/table/",
            {**cols, "sort": "-param:threads"},
        ),
        (
            "/runs/table/ sort param:threads",
            "web",
            "/runs/table/",
            {**cols, "sort": "param:threads"},
        ),
        ("/runs/table/ p.threads=16", "web", "/runs/table/", {**cols, "p.threads": "16"}),
        (
            "/runs/table/ p.threads=16 sort -write_bw",
            "web",
            "/runs/table/",
            {**cols, "p.threads": "16", "sort": "-metric:write_bw"},
        ),
        ("/runs/table/ sort testbed", "web", "/runs/table/", {**cols, "sort": "testbed"}),
        ("/runs/table/ sort -testbed", "web", "/runs/table/", {**cols, "sort": "-testbed"}),
        (
            "/runs/table/ sort -write_bw",
            "web",
            "/runs/table/",
            {**cols, "sort": "-metric:write_bw"},
        ),
        (
            "/runs/table/ testbed=<one> sort -param:threads",
            "web",
            "/runs/table/",
            {**cols, "testbed": str(testbed.uuid), "sort": "-param:threads"},
        ),
        (f"/runs/<uuid>/ ({run.uuid})", "web", f"/runs/{run.uuid}/", {}),
        ("/compare/ (default)", "web", "/compare/", {}),
        ("/compare/ report's query", "web", "/compare/?" + REPORT_QUERY, {}),
        ("/reports/", "web", "/reports/", {}),
        ("/reports/<uuid>/", "web", f"/reports/{report.uuid}/", {}),
        ("/s/<key>/ (share link, no login)", "anonymous", f"/s/{share.key}/", {}),
        ("/tuning/", "web", "/tuning/", {}),
        ("/tuning/<uuid>/", "web", f"/tuning/{tuning.uuid}/", {}),
        ("/hardware/", "web", "/hardware/", {}),
        ("/nodes/", "web", "/nodes/", {}),
        ("/testbeds/", "web", "/testbeds/", {}),
        ("/testbeds/<uuid>/", "web", f"/testbeds/{testbed.uuid}/", {}),
        ("/changes/", "web", "/changes/", {}),
        ("/alerts/", "web", "/alerts/", {}),
        ("/testbeds/<uuid>/history/", "web", f"/testbeds/{testbed.uuid}/history/", {}),
    ]
    if change is not None:
        pages.append(("/changes/<uuid>/", "web", f"/changes/{change.uuid}/", {}))
    # The forms and the other pages a user opens from these.
    typical = sized.get("fio sweep 05000") or next(iter(sized.values()))
    tunings = list(TuningSet.objects.order_by("name")[:2])
    node = Node.objects.order_by("hostname").first()
    profile = HardwareProfile.objects.order_by("name").first()
    pages += [
        ("/matrices/new/", "web", "/matrices/new/", {}),
        ("/matrices/<uuid>/edit/", "web", f"/matrices/{typical.uuid}/edit/", {}),
        ("/matrices/<uuid>/export.yaml", "web", f"/matrices/{typical.uuid}/export.yaml", {}),
        ("/matrices/<uuid>/schedule/", "web", f"/matrices/{typical.uuid}/schedule/", {}),
        ("/runs/table/ matrix=<~99 runs>", "web", "/runs/table/", {"matrix": str(typical.uuid)}),
        ("/runs/<uuid>/live/", "web", f"/runs/{run.uuid}/live/", {}),
        ("/history/<config>/", "web", f"/history/{run_config(run)}/", {}),
        ("/compare/print/ report's query", "web", "/compare/print/?" + REPORT_QUERY, {}),
        ("/reports/<uuid>/print/", "web", f"/reports/{report.uuid}/print/", {}),
        ("/s/<key>/print/", "anonymous", f"/s/{share.key}/print/", {}),
        ("/alerts/subscriptions/", "web", "/alerts/subscriptions/", {}),
        ("/tuning/diff/ (two sets)", "web", "/tuning/diff/", tuning_pair(tunings)),
        ("/nodes/<uuid>/", "web", f"/nodes/{node.uuid}/", {}),
        ("/hardware/<uuid>/", "web", f"/hardware/{profile.uuid}/", {}),
        ("/testbeds/<uuid>/topology/", "web", f"/testbeds/{testbed.uuid}/topology/", {}),
        ("/runs/import/", "web", "/runs/import/", {}),
    ]
    for name in (
        "runs",
        "matrices",
        "metrics",
        "testbeds",
        "nodes",
        "hardware",
        "tuning-sets",
        "reports",
        "changes",
        "alerts",
        "subscriptions",
        "workers",
    ):
        pages.append((f"GET /api/{name}/", "api", f"/api/{name}/", {}))

    clients = {"web": web, "api": api, "anonymous": anonymous}
    over = []
    print(
        f"{'page':<48} {'median':>8} {'cpu':>8} {'KB':>7} {'queries':>7} {'floor':>8}  "
        f"[target <= {TARGET_MS} ms, <= {TARGET_KB} KB]"
    )
    for label, kind, url, query in pages:
        if args.only and args.only not in label:
            continue
        client = clients[kind]
        ms, cpu_ms, response = timed_cpu(lambda c=client, u=url, q=query: c.get(u, q), args.repeat)
        if response.status_code != 200:
            print(f"{label:<48} HTTP {response.status_code}: {response.content[:200]!r}")
            over.append(label)
            continue
        body = b"".join(response) if response.streaming else response.content
        statements = common.page_statements(client, url, query)

        selects = [s for s in statements if s.lstrip().upper().startswith(("SELECT", "WITH"))]
        floor_ms, _, _ = timed_cpu(lambda s=selects: common.run_plain(s), args.repeat)
        kb = len(body) / 1024
        flag = "" if ms <= TARGET_MS and kb <= TARGET_KB else "  OVER"
        if flag:
            over.append(label)
        print(
            f"{label:<48} {ms:>6.1f}ms {cpu_ms:>6.1f}ms {kb:>6.1f} {len(statements):>7} "
            f"{floor_ms:>6.1f}ms{flag}"
        )
        if args.explain:
            with connection.cursor() as cursor:
                for sql in selects:
                    t = time.perf_counter()
                    cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
                    plan = "\n    ".join(row[0] for row in cursor.fetchall())
                    ms = (time.perf_counter() - t) * 1000
                    print(f"  {sql[:200]}\n    [{ms:.1f} ms]\n    {plan}")
    print(
        f"{len(over)} page(s) over target: {', '.join(over)}"
        if over
        else "every page within target"
    )
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
