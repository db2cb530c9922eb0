"""Exclusive use of nodes (experiments.execution.holding): what holding adds to a run, and how soon
a
waiting run starts once its nodes are free. On PostgreSQL (the bench database).

    .venv/bin/python bench/holding.py [--n 200] [--waits 20]

- overhead: ``nodes_for`` + ``try_acquire`` + ``release`` for a run of a testbed with a
  launcher, a metadata and a storage server (3 leases), median over ``--n`` acquisitions,
  with 50 other nodes held by other live runs meanwhile;
- start latency: a run waits in the executor's loop (``experiments.execution.execute._hold``,
polling
  every ``holding.POLL_SECONDS``) in a thread while another run holds its storage server;
  the time from ``release`` of the holder until the waiter holds its nodes, over
  ``--waits`` rounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common  # noqa: E402


def setup():
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from experiments.models import HardwareProfile, Node, Run, Testbed, TestbedNode

    user, _ = get_user_model().objects.get_or_create(username="bench-holding")
    stamp = time.strftime("%H%M%S")
    profile = HardwareProfile.objects.create(owner=user, name="box", architecture="x86_64")
    testbeds = []
    for i in range(2):
        tb = Testbed.objects.create(owner=user, name=f"hold {stamp} {i}", benchmark_dir="/b")
        testbeds.append(tb)
    nodes = {
        name: Node.objects.create(owner=user, hostname=f"{name}-{stamp}", profile=profile)
        for name in ("l1", "l2", "meta", "stor")
    }
    for tb, launcher in zip(testbeds, ("l1", "l2"), strict=True):
        TestbedNode.objects.create(testbed=tb, node=nodes[launcher], client=True)
        TestbedNode.objects.create(testbed=tb, node=nodes["meta"], metadata=True)
        TestbedNode.objects.create(testbed=tb, node=nodes["stor"], storage=True)

    def run(tb, launcher):
        now = timezone.now()
        return Run.objects.create(
            owner=user,
            testbed=tb,
            tool="dd",
            status=Run.Status.RUNNING,
            attempts=1,
            heartbeat_at=now,
            queued_at=now,
            worker="bench",
            launch={"workdir": "/b", "launcher": nodes[launcher].hostname},
        )

    return user, testbeds, run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--waits", type=int, default=20)
    args = parser.parse_args()
    common.ensure_database()
    common.setup_django()
    from django.db import connection
    from django.utils import timezone

    from experiments.execution import execute, holding
    from experiments.execution.attempt import Attempt
    from experiments.models import NodeLease, Run

    user, (tb1, tb2), make_run = setup()
    # 50 other nodes held by another live run: the acquire only looks at its own nodes.
    other = make_run(tb1, "l1")
    NodeLease.objects.bulk_create(
        NodeLease(
            hostname=f"busy-{i}-{other.pk}",
            run=other,
            attempt=1,
            acquired_at=timezone.now(),
        )
        for i in range(50)
    )
    run = make_run(tb1, "l1")
    samples = []
    for _ in range(args.n):
        started = time.perf_counter()
        names = holding.nodes_for(Run.objects.get(pk=run.pk))
        held, why = holding.try_acquire(run, names)
        holding.release(run)
        samples.append(time.perf_counter() - started)
        assert held, why
    print(common.machine())
    print(
        f"acquire + release ({len(names)} nodes, PostgreSQL): median "
        f"{common.median_ms(samples):.2f} ms, p90 "
        f"{sorted(samples)[int(len(samples) * 0.9)] * 1000:.2f} ms over {args.n}"
    )

    lags = []
    for _ in range(args.waits):
        holder = make_run(tb1, "l1")
        assert holding.try_acquire(holder, holding.nodes_for(holder))[0]
        waiter = make_run(tb2, "l2")
        got: list[float] = []

        def wait(waiter=waiter, got=got):
            try:
                assert execute._hold(Attempt(waiter, token="", worker="")) is None
                got.append(time.perf_counter())
            finally:
                connection.close()

        thread = threading.Thread(target=wait)
        thread.start()
        time.sleep(0.8)  # the waiter has polled at least once
        assert Run.objects.get(pk=waiter.pk).waiting_for
        freed = time.perf_counter()
        holding.release(holder)
        thread.join()
        lags.append(got[0] - freed)
        holding.release(waiter)
    print(
        f"waiting run holds its nodes after they are freed: median "
        f"{statistics.median(lags) * 1000:.0f} ms, max {max(lags) * 1000:.0f} ms over "
        f"{args.waits} (poll every {holding.POLL_SECONDS} s)"
    )
    Run.objects.filter(owner=user).delete()
    tb1.delete()
    tb2.delete()


if __name__ == "__main__":
    main()
