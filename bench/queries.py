"""Server-side figures at 100,000 runs, measured in-process against the bench database
(bench/generate.py first):

- comparison query: one metric, filtered to ~1% of the runs, grouped by two dimensions
  (x = param:threads, series = arch, the page's default): median time of
  ``experiments.comparison.compute`` (what the page, reports and the API run) and of
  GET /api/compare/ (also over all runs and the one-testbed 1% filter), target <= 100 ms;
- run list page (/runs/, first page, the page after the 50,000th run, one testbed): median
  time, target <= 100 ms (bench/lists.py has more lists, beside their plain SQL), and its
  query count, which must not depend on the page size;
- comparison page (HTML with its chart data inline): bytes, target <= 300 KB, over all runs
  and over the 1% filter, and its time (target: all runs <= 300 ms, a 1% filter <= 100 ms),
  with the process's CPU time (the comparison's own is the "comparison query" line's; the
  rest is rendering) and its query count.

Beside each comparison figure, the plain-SQL floor of the same selection measured in the same
run: one GROUP BY of the metric's values by the configuration and the comparison's places,
over the configuration summaries where the comparison reads them (experiments.results.summaries) and
over the raw metric rows joined to their runs (what any comparison of raw rows must at least
do). ``--raw`` measures the comparisons from the metric rows (as before the summaries).
Beside each wall time, the CPU time of this process (median; the PostgreSQL backend's is
not included) and the load average: on a shared machine the wall time follows the load.

    .venv/bin/python bench/queries.py [--repeat 15] [--raw]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common  # noqa: E402


def timed(fn, repeat: int) -> tuple[float, object]:
    ms, _, result = timed_cpu(fn, repeat)
    return ms, result


def timed_cpu(fn, repeat: int) -> tuple[float, float, object]:
    """Median wall ms, median CPU ms of this process (what the load of a shared machine
    changes least) and the last result."""
    fn()  # warm caches (and Django's URL/template loading)
    samples, cpu, result = [], [], None
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        result = fn()
        cpu.append(time.process_time() - c)
        samples.append(time.perf_counter() - t)
    return common.median_ms(samples), common.median_ms(cpu), result


def load() -> str:
    return f"load average {os.getloadavg()[0]:.1f}"


# The floors: write_bw grouped by the configuration (tool, testbed, target, tuning set,
# parameters) and the places of "x=param:threads&series=arch" (arch is a constant of the
# testbed), with the aggregates the comparison reads; {where} narrows the runs.
RAW_FLOOR = """
SELECT r.params -> 'threads', r.testbed_id, r.tool, r.target_id, r.tuning_set_id, r.params,
       COUNT(*), AVG(m.value), MIN(m.value), MAX(m.value), STDDEV_SAMP(m.value),
       PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY m.value)
FROM experiments_metric m JOIN experiments_run r ON r.id = m.run_id
WHERE m.name = 'write_bw' AND m."primary" {where}
GROUP BY 1, 2, 3, 4, 5, 6
"""
SUMMARY_FLOOR = """
SELECT r.params -> 'threads', r.testbed_id, r.tool, r.target_id, r.tuning_set_id, r.params,
       s.n, s.total, s.m2, s.min, s.max, s.median
