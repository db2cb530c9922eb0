"""Run telemetry: what the sampler costs a node, what a run's telemetry costs the database, and
how long the run page takes for a 10-minute run with 5 nodes.

    .venv/bin/python bench/telemetry.py [--seconds 60] [--procs 16] [--page-runs 15]

- sampler cost: ``runners.sampler.Sampler`` at 1 Hz for ``--seconds`` on this node in a
  child process that does nothing else, watching ``--procs`` child processes (a tool's job
  processes); CPU seconds of that process (user + system, thread wake-ups included) per
  sampled second, and the time of one reading (median of 200) for a denser figure;
- storage: the stored (zlib) size of that real document, and of a synthetic 10-minute one of
  a larger node (32 cores, 12 disks, 4 interfaces, noisy values) per node-minute, and what
  10,000 runs x 5 nodes x 10 minutes come to;
- run page: ``GET /runs/<uuid>/`` (Django test client, no network) of a run with 5 nodes of
  that synthetic kind and fio's series, 600 samples each, from PostgreSQL (the bench
  database); median of ``--page-runs``, queries and the page's size; likewise the API detail.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common  # noqa: E402
from runners.sampler import sig4  # noqa: E402

SAMPLER_CHILD = """
import json, os, resource, subprocess, sys, time
from runners.sampler import Sampler
seconds, procs = float(sys.argv[1]), int(sys.argv[2])
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
before, start = cpu(), time.monotonic()
sampler = Sampler(1.0, watch_pid=os.getpid()).start()
# The tool's processes start after the sampler (the executor starts it first).
kids = [subprocess.Popen(["sleep", str(seconds + 30)]) for _ in range(procs)]
time.sleep(seconds)
doc = sampler.stop()
used, elapsed = cpu() - before, time.monotonic() - start
probe = Sampler(1.0, watch_pid=os.getpid())
probe.sample()
times = []
for _ in range(200):
    t = time.thread_time(); probe.sample(); times.append(time.thread_time() - t)
for k in kids:
    k.kill()
times.sort()
print(json.dumps({"cpu_s": used, "elapsed_s": elapsed, "samples": len(doc["t"]),
                  "sample_ms": times[100] * 1e3, "doc": doc}))
