"""Bulk ingest rate through the real HTTP API: gunicorn serving beeweb on the bench database,
4 client threads POSTing JSON batches of completed runs (7 metrics and 10 parameters each) to
/api/runs/bulk/ with a token. Target: >= 10,000 runs/s (issue 17).

    .venv/bin/python bench/ingest.py [--runs 40000] [--batch 500] [--threads 4] [--workers 3]
    .venv/bin/python bench/ingest.py --profile [--requests 20] [--without-summaries]

gunicorn runs as production runs it (docker/compose.yaml and docker/Dockerfile: 3 sync
workers). With 2 workers (as scripts/run-local.sh, on a laptop) at most two requests are in
progress for the 4 clients: while a worker runs Python its PostgreSQL backend waits and the
other way round, so the 2 cores idle at every round trip, and on a shared machine the 2
workers' pairs get a smaller share of the cores than the floor's 4 connections (issue 30:
1,498-1,781 runs/s with 2 workers, 2,093-2,319 with 3, at load 4-7).

Request bodies are encoded before the clock starts, so the figure is the server's. The
ingested runs are deleted afterwards (they carry client keys "bench-ingest-…"), leaving the
generated runs in place. Also prints the RSS of gunicorn after the load (see memory.py).

The machine's 2 cores are often shared (other test suites, other benches), which the
wall-clock rate shows directly. So the script also prints the CPU time one request cost,
in gunicorn's workers and in their PostgreSQL backends (from /proc, before and after the
load), and the rate those would allow on 2 otherwise idle cores: 2 x 1 s / CPU per request
x runs per request. Contention inflates CPU time too, but far less than the wall clock.

``--profile`` sends the same requests in-process, through Django's WSGI handler (middleware,
token authentication, the parsers and the view, as gunicorn calls it), one at a time: CPU time
per request of this process and of its PostgreSQL backend, and the queries, then cProfile's
breakdown of a few more. ``--without-summaries`` leaves out ``experiments.results.summaries.add``
(the
configuration summaries of the batch) to measure the rest apart; the bench database's
summaries are then stale for the ingested runs' configurations until they are deleted.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common  # noqa: E402

METRICS = [
    ("write_bw", "value"),
    ("read_bw", "value"),
    ("write_iops", "value"),
    ("read_iops", "value"),
    ("write_lat", "mean"),
    ("read_lat", "mean"),
    ("elapsed", "value"),
]


def payloads(runs: int, batch: int, testbed: str, tuning: str, tag: str) -> list[bytes]:
    rng = random.Random(1)
    bodies = []
    for start in range(0, runs, batch):
        items = []
        for i in range(start, min(runs, start + batch)):
            items.append(
                {
                    "key": f"bench-ingest-{tag}-{i}",
                    "testbed": testbed,
                    "tuning_set": tuning,
                    "tool": "fio",
                    "label": f"pushed {i}",
                    "params": {
                        "threads": 2 ** (i % 7),
                        "nodes": 1 + i % 4,
                        "tasks_per_node": 4,
                        "transfer_size": 1 << 20,
                        "block_size": 1 << 30,
                        "file_size": 4 << 30,
                        "iodepth": 16,
                        "direct": True,
                        "rw": "write",
                        "ioengine": "libaio",
                    },
                    "metrics": [
                        {"name": n, "value": rng.uniform(1, 1e9), "stat": s} for n, s in METRICS
                    ],
                }
            )
        bodies.append(json.dumps(items).encode())
    return bodies


def cpu_seconds(pids) -> float:
    """User + system CPU time of processes (those that exited count as 0)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / tick


def process_tree(pid: int) -> list[int]:
    pids, out = [pid], []
    while pids:
        current = pids.pop()
        out.append(current)
        try:
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        pids.extend(int(c) for c in children)
    return out


def backends() -> list[int]:
    """PostgreSQL backends serving the bench database (gunicorn's, once it has served)."""
    import psycopg

    with psycopg.connect(common.database_url(), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [common.DB_NAME],
        ).fetchall()
    return [pid for (pid,) in rows]


