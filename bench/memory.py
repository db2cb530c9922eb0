"""Memory of web plus worker after load: gunicorn (master + 2 workers) and one Celery worker
(solo pool) on the bench database, after bulk-ingesting 10,000 runs over HTTP, loading the
run list, the comparison page and API lists over all 100,000 runs, and running 200 dd runs
through the worker. Target: <= 400 MB RSS together.

    .venv/bin/python bench/memory.py
"""

from __future__ import annotations

import socket
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common  # noqa: E402
from bench.ingest import payloads  # noqa: E402


def main() -> None:
    common.ensure_database()
    token = common.bench_token()
    common.setup_django()
    from bench.dispatch import make_matrix
    from experiments.matrices.expansion import launch
    from experiments.models import Metric, Run

    headers = {"Authorization": f"Token {token}"}
    queue = f"node.{socket.gethostname()}"
    with common.gunicorn(workers=2) as (url, web), common.celery_worker(queue) as worker:
        time.sleep(3)
        matrix = make_matrix(200)
        launch(matrix)
        for body in payloads(10_000, 500, "cluster-00", "tuning-00", f"mem{time.time():.0f}"):
            urllib.request.urlopen(
                urllib.request.Request(
                    f"{url}/api/runs/bulk/",
                    data=body,
                    method="POST",
                    headers={**headers, "Content-Type": "application/json"},
                ),
                timeout=300,
            ).read()
        paths = [
            "/api/runs/?page_size=500",
            "/api/metrics/?page_size=500",
            "/api/testbeds/",
            "/api/compare/?metric=write_bw&x=param:threads&series=arch",
            "/api/compare/?metric=write_bw&x=tool&series=testbed",
        ]
        for _ in range(5):
            for path in paths:
                urllib.request.urlopen(
                    urllib.request.Request(f"{url}{path}", headers=headers), timeout=300
                ).read()
        deadline = time.monotonic() + 300
        while matrix.runs.exclude(status__in=Run.TERMINAL).exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        web_mb = common.rss_kib(web.pid) / 1024
        worker_mb = common.rss_kib(worker.pid) / 1024
    total = web_mb + worker_mb
    print(
        f"memory after load: gunicorn (master + 2 workers) {web_mb:.0f} MB + celery worker "
        f"{worker_mb:.0f} MB = {total:.0f} MB RSS [target <= 400 MB]"
    )
    matrix.delete()
    ids = Run.objects.filter(client_key__startswith="bench-ingest-").values("id")
    Metric.objects.filter(run__in=ids)._raw_delete(Metric.objects.db)
    Run.objects.filter(client_key__startswith="bench-ingest-")._raw_delete(Run.objects.db)


if __name__ == "__main__":
    main()