"""


def sampler_cost(seconds: float, procs: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", SAMPLER_CHILD, str(seconds), str(procs)],
        cwd=common.ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out)


def synthetic_doc(host: str, start: datetime, n: int = 600, seed: int = 0) -> dict:
    """A 10-minute document of a storage server: 32 cores, 12 disks, 4 interfaces, with the
    noise real counters have (every value differs from the last)."""
    rnd = random.Random(seed)

    def frac(level):
        return [round(min(1.0, max(0.0, rnd.gauss(level, 0.05))), 3) for _ in range(n)]

    def rate(level):  # bytes and byte rates as the sampler keeps them (4 digits)
        return [sig4(max(0.0, rnd.gauss(level, level * 0.1))) for _ in range(n)]

    def ops(level):
        return [max(0, round(rnd.gauss(level, level * 0.1))) for _ in range(n)]

    series: dict[str, list] = {
        "cpu_busy": frac(0.4),
        "cpu_iowait": frac(0.1),
        "cpu_steal": [0.0] * n,
        "mem_used": rate(60e9),
        "page_cache": rate(120e9),
    }
    for c in range(32):
        series[f"cpu_busy:cpu{c}"] = frac(0.4)
        series[f"cpu_iowait:cpu{c}"] = frac(0.1)
        series[f"cpu_steal:cpu{c}"] = [0.0] * n
    for d in range(12):
        dev = f"nvme{d}n1"
        series[f"disk_read_iops:{dev}"] = ops(100)
        series[f"disk_read_bw:{dev}"] = rate(5e6)
        series[f"disk_write_iops:{dev}"] = ops(2000)
        series[f"disk_write_bw:{dev}"] = rate(2e9)
        series[f"disk_util:{dev}"] = frac(0.8)
        series[f"disk_queue:{dev}"] = [round(rnd.uniform(1, 32), 2) for _ in range(n)]
    for nic in ("ib0", "ib1", "eth0", "lo"):
        series[f"net_rx_bw:{nic}"] = rate(5e9)
        series[f"net_tx_bw:{nic}"] = rate(1e9)
    return {
        "format": "beeweb-telemetry/1",
        "hostname": host,
        "started_at": start.isoformat(),
        "interval_s": 1.0,
        "t": [round(i + 1 + rnd.uniform(-0.002, 0.002), 3) for i in range(n)],
        "series": series,
        "meta": {"cores": 32, "nic_speed_mbps": {"ib0": 100000, "ib1": 100000}},
    }


def page_time(runs: int) -> dict:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from experiments.models import Run, Testbed
    from experiments.results import telemetry as stored

    user, _ = get_user_model().objects.get_or_create(username="bench-telemetry")
    testbed, _ = Testbed.objects.get_or_create(
        owner=user, name="bench telemetry", defaults={"benchmark_dir": "/b"}
    )
    run = Run.objects.create(owner=user, testbed=testbed, tool="fio", status="succeeded")
    start = datetime(2026, 1, 1, 10, tzinfo=UTC)
    sizes = []
    for i in range(5):
        doc = synthetic_doc(f"node{i:02d}", start + timedelta(seconds=i * 0.3), seed=i)
        if i == 0:
            doc["tool"] = {
                "t": [float(s) for s in range(1, 601)],
                "series": {
                    "write_bw": [2_000_000_000 + s for s in range(600)],
                    "write_iops": [2000 + s for s in range(600)],
                    "write_lat": [0.0005 + s * 1e-7 for s in range(600)],
                },
            }
        sizes.append(len(stored.save(run, doc).data))
    client = Client()
    client.force_login(user)
    url = f"/runs/{run.uuid}/"
    api = f"/api/runs/{run.uuid}/"
    out = {"row_bytes": sizes}
    for name, path in (("page", url), ("api", api)):
        client.get(path)  # warm
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            response = client.get(path)
            times.append(time.perf_counter() - t)
            assert response.status_code == 200, response.status_code
        with CaptureQueriesContext(connection) as queries:
            response = client.get(path)
        out[name] = {
            "median_ms": common.median_ms(times),
            "queries": len(queries),
            "bytes": len(response.content),
        }
    run.delete()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--procs", type=int, default=16)
    parser.add_argument("--page-runs", type=int, default=15)
    args = parser.parse_args()
    print(common.machine())
    cost = sampler_cost(args.seconds, args.procs)
    per_second = cost["cpu_s"] / cost["elapsed_s"]
    print(
        f"sampler at 1 Hz, {cost['samples']} samples over {cost['elapsed_s']:.0f} s, watching "
        f"{args.procs} processes: {per_second * 1000:.2f} ms CPU per sampled second "
        f"({per_second * 100:.2f}% of one core; budget 1%); "
        f"one reading {cost['sample_ms']:.2f} ms CPU"
    )
    common.ensure_database()
    common.setup_django()
    from experiments.results.telemetry import pack

    doc = cost["doc"]
    minutes = max(doc["t"][-1], 1) / 60
    real = sum(map(len, pack(doc)))
    print(
        f"stored size, this node ({doc['meta']['cores']} cores, {len(doc['series'])} series): "
        f"{real} B for {minutes:.1f} min = {real / minutes:.0f} B per node-minute"
    )
    big = synthetic_doc("big", datetime(2026, 1, 1, tzinfo=UTC))
    packed = sum(map(len, pack(big)))
    raw = len(json.dumps({"t": big["t"], "series": big["series"]}, separators=(",", ":")))
    per_min = packed / 10
    total = per_min * 10 * 5 * 10_000
    print(
        f"stored size, synthetic 32 cores/12 disks/4 NICs, 10 min, {len(big['series'])} series: "
        f"{packed / 1e3:.0f} KB ({raw / 1e3:.0f} KB as JSON) = {per_min / 1e3:.1f} KB per "
        f"node-minute; 10,000 runs x 5 nodes x 10 min = {total / 1e9:.1f} GB"
    )
    page = page_time(args.page_runs)
    print(
        f"run page, 10-min run with 5 such nodes (rows {sum(page['row_bytes']) / 1e3:.0f} KB): "
        f"{page['page']['median_ms']:.0f} ms median, {page['page']['queries']} queries, "
        f"{page['page']['bytes'] / 1e6:.2f} MB HTML; API detail {page['api']['median_ms']:.0f} ms, "
        f"{page['api']['bytes'] / 1e6:.2f} MB"
    )


if __name__ == "__main__":
    main()