def _ticks(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wsgi_post(handler, body: bytes, token: str) -> bytes:
    """POST ``body`` to /api/runs/bulk/ through Django's WSGI ``handler`` in this process,
    as gunicorn calls it (middleware, token authentication, the view); the answer's body,
    or exit on any status but 200."""
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/api/runs/bulk/",
        "SCRIPT_NAME": "",
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "HTTP_HOST": "127.0.0.1",
        "HTTP_AUTHORIZATION": f"Token {token}",
        "wsgi.input": io.BytesIO(body),
        "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "wsgi.version": (1, 0),
    }
    status = []
    answer = b"".join(handler(environ, lambda s, h, exc_info=None: status.append(s)))
    if not status[0].startswith("200"):
        raise SystemExit(f"{status[0]}: {answer[:500]!r}")
    return answer


def profile(bodies: list[bytes], token: str, batch: int, without_summaries: bool) -> None:
    """CPU per request in this process and its PostgreSQL backend, queries per request, then
    cProfile of a few more requests (see the module's docstring)."""
    import cProfile
    import pstats

    common.setup_django()
    from django.core.handlers.wsgi import WSGIHandler
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from experiments.results import summaries

    if without_summaries:
        summaries.add = lambda *args, **kwargs: None
    handler = WSGIHandler()

    def post(body: bytes) -> dict:
        answer = wsgi_post(handler, body, token)
        data = json.loads(answer)
        if data["invalid"] or not data["created"]:
            raise SystemExit(f"not created: {data['results'][:2]}")
        return data

    post(bodies[0])  # warm: imports, the connection, caches
    half = max(1, (len(bodies) - 1) // 2)
    timed, profiled = bodies[1 : 1 + half], bodies[1 + half :]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    with CaptureQueriesContext(connection) as captured:
        before = time.process_time(), _ticks(backend)
        wall = time.perf_counter()
        for body in timed:
            post(body)
        wall = time.perf_counter() - wall
        web, db = time.process_time() - before[0], _ticks(backend) - before[1]
    n = len(timed)
    per_request = (web + db) / n
    print(
        f"in-process, {n} requests of {batch} runs"
        f"{' without summaries' if without_summaries else ''}:"
        f" CPU per request {web / n * 1000:.0f} ms Python + {db / n * 1000:.0f} ms PostgreSQL"
        f" backend = {per_request * 1000:.0f} ms ({per_request / batch * 1e6:.0f} us per run;"
        f" on 2 idle cores: {2 / per_request * batch:,.0f} runs/s);"
        f" {len(captured.captured_queries) / n:.1f} queries per request;"
        f" wall {wall / n * 1000:.0f} ms per request, load average {os.getloadavg()[0]:.1f}"
    )
    if profiled:
        prof = cProfile.Profile(time.process_time)  # CPU time: waits for PostgreSQL left out
        prof.enable()
        for body in profiled:
            post(body)
        prof.disable()
        out = io.StringIO()
        stats = pstats.Stats(prof, stream=out)
        stats.sort_stats("cumulative").print_stats(40)
        stats.sort_stats("tottime").print_stats(30)
        print(f"cProfile (CPU time of this process) of {len(profiled)} requests:")
        print(out.getvalue())


def cleanup() -> None:
    """Delete the ingested runs, then VACUUM their tables so that the next run inserts into
    reusable pages. The configuration summaries of the deleted runs' configurations are
    recomputed from the runs left, so the database's summaries stay exact for the other
    benches. (The metric indexes on (name, value) take random inserts; each run of
    this script leaves them larger (31 MB after generate.py's 100,000 runs, 172 MB after ten
    runs), and inserts get dearer with them: REINDEX the tables, or generate again, before
    comparing figures.)"""
    common.setup_django()
    from django.db import connection, transaction

    from experiments.models import ConfigSummary, Metric, Run
    from experiments.results import summaries

    ingested = Run.objects.filter(client_key__startswith="bench-ingest-")
    with transaction.atomic():
        keys = set(ingested.values_list("config_key", flat=True).distinct())
        Metric.objects.filter(run__in=ingested.values("id"))._raw_delete(Metric.objects.db)
        ingested._raw_delete(Run.objects.db)
        summaries.refresh(keys=keys)
    with connection.cursor() as cursor:
        # The summaries too: each request of the run updated its configurations' rows and
        # the recomputation above replaced them (dead rows the next run's upserts read).
        for model in (Run, Metric, ConfigSummary):
            cursor.execute(f"VACUUM {connection.ops.quote_name(model._meta.db_table)}")


def copy_floor(tag: str, batch: int, threads: int) -> None:
    """The floor beside the figure, in the same run: PostgreSQL's own COPY of the very rows
    the requests stored (their runs and metrics copied out, deleted, and copied in again by
    plain psycopg on ``threads`` connections, ``batch`` runs per transaction, through the
    same indexes and constraints; no validation, no summaries, no HTTP)."""
    import psycopg

    url = common.database_url()
    with psycopg.connect(url, autocommit=True) as conn:

        def columns(table: str, first: str) -> list[str]:
            names = [
                name
                for (name,) in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                    "ORDER BY ordinal_position",
                    [table],
                )
            ]
            return [f'"{n}"' for n in [first] + [n for n in names if n != first]]

        def copy_out(sql: str, params: list) -> list[bytes]:
            out = bytearray()
            with conn.cursor() as cursor, cursor.copy(sql, params) as copy:
                for chunk in copy:
                    out += chunk
            return bytes(out).splitlines(keepends=True)

        run_cols = columns("experiments_run", "id")
        metric_cols = columns("experiments_metric", "run_id")
        keys = [f"bench-ingest-{tag}-%"]
        where = "client_key LIKE %s"
        run_lines = copy_out(
            f"COPY (SELECT {', '.join(run_cols)} FROM experiments_run WHERE {where} "
            "ORDER BY id) TO STDOUT",
            keys,
        )
        metric_lines = copy_out(
            f"COPY (SELECT {', '.join('m.' + c for c in metric_cols)} FROM experiments_metric m "
            f"JOIN experiments_run r ON r.id = m.run_id WHERE r.{where} ORDER BY m.id) TO STDOUT",
            keys,
        )
        by_run: dict[bytes, list[bytes]] = {}
        for line in metric_lines:
            by_run.setdefault(line.split(b"\t", 1)[0], []).append(line)
        batches = []
        for start in range(0, len(run_lines), batch):
            runs = run_lines[start : start + batch]
            metrics = [m for r in runs for m in by_run.get(r.split(b"\t", 1)[0], [])]
            batches.append((b"".join(runs), b"".join(metrics)))
        with conn.transaction():
            conn.execute(
                "DELETE FROM experiments_metric WHERE run_id IN "
                f"(SELECT id FROM experiments_run WHERE {where})",
                keys,
            )
            conn.execute(f"DELETE FROM experiments_run WHERE {where}", keys)
        conn.execute("VACUUM experiments_run")
        conn.execute("VACUUM experiments_metric")

    queue = list(batches)
    lock = threading.Lock()
    errors: list[str] = []
    sessions = [psycopg.connect(url) for _ in range(threads)]
    pids = [s.info.backend_pid for s in sessions]

    def load(session) -> None:
        while True:
            with lock:
                if not queue or errors:
                    return
                runs, metrics = queue.pop()
            try:
                with session.transaction(), session.cursor() as cursor:
                    with cursor.copy(
                        f"COPY experiments_run ({', '.join(run_cols)}) FROM STDIN"
                    ) as copy:
                        copy.write(runs)
                    with cursor.copy(
                        f"COPY experiments_metric ({', '.join(metric_cols)}) FROM STDIN"
                    ) as copy:
                        copy.write(metrics)
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(str(exc))
                return

    cpu_before = cpu_seconds(pids)
    started = time.perf_counter()
    workers = [threading.Thread(target=load, args=(s,)) for s in sessions]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - started
    cpu = cpu_seconds(pids) - cpu_before
    for s in sessions:
        s.close()
    if errors:
        raise SystemExit(f"COPY floor failed: {errors[0]}")
    n = len(run_lines)
    print(
        f"  floor: PostgreSQL's own COPY of the same {n:,} runs and {len(metric_lines):,} "
        f"metrics ({threads} connections, {batch} runs per transaction, same indexes and "
        f"constraints, no summaries): {n / elapsed:,.0f} runs/s; CPU "
        f"{cpu / (n / batch) * 1000:.0f} ms per {batch} runs"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=40_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--workers", type=int, default=3, help="as docker/ runs gunicorn")
    parser.add_argument("--profile", action="store_true", help="in-process CPU and cProfile")
    parser.add_argument("--requests", type=int, default=20, help="with --profile")
    parser.add_argument("--without-summaries", action="store_true", help="with --profile")
    args = parser.parse_args()
    common.ensure_database()
    token = common.bench_token()
    tag = str(int(time.time()))
    if args.profile:
        bodies = payloads(args.requests * args.batch, args.batch, "cluster-00", "tuning-00", tag)
        try:
            profile(bodies, token, args.batch, args.without_summaries)
        finally:
            cleanup()
        return
    bodies = payloads(args.runs, args.batch, "cluster-00", "tuning-00", tag)
    print(
        f"{len(bodies)} requests of {args.batch} runs, "
        f"{sum(map(len, bodies)) / len(bodies) / 1024:.0f} KiB each"
    )

    with common.gunicorn(workers=args.workers) as (url, proc):
        queue = list(enumerate(bodies))
        lock = threading.Lock()
        created = [0]
        errors: list[str] = []

        def client():
            while True:
                with lock:
                    if not queue or errors:
                        return
                    _, body = queue.pop()
                request = urllib.request.Request(
                    f"{url}/api/runs/bulk/",
                    data=body,
                    method="POST",
                    headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
                )
                try:
                    with urllib.request.urlopen(request, timeout=300) as answer:
                        data = json.loads(answer.read())
                except Exception as exc:  # noqa: BLE001 - reported below
                    errors.append(str(exc))
                    return
                with lock:
                    created[0] += data["created"]
                    if data["invalid"]:
                        errors.append(f"invalid items: {data['results'][:2]}")

        # Warm-up, not measured: two full requests per worker (imports, connections, and the
        # index pages the load writes into, which the floor finds hot: it runs after the
        # load, on the rows the load stored). With one small request per worker the first
        # run of an hour measured cold pages against a warm floor: 0.70 of it, then 0.82-0.86
        # (issue 30).
        warm = payloads(
            2 * args.workers * args.batch, args.batch, "cluster-00", "tuning-00", tag + "w"
        )
        for body in warm:
            urllib.request.urlopen(
                urllib.request.Request(
                    f"{url}/api/runs/bulk/",
                    data=body,
                    method="POST",
                    headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
                ),
                timeout=60,
            ).read()
        servers, databases = process_tree(proc.pid), backends()
        cpu_before = cpu_seconds(servers), cpu_seconds(databases)
        client_before = time.process_time()
        started = time.perf_counter()
        threads = [threading.Thread(target=client) for _ in range(args.threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - started
        cpu_client = time.process_time() - client_before
        cpu_web = cpu_seconds(servers) - cpu_before[0]
        # A worker that served no warm-up request connected during the load: all its CPU.
        cpu_db = cpu_seconds(set(databases) | set(backends())) - cpu_before[1]
        rss = common.rss_kib(proc.pid) / 1024
    if errors:
        raise SystemExit(f"ingest failed: {errors[0]}")
    rate = created[0] / elapsed
    print(
        f"bulk ingest over HTTP: {created[0]:,} runs ({created[0] * len(METRICS):,} metrics)"
        f" in {elapsed:.1f} s = {rate:,.0f} runs/s with {args.threads} client threads, "
        f"gunicorn {args.workers} workers [target >= 10,000 runs/s]"
    )
    requests = created[0] / args.batch
    per_request = (cpu_web + cpu_db) / requests
    print(
        f"CPU per request of {args.batch} runs: gunicorn {cpu_web / requests * 1000:.0f} ms + "
        f"PostgreSQL {cpu_db / requests * 1000:.0f} ms = {per_request * 1000:.0f} ms; "
        f"on 2 idle cores: {2 / per_request * args.batch:,.0f} runs/s; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"CPU per request of this script's client threads (HTTP, the answer's JSON): "
        f"{cpu_client / requests * 1000:.1f} ms"
    )
    print(f"gunicorn RSS after the load: {rss:.0f} MB (master + {args.workers} workers)")
    copy_floor(tag, args.batch, args.threads)
    cleanup()


if __name__ == "__main__":
    main()