FROM experiments_configsummary s JOIN experiments_run r ON r.id = s.run_id
WHERE s.name = 'write_bw' {where}
"""


def floor(sql: str, params: list, repeat: int) -> float:
    """Median ms of one plain SQL statement, rows fetched."""
    from django.db import connection

    def run():
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall()

    return timed(run, repeat)[0]


def floors(where: str, params: list, summarised: bool, repeat: int) -> str:
    raw = floor(RAW_FLOOR.format(where=where), params, repeat)
    text = f"floor: raw GROUP BY {raw:.0f} ms"
    if summarised:
        ms = floor(SUMMARY_FLOOR.format(where=where), params, repeat)
        text += f", summaries {ms:.1f} ms"
    return text


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument(
        "--raw", action="store_true", help="compute comparisons from the metric rows"
    )
    args = parser.parse_args()
    common.setup_django()
    if args.raw:
        from experiments.comparison import computation

        computation.summarisable = lambda spec, runs=None: False

    from django.conf import settings
    from django.db import connection, reset_queries
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    from experiments import comparison
    from experiments.comparison.computation import summarisable
    from experiments.models import Matrix, Metric, Run, Testbed

    settings.ALLOWED_HOSTS = ["*"]
    total = Run.objects.count()
    matrix = Matrix.objects.order_by("name")[len(Matrix.objects.all()) // 2]
    testbed = Testbed.objects.order_by("name").first()
    base = "metric=write_bw&x=param:threads&series=arch"
    # (label, spec query, runs, the floors' condition and its parameters)
    cases = [
        ("all runs", base, None, "", []),
        (
            "one matrix",
            base,
            Run.objects.filter(matrix__uuid=matrix.uuid),
            "AND r.matrix_id = %s",
            [matrix.pk],
        ),
        (
            "tool=ior over every testbed",
            base,
            Run.objects.filter(tool="ior"),
            "AND r.tool = %s",
            ["ior"],
        ),  # fmt: skip
        (
            "one testbed, threads=4",
            f"{base}&testbed={testbed.uuid}&f=param:threads:4",
            None,
            "AND r.testbed_id = %s AND r.params ->> 'threads' = %s",
            [testbed.pk, "4"],
        ),
    ]
    print(f"database {common.DB_NAME}: {total:,} runs, {Metric.objects.count():,} metrics")
    for label, query, runs, where, params in cases:
        spec = comparison.ComparisonSpec.from_query(query)
        share = (runs.count() if runs is not None else _count(where, params)) / total * 100
        repeat = args.repeat if share < 50 else 3
        ms, cpu, result = timed_cpu(lambda s=spec, r=runs: comparison.compute(s, r), repeat)
        told = result.errors[0][:60] + "…" if result.errors else f"{len(result.points)} points"
        summarised = summarisable(spec, runs) and not args.raw
        print(
            f"comparison query, write_bw by threads x arch, {label} ({share:.1f}% of runs, "
            f"{told}, from {'summaries' if summarised else 'metric rows'}): median {ms:.1f} ms, "
            f"CPU {cpu:.1f} ms ({load()})  [{floors(where, params, summarised, repeat)}]"
        )

    user = Token.objects.get(user__username="bench").user
    api = APIClient()
    api.force_authenticate(user)
    query = f"metric=write_bw&x=param:threads&series=arch&matrix={matrix.uuid}"
    one_testbed = f"testbed={testbed.uuid}&f=param:threads:4"
    for label, api_query in (
        ("matrix=<1%>", query),
        ("all runs", base),
        ("testbed=<1%>&f=param:threads:4", f"{base}&{one_testbed}"),
    ):
        ms, cpu, response = timed_cpu(lambda q=api_query: api.get(f"/api/compare/?{q}"), 5)
        assert response.status_code == 200, response.content[:300]
        print(
            f"GET /api/compare/?{base}&{label}: median {ms:.1f} ms, CPU {cpu:.1f} ms "
            f"({load()}), {len(response.content) / 1024:.0f} KB"
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

    for label, url, target in (
        ("all runs", "/compare/?metric=write_bw&x=param:threads&series=arch", 300),
        ("1% filter, one matrix", f"/compare/?{query}", 100),
        ("1% filter, one testbed threads=4", f"/compare/?{base}&{one_testbed}", 100),
        ("all runs, x=tool series=testbed", "/compare/?metric=write_bw&x=tool&series=testbed", 300),
    ):
        ms, cpu, response = timed_cpu(lambda url=url: web.get(url), 5)
        assert response.status_code == 200
        size = len(response.content)
        with CaptureQueriesContext(connection) as ctx:
            web.get(url)
        print(
            f"comparison page ({label}): {size / 1024:.1f} KB HTML with chart data, "
            f"median {ms:.0f} ms, CPU {cpu:.0f} ms ({load()}), {len(ctx.captured_queries)} "
            f"queries [targets <= 300 KB, <= {target} ms]"
        )


def _count(where: str, params: list) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM experiments_run r WHERE TRUE {where}", params)
        return cursor.fetchone()[0]


if __name__ == "__main__":
    main()
