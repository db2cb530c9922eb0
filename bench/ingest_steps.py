"""Where the PostgreSQL backend's CPU goes in a bulk ingest request (issue 17): the same
requests as ``bench/ingest.py --profile`` (500 runs x 7 metrics x 10 parameters, through
Django's WSGI handler, in-process, one at a time), with the backend's CPU time (/proc ticks,
summed over the requests) split by step:

- ``runs COPY`` and ``metrics COPY`` (the rows, their indexes, the immediate checks);
- ``summaries`` (``experiments.results.summaries.add``: the configuration summaries' upsert; this
  process's CPU time in it is printed too);
- ``FK checks``: the deferred foreign-key checks, fired by ``SET CONSTRAINTS ALL IMMEDIATE``
  just before the commit (they would otherwise run inside the COMMIT);
- ``commit`` (the WAL flush), and ``other statements`` (token, lookups, existing keys, ids).

    .venv/bin/python bench/ingest_steps.py [--requests 40] [--batch 500]

The ingested runs are deleted afterwards (``bench/ingest.py``'s cleanup). Ticks are 10 ms:
use enough requests (40 give ±0.3 ms per request per step from the rounding).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common  # noqa: E402
from bench.ingest import _ticks, cleanup, payloads, wsgi_post  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args()
    common.ensure_database()
    token = common.bench_token()
    common.setup_django()

    import psycopg
    from django.core.handlers.wsgi import WSGIHandler
    from django.db import connection

    from experiments.results import ingest, summaries

    tag = str(int(time.time()))
    bodies = payloads((args.requests + 1) * args.batch, args.batch, "cluster-00", "tuning-00", tag)
    spent: dict[str, float] = defaultdict(float)
    backend = [0]
    measuring = [False]
    depth = [0]
    by_statement: dict[str, float] = defaultdict(float)

    @contextlib.contextmanager
    def step(name: str):
        if not measuring[0] or depth[0]:  # nested: counted by the outer step
            yield
            return
        depth[0] += 1
        before = _ticks(backend[0])
        try:
            yield
        finally:
            spent[name] += _ticks(backend[0]) - before
            depth[0] -= 1

    original_copy = psycopg.Cursor.copy

    @contextlib.contextmanager
    def timed_copy(self, statement, *a, **k):
        table = "runs COPY" if "experiments_run" in str(statement) else "metrics COPY"
        with step(table), original_copy(self, statement, *a, **k) as copy:
            yield copy

    psycopg.Cursor.copy = timed_copy

    original_add = summaries.add

    python = [0.0]  # this process's CPU time in summaries.add

    def timed_add(*a, **k):
        with step("summaries"):
            cpu = time.process_time()
            original_add(*a, **k)
            if measuring[0]:
                python[0] += time.process_time() - cpu
        with step("FK checks"), connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")

    summaries.add = timed_add
    ingest.summaries = summaries

    def statements(execute, sql, params, many, context):
        before = spent["other statements"]
        try:
            with step("other statements"):
                return execute(sql, params, many, context)
        finally:
            if measuring[0]:
                by_statement[" ".join(sql.split())[:90]] += spent["other statements"] - before

    handler = WSGIHandler()

    def post(body: bytes) -> None:
        wsgi_post(handler, body, token)

    try:
        post(bodies[0])  # warm
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backend[0] = cursor.fetchone()[0]
        original_commit = connection._commit

        def timed_commit():
            with step("commit"):
                return original_commit()

        connection._commit = timed_commit
        measuring[0] = True
        total = _ticks(backend[0])
        with connection.execute_wrapper(statements):
            for body in bodies[1:]:
                post(body)
        total = _ticks(backend[0]) - total
        measuring[0] = False
    finally:
        psycopg.Cursor.copy = original_copy
        summaries.add = original_add
        cleanup()
    n = args.requests
    print(
        f"PostgreSQL backend CPU per request of {args.batch} runs ({n} requests, "
        f"load average {os.getloadavg()[0]:.1f}):"
    )
    for name in ("runs COPY", "metrics COPY", "summaries", "FK checks", "commit"):
        print(f"  {name:18} {spent[name] / n * 1000:6.1f} ms")
    print(f"  {'other statements':18} {spent['other statements'] / n * 1000:6.1f} ms")
    for sql, seconds in sorted(by_statement.items(), key=lambda kv: -kv[1])[:6]:
        print(f"    {seconds / n * 1000:6.1f} ms  {sql}")
    print(f"  {'total':18} {total / n * 1000:6.1f} ms")
    print(f"Python CPU in summaries.add per request: {python[0] / n * 1000:.1f} ms")


if __name__ == "__main__":
    main()
