"""Server-side figures at 100,000 runs, measured in-process against the bench database
(bench/generate.py first):

- comparison query: one metric, filtered to ~1% of the runs, grouped by two dimensions
  (x = param:threads, series = arch, the page's default): median time of
  ``experiments.comparison.compute`` (what the page, reports and the API run) and of
  GET /api/compare/, target <= 100 ms;
- run list page (/runs/, first page, the page after the 50,000th run, one testbed): median
  time, target <= 100 ms (bench/lists.py has more lists, beside their plain SQL), and its
  query count, which must not depend on the page size;
- comparison page (HTML with its chart data inline): bytes, target <= 300 KB, over all runs
  and over the 1% filter.

    .venv/bin/python bench/queries.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common  # noqa: E402


def timed(fn, repeat: int) -> tuple[float, object]:
    fn()  # warm caches (and Django's URL/template loading)
    samples, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - t)
    return common.median_ms(samples), result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    common.setup_django()

    from django.conf import settings
    from django.db import connection, reset_queries
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    from experiments import comparison
    from experiments.models import Matrix, Metric, Run

    settings.ALLOWED_HOSTS = ["*"]
    total = Run.objects.count()
    matrix = Matrix.objects.order_by("name")[len(Matrix.objects.all()) // 2]
    filters = {
        "one matrix": Run.objects.filter(matrix__uuid=matrix.uuid),
        "tool=ior over every testbed": Run.objects.filter(tool="ior"),
    }
    spec = comparison.ComparisonSpec.from_query("metric=write_bw&x=param:threads&series=arch")
    print(f"database {common.DB_NAME}: {total:,} runs, {Metric.objects.count():,} metrics")
    results = {}
    for label, runs in filters.items():
        share = runs.count() / total * 100
        ms, result = timed(lambda runs=runs: comparison.compute(spec, runs), args.repeat)
        rows = result.points
        results[label] = ms
        print(
            f"comparison query, write_bw by threads x arch, {label} ({share:.1f}% of runs, "
            f"{len(rows)} points): median {ms:.1f} ms  [target <= 100 ms]"
        )

    user = Token.objects.get(user__username="bench").user
    api = APIClient()
    api.force_authenticate(user)
    query = f"metric=write_bw&x=param:threads&series=arch&matrix={matrix.uuid}"
    ms, response = timed(lambda: api.get(f"/api/compare/?{query}"), args.repeat)
    assert response.status_code == 200, response.content[:300]
    print(
        f"GET /api/compare/?{query.split('&matrix')[0]}&matrix=<1%>: median {ms:.1f} ms "
        f"[target <= 100 ms]"
    )

    web = Client()
    web.force_login(user)
    from experiments.views.runs import RUN_LIST_KEY

    # 1,000 pages in: the keyset cursor of the 50,000th run, as the "older" links lead there.
    deep = Run.objects.order_by(*RUN_LIST_KEY.order_by()).only("created")[49_999]
    deep_url = f"/runs/?cursor={RUN_LIST_KEY.encode(RUN_LIST_KEY.values(deep))}"
    for url in ("/runs/", deep_url, f"/runs/?testbed={matrix.testbeds.get().uuid}"):
        ms, response = timed(lambda url=url: web.get(url), args.repeat)
        assert response.status_code == 200
        reset_queries()
        with CaptureQueriesContext(connection) as ctx:
            web.get(url)
        print(
            f"run list page {url}: median {ms:.1f} ms, {len(ctx.captured_queries)} queries "
            f"[target <= 100 ms]"
        )

    for label, url in (
        ("all runs", "/compare/?metric=write_bw&x=param:threads&series=arch"),
        ("1% filter", f"/compare/?{query}"),
        ("all runs, x=tool series=testbed", "/compare/?metric=write_bw&x=tool&series=testbed"),
    ):
        ms, response = timed(lambda url=url: web.get(url), 3)
        assert response.status_code == 200
        size = len(response.content)
        print(
            f"comparison page ({label}): {size / 1024:.1f} KB HTML with chart data, "
            f"{ms:.0f} ms [target <= 300 KB]"
        )


if __name__ == "__main__":
    main()
