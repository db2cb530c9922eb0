"""Celery dispatch: 1,000 trivial runs (dd, bs=4k count=1, no cache drop) of a matrix on the
localhost testbed, through the real broker (Redis) and one real solo-pool worker on
``node.<hostname>`` running the real executor (runners/execute.py). Target: <= 60 s from
launch until every run has finished.

    .venv/bin/python bench/dispatch.py [--runs 1000] [--profile]

``--profile`` instead runs 50 of them in this process through ``runners.execute.execute``
under cProfile and prints where a run's time goes. Prints the worker's RSS after the load
(see memory.py for web + worker together).
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common  # noqa: E402


def make_matrix(runs: int):
    from django.contrib.auth import get_user_model

    from experiments.localhost import ensure_localhost_testbed
    from experiments.models import Matrix

    user, _ = get_user_model().objects.get_or_create(username="bench")
    testbed = ensure_localhost_testbed(user)
    files = 10 if runs >= 10 else 1
    matrix = Matrix.objects.create(
        owner=user,
        name=f"dispatch bench {time.strftime('%H:%M:%S')}",
        tool="dd",
        fixed_params={"bs": "4k", "count": 1},
        drop_caches=False,
        timeout_s=60,
        axes=[{"param": "file", "values": [f"dd{i}.tmp" for i in range(files)]}],
        repetitions=max(1, runs // files),
    )
    matrix.testbeds.add(testbed)
    return matrix


def profile(n: int) -> None:
    import cProfile
    import pstats
    import uuid

    from experiments.matrices import expand
    from experiments.models import Run
    from runners.execute import execute

    matrix = make_matrix(n)
    expand(matrix)
    runs = list(matrix.runs.all())
    for run in runs:
        token = uuid.uuid4()
        Run.objects.filter(pk=run.pk).update(status=Run.Status.QUEUED, dispatch_token=token)
        run.dispatch_token = token
    execute(runs[0].pk, str(runs[0].dispatch_token), "profile")  # warm
    prof = cProfile.Profile()
    started = time.perf_counter()
    prof.enable()
    for run in runs[1:]:
        execute(run.pk, str(run.dispatch_token), "profile")
    prof.disable()
    per_run = (time.perf_counter() - started) / (len(runs) - 1)
    print(f"{per_run * 1000:.1f} ms per run in the executor (under cProfile)")
    pstats.Stats(prof).sort_stats("cumulative").print_stats(35)
    matrix.delete()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    common.ensure_database()
    common.setup_django()
    if args.profile:
        profile(min(args.runs, 50))
        return

    from django.db.models import Count

    from experiments.matrices import launch
    from experiments.models import Run

    matrix = make_matrix(args.runs)
    queue = f"node.{socket.gethostname()}"
    with common.celery_worker(queue) as worker:
        time.sleep(5)  # the worker connects to Redis and starts consuming
        started = time.perf_counter()
        counts = launch(matrix)
        total = counts["queued"]
        done = 0
        deadline = started + 600
        while time.perf_counter() < deadline:
            done = matrix.runs.filter(status__in=Run.TERMINAL).count()
            if done >= total:
                break
            time.sleep(0.2)
        elapsed = time.perf_counter() - started
        rss = common.rss_kib(worker.pid) / 1024
    statuses = dict(matrix.runs.values_list("status").annotate(n=Count("id")).order_by())
    print(
        f"Celery dispatch: {done}/{total} dd runs finished in {elapsed:.1f} s "
        f"({elapsed / max(done, 1) * 1000:.0f} ms per run; statuses {statuses}) through "
        f"Redis and one solo worker on {queue} [target <= 60 s for 1,000]"
    )
    print(f"celery worker RSS after the load: {rss:.0f} MB")
    failed = matrix.runs.exclude(status=Run.Status.SUCCEEDED).first()
    if failed is not None:
        print(f"  e.g. run {failed.uuid}: {failed.status} {failed.error} {failed.parse_error}")
    matrix.delete()  # leave the generated data set as it was


if __name__ == "__main__":
    main()
